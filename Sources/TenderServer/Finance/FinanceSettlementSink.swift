import Crypto
import FinanceStore
import Foundation
import Observability
import Postgres
import Reconciliation

/// Applies reconciliation effects to the finance store in the import's own transaction: matched
/// payments and refunds become `booked` (an update of the same transaction id in the history feed);
/// fees, chargebacks, reversals, adjustments and payouts become their own transactions
/// (finance-store.md §5.7). Every id is derived from the effect's deterministic key, so re-applying a
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

    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        for effect in effects { try apply(effect, merchantId: merchantId, on: conn, now: now) }
    }

    func apply(_ effect: FinanceEffect, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let at = FinanceTimestamp(secondsSinceEpoch: Self.unixSeconds(effect.postedDate))
        let money = EventMoney(amountMinor: effect.amountMinor.magnitude > UInt64(Int64.max) ? Int64.max : Int64(effect.amountMinor.magnitude),
                               currencyCode: effect.currencyCode, processor: processor)
        let id = Self.identifier(effect.key)
        let event: BusinessEvent
        switch effect.kind {
        case .bookPayment:
            guard let paymentId = effect.paymentId else { return }
            event = .paymentBooked(paymentID: paymentId, at: at)
        case .bookRefund:
            guard let refundId = effect.refundId else { return }
            event = .refundBooked(refundID: refundId, at: at)
        case .refundReversal:
            guard let refundId = effect.refundId else { return }
            event = .refundRejected(refundID: refundId, at: at)
        case .fee:
            event = .fee(feeID: id, paymentID: effect.paymentId, money: money, at: at)
        case .chargeback:
            guard let paymentId = effect.paymentId else { return }
            event = .chargeback(chargebackID: Self.chargebackId(paymentId), paymentID: paymentId, money: money, at: at)
        case .chargebackReversal:
            guard let paymentId = effect.paymentId else { return }
            event = .chargebackReversal(reversalID: id, chargebackID: Self.chargebackId(paymentId), money: money, at: at)
        case .adjustment:
            event = .adjustment(adjustmentID: id, direction: effect.creditDebitIndicator == "debit" ? .debit : .credit,
                                money: money, note: String(effect.originalDescription.prefix(200)), at: at)
        case .payout:
            // The ledger's bank reference may not contain ':' (Adyen batches are "account:number").
            let reference = String(effect.batchId.replacingOccurrences(of: ":", with: "-").prefix(64))
            event = .payout(payoutID: id, bankReference: reference.isEmpty ? "unreferenced" : reference, money: money, at: at)
        }
        do {
            try recorder.apply(event, merchantId: merchantId, on: conn, now: now)
        } catch let error as FinanceError where error.code == .postingNotFound {
            // A settled payment the finance store never saw (recorded before it existed): the report
            // still shows the match; there is no ledger entry to book. Debug level: a backfilled month
            // would otherwise write one warning per line.
            logger.debug("settlement effect without a ledger posting", [("effect", effect.kind.rawValue)])
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
