import Crypto
import FinanceStore
import Foundation
import Observability
import Postgres
import Reconciliation

/// Applies reconciliation effects to the finance store in the import's own transaction: matched
/// payments and refunds become `booked` (an update of the same transaction id in the history feed);
/// fees, chargebacks, reversals, adjustments and payouts become their own transactions
/// (docs/finance-store.md §5.7). Every id is derived from the effect's deterministic key, so re-applying a
/// report changes nothing.
struct FinanceSettlementSink: SettlementEffectSink {
    /// Slug of the processor account the money sits on (the same one payments use).
    let processor: String
    let logger: Logger
    private let recorder = FinanceRecorder()

    init(processor: String, logger: Logger) {
        self.processor = processor
        self.logger = logger
    }

    /// The payout destination: one bank account per merchant and currency (`bank:payouts:USD`), whatever
    /// the batch (an account per batch would leave a merchant with daily payouts 365 accounts a year).
    static let payoutDestination = "payouts"

    /// Books a chunk's effects (each at version 0).
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        try apply(effects.map { SettlementEffectAction.book($0, version: 0) }, merchantId: merchantId, on: conn, now: now)
    }

    /// Applies a chunk's actions as batches of finance-store events (a handful of round trips whatever
    /// its size). A settled payment the finance store never saw (recorded before it existed) is counted
    /// and logged once per chunk; the report still shows the match.
    func apply(_ actions: [SettlementEffectAction], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let today = FinanceTimestamp(secondsSinceEpoch: Int64(now.timeIntervalSince1970.rounded(.down)))
        var events: [BusinessEvent] = []
        for action in actions {
            switch action {
            case .book(let effect, let version):
                if let event = event(effect, version: version) { events.append(event) }
            case let .reverse(postingKeys, seed, postedDate):
                let at = postedDate.map { FinanceTimestamp(secondsSinceEpoch: Self.unixSeconds($0)) } ?? today
                for key in postingKeys {
                    events.append(.reversal(reversalID: Self.identifier(seed + "|" + key), postingKey: key, at: at))
                }
            case .confirmPayout(let arrivalKey):
                let prefix = FinanceMapping.payoutArrivalKey("")
                guard arrivalKey.hasPrefix(prefix) else { continue }
                events.append(.payoutArrived(payoutID: String(arrivalKey.dropFirst(prefix.count)), at: today))
            }
        }
        var start = 0
        while start < events.count {
            let end = min(start + recorder.batchEventsMax, events.count)
            let outcome = try recorder.apply(Array(events[start..<end]), merchantId: merchantId, on: conn, now: now,
                                             missingPostings: .skip)
            if outcome.missingPostings > 0 {
                logger.debug("settlement effects without a ledger posting",
                             [("merchant_id", merchantId), ("count", String(outcome.missingPostings))])
            }
            start = end
        }
    }

    /// The postings `event(_:version:)` creates, as the finance mapping names them.
    func postingKeys(of effect: FinanceEffect, version: Int, merchantId: String) -> [String] {
        guard let event = event(effect, version: version) else { return [] }
        let context = FinanceContext(identity: FinanceStoreIdentity.identity(merchantId), merchantName: "")
        guard case .insert(let postings) = try? FinanceMapping.effect(of: event, context: context) else { return [] }
        return postings.map(\.key)
    }

    /// The finance-store event of one effect; nil when the effect names nothing to book. Version 0 keeps
    /// the ids derived from the key alone (what every earlier import booked); a later version of the
    /// same key gets ids of its own.
    func event(_ effect: FinanceEffect, version: Int = 0) -> BusinessEvent? {
        let at = FinanceTimestamp(secondsSinceEpoch: Self.unixSeconds(effect.postedDate))
        let magnitude = effect.amountMinor.magnitude
        let money = EventMoney(amountMinor: magnitude > UInt64(Int64.max) ? Int64.max : Int64(magnitude),
                               currencyCode: effect.currencyCode, processor: processor)
        let id = Self.identifier(version == 0 ? effect.key : "\(effect.key)|v\(version)")
        let credit = effect.creditDebitIndicator == "credit"
        switch effect.kind {
        case .bookPayment:
            guard let paymentId = effect.paymentId else { return nil }
            return .paymentBooked(paymentID: paymentId, at: at)
        case .bookRefund:
            guard let refundId = effect.refundId else { return nil }
            return .refundBooked(refundID: refundId, at: at)
        case .refundReversal:
            // The refund came back (Adyen RefundedReversed): money in. The refund itself stays booked
            // (booked is final), so the returned money is its own credit.
            return .adjustment(adjustmentID: id, direction: .credit, money: money,
                               note: Self.note("refund reversed " + effect.originalDescription), at: at)
        case .fee:
            // A cost given back (Adyen PaymentCost or MiscCosts as a credit) is money in.
            guard !credit else {
                return .adjustment(adjustmentID: id, direction: .credit, money: money,
                                   note: Self.note("cost credited " + effect.originalDescription), at: at)
            }
            return .fee(feeID: id, paymentID: effect.paymentId, money: money, at: at)
        case .chargeback, .chargebackReversal:
            guard let paymentId = effect.paymentId else {
                // A dispute over a payment Tender never recorded still moved money on the processor
                // balance: it is booked as an adjustment in the settled direction.
                return .adjustment(adjustmentID: id, direction: credit ? .credit : .debit,
                                   money: money, note: Self.note("\(effect.kind.rawValue) " + effect.originalDescription),
                                   at: at)
            }
            // Each dispute line is its own posting: a SecondChargeback after a reversal debits again.
            return effect.kind == .chargeback
                ? .chargeback(chargebackID: id, paymentID: paymentId, money: money, at: at)
                : .chargebackReversal(reversalID: id, chargebackID: Self.chargebackId(paymentId), money: money, at: at)
        case .adjustment:
            return .adjustment(adjustmentID: id, direction: credit ? .credit : .debit,
                               money: money, note: Self.note(effect.originalDescription), at: at)
        case .payout:
            // Money coming back from the bank (BankInstructionReturned, PaidOutReversed) is money in.
            guard !credit else {
                return .adjustment(adjustmentID: id, direction: .credit, money: money,
                                   note: Self.note("payout returned " + effect.originalDescription), at: at)
            }
            return .payout(payoutID: id, bankReference: Self.payoutDestination, money: money, at: at)
        }
    }

    /// A note within the finance store's text limit (`FinanceLimits.eventTextBytesMax`), cut between characters.
    static func note(_ text: String) -> String {
        let limit = FinanceLimits().eventTextBytesMax
        var out = ""
        for character in text {
            guard out.utf8.count + character.utf8.count <= limit else { break }
            out.append(character)
        }
        return out
    }

    /// A finance-store id (no `:` or `@`) derived from the effect's deterministic key.
    static func identifier(_ key: String) -> String {
        "st" + hexEncoded(Array(Digest.sha256(key).prefix(12)))
    }

    /// Chargebacks and their reversals find each other through the payment.
    static func chargebackId(_ paymentId: String) -> String {
        "cb" + hexEncoded(Array(Digest.sha256("chargeback|" + paymentId).prefix(12)))
    }

    static func unixSeconds(_ date: SettlementDate) -> Int64 {
        date.noonUnixSeconds
    }

}
