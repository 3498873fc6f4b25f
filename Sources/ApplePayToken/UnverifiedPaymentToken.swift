import Foundation

/// Size limits applied before and during parsing (STYLE: a named limit on everything that grows).
public struct TokenLimits: Sendable, Equatable {
    /// Whole token JSON, bytes. Real EC_v1 tokens are ~3–4 KB, RSA_v1 ~5–6 KB.
    public var tokenBytesMax: Int = 32_768
    /// JSON nesting depth, of the token and of its decrypted payload.
    public var jsonDepthMax: Int = 8
    /// Base64 `data`, decoded bytes.
    public var encryptedDataBytesMax: Int = 16_384
    /// Base64 `signature` (CMS), decoded bytes.
    public var signatureBytesMax: Int = 16_384
    /// Any single header string (ephemeralPublicKey, wrappedKey, publicKeyHash, transactionId, applicationData), characters.
    public var headerFieldBytesMax: Int = 1_024
    /// Decrypted payload, bytes.
    public var decryptedPayloadBytesMax: Int = 16_384

    /// The documented defaults.
    public init() {}
}

/// The token version (`paymentData.version`).
public enum PaymentTokenVersion: String, Sendable {
    /// Elliptic curve: ECDH + AES-256-GCM.
    case ecV1 = "EC_v1"
    /// RSA: RSA-OAEP key wrap + AES-128-GCM.
    case rsaV1 = "RSA_v1"
}

/// `ApplePayPaymentMethod` as Apple Pay JS passes it; none of it is trusted (it is outside the signature).
public struct PaymentMethodInfo: Sendable, Equatable, Codable {
    /// e.g. "Visa 0326".
    public let displayName: String?
    /// e.g. "Visa".
    public let network: String?
    /// "debit" | "credit" | "prepaid" | "store".
    public let type: String?
}

/// A token as received: parsed within limits, nothing verified. Only `TokenVerifier` turns it into a
/// `VerifiedPaymentToken`.
public struct UnverifiedPaymentToken: Sendable {
    /// Raw `version` string.
    public let version: String
    /// Decoded `data`.
    public let encryptedData: [UInt8]
    /// Decoded `signature` (CMS DER).
    public let signature: [UInt8]
    /// Decoded `header.ephemeralPublicKey` (EC_v1).
    public let ephemeralPublicKey: [UInt8]?
    /// Decoded `header.wrappedKey` (RSA_v1).
    public let wrappedKey: [UInt8]?
    /// Decoded `header.publicKeyHash`.
    public let publicKeyHash: [UInt8]
    /// `header.transactionId` as sent (hex).
    public let transactionIdHex: String
    /// `header.applicationData` as sent (hex SHA-256), if present.
    public let applicationDataHex: String?
    /// The wrapper's `paymentMethod`, when the wrapper was sent.
    public let paymentMethod: PaymentMethodInfo?
    /// The wrapper's `transactionIdentifier`, when the wrapper was sent.
    public let transactionIdentifier: String?
    let transactionId: [UInt8]
    let applicationData: [UInt8]

