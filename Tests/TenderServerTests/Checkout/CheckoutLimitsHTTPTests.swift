import Foundation
import Postgres
import Testing
@testable import TenderServer

/// Safari's cap, the amount ceiling and the chosen `apiVersion`, over HTTP.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CheckoutLimitsHTTPTests {
    func sessionCount(_ f: CheckoutFixture) throws -> Int64 {
        try f.query("SELECT count(*)::bigint AS n FROM checkout_sessions WHERE merchant_id = $1",
                    [f.merchant.merchantId]).first?.decode("n") ?? -1
    }

    /// Issue 11 item 7: Int64.max minor units of USD is refused at the edge, naming the field; nothing is stored.
    @Test func cartAboveTheCeilingIs400NamingTheField() throws {
        let f = try CheckoutFixture("co_ceiling")
        defer { f.stop() }
        let cases: [([String: Any], String)] = [
            (usdCart(["lineItems": [["label": "Widget", "amount": "92233720368547758.07"]]]), "lineItems[0].amount"),
            (usdCart(["lineItems": [["label": "Widget", "amount": "100000000.01"]]]), "lineItems[0].amount"),
            (usdCart(["lineItems": [["label": "Widget", "amount": "1.00"], ["label": "Credit", "amount": "-100000000.01"]]]),
             "lineItems[1].amount"),
            (usdCart(["shippingMethods": [["identifier": "s", "label": "S", "detail": "d", "amount": "100000000.01"]]]),
             "shippingMethods[0].amount"),
            (["currencyCode": "JPY", "lineItems": [["label": "Widget", "amount": "100000001"]]], "lineItems[0].amount"),
            (["currencyCode": "KWD", "lineItems": [["label": "Widget", "amount": "100000000.001"]]], "lineItems[0].amount"),
        ]
        for (cart, field) in cases {
            let response = try f.call("POST", "/v1/checkout-sessions", cart, headers: [("Idempotency-Key", UUID().uuidString)])
            #expect(response.status == 400, "\(response.text)")
            let json = try response.json()
            #expect(json["code"] as? String == "amount_too_large")
            #expect(objects(json["errors"]).first?["field"] as? String == field, "\(response.text)")
            #expect(objects(json["errors"]).first?["code"] as? String == "amount_too_large")
        }
        #expect(try sessionCount(f) == 0)
    }

    /// The total at the cap is a session; a cent past it (all amounts under the ceiling) is 422 `total_too_large`.
    @Test func totalAtAndPastTheCap() throws {
        let f = try CheckoutFixture("co_cap")
        defer { f.stop() }
        let standard: [String: Any] = ["identifier": "standard", "label": "Standard", "detail": "d", "amount": "4.99"]
        let atCap = try f.createSession(usdCart(["lineItems": [["label": "Yacht", "amount": "99999995.01"]],
                                                 "shippingMethods": [standard]]))
        #expect(object(object(atCap["paymentRequest"])["total"])["amount"] as? String == "100000000.00")
        #expect(atCap["totalMinor"] as? Int == 10_000_000_000)

        let past = try f.call("POST", "/v1/checkout-sessions",
                              usdCart(["lineItems": [["label": "Yacht", "amount": "99999995.02"]], "shippingMethods": [standard]]))
        #expect(past.status == 422)
        let json = try past.json()
        #expect(json["code"] as? String == "total_too_large")
        #expect(objects(json["errors"]).first?["field"] as? String == "total.amount")
    }

    /// A shipping-method update whose total would pass the cap is an error answer, and no version is stored.
    @Test func updatePastTheCapIsRefusedAndNotStored() throws {
        let f = try CheckoutFixture("co_cap_update")
        defer { f.stop() }
        let session = try f.createSession(usdCart(["lineItems": [["label": "Yacht", "amount": "99999990.00"]]]))
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)
        // standard 4.99 → 99 999 994.99; express 14.99 → 100 000 004.99, past the cap.
        let express = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-method",
                                 ["shippingMethod": ["identifier": "express"]], bearer: secret)
        #expect(express.status == 422)
        #expect(try express.json()["code"] as? String == "total_too_large")
        #expect(try f.versions(id) == [1])
        let standard = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-method",
                                  ["shippingMethod": ["identifier": "standard"]], bearer: secret)
        #expect(standard.status == 200)
        #expect(object(try standard.json()["newTotal"])["amount"] as? String == "99999994.99")
    }

    /// apiVersion omitted: the lowest that shows every feature used, returned with the session.
    @Test func apiVersionIsChosenAndReturned() throws {
        let f = try CheckoutFixture("co_version")
        defer { f.stop() }
        var plain = usdCart()
        plain["apiVersion"] = nil
        plain["supportsCouponCode"] = nil
        plain["couponCode"] = nil
        let lowest = try f.createSession(plain)
        #expect(lowest["apiVersion"] as? Int == 3)

        var coupons = usdCart()
        coupons["apiVersion"] = nil
        let twelve = try f.createSession(coupons)
        #expect(twelve["apiVersion"] as? Int == 12)
        let id = try #require(twelve["id"] as? String)
        #expect(try f.call("GET", "/v1/checkout-sessions/\(id)").json()["apiVersion"] as? Int == 12)

        #expect(try f.createSession(usdCart())["apiVersion"] as? Int == 14)

        // Explicit and too low: an error that names the version needed.
        let tooLow = try f.call("POST", "/v1/checkout-sessions", usdCart(["apiVersion": 11]))
        #expect(tooLow.status == 422)
        let json = try tooLow.json()
        #expect(json["code"] as? String == "feature_requires_api_version")
        #expect(json["requiredApiVersion"] as? Int == 12)
        #expect(objects(json["errors"]).first?["field"] as? String == "supportsCouponCode")
        #expect((objects(json["errors"]).first?["message"] as? String)?.contains("apiVersion 12") == true)
    }
}
