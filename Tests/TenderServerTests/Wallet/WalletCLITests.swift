import Crypto
import Foundation
import Postgres
import Testing
@testable import TenderServer

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct WalletCLITests {
    @Test func keysImportListsAndRetiresWalletIdentities() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let url = try TestEnvironment.freshDatabase("cli_wallet")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory, "TENDER_DATA_DIR": dir.path,
                   "TENDER_MASTER_KEY_FILE": ""]
        #expect(try runTender(["migrate"], environment: env).status == 0)
        #expect(try runTender(["merchants", "add", "--merchant-id", "merchant.cli.wallet", "--display-name", "Shop",
                               "--domain", "shop.test", "--country", "US", "--currencies", "USD"], environment: env).status == 0)
        let files = try WalletSandbox.make(now: Date())
        let pass = try #require(files.identities.first { $0.kind == .passType })
        try Data(pass.certificate.der).write(to: URL(fileURLWithPath: dir.file("pass.cer")))
        try Data(try pass.key.unsafePKCS8PEM().utf8).write(to: URL(fileURLWithPath: dir.file("pass.key")))
        try Data(files.wwdr.der).write(to: URL(fileURLWithPath: dir.file("wwdr.cer")))
        let base = ["keys", "import", "--merchant-id", "merchant.cli.wallet", "--certificate", dir.file("pass.cer"),
                    "--private-key", dir.file("pass.key")]
        let missingWWDR = try runTender(base + ["--kind", "pass-type", "--type-identifier", pass.typeIdentifier], environment: env)
        #expect(missingWWDR.status != 0)
        let misplaced = try runTender(base + ["--kind", "processing", "--wwdr", dir.file("wwdr.cer")], environment: env)
        #expect(misplaced.status != 0)
        let imported = try runTender(base + ["--kind", "pass-type", "--type-identifier", pass.typeIdentifier,
                                             "--wwdr", dir.file("wwdr.cer")], environment: env)
        #expect(imported.status == 0, "\(imported.stderr)")
        let info = try jsonObject(imported.stdout)
        #expect(info["kind"] as? String == "pass-type")
        #expect(info["typeIdentifier"] as? String == pass.typeIdentifier)
        let keyId = try #require(info["keyId"] as? String)
        let listed = try #require(try jsonObject(try runTender(["keys", "list"], environment: env).stdout)["keys"] as? [[String: Any]])
        #expect(listed.first?["typeIdentifier"] as? String == pass.typeIdentifier)
        #expect(!(try runTender(["keys", "list"], environment: env).stdout.contains("PRIVATE")))
        #expect(try runTender(["keys", "retire", "--key-id", keyId], environment: env).status == 0)
        // Where new orders send the shopper.
        let management = ["merchants", "update", "--merchant-id", "merchant.cli.wallet", "--order-management-url"]
        #expect(try runTender(management + ["http://shop.test/orders"], environment: env).status != 0)
        #expect(try runTender(management + ["https://shop.test/orders"], environment: env).status == 0)
    }
}

@Suite struct WalletRoutingTests {
    @Test func walletRoutesAreWiredIntoTheAppRouter() throws {
        let configuration = try TenderConfiguration.load(environment: ["TENDER_LISTEN": "127.0.0.1:0",
                                                                       "TENDER_PUBLIC_BASE_URL": "https://pay.example.com/"])
        #expect(configuration.wallet.ordersWebServiceURL == "https://pay.example.com/wallet/orders/")
        #expect(configuration.wallet.passesWebServiceURL == "https://pay.example.com/wallet/passes/")
        #expect(throws: ConfigurationError.self) {
            try TenderConfiguration.load(environment: ["TENDER_PUBLIC_BASE_URL": "pay.example.com"])
        }
        #expect(throws: ConfigurationError.self) { try TenderConfiguration.load(environment: ["TENDER_APNS_URL": "http://apns.test"]) }
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: "postgresql://127.0.0.1:1/none"))
        defer { pool.close() }
        let router = TenderApp(configuration: configuration, pool: pool, migrations: [], logger: .silent).router()
        let routes: [(String, String)] = [
            ("POST", "/v1/payments/pay_x/order"), ("POST", "/v1/wallet/passes"), ("GET", "/v1/wallet/passes/pass.a.b/1"),
            ("PATCH", "/v1/wallet/passes/pass.a.b/1"), ("GET", "/wallet/orders/v1/orders/order.a.b/ord_1"),
            ("POST", "/wallet/orders/v1/devices/d/registrations/order.a.b/ord_1"),
            ("DELETE", "/wallet/orders/v1/devices/d/registrations/order.a.b/ord_1"),
            ("GET", "/wallet/orders/v1/devices/d/registrations/order.a.b"), ("POST", "/wallet/orders/v1/log"),
            ("GET", "/wallet/passes/v1/passes/pass.a.b/1"), ("POST", "/wallet/passes/v1/devices/d/registrations/pass.a.b/1"),
            ("DELETE", "/wallet/passes/v1/devices/d/registrations/pass.a.b/1"),
            ("GET", "/wallet/passes/v1/devices/d/registrations/pass.a.b"), ("POST", "/wallet/passes/v1/log"),
        ]
        for (method, path) in routes {
            guard case .found = router.match(method: method, path: path) else {
                Issue.record("\(method) \(path) not routed")
                continue
            }
        }
    }
}
