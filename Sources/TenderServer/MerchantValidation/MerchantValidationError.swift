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

    /// The problem+json a client receives: a generic detail, the URL reason where there is one.
    public var problem: HTTPProblem {
        switch code {
        case .validationURLInvalid:
            let reason = urlReason?.rawValue ?? "malformed"
            return HTTPProblem(status: 400, code: code.rawValue, title: "Invalid validation URL",
                               detail: "validationURL is not an Apple Pay gateway payment-session URL (\(reason)).",
                               errors: [.init(field: "validationURL", code: reason,
                                              message: "Pass event.validationURL from onvalidatemerchant unchanged.")],
                               extra: ["reason": .string(reason)])
        case .initiativeContextInvalid:
            return HTTPProblem(status: 400, code: code.rawValue, title: "Invalid initiative context",
                               detail: "initiativeContext must be one of the merchant's registered domains.",
                               errors: [.init(field: "initiativeContext", code: "not_registered",
                                              message: "Register the domain with the merchant first.")])
        case .merchantDomainMissing:
            return HTTPProblem(status: 409, code: code.rawValue, title: "Merchant has no domain",
                               detail: "The merchant has no registered domain for Apple Pay on the web.")
        case .displayNameInvalid:
            return HTTPProblem(status: 409, code: code.rawValue, title: "Merchant display name invalid",
                               detail: "The merchant's display name must be 1 to 64 characters.")
        case .identityMissing:
            return HTTPProblem(status: 409, code: code.rawValue, title: "Merchant identity missing",
                               detail: "The merchant has no Merchant Identity certificate; import one with `tender keys import --kind identity`.")
        case .identityUnreadable:
            return HTTPProblem(status: 500, code: code.rawValue, title: "Merchant identity unavailable",
                               detail: "The merchant's identity certificate could not be loaded.")
        case .gatewayRefused:
            return HTTPProblem(status: 502, code: code.rawValue, title: "Merchant validation failed",
                               detail: "Apple Pay refused the merchant validation request.")
        case .timeout:
            return HTTPProblem(status: 504, code: code.rawValue, title: "Merchant validation timed out",
                               detail: "Apple Pay did not answer in time; the shopper may retry.")
        case .tlsFailed:
            return HTTPProblem(status: 502, code: code.rawValue, title: "Merchant validation TLS failure",
                               detail: "The secure connection to Apple Pay could not be established.")
        case .unreachable:
            return HTTPProblem(status: 502, code: code.rawValue, title: "Apple Pay unreachable",
                               detail: "Apple Pay's gateway could not be reached.")
        case .invalidResponse:
            return HTTPProblem(status: 502, code: code.rawValue, title: "Invalid merchant session",
                               detail: "Apple Pay's answer was not a merchant session object.")
        }
    }
}
