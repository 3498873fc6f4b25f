import Foundation
import Testing
@testable import TenderServer

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CouponTaxTests {
    @Test func couponsAreCreatedListedAndUnique() throws {
        let f = try CheckoutFixture("co_coupons")
        defer { f.stop() }
        let created = try f.call("POST", "/v1/coupons", ["code": "Spring-25", "percentOff": "12.5",
                                                         "expiresAt": "2099-01-01T00:00:00Z"])
        #expect(created.status == 201)
        let json = try created.json()
        #expect(json["code"] as? String == "SPRING-25")
        #expect(json["percentOff"] as? String == "12.5")
        #expect(json["expiresAt"] as? String == "2099-01-01T00:00:00Z")
        let fixed = try f.call("POST", "/v1/coupons", ["code": "KWD1", "amountOff": "1.250", "currencyCode": "KWD",
                                                       "minimumSubtotal": "10.000"])
        #expect(fixed.status == 201)
        #expect(try fixed.json()["amountOff"] as? String == "1.250")

        let duplicate = try f.call("POST", "/v1/coupons", ["code": "spring-25", "percentOff": "5"])
        #expect(duplicate.status == 409)
        #expect(try duplicate.json()["code"] as? String == "coupon_exists")

        let list = try f.call("GET", "/v1/coupons")
        #expect(list.status == 200)
        let coupons = objects(try list.json()["coupons"])
        #expect(coupons.map { $0["code"] as? String } == ["KWD1", "SPRING-25"])
        #expect(coupons.first?["minimumSubtotal"] as? String == "10.000")

        // Another merchant sees none of them.
        let other = try f.call("GET", "/v1/coupons", bearer: try f.otherMerchantKey())
        #expect(objects(try other.json()["coupons"]).isEmpty)
    }

    @Test func couponValidationNamesEachProblem() throws {
        let f = try CheckoutFixture("co_coupon_bad")
        defer { f.stop() }
        let cases: [([String: Any], Int, String)] = [
            (["code": "A", "percentOff": "10", "percent": "10"], 400, "unknown_field"),
            (["percentOff": "10"], 400, "field_missing"),
            (["code": "A", "percentOff": 10], 400, "field_type_invalid"),
            (["code": "A"], 422, "discount_missing"),
            (["code": "A", "percentOff": "10", "amountOff": "1.00", "currencyCode": "USD"], 422, "discount_ambiguous"),
            (["code": "A", "percentOff": "100.01"], 422, "percent_off_invalid"),
            (["code": "A", "percentOff": "0"], 422, "percent_off_invalid"),
            (["code": "A", "percentOff": "12.345"], 422, "percent_off_invalid"),
            (["code": "A", "amountOff": "5.00"], 422, "currency_required"),
            (["code": "A", "amountOff": "5.0", "currencyCode": "USD"], 422, "amount_wrong_decimals"),
            (["code": "A", "amountOff": "500.5", "currencyCode": "JPY"], 422, "amount_wrong_decimals"),
            (["code": "A", "amountOff": "0.00", "currencyCode": "USD"], 422, "amount_off_invalid"),
            (["code": "A", "amountOff": "92233720368547758.07", "currencyCode": "USD"], 422, "amount_too_large"),
            (["code": "A", "amountOff": "100000000.01", "currencyCode": "USD"], 422, "amount_too_large"),
            (["code": "A", "amountOff": "100000001", "currencyCode": "JPY"], 422, "amount_too_large"),
            (["code": "A", "percentOff": "10", "minimumSubtotal": "100000000.001", "currencyCode": "KWD"], 422,
             "amount_too_large"),
            (["code": "A", "amountOff": "5.00", "currencyCode": "EUR"], 422, "currency_not_enabled"),
            (["code": "A", "amountOff": "5.00", "currencyCode": "ZZZ"], 422, "currency_unknown"),
            (["code": "A", "percentOff": "10", "expiresAt": "tomorrow"], 422, "expires_at_invalid"),
            (["code": "A", "percentOff": "10", "minimumSubtotal": "5.00"], 422, "currency_required"),
            (["code": "has space", "percentOff": "10"], 422, "coupon_code_invalid"),
            (["code": String(repeating: "A", count: 65), "percentOff": "10"], 422, "coupon_code_invalid"),
            // Unicode case mapping must not make a refused code valid ("ﬀ" → "FF", "ı" → "I").
            (["code": "\u{FB00}", "percentOff": "10"], 422, "coupon_code_invalid"),
            (["code": "sav\u{0131}", "percentOff": "10"], 422, "coupon_code_invalid"),
            (["code": "A", "percentOff": NSNull()], 400, "field_type_invalid"),
            (["code": "A", "percentOff": "10", "expiresAt": NSNull()], 400, "field_type_invalid"),
        ]
        for (body, status, code) in cases {
            let response = try f.call("POST", "/v1/coupons", body)
            #expect(response.status == status, "\(body)")
            #expect(try response.json()["code"] as? String == code, "\(body): \(response.text)")
        }
        // At the amount ceiling is accepted.
        #expect(try f.call("POST", "/v1/coupons", ["code": "MAXOFF", "amountOff": "100000000.00", "currencyCode": "USD"])
            .status == 201)
        // The boundary: 64 characters is accepted.
        #expect(try f.call("POST", "/v1/coupons", ["code": String(repeating: "A", count: 64), "percentOff": "100"]).status == 201)
        let several = try f.call("POST", "/v1/coupons", ["code": "", "percentOff": "0"])
        #expect(Set(objects(try several.json()["errors"]).compactMap { $0["code"] as? String })
                == ["coupon_code_invalid", "percent_off_invalid"])
    }

    @Test func taxRatesReplaceAndPriceByRegion() throws {
        let f = try CheckoutFixture("co_tax")
        defer { f.stop() }
        let table: [[String: Any]] = [
            ["countryCode": "US", "rate": "8.25", "shippingTaxable": false],
            ["countryCode": "US", "region": "CA", "rate": "10", "shippingTaxable": true],
        ]
        let put = try f.call("PUT", "/v1/tax-rates", table)
        #expect(put.status == 200)
        let got = try f.call("GET", "/v1/tax-rates")
        #expect(got.status == 200)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(got.body)) as? [[String: Any]])
        #expect(rows.map { $0["rate"] as? String } == ["8.25", "10"])
        #expect(rows.map { $0["region"] as? String } == [nil, "CA"])

        // Before an address is known the merchant's country applies: 8.25 % of 14.99, shipping untaxed.
        // Rounded once, half away from zero: 1499 × 825 / 10000 = 123.6675 → 124.
        let session = try f.createSession(usdCart())
        let request = object(session["paymentRequest"])
        #expect(objects(request["lineItems"]).last?["label"] as? String == "Tax")
        #expect(objects(request["lineItems"]).last?["amount"] as? String == "1.24")
        #expect(session["totalMinor"] as? Int == 1499 + 499 + 124)

        // California: 10 % of goods + shipping (14.99 + 4.99 = 19.98) = 1.998 → 2.00.
        let id = try #require(session["id"] as? String)
        let update = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-contact",
                                ["shippingContact": ["countryCode": "US", "administrativeArea": "ca", "postalCode": "94016"]])
        let json = try update.json()
        #expect(objects(json["newLineItems"]).last?["amount"] as? String == "2.00")
        #expect(object(json["newTotal"])["amount"] as? String == "21.98")

        // Replacing the table does not change a session already created (its inputs are a snapshot).
        #expect(try f.call("PUT", "/v1/tax-rates", [[String: Any]]()).status == 200)
        #expect(objects(try JSONSerialization.jsonObject(with: Data(try f.call("GET", "/v1/tax-rates").body)) as? [[String: Any]]).isEmpty)
        let again = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-contact",
                               ["shippingContact": ["countryCode": "US", "administrativeArea": "NY", "postalCode": "10001"]])
        #expect(objects(try again.json()["newLineItems"]).last?["amount"] as? String == "1.24")
    }

    @Test func taxRateValidation() throws {
        let f = try CheckoutFixture("co_tax_bad")
        defer { f.stop() }
        let cases: [(Any, Int, String)] = [
            ([["countryCode": "US", "rate": "5", "compound": true]], 400, "unknown_field"),
            ([["countryCode": "US"]], 400, "field_missing"),
            (["countryCode": "US", "rate": "5"], 400, "field_type_invalid"),
            ([["countryCode": "XX", "rate": "5"]], 422, "country_unknown"),
            ([["countryCode": "US", "rate": "5%"]], 422, "rate_invalid"),
            ([["countryCode": "US", "rate": "100.5"]], 422, "rate_invalid"),
            ([["countryCode": "US", "rate": "5"], ["countryCode": "US", "rate": "6"]], 422, "tax_rate_duplicate"),
            ([["countryCode": "US", "region": String(repeating: "r", count: 65), "rate": "5"]], 422, "region_invalid"),
            // Counted in code points, as the column's CHECK counts: 40 characters of two scalars each.
            ([["countryCode": "US", "region": String(repeating: "e\u{301}", count: 40), "rate": "5"]], 422, "region_invalid"),
            // Counted as sent, not after trimming.
            ([["countryCode": "US", "region": String(repeating: " ", count: 65), "rate": "5"]], 422, "region_invalid"),
            ([["countryCode": "US", "rate": "5", "shippingTaxable": NSNull()]], 400, "field_type_invalid"),
            ([["countryCode": "US", "region": NSNull(), "rate": "5"]], 400, "field_type_invalid"),
        ]
        for (body, status, code) in cases {
            let response = try f.call("PUT", "/v1/tax-rates", body)
            #expect(response.status == status, "\(body)")
            #expect(try response.json()["code"] as? String == code, "\(body): \(response.text)")
        }
        // The table limit, at and just past it.
        let limit = PricingDataLimits.taxRatesMax
        let full = (0..<limit).map { ["countryCode": "US", "region": "R\($0)", "rate": "1"] }
        #expect(try f.call("PUT", "/v1/tax-rates", full).status == 200)
        let over = full + [["countryCode": "CA", "rate": "1"]]
        let refused = try f.call("PUT", "/v1/tax-rates", over)
        #expect(refused.status == 422)
        #expect(try refused.json()["code"] as? String == "tax_rates_too_many")
        #expect((try JSONSerialization.jsonObject(with: Data(try f.call("GET", "/v1/tax-rates").body)) as? [Any])?.count == limit)
    }
}
