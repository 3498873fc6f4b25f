import Foundation
import Money
import Testing
@testable import PaymentRequest

@Suite struct RecalculationTests {
    static let usTax = TaxRule(country: Fixture.country("US"), rateBasisPoints: 1000, shippingTaxable: true)
    static let later = Timestamp(unixSeconds: 1_767_225_600 + 60)

    func session() throws -> PricedCheckout { try Fixture.build(Fixture.cart(), taxRules: [Self.usTax]) }

    @Test func rule32_unknown_shipping_identifier() throws {
        let checkout = try session()
        #expect(throws: PaymentRequestError(code: "shipping_method_unknown", path: "shippingMethod.identifier", rule: 32)) {
            try checkout.selectingShippingMethod("overnight", now: Self.later)
        }
        // A method that exists but does not ship to the current address was not offered either.
        let inCanada = try checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: "CA"), now: Self.later).checkout
        #expect(throws: PaymentRequestError(code: "shipping_method_unknown", path: "shippingMethod.identifier", rule: 32)) {
            try inCanada.selectingShippingMethod("express", now: Self.later)
        }
    }

    @Test func selectingShippingReprices() throws {
        let result = try session().selectingShippingMethod("express", now: Self.later)
        // 9.99 + 14.99 = 24.98; tax 10 % = 2.498 → 2.50; total 27.48.
        #expect(result.update.newTotal.amount == "27.48")
        #expect(result.update.newLineItems?.map(\.amount) == ["9.99", "14.99", "2.50"])
        #expect(result.update.newShippingMethods?.map(\.identifier) == ["express", "standard"])
        #expect(result.checkout.totalMinor == 2748)
        #expect(result.checkout.selection.shippingMethodIdentifier == "express")
    }

    @Test func rule33_redacted_contact_and_unserviceable_address() throws {
        let checkout = try session()
        // Redacted: country, area and postcode only, lowercase country as Apple sometimes sends.
        let ok = try checkout.updatingShippingContact(
            ApplePayPaymentContact(locality: "Toronto", postalCode: "M5V", administrativeArea: "ON", countryCode: "ca"),
            now: Self.later)
        #expect(ok.update.errors == [])
        #expect(ok.update.newShippingMethods?.map(\.identifier) == ["standard"])
        #expect(ok.update.newLineItems?.map(\.label) == ["Widget", "Standard"])  // no CA tax rule
        #expect(ok.update.newTotal.amount == "14.98")

        let far = try checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: "FR"), now: Self.later)
        #expect(far.update.errors == [ApplePayError(code: .addressUnserviceable, contactField: .countryCode,
                                                    message: "We can't ship to this country.")])
        #expect(far.update.newShippingMethods == [])
        #expect(far.update.newTotal.amount == "9.99")

        let invalid = try checkout.updatingShippingContact(ApplePayPaymentContact(postalCode: "12345"), now: Self.later)
        #expect(invalid.update.errors?.first?.code == .shippingContactInvalid)
        #expect(invalid.update.errors?.first?.contactField == .countryCode)
    }

    @Test func taxFollowsAddress() throws {
        let rules = [Self.usTax, TaxRule(country: Fixture.country("CA"), rateBasisPoints: 1300, shippingTaxable: false)]
        let checkout = try Fixture.build(Fixture.cart(), taxRules: rules)
        #expect(checkout.taxMinor == 150)  // 10 % of 14.98 = 1.498 → 1.50
        let canada = try checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: "CA"), now: Self.later)
        // 13 % of 9.99 (shipping not taxable) = 1.2987 → 1.30.
        #expect(canada.checkout.taxMinor == 130)
        #expect(canada.update.newTotal.amount == "16.28")
    }

    @Test func rule34_coupons() throws {
        let checkout = try session()
        let tenOff = Coupon(code: "SAVE10", kind: .percent(basisPoints: 1000), expiresAtUnixSeconds: 1_767_225_600 + 30)
        let unknown = try checkout.applyingCouponCode("NOPE", coupon: nil, now: Self.later)
        #expect(unknown.update.errors?.map(\.code) == [.couponCodeInvalid])
        #expect(unknown.update.newTotal.amount == checkout.total.amount)

        let expired = try checkout.applyingCouponCode("SAVE10", coupon: tenOff, now: Self.later)
        #expect(expired.update.errors?.map(\.code) == [.couponCodeExpired])
        #expect(expired.update.newTotal.amount == checkout.total.amount)

        let minimum = Coupon(code: "BIG", kind: .fixed(amountMinor: 500), currency: Fixture.currency("USD"),
                             minimumSubtotalMinor: 1000)
        let below = try checkout.applyingCouponCode("BIG", coupon: minimum, now: Self.later)
        #expect(below.update.errors?.map(\.code) == [.couponCodeInvalid])

        let euro = Coupon(code: "EUR5", kind: .fixed(amountMinor: 500), currency: Fixture.currency("EUR"))
        #expect(try checkout.applyingCouponCode("EUR5", coupon: euro, now: Self.later).update.errors?.map(\.code) == [.couponCodeInvalid])

        let good = Coupon(code: "FIVE", kind: .fixed(amountMinor: 500), currency: Fixture.currency("USD"))
        let applied = try checkout.applyingCouponCode("FIVE", coupon: good, now: Self.later)
        #expect(applied.update.errors == [])
        // 9.99 − 5.00 + 4.99 = 9.98; tax 10 % = 0.998 → 1.00; total 10.98.
        #expect(applied.update.newLineItems?.map(\.amount) == ["9.99", "-5.00", "4.99", "1.00"])
        #expect(applied.update.newTotal.amount == "10.98")
        // The discount survives a later shipping change; an empty code removes it.
        let express = try applied.checkout.selectingShippingMethod("express", now: Self.later)
        #expect(express.update.newLineItems?.map(\.amount) == ["9.99", "-5.00", "14.99", "2.00"])
        let removed = try applied.checkout.applyingCouponCode("", coupon: nil, now: Self.later)
        #expect(removed.update.newTotal == checkout.total)
    }

    @Test func rule35_every_update_carries_a_valid_new_total() throws {
        let checkout = try session()
        let totals = [
            try checkout.selectingShippingMethod("standard", now: Self.later).update.newTotal,
            try checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: "FR"), now: Self.later).update.newTotal,
            try checkout.applyingCouponCode("X", coupon: nil, now: Self.later).update.newTotal,
            try checkout.updatingPaymentMethod(ApplePayPaymentMethod(network: "Visa", type: "debit")).update.newTotal,
        ]
        for total in totals {
            #expect(total.label == "Example Store")
            #expect(try Fixture.currency("USD").parseAmount(total.amount ?? "") >= 0)
        }
        // JSON always has newTotal, even for the payment-method answer.
        let json = try Fixture.json(try checkout.updatingPaymentMethod(ApplePayPaymentMethod()).update)
        #expect(json["newTotal"] != nil)
    }

    @Test func rule36_updates_never_add_an_advanced_mode() throws {
        var cart = Fixture.cart()
        cart.recurringPaymentRequest = Fixture.recurring
        let checkout = try Fixture.build(cart)
        let update = try checkout.selectingShippingMethod("express", now: Self.later).update
        #expect(update.newRecurringPaymentRequest == nil && update.newAutomaticReloadPaymentRequest == nil)
        #expect(update.newDeferredPaymentRequest == nil && update.newMultiTokenContexts == nil)
    }

    @Test func rule37_deterministic() throws {
        let a = try session()
        let b = try session()
        #expect(a == b)
        let contact = ApplePayPaymentContact(postalCode: "94107", administrativeArea: "CA", countryCode: "US")
        let first = try a.updatingShippingContact(contact, now: Self.later)
        let second = try b.updatingShippingContact(contact, now: Self.later)
        #expect(first.checkout == second.checkout)
        // Byte-identical JSON needs sorted keys (Foundation's key order is otherwise unspecified).
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(try encoder.encode(first.update) == encoder.encode(second.update))
    }

    @Test func rule39_state_records_what_was_shown() throws {
        let result = try session().selectingShippingMethod("express", now: Self.later)
        #expect(result.checkout.paymentRequest.total == result.update.newTotal)
        #expect(result.checkout.lineItems == result.update.newLineItems)
        // The stored state survives the database as JSON and keeps recalculating.
        let restored = try Fixture.roundTrip(result.checkout)
        #expect(restored == result.checkout)
        #expect(try restored.selectingShippingMethod("standard", now: Self.later).checkout.totalMinor == 1648)
    }
}

