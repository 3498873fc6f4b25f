import Crypto
import Foundation
import HTTPServer
import Observability
import Payments
import Postgres

extension PrefixedIdentifier {
    /// Webhook endpoints (`we_…`).
    static let webhookEndpoint = PrefixedIdentifier(prefix: "we_")
}

/// One stored endpoint, secrets still sealed.
struct WebhookEndpointRecord: Sendable {
    let endpointId: String
    let merchantId: String
    let url: String
    let enabledEvents: [String]
    let description: String
    let financeFrequency: FinanceFrequency?
    let status: String
    let disabledReason: String?
    let createdAt: Date
    let updatedAt: Date

    init(row: PostgresRow) throws {
        endpointId = try row.decode("endpoint_id")
        merchantId = try row.decode("merchant_id")
        url = try row.decode("url")
        let eventsJSON: String = try row.decode("enabled_events_json")
        enabledEvents = try JSONDecoder().decode([String].self, from: Data(eventsJSON.utf8))
        description = try row.decode("description")
        financeFrequency = try row.decodeIfPresent("finance_frequency", as: String.self).flatMap(FinanceFrequency.init(rawValue:))
        status = try row.decode("status")
        disabledReason = try row.decodeIfPresent("disabled_reason")
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
    }
}

/// Seals and opens endpoint secrets under the master key (AES-256-GCM; associated data binds the blob to
/// its endpoint, merchant and secret version, so a blob copied elsewhere does not open).
struct WebhookSecretBox: Sendable {
    let masterKey: @Sendable () throws -> SecretBytes

    static func associatedData(endpointId: String, merchantId: String, version: Int) -> [UInt8] {
        Array("tender.webhook_endpoints.v1\u{0}\(endpointId)\u{0}\(merchantId)\u{0}\(version)".utf8)
    }

    func seal(_ secret: String, endpointId: String, merchantId: String, version: Int) throws -> [UInt8] {
        do {
            return try KeyEncryption.seal(plaintext: SecretBytes(Array(secret.utf8)), keyEncryptingKey: try masterKey(),
                                          associatedData: Self.associatedData(endpointId: endpointId, merchantId: merchantId,
                                                                              version: version))
        } catch {
            throw TenderError("webhook_secret_seal_failed", "cannot seal the endpoint secret")
        }
    }

    /// The HMAC key of a sealed secret.
    func key(_ sealed: [UInt8], endpointId: String, merchantId: String, version: Int) throws -> [UInt8] {
        let opened: SecretBytes
        do {
            opened = try KeyEncryption.open(sealed: sealed, keyEncryptingKey: try masterKey(),
                                            associatedData: Self.associatedData(endpointId: endpointId, merchantId: merchantId,
                                                                                version: version))
        } catch {
            throw TenderError("webhook_secret_unseal_failed", "endpoint \(endpointId)'s secret does not open")
        }
        guard let key = WebhookSecret.key(String(decoding: opened.unsafeRevealedCopy(), as: UTF8.self)) else {
            throw TenderError("webhook_secret_unseal_failed", "endpoint \(endpointId)'s secret is malformed")
        }
        return key
    }

    /// A fresh secret's text.
    static func newSecret() -> String { WebhookSecret.text(random: SecureRandom.bytes(WebhookSecret.keyBytes)) }
}

/// The validated changes of a create or PATCH (nil = unchanged).
struct WebhookEndpointChanges: Sendable {
    var url: String?
    var enabledEvents: [String]?
    var description: String?
    var financeFrequency: FinanceFrequency?
    var status: String?
}

/// SQL of `webhook_endpoints`, `webhook_deliveries` and `webhook_delivery_attempts` for the API.
enum WebhookEndpointStore {
    static func newEndpointId() -> String { PrefixedIdentifier.webhookEndpoint.mint(randomBytes: SecureRandom.bytes) }

    static func eventsJSON(_ events: [String]) -> String {
        String(decoding: (try? JSONEncoder().encode(events)) ?? Data("[]".utf8), as: UTF8.self)
    }

