import Crypto
import Foundation
import HTTPServer
import Postgres
@testable import TenderServer

/// The payments harness plus the Wallet routes, a sandbox WWDR stand-in and an order-type identity.
final class WalletHarness {
    static let publicBaseURL = "https://pay.example.test"
    let payments: PaymentsHarness
    let server: HTTPServer
    let sandbox: WalletSandbox.Files
    let masterKeyFile: String
    var port: Int { server.boundPort }

    init(prefix: String, importOrderIdentity: Bool = true, sandbox: WalletSandbox.Files? = nil,
         environment: [String: String] = [:]) throws {
        masterKeyFile = FileManager.default.temporaryDirectory.appendingPathComponent("wallet-mk-\(UUID().uuidString)").path
        var env = ["TENDER_MASTER_KEY_FILE": masterKeyFile, "TENDER_PUBLIC_BASE_URL": Self.publicBaseURL]
        env.merge(environment) { $1 }
        var wallet = WalletConfiguration()
        wallet.publicBaseURL = Self.publicBaseURL
        payments = try PaymentsHarness(prefix: prefix, environment: env,
                                       ledger: WalletOrderSubscriber(configuration: wallet))
        var router = Router()
        payments.app.registerWalletOrderRoutes(into: &router)
        payments.app.registerWalletPassRoutes(into: &router)
        server = HTTPServer(configuration: ServeCommand.httpConfiguration(payments.app.configuration), router: router)
        try server.start()
        self.sandbox = try sandbox ?? WalletSandbox.make(now: Date())
        if importOrderIdentity { try importIdentity(.orderType) }
    }

    var keyStore: KeyStore { KeyStore(pool: payments.pool, masterKeyFile: masterKeyFile) }

    func identity(_ kind: MerchantKeyKind) -> (kind: MerchantKeyKind, typeIdentifier: String, certificate: Certificate, key: PrivateKey) {
        sandbox.identities.first { $0.kind == kind }!
    }

    @discardableResult
    func importIdentity(_ kind: MerchantKeyKind) throws -> StoredKeyInfo {
        let id = identity(kind)
        return try keyStore.importWalletIdentity(merchantId: payments.merchantId, kind: kind, typeIdentifier: id.typeIdentifier,
                                                 certificate: Array(id.certificate.pem.utf8), privateKey: try id.key.unsafePKCS8PEM(),
                                                 wwdr: Array(sandbox.wwdr.pem.utf8))
    }

    func stop() {
        server.shutdown(drainDeadlineMilliseconds: 1_000)
        payments.stop()
        try? FileManager.default.removeItem(atPath: masterKeyFile)
    }

    /// A session created through the real endpoint, with a shipping method chosen.
    func session(amount: String = "10.99") throws -> SessionFixture {
        let cart = """
            {"currencyCode":"USD","countryCode":"US","lineItems":[{"label":"Widget","amount":"\(amount)"}],
             "shippingMethods":[{"identifier":"std","label":"Standard","detail":"3 days","amount":"0.00","countries":["US"]}],
             "apiVersion":14}
            """
        let r = try RawHTTPClient(port: payments.port).request("POST", "/v1/checkout-sessions",
                                                               headers: [("Authorization", "Bearer \(payments.apiKey)")],
                                                               body: Array(cart.utf8))
        let body = try r.json()
        guard r.status == 201, let id = body["id"] as? String, let request = body["paymentRequest"] as? [String: Any],
              let encoded = request["applicationData"] as? String, let appData = Data(base64Encoded: encoded),
              let secret = body["clientSecret"] as? String, let total = body["totalMinor"] as? Int else {
            throw TenderError("test_session", r.text)
        }
        return SessionFixture(sessionId: id, clientSecret: secret, applicationData: Array(appData), totalMinor: Int64(total),
                              currencyCode: "USD")
    }

    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: String? = nil) throws -> RawResponse {
        try RawHTTPClient(port: port).request(method, path, headers: headers, body: body.map { Array($0.utf8) } ?? [])
    }
}

/// Runs `openssl cms -verify` over a package's manifest and signature with `root` as the only trust anchor.
func opensslVerifies(package: [UInt8], root: Certificate) throws -> Bool {
    let entries = try ZipArchive.read(package)
    guard let manifest = entries.first(where: { $0.name == "manifest.json" })?.bytes,
          let signature = entries.first(where: { $0.name == "signature" })?.bytes else { return false }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wallet-pkg-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    try Data(manifest).write(to: dir.appendingPathComponent("manifest.json"))
    try Data(signature).write(to: dir.appendingPathComponent("signature"))
    try Data(root.pem.utf8).write(to: dir.appendingPathComponent("root.pem"))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.currentDirectoryURL = dir
    process.arguments = ["cms", "-verify", "-binary", "-inform", "DER", "-in", "signature", "-content", "manifest.json",
                         "-CAfile", "root.pem", "-out", "/dev/null"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    // Every file's digest must be in the manifest too.
    let digests = try JSONDecoder().decode([String: String].self, from: Data(manifest))
    let files = entries.filter { $0.name != "manifest.json" && $0.name != "signature" }
    let sha1 = digests.values.first?.count == 40
    let complete = files.allSatisfy { digests[$0.name] == hexEncoded(sha1 ? Digest.sha1($0.bytes) : Digest.sha256($0.bytes)) }
    return process.terminationStatus == 0 && complete && digests.count == files.count
}

/// The file `name` of a package, as JSON.
func packageJSON(_ package: [UInt8], _ name: String) throws -> [String: Any] {
    guard let bytes = try ZipArchive.read(package).first(where: { $0.name == name })?.bytes,
          let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
        throw TenderError("test_package", "no \(name)")
    }
    return object
}
