import Crypto
import Foundation
import Testing
@testable import TenderServer

/// The local APNs stand-in (`apns_server.py`, Python h2 from Debian's python3-h2) with its own TLS
/// certificate for 127.0.0.1, requiring a client certificate from the sandbox WWDR chain.
final class APNsStandIn {
    let process = Process()
    let directory: String
    let port: Int
    var caFile: String { directory + "/ca.pem" }
    var logFile: String { directory + "/requests.jsonl" }

    init(clientRoots: [Certificate]) throws {
        directory = NSTemporaryDirectory() + "tender-apns-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let now = Date()
        let caKey = try PrivateKey.generateP256()
        let ca = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Test APNs CA", serialNumber: 1, notBefore: now - 3_600, notAfter: now + 86_400,
                                isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign"),
            subjectKey: caKey.publicKey, issuer: nil, issuerKey: caKey)
        let serverKey = try PrivateKey.generateP256()
        // subjectAltName: DNS localhost, IP 127.0.0.1 (RFC 5280 §4.2.1.6 GeneralNames, DER).
        let san: [UInt8] = [0x30, 0x11, 0x82, 0x09] + Array("localhost".utf8) + [0x87, 0x04, 127, 0, 0, 1]
        let server = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "127.0.0.1", serialNumber: 2, notBefore: now - 3_600, notAfter: now + 86_400,
                                isCertificateAuthority: false, keyUsage: "critical,digitalSignature",
                                customExtensions: [CertificateExtension(oid: "2.5.29.17", isCritical: false, value: san)]),
            subjectKey: serverKey.publicKey, issuer: ca, issuerKey: caKey)
        try Data(ca.pem.utf8).write(to: URL(fileURLWithPath: directory + "/ca.pem"))
        try Data(server.pem.utf8).write(to: URL(fileURLWithPath: directory + "/server.pem"))
        try Data(try serverKey.unsafePKCS8PEM().utf8).write(to: URL(fileURLWithPath: directory + "/server.key"))
        try Data(clientRoots.map(\.pem).joined().utf8).write(to: URL(fileURLWithPath: directory + "/clients.pem"))
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [TestEnvironment.packageRoot + "/Tests/TenderServerTests/Wallet/apns_server.py",
                             "--cert", directory + "/server.pem", "--key", directory + "/server.key",
                             "--client-ca", directory + "/clients.pem", "--log", directory + "/requests.jsonl"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        var line = Data()
        while let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else { throw TenderError("test_apns", "no port") }
        self.port = port
    }

    var requests: [[String: Any]] {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func stop() {
        // SIGKILL: the test runner's children may inherit a mask that blocks SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/h2"),
                "needs TENDER_TEST_DATABASE_URL and python3-h2 (scripts/deps.sh)"), .serialized)
