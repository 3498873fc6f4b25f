import Crypto
import Foundation
import HTTPClient
import Payments
import Postgres

/// The built-in processor: deterministic rules (`SimulatorRules`) and, like a real processor, idempotent
/// by key — it remembers every key in `simulator_authorizations`, so a key charges once across restarts.
public struct SimulatorProcessor: PaymentProcessor {
    /// Where the simulator keeps its memory (its own autocommit statements, never the caller's transaction).
    public let pool: PostgresPool
    /// The rules.
    public let rules: SimulatorRules

    /// Creates a simulator.
    public init(pool: PostgresPool, rules: SimulatorRules = SimulatorRules()) {
        self.pool = pool
        self.rules = rules
    }

    /// Authorizes per the rules; repeated keys return the first decision.
    public func authorize(_ request: AuthorizationRequest) -> ProcessorOutcome {
        let decision = rules.authorizationDecision(amountMinor: request.amountMinor, dpan: request.card.unsafeDPAN())
        return call(kind: "authorization", key: request.processorKey, paymentId: request.paymentId,
                    amountMinor: request.amountMinor, currencyCode: request.currencyCode, decision: decision)
    }

    /// Refunds per the rules; repeated keys return the first decision.
    public func refund(_ request: RefundRequest) -> ProcessorOutcome {
        call(kind: "refund", key: request.processorKey, paymentId: request.paymentId, amountMinor: request.amountMinor,
             currencyCode: request.currencyCode, decision: rules.refundDecision(amountMinor: request.amountMinor))
    }

    private func call(kind: String, key: String, paymentId: String, amountMinor: Int64, currencyCode: String,
                      decision: SimulatorDecision) -> ProcessorOutcome {
        if rules.latencyMilliseconds > 0 { usleep(UInt32(min(rules.latencyMilliseconds, 60_000)) * 1_000) }
        let (name, code, lost): (String, String?, Int) = switch decision {
        case .approve: ("approve", nil, 0)
        case .decline(let c): ("decline", c, 0)
        case .approveLosingFirstAnswers(let n): ("approve", nil, n)
        }
        let reference = "sim_" + hexEncoded(Digest.sha256(key)).prefix(24)
        do {
            // One statement: insert the key or count another delivery of it, returning the stored decision.
            guard let row = try pool.query("""
                INSERT INTO simulator_authorizations (processor_key, kind, payment_id, amount_minor, currency_code,
                                                      decision, decline_code, lost_answers, processor_reference)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT (processor_key) DO UPDATE SET calls = simulator_authorizations.calls + 1
                RETURNING decision, decline_code, lost_answers, processor_reference, calls
                """, [key, kind, paymentId, amountMinor, currencyCode, name, code, lost, reference]).first else {
                return .unknown(reason: "simulator_no_row")
            }
            let storedDecision: String = try row.decode("decision")
            let stored: SimulatorDecision = storedDecision == "decline"
                ? .decline(try row.decodeIfPresent("decline_code") ?? "card_declined")
                : .approveLosingFirstAnswers(try row.decode("lost_answers"))
            return SimulatorRules.visibleOutcome(stored, call: try row.decode("calls"),
                                                 processorReference: try row.decode("processor_reference"))
        } catch {
            return .unknown(reason: "simulator_unavailable")
        }
    }
}

/// The `http` processor (docs/processor-protocol.md) over libcurl: `Idempotency-Key` = the derived processor key,
/// bounded retries with backoff for transient failures, never a retry of an answer (a decline is final).
public struct HTTPProcessor: PaymentProcessor {
    /// Base URL (`TENDER_PROCESSOR_URL`).
    public let baseURL: String
    /// Per-call deadline (`TENDER_PROCESSOR_TIMEOUT_MS`).
    public let timeoutMilliseconds: Int
    /// Retries of transient failures within one call.
    public let retryPolicy: RetryPolicy
    /// Largest accepted response body.
    public static let responseBytesMax = 65_536
    /// Bearer secret, client certificate and CA for the processor (docs/processor-protocol.md).
    public let authentication: ProcessorAuthentication
    let client = HTTPClient()

