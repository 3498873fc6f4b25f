import Foundation
import Observability
import Postgres

/// A delivery a worker holds a lease on, with what it needs to send it.
struct ClaimedDelivery: Sendable {
    let deliveryId: Int64
    let eventId: String
    let endpointId: String
    let merchantId: String
    /// The lease token (and the attempt's number): the result is recorded only while it is unchanged.
    let attempt: Int
    let failures: Int
    let url: String
    let secretVersion: Int
    let secretSealed: [UInt8]
    let previousSecretSealed: [UInt8]?
    let previousSecretExpiresAt: Date?
    let body: String

    init(row: PostgresRow) throws {
        deliveryId = try row.decode("delivery_id")
        eventId = try row.decode("event_id")
        endpointId = try row.decode("endpoint_id")
        merchantId = try row.decode("merchant_id")
        attempt = try row.decode("attempts")
        failures = try row.decode("failures")
        url = try row.decode("url")
        secretVersion = try row.decode("secret_version")
        secretSealed = try row.decode("secret_sealed")
        previousSecretSealed = try row.decodeIfPresent("previous_secret_sealed")
        previousSecretExpiresAt = try row.decodeIfPresent("previous_secret_expires_at")
        body = try row.decode("body")
    }
}

/// What one attempt produced: an HTTP status, or our error code when there was no usable answer.
struct WebhookAttemptResult: Sendable, Equatable {
    var httpStatus: Int?
    var errorCode: String?
    var durationMilliseconds: Int
    var retryAfter: String?
}

/// The sender's SQL: claim with `FOR UPDATE SKIP LOCKED` (several nodes, several workers), record, release,
/// and the finance doorbell.
enum WebhookDeliveryStore {
    /// Claims up to `limit` due deliveries of enabled endpoints, leasing them until `leaseUntil`.
    static func claim(now: Date, limit: Int, leaseUntil: Date, on conn: PostgresConnection) throws -> [ClaimedDelivery] {
        try conn.query("""
            WITH due AS (
                SELECT d.delivery_id FROM webhook_deliveries d
                  JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id
                 WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND w.status = 'enabled'
                 ORDER BY d.next_attempt_at
                 LIMIT $2
                   FOR UPDATE OF d SKIP LOCKED)
            UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $3
              FROM due, webhook_endpoints w, events e
             WHERE d.delivery_id = due.delivery_id AND w.endpoint_id = d.endpoint_id AND e.event_id = d.event_id
            RETURNING d.delivery_id, d.event_id, d.endpoint_id, d.merchant_id, d.attempts, d.failures, w.url, w.secret_version,
                      w.secret_sealed, w.previous_secret_sealed, w.previous_secret_expires_at, e.body
            """, [now, limit, leaseUntil]).rows.map(ClaimedDelivery.init(row:))
    }

    /// Gives back a claimed delivery that was never attempted (the worker is stopping).
    static func release(_ delivery: ClaimedDelivery, now: Date, on conn: PostgresConnection) throws {
        _ = try conn.execute("""
            UPDATE webhook_deliveries SET attempts = attempts - 1, next_attempt_at = $3
             WHERE delivery_id = $1 AND attempts = $2 AND state = 'pending'
            """, [delivery.deliveryId, delivery.attempt, now])
    }

    /// Records one attempt and its consequence: delivered; retried at `next`; failed for good with the
    /// endpoint disabled (`retries_exhausted`); or, on 410, the endpoint disabled (`gone`).
    static func record(_ delivery: ClaimedDelivery, result: WebhookAttemptResult, next: Date?, now: Date,
                       on conn: PostgresConnection) throws {
        try recordBatch([(delivery, result, next, now)], on: conn)
    }

