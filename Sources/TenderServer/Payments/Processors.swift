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
    public var timeoutMilliseconds: Int { transport.timeoutMilliseconds }
    /// Largest accepted response body.
    public static let responseBytesMax = ProcessorTransport.responseBytesMax
    /// Bearer secret, client certificate and CA for the processor (docs/processor-protocol.md).
    public var authentication: ProcessorAuthentication { transport.authentication }
    let transport: ProcessorTransport

    /// Creates a connector. `allowPlainHTTPForTesting` (from `TENDER_UNSAFE_PROCESSOR_PLAIN_HTTP_FOR_TESTING`)
    /// lets an `http://` URL through; without it libcurl refuses anything but https.
    public init(baseURL: String, timeoutMilliseconds: Int, retryPolicy: RetryPolicy = RetryPolicy(),
                authentication: ProcessorAuthentication = .none, allowPlainHTTPForTesting: Bool = false) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        transport = ProcessorTransport(timeoutMilliseconds: timeoutMilliseconds, retryPolicy: retryPolicy,
                                       authentication: authentication, allowPlainHTTPForTesting: allowPlainHTTPForTesting)
    }

    /// The `POST /authorizations` body (docs/processor-protocol.md); `eci` is written as `null` when absent.
    struct AuthorizationBody: Encodable {
        let merchantId: String, paymentId: String, amountMinor: Int64, currencyCode: String, network: String
        let dpan: String, expirationMonth: Int, expirationYear: Int, cryptogram: String, eci: String?
        let paymentDataType: String, transactionId: String

        enum CodingKeys: String, CodingKey {
            case merchantId, paymentId, amountMinor, currencyCode, network, dpan, expirationMonth, expirationYear
            case cryptogram, eci, paymentDataType, transactionId
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(merchantId, forKey: .merchantId)
            try c.encode(paymentId, forKey: .paymentId)
            try c.encode(amountMinor, forKey: .amountMinor)
            try c.encode(currencyCode, forKey: .currencyCode)
            try c.encode(network, forKey: .network)
            try c.encode(dpan, forKey: .dpan)
            try c.encode(expirationMonth, forKey: .expirationMonth)
            try c.encode(expirationYear, forKey: .expirationYear)
            try c.encode(cryptogram, forKey: .cryptogram)
            if let eci { try c.encode(eci, forKey: .eci) } else { try c.encodeNil(forKey: .eci) }
            try c.encode(paymentDataType, forKey: .paymentDataType)
            try c.encode(transactionId, forKey: .transactionId)
        }
    }

    /// The `POST /refunds` body.
    struct RefundBody: Encodable {
        let paymentId: String, processorReference: String, amountMinor: Int64, currencyCode: String
    }

    /// An answer of either call.
    struct Answer: Decodable {
        let status: String
        let processorReference: String?
        let authorizationCode: String?
        let declineCode: String?
    }

    /// POST /authorizations.
    public func authorize(_ request: AuthorizationRequest) -> ProcessorOutcome {
        send(path: "/authorizations", key: request.processorKey, body: ProcessorTransport.encode(AuthorizationBody(
            merchantId: request.merchantId, paymentId: request.paymentId, amountMinor: request.amountMinor,
            currencyCode: request.currencyCode, network: request.network, dpan: request.card.unsafeDPAN(),
            expirationMonth: request.expirationMonth, expirationYear: request.expirationYear,
            cryptogram: request.card.unsafeCryptogram(), eci: request.eci, paymentDataType: request.paymentDataType,
            transactionId: request.transactionId)))
    }

    /// POST /refunds.
    public func refund(_ request: RefundRequest) -> ProcessorOutcome {
        send(path: "/refunds", key: request.processorKey, body: ProcessorTransport.encode(RefundBody(
            paymentId: request.paymentId, processorReference: request.processorReference,
            amountMinor: request.amountMinor, currencyCode: request.currencyCode)))
    }

    private func send(path: String, key: String, body: [UInt8]?) -> ProcessorOutcome {
        guard var bytes = body else { return .unknown(reason: "request_encoding_failed") }
        // The body holds the DPAN and cryptogram: zero it once the exchange is over (PCI DSS 3.3.1).
        defer { ProcessorTransport.wipe(&bytes) }
        var headers = [("Content-Type", "application/json"), ("Idempotency-Key", key)]
        if let secret = authentication.bearerSecret { headers.append(("Authorization", "Bearer " + secret)) }
        switch transport.post(url: baseURL + path, headers: headers, body: bytes) {
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
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)) else {
            return .unknown(reason: "malformed_response")
        }
        let reference = answer.processorReference.flatMap { $0.isEmpty || $0.count > 128 ? nil : $0 }
        switch answer.status {
        case "approved":
            guard let reference else { return .unknown(reason: "malformed_response") }
            return .approved(processorReference: reference, authorizationCode: answer.authorizationCode)
        case "declined":
            let code = answer.declineCode.flatMap { $0.isEmpty || $0.count > 64 ? nil : $0 } ?? "declined"
            return .declined(declineCode: code, processorReference: reference)
        default:
            return .unknown(reason: "malformed_response")
        }
    }
}
