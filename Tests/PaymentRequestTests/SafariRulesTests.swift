import Foundation
import Money
import Testing
@testable import PaymentRequest

/// WebKit's own checks (SafariRules) on the objects Tender emits.
@Suite struct SafariRulesTests {
    /// PaymentRequestUtilities.cpp `isValidDecimalMonetaryValue`: `^-?[0-9]+(\.[0-9]+)?$`.
    @Test(arguments: [("0", true), ("10", true), ("-1.5", true), ("1.234", true), ("007", true), ("-0", true),
                      ("", false), ("-", false), ("+1", false), ("1.", false), (".5", false), ("1e3", false),
                      (" 1", false), ("1 ", false), ("1,00", false), ("1.2.3", false), ("--1", false),
                      ("\u{0661}", false), ("0x10", false)])
    func amountGrammar(text: String, valid: Bool) {
        #expect(SafariRules.isDecimalMonetaryValue(text) == valid)
    }

    /// WebKit's `amount > 100000000`, read on the digits: at the cap is fine, a hair above is not.
    @Test(arguments: [("100000000", false), ("100000000.00", false), ("100000000.000", false), ("0100000000", false),
                      ("99999999.999", false), ("100000000.001", true), ("100000000.01", true), ("100000001", true),
                      ("1000000000", true), ("92233720368547758.07", true), ("-100000000.01", true)])
    func totalCap(text: String, tooLarge: Bool) {
        #expect(SafariRules.exceeds(text, limitMajor: SafariRules.totalMaxMajorUnits) == tooLarge)
    }

    @Test func updateNewTotalAboveTheCapIsRefused() {
        let update = ApplePayShippingMethodUpdate(newTotal: ApplePayLineItem(label: "Shop", amount: "100000000.01"))
        #expect(SafariRules.issues(in: update, apiVersion: 14)
            == [RequestIssue(code: "total_too_large", path: "newTotal.amount", rule: 7)])
        let atCap = ApplePayShippingMethodUpdate(newTotal: ApplePayLineItem(label: "Shop", amount: "100000000.00"))
        #expect(SafariRules.issues(in: atCap, apiVersion: 14) == [])
    }

    /// convertAndValidate(ApplePayLineItem): a pending item's amount is dropped; any other must be valid.
    @Test func pendingItemsMayOmitTheirAmount() {
        let update = ApplePayCouponCodeUpdate(
            newTotal: ApplePayLineItem(label: "Shop", amount: "1.00"),
            newLineItems: [ApplePayLineItem(label: "Estimate", amount: nil, type: .pending),
                           ApplePayLineItem(label: "Widget", amount: nil),
                           ApplePayLineItem(label: "Gadget", amount: "1e2")])
        #expect(SafariRules.issues(in: update, apiVersion: 14) == [
            RequestIssue(code: "amount_not_decimal", path: "newLineItems[1].amount", rule: 8),
            RequestIssue(code: "amount_not_decimal", path: "newLineItems[2].amount", rule: 8),
        ])
    }

    @Test func updateShippingMethodsAndModes() {
        var reload = Fixture.reload
        reload.automaticReloadBilling.type = .pending
        reload.automaticReloadBilling.amount = nil
        reload.automaticReloadBilling.automaticReloadPaymentThresholdAmount = nil  // checked even when pending
        var recurring = Fixture.recurring
        recurring.regularBilling.paymentTiming = .immediate
        recurring.managementURL = "not a url"
        var deferred = Fixture.deferred
        deferred.freeCancellationDate = nil
        deferred.paymentDescription = ""
        let update = ApplePayShippingContactUpdate(
            newTotal: ApplePayLineItem(label: "Shop", amount: "-1.00"),
            newShippingMethods: [ApplePayShippingMethod(label: "A", detail: "d", amount: "-0.50", identifier: "a"),
                                 ApplePayShippingMethod(label: "B", detail: "d", amount: "5", identifier: "b")],
            newMultiTokenContexts: [ApplePayPaymentTokenContext(merchantIdentifier: "m", externalIdentifier: "e",
                                                                merchantName: "n", merchantDomain: nil, amount: "1,00")],
            newRecurringPaymentRequest: recurring, newAutomaticReloadPaymentRequest: reload,
            newDeferredPaymentRequest: deferred)
        let issues = SafariRules.issues(in: update, apiVersion: 14)
        #expect(issues == [
            RequestIssue(code: "total_negative", path: "newTotal.amount", rule: 7),
            RequestIssue(code: "amount_negative", path: "newShippingMethods[0].amount", rule: 12),
            RequestIssue(code: "billing_timing_mismatch", path: "newRecurringPaymentRequest.regularBilling.paymentTiming", rule: 24),
            RequestIssue(code: "url_invalid", path: "newRecurringPaymentRequest.managementURL", rule: 24),
            RequestIssue(code: "amount_not_decimal",
                         path: "newAutomaticReloadPaymentRequest.automaticReloadBilling.automaticReloadPaymentThresholdAmount",
                         rule: 25),
            RequestIssue(code: "free_cancellation_incomplete", path: "newDeferredPaymentRequest.freeCancellationDateTimeZone",
                         rule: 26),
            RequestIssue(code: "payment_description_empty", path: "newDeferredPaymentRequest.paymentDescription", rule: 26),
            RequestIssue(code: "amount_not_decimal", path: "newMultiTokenContexts[0].amount", rule: 27),
        ])
    }

    /// ApplePayRequestBase: a network the version does not know is "not a valid payment network"; v1–3
    /// refuse a zero total.
    @Test func requestVersionChecks() throws {
        var request = try Fixture.build(Fixture.cart()).paymentRequest
        #expect(SafariRules.issues(in: request, apiVersion: 14) == [])
        request.supportedNetworks.append(ApplePayNetwork(rawValue: "bankAxept"))
        #expect(SafariRules.issues(in: request, apiVersion: 14)
            == [RequestIssue(code: "unsupported_network_for_version", path: "supportedNetworks[4]", rule: 5)])
        request.supportedNetworks = [.visa]
        request.total.amount = "0.00"
        #expect(SafariRules.issues(in: request, apiVersion: 3)
            == [RequestIssue(code: "total_zero_requires_api_version", path: "total.amount", rule: 7, requiredAPIVersion: 4)])
        #expect(SafariRules.issues(in: request, apiVersion: 16)
            == [RequestIssue(code: "api_version_unsupported", path: "apiVersion", rule: 1)])
    }

    /// WebIDL enumerations ("Type error."), and v2's "\"phoneticName\" is not a valid contact field."
    @Test func enumerationsAndContactFields() throws {
        var request = try Fixture.build(Fixture.cart()).paymentRequest
        request.supportedNetworks = [.visa]
        request.shippingType = ApplePayShippingType(rawValue: "drone")
        request.requiredBillingContactFields = [.phoneticName]
        request.lineItems?[0].type = ApplePayLineItemType(rawValue: "estimated")
        #expect(SafariRules.issues(in: request, apiVersion: 2) == [
            RequestIssue(code: "shipping_type_invalid", path: "shippingType", rule: 11),
            RequestIssue(code: "contact_field_invalid", path: "requiredBillingContactFields[0]", rule: 16),
            RequestIssue(code: "line_item_type_invalid", path: "lineItems[0].type", rule: 8),
        ])
        let update = ApplePayCouponCodeUpdate(newTotal: ApplePayLineItem(label: "Shop", amount: "1.00"),
                                              errors: [ApplePayError(code: ApplePayErrorCode(rawValue: "couponInvalid"))])
        #expect(SafariRules.issues(in: update, apiVersion: 14)
            == [RequestIssue(code: "apple_pay_error_code_invalid", path: "errors[0].code", rule: 35)])
    }
}

