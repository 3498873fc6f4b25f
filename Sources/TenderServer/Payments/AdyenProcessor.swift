import Foundation
import HTTPClient
import Payments

/// The Adyen connector's settings (`TENDER_PROCESSOR=adyen`, docs/processor-adyen.md).
public struct AdyenSettings: Sendable, CustomStringConvertible {
    /// Checkout API base without the version: `https://checkout-test.adyen.com`, or the live
    /// `https://{PREFIX}-checkout-live.adyenpayments.com/checkout` (`TENDER_ADYEN_URL`).
    public let baseURL: String
    /// `TENDER_ADYEN_MERCHANT_ACCOUNT`.
    public let merchantAccount: String
    /// The API key sent as `X-API-Key`, read from `TENDER_ADYEN_API_KEY_FILE` (mode 0600).
    let apiKey: String
    /// `TENDER_ADYEN_RETURN_URL`: required by Adyen's PaymentRequest, never visited for a decrypted
    /// Apple Pay token (no redirect happens).
    public let returnURL: String
    /// `http://` accepted (a loopback stand-in in tests only).
    public let allowPlainHTTPForTesting: Bool

    /// Creates settings (tests; `load` reads the environment).
    public init(baseURL: String, merchantAccount: String, apiKey: String, returnURL: String, allowPlainHTTPForTesting: Bool = false) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.merchantAccount = merchantAccount
        self.apiKey = apiKey
        self.returnURL = returnURL
        self.allowPlainHTTPForTesting = allowPlainHTTPForTesting
    }

    /// Never shows the key.
    public var description: String { "AdyenSettings(url: \(baseURL), merchantAccount: \(merchantAccount), apiKey: redacted)" }

    /// Reads `TENDER_ADYEN_*`; every failure names its variable.
    static func load(_ value: (String) -> String?, plainHTTPForTesting: Bool) throws(ConfigurationError) -> AdyenSettings {
        guard let url = value("TENDER_ADYEN_URL") else {
            throw ConfigurationError(variable: "TENDER_ADYEN_URL", reason: "required when TENDER_PROCESSOR=adyen")
        }
        try TenderConfiguration.checkProcessorURL(url, variable: "TENDER_ADYEN_URL", plainHTTPForTesting: plainHTTPForTesting)
        guard let account = value("TENDER_ADYEN_MERCHANT_ACCOUNT") else {
            throw ConfigurationError(variable: "TENDER_ADYEN_MERCHANT_ACCOUNT", reason: "required when TENDER_PROCESSOR=adyen")
        }
        guard account.utf8.count <= 128, account.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigurationError(variable: "TENDER_ADYEN_MERCHANT_ACCOUNT", reason: "expected printable ASCII, at most 128 bytes")
        }
        guard let returnURL = value("TENDER_ADYEN_RETURN_URL") else {
            throw ConfigurationError(variable: "TENDER_ADYEN_RETURN_URL",
                                     reason: "required when TENDER_PROCESSOR=adyen (Adyen's PaymentRequest requires returnUrl)")
        }
        guard returnURL.hasPrefix("https://"), returnURL.utf8.count <= 1_024, URLComponents(string: returnURL)?.host != nil else {
            throw ConfigurationError(variable: "TENDER_ADYEN_RETURN_URL", reason: "expected an absolute https URL")
        }
        guard let keyFile = value("TENDER_ADYEN_API_KEY_FILE") else {
            throw ConfigurationError(variable: "TENDER_ADYEN_API_KEY_FILE", reason: "required when TENDER_PROCESSOR=adyen")
        }
        var bytes = try ProcessorAuthentication.privateFile(keyFile, variable: "TENDER_ADYEN_API_KEY_FILE")
        defer { ProcessorTransport.wipe(&bytes) }
        let key = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !key.isEmpty, key.utf8.count <= ProcessorAuthentication.secretBytesMax,
              key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigurationError(variable: "TENDER_ADYEN_API_KEY_FILE",
                                     reason: "expected one line of printable ASCII, at most "
                                         + "\(ProcessorAuthentication.secretBytesMax) bytes")
        }
        return AdyenSettings(baseURL: url, merchantAccount: account, apiKey: key, returnURL: returnURL,
                             allowPlainHTTPForTesting: plainHTTPForTesting)
    }
}

/// Adyen's Checkout API v71 as a connector: `POST /v71/payments` with the decrypted Apple Pay network token
/// (card `scheme` details, the DPAN as `number`, the online payment cryptogram as `mpiData.cavv`), and
/// `POST /v71/payments/{pspReference}/refunds`. `Idempotency-Key` is Tender's processor key on every call and
/// every retry. Request and answer shapes follow Adyen's published OpenAPI (CheckoutService-v71), the parts of
/// it this connector uses are written out in docs/processor-adyen.md.
public struct AdyenProcessor: PaymentProcessor {
    /// The API version in every path.
    public static let apiVersion = "v71"
    /// Connection settings.
    public let settings: AdyenSettings
    let transport: ProcessorTransport

