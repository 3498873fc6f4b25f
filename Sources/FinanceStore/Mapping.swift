// The pure mapping from Tender's business events to postings (docs/finance-store.md §5.7, issue 6 item 2).
// The shell calls `FinanceMapping.effect(of:context:)` inside the same database transaction as the
// payment outcome and writes what it returns; `FinanceLedger` is the in-memory reference of that write.

/// Who the finance data belongs to and how its ids and labels are made.
public struct FinanceContext: Sendable {
    /// Id derivation, private to the merchant.
    public let identity: FinanceIdentity
    /// The merchant's trading name (FinanceKit `merchantName`).
    public let merchantName: String
    /// The merchant's ISO 18245 category code, if known.
    public let merchantCategoryCode: Int16?
    /// Bounds on event fields.
    public let limits: FinanceLimits

    /// Creates a context.
    public init(identity: FinanceIdentity, merchantName: String, merchantCategoryCode: Int16? = nil,
                limits: FinanceLimits = FinanceLimits()) {
        self.identity = identity
        self.merchantName = merchantName
        self.merchantCategoryCode = merchantCategoryCode
        self.limits = limits
    }
}

/// An amount as a business event states it: positive minor units, currency and the processor holding it.
public struct EventMoney: Hashable, Sendable {
    /// Positive minor units.
    public let amountMinor: Int64
    /// ISO 4217 code.
    public let currencyCode: String
    /// Processor slug (`adyen`, `stripe`, `braintree`…): lower-case letters, digits and dashes.
    public let processor: String

    /// Creates an event amount; validated when the event is mapped.
    public init(amountMinor: Int64, currencyCode: String, processor: String) {
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.processor = processor
    }
}

/// Every business event that moves the merchant's money (issue 6, docs/finance-store.md §5.7).
public enum BusinessEvent: Hashable, Sendable {
    /// A payment the processor approved: authorized credit on the settlement account.
    case paymentSucceeded(paymentID: String, money: EventMoney, at: FinanceTimestamp)
    /// A declined payment: creates nothing.
    case paymentDeclined(paymentID: String)
    /// A failed payment (no processor answer): creates nothing.
    case paymentFailed(paymentID: String)
    /// The payment appeared on a settlement: its transaction becomes booked.
    case paymentBooked(paymentID: String, at: FinanceTimestamp)
    /// The authorization was voided or expired: its transaction becomes rejected.
    case paymentVoided(paymentID: String, at: FinanceTimestamp)
    /// A refund was accepted by the processor: pending debit.
    case refundCreated(refundID: String, paymentID: String, money: EventMoney, at: FinanceTimestamp)
    /// The refund appeared on a settlement: booked.
    case refundBooked(refundID: String, at: FinanceTimestamp)
    /// The processor failed the refund: rejected.
    case refundRejected(refundID: String, at: FinanceTimestamp)
    /// A processor fee deducted from the balance: booked debit.
    case fee(feeID: String, paymentID: String?, money: EventMoney, at: FinanceTimestamp)
    /// A chargeback: booked debit (FinanceKit `adjustment`).
    case chargeback(chargebackID: String, paymentID: String, money: EventMoney, at: FinanceTimestamp)
    /// A won dispute: booked credit (FinanceKit `adjustment`).
    case chargebackReversal(reversalID: String, chargebackID: String, money: EventMoney, at: FinanceTimestamp)
    /// A processor correction in either direction (indicator as seen on the settlement account).
    case adjustment(adjustmentID: String, direction: CreditDebitIndicator, money: EventMoney, note: String,
                    at: FinanceTimestamp)
    /// A payout: booked debit on the settlement account, pending deposit on the bank account.
    case payout(payoutID: String, bankReference: String, money: EventMoney, at: FinanceTimestamp)
    /// The bank statement shows the payout: the deposit becomes booked.
    case payoutArrived(payoutID: String, at: FinanceTimestamp)
    /// A correction takes back an earlier event: a booked posting is mirrored by a booked posting with
    /// every leg on the other side; one still authorized or pending becomes rejected (it never moved
    /// money); a rejected one stays as it is.
    case reversal(reversalID: String, postingKey: String, at: FinanceTimestamp)
    /// Fees invoiced later (IC++): the fees-payable liability grows.
    case feeInvoiced(invoiceID: String, money: EventMoney, at: FinanceTimestamp)
    /// The processor deducted an invoice from the balance: liability and balance both shrink.
    case feeInvoiceSettled(invoiceID: String, money: EventMoney, at: FinanceTimestamp)
}

