import ApplePayToken
import Foundation
import PaymentRequest
import Testing
@testable import TenderServer

/// Rule 53: the full shipping contact given at authorization is re-validated against the session.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct PaymentContactTests {
    /// A session created through the real endpoint, shipping to the US only.
    func usOnlySession(_ h: PaymentsHarness) throws -> SessionFixture {
        let cart = """
            {"currencyCode":"EUR","countryCode":"US","lineItems":[{"label":"Widget","amount":"10.99"}],
             "shippingMethods":[{"identifier":"std","label":"Standard","detail":"3 days","amount":"0.00","countries":["US"]}],
             "requiredShippingContactFields":["postalAddress"],"apiVersion":14}
            """
        let r = try RawHTTPClient(port: h.port).request("POST", "/v1/checkout-sessions",
                                                        headers: [("Authorization", "Bearer \(h.apiKey)")], body: Array(cart.utf8))
        #expect(r.status == 201)
        let body = try r.json()
        let id = try #require(body["id"] as? String)
        let request = try #require(body["paymentRequest"] as? [String: Any])
        let encoded = try #require(request["applicationData"] as? String)
        let appData = try #require(Data(base64Encoded: encoded))
        let secret = try #require(body["clientSecret"] as? String)
        return SessionFixture(sessionId: id, clientSecret: secret,
                              applicationData: Array(appData), totalMinor: 1_099, currencyCode: "EUR")
    }

    func pay(_ h: PaymentsHarness, _ s: SessionFixture, contact: String, key: String) throws -> RawResponse {
        let token = try h.token(for: s)
        let body = Array("{\"token\":".utf8) + token + Array(",\"shippingContact\":\(contact)}".utf8)
        return try RawHTTPClient(port: h.port).request(
            "POST", "/v1/checkout-sessions/\(s.sessionId)/payments",
            headers: [("Authorization", "Bearer \(h.apiKey)"), ("Idempotency-Key", key)], body: body)
    }

    @Test func unserviceableContactIsRefusedWithAppleErrors() throws {
        let h = try PaymentsHarness(prefix: "pay_contact_no")
        defer { h.stop() }
        let s = try usOnlySession(h)
        let r = try pay(h, s, contact: #"{"countryCode":"FR","postalCode":"75001","locality":"Paris"}"#, key: "contact-1")
        #expect(r.status == 422)
        let body = try r.json()
        #expect(body["code"] as? String == "shipping_contact_invalid")
        let result = try #require(body["authorizationResult"] as? [String: Any])
        #expect(result["status"] as? Int == 1)
        let errors = try #require(result["errors"] as? [[String: Any]])
        #expect(errors.first?["code"] as? String == "addressUnserviceable")
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", []) == 0)
    }

    @Test func serviceableContactPays() throws {
        let h = try PaymentsHarness(prefix: "pay_contact_ok")
        defer { h.stop() }
        let s = try usOnlySession(h)
        let r = try pay(h, s, contact: #"{"countryCode":"US","postalCode":"94110","locality":"San Francisco","newField":1}"#,
                        key: "contact-2")
        #expect(r.status == 200)
        #expect(r.payment?["status"] as? String == "succeeded")
    }
}