    /// Creates a connector; `authentication` adds a client certificate and CA (its bearer secret is not used).
    public init(settings: AdyenSettings, timeoutMilliseconds: Int, retryPolicy: RetryPolicy = RetryPolicy(),
                authentication: ProcessorAuthentication = .none) {
        self.settings = settings
        transport = ProcessorTransport(timeoutMilliseconds: timeoutMilliseconds, retryPolicy: retryPolicy,
                                       authentication: authentication, allowPlainHTTPForTesting: settings.allowPlainHTTPForTesting)
    }

    /// POST /v71/payments.
    public func authorize(_ request: AuthorizationRequest) -> ProcessorOutcome {
        // Adyen takes the decrypted 3-D Secure payload only; an EMV (China) payload has no place in this request.
        guard request.paymentDataType == "3DSecure" else {
            return .declined(declineCode: "payment_data_type_unsupported", processorReference: nil)
        }
        guard (1...12).contains(request.expirationMonth), (2000...9999).contains(request.expirationYear) else {
            return .declined(declineCode: "expiration_invalid", processorReference: nil)
        }
        let body = AdyenPaymentBody(
            amount: .init(currency: request.currencyCode, value: request.amountMinor),
            merchantAccount: settings.merchantAccount, reference: request.paymentId, returnUrl: settings.returnURL,
            paymentMethod: .init(number: request.card.unsafeDPAN(), expiryMonth: String(format: "%02d", request.expirationMonth),
                                 expiryYear: String(request.expirationYear)),
            mpiData: .init(cavv: request.card.unsafeCryptogram(), eci: request.eci))
        let outcome = send(path: "/\(Self.apiVersion)/payments", key: request.processorKey, body: ProcessorTransport.encode(body))
        switch outcome {
        case .failed(let outcome): return outcome
        case .answered(let response): return Self.interpretPayment(response)
        }
    }

    /// POST /v71/payments/{pspReference}/refunds. Adyen answers `201 {"status":"received"}` and settles the refund
    /// later (its REFUND notification): that is `.accepted`, never `.approved`.
    public func refund(_ request: RefundRequest) -> ProcessorOutcome {
        guard Self.isPSPReference(request.processorReference) else {
            return .declined(declineCode: "processor_reference_invalid", processorReference: nil)
        }
        let body = AdyenRefundBody(amount: .init(currency: request.currencyCode, value: request.amountMinor),
                                   merchantAccount: settings.merchantAccount, reference: request.refundId)
        let path = "/\(Self.apiVersion)/payments/\(request.processorReference)/refunds"
        switch send(path: path, key: request.processorKey, body: ProcessorTransport.encode(body)) {
        case .failed(let outcome): return outcome
        case .answered(let response): return Self.interpretRefund(response)
        }
    }

    /// Adyen's references are short alphanumerics (16 characters today); anything else never goes in a path.
    static func isPSPReference(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) }
    }

    /// A response to interpret, or an outcome already known without one.
    enum Exchange {
        case answered(HTTPClientResponse)
        case failed(ProcessorOutcome)
    }

    private func send(path: String, key: String, body: [UInt8]?) -> Exchange {
        guard var bytes = body else { return .failed(.unknown(reason: "request_encoding_failed")) }
        // The body holds the DPAN and cryptogram: zero it once the exchange is over (PCI DSS 3.3.1).
        defer { ProcessorTransport.wipe(&bytes) }
        let headers = [("Content-Type", "application/json"), ("Idempotency-Key", key), ("X-API-Key", settings.apiKey)]
        switch transport.post(url: settings.baseURL + path, headers: headers, body: bytes) {
        case .failure(let error): return .failed(.unknown(reason: error.code.rawValue))
        case .success(let response): return .answered(response)
        }
    }
}

extension AdyenProcessor {
    /// Outcome of a `/payments` answer. Only `Authorised` with a `pspReference` is a success; `Refused`,
    /// `Error` and `Cancelled` are final (Adyen: "This is a final state"); `Pending` and `Received` are not
    /// answers yet, so the payment stays pending and is re-sent with its key.
    static func interpretPayment(_ response: HTTPClientResponse) -> ProcessorOutcome {
        if let rejected = rejection(response) { return rejected }
        guard response.status == 200, let answer = try? JSONDecoder().decode(AdyenPaymentAnswer.self, from: Data(response.body)),
              let resultCode = answer.resultCode else {
            return .unknown(reason: "malformed_response")
        }
        let reference = answer.pspReference.flatMap { isPSPReference($0) ? $0 : nil }
        switch resultCode {
        case "Authorised":
            guard let reference else { return .unknown(reason: "malformed_response") }
            let code = answer.additionalData?["authCode"].flatMap { $0.isEmpty || $0.utf8.count > 32 ? nil : $0 }
            return .approved(processorReference: reference, authorizationCode: code)
        case "Refused":
            return .declined(declineCode: declineCode(refusalReasonCode: answer.refusalReasonCode), processorReference: reference)
        case "Error":
            return .declined(declineCode: "processor_error", processorReference: reference)
        case "Cancelled":
            return .declined(declineCode: "cancelled", processorReference: reference)
        case "RedirectShopper", "IdentifyShopper", "ChallengeShopper", "PresentToShopper":
            // A shopper action Tender cannot perform server-side: no money moved.
            return .declined(declineCode: "processor_action_required", processorReference: reference)
        case "Pending":
            return .unknown(reason: "adyen_pending")
        case "Received":
            return .unknown(reason: "adyen_received")
        case "PartiallyAuthorised":
            // Never asked for (no allowPartialAuth); funds may be held, so it is left pending for a look.
            return .unknown(reason: "adyen_partially_authorised")
        default:
            return .unknown(reason: "adyen_unexpected_result")
        }
    }