/// Updates whose recalculated total would pass Safari's cap are refused, at and just past it.
@Suite struct TotalCapUpdateTests {
    static let later = Timestamp(unixSeconds: 1_767_225_600 + 60)

    /// Goods 99 999 990.00 USD; standard 4.99 (first, selected at creation), express 10.00 (exactly
    /// the cap), freight 10.01 (one cent past it, and only to the US).
    func cart(currency: String = "USD", goods: String = "99999990.00",
              methods: [(String, String)] = [("standard", "4.99"), ("express", "10.00"), ("freight", "10.01")]) -> Cart {
        var cart = Fixture.cart(currency: currency)
        cart.lineItems = [.item("Everything", goods)]
        cart.shippingMethods = methods.map { CartShippingMethod(identifier: $0.0, label: $0.0, detail: "d", amount: $0.1) }
        return cart
    }

    @Test func shippingMethodAtAndPastTheCap() throws {
        let checkout = try Fixture.build(cart())
        #expect(checkout.total.amount == "99999994.99")
        let atCap = try checkout.selectingShippingMethod("express", now: Self.later)
        #expect(atCap.update.newTotal.amount == "100000000.00")
        #expect(throws: PaymentRequestError(code: "total_too_large", path: "total.amount", rule: 7)) {
            try checkout.selectingShippingMethod("freight", now: Self.later)
        }
    }

    @Test(arguments: [("JPY", "99999990", "4", "10", "11", "100000000"),
                      ("KWD", "99999990.000", "4.990", "10.000", "10.001", "100000000.000")])
    func otherExponents(currency: String, goods: String, standard: String, express: String, freight: String,
                        cap: String) throws {
        let checkout = try Fixture.build(cart(currency: currency, goods: goods,
                                              methods: [("standard", standard), ("express", express), ("freight", freight)]))
        let atCap = try checkout.selectingShippingMethod("express", now: Self.later)
        #expect(atCap.update.newTotal.amount == cap)
        #expect(throws: PaymentRequestError(code: "total_too_large", path: "total.amount", rule: 7)) {
            try checkout.selectingShippingMethod("freight", now: Self.later)
        }
    }

    /// Tax follows the address: moving to a taxed country can push the total past the cap.
    @Test func shippingContactPastTheCap() throws {
        let canada = TaxRule(country: Fixture.country("CA"), rateBasisPoints: 1, shippingTaxable: true)
        let checkout = try Fixture.build(cart(), taxRules: [canada])
        // 0.01 % of 99 999 994.99 = 9 999.99 → far past the cap.
        #expect(throws: PaymentRequestError(code: "total_too_large", path: "total.amount", rule: 7)) {
            try checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: "CA"), now: Self.later)
        }
        #expect(try checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: "US"), now: Self.later)
            .update.newTotal.amount == "99999994.99")
    }

    /// Removing a coupon given at creation raises the total: past the cap it is refused, not emitted.
    @Test func couponRemovalPastTheCap() throws {
        var c = cart(methods: [("pickup", "0.01")])
        c.lineItems = [.item("Yacht", "60000000.00"), .item("Harbour", "40000000.00")]
        c.couponCode = "TENOFF"
        let coupon = Coupon(code: "TENOFF", kind: .fixed(amountMinor: 1000), currency: Fixture.currency("USD"))
        let checkout = try Fixture.build(c, coupon: coupon)
        #expect(checkout.total.amount == "99999990.01")
        #expect(throws: PaymentRequestError(code: "total_too_large", path: "total.amount", rule: 7)) {
            try checkout.applyingCouponCode("", coupon: nil, now: Self.later)
        }
    }
}

