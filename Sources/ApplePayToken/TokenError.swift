/// The one error type of ApplePayToken: a stable code naming the rule that failed, and a detail without secrets.
public struct TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Stable snake_case codes, one per check (see `TokenVerifier` and `PaymentDataDecryptor`).
    public enum Code: String, Sendable, CaseIterable {
        case tokenTooLarge = "token_too_large"
        case tokenMalformed = "token_malformed"
        case unsupportedVersion = "unsupported_version"
        case headerMismatch = "header_mismatch"
        case signatureMalformed = "signature_malformed"
        case leafCertificateMissingOID = "leaf_certificate_missing_oid"
        case intermediateCertificateMissingOID = "intermediate_certificate_missing_oid"
        case digestAlgorithmUnsupported = "digest_algorithm_unsupported"
        case signingTimeMissing = "signing_time_missing"
        case messageDigestMismatch = "message_digest_mismatch"
        case signatureInvalid = "signature_invalid"
        case certificateChainInvalid = "certificate_chain_invalid"
        case tokenExpired = "token_expired"
        case signingTimeInFuture = "signing_time_in_future"
        case unknownMerchantKey = "unknown_merchant_key"
        /// The token names a key the merchant has retired; retired keys never decrypt.
        case merchantKeyRetired = "merchant_key_retired"
        /// The merchant's keys could not be loaded (database unavailable); transient, retry later.
        case merchantKeysUnavailable = "merchant_keys_unavailable"
        case merchantKeyInvalid = "merchant_key_invalid"
        case merchantIdMissing = "merchant_id_missing"
        case decryptionFailed = "decryption_failed"
        case payloadMalformed = "payload_malformed"
        case trustedRootInvalid = "trusted_root_invalid"
        case sandboxFailure = "sandbox_failure"
    }

    /// Machine-readable code.
    public let code: Code
    /// Human-readable detail; never contains token plaintext, keys or PANs.
    public let detail: String

    /// Creates an error.
    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// `code: detail`.
    public var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }
}

/// Hex helpers for the token's hex fields.
enum Hex {
    static func decode(_ text: String) -> [UInt8]? { decode(Array(text.utf8)) }

    static func decode(_ chars: [UInt8]) -> [UInt8]? {
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let hi = nibble(chars[index]), let lo = nibble(chars[index + 1]) else { return nil }
            out.append(hi << 4 | lo)
            index += 2
        }
        return out
    }

    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