    /// Creates a connector.
    public init(baseURL: String, timeoutMilliseconds: Int, retryPolicy: RetryPolicy = RetryPolicy(),
                authentication: ProcessorAuthentication = .none) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.timeoutMilliseconds = timeoutMilliseconds
        self.retryPolicy = retryPolicy
        self.authentication = authentication
    }

    /// POST /authorizations.
    public func authorize(_ request: AuthorizationRequest) -> ProcessorOutcome {
        var body: [String: Any] = [
            "merchantId": request.merchantId, "paymentId": request.paymentId, "amountMinor": request.amountMinor,
            "currencyCode": request.currencyCode, "network": request.network, "dpan": request.card.unsafeDPAN(),
            "expirationMonth": request.expirationMonth, "expirationYear": request.expirationYear,
            "cryptogram": request.card.unsafeCryptogram(), "paymentDataType": request.paymentDataType,
            "transactionId": request.transactionId,
        ]
        body["eci"] = request.eci ?? NSNull()
        return send(path: "/authorizations", key: request.processorKey, body: body)
    }

    /// POST /refunds.
    public func refund(_ request: RefundRequest) -> ProcessorOutcome {
        send(path: "/refunds", key: request.processorKey, body: [
            "paymentId": request.paymentId, "processorReference": request.processorReference,
            "amountMinor": request.amountMinor, "currencyCode": request.currencyCode,
        ])
    }

    private func send(path: String, key: String, body: [String: Any]) -> ProcessorOutcome {
        guard var bytes = try? Array(JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) else {
            return .unknown(reason: "request_encoding_failed")
        }
        // The body holds the DPAN and cryptogram: zero it once the exchange is over (PCI DSS 3.3.1).
        defer { for i in bytes.indices { bytes[i] = 0 } }
        var options = HTTPClientOptions()
        options.totalTimeoutMilliseconds = timeoutMilliseconds
        options.connectTimeoutMilliseconds = min(3_000, timeoutMilliseconds)
        options.responseBodyBytesMax = Self.responseBytesMax
        options.allowPlainHTTPForTesting = baseURL.hasPrefix("http://")
        options.clientIdentity = authentication.clientIdentity
        options.caFile = authentication.caFile
        var headers = [("Content-Type", "application/json"), ("Idempotency-Key", key)]
        if let secret = authentication.bearerSecret { headers.append(("Authorization", "Bearer " + secret)) }
        let request = HTTPClientRequest(method: "POST", url: baseURL + path, headers: headers, body: bytes)
        var generator = SystemRandomNumberGenerator()
        let outcome = retryPolicy.run(using: &generator, sleep: { usleep(UInt32($0) * 1_000) }) { _ throws(HTTPClientError) in
            try client.send(request, options: options)
        }
        switch outcome {
        case .failure(let error):
            return .unknown(reason: error.code.rawValue)
        case .success(let response):
            return Self.interpret(response)
        }
    }

    /// Maps a processor response to an outcome: only a well-formed approved/declined answer is final.
    static func interpret(_ response: HTTPClientResponse) -> ProcessorOutcome {
        guard (200...299).contains(response.status) || response.status == 402 else {
            return .unknown(reason: "http_\(response.status)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
              let status = object["status"] as? String else {
            return .unknown(reason: "malformed_response")
        }
        let reference = (object["processorReference"] as? String).flatMap { $0.isEmpty || $0.count > 128 ? nil : $0 }
        switch status {
        case "approved":
            guard let reference else { return .unknown(reason: "malformed_response") }
            return .approved(processorReference: reference, authorizationCode: object["authorizationCode"] as? String)
        case "declined":
            let code = (object["declineCode"] as? String).flatMap { $0.isEmpty || $0.count > 64 ? nil : $0 } ?? "declined"
            return .declined(declineCode: code, processorReference: reference)
        default:
            return .unknown(reason: "malformed_response")
        }
    }
}
