import Crypto
import Foundation
import HTTPServer
import Payments
import Synchronization
import Testing
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// The Authorization headers a stand-in saw.
final class SeenHeaders: Sendable {
    let values = Mutex<[String?]>([])
}

/// A loopback stand-in for the processor that records the Authorization header of every call and approves.
final class AuthRecordingProcessor: Sendable {
    let seen = SeenHeaders()
    let server: HTTPServer
    init() throws {
        var router = Router()
        let seen = self.seen
        router.add("POST", "/refunds") { request in
            seen.values.withLock { $0.append(request.headers["Authorization"]) }
            return .json(["status": "approved", "processorReference": "rp_1"])
        }
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        server = HTTPServer(configuration: configuration, router: router)
        try server.start()
    }
    var url: String { "http://127.0.0.1:\(server.boundPort)" }
}

/// Tender authenticates to the `http` processor as docs/processor-protocol.md says.
@Suite struct ProcessorAuthenticationTests {
    static func refund(_ processor: HTTPProcessor) -> ProcessorOutcome {
        processor.refund(RefundRequest(refundId: "re_1", paymentId: "pay_1", processorReference: "fp_1", amountMinor: 500,
                                       currencyCode: "USD", processorKey: "refund-key-1"))
    }

    @Test func bearerSecretFromAPrivateFileIsSentOnEveryCall() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let secret = "sk_" + hexEncoded(SecureRandom.bytes(16))
        _ = FileManager.default.createFile(atPath: dir.file("token"), contents: Data((secret + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let configuration = try TenderConfiguration.load(environment: [
            "TENDER_PROCESSOR": "http", "TENDER_PROCESSOR_URL": "http://127.0.0.1:1", "TENDER_PROCESSOR_TOKEN_FILE": dir.file("token"),
            TenderConfiguration.plainHTTPProcessorVariable: "true"])
        #expect(configuration.processorAuthentication.authenticates)
        #expect(!configuration.processorAuthentication.description.contains(secret))
        let stand = try AuthRecordingProcessor()
        defer { stand.server.shutdown(drainDeadlineMilliseconds: 1_000) }
        let processor = HTTPProcessor(baseURL: stand.url, timeoutMilliseconds: 2_000, authentication: configuration.processorAuthentication,
                                      allowPlainHTTPForTesting: configuration.processorPlainHTTPForTesting)
        #expect(Self.refund(processor) == .approved(processorReference: "rp_1", authorizationCode: nil))
        #expect(Self.refund(processor) == .approved(processorReference: "rp_1", authorizationCode: nil))
        #expect(stand.seen.values.withLock { $0 } == ["Bearer \(secret)", "Bearer \(secret)"])
        // Without a configured secret, no Authorization header is sent.
        #expect(Self.refund(HTTPProcessor(baseURL: stand.url, timeoutMilliseconds: 2_000, allowPlainHTTPForTesting: true))
            == .approved(processorReference: "rp_1", authorizationCode: nil))
        #expect(stand.seen.values.withLock { $0.last } == .some(nil))
    }

    @Test func unsafeOrIncompleteCredentialsStopTheStart() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        _ = FileManager.default.createFile(atPath: dir.file("open"), contents: Data("secret".utf8), attributes: [.posixPermissions: 0o644])
        _ = FileManager.default.createFile(atPath: dir.file("empty"), contents: Data("\n".utf8), attributes: [.posixPermissions: 0o600])
        _ = FileManager.default.createFile(atPath: dir.file("cert.pem"), contents: Data("-----BEGIN CERTIFICATE-----".utf8))
        func variable(_ env: [String: String]) -> String? {
            do { _ = try TenderConfiguration.load(environment: env); return nil } catch { return error.variable }
        }
        #expect(variable(["TENDER_PROCESSOR_TOKEN_FILE": dir.file("open")]) == "TENDER_PROCESSOR_TOKEN_FILE")
        #expect(variable(["TENDER_PROCESSOR_TOKEN_FILE": dir.file("empty")]) == "TENDER_PROCESSOR_TOKEN_FILE")
        #expect(variable(["TENDER_PROCESSOR_TOKEN_FILE": dir.file("missing")]) == "TENDER_PROCESSOR_TOKEN_FILE")
        #expect(variable(["TENDER_PROCESSOR_CLIENT_CERT_FILE": dir.file("cert.pem")]) == "TENDER_PROCESSOR_CLIENT_KEY_FILE")
        #expect(variable(["TENDER_PROCESSOR_CLIENT_CERT_FILE": dir.file("cert.pem"),
                          "TENDER_PROCESSOR_CLIENT_KEY_FILE": dir.file("open")]) == "TENDER_PROCESSOR_CLIENT_KEY_FILE")
        #expect(variable(["TENDER_PROCESSOR_CA_FILE": dir.file("missing")]) == "TENDER_PROCESSOR_CA_FILE")
    }
}
