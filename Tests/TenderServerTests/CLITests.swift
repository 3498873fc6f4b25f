import Foundation
import Postgres
import Testing
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

@Suite struct CLIUsageTests {
    @Test func unknownCommandIsUsageError() throws {
        let r = try runTender(["frobnicate"], environment: [:])
        #expect(r.status == ExitCode.usage.rawValue)
        #expect(r.stderr.contains("unknown command frobnicate"))
    }

    @Test func unknownFlagIsUsageError() throws {
        let r = try runTender(["merchants", "add", "--merchant-idd", "x"], environment: [:])
        #expect(r.status == ExitCode.usage.rawValue)
        #expect(r.stderr.contains("unknown option --merchant-idd"))
    }

    @Test func missingValueIsUsageError() throws {
        let r = try runTender(["api-keys", "create", "--merchant-id"], environment: [:])
        #expect(r.status == ExitCode.usage.rawValue)
        #expect(r.stderr.contains("--merchant-id needs a value"))
    }

    @Test(arguments: [["--help"], ["serve", "--help"], ["migrate", "--help"], ["merchants", "add", "--help"],
                      ["api-keys", "create", "--help"], ["sandbox", "bootstrap", "--help"]])
    func everyCommandHasHelp(argv: [String]) throws {
        let r = try runTender(argv, environment: [:])
        #expect(r.status == 0)
        #expect(r.stdout.contains("usage: tender"))
    }

    @Test(arguments: ["TENDER_PAYMENTS_KEY_LOCK_MS", "TENDER_PAYMENTS_RESOLVER_INTERVAL_MS", "TENDER_SIMULATOR_LATENCY_MS"])
    func badFeatureSettingStopsServe(variable: String) throws {
        let r = try runTender(["serve"], environment: [variable: "soon"])
        #expect(r.status == ExitCode.configuration.rawValue)
        #expect(r.stderr.contains(variable))
    }

    @Test(arguments: [
        ("amount-tolerance-minor", "-1"), ("amount-tolerance-minor", "1001"), ("amount-tolerance-minor", "0.01"),
        ("amount-tolerance-minor", ""), ("settlement-lag-seconds", "7776001"), ("settlement-lag-seconds", "7d"),
    ])
    func badReconcileRuleFlagIsAUsageErrorNamingTheFlag(flag: String, value: String) throws {
        // Refused before any database or file is touched.
        let r = try runTender(["reconcile", "--merchant-id", "merchant.nobody", "--format", "generic",
                               "/nonexistent/report.csv", "--\(flag)=\(value)"], environment: [:])
        #expect(r.status == ExitCode.usage.rawValue, "\(r.stderr)")
        #expect(r.stderr.contains("--\(flag)"))
    }

