internal import COpenSSL

/// The one error type of the Crypto module: a stable machine code plus a human detail without secrets.
public struct CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Stable snake_case codes; callers and tests match on these, never on `detail`.
    public enum Code: String, Sendable, CaseIterable {
        case opensslFailure = "openssl_failure"
        case invalidArgument = "invalid_argument"
        case keyMalformed = "key_malformed"
        case keyEncryptedUnsupported = "key_encrypted_unsupported"
        case keyTypeUnsupported = "key_type_unsupported"
        case keyMismatch = "key_mismatch"
        case certificateMalformed = "certificate_malformed"
        case cmsMalformed = "cms_malformed"
        case signerCertificateMissing = "signer_certificate_missing"
        case digestAlgorithmUnsupported = "digest_algorithm_unsupported"
        case messageDigestMismatch = "message_digest_mismatch"
        case signatureInvalid = "signature_invalid"
        case certificateExpired = "certificate_expired"
        case certificateNotYetValid = "certificate_not_yet_valid"
        case chainInvalid = "chain_invalid"
        case decryptionFailed = "decryption_failed"
        case sealedKeyMalformed = "sealed_key_malformed"
        case unsupportedVersion = "unsupported_version"
    }

    /// Machine-readable code.
    public let code: Code
    /// Human-readable detail (OpenSSL reason strings, never key or plaintext material).
    public let detail: String

    /// Creates an error with `code` and `detail`.
    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// `code: detail`.
    public var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }

    /// Builds an error from the OpenSSL error queue, draining it so stale entries never leak into later calls.
    static func openssl(_ code: Code, _ context: String) -> CryptoError {
        var reasons: [String] = []
        while true {
            let e = ERR_get_error()
            if e == 0 { break }
            if reasons.count < 4 {
                var buf = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(e, &buf, buf.count)
                reasons.append(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return CryptoError(code, reasons.isEmpty ? context : "\(context): \(reasons.joined(separator: "; "))")
    }

    /// Drops anything left in the OpenSSL error queue after a tolerated failure.
    static func clearQueue() { ERR_clear_error() }
}
