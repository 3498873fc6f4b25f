// The in-memory reference of what the PostgreSQL shell does per event: it is what the tests run, and
// the shell must produce the same rows (one posting row per key, one change-log row per change).

/// A change to a FinanceKit entity that the shell appends to the change log in the same transaction.
public enum FinanceChange: Hashable, Sendable {
    /// An account seen for the first time ("created on first use", issue 6 item 2).
    case accountInserted(Account)
    /// A new transaction.
    case transactionInserted(Transaction)
    /// A status change of an existing transaction (same id).
    case transactionUpdated(Transaction)
}

/// One merchant's postings and accounts, held in memory; applying an event twice changes nothing.
public struct FinanceLedger: Sendable {
    /// Ids, names and limits.
    public let context: FinanceContext
    /// Postings by key.
    public private(set) var postings: [String: Posting] = [:]
    /// Keys in first-insert order.
    public private(set) var postingKeys: [String] = []
    /// Exposed accounts by ledger key, with their opening dates.
    public private(set) var accounts: [String: Account] = [:]

    /// An empty ledger.
    public init(context: FinanceContext) {
        self.context = context
    }

    /// Applies one event and returns the entity changes to log; a replay returns `[]`.
    public mutating func apply(_ event: BusinessEvent) throws(FinanceError) -> [FinanceChange] {
        try apply(effect: FinanceMapping.effect(of: event, context: context))
    }

    private mutating func apply(effect: LedgerEffect) throws(FinanceError) -> [FinanceChange] {
        switch effect {
        case .none:
            return []
        case .insert(let newPostings):
            // Check every posting before writing any, as one database transaction would.
            var fresh: [Posting] = []
            for posting in newPostings {
                if let existing = postings[posting.key] {
                    guard existing.isReplay(of: posting) else {
                        throw FinanceError(.eventConflict, detail: posting.key)
                    }
                } else {
                    fresh.append(posting)
                }
            }
            var changes: [FinanceChange] = []
            for posting in fresh {
                for entry in posting.entries where entry.account.exposed && accounts[entry.account.key] == nil {
                    if let account = entry.account.financeAccount(identity: context.identity,
                                                                  openingDate: posting.transactionDate) {
                        accounts[entry.account.key] = account
                        changes.append(.accountInserted(account))
                    }
                }
                postings[posting.key] = posting
                postingKeys.append(posting.key)
                changes += posting.transactions(context: context).map(FinanceChange.transactionInserted)
            }
            return changes
        case let .transition(key, status, at):
            guard let existing = postings[key] else { throw FinanceError(.postingNotFound, detail: key) }
            guard let next = try existing.transitioned(to: status, at: at) else { return [] }
            postings[key] = next
            return next.transactions(context: context).map(FinanceChange.transactionUpdated)
        case let .reverse(key, reversalKey, at):
            guard let existing = postings[key] else { throw FinanceError(.postingNotFound, detail: key) }
            switch existing.status {
            case .booked: return try apply(effect: .insert([existing.reversed(key: reversalKey, at: at)]))
            case .authorized, .pending: return try apply(effect: .transition(postingKey: key, status: .rejected, at: at))
            case .rejected, .memo: return []
            }
        }
    }

    /// Every posting in insert order.
    public var allPostings: [Posting] { postingKeys.compactMap { postings[$0] } }

    /// Every FinanceKit transaction.
    public var transactions: [Transaction] { allPostings.flatMap { $0.transactions(context: context) } }

    /// Every exposed account, ordered by id.
    public var financeAccounts: [Account] { accounts.values.sorted { $0.id < $1.id } }

    /// Balances of every exposed account at `asOf`.
    public func balances(asOf: FinanceTimestamp) throws(FinanceError) -> [AccountBalance] {
        let all = transactions
        var result: [AccountBalance] = []
        for account in financeAccounts {
            result.append(try FinanceBalances.balance(of: account, transactions: all, asOf: asOf,
                                                      identity: context.identity))
        }
        return result
    }
}

/// Balance rules (docs/finance-store.md §5.7).
///
/// With s(t) = +amount for a `credit` and −amount for a `debit` (the account's own point of view):
/// - booked = Σ s over `booked` transactions;
/// - available = booked + Σ s over `authorized`/`pending` **debits** only: money on its way out is
///   no longer spendable, money on its way in is not spendable yet;
/// - `rejected` and `memo` never count;
/// - each side is shown as a positive amount with indicator `credit` when its sum is ≥ 0 and `debit`
///   otherwise, which gives "an asset holding funds is credit; an owed liability is debit".
public enum FinanceBalances {
    /// The balance id of an account (stable, so history reports balance changes as updates).
    public static func balanceID(of accountID: FinanceID, identity: FinanceIdentity) -> FinanceID {
        identity.id("balance", accountID.description)
    }

    /// Computes `account`'s balance from the transactions (others' transactions are ignored).
    public static func balance(of account: Account, transactions: [Transaction], asOf: FinanceTimestamp,
                               identity: FinanceIdentity) throws(FinanceError) -> AccountBalance {
        var booked: Int64 = 0
        var available: Int64 = 0
        for transaction in transactions where transaction.accountID == account.id {
            guard transaction.transactionAmount.currencyCode == account.currencyCode else {
                throw FinanceError(.valueInvalid, field: "currencyCode", detail: "transaction currency differs from account")
            }
            let amount = transaction.transactionAmount.amountMinor
            let signed = transaction.creditDebitIndicator == .credit ? amount : -amount
            switch transaction.status {
            case .booked:
                booked = try add(booked, signed)
                available = try add(available, signed)
            case .authorized, .pending:
                if signed < 0 { available = try add(available, signed) }
            case .rejected, .memo:
                break
            }
        }
        func side(_ sum: Int64) throws(FinanceError) -> Balance {
            // The guard below excludes Int64.min, so the magnitude always fits.
            Balance(amount: try CurrencyAmount(amountMinor: Int64(sum.magnitude), currencyCode: account.currencyCode),
                    asOfDate: asOf, creditDebitIndicator: sum >= 0 ? .credit : .debit)
        }
        guard booked != Int64.min, available != Int64.min else { throw FinanceError(.amountOverflow) }
        return AccountBalance(id: balanceID(of: account.id, identity: identity), accountID: account.id,
                              currentBalance: .availableAndBooked(available: try side(available), booked: try side(booked)))
    }

    private static func add(_ a: Int64, _ b: Int64) throws(FinanceError) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard !overflow else { throw FinanceError(.amountOverflow, detail: "balance") }
        return sum
    }
}
