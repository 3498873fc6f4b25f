import Crypto
import Foundation
import Postgres
import Testing
import Time
@testable import TenderServer

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CheckoutSessionTests {
    @Test func createReturnsTheContractShape() throws {
        let f = try CheckoutFixture("co_create")
        defer { f.stop() }
        let session = try f.createSession(usdCart(["metadata": ["orderId": "8841"]]))
        #expect(Set(session.keys) == ["id", "status", "version", "clientSecret", "expiresAt", "totalMinor",
                                      "currencyCode", "apiVersion", "paymentRequest"])
        // The cart's apiVersion (usdCart asks for 14), for `new ApplePaySession(14, paymentRequest)`.
        #expect(session["apiVersion"] as? Int == 14)
        let id = try #require(session["id"] as? String)
        #expect(id.range(of: "^cs_[a-z0-9]{24}$", options: .regularExpression) != nil)
        #expect(session["status"] as? String == "open")
        #expect(session["version"] as? Int == 1)
        #expect((session["clientSecret"] as? String)?.hasPrefix(id + "_secret_") == true)
        #expect(session["currencyCode"] as? String == "USD")
        let request = object(session["paymentRequest"])
        let total = object(request["total"])
        #expect(total["label"] as? String == "Corner Shop")
        let items = objects(request["lineItems"])
        // 9.99 + 5.00 + the first shipping method (standard, 4.99).
        #expect(sumOfFinalItems(items) == 1998)
        #expect(minorUnits(total["amount"] as? String ?? "") == 1998)
        #expect(session["totalMinor"] as? Int == 1998)
        #expect(items.contains { $0["label"] as? String == "Standard" && $0["amount"] as? String == "4.99" })
        #expect(request["metadata"] == nil && request["expiresInSeconds"] == nil)
        let expiresAt = try #require(session["expiresAt"] as? String)
        #expect(ISO8601DateFormatter().date(from: expiresAt).map { $0.timeIntervalSinceNow > 3500 } == true)

        // applicationData: 32 random bytes, padded base64; the stored SHA-256 hex is of the decoded bytes.
        let applicationData = try #require(request["applicationData"] as? String)
        let decoded = try #require(Data(base64Encoded: applicationData))
        #expect(decoded.count == 32)
        let row = try #require(try f.query("""
            SELECT application_data, application_data_sha256, client_secret_sha256, metadata::text AS metadata
            FROM checkout_sessions WHERE session_id = $1
            """, [id]).first)
        #expect(try row.decode("application_data", as: String.self) == applicationData)
        #expect(try row.decode("application_data_sha256", as: String.self) == hexEncoded(Digest.sha256([UInt8](decoded))))
        #expect(try row.decode("client_secret_sha256", as: [UInt8].self) == Digest.sha256(session["clientSecret"] as? String ?? ""))
        #expect(try row.decode("metadata", as: String.self).contains("8841"))
        #expect(try f.versions(id) == [1])
    }

    @Test func expiryIsReckonedFromTheInjectedClock() throws {
        let now = try #require(RFC3339.date(from: "2031-01-01T00:00:00Z"))
        let f = try CheckoutFixture("co_clock", clock: .fixed(now))
        defer { f.stop() }
        let session = try f.createSession(usdCart(["expiresInSeconds": 600]))
        #expect(session["expiresAt"] as? String == "2031-01-01T00:10:00Z")
    }

    @Test func getByKeyAndByClientSecretHidesTheSecret() throws {
        let f = try CheckoutFixture("co_get")
        defer { f.stop() }
        let session = try f.createSession(usdCart())
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)
        for bearer in [f.key, secret] {
            let got = try f.call("GET", "/v1/checkout-sessions/\(id)", bearer: bearer)
            #expect(got.status == 200)
            let json = try got.json()
            #expect(json["id"] as? String == id)
            #expect(json["clientSecret"] == nil)
            #expect(json["totalMinor"] as? Int == 1998)
            #expect(object(json["paymentRequest"])["applicationData"] as? String
                    == object(session["paymentRequest"])["applicationData"] as? String)
        }
    }

    @Test func idempotentCreateReplaysAndRefusesAnotherBody() throws {
        let f = try CheckoutFixture("co_idem")
        defer { f.stop() }
        let body = [UInt8](try JSONSerialization.data(withJSONObject: usdCart()))
        let headers = [("Authorization", "Bearer \(f.key)"), ("Idempotency-Key", "order-8841")]
        let client = try f.client()
        let first = try client.request("POST", "/v1/checkout-sessions", headers: headers, body: body)
        let second = try client.request("POST", "/v1/checkout-sessions", headers: headers, body: body)
        #expect(first.status == 201)
        #expect(second.status == 201)
        #expect(second.body == first.body)
        #expect(second.header("Idempotent-Replayed") == "true")
        // The replay re-derives the client secret: the stored response never holds it, and the replayed
        // secret is the working one.
        let secret = try #require(try first.json()["clientSecret"] as? String)
        let stored = try #require(try f.query("SELECT response_body FROM idempotency_keys WHERE idempotency_key = 'order-8841'", [])
            .first).decode("response_body", as: [UInt8].self)
        #expect(!stored.isEmpty)
        #expect(String(decoding: stored, as: UTF8.self).range(of: "_secret_") == nil)
        #expect(String(decoding: stored, as: UTF8.self).contains(try #require(try first.json()["id"] as? String)))
        let sessionId = try #require(try first.json()["id"] as? String)
        #expect(try f.call("GET", "/v1/checkout-sessions/\(sessionId)", bearer: secret).status == 200)
        let other = [UInt8](try JSONSerialization.data(withJSONObject: usdCart(["couponCode": "", "apiVersion": 13])))
        let reused = try client.request("POST", "/v1/checkout-sessions", headers: headers, body: other)
        #expect(reused.status == 422)
        #expect(try reused.json()["code"] as? String == "idempotency_key_reused")
        let count: Int64 = try #require(try f.query("SELECT count(*) AS n FROM checkout_sessions", []).first).decode("n")
        #expect(count == 1)
    }

    @Test func cartIsStrictAndRulesAreEnforced() throws {
        let f = try CheckoutFixture("co_strict")
        defer { f.stop() }
        let withTotal = try f.call("POST", "/v1/checkout-sessions", usdCart(["total": ["label": "X", "amount": "0.01"]]))
        #expect(withTotal.status == 400)
        let problem = try withTotal.json()
        #expect(problem["code"] as? String == "unknown_field")
        #expect(objects(problem["errors"]).first?["field"] as? String == "total")

        let nested = try f.call("POST", "/v1/checkout-sessions",
                                usdCart(["lineItems": [["label": "Widget", "amount": "9.99", "price": "1.00"]]]))
        #expect(nested.status == 400)
        #expect(objects(try nested.json()["errors"]).first?["field"] as? String == "lineItems[0].price")

        // Rule 13: duplicate shipping identifiers; rule 3: a currency the merchant does not charge in.
        var methods = try #require(usdCart()["shippingMethods"] as? [[String: Any]])
        methods[1]["identifier"] = "standard"
        let duplicate = try f.call("POST", "/v1/checkout-sessions", usdCart(["shippingMethods": methods]))
        #expect(duplicate.status == 422)
        let dupProblem = try duplicate.json()
        #expect(dupProblem["code"] as? String == "shipping_method_identifier_duplicate")
        #expect(objects(dupProblem["errors"]).contains { $0["field"] as? String == "shippingMethods[1].identifier" })

        var euroCart = usdCart(["currencyCode": "EUR", "lineItems": [["label": "A", "amount": "1.00"]]])
        euroCart.removeValue(forKey: "shippingMethods")
        let euro = try f.call("POST", "/v1/checkout-sessions", euroCart)
        #expect(euro.status == 422)
        #expect(objects(try euro.json()["errors"]).contains { $0["code"] as? String == "currency_not_enabled" })

        let wrongDigits = try f.call("POST", "/v1/checkout-sessions",
                                     usdCart(["lineItems": [["label": "A", "amount": "1.5"]]]))
        #expect(wrongDigits.status == 422)
        #expect(objects(try wrongDigits.json()["errors"]).contains { $0["code"] as? String == "amount_wrong_decimals" })

        let malformed = try f.client().request("POST", "/v1/checkout-sessions",
                                               headers: [("Authorization", "Bearer \(f.key)")], body: Array("{\"currencyCode\":".utf8))
        #expect(malformed.status == 400)
        #expect(try malformed.json()["code"] as? String == "malformed_json")

        let unauthenticated = try f.client().request("POST", "/v1/checkout-sessions", body: Array("{}".utf8))
        #expect(unauthenticated.status == 401)
    }

    @Test func oversizedBodyIs413() throws {
        let f = try CheckoutFixture("co_big")
        defer { f.stop() }
        let limit = f.server.app.configuration.limits.bodyBytesMax
        let client = try f.client()
        try client.send(Array(("POST /v1/checkout-sessions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(f.key)\r\n"
            + "Content-Length: \(limit + 1)\r\n\r\n").utf8))
        let response = try client.readResponse()
        #expect(response.status == 413)
        #expect(try response.json()["code"] as? String == "body_too_large")
    }

    @Test func currenciesWithZeroTwoAndThreeDecimals() throws {
        let f = try CheckoutFixture("co_ccy")
        defer { f.stop() }
        // (currency, items, standard, express, expected totals computed by hand)
        let cases: [(String, [String], String, String, Int64, Int64, String)] = [
            ("JPY", ["500", "1200"], "300", "900", 2000, 2600, "2600"),
            ("USD", ["9.99", "5.00"], "4.99", "14.99", 1998, 2998, "29.98"),
            ("KWD", ["1.500", "0.250"], "0.750", "2.125", 2500, 3875, "3.875"),
        ]
        for (code, items, standard, express, createdMinor, expressMinor, expressText) in cases {
            let cart = usdCart([
                "currencyCode": code,
                "lineItems": items.enumerated().map { ["label": "Item \($0.offset)", "amount": $0.element] },
                "shippingMethods": [
                    ["identifier": "standard", "label": "Standard", "detail": "slow", "amount": standard],
                    ["identifier": "express", "label": "Express", "detail": "fast", "amount": express],
                ],
            ])
            let session = try f.createSession(cart)
            #expect(session["currencyCode"] as? String == code)
            #expect(session["totalMinor"] as? Int == Int(createdMinor), "\(code)")
            #expect(sumOfFinalItems(objects(object(session["paymentRequest"])["lineItems"])) == createdMinor)
            let id = try #require(session["id"] as? String)
            let update = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-method",
                                    ["shippingMethod": ["identifier": "express"]])
            #expect(update.status == 200)
            let json = try update.json()
            #expect(object(json["newTotal"])["amount"] as? String == expressText, "\(code)")
            #expect(sumOfFinalItems(objects(json["newLineItems"])) == expressMinor)
            let stored: Int64 = try #require(try f.query("SELECT total_minor FROM checkout_sessions WHERE session_id = $1",
                                                         [id]).first).decode("total_minor")
            #expect(stored == expressMinor)
        }
    }

    @Test func everyUpdateEndpointWithKeyAndClientSecret() throws {
        let f = try CheckoutFixture("co_updates")
        defer { f.stop() }
        _ = try f.call("POST", "/v1/coupons", ["code": "SAVE10", "percentOff": "10"])
        for useSecret in [false, true] {
            let session = try f.createSession(usdCart())
            let id = try #require(session["id"] as? String)
            let bearer = useSecret ? try #require(session["clientSecret"] as? String) : f.key
            let base = "/v1/checkout-sessions/\(id)"

            let method = try f.call("POST", base + "/shipping-method",
                                    ["shippingMethod": ["identifier": "express", "label": "Express", "amount": "0.01"]],
                                    bearer: bearer)
            #expect(method.status == 200)
            #expect(method.header("Checkout-Session-Version") == "2")
            let m = try method.json()
            // The client-sent amount is ignored: express costs 14.99.
            #expect(object(m["newTotal"])["amount"] as? String == "29.98")
            #expect(object(m["newTotal"])["label"] as? String == "Corner Shop")
            #expect(objects(m["newShippingMethods"]).first?["identifier"] as? String == "express")
            #expect(m["errors"] == nil)

            let contact = try f.call("POST", base + "/shipping-contact",
                                     ["shippingContact": ["countryCode": "ca", "postalCode": "M5V",
                                                          "administrativeArea": "ON", "locality": "Toronto",
                                                          "someFutureAppleField": true]],
                                     bearer: bearer)
            #expect(contact.status == 200)
            let c = try contact.json()
            // Express does not ship to CA: only standard remains and is selected.
            #expect(objects(c["newShippingMethods"]).map { $0["identifier"] as? String } == ["standard"])
            #expect(object(c["newTotal"])["amount"] as? String == "19.98")
            #expect(objects(c["errors"]).isEmpty)

            let coupon = try f.call("POST", base + "/coupon-code", ["couponCode": "save10"], bearer: bearer)
            #expect(coupon.status == 200)
            let k = try coupon.json()
            let items = objects(k["newLineItems"])
            // 10 % of the goods subtotal 14.99 = 1.499 → 1.50 (half away from zero).
            #expect(items.contains { $0["amount"] as? String == "-1.50" })
            #expect(minorUnits(object(k["newTotal"])["amount"] as? String ?? "") == sumOfFinalItems(items))
            #expect(object(k["newTotal"])["amount"] as? String == "18.48")

            let payment = try f.call("POST", base + "/payment-method",
                                     ["paymentMethod": ["displayName": "Visa 1234", "network": "Visa", "type": "debit"]],
                                     bearer: bearer)
            #expect(payment.status == 200)
            let p = try payment.json()
            #expect(object(p["newTotal"])["amount"] as? String == "18.48")
            #expect(objects(p["newLineItems"]).count == items.count)
            #expect(try f.versions(id) == [1, 2, 3, 4, 5])
            let got = try f.call("GET", base, bearer: bearer).json()
            #expect(got["version"] as? Int == 5)
            #expect(got["totalMinor"] as? Int == 1848)
        }
    }

    @Test func authIsScopedToTheSession() throws {
        let f = try CheckoutFixture("co_scope")
        defer { f.stop() }
        let a = try f.createSession(usdCart())
        let b = try f.createSession(usdCart())
        let idA = try #require(a["id"] as? String)
        let idB = try #require(b["id"] as? String)
        let secretA = try #require(a["clientSecret"] as? String)
        var tampered = Array(secretA)
        tampered[tampered.count - 1] = tampered[tampered.count - 1] == "0" ? "1" : "0"
        let body: [String: Any] = ["shippingMethod": ["identifier": "express"]]

        let wrong = try f.call("POST", "/v1/checkout-sessions/\(idA)/shipping-method", body, bearer: String(tampered))
        #expect(wrong.status == 401)
        #expect(try wrong.json()["code"] as? String == "unauthorized")
        #expect(try f.call("GET", "/v1/checkout-sessions/\(idA)", bearer: String(tampered)).status == 401)
        // A's secret opens nothing of B.
        let crossed = try f.call("POST", "/v1/checkout-sessions/\(idB)/shipping-method", body, bearer: secretA)
        #expect(crossed.status == 401)
        #expect(try f.call("GET", "/v1/checkout-sessions/\(idB)", bearer: secretA).status == 401)

        let otherKey = try f.otherMerchantKey()
        for (method, path) in [("GET", "/v1/checkout-sessions/\(idA)"), ("POST", "/v1/checkout-sessions/\(idA)/shipping-method")] {
            let foreign = try f.call(method, path, method == "POST" ? body : nil, bearer: otherKey)
            #expect(foreign.status == 404)
            #expect(try foreign.json()["code"] as? String == "session_not_found")
        }
        let missing = try f.call("GET", "/v1/checkout-sessions/cs_000000000000000000000000")
        #expect(missing.status == 404)
        #expect(try missing.json()["code"] as? String == "session_not_found")
        #expect(try f.call("GET", "/v1/checkout-sessions/not-an-id").status == 404)
        #expect(try f.client().request("GET", "/v1/checkout-sessions/\(idA)").status == 401)
        #expect(try f.versions(idA) == [1])
        #expect(try f.versions(idB) == [1])
    }

    @Test func expiredAndPaidSessionsAreRefused() throws {
        let f = try CheckoutFixture("co_status")
        defer { f.stop() }
        let expired = try #require(try f.createSession(usdCart())["id"] as? String)
        _ = try f.query("UPDATE checkout_sessions SET expires_at = now() - interval '1 second' WHERE session_id = $1", [expired])
        let body: [String: Any] = ["shippingMethod": ["identifier": "express"]]
        let gone = try f.call("POST", "/v1/checkout-sessions/\(expired)/shipping-method", body)
        #expect(gone.status == 410)
        #expect(try gone.json()["code"] as? String == "session_expired")
        let status: String = try #require(try f.query("SELECT status FROM checkout_sessions WHERE session_id = $1",
                                                      [expired]).first).decode("status")
        #expect(status == "expired")
        #expect(try f.call("POST", "/v1/checkout-sessions/\(expired)/coupon-code", ["couponCode": ""]).status == 410)
        #expect(try f.call("GET", "/v1/checkout-sessions/\(expired)").json()["status"] as? String == "expired")

        let paid = try #require(try f.createSession(usdCart())["id"] as? String)
        _ = try f.query("UPDATE checkout_sessions SET status = 'paid' WHERE session_id = $1", [paid])
        let conflict = try f.call("POST", "/v1/checkout-sessions/\(paid)/shipping-method", body)
        #expect(conflict.status == 409)
        #expect(try conflict.json()["code"] as? String == "session_not_open")
        #expect(try f.versions(expired) == [1])
        #expect(try f.versions(paid) == [1])
    }

    @Test func unknownShippingIdentifierIs422() throws {
        let f = try CheckoutFixture("co_ship")
        defer { f.stop() }
        let id = try #require(try f.createSession(usdCart())["id"] as? String)
        let path = "/v1/checkout-sessions/\(id)/shipping-method"
        let unknown = try f.call("POST", path, ["shippingMethod": ["identifier": "teleport", "amount": "0.00"]])
        #expect(unknown.status == 422)
        #expect(try unknown.json()["code"] as? String == "shipping_method_unknown")
        let missing = try f.call("POST", path, ["shippingMethod": ["label": "Express"]])
        #expect(missing.status == 400)
        #expect(try missing.json()["code"] as? String == "field_missing")
        let extra = try f.call("POST", path, ["shippingMethod": ["identifier": "express"], "amount": "1.00"])
        #expect(extra.status == 400)
        #expect(try extra.json()["code"] as? String == "unknown_field")
        let malformed = try f.client().request("POST", path, headers: [("Authorization", "Bearer \(f.key)")],
                                               body: Array("{\"shippingMethod\":".utf8))
        #expect(malformed.status == 400)
        #expect(try malformed.json()["code"] as? String == "malformed_json")
        #expect(try f.versions(id) == [1])
    }

    @Test func unserviceableAddressIs200WithError() throws {
        let f = try CheckoutFixture("co_unserv")
        defer { f.stop() }
        let id = try #require(try f.createSession(usdCart())["id"] as? String)
        let response = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-contact",
                                  ["shippingContact": ["countryCode": "FR", "postalCode": "75001"]])
        #expect(response.status == 200)
        let json = try response.json()
        let error = try #require(objects(json["errors"]).first)
        #expect(error["code"] as? String == "addressUnserviceable")
        #expect(error["contactField"] as? String == "countryCode")
        #expect(objects(json["newShippingMethods"]).isEmpty)
        // No shipping line: goods only.
        #expect(object(json["newTotal"])["amount"] as? String == "14.99")
        #expect(sumOfFinalItems(objects(json["newLineItems"])) == 1499)

        let invalid = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-contact",
                                 ["shippingContact": ["locality": "Nowhere"]])
        #expect(invalid.status == 200)
        #expect(objects(try invalid.json()["errors"]).first?["code"] as? String == "shippingContactInvalid")
    }

    @Test func invalidAndExpiredCouponsAre200WithErrors() throws {
        let f = try CheckoutFixture("co_coupon")
        defer { f.stop() }
        #expect(try f.call("POST", "/v1/coupons", ["code": "OLD5", "amountOff": "5.00", "currencyCode": "USD",
                                                   "expiresAt": "2020-01-01T00:00:00Z"]).status == 201)
        #expect(try f.call("POST", "/v1/coupons", ["code": "BIG", "percentOff": "20", "currencyCode": "USD",
                                                   "minimumSubtotal": "100.00"]).status == 201)
        let id = try #require(try f.createSession(usdCart())["id"] as? String)
        let path = "/v1/checkout-sessions/\(id)/coupon-code"
        for (code, expected) in [("NOPE", "couponCodeInvalid"), ("OLD5", "couponCodeExpired"), ("BIG", "couponCodeInvalid")] {
            let response = try f.call("POST", path, ["couponCode": code])
            #expect(response.status == 200)
            let json = try response.json()
            #expect(objects(json["errors"]).first?["code"] as? String == expected, "\(code)")
            #expect(object(json["newTotal"])["amount"] as? String == "19.98")
        }
        // A coupon on the cart at creation must apply now or the cart is refused.
        let refused = try f.call("POST", "/v1/checkout-sessions", usdCart(["couponCode": "OLD5"]))
        #expect(refused.status == 422)
        #expect(try refused.json()["code"] as? String == "coupon_code_expired")
    }

    @Test func repeatedInputGivesTheStoredAnswer() throws {
        let f = try CheckoutFixture("co_repeat")
        defer { f.stop() }
        let id = try #require(try f.createSession(usdCart())["id"] as? String)
        let path = "/v1/checkout-sessions/\(id)/shipping-method"
        let express: [String: Any] = ["shippingMethod": ["identifier": "express"]]
        let first = try f.call("POST", path, express)
        let again = try f.call("POST", path, express)
        #expect(first.status == 200)
        #expect(again.body == first.body)
        #expect(again.header("Checkout-Session-Version") == "2")
        #expect(try f.versions(id) == [1, 2])
        _ = try f.call("POST", path, ["shippingMethod": ["identifier": "standard"]])
        let back = try f.call("POST", path, express)
        #expect(back.body == first.body)
        #expect(back.header("Checkout-Session-Version") == "4")
        #expect(try f.versions(id) == [1, 2, 3, 4])
        // The stored response is exactly what the shopper saw at that version.
        let stored: String = try #require(try f.query(
            "SELECT response::text AS r FROM checkout_session_versions WHERE session_id = $1 AND version = 4", [id]).first).decode("r")
        let storedJSON = try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? NSDictionary
        let sentJSON = try JSONSerialization.jsonObject(with: Data(back.body)) as? NSDictionary
        #expect(storedJSON == sentJSON)
    }

    @Test func concurrentUpdatesLoseNothing() throws {
        let f = try CheckoutFixture("co_race")
        defer { f.stop() }
        let session = try f.createSession(usdCart())
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)
        let threads = 20
        let statuses = Statuses()
        let group = DispatchGroup()
        for i in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                // Distinct postal codes: no two bodies are equal, so every request must add a version.
                let status = (try? f.call("POST", "/v1/checkout-sessions/\(id)/shipping-contact",
                                          ["shippingContact": ["countryCode": "US", "postalCode": String(10_000 + i)]],
                                          bearer: i % 2 == 0 ? secret : f.key).status) ?? -1
                statuses.append(status)
            }.start()
        }
        group.wait()
        #expect(statuses.values.count == threads)
        #expect(statuses.values.allSatisfy { $0 == 200 }, "\(statuses.values)")
        #expect(try f.versions(id) == Array(1...(threads + 1)))
        let version: Int = try #require(try f.query("SELECT version FROM checkout_sessions WHERE session_id = $1",
                                                    [id]).first).decode("version")
        #expect(version == threads + 1)
    }
}

/// Thread-safe collection of results.
final class Statuses: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Int] = []
    func append(_ value: Int) { lock.lock(); stored.append(value); lock.unlock() }
    var values: [Int] { lock.lock(); defer { lock.unlock() }; return stored }
}