    /// Inserts a new endpoint; `endpoint_limit_reached` past `endpointsPerMerchantMax`.
    static func create(merchantId: String, endpointId: String, changes: WebhookEndpointChanges, sealed: [UInt8],
                       on conn: PostgresConnection, now: Date) throws -> WebhookEndpointRecord {
        // Serialises creations per merchant so the count check cannot be raced past.
        _ = try conn.query("SELECT 1 FROM merchants WHERE merchant_id = $1 FOR UPDATE", [merchantId])
        let count = try conn.query("SELECT count(*)::bigint AS n FROM webhook_endpoints WHERE merchant_id = $1", [merchantId])
        guard try (count.first?.decode("n", as: Int64.self) ?? 0) < WebhookSettings.endpointsPerMerchantMax else {
            throw HTTPProblem(status: 409, code: "endpoint_limit_reached", title: "Too many endpoints",
                              detail: "A merchant may register at most \(WebhookSettings.endpointsPerMerchantMax) webhook endpoints.")
        }
        let result = try conn.query("""
            INSERT INTO webhook_endpoints (endpoint_id, merchant_id, url, enabled_events, description, finance_frequency,
                                           status, secret_version, secret_sealed, finance_position, created_at, updated_at)
            VALUES ($1, $2, $3, ARRAY(SELECT jsonb_array_elements_text($4::jsonb)), $5, $6, 'enabled', 1, $7,
                    (SELECT coalesce(max(position), 0) FROM finance_feed), $8, $8)
            RETURNING endpoint_id, merchant_id, url, array_to_json(enabled_events)::text AS enabled_events_json, description,
                      finance_frequency, status, disabled_reason, created_at, updated_at
            """, [endpointId, merchantId, changes.url ?? "", eventsJSON(changes.enabledEvents ?? []), changes.description ?? "",
                  changes.financeFrequency?.rawValue, sealed, now])
        guard let row = result.first else { throw TenderError("webhook_endpoint_insert_failed", "no row returned") }
        return try WebhookEndpointRecord(row: row)
    }

    static func list(merchantId: String, on conn: PostgresConnection) throws -> [WebhookEndpointRecord] {
        try conn.query("""
            SELECT endpoint_id, merchant_id, url, array_to_json(enabled_events)::text AS enabled_events_json, description,
                   finance_frequency, status, disabled_reason, created_at, updated_at
              FROM webhook_endpoints WHERE merchant_id = $1 ORDER BY created_at, endpoint_id
            """, [merchantId]).rows.map(WebhookEndpointRecord.init(row:))
    }

    static func get(merchantId: String, endpointId: String, forUpdate: Bool = false,
                    on conn: PostgresConnection) throws -> WebhookEndpointRecord {
        let sql: SQL = forUpdate ? """
            SELECT endpoint_id, merchant_id, url, array_to_json(enabled_events)::text AS enabled_events_json, description,
                   finance_frequency, status, disabled_reason, created_at, updated_at
              FROM webhook_endpoints WHERE merchant_id = $1 AND endpoint_id = $2 FOR UPDATE
            """ : """
            SELECT endpoint_id, merchant_id, url, array_to_json(enabled_events)::text AS enabled_events_json, description,
                   finance_frequency, status, disabled_reason, created_at, updated_at
              FROM webhook_endpoints WHERE merchant_id = $1 AND endpoint_id = $2
            """
        guard let row = try conn.query(sql, [merchantId, endpointId]).first else { throw WebhookProblems.endpointNotFound }
        return try WebhookEndpointRecord(row: row)
    }

    /// Applies a PATCH. Disabling parks the backlog; enabling it again makes every undelivered delivery
    /// due now with a fresh schedule (the backlog is redelivered).
    static func update(merchantId: String, endpointId: String, changes: WebhookEndpointChanges,
                       on conn: PostgresConnection, now: Date) throws -> WebhookEndpointRecord {
        let current = try get(merchantId: merchantId, endpointId: endpointId, forUpdate: true, on: conn)
        let status = changes.status ?? current.status
        let reason: String? = status == "enabled" ? nil : (changes.status == "disabled" ? "merchant" : current.disabledReason)
        let frequency: FinanceFrequency? = changes.financeFrequency ?? current.financeFrequency
        let result = try conn.query("""
            UPDATE webhook_endpoints SET url = $3, enabled_events = ARRAY(SELECT jsonb_array_elements_text($4::jsonb)),
                   description = $5, finance_frequency = $6, status = $7, disabled_reason = $8, updated_at = $9
             WHERE merchant_id = $1 AND endpoint_id = $2
            RETURNING endpoint_id, merchant_id, url, array_to_json(enabled_events)::text AS enabled_events_json, description,
                      finance_frequency, status, disabled_reason, created_at, updated_at
            """, [merchantId, endpointId, changes.url ?? current.url, eventsJSON(changes.enabledEvents ?? current.enabledEvents),
                  changes.description ?? current.description, frequency?.rawValue, status, reason, now])
        guard let row = result.first else { throw WebhookProblems.endpointNotFound }
        if current.status == "disabled" && status == "enabled" {
            _ = try conn.execute("""
                UPDATE webhook_deliveries SET state = 'pending', failures = 0, next_attempt_at = $2
                 WHERE endpoint_id = $1 AND state <> 'delivered'
                """, [endpointId, now])
        } else if current.status == "enabled" && status == "disabled" {
            try park(endpointId: endpointId, on: conn)
        }
        return try WebhookEndpointRecord(row: row)
    }

