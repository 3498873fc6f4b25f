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

    init(payload: SecretBytes) throws(TokenError) {
        let dto: PayloadDTO
        do {
            dto = try payload.withUnsafeBytes { raw in try JSONDecoder().decode(PayloadDTO.self, from: Data(raw)) }
        } catch {
            throw TokenError(.payloadMalformed, "payload is not the expected JSON")
        }
        let pan = dto.applicationPrimaryAccountNumber
        guard (12...19).contains(pan.count), pan.allSatisfy(\.isASCIIDigit) else {
            throw TokenError(.payloadMalformed, "applicationPrimaryAccountNumber is not 12–19 digits")
        }
        guard dto.applicationExpirationDate.count == 6, dto.applicationExpirationDate.allSatisfy(\.isASCIIDigit) else {
            throw TokenError(.payloadMalformed, "applicationExpirationDate is not YYMMDD")
        }
        guard dto.currencyCode.count == 3, dto.currencyCode.allSatisfy(\.isASCIIDigit) else {
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

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

struct PayloadDTO: Decodable {
    struct Inner: Decodable {
        let onlinePaymentCryptogram: String?
        let eciIndicator: String?
        let emvData: String?
        let encryptedPINData: String?
    }

    struct AuthResponse: Decodable {
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
}
