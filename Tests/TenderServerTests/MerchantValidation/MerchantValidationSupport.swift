import Crypto
import Foundation
import HTTPClient
import HTTPServer
import Observability
import Postgres
@_spi(Testing) @testable import TenderServer

/// The local Apple gateway (python3 + openssl, 127.0.0.1 only), started once for the test run.
final class FakeAppleGateway: Sendable {
    struct StartFailure: Error, CustomStringConvertible { let description: String }

    /// The host name on the gateway's certificate; tests allow-list it and point it at a local port.
    static let host = "apple-pay-gateway.test"
    static let lifetimeSeconds = 600
    static let shared: Result<FakeAppleGateway, StartFailure> = Result { () throws(StartFailure) in
        try FakeAppleGateway()
    }

    /// One port per behaviour: ok, refuse417, error500, redirect, notobject, silent; plus control.
    let ports: [String: Int]
    let directory: URL
    private let process: Process
    private let stdinPipe: Pipe

    private init() throws(StartFailure) {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("tender-fake-gateway-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try fakeAppleGatewayScript.write(to: directory.appendingPathComponent("gateway.py"), atomically: true,
                                             encoding: .utf8)
        } catch {
            throw StartFailure(description: "cannot prepare \(directory.path): \(error)")
        }
        let process = Process()
        let stdinPipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-W", "ignore", directory.appendingPathComponent("gateway.py").path,
                             directory.path, String(Self.lifetimeSeconds)]
        process.standardInput = stdinPipe
        process.standardOutput = FileHandle.nullDevice
        do { try process.run() } catch { throw StartFailure(description: "cannot start python3: \(error)") }
        let ready = directory.appendingPathComponent("ready.json")
        let deadline = Date().addingTimeInterval(60)
        var ports: [String: Int] = [:]
        while Date() < deadline {
            if let data = try? Data(contentsOf: ready),
               let decoded = try? JSONDecoder().decode([String: Int].self, from: data) {
                ports = decoded
                break
            }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        guard ports["control"] != nil, ports["ok"] != nil else {
            process.terminate()
            throw StartFailure(description: "fake gateway did not start")
        }
        self.ports = ports
        self.directory = directory
        self.process = process
        self.stdinPipe = stdinPipe
    }

    static func get() throws -> FakeAppleGateway { try shared.get() }

    func file(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func port(_ mode: String) throws -> Int {
        guard let port = ports[mode] else { throw TenderError("test_gateway", "no \(mode) port") }
        return port
    }

    /// One request the gateway received.
    struct SeenRequest {
        let mode: String
        let method: String
        let path: String
        let host: String
        let contentType: String
        let clientSubject: String
        let body: [UInt8]
    }

    /// Everything the gateway has seen so far, and TCP accepts per behaviour.
    func snapshot() throws -> (requests: [SeenRequest], accepts: [String: Int]) {
        let response = try RawHTTPClient(port: try port("control")).request("GET", "/")
        let object = try response.json()
        let accepts = (object["accepts"] as? [String: Int]) ?? [:]
        let requests = ((object["requests"] as? [[String: Any]]) ?? []).map { entry in
            SeenRequest(mode: entry["mode"] as? String ?? "", method: entry["method"] as? String ?? "",
                        path: entry["path"] as? String ?? "", host: entry["host"] as? String ?? "",
                        contentType: entry["contentType"] as? String ?? "",
                        clientSubject: entry["clientSubject"] as? String ?? "",
                        body: Array(Data(base64Encoded: entry["bodyBase64"] as? String ?? "") ?? Data()))
        }
        return (requests, accepts)
    }

    func totalAccepts() throws -> Int { try snapshot().accepts.values.reduce(0, +) }
}

/// Log lines captured for assertions.
final class CapturedLog: Sendable {
    private let lines = LockedLines()
    var logger: Logger { Logger(format: .json, minimumLevel: .debug, sink: { [lines] in lines.append($0) }) }
    var text: String { lines.all.joined(separator: "\n") }
}

final class LockedLines: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var storage: [String] = []
    func append(_ line: String) { lock.lock(); storage.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return storage }
}

/// A Tender server whose merchant-validation route talks to the fake gateway in `mode`.
final class MerchantValidationServer {
    static let merchantId = "merchant.com.tender.shop"

