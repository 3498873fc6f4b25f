import Crypto
import Foundation
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
    }
}