    @Test(arguments: ["TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "TENDER_RECON_SETTLEMENT_LAG_SECONDS"])
    func badReconciliationRuleStopsServeAndReconcile(variable: String) throws {
        let serve = try runTender(["serve"], environment: [variable: "-1"])
        #expect(serve.status == ExitCode.configuration.rawValue)
        #expect(serve.stderr.contains(variable))
        let reconcile = try runTender(["reconcile", "--merchant-id", "merchant.nobody", "--format", "generic",
                                       "/nonexistent/report.csv"], environment: [variable: "-1"])
        #expect(reconcile.status == ExitCode.configuration.rawValue)
        #expect(reconcile.stderr.contains(variable))
    }

    @Test func reconcileHelpNamesTheRuleFlags() throws {
        let r = try runTender(["reconcile", "--help"], environment: [:])
        #expect(r.status == 0)
        #expect(r.stdout.contains("--amount-tolerance-minor N"))
        #expect(r.stdout.contains("--settlement-lag-seconds N"))
        #expect(r.stdout.contains("0...1000"))
        #expect(r.stdout.contains("0...7776000"))
    }

    @Test func badEnvironmentStopsServeNamingTheVariable() throws {
        let r = try runTender(["serve"], environment: ["TENDER_LISTEN": "nowhere"])
        #expect(r.status == ExitCode.configuration.rawValue)
        #expect(r.stderr.contains("TENDER_LISTEN"))
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CLIDatabaseTests {
    @Test func merchantsAndKeysFromTheCommandLine() throws {
        let url = try TestEnvironment.freshDatabase("cli_merchants")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory]
        let migrate = try runTender(["migrate"], environment: env)
        #expect(migrate.status == 0)
        #expect(migrate.stdout.contains("0001_merchants_api_keys"))

        let add = try runTender(["merchants", "add", "--merchant-id", "merchant.com.example", "--display-name", "Example",
                                 "--domain", "shop.example,www.shop.example", "--country", "US", "--currencies", "USD,EUR"],
                                environment: env)
        #expect(add.status == 0)
        let merchant = try JSONSerialization.jsonObject(with: Data(add.stdout.utf8)) as? [String: Any]
        #expect(merchant?["merchantId"] as? String == "merchant.com.example")
        #expect(merchant?["domains"] as? [String] == ["shop.example", "www.shop.example"])

        let again = try runTender(["merchants", "add", "--merchant-id", "merchant.com.example", "--display-name", "Example",
                                   "--domain", "shop.example", "--country", "US", "--currencies", "USD"], environment: env)
        #expect(again.status == ExitCode.failure.rawValue)
        #expect(again.stderr.contains("merchant_exists"))

        let key = try runTender(["api-keys", "create", "--merchant-id", "merchant.com.example"], environment: env)
        #expect(key.status == 0)
        let secret = (try JSONSerialization.jsonObject(with: Data(key.stdout.utf8)) as? [String: Any])?["apiKey"] as? String
        #expect(secret.flatMap(APIKeyFormat.parse) != nil)

        let unknown = try runTender(["api-keys", "create", "--merchant-id", "merchant.com.nobody"], environment: env)
        #expect(unknown.status == ExitCode.failure.rawValue)
        #expect(unknown.stderr.contains("merchant_not_found"))

        let boot1 = try runTender(["sandbox", "bootstrap"], environment: env)
        #expect(boot1.status == 0)
        #expect(boot1.stdout.contains("sandbox API key (shown once): tk_"))
        let boot2 = try runTender(["sandbox", "bootstrap"], environment: env)
        #expect(boot2.status == 0)
        #expect(!boot2.stdout.contains("tk_"))
    }

    @Test func unreachableDatabaseIsExit69() throws {
        let r = try runTender(["migrate"], environment: ["TENDER_DATABASE_URL": "postgresql://tender@127.0.0.1:1/none?connect_timeout=2",
                                                          "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory])
        #expect(r.status == ExitCode.unavailable.rawValue)
        #expect(r.stderr.contains("connection_failed"))
    }

    @Test func serveRefusesPendingMigrationsAndDrainsOnSIGTERM() throws {
        let url = try TestEnvironment.freshDatabase("cli_serve")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory]
        let refused = try runTender(["serve", "--listen", "127.0.0.1:0"], environment: env)
        #expect(refused.status == ExitCode.failure.rawValue)
        #expect(refused.stderr.contains("migrations_pending"))
        #expect(try runTender(["migrate"], environment: env).status == 0)

        let port = freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestEnvironment.tenderBinary)
        process.arguments = ["serve", "--listen", "127.0.0.1:\(port)"]
        var full = ProcessInfo.processInfo.environment
        for (k, v) in env { full[k] = v }
        process.environment = full
        process.standardError = FileHandle.nullDevice
        try process.run()
        var ready = false
        for _ in 0..<200 where !ready {
            if let r = try? RawHTTPClient(port: port, timeoutSeconds: 2).request("GET", "/readyz"), r.status == 200 {
                ready = true
            } else {
                usleep(50_000)
            }
        }
        #expect(ready)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        #expect((try? RawHTTPClient(port: port, timeoutSeconds: 1)) == nil)
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
        pool.dropFeedSlots()
        pool.close()
    }
}

/// A loopback port that was free a moment ago.
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}
