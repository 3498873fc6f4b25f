import Crypto
import Foundation

/// `paymentDataType` of the decrypted payload.
public enum PaymentDataType: String, Sendable {
    /// Online 3-D Secure cryptogram.
    case threeDSecure = "3DSecure"
    /// EMV data (China UnionPay).
    case emv = "EMV"
}

/// One multi-token authentication response (decrypted `authenticationResponses`).
public struct AuthenticationResponse: Sendable {
    /// The merchant this cryptogram is for.
    public let merchantIdentifier: String
    /// Amount in minor units.
    public let transactionAmountMinor: Int64
    let authenticationData: String
}

/// The sensitive fields, reachable only through `DecryptedPaymentData.unsafeRevealSensitive()`.
/// PCI DSS 3.3.1/3.5.1: never persist or log these; hand them to the processor and drop them.
public struct SensitivePaymentData: Sendable, CustomStringConvertible {
    /// Full device or merchant-token PAN.
    public let applicationPrimaryAccountNumber: String
    /// Base64 online payment cryptogram (3DSecure).
    public let onlinePaymentCryptogram: String?
    /// Base64 EMV data (EMV).
    public let emvData: String?
    /// Hex encrypted PIN data (EMV, RSA_v1).
    public let encryptedPINData: String?
    /// Cardholder name, if Apple sent it.
    public let cardholderName: String?
    /// Per-merchant cryptograms (multi-token), in payload order.
    public let authenticationData: [String]
    /// Never prints the values, even here.
    public var description: String { "SensitivePaymentData(redacted)" }
}

/// The decrypted payment payload (Payment Token Format Reference, "Payment data keys"). Only
/// `PaymentDataDecryptor` builds it. Its description masks PAN to last four and omits cryptograms.
public struct DecryptedPaymentData: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Last four digits of the PAN (PCI DSS 3.4.1).
    public let panLastFour: String
    /// `YYMMDD`.
    public let applicationExpirationDate: String
    /// ISO 4217 numeric code, three digits with leading zeros.
    public let currencyCodeNumeric: String
    /// Amount in minor units of `currencyCodeNumeric`.
    public let transactionAmountMinor: Int64
    /// Hex device manufacturer identifier.
    public let deviceManufacturerIdentifier: String
    /// 3DSecure or EMV.
    public let paymentDataType: PaymentDataType
    /// ECI indicator, when sent (must be passed to the processor).
    public let eciIndicator: String?
    /// Merchant token id, for merchant-token requests.
    public let merchantTokenIdentifier: String?
    /// Multi-token responses (amounts and merchant ids; cryptograms only via `unsafeRevealSensitive`).
    public let authenticationResponses: [AuthenticationResponse]
    /// Whether a cardholder name is present (the name itself is sensitive).
    public var hasCardholderName: Bool { sensitive.cardholderName != nil }
    private let sensitive: SensitivePaymentData

    init(payload: SecretBytes, depthMax: Int) throws(TokenError) {
        // Read in place from the zeroing buffer: no copy of the plaintext outlives it but the fields.
        let parsed: PayloadDTO? = payload.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            var reader = JSONReader(bytes, depthMax: depthMax)
            guard let dto = try? PayloadDTO(&reader), (try? reader.expectEnd()) != nil else { return nil }
            return dto
        }
        guard let dto = parsed else { throw TokenError(.payloadMalformed, "payload is not the expected JSON") }
        let pan = dto.applicationPrimaryAccountNumber
        guard Self.isASCIIDigits(pan, length: 12...19) else {
            throw TokenError(.payloadMalformed, "applicationPrimaryAccountNumber is not 12–19 digits")
        }
        guard Self.isASCIIDigits(dto.applicationExpirationDate, length: 6...6) else {
            throw TokenError(.payloadMalformed, "applicationExpirationDate is not YYMMDD")
        }
        guard Self.isASCIIDigits(dto.currencyCode, length: 3...3) else {
            throw TokenError(.payloadMalformed, "currencyCode is not ISO 4217 numeric")
        }
        guard dto.transactionAmount >= 0 else { throw TokenError(.payloadMalformed, "negative transactionAmount") }
        guard let type = PaymentDataType(rawValue: dto.paymentDataType) else {
            throw TokenError(.payloadMalformed, "unknown paymentDataType")
        }
        switch type {
        case .threeDSecure:
            guard dto.paymentData.onlinePaymentCryptogram?.isEmpty == false else {
                throw TokenError(.payloadMalformed, "3DSecure payload without onlinePaymentCryptogram")
            }
        case .emv:
            guard dto.paymentData.emvData?.isEmpty == false else { throw TokenError(.payloadMalformed, "EMV payload without emvData") }
        }
        panLastFour = String(pan.suffix(4))
        applicationExpirationDate = dto.applicationExpirationDate
        currencyCodeNumeric = dto.currencyCode
        transactionAmountMinor = dto.transactionAmount
        deviceManufacturerIdentifier = dto.deviceManufacturerIdentifier
        paymentDataType = type
        eciIndicator = dto.paymentData.eciIndicator
        merchantTokenIdentifier = dto.merchantTokenIdentifier
        let responses = dto.authenticationResponses ?? []
        authenticationResponses = responses.map {
            AuthenticationResponse(merchantIdentifier: $0.merchantIdentifier, transactionAmountMinor: $0.transactionAmount,
                                   authenticationData: $0.authenticationData)
        }
        sensitive = SensitivePaymentData(applicationPrimaryAccountNumber: pan,
                                         onlinePaymentCryptogram: dto.paymentData.onlinePaymentCryptogram,
                                         emvData: dto.paymentData.emvData, encryptedPINData: dto.paymentData.encryptedPINData,
                                         cardholderName: dto.cardholderName,
                                         authenticationData: responses.map(\.authenticationData))
    }

    /// True when `text` is `length` ASCII digits; on UTF-8 bytes, since a digit is one byte and one
    /// Character and anything else (a combining mark too) fails either way.
    static func isASCIIDigits(_ text: String, length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count) && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// Full PAN, cryptogram and the like, for handing to the processor; the name says it is unsafe to log.
    public func unsafeRevealSensitive() -> SensitivePaymentData { sensitive }

    /// Masked summary: last four, expiry, amount, currency, type; never PAN, cryptogram, ECI or name.
    public var description: String {
        "DecryptedPaymentData(pan: ****\(panLastFour), expiry: \(applicationExpirationDate), amountMinor: \(transactionAmountMinor), "
            + "currency: \(currencyCodeNumeric), type: \(paymentDataType.rawValue), cryptogram: <redacted>"
            + (merchantTokenIdentifier == nil ? "" : ", merchantToken: yes")
            + (authenticationResponses.isEmpty ? "" : ", authenticationResponses: \(authenticationResponses.count)") + ")"
    }

    /// Same as `description`.
    public var debugDescription: String { description }

    /// Keeps `dump` and debuggers from walking into the sensitive fields.
    public var customMirror: Mirror {
        Mirror(self, children: ["panLastFour": panLastFour, "transactionAmountMinor": transactionAmountMinor,
                                "currencyCodeNumeric": currencyCodeNumeric, "paymentDataType": paymentDataType.rawValue],
               displayStyle: .struct)
    }
}

