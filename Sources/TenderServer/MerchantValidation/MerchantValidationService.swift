import Foundation
import HTTPClient
import HTTPServer
import Observability
import Synchronization

/// The exact body Apple's `paymentSession` endpoint receives (rule 43): these four members and no other.
struct MerchantSessionRequestBody: Encodable, Equatable {
    let merchantIdentifier: String
    let displayName: String
    let initiative: String
    let initiativeContext: String
}

/// Requests Apple Pay merchant sessions over mutual TLS (Apple's "Providing merchant validation"; docs/apple-pay-rules.md, rules 40–46).
///
/// Every call is a fresh request on a fresh libcurl handle with the merchant's identity; nothing is cached,
/// because a merchant session is single-use and expires after five minutes (rule 46).
public final class MerchantValidationService: Sendable {
    /// The longest display name Apple accepts (rule 42), in characters.
    public static let displayNameCharactersMax = 64

    private let settings: MerchantValidationSettings
    private let identities: any MerchantIdentityProviding
    private let client: HTTPClient
    private let metrics: MetricsRegistry
    private let logger: Logger
    private let connectAttempts = ConnectAttemptCounter()

    /// Builds the service; `settings.totalTimeoutMilliseconds` must not exceed rule 44's ceiling.
    public init(settings: MerchantValidationSettings, identities: any MerchantIdentityProviding,
                metrics: MetricsRegistry, logger: Logger, client: HTTPClient = HTTPClient()) {
        precondition(settings.totalTimeoutMilliseconds > 0
                     && settings.totalTimeoutMilliseconds <= MerchantValidationSettings.totalTimeoutMillisecondsMax,
                     "merchant validation timeout must be within 1...10000 ms (rule 44)")
        self.settings = settings
        self.identities = identities
        self.metrics = metrics
        self.logger = logger
        self.client = client
    }

    /// Outbound TCP connects attempted so far (the SSRF measure: zero for every refused URL).
    public var connectAttemptCount: Int { connectAttempts.value }