/// What one event does to the ledger.
public enum LedgerEffect: Hashable, Sendable {
    /// Nothing (declined or failed payments).
    case none
    /// Insert these postings (`INSERT … ON CONFLICT (key) DO NOTHING`, then `isReplay(of:)` on conflict).
    case insert([Posting])
    /// Move the posting with this key to `status` (`SELECT … FOR UPDATE`, then `transitioned(to:at:)`).
    case transition(postingKey: String, status: TransactionStatus, at: FinanceTimestamp)
    /// Take back the posting with this key (`Posting.reversed(key:at:)` when booked, else rejected).
    case reverse(postingKey: String, reversalKey: String, at: FinanceTimestamp)
}

/// The ledger accounts of one merchant, named by stable keys (§5.7 account table).
public enum LedgerAccounts {
    /// Funds the processor holds for the merchant: the settlement account (exposed asset).
    public static func settlement(_ processor: String, _ currency: String) -> LedgerAccount {
        LedgerAccount(key: "psp:\(processor):\(currency)", ledgerClass: .asset, currencyCode: currency, exposed: true,
                      displayName: "\(institution(processor)) \(currency) balance", institutionName: institution(processor))
    }

    /// The payout destination (exposed asset); `reference` is already masked (last four or a label).
    public static func bank(_ reference: String, _ currency: String) -> LedgerAccount {
        LedgerAccount(key: "bank:\(reference):\(currency)", ledgerClass: .asset, currencyCode: currency, exposed: true,
                      displayName: "Bank \(reference) \(currency)", institutionName: "Bank")
    }

    /// Fees invoiced but not yet deducted (exposed liability).
    public static func feesPayable(_ processor: String, _ currency: String) -> LedgerAccount {
        LedgerAccount(key: "psp-fees-payable:\(processor):\(currency)", ledgerClass: .liability, currencyCode: currency,
                      exposed: true, displayName: "\(institution(processor)) \(currency) fees payable",
                      institutionName: institution(processor))
    }

    /// Payouts that left the processor and have not reached the bank (internal asset).
    public static func payoutsInTransit(_ currency: String) -> LedgerAccount {
        internalAccount("transit:payouts:\(currency)", .asset, currency)
    }

    /// Sales income (internal).
    public static func sales(_ currency: String) -> LedgerAccount { internalAccount("income:sales:\(currency)", .income, currency) }
    /// Refunds given, a contra-income kept as expense (internal).
    public static func refunds(_ currency: String) -> LedgerAccount { internalAccount("expense:refunds:\(currency)", .expense, currency) }
    /// Processor fees (internal).
    public static func fees(_ currency: String) -> LedgerAccount { internalAccount("expense:fees:\(currency)", .expense, currency) }
    /// Chargeback losses, reduced by reversals (internal).
    public static func chargebacks(_ currency: String) -> LedgerAccount {
        internalAccount("expense:chargebacks:\(currency)", .expense, currency)
    }
    /// Counterpart of processor corrections (internal).
    public static func adjustments(_ currency: String) -> LedgerAccount {
        internalAccount("equity:adjustments:\(currency)", .equity, currency)
    }

    private static func internalAccount(_ key: String, _ ledgerClass: LedgerAccountClass, _ currency: String) -> LedgerAccount {
        LedgerAccount(key: key, ledgerClass: ledgerClass, currencyCode: currency, exposed: false,
                      displayName: key, institutionName: "Tender")
    }