    /// The consequence of one attempt whose row is already written.
    private static func apply(_ delivery: ClaimedDelivery, result: WebhookAttemptResult, next: Date?, now: Date,
                              on conn: PostgresConnection) throws {
        let outcome = result.errorCode == nil ? WebhookAttemptOutcome.of(status: result.httpStatus) : .retry
        switch outcome {
        case .delivered:
            _ = try conn.execute("""
                UPDATE webhook_deliveries SET state = 'delivered', delivered_at = $3
                 WHERE delivery_id = $1 AND attempts = $2
                """, [delivery.deliveryId, delivery.attempt, now])
        case .gone:
            _ = try conn.execute("""
                UPDATE webhook_deliveries SET failures = failures + 1 WHERE delivery_id = $1 AND attempts = $2
                """, [delivery.deliveryId, delivery.attempt])
            try disable(endpointId: delivery.endpointId, reason: "gone", now: now, on: conn)
        case .retry:
            if let next {
                _ = try conn.execute("""
                    UPDATE webhook_deliveries SET failures = failures + 1,
                           next_attempt_at = CASE WHEN (SELECT status FROM webhook_endpoints WHERE endpoint_id = $3) = 'enabled'
                                                  THEN $4::timestamptz ELSE 'infinity' END
                     WHERE delivery_id = $1 AND attempts = $2 AND state = 'pending'
                    """, [delivery.deliveryId, delivery.attempt, delivery.endpointId, next])
            } else {
                let changed = try conn.execute("""
                    UPDATE webhook_deliveries SET failures = failures + 1, state = 'failed'
                     WHERE delivery_id = $1 AND attempts = $2 AND state = 'pending'
                    """, [delivery.deliveryId, delivery.attempt])
                if changed == 1 { try disable(endpointId: delivery.endpointId, reason: "retries_exhausted", now: now, on: conn) }
            }
        }
    }

    /// One attempt row of a batch, as `recordBatch` hands it to PostgreSQL.
    private struct AttemptRow: Encodable {
        let delivery_id: Int64
        let endpoint_id: String
        let event_id: String
        let attempt_number: Int
        let attempted_at: String
        let http_status: Int?
        let error_code: String?
        let duration_ms: Int
    }

    /// Records a worker's batch in the caller's transaction: every attempt in one statement, the delivered
    /// ones in another, and the rest (retries, 410, exhaustion) one by one as `record` does.
    static func recordBatch(_ results: [(ClaimedDelivery, WebhookAttemptResult, Date?, Date)], on conn: PostgresConnection) throws {
        guard !results.isEmpty else { return }
        let rows = results.map { delivery, result, _, at in
            AttemptRow(delivery_id: delivery.deliveryId, endpoint_id: delivery.endpointId, event_id: delivery.eventId,
                       attempt_number: delivery.attempt, attempted_at: RFC3339.string(from: at), http_status: result.httpStatus,
                       error_code: result.errorCode, duration_ms: result.durationMilliseconds)
        }
        let json = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
        _ = try conn.execute("""
            INSERT INTO webhook_delivery_attempts (delivery_id, endpoint_id, event_id, attempt_number, attempted_at,
                                                   http_status, error_code, duration_ms)
            SELECT delivery_id, endpoint_id, event_id, attempt_number, attempted_at, http_status, error_code, duration_ms
              FROM jsonb_to_recordset($1::jsonb) AS a(delivery_id bigint, endpoint_id text, event_id text, attempt_number integer,
                                                      attempted_at timestamptz, http_status integer, error_code text,
                                                      duration_ms integer)
            """, [json])
        let delivered = rows.filter { row in
            row.error_code == nil && WebhookAttemptOutcome.of(status: row.http_status) == .delivered
        }
        if !delivered.isEmpty {
            _ = try conn.execute("""
                UPDATE webhook_deliveries d SET state = 'delivered', delivered_at = a.attempted_at
                  FROM jsonb_to_recordset($1::jsonb) AS a(delivery_id bigint, attempt_number integer, attempted_at timestamptz)
                 WHERE d.delivery_id = a.delivery_id AND d.attempts = a.attempt_number
                """, [String(decoding: try JSONEncoder().encode(delivered), as: UTF8.self)])
        }
        for (delivery, result, next, at) in results
        where !(result.errorCode == nil && WebhookAttemptOutcome.of(status: result.httpStatus) == .delivered) {
            try apply(delivery, result: result, next: next, now: at, on: conn)
        }
    }