    /// Asks Apple for a merchant session for `merchant` and returns Apple's body untouched (rule 45).
    /// `initiativeContext` is the page's domain when the caller names one; it must be registered (rule 41).
    public func requestSession(validationURL: String, merchant: Merchant, initiativeContext requested: String?,
                               requestID: String) throws(MerchantValidationError) -> [UInt8] {
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            let body = try perform(validationURL: validationURL, merchant: merchant, requested: requested,
                                   requestID: requestID)
            record(outcome: "succeeded", started: started)
            return body
        } catch {
            record(outcome: error.code.rawValue, started: started)
            throw error
        }
    }

    private func record(outcome: String, started: UInt64) {
        metrics.increment("tender_merchant_validation_total", labels: [("outcome", outcome)],
                          help: "Merchant validation calls by outcome.")
        let elapsed = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1_000)
        metrics.observe("tender_merchant_validation_duration_seconds", microseconds: elapsed,
                        help: "Merchant validation latency, Apple round trip included.")
    }

    private func perform(validationURL: String, merchant: Merchant, requested: String?,
                         requestID: String) throws(MerchantValidationError) -> [UInt8] {
        // Rule 40 first and alone: a refused URL must never reach DNS, let alone a socket.
        let checked: MerchantValidationURL
        switch MerchantValidationURL.check(validationURL, allowedHosts: settings.allowedHosts) {
        case .success(let url): checked = url
        case .failure(let error):
            throw MerchantValidationError(.validationURLInvalid, error.message, urlReason: error.validationURLReason)
        }
        let body = try Self.requestBody(merchant: merchant, requested: requested)
        let identity: TLSClientIdentity
        do {
            guard let found = try identities.identity(merchantId: merchant.merchantId) else {
                throw MerchantValidationError(.identityMissing, "no identity for merchant")
            }
            identity = found
        } catch let error as MerchantValidationError {
            throw error
        } catch {
            logger.error("merchant identity unavailable", [("merchant_id", merchant.merchantId),
                                                           ("error", String(describing: type(of: error))),
                                                           ("request_id", requestID)])
            throw MerchantValidationError(.identityUnreadable, "identity could not be loaded")
        }

        let (url, options) = transport(for: checked, identity: identity)
        let encoded: [UInt8]
        do {
            // Sorted keys: the same merchant always produces the same bytes.
            encoded = Array(try JSONCoding.encoder.encode(body))
        } catch {
            throw MerchantValidationError(.invalidResponse, "request body could not be encoded")
        }
        let request = HTTPClientRequest(method: "POST", url: url,
                                        headers: [("Content-Type", "application/json"), ("Accept", "application/json")],
                                        body: encoded)
        let response: HTTPClientResponse
        do {
            response = try client.send(request, options: options)
        } catch {
            throw map(error, merchant: merchant, host: checked.host, requestID: requestID)
        }
        return try accept(response, merchant: merchant, host: checked.host, requestID: requestID)
    }

    /// Rules 41–43: the four members, with the domain chosen and checked and the display name bounded.
    static func requestBody(merchant: Merchant, requested: String?) throws(MerchantValidationError)
        -> MerchantSessionRequestBody
    {
        let registered = merchant.domains.map(lowercasedASCII)
        let context: String
        if let requested {
            // Exact match against the registered list; `www.` is a different domain to Apple (§4.4, 417).
            let wanted = lowercasedASCII(requested)
            guard registered.contains(wanted) else {
                throw MerchantValidationError(.initiativeContextInvalid, "initiativeContext is not registered")
            }
            context = wanted
        } else {
            guard let first = registered.first else {
                throw MerchantValidationError(.merchantDomainMissing, "merchant has no domain")
            }
            context = first
        }
        let name = merchant.displayName
        guard !name.isEmpty, name.count <= displayNameCharactersMax else {
            throw MerchantValidationError(.displayNameInvalid, "display name is not 1-\(displayNameCharactersMax) characters")
        }
        return MerchantSessionRequestBody(merchantIdentifier: merchant.merchantId, displayName: name,
                                          initiative: "web", initiativeContext: context)
    }

    /// The URL to call and libcurl options: mutual TLS, TLS ≥ 1.2, no redirects, hard timeouts,
    /// public addresses only (the test override alone may reach loopback).
    func transport(for checked: MerchantValidationURL, identity: TLSClientIdentity)
        -> (url: String, options: HTTPClientOptions)
    {
        var options = HTTPClientOptions()
        options.clientIdentity = identity
        options.caFile = settings.caFile
        options.minimumTLSVersion12 = true
        options.followRedirects = false
        options.connectTimeoutMilliseconds = min(settings.connectTimeoutMilliseconds, settings.totalTimeoutMilliseconds)
        options.totalTimeoutMilliseconds = settings.totalTimeoutMilliseconds
        options.responseBodyBytesMax = settings.responseBodyBytesMax
        var url = checked.url
        var allowLoopback = false
        if let override = settings.unsafeGatewayOverrideForTesting, Self.lowercasedASCII(override.host) == checked.host {
            url = "https://\(checked.host):\(override.port)\(checked.path)"
            options.resolveOverride = ["\(checked.host):\(override.port):\(override.address)"]
            allowLoopback = true
        }
        let attempts = connectAttempts
        let allowsOverrideAddress = allowLoopback
        options.connectAddressFilter = { address in
            attempts.increment()
            return allowsOverrideAddress || MerchantValidationAddressPolicy.isPublic(address)
        }
        return (url, options)
    }

    /// Rule 45: a 2xx JSON object goes back byte-for-byte; anything else is a 502 with Apple's
    /// statusCode/statusMessage logged for the operator and never forwarded.
    private func accept(_ response: HTTPClientResponse, merchant: Merchant, host: String,
                        requestID: String) throws(MerchantValidationError) -> [UInt8] {
        guard (200...299).contains(response.status) else {
            let (appleCode, appleMessage) = Self.appleStatus(response.body)
            logger.warning("merchant validation refused by Apple", [
                ("merchant_id", merchant.merchantId), ("gateway_host", host),
                ("http_status", String(response.status)), ("apple_status_code", appleCode),
                ("apple_status_message", appleMessage), ("request_id", requestID),
            ])
            throw MerchantValidationError(.gatewayRefused, "gateway answered \(response.status)")
        }
        guard Self.isJSONObject(response.body) else {
            logger.warning("merchant validation answer is not a JSON object", [
                ("merchant_id", merchant.merchantId), ("gateway_host", host),
                ("body_bytes", String(response.body.count)), ("request_id", requestID),
            ])
            throw MerchantValidationError(.invalidResponse, "gateway answer is not a JSON object")
        }
        return response.body
    }

    private func map(_ error: HTTPClientError, merchant: Merchant, host: String,
                     requestID: String) -> MerchantValidationError {
        logger.warning("merchant validation call failed", [
            ("merchant_id", merchant.merchantId), ("gateway_host", host), ("code", error.code.rawValue),
            ("curl_code", error.curlCode.map(String.init) ?? ""), ("request_id", requestID),
        ])
        switch error.code {
        case .timeout: return MerchantValidationError(.timeout, "no answer within the deadline")
        case .tlsFailed: return MerchantValidationError(.tlsFailed, "TLS handshake failed")
        case .responseTooLarge: return MerchantValidationError(.invalidResponse, "gateway answer too large")
        case .connectionFailed, .addressNotAllowed, .protocolNotAllowed, .invalidURL, .invalidRequest,
             .validationURLInvalid, .other:
            return MerchantValidationError(.unreachable, "gateway unreachable (\(error.code.rawValue))")
        }
    }

    /// Lower-cases ASCII letters only, so domain comparisons never depend on locale or Unicode tables.
    static func lowercasedASCII(_ text: String) -> String {
        String(decoding: text.utf8.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// True when `body` is UTF-8 JSON whose top level is an object (what `completeMerchantValidation` takes).
    static func isJSONObject(_ body: [UInt8]) -> Bool {
        guard String(validating: body, as: UTF8.self) != nil, JSONCoding.nestingDepth(body) <= JSONCoding.depthMax
        else { return false }
        return (try? JSONCoding.decoder.decode([String: JSONValue].self, from: Data(body))) != nil
    }

    /// The members of Apple's error body that Tender logs.
    private struct AppleStatus: Decodable {
        var statusCode: JSONValue?
        var statusMessage: JSONValue?
    }

    /// Longest Apple status message kept in a log line.
    static let appleStatusMessageBytesMax = 256

    /// Apple's `statusCode` and `statusMessage` from an error body, printable ASCII only and bounded.
    static func appleStatus(_ body: [UInt8]) -> (code: String, message: String) {
        guard body.count <= 65_536, JSONCoding.nestingDepth(body) <= JSONCoding.depthMax,
              let status = try? JSONCoding.decoder.decode(AppleStatus.self, from: Data(body)) else { return ("", "") }
        func clean(_ value: JSONValue?) -> String {
            let text: String
            switch value {
            case .string(let string): text = string
            case .number(let number): text = number
            default: return ""
            }
            let bytes = text.utf8.filter { $0 >= 0x20 && $0 < 0x7F }.prefix(appleStatusMessageBytesMax)
            return String(decoding: bytes, as: UTF8.self)
        }
        return (clean(status.statusCode), clean(status.statusMessage))
    }
}

/// Counts outbound connect attempts across calls; shared with libcurl's connect hook.
final class ConnectAttemptCounter: Sendable {
    private let count = Mutex(0)

    func increment() { count.withLock { $0 += 1 } }

    var value: Int { count.withLock { $0 } }
}
