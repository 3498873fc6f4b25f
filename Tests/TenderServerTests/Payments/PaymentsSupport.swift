import ApplePayToken
import Crypto
import Foundation
import HTTPServer
import Observability
import Payments
import Postgres
import Synchronization
@_spi(Testing) @testable import TenderServer

/// Collects payment events so tests can count them, and hands each on to `forward` when there is one.
final class RecordingSink: PaymentEventSubscriber {
    let all = Mutex<[PaymentEvent]>([])
    let forward: (any PaymentEventSubscriber)?
    init(forwardingTo forward: (any PaymentEventSubscriber)? = nil) { self.forward = forward }
    func record(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        _ = try recordReportingOrder(event, merchantId: merchantId, on: conn, now: now)
    }
    func recordReportingOrder(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection,
                              now: Date) throws -> WalletOrderDetails? {
        let made = try forward?.recordReportingOrder(event, merchantId: merchantId, on: conn, now: now)
        all.withLock { $0.append(event) }
        return made ?? nil
    }
    /// The events that move money (what the finance ledger books).
    var events: [PaymentEvent] {
        all.withLock { $0.filter {
            switch $0 {
            case .paymentSucceeded, .refundSucceeded: true
            default: false
            }
        } }
    }
    var count: Int { events.count }
}

/// Collects log lines (to scan them for card data).
final class PaymentLogCapture: Sendable {
    let lines = Mutex<[String]>([])
    var logger: Logger { Logger(format: .json, minimumLevel: .debug, sink: { [self] line in lines.withLock { $0.append(line) } }) }
    var text: String { lines.withLock { $0.joined(separator: "\n") } }
}

/// A checkout session inserted directly (the creation endpoint is another feature's).
struct SessionFixture {
    let sessionId: String
    let clientSecret: String
    let applicationData: [UInt8]
    let totalMinor: Int64
    let currencyCode: String
}

/// A server running only the payments routes, on a fresh migrated database, with a sandbox Apple.
final class PaymentsHarness: Sendable {
    static let authority: SandboxAuthority = {
        do { return try SandboxAuthority.create(validFrom: Date().addingTimeInterval(-86_400), validityDays: 30) } catch {
            fatalError("sandbox authority: \(error)")
        }
    }()

    let pool: PostgresPool
    let app: TenderApp
    let service: PaymentsService
    let server: HTTPServer
    let merchantKeys: [MerchantKey]
    let sink: RecordingSink
    let logs = PaymentLogCapture()
    let merchantId: String
    let apiKey: String
    var port: Int { server.boundPort }