@Suite struct LimitTests {
    @Test func lineItemsAtAndPastLimit() {
        let limits = CheckoutLimits(lineItemsMax: 5)
        var cart = Fixture.cart()
        cart.lineItems = (0..<5).map { .item("I\($0)", "1.00") }
        #expect(Fixture.issues(cart, limits: limits) == [])
        cart.lineItems.append(.item("I5", "1.00"))
        #expect(Fixture.issues(cart, limits: limits).contains(RequestIssue(code: "line_items_too_many", path: "lineItems", rule: 0)))
    }

    @Test func shippingMethodsAtAndPastLimit() {
        let limits = CheckoutLimits(shippingMethodsMax: 3)
        var cart = Fixture.cart()
        cart.shippingMethods = (0..<3).map { CartShippingMethod(identifier: "m\($0)", label: "M", detail: "d", amount: "1.00") }
        #expect(Fixture.issues(cart, limits: limits) == [])
        cart.shippingMethods?.append(CartShippingMethod(identifier: "m3", label: "M", detail: "d", amount: "1.00"))
        #expect(Fixture.issues(cart, limits: limits).contains(RequestIssue(code: "shipping_methods_too_many", path: "shippingMethods",
            rule: 0)))
    }

    @Test func labelLengthAtAndPastLimit() {
        var cart = Fixture.cart()
        cart.lineItems[0].label = String(repeating: "é", count: 128)
        #expect(Fixture.issues(cart) == [])
        cart.lineItems[0].label += "x"
        #expect(Fixture.issues(cart) == [RequestIssue(code: "label_too_long", path: "lineItems[0].label", rule: 8)])
    }

    @Test func metadataAtAndPastLimits() {
        var cart = Fixture.cart()
        cart.metadata = Dictionary(uniqueKeysWithValues: (0..<20).map { ("k\($0)", String(repeating: "v", count: 500)) })
        cart.metadata?[String(repeating: "k", count: 40)] = nil
        #expect(Fixture.issues(cart) == [])
        cart.metadata?["k20"] = "v"
        #expect(Fixture.issues(cart).contains(RequestIssue(code: "metadata_too_many_entries", path: "metadata", rule: 0)))
        cart.metadata = [String(repeating: "k", count: 40): "v"]
        #expect(Fixture.issues(cart) == [])
        cart.metadata = [String(repeating: "k", count: 41): "v"]
        #expect(Fixture.issues(cart) == [RequestIssue(code: "metadata_key_invalid", path: "metadata." + String(repeating: "k", count: 41),
            rule: 0)])
        cart.metadata = ["k": String(repeating: "v", count: 501)]
        #expect(Fixture.issues(cart) == [RequestIssue(code: "metadata_value_too_long", path: "metadata.k", rule: 0)])
    }

    @Test func expiryBounds() {
        var cart = Fixture.cart()
        for ok in [Int64(300), 86_400] {
            cart.expiresInSeconds = ok
            #expect(Fixture.issues(cart) == [])
        }
        for bad in [Int64(299), 86_401] {
            cart.expiresInSeconds = bad
            #expect(Fixture.issues(cart) == [RequestIssue(code: "expires_in_out_of_range", path: "expiresInSeconds", rule: 0)])
        }
    }

    @Test func applicationDataAtLimit() {
        // 1024 decoded bytes is allowed; 1026 is not (rule 20 row covers the latter).
        let data = String(repeating: "QUFB", count: 341) + "QQ=="  // 1023 + 1 bytes
        #expect(Fixture.issues(Fixture.cart(), applicationData: data) == [])
        #expect(StrictBase64.decode(data)?.count == 1024)
    }

    @Test func multiTokenContextsAtAndPastLimit() {
        var cart = Fixture.cart()
        let limits = CheckoutLimits(multiTokenContextsMax: 2)
        cart.multiTokenContexts = Fixture.tokenContexts
        #expect(Fixture.issues(cart, limits: limits) == [])
        var third = Fixture.tokenContexts[1]
        third.externalIdentifier = "c"
        third.amount = "0.01"
        cart.multiTokenContexts?.append(third)
        #expect(Fixture.issues(cart, limits: limits) == [RequestIssue(code: "multi_token_contexts_too_many", path: "multiTokenContexts",
            rule: 0)])
    }

    @Test func base64Strictness() {
        #expect(StrictBase64.decode("c2Vzc2lvbjoxMjM0") == Array("session:1234".utf8))
        #expect(StrictBase64.decode("YQ==") == [0x61])
        for bad in ["YR==", "YQ=", "Y===", "YQ==YQ==", "c2V zc2lv", "c2V-c2lv"] {
            #expect(StrictBase64.decode(bad) == nil, "\(bad)")
        }
    }
}