/// The decrypted payload's members (Payment Token Format Reference, "Payment data keys"), read with
/// `JSONReader`: required members must be present and not null, optional ones may be null, unknown
/// ones are skipped, and a member named twice is refused.
struct PayloadDTO {
    struct Inner {
        var onlinePaymentCryptogram: String?
        var eciIndicator: String?
        var emvData: String?
        var encryptedPINData: String?
    }

    struct AuthResponse {
        let merchantIdentifier: String
        let authenticationData: String
        let transactionAmount: Int64
    }

    let applicationPrimaryAccountNumber: String
    let applicationExpirationDate: String
    let currencyCode: String
    let transactionAmount: Int64
    let cardholderName: String?
    let deviceManufacturerIdentifier: String
    let paymentDataType: String
    let paymentData: Inner
    let merchantTokenIdentifier: String?
    let authenticationResponses: [AuthResponse]?

    private static let keys: [[UInt8]] = [
        "applicationPrimaryAccountNumber", "applicationExpirationDate", "currencyCode", "transactionAmount", "cardholderName",
        "deviceManufacturerIdentifier", "paymentDataType", "paymentData", "merchantTokenIdentifier", "authenticationResponses",
    ].map { Array($0.utf8) }
    private static let innerKeys: [[UInt8]] = ["onlinePaymentCryptogram", "eciIndicator", "emvData", "encryptedPINData"]
        .map { Array($0.utf8) }
    private static let responseKeys: [[UInt8]] = ["merchantIdentifier", "authenticationData", "transactionAmount"].map { Array($0.utf8) }

    init(_ reader: inout JSONReader) throws(JSONReadError) {
        var strings = [String?](repeating: nil, count: Self.keys.count)
        var amount: Int64?
        var inner: Inner?
        var responses: [AuthResponse]?
        try reader.forEachMember(Self.keys) { (key, r: inout JSONReader) throws(JSONReadError) in
            switch key {
            case 3: amount = try r.readInt64()
            case 7: inner = try Self.readInner(&r)
            case 9: responses = try r.skipNull() ? nil : Self.readResponses(&r)
            case 4, 8: strings[key] = try r.readOptionalString()
            default: strings[key] = try r.readString()
            }
        }
        guard let pan = strings[0], let expiry = strings[1], let currency = strings[2], let amount,
              let device = strings[5], let type = strings[6], let inner
        else { throw .shape(reader.index) }
        applicationPrimaryAccountNumber = pan
        applicationExpirationDate = expiry
        currencyCode = currency
        transactionAmount = amount
        cardholderName = strings[4]
        deviceManufacturerIdentifier = device
        paymentDataType = type
        paymentData = inner
        merchantTokenIdentifier = strings[8]
        authenticationResponses = responses
    }

    private static func readInner(_ reader: inout JSONReader) throws(JSONReadError) -> Inner {
        var values = [String?](repeating: nil, count: innerKeys.count)
        try reader.forEachMember(innerKeys) { (key, r: inout JSONReader) throws(JSONReadError) in
            values[key] = try r.readOptionalString()
        }
        return Inner(onlinePaymentCryptogram: values[0], eciIndicator: values[1], emvData: values[2], encryptedPINData: values[3])
    }

    private static func readResponses(_ reader: inout JSONReader) throws(JSONReadError) -> [AuthResponse] {
        var out: [AuthResponse] = []
        try reader.forEachElement { (element: inout JSONReader) throws(JSONReadError) in
            var id: String?
            var data: String?
            var amount: Int64?
            try element.forEachMember(responseKeys) { (key, r: inout JSONReader) throws(JSONReadError) in
                switch key {
                case 0: id = try r.readString()
                case 1: data = try r.readString()
                default: amount = try r.readInt64()
                }
            }
            guard let id, let data, let amount else { throw .shape(element.index) }
            out.append(AuthResponse(merchantIdentifier: id, authenticationData: data, transactionAmount: amount))
        }
        return out
    }
}
