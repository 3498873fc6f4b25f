import Foundation
import HTTPServer
import Observability
import Postgres
import Testing
import Time
@testable import TenderServer

/// A Tender server on a fresh migrated database, listening on a free loopback port.
final class RunningServer {
    let app: TenderApp
    let server: HTTPServer
    let pool: PostgresPool
    var port: Int { server.boundPort }

    init(prefix: String, extraMigrations: [MigrationFile] = [], environment: [String: String] = [:],
         clock: Clock = .system) throws {
        pool = try TestEnvironment.migratedPool(prefix)
        var configuration = try TenderConfiguration.load(environment: environment.merging(["TENDER_LISTEN": "127.0.0.1:0"]) { $1 })
        configuration.limits.databaseConnectionsMax = 8
        configuration.clock = clock
        let files = try MigrationFile.load(directory: TestEnvironment.migrationsDirectory) + extraMigrations
        app = TenderApp(configuration: configuration, pool: pool, migrations: files, logger: .silent)
        server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: app.router(),
                            onRequestComplete: { [app] in app.record($0) })
        try server.start()
        app.registerGauges(server: server)
    }

    func stop() {
        server.shutdown(drainDeadlineMilliseconds: 2_000)
        app.finance.stop()
        pool.dropFeedSlots()
        pool.close()
    }

    /// Registers a merchant and returns an API key for it.
    func merchantWithKey(_ id: String = "merchant.test.\(UUID().uuidString.prefix(8).lowercased())") throws -> (Merchant, String) {
        let m = try Merchant.validated(merchantId: id, displayName: "Test Shop", domains: ["shop.test"],
                                       countryCode: "US", currencies: ["USD"])
        try app.merchants.add(m)
        return (m, try app.merchants.createAPIKey(merchantId: id).secret)
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct ServerTests {
    @Test func healthReadyAndMetrics() throws {
        let s = try RunningServer(prefix: "srv_ops")
        defer { s.stop() }
        let client = try RawHTTPClient(port: s.port)
        let health = try client.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect(try health.json()["status"] as? String == "ok")
        let ready = try client.request("GET", "/readyz")
        #expect(ready.status == 200)
        let metrics = try client.request("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.text.contains("tender_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 1"))
        #expect(metrics.text.contains("tender_http_request_duration_seconds_bucket{route=\"/readyz\",le=\"+Inf\"} 1"))
        #expect(metrics.text.contains("tender_db_pool_connections{state=\"max\"} 8"))
        #expect(metrics.text.contains("tender_http_worker_queue_depth"))
    }

    @Test func readinessFailsWithPendingMigration() throws {
        let extra = try MigrationFile.parse(fileName: "9999_not_yet.sql", bytes: Array("SELECT 1;".utf8))
        let s = try RunningServer(prefix: "srv_pending", extraMigrations: [extra])
        defer { s.stop() }
        let ready = try RawHTTPClient(port: s.port).request("GET", "/readyz")
        #expect(ready.status == 503)
        #expect(ready.header("Content-Type")?.hasPrefix("application/problem+json") == true)
        #expect(try ready.json()["code"] as? String == "migrations_pending")
    }

    @Test func merchantEndpointNeedsAValidKey() throws {
        let s = try RunningServer(prefix: "srv_auth")
        defer { s.stop() }
        let (merchant, key) = try s.merchantWithKey()
        let client = try RawHTTPClient(port: s.port)

        let ok = try client.request("GET", "/v1/merchant", headers: [("Authorization", "Bearer \(key)")])
        #expect(ok.status == 200)
        #expect(try ok.json()["merchantId"] as? String == merchant.merchantId)

        let missing = try client.request("GET", "/v1/merchant")
        #expect(missing.status == 401)
        let problem = try missing.json()
        #expect(problem["code"] as? String == "unauthorized")
        #expect(problem["status"] as? Int == 401)
        #expect((problem["requestId"] as? String)?.isEmpty == false)

        var tampered = Array(key)
        tampered[tampered.count - 1] = tampered[tampered.count - 1] == "0" ? "1" : "0"
        let wrong = try client.request("GET", "/v1/merchant", headers: [("Authorization", "Bearer \(String(tampered))")])
        #expect(wrong.status == 401)
        #expect(try wrong.json()["code"] as? String == "unauthorized")

        let basic = try client.request("GET", "/v1/merchant", headers: [("Authorization", "Basic \(key)")])
        #expect(basic.status == 401)
    }

    @Test func keyOfOneMerchantNeverReadsAnother() throws {
        let s = try RunningServer(prefix: "srv_scope")
        defer { s.stop() }
        let (a, keyA) = try s.merchantWithKey()
        let (b, keyB) = try s.merchantWithKey()
        let client = try RawHTTPClient(port: s.port)
        #expect(try client.request("GET", "/v1/merchant", headers: [("Authorization",
            "Bearer \(keyA)")]).json()["merchantId"] as? String == a.merchantId)
        #expect(try client.request("GET", "/v1/merchant", headers: [("Authorization",
            "Bearer \(keyB)")]).json()["merchantId"] as? String == b.merchantId)
    }

    @Test func accessLogHasNoSecrets() throws {
        let lines = LogCapture()
        let pool = try TestEnvironment.migratedPool("srv_log")
        defer { pool.close() }
        let configuration = try TenderConfiguration.load(environment: ["TENDER_LISTEN": "127.0.0.1:0"])
        let app = TenderApp(configuration: configuration, pool: pool,
                            migrations: try MigrationFile.load(directory: TestEnvironment.migrationsDirectory),
                            logger: Logger(format: .json, sink: { lines.append($0) }))
        let server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: app.router(),
                                onRequestComplete: { app.record($0) })
        try server.start()
        defer { server.shutdown(drainDeadlineMilliseconds: 1_000) }
        let secret = "tk_aaaaaaaaaaaaaaaa_" + String(repeating: "ab", count: 32)
        _ = try RawHTTPClient(port: server.boundPort).request("GET", "/v1/merchant", headers: [("Authorization", "Bearer \(secret)")])
        let deadline = Date().addingTimeInterval(5)
        while lines.all.isEmpty && Date() < deadline { usleep(10_000) }
        let all = lines.all.joined(separator: "\n")
        #expect(all.contains("\"route\":\"/v1/merchant\""))
        #expect(all.contains("\"status\":\"401\""))
        #expect(!all.contains(secret))
        #expect(!all.contains("ababab"))
    }
}

final class LogCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
