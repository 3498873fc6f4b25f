import Crypto
import Foundation
import HTTPServer
import Payments
import Postgres

/// What merchant validation needs to know about a checkout session.
struct CheckoutSessionGate: Sendable {
    let sessionId: String
    let merchantId: String
    /// Status and expiry (the domain rules decide what they allow).
    let state: CheckoutSessionState
    /// The database's clock when the row was read, so every node judges expiry alike.
    let readAtMilliseconds: Int64
    let clientSecretSHA256: [UInt8]

    /// `cs_` and 24 lowercase alphanumerics (the `checkout_sessions.session_id` check constraint).
    static func isWellFormedId(_ id: String) -> Bool { PrefixedIdentifier.checkoutSession.isValid(id) }

    /// Loads the session; expiry is judged by the database clock so every node agrees.
    static func load(id: String, pool: PostgresPool) throws -> CheckoutSessionGate? {
        guard isWellFormedId(id) else { return nil }
        guard let row = try pool.query("""
            SELECT session_id, merchant_id, status, client_secret_sha256,
                   (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms, (extract(epoch FROM now()) * 1000)::bigint AS now_ms
            FROM checkout_sessions WHERE session_id = $1
            """, [id]).first else { return nil }
        return CheckoutSessionGate(sessionId: try row.decode("session_id"), merchantId: try row.decode("merchant_id"),
                                   state: CheckoutSessionState(status: try row.decodeEnum("status"),
                                                               expiresAtMilliseconds: try row.decode("expires_ms")),
                                   readAtMilliseconds: try row.decode("now_ms"),
                                   clientSecretSHA256: try row.decode("client_secret_sha256"))
    }
}

/// Problems for session access, shared by this feature's routes.
enum SessionAccessProblems {
    static let notFound = HTTPProblem(status: 404, code: "session_not_found", title: "Not found",
                                      detail: "No such checkout session.")
    static let expired = HTTPProblem(status: 410, code: "session_expired", title: "Checkout session expired",
                                     detail: "The checkout session has expired; create a new one.")
    static let notOpen = HTTPProblem(status: 409, code: "session_not_open", title: "Checkout session closed",
                                     detail: "The checkout session is no longer open.")
}

extension TenderApp {
    /// Authorizes a call on session `id` (openapi.yaml): the merchant's API key, which must own the session
    /// (another merchant's session is 404, as if absent), or the session's client secret, whose SHA-256 is
    /// compared in constant time (any mismatch, or an unknown session, is 401). The session must then be
    /// open and unexpired (rule 31: 410 when expired).
    func authorizeOpenSession(_ request: HTTPRequest, id: String) throws -> (CheckoutSessionGate, Merchant) {
        let caller = try SessionAuthorizer(merchants: merchants).caller(request)
        // A client secret only proves anything together with its session, so an unknown session is 401 for it.
        guard let session = try CheckoutSessionGate.load(id: id, pool: pool) else { throw caller.notFound }
        try caller.authorize(merchantId: session.merchantId, clientSecretSHA256: session.clientSecretSHA256)
        let merchant: Merchant
        switch caller {
        case .merchant(let own):
            merchant = own
        case .clientSecret:
            guard let owner = try merchants.merchant(id: session.merchantId) else { throw Problems.unauthorized }
            merchant = owner
        }
        switch session.state.updateRefusal(atMilliseconds: session.readAtMilliseconds) {
        case .expired?: throw SessionAccessProblems.expired
        case .notOpen?, .alreadyPaid?: throw SessionAccessProblems.notOpen
        case nil: break
        }
        return (session, merchant)
    }
}
