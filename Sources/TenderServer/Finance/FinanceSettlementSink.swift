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

    /// Applies a chunk's effects as one batch of finance-store events (a handful of round trips
    /// whatever its size). A settled payment the finance store never saw (recorded before it existed)
    /// is counted and logged once per chunk; the report still shows the match.
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let events = effects.compactMap(event)
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

    /// The finance-store event of one effect; nil when the effect names nothing to book.
    func event(_ effect: FinanceEffect) -> BusinessEvent? {
        let at = FinanceTimestamp(secondsSinceEpoch: Self.unixSeconds(effect.postedDate))
        let money = EventMoney(amountMinor: effect.amountMinor.magnitude > UInt64(Int64.max) ? Int64.max : Int64(effect.amountMinor.magnitude),
                               currencyCode: effect.currencyCode, processor: processor)
        let id = Self.identifier(effect.key)
        switch effect.kind {
        case .bookPayment:
            guard let paymentId = effect.paymentId else { return nil }
            return .paymentBooked(paymentID: paymentId, at: at)
        case .bookRefund:
            guard let refundId = effect.refundId else { return nil }
            return .refundBooked(refundID: refundId, at: at)
        case .refundReversal:
            guard let refundId = effect.refundId else { return nil }
            return .refundRejected(refundID: refundId, at: at)
        case .fee:
            return .fee(feeID: id, paymentID: effect.paymentId, money: money, at: at)
        case .chargeback, .chargebackReversal:
            guard let paymentId = effect.paymentId else {
                // A dispute over a payment Tender never recorded still moved money on the processor
                // balance: it is booked as an adjustment in the settled direction.
                return .adjustment(adjustmentID: id, direction: effect.creditDebitIndicator == "debit" ? .debit : .credit,
                                   money: money, note: String(("\(effect.kind.rawValue) " + effect.originalDescription).prefix(200)),
                                   at: at)
            }
            return effect.kind == .chargeback
                ? .chargeback(chargebackID: Self.chargebackId(paymentId), paymentID: paymentId, money: money, at: at)
                : .chargebackReversal(reversalID: id, chargebackID: Self.chargebackId(paymentId), money: money, at: at)
        case .adjustment:
            return .adjustment(adjustmentID: id, direction: effect.creditDebitIndicator == "debit" ? .debit : .credit,
                               money: money, note: String(effect.originalDescription.prefix(200)), at: at)
        case .payout:
            // The ledger's bank reference may not contain ':' (Adyen batches are "account:number").
            let reference = String(effect.batchId.replacingOccurrences(of: ":", with: "-").prefix(64))
            return .payout(payoutID: id, bankReference: reference.isEmpty ? "unreferenced" : reference, money: money, at: at)
        }
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
        // Days from civil (Howard Hinnant), noon UTC so the date survives any display time zone.
        let y = Int64(date.month <= 2 ? date.year - 1 : date.year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(date.month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(date.day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return (era * 146_097 + doe - 719_468) * 86_400 + 43_200
    }
}