    private static func institution(_ processor: String) -> String {
        processor.prefix(1).uppercased() + processor.dropFirst()
    }
}

/// The event → posting table of docs/finance-store.md §5.7.
public enum FinanceMapping {
    /// Posting key of a payment (status changes find it by this key).
    public static func paymentKey(_ paymentID: String) -> String { "payment:\(paymentID)" }
    /// Posting key of a refund.
    public static func refundKey(_ refundID: String) -> String { "refund:\(refundID)" }
    /// Posting key of a payout's deposit leg (the one that waits for the bank).
    public static func payoutArrivalKey(_ payoutID: String) -> String { "payout-arrival:\(payoutID)" }
    /// Posting key of a reversal.
    public static func reversalKey(_ reversalID: String) -> String { "reversal:\(reversalID)" }

    /// Maps one event to its ledger effect; validates every field first (`event_invalid`).
    ///
    /// | event | GL debit | GL credit | FinanceKit view | status | type |
    /// |---|---|---|---|---|---|
    /// | payment succeeded | psp | sales | psp credit | authorized | pointOfSale |
    /// | refund | refunds | psp | psp debit | pending | refund |
    /// | fee | fees | psp | psp debit | booked | fee |
    /// | chargeback | chargebacks | psp | psp debit | booked | adjustment |
    /// | chargeback reversal | psp | chargebacks | psp credit | booked | adjustment |
    /// | adjustment credit/debit | psp / adjustments | adjustments / psp | psp credit/debit | booked | adjustment |
    /// | payout | transit, then bank | psp, then transit | psp debit booked transfer; bank credit pending deposit |
    /// | fee invoiced | fees | fees-payable | liability debit (owing more) | booked | fee |
    /// | fee invoice settled | fees-payable | psp | liability credit + psp debit | booked | fee |
    /// | reversal of a booked posting | its credits | its debits | the opposite indicator | booked | the same |
    /// | reversal of a pending one | — | — | the posting becomes rejected | rejected | — |
    public static func effect(of event: BusinessEvent, context: FinanceContext) throws(FinanceError) -> LedgerEffect {
        let limits = context.limits
        switch event {
        case .paymentDeclined(let id), .paymentFailed(let id):
            try checkID(id, "paymentID", limits)
            return .none

        case let .paymentSucceeded(paymentID, money, at):
            try checkID(paymentID, "paymentID", limits)
            try checkMoney(money, limits)
            return .insert([try posting(
                key: paymentKey(paymentID), debit: LedgerAccounts.settlement(money.processor, money.currencyCode),
                credit: LedgerAccounts.sales(money.currencyCode), money.amountMinor, .pointOfSale, at, .authorized,
                "Apple Pay payment \(paymentID)", "payment_succeeded \(paymentID)")])

        case let .paymentBooked(paymentID, at):
            try checkID(paymentID, "paymentID", limits)
            return .transition(postingKey: paymentKey(paymentID), status: .booked, at: at)

        case let .paymentVoided(paymentID, at):
            try checkID(paymentID, "paymentID", limits)
            return .transition(postingKey: paymentKey(paymentID), status: .rejected, at: at)

        case let .refundCreated(refundID, paymentID, money, at):
            try checkID(refundID, "refundID", limits)
            try checkID(paymentID, "paymentID", limits)
            try checkMoney(money, limits)
            return .insert([try posting(
                key: refundKey(refundID), debit: LedgerAccounts.refunds(money.currencyCode),
                credit: LedgerAccounts.settlement(money.processor, money.currencyCode), money.amountMinor, .refund, at,
                .pending, "Refund \(refundID) of payment \(paymentID)", "refund \(refundID) payment \(paymentID)")])

        case let .refundBooked(refundID, at):
            try checkID(refundID, "refundID", limits)
            return .transition(postingKey: refundKey(refundID), status: .booked, at: at)

        case let .refundRejected(refundID, at):
            try checkID(refundID, "refundID", limits)
            return .transition(postingKey: refundKey(refundID), status: .rejected, at: at)

        default:
            return try settlementEffect(of: event, limits: limits)
        }
    }

