import Foundation
import Money
import Testing
@testable import PaymentRequest

@Suite struct JSONTests {
    @Test func rule29_dates_are_rfc3339_utc() throws {
        let item = ApplePayLineItem(label: "Plan", amount: "1.00", paymentTiming: .recurring,
                                    recurringPaymentStartDate: Timestamp(unixSeconds: 1_767_225_600),
                                    recurringPaymentEndDate: Timestamp(millisecondsSinceEpoch: 951_782_400_250))
        let object = try Fixture.json(item)
        #expect(object["recurringPaymentStartDate"] as? String == "2026-01-01T00:00:00Z")
        #expect(object["recurringPaymentEndDate"] as? String == "2000-02-29T00:00:00.250Z")
        #expect(Timestamp(rfc3339: "2026-01-01T01:00:00+01:00") == Timestamp(unixSeconds: 1_767_225_600))
        #expect(Timestamp(rfc3339: "1969-12-31T23:59:59Z")?.millisecondsSinceEpoch == -1000)
        for bad in ["2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-01-01 00:00:00Z", "2026-01-01T00:00:00",
                    "2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z", "2026-01-01T00:00:00.Z", "26-01-01T00:00:00Z"] {
            #expect(Timestamp(rfc3339: bad) == nil, "\(bad)")
        }
        // A malformed date inside a cart is refused as rule 29 with its path.
        let json = #"{"currencyCode":"USD","lineItems":[{"label":"Plan","amount":"1.00","deferredPaymentDate":"2026-13-01T00:00:00Z"}]}"#
        #expect {
            try Fixture.decodeCart(json)
        } throws: {
            PaymentRequestError(decoding: $0).issues == [RequestIssue(code: "date_malformed", path: "lineItems[0].deferredPaymentDate",
                rule: 29)]
        }
    }

    @Test func timestampRoundTrip() {
        var state: UInt64 = 42
        for _ in 0..<2000 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let ms = Int64(state % 315_537_897_600_000) - 62_135_596_800_000  // years 0001…9999
            let stamp = Timestamp(millisecondsSinceEpoch: ms)
            #expect(Timestamp(rfc3339: stamp.rfc3339) == stamp)
        }
    }

    @Test func rule30_only_apple_keys() throws {
        var cart = Fixture.cart()
        cart.recurringPaymentRequest = Fixture.recurring
        let priced = try Fixture.build(cart, taxRules: [TaxRule(country: Fixture.country("US"), rateBasisPoints: 825,
            shippingTaxable: true)])
        let object = try Fixture.json(priced.paymentRequest)
        #expect(Set(object.keys).isSubset(of: ApplePayPaymentRequest.appleKeys))
        let methods = try #require(object["shippingMethods"] as? [[String: Any]])
        let methodKeys: Set<String> = ["label", "detail", "amount", "identifier", "dateComponentsRange", "selected"]
        #expect(methods.allSatisfy { Set($0.keys).isSubset(of: methodKeys) })  // no Tender `countries`
        for key in ["metadata", "expiresInSeconds", "apiVersion"] { #expect(object[key] == nil) }
    }

    @Test func unknownFieldsAreRefusedWithTheirPath() {
        let cases: [(String, String)] = [
            (#"{"currencyCode":"USD","lineItems":[],"total":{"label":"x","amount":"0.01"}}"#, "total"),
            (#"{"currencyCode":"USD","lineItems":[{"label":"a","amount":"1.00","price":"1.00"}]}"#, "lineItems[0].price"),
            (#"{"currencyCode":"USD","lineItems":[],"#
                + #""shippingMethods":[{"identifier":"a","label":"a","detail":"d","amount":"0.00","selected":true}]}"#,
             "shippingMethods[0].selected"),
            (#"{"currencyCode":"USD","lineItems":[],"recurringPaymentRequest":{"paymentDescription":"p","managementUrl":"x","#
                + #""regularBilling":{"label":"a"},"managementURL":"https://a"}}"#,
             "recurringPaymentRequest.managementUrl"),
            (#"{"currencyCode":"USD","lineItems":[],"applicationData":"AAAA"}"#, "applicationData"),
        ]
        for (json, path) in cases {
            #expect {
                try Fixture.decodeCart(json)
            } throws: {
                PaymentRequestError(decoding: $0).issues == [RequestIssue(code: "unknown_field", path: path, rule: 0)]
            }
        }
    }

    @Test func nullMembersAreRefusedWithTheirPath() {
        // A member is a value or absent: `null` would otherwise decode as "absent" (openapi.yaml forbids it).
        let cases: [(String, String)] = [
            (#"{"currencyCode":"USD","countryCode":null,"lineItems":[{"label":"a","amount":"1.00"}]}"#, "countryCode"),
            (#"{"currencyCode":"USD","lineItems":[{"label":"a","amount":"1.00","type":null}]}"#, "lineItems[0].type"),
            (#"{"currencyCode":"USD","lineItems":[{"label":"a","amount":"1.00"}],"shippingContact":{"countryCode":null}}"#,
             "shippingContact.countryCode"),
            (#"{"currencyCode":"USD","lineItems":[{"label":"a","amount":"1.00"}],"#
                + #""shippingMethods":[{"identifier":"a","label":"a","detail":"d","amount":"0.00","countries":null}]}"#,
             "shippingMethods[0].countries"),
        ]
        for (json, path) in cases {
            #expect {
                try Fixture.decodeCart(json)
            } throws: {
                PaymentRequestError(decoding: $0).issues == [RequestIssue(code: "field_type_invalid", path: path, rule: 0)]
            }
        }
        // An unknown member is reported before a null one.
        #expect {
            try Fixture.decodeCart(#"{"currencyCode":"USD","countryCode":null,"lineItems":[],"total":{}}"#)
        } throws: {
            PaymentRequestError(decoding: $0).issues == [RequestIssue(code: "unknown_field", path: "total", rule: 0)]
        }
    }

    @Test func openMembersMayHoldNulls() {
        // `.open` marks objects Apple produces; their members are Apple's to null.
        let schema = KeySchema.object(["shippingContact": .open, "code": .leaf])
        let shape = JSONShape.object(["shippingContact": .object(["postalCode": .null]), "code": .scalar])
        #expect(schema.firstNullMember(in: shape) == nil)
        #expect(schema.firstNullMember(in: .object(["code": .null])) == "code")
    }

    @Test func contractCartDecodes() throws {
        let json = #"""
        {"currencyCode": "USD", "countryCode": "US",
         "lineItems": [{"label": "Widget", "amount": "9.99"}],
         "shippingMethods": [{"identifier": "standard", "label": "Standard", "detail": "5–7 days",
                              "amount": "4.99", "countries": ["US", "CA"]}],
         "shippingType": "shipping", "requiredShippingContactFields": ["postalAddress", "email"],
         "requiredBillingContactFields": ["postalAddress"], "supportsCouponCode": true, "couponCode": "",
         "applePayLaterAvailability": "available", "apiVersion": 14, "metadata": {"orderId": "8841"},
         "expiresInSeconds": 3600}
        """#
        let cart = try Fixture.decodeCart(json)
        let priced = try Fixture.build(cart)
        #expect(priced.totalMinor == 1498)
        #expect(priced.paymentRequest.total == ApplePayLineItem(label: "Example Store", amount: "14.98", type: .final))
        #expect(priced.metadata == ["orderId": "8841"])
        #expect(priced.expiresAt == Timestamp(unixSeconds: 1_767_225_600 + 3600))
    }

    @Test func shapeErrorsMapToCodes() {
        #expect {
            try Fixture.decodeCart(#"{"lineItems":[]}"#)
        } throws: { PaymentRequestError(decoding: $0).issues == [RequestIssue(code: "field_missing", path: "currencyCode", rule: 0)] }
        #expect {
            try Fixture.decodeCart(#"{"currencyCode":"USD","lineItems":[{"label":"a","amount":9.99}]}"#)
        } throws: { PaymentRequestError(decoding: $0).issues == [RequestIssue(code: "field_type_invalid", path: "lineItems[0].amount",
            rule: 0)] }
    }

    @Test func advancedModesRoundTrip() throws {
        #expect(try Fixture.roundTrip(Fixture.recurring) == Fixture.recurring)
        #expect(try Fixture.roundTrip(Fixture.reload) == Fixture.reload)
        #expect(try Fixture.roundTrip(Fixture.deferred) == Fixture.deferred)
        #expect(try Fixture.roundTrip(Fixture.tokenContexts) == Fixture.tokenContexts)
        for mode in 0..<4 {
            var cart = Fixture.cart()
            switch mode {
            case 0: cart.recurringPaymentRequest = Fixture.recurring
            case 1: cart.automaticReloadPaymentRequest = Fixture.reload
            case 2: cart.deferredPaymentRequest = Fixture.deferred
            default: cart.multiTokenContexts = Fixture.tokenContexts
            }
            // The cart survives JSON (strict decoding accepts what it encodes) …
            #expect(try Fixture.roundTrip(cart) == cart)
            // … and so do the priced request and the whole stored state.
            let priced = try Fixture.build(cart)
            #expect(try Fixture.roundTrip(priced.paymentRequest) == priced.paymentRequest)
            #expect(try Fixture.roundTrip(priced) == priced)
        }
        let result = ApplePayPaymentAuthorizationResult.failure([ApplePayError(code: .shippingContactInvalid, contactField: .postalCode,
            message: "Check the postcode")])
        #expect(try Fixture.roundTrip(result) == result)
        #expect(try Fixture.json(result)["status"] as? Int == 1)
    }
}

@Suite struct PricingTests {
    /// 0, 2 and 3 decimals end to end: cart → priced request → JSON strings. Expected strings worked by hand.
    @Test(arguments: [
        ("JPY", ["1200", "300"], "500", "150", "2150"),
        ("USD", ["12.00", "3.00"], "5.00", "1.50", "21.50"),
        ("KWD", ["1.200", "0.300"], "0.500", "0.150", "2.150"),
    ])
    func currenciesEndToEnd(code: String, items: [String], shipping: String, tax: String, total: String) throws {
        var cart = Fixture.cart(currency: code)
        cart.lineItems = [.item("A", items[0]), .item("B", items[1])]
        cart.shippingMethods = [CartShippingMethod(identifier: "std", label: "Standard", detail: "3 days", amount: shipping)]
        let rule = TaxRule(country: Fixture.country("US"), rateBasisPoints: 1000, shippingTaxable: false)
        let priced = try Fixture.build(cart, taxRules: [rule])
        let object = try Fixture.json(priced.paymentRequest)
        let lines = try #require(object["lineItems"] as? [[String: Any]])
        #expect(lines.compactMap { $0["amount"] as? String } == items + [shipping, tax])
        #expect((object["total"] as? [String: Any])?["amount"] as? String == total)
        #expect((object["total"] as? [String: Any])?["label"] as? String == "Example Store")
        #expect(object["currencyCode"] as? String == code)
    }

    @Test func couponAndTaxRounding() throws {
        var cart = Fixture.cart()
        cart.lineItems = [.item("Widget", "10.01")]
        cart.couponCode = "SAVE10"
        let coupon = Coupon(code: "SAVE10", kind: .percent(basisPoints: 1000))
        // Discount 10 % of 10.01 = 1.001 → 1.00. Taxable: 9.01 + 4.99 = 14.00; 8.25 % = 1.155 → 1.16 (half up).
        let rule = TaxRule(country: Fixture.country("US"), rateBasisPoints: 825, shippingTaxable: true)
        let priced = try Fixture.build(cart, coupon: coupon, taxRules: [rule])
        #expect(priced.lineItems.map(\.amount) == ["10.01", "-1.00", "4.99", "1.16"])
        #expect(priced.lineItems.map(\.label) == ["Widget", "Discount (SAVE10)", "Standard", "Tax"])
        #expect(priced.totalMinor == 1516)
        #expect(priced.paymentRequest.couponCode == "SAVE10")
    }

    @Test func regionRuleWinsOverCountryRule() throws {
        var cart = Fixture.cart()
        cart.shippingContact = ApplePayPaymentContact(administrativeArea: "ca", countryCode: "US")
        let rules = [TaxRule(country: Fixture.country("US"), rateBasisPoints: 500, shippingTaxable: false),
                     TaxRule(country: Fixture.country("US"), region: "CA", rateBasisPoints: 1000, shippingTaxable: false)]
        let priced = try Fixture.build(cart, taxRules: rules)
        #expect(priced.taxMinor == 100)  // 10 % of 9.99 = 0.999 → 1.00
    }

    @Test func merchantNetworksFilteredToVersion() throws {
        var cart = Fixture.cart()
        cart.apiVersion = 13
        let priced = try Fixture.build(cart)
        #expect(priced.paymentRequest.supportedNetworks == [.visa, .masterCard, .amex])  // bancontact needs v14
    }

    /// Property: for seeded random carts, total = Σ final line items and every amount string re-parses.
    @Test func randomCartsBalance() throws {
        var rng = SplitMix64(seed: 0x7E4D_E2)
        let currencies = ["USD", "JPY", "KWD", "EUR"].map(Fixture.currency)
        for _ in 0..<300 {
            let currency = currencies[Int(rng.next() % 4)]
            var cart = Fixture.cart(currency: currency.code)
            cart.lineItems = (0..<(1 + Int(rng.next() % 8))).map { i in
                let minor = Int64(rng.next() % 5_000_000) + 1
                let pending = rng.next() % 10 == 0
                return ApplePayLineItem(label: "Item \(i)", amount: pending ? nil : currency.formatAmount(minor),
                                        type: pending ? .pending : .final)
            }
            if cart.lineItems.allSatisfy({ $0.type == .pending }) { cart.lineItems[0] = .item("Base", currency.formatAmount(1)) }
            cart.shippingMethods = (0..<Int(rng.next() % 4)).map { i in
                CartShippingMethod(identifier: "m\(i)", label: "M\(i)", detail: "d",
                                   amount: currency.formatAmount(Int64(rng.next() % 100_000)))
            }
            var coupon: Coupon?
            if rng.next() % 2 == 0 {
                cart.couponCode = "C"
                coupon = rng.next() % 2 == 0
                    ? Coupon(code: "C", kind: .percent(basisPoints: Int64(rng.next() % 10_001)))
                    : Coupon(code: "C", kind: .fixed(amountMinor: Int64(rng.next() % 10_000_000)), currency: currency)
            }
            let rule = TaxRule(country: Fixture.country("US"), rateBasisPoints: Int64(rng.next() % 3000),
                               shippingTaxable: rng.next() % 2 == 0)
            var priced = try Fixture.build(cart, coupon: coupon, taxRules: [rule])
            if let method = priced.availableShippingMethods.last {
                priced = try priced.selectingShippingMethod(method.identifier, now: Fixture.now).checkout
            }
            var sum: Int64 = 0
            for item in priced.lineItems {
                if let text = item.amount {
                    let value = try currency.parseAmount(text, allowNegative: true)
                    #expect(currency.formatAmount(value) == text)
                    if item.effectiveType == .final { sum += value }
                }
            }
            #expect(sum == priced.totalMinor)
            #expect(try currency.parseAmount(priced.total.amount ?? "") == priced.totalMinor)
            #expect(priced.totalMinor >= 0)
        }
    }
}

/// Deterministic PRNG for property tests (SplitMix64).
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
