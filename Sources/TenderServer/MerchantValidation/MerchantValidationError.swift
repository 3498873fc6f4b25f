import HTTPClient
import HTTPServer

/// The one error type of merchant validation: a stable machine code, a safe detail, and the HTTP problem
/// a client sees. Apple's own status text is logged, never carried here (docs/apple-pay-rules.md, rule 45).
public struct MerchantValidationError: Error, Sendable, CustomStringConvertible {
    /// Stable snake_case codes; tests and clients branch on these.
    public enum Code: String, Sendable, CaseIterable {
        /// The `validationURL` broke rule 40; nothing was sent.
        case validationURLInvalid = "validation_url_invalid"
        /// The requested `initiativeContext` is not one of the merchant's registered domains (rule 41).
        case initiativeContextInvalid = "initiative_context_invalid"
        /// The merchant has no registered domain to use as `initiativeContext` (rule 41).
        case merchantDomainMissing = "merchant_domain_missing"
        /// The merchant's display name is empty or longer than 64 characters (rule 42).
        case displayNameInvalid = "merchant_display_name_invalid"
        /// The merchant has no active Merchant Identity certificate and key.
        case identityMissing = "merchant_identity_missing"
        /// The identity exists but could not be loaded (unreadable file, key store failure).
        case identityUnreadable = "merchant_identity_unavailable"
        /// Apple answered with a non-2xx status (including a redirect, which is never followed).
        case gatewayRefused = "merchant_validation_failed"
        /// Apple did not answer within the hard timeout (rule 44).
        case timeout = "merchant_validation_timeout"
        /// The mutual TLS handshake failed: identity refused, gateway certificate untrusted, old protocol.
        case tlsFailed = "merchant_validation_tls_failed"
        /// No connection could be made (DNS, refused, refused by the address policy).
        case unreachable = "merchant_validation_unreachable"
        /// Apple's 2xx body was not a JSON object, or was too large.
        case invalidResponse = "merchant_validation_invalid_response"
    }

    /// The machine code.
    public let code: Code
    /// Operator-facing detail; never keys, bodies or Apple's status message.
    public let detail: String
    /// Set for `validationURLInvalid`: which part of rule 40 the URL broke.
    public let urlReason: HTTPClientError.ValidationURLReason?

    /// Builds an error.
    public init(_ code: Code, _ detail: String, urlReason: HTTPClientError.ValidationURLReason? = nil) {
        self.code = code
        self.detail = detail
        self.urlReason = urlReason
    }

    /// `code: detail`.
    public var description: String { "\(code.rawValue): \(detail)" }

    /// The catalogue entry of each code.
    public var problemType: ProblemType {
        switch code {
        case .validationURLInvalid: .validationURLInvalid
        case .initiativeContextInvalid: .initiativeContextInvalid
        case .merchantDomainMissing: .merchantDomainMissing
        case .displayNameInvalid: .merchantDisplayNameInvalid
        case .identityMissing: .merchantIdentityMissing
        case .identityUnreadable: .merchantIdentityUnavailable
        case .gatewayRefused: .merchantValidationFailed
        case .timeout: .merchantValidationTimeout
        case .tlsFailed: .merchantValidationTLSFailed
        case .unreachable: .merchantValidationUnreachable
        case .invalidResponse: .merchantValidationInvalidResponse
        }
    }

    /// The problem+json a client receives: the catalogue's title and detail, the URL reason where there is one.
    public var problem: HTTPProblem {
        switch code {
        case .validationURLInvalid:
            let reason = urlReason?.rawValue ?? "malformed"
            return HTTPProblem(.validationURLInvalid,
                               detail: "validationURL is not an Apple Pay gateway payment-session URL (\(reason)).",
                               errors: [.init(field: "validationURL", code: reason,
                                              message: "Pass event.validationURL from onvalidatemerchant unchanged.")],
                               extra: ["reason": .string(reason)])
        case .initiativeContextInvalid:
            return HTTPProblem(.initiativeContextInvalid,
                               detail: "initiativeContext must be one of the merchant's registered domains.",
                               errors: [.init(field: "initiativeContext", code: "not_registered",
                                              message: "Register the domain with the merchant first.")])
        default:
            return HTTPProblem(problemType)
        }
    }
}