/// `apiVersion` omitted: the lowest version that shows every feature the cart uses (reference §1.3).
@Suite struct APIVersionTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let expected: Int
        let mutate: @Sendable (inout Cart) -> Void
        var testDescription: String { "\(name) → v\(expected)" }
    }

    /// A cart with no versioned feature; each row adds one. Expected versions are Apple's table, not the code's.
    static func plainCart() -> Cart {
        var cart = Fixture.cart()
        cart.apiVersion = nil
        cart.supportsCouponCode = nil
        cart.couponCode = nil
        return cart
    }

    static let rows: [Row] = [
        Row(name: "plain", expected: 3) { _ in },
        Row(name: "phonetic_name", expected: 3) { $0.requiredShippingContactFields = [.phoneticName] },
        Row(name: "supported_countries", expected: 3) { $0.supportedCountries = ["US"] },
        Row(name: "zero_goods_subtotal", expected: 4) { $0.lineItems = [.item("Sample", "0.00")]; $0.shippingMethods = nil },
        Row(name: "cart_network_elo", expected: 5) { $0.supportedNetworks = [.visa, ApplePayNetwork(rawValue: "elo")] },
        Row(name: "coupon_code", expected: 12) { $0.supportsCouponCode = true; $0.couponCode = "" },
        Row(name: "payment_timing", expected: 12) { $0.lineItems[0].paymentTiming = .immediate },
        Row(name: "date_components_range", expected: 12) {
            $0.shippingMethods?[0].dateComponentsRange = ApplePayDateComponentsRange(
                startDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 1),
                endDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 2))
        },
        Row(name: "cart_network_dankort", expected: 13) { $0.supportedNetworks = [.visa, ApplePayNetwork(rawValue: "dankort")] },
        Row(name: "recurring", expected: 14) { $0.recurringPaymentRequest = Fixture.recurring },
        Row(name: "multi_token", expected: 14) { $0.multiTokenContexts = Fixture.tokenContexts },
        Row(name: "coupon_and_recurring", expected: 14) {
            $0.supportsCouponCode = true; $0.recurringPaymentRequest = Fixture.recurring
        },
    ]

    @Test(arguments: rows)
    func lowestVersionIsPickedAndIsTheLowest(row: Row) throws {
        var cart = Self.plainCart()
        row.mutate(&cart)
        let priced = try Fixture.build(cart)
        #expect(priced.apiVersion == row.expected)
        // One version lower would be refused (when there is a lower one Tender would emit).
        if row.expected > 3 {
            cart.apiVersion = row.expected - 1
            #expect(Fixture.issues(cart).contains { $0.requiredAPIVersion == row.expected })
        }
    }

    /// The merchant's own networks do not raise the version: they are filtered to it (bancontact needs 14).
    @Test func merchantNetworksDoNotRaiseTheVersion() throws {
        let priced = try Fixture.build(Self.plainCart())
        #expect(priced.apiVersion == 3)
        #expect(priced.paymentRequest.supportedNetworks == [.visa, .masterCard, .amex])
    }

    /// An explicit version that is too low stays an error, and it names the version needed.
    @Test func explicitVersionTooLowNamesTheVersionNeeded() {
        var cart = Self.plainCart()
        cart.apiVersion = 11
        cart.supportsCouponCode = true
        do {
            _ = try Fixture.build(cart)
            Issue.record("a coupon cart at v11 was accepted")
        } catch {
            #expect(error.issues == [RequestIssue(code: "feature_requires_api_version", path: "supportsCouponCode", rule: 21,
                                                  requiredAPIVersion: 12)])
            #expect(error.requiredAPIVersion == 12)
        }
        cart.apiVersion = 12
        cart.recurringPaymentRequest = Fixture.recurring
        #expect(Fixture.issues(cart) == [RequestIssue(code: "feature_requires_api_version", path: "recurringPaymentRequest",
                                                      rule: 23, requiredAPIVersion: 14)])
    }
}
