import Foundation

/// Size limits applied before and during parsing (STYLE: a named limit on everything that grows).
public struct TokenLimits: Sendable, Equatable {
    /// Whole token JSON, bytes. Real EC_v1 tokens are ~3–4 KB, RSA_v1 ~5–6 KB.
    public var tokenBytesMax: Int = 32_768
    /// JSON nesting depth.
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
        try UnverifiedPaymentToken.checkDepth(json, max: limits.jsonDepthMax)
        let decoder = JSONDecoder()
        let wrapper: WrapperDTO
        do {
            wrapper = try decoder.decode(WrapperDTO.self, from: Data(json))
        } catch {
            throw TokenError(.tokenMalformed, "token is not a JSON object of the expected shape")
        }
        let body: PaymentDataDTO
        if let inner = wrapper.paymentData {
            body = inner
        } else if let bare = try? decoder.decode(PaymentDataDTO.self, from: Data(json)) {
            body = bare
        } else {
            throw TokenError(.tokenMalformed, "paymentData missing or incomplete")
        }
        let header = body.header
        for field in [header.ephemeralPublicKey, header.wrappedKey, header.publicKeyHash, header.transactionId, header.applicationData] {
            if let field, field.utf8.count > limits.headerFieldBytesMax {
                throw TokenError(.tokenTooLarge, "header field longer than \(limits.headerFieldBytesMax)")
            }
        }
        guard body.data.utf8.count <= (limits.encryptedDataBytesMax / 3 + 1) * 4 else {
            throw TokenError(.tokenTooLarge, "data longer than \(limits.encryptedDataBytesMax) bytes")
        }
        guard body.signature.utf8.count <= (limits.signatureBytesMax / 3 + 1) * 4 else {
            throw TokenError(.tokenTooLarge, "signature longer than \(limits.signatureBytesMax) bytes")
        }
        version = body.version
        encryptedData = try UnverifiedPaymentToken.base64(body.data, field: "data")
        signature = try UnverifiedPaymentToken.base64(body.signature, field: "signature")
        guard encryptedData.count <= limits.encryptedDataBytesMax else {
            throw TokenError(.tokenTooLarge, "data is \(encryptedData.count) bytes, limit \(limits.encryptedDataBytesMax)")
        }
        guard signature.count <= limits.signatureBytesMax else {
            throw TokenError(.tokenTooLarge, "signature is \(signature.count) bytes, limit \(limits.signatureBytesMax)")
        }
        ephemeralPublicKey = try header.ephemeralPublicKey.map { (s: String) throws(TokenError) in try UnverifiedPaymentToken.base64(s,
            field: "ephemeralPublicKey") }
        wrappedKey = try header.wrappedKey.map { (s: String) throws(TokenError) in try UnverifiedPaymentToken.base64(s,
            field: "wrappedKey") }
        publicKeyHash = try UnverifiedPaymentToken.base64(header.publicKeyHash, field: "publicKeyHash")
        guard publicKeyHash.count == 32 else { throw TokenError(.tokenMalformed, "publicKeyHash is not a SHA-256") }
        // transactionId and applicationData are hex in JSON and hex-decoded before signing (Apple step 1.d).
        guard let txid = Hex.decode(header.transactionId), !txid.isEmpty else {
            throw TokenError(.tokenMalformed, "transactionId is not hex")
        }
        transactionIdHex = header.transactionId
        transactionId = txid
        if let appData = header.applicationData {
            guard let bytes = Hex.decode(appData), bytes.count == 32 else {
                throw TokenError(.tokenMalformed, "applicationData is not a hex SHA-256")
            }
            applicationDataHex = appData
            applicationData = bytes
        } else {
            applicationDataHex = nil
            applicationData = []
        }
        paymentMethod = wrapper.paymentMethod
        transactionIdentifier = wrapper.transactionIdentifier
    }

    /// The bytes the CMS signature covers: ephemeralPublicKey|wrappedKey ‖ data ‖ transactionId ‖ applicationData.
    var signedContent: [UInt8] {
        (ephemeralPublicKey ?? wrappedKey ?? []) + encryptedData + transactionId + applicationData
    }

    /// Apple writes every binary token field as canonical padded Base64 (RFC 4648 §4): exactly the
    /// padding the length needs, no whitespace, zero bits below the padding. Anything else (an extra
    /// `=`, a missing one, a line break) is not a token Apple produced, so it is refused rather than
    /// read leniently: the canonical re-encoding must give back the very text received.
    static func base64(_ text: String, field: String) throws(TokenError) -> [UInt8] {
        guard let data = Data(base64Encoded: text), !data.isEmpty, data.base64EncodedString() == text else {
            throw TokenError(.tokenMalformed, "\(field) is not canonical padded base64")
        }
        return Array(data)
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

struct HeaderDTO: Decodable {
    let ephemeralPublicKey: String?
    let wrappedKey: String?
    let publicKeyHash: String
    let transactionId: String
    let applicationData: String?
}

struct PaymentDataDTO: Decodable {
    let version: String
    let data: String
    let signature: String
    let header: HeaderDTO
}

struct WrapperDTO: Decodable {
    let paymentData: PaymentDataDTO?
    let paymentMethod: PaymentMethodInfo?
    let transactionIdentifier: String?
}
