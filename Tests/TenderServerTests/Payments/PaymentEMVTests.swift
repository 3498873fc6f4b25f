import ApplePayToken
import Foundation
import Testing
@testable import TenderServer

/// Rule 55: `paymentDataType == EMV` is accepted only when the request offered `supportsEMV`.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct PaymentEMVTests {
    func emvToken(_ h: PaymentsHarness, _ s: SessionFixture) throws -> [UInt8] {
        var request = SandboxTokenRequest(amountMinor: s.totalMinor, currencyCodeNumeric: "978",
                                          applicationData: s.applicationData, cryptogram: "RU1WRGF0YUZvclRlc3Rpbmc=",
                                          signingTime: Date())
        request.emvPaymentData = true
        return try PaymentsHarness.authority.mintToken(request, for: h.merchantKeys[0])
    }

    func offer(_ h: PaymentsHarness, _ s: SessionFixture, capabilities: [String]) throws {
        let checkout = "{\"paymentRequest\":{\"merchantCapabilities\":[\(capabilities.map { "\"\($0)\"" }.joined(separator: ","))]}}"
        try h.pool.execute("""
            INSERT INTO checkout_session_versions (session_id, version, event, total_minor, checkout)
            VALUES ($1, 1, 'created', $2, $3::jsonb)
            """, [s.sessionId, s.totalMinor, checkout])
    }

    @Test func emvWithoutSupportsEMVIsRefusedBeforeTheProcessor() throws {
        let h = try PaymentsHarness(prefix: "pay_emv_no")
        defer { h.stop() }
        let s = try h.session()
        try offer(h, s, capabilities: ["supports3DS"])
        let r = try h.pay(s, token: try emvToken(h, s), key: "emv-1")
        #expect(r.status == 422)
        #expect(try r.json()["code"] as? String == "emv_not_requested")
        #expect((try r.json()["authorizationResult"] as? [String: Any])?["status"] as? Int == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", []) == 0)
    }

    @Test func emvWithSupportsEMVIsCharged() throws {
        let h = try PaymentsHarness(prefix: "pay_emv_yes")
        defer { h.stop() }
        let s = try h.session()
        try offer(h, s, capabilities: ["supports3DS", "supportsEMV"])
        let r = try h.pay(s, token: try emvToken(h, s), key: "emv-2")
        #expect(r.status == 200)
        #expect(r.payment?["status"] as? String == "succeeded")
    }
}
