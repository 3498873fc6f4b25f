/// The one error type of HTTPClient: a stable machine `code`, curl's text, and no request data.
public struct HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable snake_case machine codes; callers and tests branch on these, never on `message`.
    public enum Code: String, Sendable, CaseIterable {
        /// The connect or total deadline passed.
        case timeout
        /// No connection could be made, or it broke while the exchange was running.
        case connectionFailed = "connection_failed"
        /// The TLS handshake failed: untrusted or mismatched peer, client certificate refused, old protocol.
        case tlsFailed = "tls_failed"
        /// The response body or header block passed its configured limit.
        case responseTooLarge = "response_too_large"
        /// The URL could not be parsed.
        case invalidURL = "invalid_url"
        /// The URL's scheme is not in the allowed protocols (https only unless relaxed for tests).
        case protocolNotAllowed = "protocol_not_allowed"
        /// The request itself is malformed (method, header name or value, options); nothing was sent.
        case invalidRequest = "invalid_request"
        /// The connect hook refused every address the host name resolved to.
        case addressNotAllowed = "address_not_allowed"
        /// An Apple Pay `validationURL` broke rule 40 (see `reason`); nothing was sent.
        case validationURLInvalid = "validation_url_invalid"
        /// Any other libcurl failure.
        case other
    }

    /// Why a merchant-validation URL was refused (docs/apple-pay-rules.md, rule 40).
    public enum ValidationURLReason: String, Sendable, CaseIterable {
        /// Longer than `MerchantValidationURL.urlBytesMax`.
        case tooLong = "too_long"
        /// Contains bytes outside printable ASCII, a backslash, or an unparseable authority.
        case malformed
        /// Not of the form `scheme://authority/...`.
        case notAbsolute = "not_absolute"
        /// Scheme other than `https`.
        case schemeNotHTTPS = "scheme_not_https"
        /// `user@` or `user:password@` before the host.
        case userinfoPresent = "userinfo_present"
        /// The host is an IPv4 (any numeric form) or IPv6 literal.
        case ipLiteral = "ip_literal"
        /// The host is not exactly one of the allowed gateway hosts.
        case hostNotAllowed = "host_not_allowed"
        /// A port other than 443 (or a non-canonical spelling of it).
        case portNotAllowed = "port_not_allowed"
        /// A path other than `/paymentservices/paymentSession` or `/paymentservices/startSession`.
        case pathNotAllowed = "path_not_allowed"
        /// A `?query`, even an empty one.
        case queryPresent = "query_present"
        /// A `#fragment`, even an empty one.
        case fragmentPresent = "fragment_present"
    }

    /// The machine code.
    public var code: Code
    /// Human-readable detail (libcurl's error text or the broken rule); never request bodies or keys.
    public var message: String
    /// True when the request may have reached the server, so a money-moving caller must not assume it failed.
    public var outcomeUnknown: Bool
    /// The libcurl result code when the error came from libcurl, for diagnostics.
    public var curlCode: Int?
    /// Set only for `validationURLInvalid`.
    public var validationURLReason: ValidationURLReason?

    /// Builds an error; `outcomeUnknown` defaults to false (nothing reached the server).
    public init(code: Code, message: String, outcomeUnknown: Bool = false, curlCode: Int? = nil,
                validationURLReason: ValidationURLReason? = nil) {
        self.code = code
        self.message = message
        self.outcomeUnknown = outcomeUnknown
        self.curlCode = curlCode
        self.validationURLReason = validationURLReason
    }

    /// `code: message`, with the reason for URL refusals.
    public var description: String {
        var text = "\(code.rawValue): \(message)"
        if let validationURLReason { text += " (\(validationURLReason.rawValue))" }
        if outcomeUnknown { text += " [outcome unknown]" }
        return text
    }
}
