import Crypto
import Foundation
import HTTPServer
import Postgres

/// What merchant validation needs to know about a checkout session.
struct CheckoutSessionGate: Sendable {
    let sessionId: String
    let merchantId: String
    let status: String
    let expired: Bool
    let clientSecretSHA256: [UInt8]

    /// `cs_` and 24 lowercase alphanumerics (the `checkout_sessions.session_id` check constraint).
    static func isWellFormedId(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard bytes.count == 27, bytes.starts(with: Array("cs_".utf8)) else { return false }
        return bytes[3...].allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
    }

    /// Loads the session; expiry is judged by the database clock so every node agrees.
    static func load(id: String, pool: PostgresPool) throws -> CheckoutSessionGate? {
        guard isWellFormedId(id) else { return nil }
        guard let row = try pool.query("""
            SELECT session_id, merchant_id, status, expires_at <= now() AS expired, client_secret_sha256
            FROM checkout_sessions WHERE session_id = $1
            """, [id]).first else { return nil }
        return CheckoutSessionGate(sessionId: try row.decode("session_id"), merchantId: try row.decode("merchant_id"),
                                   status: try row.decode("status"), expired: try row.decode("expired"),
                                   clientSecretSHA256: try row.decode("client_secret_sha256"))
    }
}

/// Problems for session access, shared by this feature's routes.
enum SessionAccessProblems {
    static let notFound = HTTPProblem(.sessionNotFound,
                                      detail: "No such checkout session.")
    static let expired = HTTPProblem(.sessionExpired,
                                     detail: "The checkout session has expired; create a new one.")
    static let notOpen = HTTPProblem(.sessionNotOpen,
                                     detail: "The checkout session is no longer open.")
}

extension TenderApp {
    /// Authorizes a call on session `id` (openapi.yaml): the merchant's API key, which must own the session
    /// (another merchant's session is 404, as if absent), or the session's client secret, whose SHA-256 is
    /// compared in constant time (any mismatch, or an unknown session, is 401). The session must then be
    /// open and unexpired (rule 31: 410 when expired).
    func authorizeOpenSession(_ request: HTTPRequest, id: String) throws -> (CheckoutSessionGate, Merchant) {
        guard let bearer = Self.bearerToken(request) else { throw Problems.unauthorized }
        let session: CheckoutSessionGate
        let merchant: Merchant
        if APIKeyFormat.parse(bearer) != nil {
            guard let caller = try merchants.authenticate(bearer: bearer) else { throw Problems.unauthorized }
            guard let found = try CheckoutSessionGate.load(id: id, pool: pool), found.merchantId == caller.merchantId
            else { throw SessionAccessProblems.notFound }
            session = found
            merchant = caller
        } else {
            // A client secret only proves anything together with its session, so an unknown session is 401 too.
            guard let found = try CheckoutSessionGate.load(id: id, pool: pool),
                  constantTimeEqual(Digest.sha256(bearer), found.clientSecretSHA256),
                  let owner = try merchants.merchant(id: found.merchantId)
            else { throw Problems.unauthorized }
            session = found
            merchant = owner
        }
        if session.status == "expired" || (session.status == "open" && session.expired) {
            throw SessionAccessProblems.expired
        }
        guard session.status == "open" else { throw SessionAccessProblems.notOpen }
        return (session, merchant)
    }
}