    /// Disables an enabled endpoint and parks its pending deliveries.
    static func disable(endpointId: String, reason: String, now: Date, on conn: PostgresConnection) throws {
        let changed = try conn.execute("""
            UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $2, updated_at = $3
             WHERE endpoint_id = $1 AND status = 'enabled'
            """, [endpointId, reason, now])
        if changed == 1 { try WebhookEndpointStore.park(endpointId: endpointId, on: conn) }
    }

    /// `data.object` of a `finance.changes_available` event.
    struct FinanceDoorbell: Encodable {
        let accountIDs: [String]
        let changes: Int64
    }

    /// Rings the finance doorbell of every subscribed endpoint whose interval has passed and whose merchant's
    /// finance store changed since its last one: one event and one delivery per endpoint. Returns the events
    /// written. Safe on several nodes: each endpoint is re-read under its row lock.
    @discardableResult
    static func ringFinanceDoorbells(now: Date, pool: PostgresPool) throws -> [String] {
        let candidates = try pool.query("""
            SELECT endpoint_id FROM webhook_endpoints
             WHERE finance_frequency IS NOT NULL AND status = 'enabled'
               AND ('finance.changes_available' = ANY (enabled_events) OR '*' = ANY (enabled_events))
            """).rows.map { try $0.decode("endpoint_id", as: String.self) }
        var written: [String] = []
        for endpointId in candidates {
            if let eventId = try pool.transaction({ try ringFinanceDoorbell(endpointId: endpointId, now: now, on: $0) }) {
                written.append(eventId)
            }
        }
        return written
    }

    private static func ringFinanceDoorbell(endpointId: String, now: Date, on conn: PostgresConnection) throws -> String? {
        guard let endpoint = try conn.query("""
            SELECT merchant_id, finance_frequency, finance_position, finance_notified_at FROM webhook_endpoints
             WHERE endpoint_id = $1 AND status = 'enabled' AND finance_frequency IS NOT NULL
               FOR UPDATE SKIP LOCKED
            """, [endpointId]).first,
              let frequency = FinanceFrequency(rawValue: try endpoint.decode("finance_frequency")),
              frequency.allows(now: now, last: try endpoint.decodeIfPresent("finance_notified_at")) else { return nil }
        let merchantId: String = try endpoint.decode("merchant_id")
        let position: Int64 = try endpoint.decode("finance_position")
        guard let summary = try conn.query("""
            SELECT count(*)::bigint AS changes, coalesce(max(position), 0)::bigint AS last_position,
                   coalesce(array_to_json((array_agg(DISTINCT CASE WHEN scope_kind = 'accounts' THEN entity_id
                                                                    ELSE scope_id END))[1:100])::text, '[]') AS accounts
              FROM finance_feed WHERE merchant_id = $1 AND position > $2
            """, [merchantId, position]).first else { return nil }
        let changes: Int64 = try summary.decode("changes")
        guard changes > 0 else { return nil }
        let accounts = try JSONDecoder().decode([String].self, from: Data(try summary.decode("accounts", as: String.self).utf8))
        let eventId = try EventOutbox.append(.financeChangesAvailable, objectId: endpointId,
                                             object: FinanceDoorbell(accountIDs: accounts, changes: changes),
                                             merchantId: merchantId, on: conn, now: now)
        _ = try conn.execute("""
            INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $4)
            """, [eventId, endpointId, merchantId, now])
        _ = try conn.execute("""
            UPDATE webhook_endpoints SET finance_position = $2, finance_notified_at = $3 WHERE endpoint_id = $1
            """, [endpointId, try summary.decode("last_position", as: Int64.self), now])
        return eventId
    }
}