    /// Moves a disabled endpoint's pending deliveries out of the workers' way (`infinity`).
    static func park(endpointId: String, on conn: PostgresConnection) throws {
        _ = try conn.execute("""
            UPDATE webhook_deliveries SET next_attempt_at = 'infinity' WHERE endpoint_id = $1 AND state = 'pending'
            """, [endpointId])
    }

    /// Deletes the endpoint with its deliveries and attempts.
    static func delete(merchantId: String, endpointId: String, on conn: PostgresConnection) throws {
        guard try conn.execute("DELETE FROM webhook_endpoints WHERE merchant_id = $1 AND endpoint_id = $2",
                               [merchantId, endpointId]) == 1 else { throw WebhookProblems.endpointNotFound }
    }

    /// Installs a new secret; the current one becomes the previous one, signing until `previousExpiresAt`.
    static func rotate(merchantId: String, endpointId: String, box: WebhookSecretBox, on conn: PostgresConnection,
                       now: Date) throws -> String {
        guard let row = try conn.query("""
            SELECT secret_version FROM webhook_endpoints WHERE merchant_id = $1 AND endpoint_id = $2 FOR UPDATE
            """, [merchantId, endpointId]).first else { throw WebhookProblems.endpointNotFound }
        let version = Int(try row.decode("secret_version", as: Int64.self))
        let secret = WebhookSecretBox.newSecret()
        let sealed = try box.seal(secret, endpointId: endpointId, merchantId: merchantId, version: version + 1)
        _ = try conn.execute("""
            UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed, previous_secret_expires_at = $3,
                   secret_sealed = $4, secret_version = secret_version + 1, updated_at = $5
             WHERE merchant_id = $1 AND endpoint_id = $2
            """, [merchantId, endpointId, now.addingTimeInterval(WebhookSettings.previousSecretSeconds), sealed, now])
        return secret
    }

    /// Makes the event due for the endpoint now (creating its delivery when the event predates it).
    static func redeliver(merchantId: String, eventId: String, endpointId: String, on conn: PostgresConnection,
                          now: Date) throws {
        let endpoint = try get(merchantId: merchantId, endpointId: endpointId, on: conn)
        guard try conn.query("SELECT 1 FROM events WHERE merchant_id = $1 AND event_id = $2", [merchantId, eventId]).first != nil
        else { throw HTTPProblem(status: 404, code: "event_not_found", title: "Not found", detail: "No such event.") }
        guard endpoint.status == "enabled" else {
            throw HTTPProblem(status: 409, code: "endpoint_disabled", title: "Endpoint disabled",
                              detail: "Enable the endpoint first; enabling it redelivers its backlog.")
        }
        _ = try conn.execute("""
            INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, next_attempt_at, created_at)
            VALUES ($1, $2, $3, $4, $4)
            ON CONFLICT (event_id, endpoint_id) DO UPDATE
               SET state = 'pending', failures = 0, next_attempt_at = $4,
                   -- Ends any lease on it: an attempt still in flight then no longer marks it delivered, so
                   -- the redelivery cannot be swallowed by the attempt it follows.
                   attempts = webhook_deliveries.attempts + 1
            """, [eventId, endpointId, merchantId, now])
    }

    /// One attempt as `GET …/deliveries` shows it.
    struct AttemptView: Encodable {
        let id: String
        let eventId: String
        let attemptNumber: Int
        let attemptedAt: String
        let httpStatus: Int?
        let error: String?
        let durationMilliseconds: Int
    }

    /// The endpoint's attempts, newest first.
    static func attempts(merchantId: String, endpointId: String, limit: Int, startingAfter: Int64?,
                         on conn: PostgresConnection) throws -> [AttemptView] {
        _ = try get(merchantId: merchantId, endpointId: endpointId, on: conn)
        return try conn.query("""
            SELECT attempt_id, event_id, attempt_number, attempted_at, http_status, error_code, duration_ms
              FROM webhook_delivery_attempts
             WHERE endpoint_id = $1 AND ($2::bigint IS NULL OR attempt_id < $2)
             ORDER BY attempt_id DESC LIMIT $3
            """, [endpointId, startingAfter, limit]).rows.map { row in
            AttemptView(id: "wa_\(try row.decode("attempt_id", as: Int64.self))", eventId: try row.decode("event_id"),
                        attemptNumber: Int(try row.decode("attempt_number", as: Int64.self)),
                        attemptedAt: RFC3339.string(from: try row.decode("attempted_at", as: Date.self)),
                        httpStatus: try row.decodeIfPresent("http_status", as: Int64.self).map { Int($0) },
                        error: try row.decodeIfPresent("error_code"),
                        durationMilliseconds: Int(try row.decode("duration_ms", as: Int64.self)))
        }
    }
}
