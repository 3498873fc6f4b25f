import Foundation
import HTTPServer
import Payments
import Postgres

/// A session row as an update sees it, locked `FOR UPDATE` for the transaction.
struct LockedSession {
    let sessionId: String
    let merchantId: String
    /// Status and expiry (the domain rules decide what they allow).
    let state: CheckoutSessionState
    let version: Int
    let clientSecretSHA256: [UInt8]
    /// PostgreSQL's clock when the row was locked, so every node judges expiry alike.
    let lockedAtMilliseconds: Int64
}

/// One stored version of a session.
struct StoredVersion {
    let version: Int
    let event: String
    /// `PricedCheckout` JSON.
    let checkoutJSON: String
    let inputSHA256: [UInt8]?
    /// The update dictionary returned for the event that produced this version.
    let responseJSON: String?
}

/// A session with its latest version, for `GET`.
struct SessionSnapshot {
    let sessionId: String
    let merchantId: String
    let status: String
    let version: Int
    let currencyCode: String
    let totalMinor: Int64
    let expiresAtMilliseconds: Int64
    let isPastExpiry: Bool
    let clientSecretSHA256: [UInt8]
    let checkoutJSON: String
}

/// SQL for checkout sessions and their versions (migrations/0003). Each statement sits with its decoding.
enum CheckoutStore {
    struct NewSession {
        let sessionId: String
        let merchantId: String
        let currencyCode: String
        let totalMinor: Int64
        let expiresAtRFC3339: String
        let clientSecretSHA256: [UInt8]
        let applicationData: String
        let applicationDataSHA256Hex: String
        let metadataJSON: String
        let checkoutJSON: String
    }

    /// Inserts the session and its version 1 in one statement.
    static func insert(_ s: NewSession, on conn: PostgresConnection) throws {
        _ = try conn.execute("""
            WITH session AS (
                INSERT INTO checkout_sessions (session_id, merchant_id, status, version, currency_code, total_minor,
                    expires_at, client_secret_sha256, application_data, application_data_sha256, metadata)
                VALUES ($1, $2, 'open', 1, $3, $4, $5::timestamptz, $6, $7, $8, $9::jsonb)
                RETURNING session_id
            )
            INSERT INTO checkout_session_versions (session_id, version, event, total_minor, checkout)
            SELECT session_id, 1, 'created', $4, $10 FROM session
            """,
            [s.sessionId, s.merchantId, s.currencyCode, s.totalMinor, s.expiresAtRFC3339, s.clientSecretSHA256,
             s.applicationData, s.applicationDataSHA256Hex, s.metadataJSON, s.checkoutJSON])
    }

    /// Locks the session row; later updates of the same session queue here (no lost update).
    static func lock(_ sessionId: String, on conn: PostgresConnection) throws -> LockedSession? {
        guard let row = try conn.query("""
            SELECT session_id, merchant_id, status, version, client_secret_sha256,
                   (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms, (extract(epoch FROM now()) * 1000)::bigint AS now_ms
            FROM checkout_sessions WHERE session_id = $1 FOR UPDATE
            """, [sessionId]).first else { return nil }
        return LockedSession(sessionId: try row.decode("session_id"), merchantId: try row.decode("merchant_id"),
                             state: CheckoutSessionState(status: try row.decodeEnum("status"),
                                                         expiresAtMilliseconds: try row.decode("expires_ms")),
                             version: try row.decode("version"), clientSecretSHA256: try row.decode("client_secret_sha256"),
                             lockedAtMilliseconds: try row.decode("now_ms"))
    }

    /// One version. Read in its own statement after the lock: a join inside `FOR UPDATE` would be
    /// re-checked against the old version row after waiting and silently return nothing.
    static func version(_ sessionId: String, _ version: Int, on conn: PostgresConnection) throws -> StoredVersion? {
        guard let row = try conn.query("""
            SELECT version, event, checkout::text AS checkout, input_sha256, response::text AS response
            FROM checkout_session_versions WHERE session_id = $1 AND version = $2
            """, [sessionId, version]).first else { return nil }
        return StoredVersion(version: try row.decode("version"), event: try row.decode("event"),
                             checkoutJSON: try row.decode("checkout"),
                             inputSHA256: try row.decodeIfPresent("input_sha256"),
                             responseJSON: try row.decodeIfPresent("response"))
    }

    /// Stores `version` and moves the session to it only if the row is still at `version - 1`, open and
    /// before its expiry (the conditions `CheckoutSessionState.updateRefusal` accepts, on PostgreSQL's
    /// clock), and commits: one statement, one round trip with its BEGIN and COMMIT. False when the row
    /// has moved on or stopped accepting updates; then nothing was written. A concurrent writer's lock is
    /// waited for and the conditions are checked again on the row it left. Under the session's lock (the
    /// locked way) the conditions are the ones just checked, on the same transaction's clock, so it stores.
    static func appendIfCurrentAndCommit(sessionId: String, version: Int, event: String, totalMinor: Int64, checkoutJSON: String,
                                         inputSHA256: [UInt8], responseJSON: String, on conn: PostgresConnection) throws -> Bool {
        try conn.executeAndCommit("""
            WITH s AS (
                UPDATE checkout_sessions SET version = $2, total_minor = $4, updated_at = now()
                WHERE session_id = $1 AND version = $2 - 1 AND status = 'open'
                  AND (extract(epoch FROM expires_at) * 1000)::bigint > (extract(epoch FROM now()) * 1000)::bigint
                RETURNING session_id
            )
            INSERT INTO checkout_session_versions (session_id, version, event, total_minor, checkout, input_sha256, response)
            SELECT session_id, $2, $3, $4, $5, $6, $7 FROM s
            """, [sessionId, version, event, totalMinor, checkoutJSON, inputSHA256, responseJSON]) == 1
    }

    /// The session and its latest version, read in one statement (one snapshot).
    static func snapshot(_ sessionId: String, on conn: PostgresConnection) throws -> SessionSnapshot? {
        guard let row = try conn.query("""
            SELECT s.session_id, s.merchant_id, s.status, s.version, s.currency_code, s.total_minor,
                   (extract(epoch FROM s.expires_at) * 1000)::bigint AS expires_ms, s.expires_at <= now() AS past_expiry,
                   s.client_secret_sha256, v.checkout::text AS checkout
            FROM checkout_sessions s
            JOIN checkout_session_versions v ON v.session_id = s.session_id AND v.version = s.version
            WHERE s.session_id = $1
            """, [sessionId]).first else { return nil }
        return SessionSnapshot(
            sessionId: try row.decode("session_id"), merchantId: try row.decode("merchant_id"),
            status: try row.decode("status"), version: try row.decode("version"),
            currencyCode: try row.decode("currency_code"), totalMinor: try row.decode("total_minor"),
            expiresAtMilliseconds: try row.decode("expires_ms"), isPastExpiry: try row.decode("past_expiry"),
            clientSecretSHA256: try row.decode("client_secret_sha256"), checkoutJSON: try row.decode("checkout"))
    }
}