    /// Parses the token JSON (`{paymentData, paymentMethod, transactionIdentifier}` or a bare paymentData).
    public init(json: [UInt8], limits: TokenLimits = TokenLimits()) throws(TokenError) {
        // Shape and limits come first: they are the cheapest checks (STYLE validation order).
        guard json.count <= limits.tokenBytesMax else {
            throw TokenError(.tokenTooLarge, "token is \(json.count) bytes, limit \(limits.tokenBytesMax)")
        }
        let fields: TokenFields
        do {
            fields = try json.withUnsafeBufferPointer { (buffer) throws(TokenFields.Failure) in
                try TokenFields(buffer, depthMax: limits.jsonDepthMax)
            }
        } catch {
            // Nesting beyond the limit is reported as such wherever the text is also malformed.
            try UnverifiedPaymentToken.checkDepth(json, max: limits.jsonDepthMax)
            throw TokenError(.tokenMalformed, error.inBarePaymentData ? "paymentData missing or incomplete"
                                                                       : "token is not a JSON object of the expected shape")
        }
        for field in [fields.ephemeralPublicKey, fields.wrappedKey, fields.publicKeyHash, fields.transactionId, fields.applicationData] {
            if let field, field.count > limits.headerFieldBytesMax {
                throw TokenError(.tokenTooLarge, "header field longer than \(limits.headerFieldBytesMax)")
            }
        }
        guard fields.data.count <= (limits.encryptedDataBytesMax / 3 + 1) * 4 else {
            throw TokenError(.tokenTooLarge, "data longer than \(limits.encryptedDataBytesMax) bytes")
        }
        guard fields.signature.count <= (limits.signatureBytesMax / 3 + 1) * 4 else {
            throw TokenError(.tokenTooLarge, "signature longer than \(limits.signatureBytesMax) bytes")
        }
        version = String(decoding: fields.version, as: UTF8.self)
        encryptedData = try UnverifiedPaymentToken.base64(fields.data, field: "data")
        signature = try UnverifiedPaymentToken.base64(fields.signature, field: "signature")
        guard encryptedData.count <= limits.encryptedDataBytesMax else {
            throw TokenError(.tokenTooLarge, "data is \(encryptedData.count) bytes, limit \(limits.encryptedDataBytesMax)")
        }
        guard signature.count <= limits.signatureBytesMax else {
            throw TokenError(.tokenTooLarge, "signature is \(signature.count) bytes, limit \(limits.signatureBytesMax)")
        }
        ephemeralPublicKey = try fields.ephemeralPublicKey.map { (text) throws(TokenError) in
            try UnverifiedPaymentToken.base64(text, field: "ephemeralPublicKey")
        }
        wrappedKey = try fields.wrappedKey.map { (text) throws(TokenError) in try UnverifiedPaymentToken.base64(text, field: "wrappedKey") }
        publicKeyHash = try UnverifiedPaymentToken.base64(fields.publicKeyHash, field: "publicKeyHash")
        guard publicKeyHash.count == 32 else { throw TokenError(.tokenMalformed, "publicKeyHash is not a SHA-256") }
        // transactionId and applicationData are hex in JSON and hex-decoded before signing (Apple step 1.d).
        guard let txid = Hex.decode(fields.transactionId), !txid.isEmpty else {
            throw TokenError(.tokenMalformed, "transactionId is not hex")
        }
        transactionIdHex = String(decoding: fields.transactionId, as: UTF8.self)
        transactionId = txid
        if let appData = fields.applicationData {
            guard let bytes = Hex.decode(appData), bytes.count == 32 else {
                throw TokenError(.tokenMalformed, "applicationData is not a hex SHA-256")
            }
            applicationDataHex = String(decoding: appData, as: UTF8.self)
            applicationData = bytes
        } else {
            applicationDataHex = nil
            applicationData = []
        }
        paymentMethod = fields.paymentMethod
        transactionIdentifier = fields.transactionIdentifier
    }

    /// The bytes the CMS signature covers: ephemeralPublicKey|wrappedKey ‖ data ‖ transactionId ‖ applicationData.
    public var signedContent: [UInt8] {
        (ephemeralPublicKey ?? wrappedKey ?? []) + encryptedData + transactionId + applicationData
    }

    /// Apple writes every binary token field as canonical padded Base64 (RFC 4648 §4): exactly the
    /// padding the length needs, no whitespace, zero bits below the padding. Anything else (an extra
    /// `=`, a missing one, a line break) is not a token Apple produced, so it is refused rather than
    /// read leniently: only text that is the canonical encoding of the bytes it decodes to is accepted.
    static func base64(_ text: String, field: String) throws(TokenError) -> [UInt8] {
        try base64(Array(text.utf8), field: field)
    }

    /// `base64(_:field:)` over the field's unescaped UTF-8.
    static func base64(_ text: [UInt8], field: String) throws(TokenError) -> [UInt8] {
        guard let bytes = Base64Canonical.decode(text) else {
            throw TokenError(.tokenMalformed, "\(field) is not canonical padded base64")
        }
        return bytes
    }

    // Bounds nesting before handing bytes to the JSON parser.
    private static func checkDepth(_ json: [UInt8], max: Int) throws(TokenError) {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in json {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                guard depth <= max else { throw TokenError(.tokenTooLarge, "JSON nested deeper than \(max)") }
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
    }
}
