import Crypto
import Foundation
import HTTPServer
import Postgres

/// `Idempotency-Key` handling (docs/reliability-security.md §1.4, rules I1–I8).
public enum Idempotency {
    /// Longest accepted key (I2).
    public static let keyBytesMax = 255

    /// The request's key: nil when absent; 400 `idempotency_key_invalid` when malformed (I2).
    public static func key(_ request: HTTPRequest) throws(HTTPProblem) -> String? {
        guard let raw = request.headers["Idempotency-Key"] else { return nil }
        var key = raw.trimmingCharacters(in: .whitespaces)
        // The IETF draft sends the key as a structured-field string: "…".
        if key.count >= 2 && key.hasPrefix("\"") && key.hasSuffix("\"") { key = String(key.dropFirst().dropLast()) }
        guard (1...keyBytesMax).contains(key.utf8.count),
              key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7e }) else {
            throw HTTPProblem(.idempotencyKeyInvalid,
                              detail: "Idempotency-Key must be 1-255 printable ASCII characters.")
        }
        return key
    }

    /// Like `key(_:)` but the header is mandatory (I1).
    public static func requiredKey(_ request: HTTPRequest) throws(HTTPProblem) -> String {
        guard let key = try key(request) else {
            throw HTTPProblem(.idempotencyKeyMissing,
                              detail: "This endpoint requires an Idempotency-Key header.")
        }
        return key
    }

    /// SHA-256 over method, path and the exact body bytes: a retry must resend the same request.
    public static func fingerprint(_ request: HTTPRequest) -> [UInt8] {
        Digest.sha256(Array("\(request.method) \(request.path)\n".utf8) + request.body)
    }

    static let reusedProblem = HTTPProblem(.idempotencyKeyReused,
        detail: "This Idempotency-Key was used with a different request.")

    static func inProgressProblem(retryAfterSeconds: Int) -> HTTPProblem {
        HTTPProblem(.idempotencyKeyInProgress,
                    detail: "A request with this Idempotency-Key is still being processed.",
                    headers: HTTPHeaders([("Retry-After", String(retryAfterSeconds))]))
    }

    /// Runs a single-phase operation (all its effects are local and commit together) under a key.
    ///
    /// The key row is inserted in the same transaction as the effect, so a concurrent request with the
    /// same key waits on the unique index and then replays the committed response. A body that throws
    /// rolls everything back, so validation failures are not stored (I7) and a corrected retry works.
    /// `storing` picks the bytes kept for the replay and `replaying` rebuilds the response from them, so
    /// a secret in the response can be left out of the row and restored on replay.
    public static func singlePhase(pool: PostgresPool, merchantId: String, key: String?, request: HTTPRequest,
                                   storing: (HTTPResponse) throws -> [UInt8] = { $0.body },
                                   replaying: (HTTPResponse) throws -> HTTPResponse = { $0 },
                                   _ body: (PostgresConnection) throws -> HTTPResponse) throws -> HTTPResponse {
        guard let key else {
            return try pool.transaction { conn in try body(conn) }
        }
        let fingerprint = fingerprint(request)
        return try pool.transaction { conn in
            let inserted = try conn.query("""
                INSERT INTO idempotency_keys (merchant_id, idempotency_key, request_fingerprint)
                VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1 AS fresh
                """, [merchantId, key, fingerprint])
            if inserted.first == nil {
                return try replaying(try replay(conn: conn, merchantId: merchantId, key: key, fingerprint: fingerprint))
            }
            let response = try body(conn)
            _ = try conn.execute("""
                UPDATE idempotency_keys SET response_status = $3, response_body = $4, finished_at = now(),
                       recovery_point = 'finished'
                WHERE merchant_id = $1 AND idempotency_key = $2
                """, [merchantId, key, response.status, try storing(response)])
            return response
        }
    }

    /// The stored outcome for an existing key: replay, 422 for another request, 409 while unfinished.
    static func replay(conn: PostgresConnection, merchantId: String, key: String, fingerprint: [UInt8]) throws -> HTTPResponse {
        guard let row = try conn.query("""
            SELECT request_fingerprint, response_status, response_body FROM idempotency_keys
            WHERE merchant_id = $1 AND idempotency_key = $2
            """, [merchantId, key]).first else {
            throw inProgressProblem(retryAfterSeconds: 1)
        }
        let stored: [UInt8] = try row.decode("request_fingerprint")
        guard constantTimeEqual(stored, fingerprint) else { throw reusedProblem }
        guard let status = try row.decodeIfPresent("response_status", as: Int.self),
              let body = try row.decodeIfPresent("response_body", as: [UInt8].self) else {
            throw inProgressProblem(retryAfterSeconds: 1)
        }
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Idempotent-Replayed", "true")])
        if status >= 400 { headers.replaceOrAdd("Content-Type", "application/problem+json") }
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}
