// Double-entry underneath the FinanceKit view (docs/finance-store.md §5.7): every business event is a
// balanced posting; the FinanceKit transaction is the leg on an exposed (asset/liability) account,
// with the indicator opposite to that leg's general-ledger side.

/// General-ledger account classes; only assets and liabilities are exposed to FinanceKit clients.
public enum LedgerAccountClass: String, Sendable, CaseIterable {
    /// Debit-normal, exposed as FinanceKit `asset` when `exposed`.
    case asset
    /// Credit-normal, exposed as FinanceKit `liability` when `exposed`.
    case liability
    /// Credit-normal, internal (sales).
    case income
    /// Debit-normal, internal (fees, chargebacks, refunds given).
    case expense
    /// Credit-normal, internal (manual adjustments).
    case equity
}

/// A general-ledger side.
public enum LedgerSide: String, Sendable, CaseIterable {
    /// Left side: increases assets and expenses.
    case debit
    /// Right side: increases liabilities, income and equity.
    case credit
}

/// One general-ledger account, named by a stable key such as `psp:adyen:EUR`.
public struct LedgerAccount: Hashable, Sendable {
    /// Stable key; the FinanceKit account id is derived from it.
    public let key: String
    /// Its class.
    public let ledgerClass: LedgerAccountClass
    /// ISO 4217 code of every amount on it.
    public let currencyCode: String
    /// True when clients see it as a FinanceKit account (assets and liabilities only).
    public let exposed: Bool
    /// Name for the FinanceKit view.
    public let displayName: String
    /// Holder for the FinanceKit view.
    public let institutionName: String

    /// Creates a ledger account; only assets and liabilities may be exposed.
    public init(key: String, ledgerClass: LedgerAccountClass, currencyCode: String, exposed: Bool,
                displayName: String, institutionName: String) {
        precondition(!exposed || ledgerClass == .asset || ledgerClass == .liability,
                     "only asset and liability accounts are FinanceKit accounts")
        self.key = key
        self.ledgerClass = ledgerClass
        self.currencyCode = currencyCode
        self.exposed = exposed
        self.displayName = displayName
        self.institutionName = institutionName
    }

    /// The FinanceKit kind of an exposed account.
    public var accountKind: AccountKind? {
        guard exposed else { return nil }
        return ledgerClass == .liability ? .liability : .asset
    }

    /// The FinanceKit account view, or nil for internal accounts.
    public func financeAccount(identity: FinanceIdentity, openingDate: FinanceTimestamp?) -> Account? {
        guard let kind = accountKind else { return nil }
        return Account(id: identity.id("account", key), kind: kind, displayName: displayName,
                       institutionName: institutionName, currencyCode: currencyCode, openingDate: openingDate)
    }
}

/// One leg of a posting.
public struct LedgerEntry: Hashable, Sendable {
    /// The account moved.
    public let account: LedgerAccount
    /// Debit or credit.
    public let side: LedgerSide
    /// Positive amount in the account's minor units.
    public let amountMinor: Int64

    /// Creates a leg.
    public init(account: LedgerAccount, side: LedgerSide, amountMinor: Int64) {
        self.account = account
        self.side = side
        self.amountMinor = amountMinor
    }
}

/// The FinanceKit indicator of a leg: always the opposite of its general-ledger side (§0, Apple's
/// definitions: a GL debit on an asset is an increase = `credit`; a GL credit on a liability is an
/// increase = `debit`).
public func creditDebitIndicator(forLedgerSide side: LedgerSide) -> CreditDebitIndicator {
    side == .debit ? .credit : .debit
}

/// A balanced double-entry posting for one business event, plus the FinanceKit fields of its view.
public struct Posting: Hashable, Sendable {
    /// Deterministic key from the event ("payment:pay_1"): applying the event twice finds this key.
    public let key: String
    /// The legs; Σ debits = Σ credits per currency.
    public let entries: [LedgerEntry]
    /// FinanceKit type of the view.
    public let transactionType: TransactionType
    /// When the event happened.
    public let transactionDate: FinanceTimestamp
    /// Lifecycle status; changes are updates of the same transaction ids.
    public private(set) var status: TransactionStatus
    /// When it was booked; nil until then.
    public private(set) var postedDate: FinanceTimestamp?
    /// Human label.
    public let transactionDescription: String
    /// Raw source text.
    public let originalTransactionDescription: String

    /// Creates a posting, refusing it unless balanced (`unbalanced_posting`).
    public init(key: String, entries: [LedgerEntry], transactionType: TransactionType,
                transactionDate: FinanceTimestamp, status: TransactionStatus, postedDate: FinanceTimestamp? = nil,
                transactionDescription: String, originalTransactionDescription: String) throws(FinanceError) {
        try Posting.checkBalanced(entries)
        self.key = key
        self.entries = entries
        self.transactionType = transactionType
        self.transactionDate = transactionDate
        self.status = status
        self.postedDate = status == .booked ? (postedDate ?? transactionDate) : postedDate
        self.transactionDescription = transactionDescription
        self.originalTransactionDescription = originalTransactionDescription
    }

