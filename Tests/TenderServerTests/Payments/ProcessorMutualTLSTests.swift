import Foundation
import HTTPClient
import Payments
import Testing
@testable import TenderServer

/// Mutual TLS to the processor against a real TLS stand-in that requires a client certificate from its CA
/// (certificates made by openssl when the stand-in starts).
@Suite struct ProcessorMutualTLSTests {
    static func authentication(_ stand: AdyenStandIn, certificate: String?) throws -> ProcessorAuthentication {
        var env = ["TENDER_PROCESSOR_CA_FILE": stand.file("ca.pem")]
        if let certificate {
            env["TENDER_PROCESSOR_CLIENT_CERT_FILE"] = stand.file(certificate + ".pem")
            env["TENDER_PROCESSOR_CLIENT_KEY_FILE"] = stand.file(certificate + ".key")
        }
        return try TenderConfiguration.load(environment: env).processorAuthentication
    }

    static func refund(_ key: String) -> RefundRequest {
        RefundRequest(refundId: "re_1", paymentId: "pay_1", processorReference: "p1", amountMinor: 100, currencyCode: "EUR",
                      processorKey: key)
    }

    @Test func httpProcessorWithTheClientCertificateSucceedsAndWithoutItFailsTheHandshake() throws {
        let stand = try AdyenStandIn.get()
        let withCertificate = HTTPProcessor(baseURL: stand.mutualTLSURL, timeoutMilliseconds: 3_000,
                                            authentication: try Self.authentication(stand, certificate: "client"))
        let key = "mtls-\(UUID().uuidString)"
        guard case .approved = withCertificate.refund(Self.refund(key)) else { Issue.record("not approved"); return }
        #expect(try stand.calls(key: key).first?.clientCertificate == true)

        let retry = RetryPolicy(attemptsMax: 3, baseDelayMilliseconds: 10, maxDelayMilliseconds: 20)
        let without = HTTPProcessor(baseURL: stand.mutualTLSURL, timeoutMilliseconds: 3_000, retryPolicy: retry,
                                    authentication: try Self.authentication(stand, certificate: nil))
        let unknownKey = "mtls-none-\(UUID().uuidString)"
        #expect(without.refund(Self.refund(unknownKey)) == .unknown(reason: "tls_failed"))
        #expect(try stand.calls(key: unknownKey).isEmpty)   // nothing reached the processor
        // A certificate from another CA is refused the same way.
        let stranger = HTTPProcessor(baseURL: stand.mutualTLSURL, timeoutMilliseconds: 3_000, retryPolicy: retry,
                                     authentication: try Self.authentication(stand, certificate: "stranger"))
        #expect(stranger.refund(Self.refund("mtls-stranger-\(UUID().uuidString)")) == .unknown(reason: "tls_failed"))
    }

    @Test func adyenConnectorUsesTheSameIdentity() throws {
        let stand = try AdyenStandIn.get()
        let request = AdyenProcessorTests.authorization(amountMinor: 1_000)
        let processor = AdyenProcessor(settings: stand.settings(url: stand.mutualTLSURL), timeoutMilliseconds: 3_000,
                                       authentication: try Self.authentication(stand, certificate: "client"))
        guard case .approved = processor.authorize(request) else { Issue.record("not approved"); return }
        let call = try #require(try stand.calls(key: request.processorKey).first)
        #expect(call.clientCertificate)
        #expect(call.violations == [])
    }

    /// Through the payments service: the refused handshake is the existing unknown path (pending, re-sent later with
    /// the same key), its reason `tls_failed` in the log; no card data is logged.
    @Test func refusedHandshakeLeavesThePaymentPending() throws {
        let stand = try AdyenStandIn.get()
        let authentication = try Self.authentication(stand, certificate: nil)
        let h = try PaymentsHarness(prefix: "pay_mtls", processor: { _ in
            AdyenProcessor(settings: stand.settings(url: stand.mutualTLSURL), timeoutMilliseconds: 3_000,
                           retryPolicy: RetryPolicy(attemptsMax: 2, baseDelayMilliseconds: 10, maxDelayMilliseconds: 20),
                           authentication: authentication)
        })
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_000)
        let r = try h.pay(s, token: try h.token(for: s), key: "mtls-1")
        #expect(r.status == 202)
        #expect(r.payment?["status"] as? String == "pending")
        #expect(h.logs.text.contains("tls_failed"))
        #expect(!h.logs.text.contains("4111111111119876"))
        #expect(!h.logs.text.contains("Q3J5cHRvZ3JhbVNlY3JldA=="))
    }
}
