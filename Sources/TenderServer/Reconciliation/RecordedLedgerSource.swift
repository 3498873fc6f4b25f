import Foundation
import Postgres
import Reconciliation

/// Reads what Tender recorded for a merchant (the `payments` and `refunds` tables) as the
/// Reconciler's input, in keyset pages so that no single result holds every row.
struct RecordedLedgerSource: Sendable {
    /// Rows per query page; bounds one result set, not the ledger.
    static let pageRows = 10_000

    let pool: PostgresPool

    /// Every payment of `merchantId`; a payment already booked by an earlier report is `booked`.
    func payments(merchantId: String) throws -> [RecordedPayment] {
        var result: [RecordedPayment] = []
        var after = ""
        while true {
            let page = try pool.query("""
                SELECT p.payment_id, p.processor_reference, p.amount_minor, p.currency_code, p.status,
                       p.created_at,
                       b.booked IS NOT NULL AS booked
                FROM payments p
                -- A per-row index probe: a hashed subplan would rescan every effect for each page.
                LEFT JOIN LATERAL (SELECT true AS booked FROM settlement_effects e
                                   WHERE e.merchant_id = p.merchant_id AND e.subject_id = p.payment_id
                                     AND e.kind IN ('book_payment', 'book_refund') AND e.kind = 'book_payment'
                                   LIMIT 1) b ON true
                WHERE p.merchant_id = $1 AND p.payment_id > $2
                ORDER BY p.payment_id
                LIMIT $3
                """, [merchantId, after, Self.pageRows])
            for row in page.rows {
                let status: String = try row.decode("status")
                let booked: Bool = try row.decode("booked")
                result.append(RecordedPayment(
                    paymentId: try row.decode("payment_id"),
                    processorReference: try row.decodeIfPresent("processor_reference"),
                    amountMinor: try row.decode("amount_minor"),
                    currencyCode: try row.decode("currency_code"),
                    status: booked ? .booked : Self.ledgerStatus(status),
                    createdAt: try row.decode("created_at")))
            }
            guard page.rows.count == Self.pageRows, let last = result.last else { break }
            after = last.paymentId
        }
        return result
    }

    /// Every refund of `merchantId`; a refund already booked by an earlier report is `booked`.
    func refunds(merchantId: String) throws -> [RecordedRefund] {
        var result: [RecordedRefund] = []
        var after = ""
        while true {
            let page = try pool.query("""
                SELECT r.refund_id, r.payment_id, r.processor_reference, r.amount_minor, r.currency_code,
                       r.status, r.created_at,
                       b.booked IS NOT NULL AS booked
                FROM refunds r
                LEFT JOIN LATERAL (SELECT true AS booked FROM settlement_effects e
                                   WHERE e.merchant_id = r.merchant_id AND e.subject_id = r.refund_id
                                     AND e.kind IN ('book_payment', 'book_refund') AND e.kind = 'book_refund'
                                   LIMIT 1) b ON true
                WHERE r.merchant_id = $1 AND r.refund_id > $2
                ORDER BY r.refund_id
                LIMIT $3
                """, [merchantId, after, Self.pageRows])
            for row in page.rows {
                let status: String = try row.decode("status")
                let booked: Bool = try row.decode("booked")
                result.append(RecordedRefund(
                    refundId: try row.decode("refund_id"),
                    paymentId: try row.decode("payment_id"),
                    processorReference: try row.decodeIfPresent("processor_reference"),
                    amountMinor: try row.decode("amount_minor"),
                    currencyCode: try row.decode("currency_code"),
                    status: booked ? .booked : Self.ledgerStatus(status),
                    createdAt: try row.decode("created_at")))
            }
            guard page.rows.count == Self.pageRows, let last = result.last else { break }
            after = last.refundId
        }
        return result
    }

    /// Payment/refund status → ledger status (finance-store.md §5.7): a succeeded capture waits for
    /// settlement (`pending`), an unfinished one is `authorized`, anything refused never settles.
    static func ledgerStatus(_ status: String) -> RecordedStatus {
        switch status {
        case "succeeded": .pending
        case "pending": .authorized
        default: .rejected
        }
    }
}