    /// The ledger effect of a settlement-side event (fees, chargebacks, adjustments, payouts, reversals, invoices).
    private static func settlementEffect(of event: BusinessEvent, limits: FinanceLimits) throws(FinanceError) -> LedgerEffect {
        switch event {
        case let .fee(feeID, paymentID, money, at):
            try checkID(feeID, "feeID", limits)
            if let paymentID { try checkID(paymentID, "paymentID", limits) }
            try checkMoney(money, limits)
            let reference = paymentID.map { " payment \($0)" } ?? ""
            return .insert([try posting(
                key: "fee:\(feeID)", debit: LedgerAccounts.fees(money.currencyCode),
                credit: LedgerAccounts.settlement(money.processor, money.currencyCode), money.amountMinor, .fee, at,
                .booked, "Processing fee\(reference)", "fee \(feeID)\(reference)")])

        case let .chargeback(chargebackID, paymentID, money, at):
            try checkID(chargebackID, "chargebackID", limits)
            try checkID(paymentID, "paymentID", limits)
            try checkMoney(money, limits)
            return .insert([try posting(
                key: "chargeback:\(chargebackID)", debit: LedgerAccounts.chargebacks(money.currencyCode),
                credit: LedgerAccounts.settlement(money.processor, money.currencyCode), money.amountMinor, .adjustment,
                at, .booked, "Chargeback on payment \(paymentID)", "chargeback \(chargebackID) payment \(paymentID)")])

        case let .chargebackReversal(reversalID, chargebackID, money, at):
            try checkID(reversalID, "reversalID", limits)
            try checkID(chargebackID, "chargebackID", limits)
            try checkMoney(money, limits)
            return .insert([try posting(
                key: "chargeback-reversal:\(reversalID)",
                debit: LedgerAccounts.settlement(money.processor, money.currencyCode),
                credit: LedgerAccounts.chargebacks(money.currencyCode), money.amountMinor, .adjustment, at, .booked,
                "Chargeback reversed", "chargeback_reversal \(reversalID) chargeback \(chargebackID)")])

        case let .adjustment(adjustmentID, direction, money, note, at):
            try checkID(adjustmentID, "adjustmentID", limits)
            try checkText(note, "note", limits)
            try checkMoney(money, limits)
            let psp = LedgerAccounts.settlement(money.processor, money.currencyCode)
            let other = LedgerAccounts.adjustments(money.currencyCode)
            // FinanceKit credit on an asset = GL debit on it (§0).
            let (debit, credit) = direction == .credit ? (psp, other) : (other, psp)
            return .insert([try posting(
                key: "adjustment:\(adjustmentID)", debit: debit, credit: credit, money.amountMinor, .adjustment, at,
                .booked, note.isEmpty ? "Adjustment" : note, "adjustment \(adjustmentID)")])

        case let .payout(payoutID, bankReference, money, at):
            try checkID(payoutID, "payoutID", limits)
            try checkText(bankReference, "bankReference", limits)
            guard !bankReference.isEmpty, !bankReference.contains(":") else {
                throw FinanceError(.eventInvalid, field: "bankReference")
            }
            try checkMoney(money, limits)
            // Two postings through a transit account, so the bank leg can wait for the bank statement
            // while the processor leg is already booked (§5.7 rows T7/T8).
            let transit = LedgerAccounts.payoutsInTransit(money.currencyCode)
            return .insert([
                try posting(key: "payout:\(payoutID)", debit: transit,
                            credit: LedgerAccounts.settlement(money.processor, money.currencyCode),
                            money.amountMinor, .transfer, at, .booked, "Payout \(payoutID)", "payout \(payoutID)"),
                try posting(key: payoutArrivalKey(payoutID),
                            debit: LedgerAccounts.bank(bankReference, money.currencyCode), credit: transit,
                            money.amountMinor, .deposit, at, .pending, "Payout \(payoutID) from \(money.processor)",
                            "payout_deposit \(payoutID)"),
            ])

        case let .payoutArrived(payoutID, at):
            try checkID(payoutID, "payoutID", limits)
            return .transition(postingKey: payoutArrivalKey(payoutID), status: .booked, at: at)

        case let .reversal(reversalID, postingKey, at):
            try checkID(reversalID, "reversalID", limits)
            guard !postingKey.isEmpty, postingKey.utf8.count <= 300 else {
                throw FinanceError(.eventInvalid, field: "postingKey", detail: "empty or longer than 300 bytes")
            }
            return .reverse(postingKey: postingKey, reversalKey: reversalKey(reversalID), at: at)

        case let .feeInvoiced(invoiceID, money, at):
            try checkID(invoiceID, "invoiceID", limits)
            try checkMoney(money, limits)
            return .insert([try posting(
                key: "fee-invoice:\(invoiceID)", debit: LedgerAccounts.fees(money.currencyCode),
                credit: LedgerAccounts.feesPayable(money.processor, money.currencyCode), money.amountMinor, .fee, at,
                .booked, "Fee invoice \(invoiceID)", "fee_invoice \(invoiceID)")])

        case let .feeInvoiceSettled(invoiceID, money, at):
            try checkID(invoiceID, "invoiceID", limits)
            try checkMoney(money, limits)
            return .insert([try posting(
                key: "fee-invoice-settlement:\(invoiceID)",
                debit: LedgerAccounts.feesPayable(money.processor, money.currencyCode),
                credit: LedgerAccounts.settlement(money.processor, money.currencyCode), money.amountMinor, .fee, at,
                .booked, "Fee invoice \(invoiceID) deducted", "invoice_deduction \(invoiceID)")])

        default:
            // Payment and refund events are mapped by `effect(of:context:)` and never reach here.
            return .none
        }
    }

