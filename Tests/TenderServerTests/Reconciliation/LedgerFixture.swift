import Foundation
import Postgres
@testable import TenderServer

/// Test-only stand-in for the payments engineer's tables (migrations/0006_payments.sql): exactly the
/// columns reconciliation reads. Once the real migration is merged, `CREATE TABLE IF NOT EXISTS`
/// leaves the real tables alone.
enum LedgerFixture {
    static func install(_ pool: PostgresPool) throws {
        try pool.withConnection { conn in
            try conn.simpleQuery("""
                CREATE TABLE IF NOT EXISTS payments (
                    payment_id           text PRIMARY KEY,
                    merchant_id          text NOT NULL REFERENCES merchants (merchant_id),
                    session_id           text,
                    status               text NOT NULL CHECK (status IN ('succeeded', 'declined', 'pending', 'failed')),
                    amount_minor         bigint NOT NULL,
                    currency_code        text NOT NULL,
                    processor_reference  text,
                    created_at           timestamptz NOT NULL DEFAULT now()
                );
                CREATE TABLE IF NOT EXISTS refunds (
                    refund_id            text PRIMARY KEY,
                    payment_id           text NOT NULL REFERENCES payments (payment_id),
                    merchant_id          text NOT NULL REFERENCES merchants (merchant_id),
                    status               text NOT NULL CHECK (status IN ('succeeded', 'declined', 'pending')),
                    amount_minor         bigint NOT NULL,
                    currency_code        text NOT NULL,
                    processor_reference  text,
                    created_at           timestamptz NOT NULL DEFAULT now()
                );
                """)
        }
    }

    static func payment(_ pool: PostgresPool, merchantId: String, id: String, amountMinor: Int64,
                        currency: String = "USD", status: String = "succeeded", reference: String? = nil,
                        createdAt: Date = Date()) throws {
        // A payment row as the payments service leaves it once the outcome is recorded, on a session of its own.
        let sessionId = "cs_" + id.dropFirst(4)
        try pool.execute("""
            INSERT INTO checkout_sessions (session_id, merchant_id, status, version, currency_code, total_minor,
                                           expires_at, client_secret_sha256, application_data, application_data_sha256)
            VALUES ($1, $2, $3, 1, $4, $5, now() + interval '1 hour', $6, 'AA==', $7)
            """, [sessionId, merchantId, status == "succeeded" ? "paid" : "open", currency, amountMinor,
                  [UInt8](repeating: 7, count: 32), String(repeating: "0", count: 64)])
        try pool.execute("""
            INSERT INTO payments (payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code,
                                  processor_reference, decline_code, failure_code, apple_transaction_id, processor_key,
                                  created_at)
            VALUES ($1, $2, $3, $4, 'outcome_recorded', $5, $6, $7, $8, $9, $10, $11, $12)
            """, [id, merchantId, sessionId, status, amountMinor, currency,
                  reference ?? (status == "succeeded" ? "psp_" + id : nil),
                  status == "declined" ? "do_not_honor" : nil,
                  status == "failed" ? "token_rejected" : nil,
                  status == "failed" ? nil : "tx_" + id,
                  "tender:\(id):authorize", createdAt])
    }

    static func refund(_ pool: PostgresPool, merchantId: String, id: String, paymentId: String,
                       amountMinor: Int64, currency: String = "USD", status: String = "succeeded",
                       reference: String? = nil) throws {
        try pool.execute("""
            INSERT INTO refunds (refund_id, payment_id, merchant_id, status, amount_minor, currency_code,
                                 processor_reference, decline_code, processor_key)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            """, [id, paymentId, merchantId, status, amountMinor, currency, reference,
                  status == "declined" ? "do_not_honor" : nil, "tender:\(id):refund"])
    }

    static func count(_ pool: PostgresPool, _ table: String) throws -> Int {
        let sql: SQL
        switch table {
        case "settlement_reports": sql = "SELECT count(*) AS n FROM settlement_reports"
        case "settlement_item_chunks": sql = "SELECT coalesce(sum(item_count), 0)::int AS n FROM settlement_item_chunks"
        case "settlement_effects": sql = "SELECT count(*) AS n FROM settlement_effects"
        default: sql = "SELECT count(*) AS n FROM settlement_batches"
        }
        return try pool.query(sql).first?.decode("n", as: Int.self) ?? -1
    }
}

/// Real-looking ids: `pay_` / `re_` + 24 lowercase alphanumerics, unique per test run.
func fixtureId(_ prefix: String, _ label: String) -> String {
    let tail = (label + UUID().uuidString.lowercased().filter { $0.isLetter || $0.isNumber })
    return prefix + String(tail.prefix(24))
}
