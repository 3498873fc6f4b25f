import Crypto
import HTTPServer

/// Who is calling a session endpoint.
enum SessionCaller {
    /// A merchant's API key: any session of that merchant.
    case merchant(Merchant)
    /// A client secret: exactly the session it was issued for.
    case clientSecret(sha256: [UInt8])
}

/// The one authoriser of session routes (checkout, payments, merchant validation; openapi.yaml): a
/// bearer in API-key format must authenticate as a merchant, who may touch only their own sessions
/// (another merchant's reads as absent, 404); any other bearer is taken as a client secret, whose
/// SHA-256 must equal the session's, compared in constant time (401 otherwise).
struct SessionAuthorizer {
    let merchants: MerchantStore

    /// The caller the request's bearer names; 401 without one or for an API key that does not authenticate.
    func caller(_ request: HTTPRequest) throws -> SessionCaller {
        guard let bearer = TenderApp.bearerToken(request) else { throw Problems.unauthorized }
        guard APIKeyFormat.parse(bearer) != nil else { return .clientSecret(sha256: Digest.sha256(bearer)) }
        guard let merchant = try merchants.authenticate(bearer: bearer) else { throw Problems.unauthorized }
        return .merchant(merchant)
    }
}

extension SessionCaller {
    /// What a missing session looks like to this caller: 404 for a merchant (never 403, which would
    /// reveal another merchant's session), 401 for a client secret that names no session.
    var notFound: HTTPProblem {
        switch self {
        case .merchant: return CheckoutProblems.sessionNotFound
        case .clientSecret: return Problems.unauthorized
        }
    }

    /// Another merchant's session is 404; a client secret must hash to the stored one (constant time).
    func authorize(merchantId: String, clientSecretSHA256: [UInt8]) throws(HTTPProblem) {
        switch self {
        case .merchant(let own):
            guard own.merchantId == merchantId else { throw CheckoutProblems.sessionNotFound }
        case .clientSecret(let presented):
            guard constantTimeEqual(presented, clientSecretSHA256) else { throw Problems.unauthorized }
        }
    }
}