    /// The double-entry invariant: at least two legs, every leg positive, each exposed account at most
    /// once (one FinanceKit transaction per account), and Σ debits = Σ credits in every currency.
    public static func checkBalanced(_ entries: [LedgerEntry]) throws(FinanceError) {
        guard entries.count >= 2 else { throw FinanceError(.unbalancedPosting, detail: "fewer than two legs") }
        var netByCurrency: [String: Int64] = [:]
        var exposedKeys: Set<String> = []
        for entry in entries {
            guard entry.amountMinor > 0 else { throw FinanceError(.unbalancedPosting, detail: "non-positive leg") }
            if entry.account.exposed {
                guard exposedKeys.insert(entry.account.key).inserted else {
                    throw FinanceError(.unbalancedPosting, detail: "exposed account twice")
                }
            }
            let signed = entry.side == .debit ? entry.amountMinor : -entry.amountMinor
            let (sum, overflow) = netByCurrency[entry.account.currencyCode, default: 0].addingReportingOverflow(signed)
            guard !overflow else { throw FinanceError(.amountOverflow, detail: entry.account.currencyCode) }
            netByCurrency[entry.account.currencyCode] = sum
        }
        for (currency, net) in netByCurrency.sorted(by: { $0.key < $1.key }) where net != 0 {
            throw FinanceError(.unbalancedPosting, detail: "\(currency) debits minus credits = \(net)")
        }
    }

    /// The posting after a status change, or nil when it already has that status (idempotent replay).
    ///
    /// FinanceKit documents no state machine; bank practice (§1.3): authorized → pending → booked,
    /// authorized/pending → rejected. Booked and rejected are final.
    public func transitioned(to newStatus: TransactionStatus, at time: FinanceTimestamp) throws(FinanceError) -> Posting? {
        if newStatus == status { return nil }
        let allowed: Bool = switch (status, newStatus) {
        case (.authorized, .pending), (.authorized, .booked), (.authorized, .rejected),
             (.pending, .booked), (.pending, .rejected): true
        default: false
        }
        guard allowed else {
            throw FinanceError(.statusTransitionInvalid, detail: "\(status.rawValue) -> \(newStatus.rawValue)")
        }
        var next = self
        next.status = newStatus
        if newStatus == .booked { next.postedDate = time }
        return next
    }

    /// The booked posting that takes this one back: every leg on the other side, same type, dated `at`.
    public func reversed(key reversalKey: String, at: FinanceTimestamp) throws(FinanceError) -> Posting {
        try Posting(key: reversalKey,
                    entries: entries.map { LedgerEntry(account: $0.account, side: $0.side == .debit ? .credit : .debit,
                                                       amountMinor: $0.amountMinor) },
                    transactionType: transactionType, transactionDate: at, status: .booked,
                    transactionDescription: "Reversal of: \(transactionDescription)",
                    originalTransactionDescription: "reversal \(self.key)")
    }

    /// True when `other` is this posting re-derived from the same event (status may have advanced since).
    public func isReplay(of other: Posting) -> Bool {
        key == other.key && entries == other.entries && transactionType == other.transactionType
            && transactionDate == other.transactionDate && transactionDescription == other.transactionDescription
            && originalTransactionDescription == other.originalTransactionDescription
    }

    /// The FinanceKit transaction id of this posting's leg on `account`.
    public static func transactionID(postingKey: String, account: LedgerAccount, identity: FinanceIdentity) -> FinanceID {
        identity.id("transaction", postingKey + "@" + account.key)
    }

    /// The FinanceKit view: one transaction per exposed leg, indicator opposite to the GL side.
    public func transactions(context: FinanceContext) -> [Transaction] {
        entries.compactMap { entry in
            guard entry.account.exposed,
                  let amount = try? CurrencyAmount(amountMinor: entry.amountMinor,
                                                   currencyCode: entry.account.currencyCode) else { return nil }
            return Transaction(
                id: Self.transactionID(postingKey: key, account: entry.account, identity: context.identity),
                accountID: context.identity.id("account", entry.account.key),
                transactionAmount: amount,
                creditDebitIndicator: creditDebitIndicator(forLedgerSide: entry.side),
                transactionDescription: transactionDescription,
                originalTransactionDescription: originalTransactionDescription,
                merchantCategoryCode: context.merchantCategoryCode,
                merchantName: context.merchantName,
                postedDate: postedDate,
                transactionDate: transactionDate,
                transactionType: transactionType,
                status: status)
        }
    }
}