struct WalletPushTests {
    @Test func orderUpdatePushesOverHTTP2WithTheTypeIdentityAndGoneRemovesTheRegistration() throws {
        let sandbox = try WalletSandbox.make(now: Date())
        let apns = try APNsStandIn(clientRoots: [sandbox.root, sandbox.wwdr])
        defer { apns.stop() }
        let w = try WalletHarness(prefix: "wallet_push", sandbox: sandbox,
                                  environment: ["TENDER_APNS_URL": "https://127.0.0.1:\(apns.port)", "TENDER_APNS_CA_FILE": apns.caFile])
        defer { w.stop() }
        let s = try w.session()
        let paid = try w.payments.pay(s, token: try w.payments.token(for: s), key: "wallet-push-1")
        let details = try #require((try paid.json()["authorizationResult"] as? [String: Any])?["orderDetails"] as? [String: Any])
        let paymentId = try #require(paid.payment?["id"] as? String)
        let typeId = try #require(details["orderTypeIdentifier"] as? String)
        let orderId = try #require(details["orderIdentifier"] as? String)
        let auth = [("Authorization", "AppleOrder \(try #require(details["authenticationToken"] as? String))")]
        for (device, token) in [("dev-ok", "aa11"), ("dev-gone", "gone22"), ("dev-busy", "busy33")] {
            #expect(try w.request("POST", "/wallet/orders/v1/devices/\(device)/registrations/\(typeId)/\(orderId)", headers: auth,
                                  body: #"{"pushToken":"\#(token)"}"#).status == 201)
        }
        let update = try w.request("POST", "/v1/payments/\(paymentId)/order", headers: [("Authorization", "Bearer \(w.payments.apiKey)")],
                                   body: #"{"status":"completed"}"#)
        #expect(update.status == 200)
        let push = WalletPushService(pool: w.payments.pool, keys: w.keyStore, configuration: w.payments.app.configuration.wallet,
                                     logger: .silent)
        #expect(try push.runOnce(now: Date()) == 3)
        let requests = apns.requests
        #expect(requests.count == 3, "\(requests)")
        for request in requests {
            #expect(request["method"] as? String == "POST")
            #expect(request["topic"] as? String == WalletSandbox.orderTypeIdentifier)
            #expect(request["body"] as? String == "{}")
            #expect(request["client"] as? String == "Order Type ID: \(WalletSandbox.orderTypeIdentifier)")
            #expect(request["protocol"] as? String == "h2")
        }
        #expect(Set(requests.compactMap { $0["path"] as? String }) == ["/3/device/aa11", "/3/device/gone22", "/3/device/busy33"])
        // 200 delivered, 410 removed the registration, 503 waits for a retry.
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_registrations WHERE push_token = 'gone22'") == 0)
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_registrations") == 2)
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_pushes WHERE push_token = 'busy33' AND attempts = 1") == 1)
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_pushes") == 1)
        #expect(try push.runOnce(now: Date()) == 0)
        #expect(try push.runOnce(now: Date() + 3_600) == 1)
        #expect(try w.payments.scalar("SELECT attempts::bigint AS n FROM wallet_pushes WHERE push_token = 'busy33'") == 2)
        // The changed-since list of the delivered device shows the order.
        #expect(try w.request("GET", "/wallet/orders/v1/devices/dev-ok/registrations/\(typeId)").status == 200)
    }

    @Test func aClientWithoutTheIdentityIsRefusedByTheStandIn() throws {
        let sandbox = try WalletSandbox.make(now: Date())
        let other = try WalletSandbox.make(now: Date())
        let apns = try APNsStandIn(clientRoots: [other.root, other.wwdr])
        defer { apns.stop() }
        let w = try WalletHarness(prefix: "wallet_push_refused", sandbox: sandbox,
                                  environment: ["TENDER_APNS_URL": "https://127.0.0.1:\(apns.port)", "TENDER_APNS_CA_FILE": apns.caFile])
        defer { w.stop() }
        let s = try w.session()
        let paid = try w.payments.pay(s, token: try w.payments.token(for: s), key: "wallet-push-2")
        let details = try #require((try paid.json()["authorizationResult"] as? [String: Any])?["orderDetails"] as? [String: Any])
        let typeId = try #require(details["orderTypeIdentifier"] as? String), orderId = try #require(details["orderIdentifier"] as? String)
        let auth = [("Authorization", "AppleOrder \(try #require(details["authenticationToken"] as? String))")]
        #expect(try w.request("POST", "/wallet/orders/v1/devices/d/registrations/\(typeId)/\(orderId)", headers: auth,
                              body: #"{"pushToken":"cc44"}"#).status == 201)
        _ = try w.request("POST", "/v1/payments/\(try #require(paid.payment?["id"] as? String))/order",
                          headers: [("Authorization", "Bearer \(w.payments.apiKey)")], body: #"{"status":"completed"}"#)
        let push = WalletPushService(pool: w.payments.pool, keys: w.keyStore, configuration: w.payments.app.configuration.wallet,
                                     logger: .silent)
        #expect(try push.runOnce(now: Date()) == 1)
        #expect(apns.requests.allSatisfy { $0["path"] == nil })
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_pushes WHERE last_error IS NOT NULL") == 1)
    }
}
