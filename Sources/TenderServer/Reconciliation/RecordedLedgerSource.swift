import Foundation
import Postgres
import Reconciliation

/// Reads what Tender recorded for a merchant (the `payments` and `refunds` tables) as the
/// Reconciler's input, through a cursor in the caller's transaction: one plan (a hash join against
/// the bookings) and one page of rows in memory at a time.
struct RecordedLedgerSource: Sendable {
    /// Rows per FETCH; bounds one result set, not the ledger.
    static let pageRows = 20_000

    /// Every payment of `merchantId`; a payment already booked by an earlier report is `booked`.
    func payments(merchantId: String, on conn: PostgresConnection) throws -> [RecordedPayment] {
        var result: [RecordedPayment] = []
        // The effect key's prefix is Reconciler's ("recon|<kind>|<line natural key>").
        try Self.readAll(cursor: "tender_recorded_payments", """
            DECLARE tender_recorded_payments NO SCROLL CURSOR FOR
            SELECT p.payment_id, p.processor_reference, p.amount_minor, p.currency_code, p.status,
                   (extract(epoch FROM p.created_at) * 1000000)::bigint AS created_us,
                   b.subject_id IS NOT NULL AS booked,
                   substr(b.effect_key, length('recon|book_payment|') + 1) AS booked_by
              FROM payments p
              LEFT JOIN (SELECT DISTINCT ON (subject_id) subject_id, effect_key FROM settlement_effects
                          WHERE merchant_id = $1 AND kind = 'book_payment'
                          ORDER BY subject_id, applied_at, effect_key) b ON b.subject_id = p.payment_id
             WHERE p.merchant_id = $1
            """, merchantId: merchantId, on: conn) { row in
            let booked = try row.bool(6)
            result.append(RecordedPayment(
                paymentId: try row.requiredString(0),
                processorReference: try row.string(1),
                amountMinor: try row.int64(2),
                currencyCode: try row.requiredString(3),
                status: booked ? .booked : Self.ledgerStatus(try row.requiredString(4)),
                createdAt: Self.date(microseconds: try row.int64(5)),
                bookedByLineKey: booked ? try row.string(7) : nil))
        }
        return result
    }

    /// Every refund of `merchantId`; a refund already booked by an earlier report is `booked`.
    func refunds(merchantId: String, on conn: PostgresConnection) throws -> [RecordedRefund] {
        var result: [RecordedRefund] = []
        try Self.readAll(cursor: "tender_recorded_refunds", """
            DECLARE tender_recorded_refunds NO SCROLL CURSOR FOR
            SELECT r.refund_id, r.payment_id, r.processor_reference, r.amount_minor, r.currency_code, r.status,
                   (extract(epoch FROM r.created_at) * 1000000)::bigint AS created_us,
                   b.subject_id IS NOT NULL AS booked
              FROM refunds r
              LEFT JOIN (SELECT DISTINCT subject_id FROM settlement_effects
                          WHERE merchant_id = $1 AND kind = 'book_refund') b ON b.subject_id = r.refund_id
             WHERE r.merchant_id = $1
            """, merchantId: merchantId, on: conn) { row in
            let booked = try row.bool(7)
            result.append(RecordedRefund(
                refundId: try row.requiredString(0),
                paymentId: try row.requiredString(1),
                processorReference: try row.string(2),
                amountMinor: try row.int64(3),
                currencyCode: try row.requiredString(4),
                status: booked ? .booked : Self.ledgerStatus(try row.requiredString(5)),
                createdAt: Self.date(microseconds: try row.int64(6))))
        }
        return result
    }

    /// Declares `cursor` with `declare`, hands every row to `body` a page at a time (values read in
    /// place: a million rows make no row objects), and closes it.
    private static func readAll(cursor: StaticString, _ declare: SQL, merchantId: String, on conn: PostgresConnection,
                                _ body: (PostgresRawRow) throws -> Void) throws {
        _ = try conn.execute(declare, [merchantId])
        let name = cursor.description
        defer { _ = try? conn.execute(SQL(unsafeSQL: "CLOSE \(name)")) }
        let fetch = SQL(unsafeSQL: "FETCH \(pageRows) FROM \(name)")
        while try conn.forEachRow(fetch, [], body) == pageRows {}
    }

    private static func date(microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
    }

    /// Payment/refund status → ledger status (docs/finance-store.md §5.7): a succeeded capture waits for
    /// settlement (`pending`), an unfinished one is `authorized`, anything refused never settles.
    static func ledgerStatus(_ status: String) -> RecordedStatus {
        switch status {
        case "succeeded": .pending
        case "pending": .authorized
        default: .rejected
        }
    }
}