    let app: TenderApp
    let server: HTTPServer
    let pool: PostgresPool
    let service: MerchantValidationService
    let log = CapturedLog()
    var port: Int { server.boundPort }

    /// `identities` nil = the merchant has the gateway-trusted identity from the fake gateway's files.
    init(mode: String, identityFiles: (String, String)? = ("identity.pem", "identity.key"),
         totalTimeoutMilliseconds: Int = 8_000) throws {
        let gateway = try FakeAppleGateway.get()
        pool = try TestEnvironment.migratedPool("mv")
        var configuration = try TenderConfiguration.load(environment: [
            "TENDER_LISTEN": "127.0.0.1:0",
            "TENDER_APPLE_PAY_GATEWAY_HOSTS": FakeAppleGateway.host,
            "TENDER_APPLE_PAY_GATEWAY_CA_FILE": gateway.file("ca.pem"),
        ])
        configuration.limits.databaseConnectionsMax = 4
        app = TenderApp(configuration: configuration, pool: pool,
                        migrations: try MigrationFile.load(directory: TestEnvironment.migrationsDirectory),
                        logger: log.logger)
        var settings = MerchantValidationSettings(configuration: configuration)
        settings.totalTimeoutMilliseconds = totalTimeoutMilliseconds
        settings.unsafeGatewayOverrideForTesting = .init(host: FakeAppleGateway.host, port: try gateway.port(mode))
        var files: [String: PEMFileMerchantIdentities.Files] = [:]
        if let (certificate, key) = identityFiles {
            files[Self.merchantId] = .init(certificatePath: gateway.file(certificate), privateKeyPath: gateway.file(key))
        }
        service = MerchantValidationService(settings: settings, identities: PEMFileMerchantIdentities(files: files),
                                            metrics: app.metrics, logger: log.logger)
        var router = Router()
        app.registerMerchantValidationRoutes(into: &router, service: service)
        server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: router)
        try server.start()
    }

    func stop() {
        server.shutdown(drainDeadlineMilliseconds: 2_000)
        pool.close()
    }

    /// Registers a merchant (two domains) and returns its API key.
    func merchant(_ id: String = merchantId, domains: [String] = ["shop.tender.test", "www.shop.tender.test"]) throws
        -> String
    {
        let merchant = try Merchant.validated(merchantId: id, displayName: "Tender Shop", domains: domains,
                                              countryCode: "US", currencies: ["USD"])
        try app.merchants.add(merchant)
        return try app.merchants.createAPIKey(merchantId: id).secret
    }

    /// Inserts a checkout session and returns its id and client secret.
    func session(merchantId: String = merchantId, status: String = "open", expiresIn: TimeInterval = 3_600) throws
        -> (id: String, clientSecret: String)
    {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let id = "cs_" + String(SecureRandom.bytes(24).map { alphabet[Int($0) % alphabet.count] })
        let secret = "cs_secret_" + hexEncoded(SecureRandom.bytes(24))
        _ = try pool.execute("""
            INSERT INTO checkout_sessions (session_id, merchant_id, status, version, currency_code, total_minor,
                                           expires_at, client_secret_sha256, application_data, application_data_sha256)
            VALUES ($1, $2, $3, 1, 'USD', 1498, $4, $5, '', $6)
            """, [id, merchantId, status, Date().addingTimeInterval(expiresIn), Digest.sha256(secret),
                  String(repeating: "0", count: 64)])
        return (id, secret)
    }

    /// Posts `body` to the session's merchant-validation endpoint with `bearer`.
    func validate(_ sessionId: String, bearer: String?, body: String) throws -> RawResponse {
        var headers = [("Content-Type", "application/json")]
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        return try RawHTTPClient(port: port, timeoutSeconds: 30)
            .request("POST", "/v1/checkout-sessions/\(sessionId)/merchant-validation", headers: headers,
                     body: Array(body.utf8))
    }

    static func body(url: String = "https://\(FakeAppleGateway.host)/paymentservices/paymentSession",
                     initiativeContext: String? = nil) -> String {
        var object = #"{"validationURL":"\#(url)""#
        if let initiativeContext { object += #","initiativeContext":"\#(initiativeContext)""# }
        return object + "}"
    }
}