    /// `environment` adds TENDER_* variables to the server's configuration. With `settlement`, payment
    /// outcomes also reach the finance store (as under `tender serve`) and the finance and
    /// settlement-report routes are served too.
    init(prefix: String, processor: ((PostgresPool) -> any PaymentProcessor)? = nil, rules: SimulatorRules = SimulatorRules(),
         settings: PaymentsSettings = PaymentsHarness.fastSettings, merchantKeyCount: Int = 1, connectionsMax: Int = 8,
         environment: [String: String] = [:], settlement: Bool = false, ledger: (any PaymentEventSubscriber)? = nil) throws {
        pool = try TestEnvironment.migratedPool(prefix, connectionsMax: connectionsMax)
        var configuration = try TenderConfiguration.load(environment: environment.merging(["TENDER_LISTEN": "127.0.0.1:0"]) { $1 })
        configuration.limits.databaseConnectionsMax = connectionsMax
        app = TenderApp(configuration: configuration, pool: pool,
                        migrations: try MigrationFile.load(directory: TestEnvironment.migrationsDirectory), logger: .silent)
        let merchantIdentifier = "merchant.test.\(UUID().uuidString.prefix(8).lowercased())"
        merchantKeys = try (0..<merchantKeyCount).map { _ in
            try Self.authority.makeMerchantKey(merchantIdentifier: merchantIdentifier, validFrom: Date().addingTimeInterval(-86_400))
        }
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [Self.authority.root], merchantKeys: merchantKeys, tokenAgeMaxSeconds: 300)
        let chosen = processor?(pool) ?? SimulatorProcessor(pool: pool, rules: rules)
        sink = RecordingSink(forwardingTo: ledger ?? (settlement ? FinancePaymentSink(processor: configuration.processor.rawValue) : nil))
        service = PaymentsService(pool: pool, verifier: DecryptorTokenVerifier(decryptor: decryptor), processor: chosen,
                                  subscribers: [sink], settings: settings, logger: logs.logger)
        var router = Router()
        service.register(into: &router, guarded: app.guarded)
        app.registerCheckoutRoutes(into: &router)
        if settlement {
            app.registerFinanceRoutes(into: &router)
            app.registerSettlementReportRoutes(into: &router)
        }
        server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: router)
        try server.start()
        let merchant = try Merchant.validated(merchantId: merchantIdentifier, displayName: "Test Shop", domains: ["shop.test"],
                                              countryCode: "US", currencies: ["USD", "EUR"])
        try app.merchants.add(merchant)
        merchantId = merchantIdentifier
        apiKey = try app.merchants.createAPIKey(merchantId: merchantIdentifier).secret
    }

    static var fastSettings: PaymentsSettings {
        var s = PaymentsSettings()
        s.keyLockMilliseconds = 5_000
        s.resolverIntervalMilliseconds = 10
        return s
    }

    func stop() {
        service.stopResolver()
        server.shutdown(drainDeadlineMilliseconds: 2_000)
        pool.dropFeedSlots()
        pool.close()
    }

    /// Inserts an open session.
    func session(totalMinor: Int64 = 1_099, currencyCode: String = "EUR", merchantId: String? = nil,
                 status: String = "open", expiresInSeconds: Int = 3_600) throws -> SessionFixture {
        let id = "cs_" + String(hexEncoded(SecureRandom.bytes(12)))
        let secret = "cs_secret_" + hexEncoded(SecureRandom.bytes(16))
        let appData = Array("{\"checkoutSessionId\":\"\(id)\"}".utf8)
        try pool.execute("""
            INSERT INTO checkout_sessions (session_id, merchant_id, status, version, currency_code, total_minor, expires_at,
                                           client_secret_sha256, application_data, application_data_sha256)
            VALUES ($1, $2, $3, 1, $4, $5, now() + $6 * interval '1 second', $7, $8, $9)
            """, [id, merchantId ?? self.merchantId, status, currencyCode, totalMinor, expiresInSeconds, Digest.sha256(secret),
                  Data(appData).base64EncodedString(), hexEncoded(Digest.sha256(appData))])
        return SessionFixture(sessionId: id, clientSecret: secret, applicationData: appData, totalMinor: totalMinor,
                              currencyCode: currencyCode)
    }

    /// A real EC_v1 token for `session` (override any field to break a binding).
    func token(for session: SessionFixture, amountMinor: Int64? = nil, currencyNumeric: String? = nil,
               applicationData: [UInt8]?? = nil, pan: String = "4111111111119876", cryptogram: String = "Q3J5cHRvZ3JhbVNlY3JldA==",
               keyIndex: Int = 0, key: MerchantKey? = nil) throws -> [UInt8] {
        let numeric = currencyNumeric ?? (session.currencyCode == "EUR" ? "978" : "840")
        let request = SandboxTokenRequest(amountMinor: amountMinor ?? session.totalMinor, currencyCodeNumeric: numeric,
                                          applicationData: applicationData ?? session.applicationData, pan: pan,
                                          cryptogram: cryptogram, signingTime: Date())
        return try Self.authority.mintToken(request, for: key ?? merchantKeys[keyIndex])
    }

    static func body(token: [UInt8]) -> [UInt8] {
        Array("{\"token\":".utf8) + token + Array("}".utf8)
    }

    /// POST /payments with the API key (or `bearer`).
    func pay(_ session: SessionFixture, token: [UInt8], key: String?, bearer: String? = nil,
             client: RawHTTPClient? = nil) throws -> RawResponse {
        var headers = [("Authorization", "Bearer \(bearer ?? apiKey)"), ("Content-Type", "application/json")]
        if let key { headers.append(("Idempotency-Key", key)) }
        let c = try client ?? RawHTTPClient(port: port)
        return try c.request("POST", "/v1/checkout-sessions/\(session.sessionId)/payments", headers: headers,
                             body: Self.body(token: token))
    }

    func get(_ path: String, bearer: String? = nil) throws -> RawResponse {
        try RawHTTPClient(port: port).request("GET", path, headers: [("Authorization", "Bearer \(bearer ?? apiKey)")])
    }

    func refund(_ paymentId: String, amount: String, key: String?) throws -> RawResponse {
        var headers = [("Authorization", "Bearer \(apiKey)"), ("Content-Type", "application/json")]
        if let key { headers.append(("Idempotency-Key", key)) }
        return try RawHTTPClient(port: port).request("POST", "/v1/payments/\(paymentId)/refunds", headers: headers,
                                                     body: Array("{\"amount\":\"\(amount)\"}".utf8))
    }

    func scalar(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws -> Int64 {
        try pool.query(sql, parameters).first?.decode("n", as: Int64.self) ?? -1
    }

    /// Processor-side charges (simulator rows) recorded for a payment: a stable key makes this 1 however often it was sent.
    func simulatorCharges(paymentId: String) throws -> Int64 {
        try scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations WHERE payment_id = $1 AND kind = 'authorization'",
                   [paymentId])
    }

    /// How often the simulator was called for a payment's key.
    func simulatorCalls(paymentId: String) throws -> Int64 {
        try scalar("SELECT COALESCE(SUM(calls), 0)::bigint AS n FROM simulator_authorizations WHERE payment_id = $1", [paymentId])
    }
}

/// Runs `body` on `count` threads at once and returns the results in index order.
func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    let results = Mutex<[Int: T]>([:])
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        Thread.detachNewThread {
            let value = body(i)
            results.withLock { $0[i] = value }
            group.leave()
        }
    }
    group.wait()
    return results.withLock { dict in (0..<count).compactMap { dict[$0] } }
}

extension RawResponse: @unchecked Sendable {}

extension RawResponse {
    var code: String? { (try? json())?["code"] as? String }
    var payment: [String: Any]? { (try? json())?["payment"] as? [String: Any] }
}
