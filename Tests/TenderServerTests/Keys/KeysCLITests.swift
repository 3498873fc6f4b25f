import Crypto
import Foundation
import Testing
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// A scratch directory removed after the test.
struct ScratchDirectory {
    let path = NSTemporaryDirectory() + "tender-keys-\(UUID().uuidString.prefix(8))"
    init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
}

func jsonObject(_ text: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
}

@Suite struct TokenCLITests {
    static let gala = TestEnvironment.packageRoot + "/Tests/ApplePayTokenTests/Vectors/gala-2023/"
    static let galaTime = "2021-09-01T19:03:06Z"
    static let galaArgs = ["token", "decrypt", "--token", gala + "token.json", "--certificate", gala + "certificate.pem",
                           "--private-key", gala + "private_key.pem"]
    /// The expected values, read from the vector's own description rather than from Tender's output.
    static func expected() throws -> [String: Any] {
        let vector = try jsonObject(String(decoding: try Data(contentsOf: URL(fileURLWithPath: gala + "vector.json")), as: UTF8.self))
        return try #require((vector["expected"] as? [String: Any])?["fields"] as? [String: Any])
    }

    @Test func realTokenDecryptsMaskedAtItsSigningTime() throws {
        let r = try runTender(Self.galaArgs + ["--at", Self.galaTime], environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(r.status == 0, "\(r.stderr)")
        let fields = try Self.expected()
        let pan = try #require(fields["applicationPrimaryAccountNumber"] as? String)
        let cryptogram = try #require((fields["paymentData"] as? [String: Any])?["onlinePaymentCryptogram"] as? String)
        #expect(!r.stdout.contains(pan))
        #expect(!r.stdout.contains(cryptogram))
        let out = try jsonObject(r.stdout)
        let payload = try #require(out["paymentData"] as? [String: Any])
        #expect(payload["applicationPrimaryAccountNumber"] as? String == "****" + pan.suffix(4))
        #expect((payload["transactionAmount"] as? NSNumber)?.int64Value == (fields["transactionAmount"] as? NSNumber)?.int64Value)
        #expect(payload["currencyCode"] as? String == fields["currencyCode"] as? String)
        #expect(out["masked"] as? Bool == true)
        #expect((out["verified"] as? [String: Any])?["signingTime"] as? String == Self.galaTime)
    }

    @Test func revealSensitiveShowsThePAN() throws {
        let r = try runTender(Self.galaArgs + ["--at", Self.galaTime, "--reveal-sensitive"], environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(r.status == 0)
        let fields = try Self.expected()
        let payload = try #require(try jsonObject(r.stdout)["paymentData"] as? [String: Any])
        #expect(payload["applicationPrimaryAccountNumber"] as? String == fields["applicationPrimaryAccountNumber"] as? String)
        let paymentData = fields["paymentData"] as? [String: Any]
        #expect(payload["onlinePaymentCryptogram"] as? String == paymentData?["onlinePaymentCryptogram"] as? String)
    }

    @Test func todayTheRealTokenIsRefused() throws {
        // Its certificates expired since: the chain check (before freshness) refuses it.
        let r = try runTender(Self.galaArgs, environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(r.status == 1)
        #expect(try jsonObject(r.stdout)["error"] as? String == "certificate_chain_invalid")
        #expect(r.stderr.contains("certificate_chain_invalid"))
        // A few minutes after signing, only freshness fails.
        let late = try runTender(Self.galaArgs + ["--at", "2021-09-01T19:08:07Z"], environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(late.status == 1)
        #expect(try jsonObject(late.stdout)["error"] as? String == "token_expired")
    }

    @Test func tamperedTokenExitsOneWithItsCode() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        var doc = try jsonObject(String(decoding: try Data(contentsOf: URL(fileURLWithPath: Self.gala + "token.json")), as: UTF8.self))
        var data = Array(try #require(doc["data"] as? String))
        data[20] = data[20] == "A" ? "B" : "A"
        doc["data"] = String(data)
        _ = FileManager.default.createFile(atPath: dir.file("t.json"), contents: try JSONSerialization.data(withJSONObject: doc))
        let r = try runTender(["token", "decrypt", "--token", dir.file("t.json"), "--certificate", Self.gala + "certificate.pem",
                               "--private-key", Self.gala + "private_key.pem", "--at", Self.galaTime],
                                   environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(r.status == 1)
        #expect(try jsonObject(r.stdout)["error"] as? String == "message_digest_mismatch")
        #expect(r.stderr.contains("error message_digest_mismatch"))
    }

    @Test func usageErrors() throws {
        #expect(try runTender(["token", "decrypt", "--token", "x"], environment: [:]).status == ExitCode.usage.rawValue)
        #expect(try runTender(Self.galaArgs + ["--at", "yesterday"], environment: [:]).status == ExitCode.usage.rawValue)
        let missing = try runTender(["token", "decrypt", "--token", "/nonexistent", "--certificate", "/x", "--private-key", "/y"],
                                    environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(missing.status == 1)
        #expect(try jsonObject(missing.stdout)["error"] as? String == "file_unreadable")
    }

    @Test(arguments: [["keys", "--help"], ["keys", "import", "--help"], ["keys", "list", "--help"], ["keys", "retire", "--help"],
                      ["token", "--help"], ["token", "decrypt", "--help"], ["sandbox", "--help"], ["sandbox", "init", "--help"],
                      ["sandbox", "token", "--help"], ["bench", "--help"], ["payments", "--help"], ["payments", "release", "--help"],
                      ["payments", "needs-operator", "--help"], ["payments", "settle-refund", "--help"]])
    func everyNewCommandHasHelp(argv: [String]) throws {
        let r = try runTender(argv, environment: [:])
        #expect(r.status == 0)
        #expect(r.stdout.contains("usage: tender"))
    }

    @Test func sandboxInitAndTokenRoundTripOffline() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let initialized = try runTender(["sandbox", "init", "--dir", dir.path, "--merchant-id", "merchant.com.example.cli"],
            environment: [:])
        #expect(initialized.status == 0, "\(initialized.stderr)")
        let hash = try #require(try jsonObject(initialized.stdout)["publicKeyHash"] as? String)
        for name in ["root-key.pem", "intermediate-key.pem", "leaf-key.pem", "merchant-processing-key.pem"] {
            var info = stat()
            #expect(stat(dir.file(name), &info) == 0 && info.st_mode & 0o777 == 0o600, "\(name)")
        }
        #expect(FileManager.default.fileExists(atPath: dir.file("root.pem")))
        // A second init into the same directory is refused rather than overwriting keys.
        let again = try runTender(["sandbox", "init", "--dir", dir.path], environment: [:])
        #expect(again.status == 1 && again.stderr.contains("sandbox_exists"))

        let at = "2030-01-02T03:04:05Z"
        let appData = Data("cs_session".utf8).base64EncodedString()
        let minted = try runTender(["sandbox", "token", "--dir", dir.path, "--amount", "14.98", "--currency", "USD",
                                    "--application-data", appData, "--pan", "5500000000000004", "--at", at,
                                    "--out", dir.file("token.json")], environment: [:])
        #expect(minted.status == 0, "\(minted.stderr)")
        let token = try jsonObject(String(decoding: try Data(contentsOf: URL(fileURLWithPath: dir.file("token.json"))), as: UTF8.self))
        #expect(token["paymentData"] is [String: Any] && token["paymentMethod"] is [String: Any]
            && token["transactionIdentifier"] is String)

        let decryptArgs = ["token", "decrypt", "--token", dir.file("token.json"), "--certificate", dir.file("merchant-processing.pem"),
                           "--private-key", dir.file("merchant-processing-key.pem"), "--reveal-sensitive"]
        // Apple's root does not trust the sandbox.
        let refused = try runTender(decryptArgs + ["--at", at], environment: ["TENDER_APPLE_ROOTS": ""])
        #expect(try jsonObject(refused.stdout)["error"] as? String == "certificate_chain_invalid")
        // Told to trust it, the token verifies at its signing time and carries what was asked for.
        let ok = try runTender(decryptArgs + ["--at", at], environment: ["TENDER_APPLE_ROOTS": dir.file("root.pem")])
        #expect(ok.status == 0, "\(ok.stderr)")
        let out = try jsonObject(ok.stdout)
        let payload = try #require(out["paymentData"] as? [String: Any])
        let verified = try #require(out["verified"] as? [String: Any])
        #expect((payload["transactionAmount"] as? NSNumber)?.int64Value == 1498)
        #expect(payload["currencyCode"] as? String == "840")
        #expect(payload["applicationPrimaryAccountNumber"] as? String == "5500000000000004")
        #expect(verified["applicationData"] as? String == hexEncoded(Digest.sha256(Array("cs_session".utf8))))
        #expect(verified["publicKeyHash"] as? String == hash)
        #expect(verified["signingTime"] as? String == at)
        // Six minutes later it is stale.
        let stale = try runTender(decryptArgs + ["--at", "2030-01-02T03:10:06Z"], environment: ["TENDER_APPLE_ROOTS": dir.file("root.pem")])
        #expect(try jsonObject(stale.stdout)["error"] as? String == "token_expired")

        let badAmount = try runTender(["sandbox", "token", "--dir", dir.path, "--amount", "14.9", "--currency", "USD",
                                       "--application-data", appData], environment: [:])
        #expect(badAmount.status == ExitCode.usage.rawValue)
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct KeysCLITests {
    @Test func importListRetireFromTheCommandLine() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let url = try TestEnvironment.freshDatabase("cli_keys")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
                   "TENDER_MASTER_KEY_FILE": dir.file("master.key")]
        #expect(try runTender(["migrate"], environment: env).status == 0)
        let merchantId = "merchant.com.example.cli"
        #expect(try runTender(["merchants", "add", "--merchant-id", merchantId, "--display-name", "CLI", "--domain", "shop.example",
                               "--country", "US", "--currencies", "USD"], environment: env).status == 0)
        let sandbox = try runTender(["sandbox", "init", "--dir", dir.file("sbx"), "--merchant-id", merchantId], environment: env)
        let hash = try #require(try jsonObject(sandbox.stdout)["publicKeyHash"] as? String)

        let imported = try runTender(["keys", "import", "--merchant-id", merchantId, "--certificate",
            dir.file("sbx/merchant-processing.pem"),
                                      "--private-key", dir.file("sbx/merchant-processing-key.pem")], environment: env)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try jsonObject(imported.stdout)["publicKeyHash"] as? String == hash)
        #expect(imported.stderr.contains("created a new master key"))
        var info = stat()
        #expect(stat(dir.file("master.key"), &info) == 0 && info.st_mode & 0o777 == 0o600)

        let duplicate = try runTender(["keys", "import", "--merchant-id", merchantId, "--certificate",
            dir.file("sbx/merchant-processing.pem"),
                                       "--private-key", dir.file("sbx/merchant-processing-key.pem")], environment: env)
        #expect(duplicate.status == 1 && duplicate.stderr.contains("key_exists"))

        // A processing certificate Apple issued to another merchant id (OID 1.2.840.113635.100.6.32) is refused.
        #expect(try runTender(["sandbox", "init", "--dir", dir.file("other"), "--merchant-id", "merchant.com.example.other"],
                              environment: env).status == 0)
        let foreign = try runTender(["keys", "import", "--merchant-id", merchantId, "--certificate",
            dir.file("other/merchant-processing.pem"),
                                     "--private-key", dir.file("other/merchant-processing-key.pem")], environment: env)
        #expect(foreign.status == 1 && foreign.stderr.contains("certificate_merchant_mismatch"), "\(foreign.stderr)")

        let identity = try runTender(["keys", "import", "--merchant-id", merchantId, "--kind", "identity",
                                      "--certificate", dir.file("sbx/leaf.pem"), "--private-key", dir.file("sbx/leaf-key.pem")],
                                          environment: env)
        #expect(identity.status == 0, "\(identity.stderr)")
        #expect(try jsonObject(identity.stdout)["keyId"] is String)

        let listed = try runTender(["keys", "list", "--merchant-id", merchantId], environment: env)
        #expect(listed.status == 0)
        let keys = try #require(try jsonObject(listed.stdout)["keys"] as? [[String: Any]])
        #expect(keys.count == 2)
        #expect(keys.contains { $0["publicKeyHash"] as? String == hash && $0["status"] as? String == "active" })
        let keyText = try String(contentsOfFile: dir.file("sbx/merchant-processing-key.pem"), encoding: .utf8)
        let keyBody = keyText.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        #expect(!listed.stdout.contains("PRIVATE") && !listed.stdout.contains(String(keyBody.suffix(24))))

        let retired = try runTender(["keys", "retire", "--public-key-hash", hash], environment: env)
        #expect(retired.status == 0)
        #expect(try jsonObject(retired.stdout)["status"] as? String == "retired")
        let twice = try runTender(["keys", "retire", "--public-key-hash", hash], environment: env)
        #expect(twice.status == 1 && twice.stderr.contains("key_already_retired"))

        // A master key readable by others is refused.
        chmod(dir.file("master.key"), 0o644)
        let unsafe = try runTender(["keys", "import", "--merchant-id", merchantId, "--certificate", dir.file("sbx/merchant-processing.pem"),
                                    "--private-key", dir.file("sbx/merchant-processing-key.pem")], environment: env)
        #expect(unsafe.status == 1 && unsafe.stderr.contains("master_key_permissions"))
    }

    @Test func bootstrapServesATokenFlowAndSessionTokensMint() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let url = try TestEnvironment.freshDatabase("cli_bootstrap")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory, "TENDER_DATA_DIR": dir.path,
                   "TENDER_MASTER_KEY_FILE": ""]
        #expect(try runTender(["migrate"], environment: env).status == 0)
        let first = try runTender(["sandbox", "bootstrap"], environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("sandbox processing key imported"))
        let second = try runTender(["sandbox", "bootstrap"], environment: env)
        #expect(second.status == 0 && !second.stdout.contains("imported"))
        let keys = try #require(try jsonObject(try runTender(["keys", "list"], environment: env).stdout)["keys"] as? [[String: Any]])
        // One processing key, and the Wallet order-type and pass-type identities (CONTRACT §7).
        #expect(keys.filter { $0["kind"] as? String == "processing" }.count == 1)
        #expect(Set(keys.compactMap { $0["typeIdentifier"] as? String }) == [WalletSandbox.orderTypeIdentifier,
                                                                                WalletSandbox.passTypeIdentifier])
        #expect(keys.count == 3)

        // A session's amount, currency and applicationData come from the database.
        let pool = PostgresPoolBox(url)
        defer { pool.close() }
        try pool.insertSession(id: "cs_" + String(repeating: "a", count: 24), merchantId: SandboxCommands.sandboxMerchantId,
                               totalMinor: 500, currency: "JPY", applicationData: Data("bind".utf8).base64EncodedString())
        let minted = try runTender(["sandbox", "token", "--dir", dir.file("sandbox"), "--session", "cs_" + String(repeating: "a",
            count: 24),
                                    "--out", dir.file("t.json")], environment: env)
        #expect(minted.status == 0, "\(minted.stderr)")

        // The server-side service decrypts it with the imported key, trusting the sandbox root.
        let roots = ["TENDER_APPLE_ROOTS": dir.file("sandbox/root.pem")]
        let configuration = try TenderConfiguration.load(environment: env.merging(roots) { $1 })
        let service = TokenService(configuration: configuration, keyStore: KeyStore(pool: pool.pool,
            masterKeyFile: configuration.masterKeyFile))
        let result = try service.verifyAndDecrypt(tokenJSON: Array(try Data(contentsOf: URL(fileURLWithPath: dir.file("t.json")))),
                                                  merchantId: SandboxCommands.sandboxMerchantId, now: Date())
        #expect(result.paymentData.transactionAmountMinor == 500)
        #expect(result.paymentData.currencyCodeNumeric == "392")
        #expect(result.token.applicationDataHex == hexEncoded(Digest.sha256(Array("bind".utf8))))
    }
}

import Postgres

/// A small pool for the bootstrap test's direct SQL.
struct PostgresPoolBox {
    let pool: PostgresPool
    init(_ url: String) { pool = PostgresPool(configuration: PostgresConfiguration(connectionString: url)) }
    func close() { pool.close() }
    func insertSession(id: String, merchantId: String, totalMinor: Int64, currency: String, applicationData: String) throws {
        _ = try pool.execute("""
            INSERT INTO checkout_sessions (session_id, merchant_id, status, version, currency_code, total_minor, expires_at,
                                           client_secret_sha256, application_data, application_data_sha256)
            VALUES ($1, $2, 'open', 1, $3, $4, now() + interval '1 hour', $5, $6, $7)
            """, [id, merchantId, currency, totalMinor, Digest.sha256("secret"), applicationData,
                  hexEncoded(Digest.sha256(Array(Data(base64Encoded: applicationData) ?? Data())))])
    }
}