    private static func posting(key: String, debit: LedgerAccount, credit: LedgerAccount, _ amountMinor: Int64,
                                _ type: TransactionType, _ at: FinanceTimestamp, _ status: TransactionStatus,
                                _ description: String, _ original: String) throws(FinanceError) -> Posting {
        try Posting(key: key,
                    entries: [LedgerEntry(account: debit, side: .debit, amountMinor: amountMinor),
                              LedgerEntry(account: credit, side: .credit, amountMinor: amountMinor)],
                    transactionType: type, transactionDate: at, status: status,
                    transactionDescription: description, originalTransactionDescription: original)
    }

    private static func checkID(_ id: String, _ field: String, _ limits: FinanceLimits) throws(FinanceError) {
        // Ids become parts of keys: printable ASCII without ':' or '@' keeps keys unambiguous.
        guard !id.isEmpty, id.utf8.count <= limits.eventIDBytesMax,
              id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: "@") }) else {
            throw FinanceError(.eventInvalid, field: field, detail: "empty, too long or not printable ASCII")
        }
    }

    private static func checkText(_ text: String, _ field: String, _ limits: FinanceLimits) throws(FinanceError) {
        guard text.utf8.count <= limits.eventTextBytesMax else {
            throw FinanceError(.eventInvalid, field: field, detail: "longer than \(limits.eventTextBytesMax) bytes")
        }
    }

    private static func checkMoney(_ money: EventMoney, _ limits: FinanceLimits) throws(FinanceError) {
        _ = try FinanceCurrency(code: money.currencyCode)
        guard money.amountMinor > 0 else { throw FinanceError(.eventInvalid, field: "amount", detail: "not positive") }
        guard !money.processor.isEmpty, money.processor.utf8.count <= 32,
              money.processor.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }) else {
            throw FinanceError(.eventInvalid, field: "processor", detail: "not a lower-case slug")
        }
    }
}
