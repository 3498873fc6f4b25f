import Foundation
import Postgres
import Testing
@testable import TenderServer

/// One request of the JSON-edge tables: who sends which raw body where, and the field the 400 must name.
struct EdgeRequest: CustomTestStringConvertible, Sendable {
    enum Caller: Sendable { case apiKey, clientSecret }
    let name: String
    let method: String
    /// `{session}` and `{payment}` are filled in by the test.
    let path: String
    let caller: Caller
    let idempotencyKey: Bool
    let body: String
    let field: String
    var testDescription: String { name }
}

/// `\u0000` in every family of routes whose strings end up in PostgreSQL text or jsonb.
let nulRequests: [EdgeRequest] = [
    EdgeRequest(name: "cart_line_item_label", method: "POST", path: "/v1/checkout-sessions", caller: .apiKey, idempotencyKey: false,
                body: #"{"currencyCode":"USD","countryCode":"US","lineItems":[{"label":"Wid\u0000get","amount":"9.99"}]}"#,
                field: "lineItems[0].label"),
    EdgeRequest(name: "cart_metadata_value", method: "POST", path: "/v1/checkout-sessions", caller: .apiKey, idempotencyKey: true,
                body: #"{"currencyCode":"USD","countryCode":"US","lineItems":[{"label":"W","amount":"9.99"}],"#
                    + #""metadata":{"orderId":"88\u000041"}}"#,
                field: "metadata.orderId"),
    EdgeRequest(name: "cart_metadata_key", method: "POST", path: "/v1/checkout-sessions", caller: .apiKey, idempotencyKey: false,
                body: #"{"currencyCode":"USD","countryCode":"US","lineItems":[{"label":"W","amount":"9.99"}],"#
                    + #""metadata":{"order\u0000":"1"}}"#,
                field: "metadata.order\u{FFFD}"),
    EdgeRequest(name: "cart_shipping_detail", method: "POST", path: "/v1/checkout-sessions", caller: .apiKey, idempotencyKey: false,
                body: #"{"currencyCode":"USD","countryCode":"US","lineItems":[{"label":"W","amount":"9.99"}],"#
                    + #""shippingMethods":[{"identifier":"s","label":"S","detail":"5\u0000 days","amount":"1.00"}]}"#,
                field: "shippingMethods[0].detail"),
    EdgeRequest(name: "shipping_contact_by_client_secret", method: "POST", path: "/v1/checkout-sessions/{session}/shipping-contact",
                caller: .clientSecret, idempotencyKey: false,
                body: #"{"shippingContact":{"countryCode":"US","postalCode":"94\u0000107","locality":"SF"}}"#,
                field: "shippingContact.postalCode"),
    EdgeRequest(name: "coupon_code_by_client_secret", method: "POST", path: "/v1/checkout-sessions/{session}/coupon-code",
                caller: .clientSecret, idempotencyKey: false, body: #"{"couponCode":"SAVE\u000010"}"#, field: "couponCode"),
    EdgeRequest(name: "shipping_method_by_client_secret", method: "POST", path: "/v1/checkout-sessions/{session}/shipping-method",
                caller: .clientSecret, idempotencyKey: false, body: #"{"shippingMethod":{"identifier":"standard\u0000"}}"#,
                field: "shippingMethod.identifier"),
    EdgeRequest(name: "payment_method_by_client_secret", method: "POST", path: "/v1/checkout-sessions/{session}/payment-method",
                caller: .clientSecret, idempotencyKey: false, body: #"{"paymentMethod":{"displayName":"Visa\u0000","network":"Visa"}}"#,
                field: "paymentMethod.displayName"),
    EdgeRequest(name: "merchant_validation_by_client_secret", method: "POST", path: "/v1/checkout-sessions/{session}/merchant-validation",
                caller: .clientSecret, idempotencyKey: false,
                body: #"{"validationURL":"https://apple-pay-gateway.apple.com/\u0000"}"#, field: "validationURL"),
    EdgeRequest(name: "payment_token_by_client_secret", method: "POST", path: "/v1/checkout-sessions/{session}/payments",
                caller: .clientSecret, idempotencyKey: true,
                body: #"{"token":{"paymentMethod":{"displayName":"Visa 1234\u0000"},"transactionIdentifier":"ab"}}"#,
                field: "token.paymentMethod.displayName"),
    EdgeRequest(name: "payment_billing_contact", method: "POST", path: "/v1/checkout-sessions/{session}/payments",
                caller: .apiKey, idempotencyKey: true, body: #"{"token":{},"billingContact":{"givenName":"A\u0000"}}"#,
                field: "billingContact.givenName"),
    EdgeRequest(name: "refund_amount", method: "POST", path: "/v1/payments/{payment}/refunds", caller: .apiKey, idempotencyKey: true,
                body: #"{"amount":"1.00\u0000"}"#, field: "amount"),
    EdgeRequest(name: "coupon_create", method: "POST", path: "/v1/coupons", caller: .apiKey, idempotencyKey: false,
                body: #"{"code":"SPRING\u0000","percentOff":"10"}"#, field: "code"),
    EdgeRequest(name: "tax_rate_region", method: "PUT", path: "/v1/tax-rates", caller: .apiKey, idempotencyKey: false,
                body: #"[{"countryCode":"US","region":"C\u0000A","rate":"10"}]"#, field: "[0].region"),
]

/// The same member twice, which decoders read first-wins (the cart) or last-wins (payment bodies).
let duplicateRequests: [EdgeRequest] = [
    EdgeRequest(name: "cart_currency_twice", method: "POST", path: "/v1/checkout-sessions", caller: .apiKey, idempotencyKey: false,
                body: #"{"currencyCode":"USD","currencyCode":"JPY","countryCode":"US","lineItems":[{"label":"W","amount":"9.99"}]}"#,
                field: "currencyCode"),
    EdgeRequest(name: "cart_line_item_amount_twice", method: "POST", path: "/v1/checkout-sessions", caller: .apiKey, idempotencyKey: false,
                body: #"{"currencyCode":"USD","countryCode":"US","lineItems":[{"label":"W","amount":"9.99","amount":"0.01"}]}"#,
                field: "lineItems[0].amount"),
    EdgeRequest(name: "coupon_code_twice", method: "POST", path: "/v1/checkout-sessions/{session}/coupon-code",
                caller: .clientSecret, idempotencyKey: false, body: #"{"couponCode":"A","couponCode":"B"}"#, field: "couponCode"),
    EdgeRequest(name: "payment_token_twice", method: "POST", path: "/v1/checkout-sessions/{session}/payments",
                caller: .clientSecret, idempotencyKey: true, body: #"{"token":{"a":1},"token":{"b":2}}"#, field: "token"),
    EdgeRequest(name: "payment_token_member_twice", method: "POST", path: "/v1/checkout-sessions/{session}/payments",
                caller: .clientSecret, idempotencyKey: true,
                body: #"{"token":{"paymentData":{"version":"EC_v1","version":"RSA_v1"}}}"#, field: "token.paymentData.version"),
    EdgeRequest(name: "refund_amount_twice", method: "POST", path: "/v1/payments/{payment}/refunds", caller: .apiKey, idempotencyKey: true,
                body: #"{"amount":"1.00","amount":"100.00"}"#, field: "amount"),
    EdgeRequest(name: "tax_rate_twice", method: "PUT", path: "/v1/tax-rates", caller: .apiKey, idempotencyKey: false,
                body: #"[{"countryCode":"US","rate":"10","rate":"0"}]"#, field: "[0].rate"),
]

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct EdgeInputTests {
    /// Sends every row against one server with one open session, expecting each refused with `code`
    /// before anything is stored.
    func expectRefused(_ rows: [EdgeRequest], code: String, prefix: String) throws {
        let f = try CheckoutFixture(prefix)
        defer { f.stop() }
        let session = try f.createSession(usdCart())
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)
        for row in rows {
            let path = row.path.replacingOccurrences(of: "{session}", with: id)
                .replacingOccurrences(of: "{payment}", with: PaymentsService.newId(prefix: "pay_"))
            var headers = [("Authorization", "Bearer \(row.caller == .apiKey ? f.key : secret)"), ("Content-Type", "application/json")]
            if row.idempotencyKey { headers.append(("Idempotency-Key", "edge-\(row.name)")) }
            let response = try f.client().request(row.method, path, headers: headers, body: Array(row.body.utf8))
            #expect(response.status == 400, "\(row.name): \(response.text)")
            let problem = try response.json()
            #expect(problem["code"] as? String == code, "\(row.name)")
            #expect(objects(problem["errors"]).first?["field"] as? String == row.field, "\(row.name)")
            #expect(objects(problem["errors"]).first?["code"] as? String == code, "\(row.name)")
        }
        // Nothing stored: one session (the fixture's) at version 1, no coupon, no key, no payment.
        let counts = try #require(try f.query("""
            SELECT (SELECT count(*) FROM checkout_sessions)::bigint AS sessions,
                   (SELECT count(*) FROM coupons)::bigint AS coupons,
                   (SELECT count(*) FROM idempotency_keys)::bigint AS keys,
                   (SELECT count(*) FROM payments)::bigint AS payments
            """, []).first)
        #expect(try counts.decode("sessions", as: Int64.self) == 1)
        #expect(try counts.decode("coupons", as: Int64.self) == 0)
        #expect(try counts.decode("keys", as: Int64.self) == 0)
        #expect(try counts.decode("payments", as: Int64.self) == 0)
        #expect(try f.versions(id) == [1])
    }

    @Test func nulInAStoredStringIs400NamingTheField() throws {
        try expectRefused(nulRequests, code: "nul_character", prefix: "edge_nul")
    }

    @Test func duplicateMemberIs400NamingTheField() throws {
        try expectRefused(duplicateRequests, code: "duplicate_field", prefix: "edge_dup")
    }
}