    /// Outcome of a `/refunds` answer: `received` with Adyen's refund reference is accepted, not paid back.
    static func interpretRefund(_ response: HTTPClientResponse) -> ProcessorOutcome {
        if let rejected = rejection(response) { return rejected }
        guard response.status == 201 || response.status == 200,
              let answer = try? JSONDecoder().decode(AdyenRefundAnswer.self, from: Data(response.body)),
              answer.status == "received", let reference = answer.pspReference, isPSPReference(reference) else {
            return .unknown(reason: "malformed_response")
        }
        return .accepted(processorReference: reference)
    }

    /// 400 and 422 are Adyen refusing the request itself (its `ServiceError`): nothing was processed, and the same
    /// request will be refused again, so it is final, except error 704 (the first request with this
    /// `Idempotency-Key` is still in progress: its answer is unknown yet). 401 and 403 are Tender's credentials:
    /// unknown, so the call is re-sent once an operator fixes the key. 408, 429 and 5xx after the retries: unknown.
    static func rejection(_ response: HTTPClientResponse) -> ProcessorOutcome? {
        switch response.status {
        case 200...299: return nil
        case 400, 422:
            let error = try? JSONDecoder().decode(AdyenServiceError.self, from: Data(response.body))
            if error?.errorCode == "704" { return .unknown(reason: "adyen_request_in_progress") }
            return .declined(declineCode: "processor_rejected_request", processorReference: error?.pspReference.flatMap {
                isPSPReference($0) ? $0 : nil
            })
        default: return .unknown(reason: "http_\(response.status)")
        }
    }

    /// Adyen's `refusalReasonCode` (docs.adyen.com, refusal reasons) as Tender's decline codes; others keep
    /// Adyen's number (`adyen_refusal_N`).
    static func declineCode(refusalReasonCode: String?) -> String {
        let table = ["2": "card_declined", "5": "blocked_card", "6": "expired_card", "7": "invalid_amount",
                     "8": "invalid_card_number", "9": "issuer_unavailable", "12": "insufficient_funds", "14": "fraud_suspected",
                     "20": "fraud_suspected", "23": "transaction_not_permitted", "24": "cvc_declined", "25": "restricted_card"]
        guard let code = refusalReasonCode, (1...4).contains(code.utf8.count), code.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return "card_declined"
        }
        return table[code] ?? "adyen_refusal_\(code)"
    }
}

/// `PaymentRequest` (CheckoutService-v71), the fields Tender sends.
struct AdyenPaymentBody: Encodable {
    /// `Amount`: ISO 4217 code and minor units.
    struct Amount: Encodable { let currency: String; let value: Int64 }
    /// `CardDetails` with `type: scheme`: the DPAN and its expiry (MM, YYYY).
    struct Card: Encodable {
        let type = "scheme"
        let number: String
        let expiryMonth: String
        let expiryYear: String
    }
    /// `ThreeDSecureData`: the Apple Pay cryptogram as the authentication value of an authenticated (`Y`/`Y`)
    /// transaction, with Apple's ECI when the token has one (Visa; Mastercard tokens often carry none).
    struct MPI: Encodable {
        let directoryResponse = "Y"
        let authenticationResponse = "Y"
        let cavv: String
        let eci: String?
    }

    let amount: Amount
    let merchantAccount: String
    let reference: String
    let returnUrl: String
    let paymentMethod: Card
    let mpiData: MPI
    let shopperInteraction = "Ecommerce"
    /// Tells Adyen the card data came from a decrypted Apple Pay token.
    let additionalData = ["paymentdatasource.type": "applepay"]
}

/// `PaymentRefundRequest` (CheckoutService-v71).
struct AdyenRefundBody: Encodable {
    let amount: AdyenPaymentBody.Amount
    let merchantAccount: String
    let reference: String
}

/// The parts of `PaymentResponse` Tender reads.
struct AdyenPaymentAnswer: Decodable {
    let resultCode: String?
    let pspReference: String?
    let refusalReason: String?
    let refusalReasonCode: String?
    let additionalData: [String: String]?
}

/// The parts of `PaymentRefundResponse` Tender reads.
struct AdyenRefundAnswer: Decodable {
    let status: String?
    let pspReference: String?
}

/// Adyen's `ServiceError`.
struct AdyenServiceError: Decodable {
    let errorCode: String?
    let errorType: String?
    let pspReference: String?
}
