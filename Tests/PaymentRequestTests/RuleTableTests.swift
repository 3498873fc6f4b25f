import Foundation
import Money
import Testing
@testable import PaymentRequest

/// One negative vector per checklist rule (reference §8), named after the rule it breaks.
struct RuleRow: CustomTestStringConvertible, Sendable {
    let name: String
    let rule: Int
    let code: String
    let path: String
    /// The version a version issue must name (reference §1.3), nil for every other rule.
    var requiredAPIVersion: Int? = nil
    var coupon: Coupon? = nil
    var limits: CheckoutLimits = .standard
    var merchant: MerchantProfile = Fixture.merchant
    var applicationData: String? = Fixture.applicationData
    let mutate: @Sendable (inout Cart) -> Void

    var testDescription: String { "rule \(rule) \(name) → \(code)" }
}

extension ApplePayLineItem {
    static func item(_ label: String, _ amount: String?) -> ApplePayLineItem { ApplePayLineItem(label: label, amount: amount) }
}

let ruleRows: [RuleRow] = [
    RuleRow(name: "rule01_version_above_15", rule: 1, code: "api_version_unsupported", path: "apiVersion") { $0.apiVersion = 16 },
    RuleRow(name: "rule01_version_zero", rule: 1, code: "api_version_unsupported", path: "apiVersion") { $0.apiVersion = 0 },
    RuleRow(name: "rule01_payment_timing_below_12", rule: 1, code: "feature_requires_api_version",
            path: "lineItems[0].paymentTiming", requiredAPIVersion: 12) {
        $0.apiVersion = 11; $0.supportsCouponCode = nil; $0.couponCode = nil
        $0.lineItems[0].paymentTiming = .immediate
    },
    RuleRow(name: "rule02_country_unknown", rule: 2, code: "country_unknown", path: "countryCode") { $0.countryCode = "XX" },
    RuleRow(name: "rule02_country_lowercase", rule: 2, code: "country_unknown", path: "countryCode") { $0.countryCode = "us" },
    RuleRow(name: "rule03_currency_metal", rule: 3, code: "currency_not_payable", path: "currencyCode") { $0.currencyCode = "XAU" },
    RuleRow(name: "rule03_currency_unknown", rule: 3, code: "currency_unknown", path: "currencyCode") { $0.currencyCode = "ABC" },
    RuleRow(name: "rule03_currency_not_enabled", rule: 3, code: "currency_not_enabled", path: "currencyCode") { $0.currencyCode = "GBP" },
    RuleRow(name: "rule04_no_3ds", rule: 4, code: "supports3ds_missing", path: "merchantCapabilities") {
        $0.merchantCapabilities = [.supportsCredit]
    },
    RuleRow(name: "rule04_empty", rule: 4, code: "merchant_capabilities_empty", path: "merchantCapabilities") {
        $0.merchantCapabilities = []
    },
    RuleRow(name: "rule04_unknown", rule: 4, code: "merchant_capability_unknown", path: "merchantCapabilities[1]") {
        $0.merchantCapabilities = [.supports3DS, ApplePayMerchantCapability(rawValue: "supports3ds")]
    },
    RuleRow(name: "rule04_duplicate", rule: 4, code: "merchant_capability_duplicate", path: "merchantCapabilities[1]") {
        $0.merchantCapabilities = [.supports3DS, .supports3DS]
    },
    RuleRow(name: "rule05_network_too_new", rule: 5, code: "unsupported_network_for_version", path: "supportedNetworks[1]",
            requiredAPIVersion: 13) {
        $0.apiVersion = 12; $0.supportedNetworks = [.visa, ApplePayNetwork(rawValue: "dankort")]
    },
    RuleRow(name: "rule05_network_wrong_case", rule: 5, code: "network_unknown", path: "supportedNetworks[0]") {
        $0.supportedNetworks = [ApplePayNetwork(rawValue: "Visa")]
    },
    RuleRow(name: "rule05_empty", rule: 5, code: "supported_networks_empty", path: "supportedNetworks") { $0.supportedNetworks = [] },
    RuleRow(name: "rule05_duplicate", rule: 5, code: "network_duplicate", path: "supportedNetworks[1]") {
        $0.supportedNetworks = [.visa, .visa]
    },
    RuleRow(name: "rule06_total_label_empty", rule: 6, code: "total_label_empty", path: "total.label",
            merchant: { var m = Fixture.merchant; m.displayName = "  "; return m }()) { _ in },
    RuleRow(name: "rule06_total_label_too_long", rule: 6, code: "label_too_long", path: "total.label",
            limits: CheckoutLimits(labelLengthMax: 12)) { _ in },
    RuleRow(name: "rule07_total_negative", rule: 7, code: "total_negative", path: "total.amount") {
        $0.lineItems.append(.item("Credit", "-20.00"))
    },
    RuleRow(name: "rule07_total_above_safari_cap", rule: 7, code: "total_too_large", path: "total.amount") {
        // Each amount is under the ceiling; their sum (with shipping) is above 100 000 000.00.
        $0.lineItems = [.item("Yacht", "60000000.00"), .item("Harbour", "40000000.00")]
    },
    RuleRow(name: "rule07_total_above_safari_cap_jpy", rule: 7, code: "total_too_large", path: "total.amount") {
        $0.currencyCode = "JPY"; $0.shippingMethods = nil
        $0.lineItems = [.item("Yacht", "99999999"), .item("Fuel", "2")]
    },
    RuleRow(name: "rule07_zero_total_below_v4", rule: 7, code: "total_zero_requires_api_version", path: "total.amount",
            requiredAPIVersion: 4) {
        $0.apiVersion = 3; $0.supportsCouponCode = nil; $0.couponCode = nil; $0.shippingMethods = nil
        $0.lineItems = [.item("Free sample", "0.00")]
    },
    RuleRow(name: "rule08_type_unknown", rule: 8, code: "line_item_type_invalid", path: "lineItems[0].type") {
        $0.lineItems[0].type = ApplePayLineItemType(rawValue: "estimated")
    },
    RuleRow(name: "rule08_timing_unknown", rule: 8, code: "payment_timing_invalid", path: "lineItems[0].paymentTiming") {
        $0.lineItems[0].paymentTiming = ApplePayPaymentTiming(rawValue: "later")
    },
    RuleRow(name: "rule08_amount_missing", rule: 8, code: "amount_missing", path: "lineItems[0].amount") {
        $0.lineItems[0].amount = nil
    },
    RuleRow(name: "rule08_wrong_decimals", rule: 8, code: "amount_wrong_decimals", path: "lineItems[0].amount") {
        $0.lineItems[0].amount = "9.9"
    },
    RuleRow(name: "rule08_exponent", rule: 8, code: "amount_malformed", path: "lineItems[0].amount") {
        $0.lineItems[0].amount = "1e3"
    },
    RuleRow(name: "rule08_label_empty", rule: 8, code: "line_item_label_empty", path: "lineItems[0].label") {
        $0.lineItems[0].label = ""
    },
    RuleRow(name: "rule09_negative_zero", rule: 9, code: "amount_negative_zero", path: "lineItems[1].amount") {
        $0.lineItems.append(.item("Nothing off", "-0.00"))
    },
    RuleRow(name: "rule11_shipping_type", rule: 11, code: "shipping_type_invalid", path: "shippingType") {
        $0.shippingType = ApplePayShippingType(rawValue: "drone")
    },
    RuleRow(name: "rule12_shipping_negative", rule: 12, code: "amount_negative", path: "shippingMethods[0].amount") {
        $0.shippingMethods?[0].amount = "-1.00"
    },
    RuleRow(name: "rule12_shipping_detail_empty", rule: 12, code: "shipping_method_detail_empty", path: "shippingMethods[1].detail") {
        $0.shippingMethods?[1].detail = ""
    },
    RuleRow(name: "rule12_shipping_identifier_empty", rule: 12, code: "shipping_method_identifier_empty",
            path: "shippingMethods[0].identifier") { $0.shippingMethods?[0].identifier = " " },
    RuleRow(name: "rule12_shipping_label_empty", rule: 12, code: "shipping_method_label_empty",
            path: "shippingMethods[0].label") { $0.shippingMethods?[0].label = "" },
    RuleRow(name: "rule13_identifier_duplicate", rule: 13, code: "shipping_method_identifier_duplicate",
            path: "shippingMethods[1].identifier") { $0.shippingMethods?[1].identifier = "standard" },
    RuleRow(name: "rule15_impossible_date", rule: 15, code: "date_components_invalid",
            path: "shippingMethods[0].dateComponentsRange") {
        $0.shippingMethods?[0].dateComponentsRange = ApplePayDateComponentsRange(
            startDateComponents: ApplePayDateComponents(years: 2026, months: 2, days: 30),
            endDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 2))
    },
    RuleRow(name: "rule15_range_inverted", rule: 15, code: "date_components_range_inverted",
            path: "shippingMethods[0].dateComponentsRange") {
        $0.shippingMethods?[0].dateComponentsRange = ApplePayDateComponentsRange(
            startDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 5),
            endDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 2))
    },
    RuleRow(name: "rule15_below_v12", rule: 15, code: "feature_requires_api_version",
            path: "shippingMethods[0].dateComponentsRange", requiredAPIVersion: 12) {
        $0.apiVersion = 11; $0.supportsCouponCode = nil; $0.couponCode = nil
        $0.shippingMethods?[0].dateComponentsRange = ApplePayDateComponentsRange(
            startDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 1),
            endDateComponents: ApplePayDateComponents(years: 2026, months: 3, days: 2))
    },
    RuleRow(name: "rule16_contact_field_unknown", rule: 16, code: "contact_field_invalid",
            path: "requiredShippingContactFields[1]") {
        $0.requiredShippingContactFields = [.postalAddress, ApplePayContactField(rawValue: "address")]
    },
    RuleRow(name: "rule16_phonetic_below_v3", rule: 16, code: "feature_requires_api_version",
            path: "requiredShippingContactFields[0]", requiredAPIVersion: 3) {
        $0.apiVersion = 2; $0.supportsCouponCode = nil; $0.couponCode = nil
        $0.requiredShippingContactFields = [.phoneticName]
    },
    RuleRow(name: "rule17_billing_prefill_without_postal", rule: 17, code: "billing_contact_requires_postal_address",
            path: "requiredBillingContactFields") {
        $0.billingContact = ApplePayPaymentContact(givenName: "Ada", countryCode: "US")
    },
    RuleRow(name: "rule18_store_pickup_mismatch", rule: 18, code: "store_pickup_requirements",
            path: "shippingContactEditingMode") { $0.shippingContactEditingMode = .storePickup },
    RuleRow(name: "rule18_mode_unknown", rule: 18, code: "shipping_contact_editing_mode_invalid",
            path: "shippingContactEditingMode") { $0.shippingContactEditingMode = ApplePayShippingContactEditingMode(rawValue: "locked") },
    RuleRow(name: "rule19_country_unknown", rule: 19, code: "supported_country_unknown", path: "supportedCountries[1]") {
        $0.supportedCountries = ["US", "XK"]
    },
    RuleRow(name: "rule19_country_duplicate", rule: 19, code: "supported_country_duplicate", path: "supportedCountries[1]") {
        $0.supportedCountries = ["US", "US"]
    },
    RuleRow(name: "rule20_unpadded_base64", rule: 20, code: "application_data_invalid", path: "applicationData",
            applicationData: "c2Vzc2lvbg") { _ in },
    RuleRow(name: "rule20_url_safe_base64", rule: 20, code: "application_data_invalid", path: "applicationData",
            applicationData: "c2V_c2lv") { _ in },
    RuleRow(name: "rule20_too_large", rule: 20, code: "application_data_too_large", path: "applicationData",
            applicationData: String(repeating: "QUFB", count: 342)) { _ in },
    RuleRow(name: "rule21_code_without_support", rule: 21, code: "coupon_code_without_support", path: "couponCode") {
        $0.supportsCouponCode = false; $0.couponCode = "SAVE10"
    },
    RuleRow(name: "rule21_unknown_initial_code", rule: 21, code: "coupon_code_invalid", path: "couponCode") {
        $0.couponCode = "NOPE"
    },
    RuleRow(name: "rule21_expired_initial_code", rule: 21, code: "coupon_code_expired", path: "couponCode",
            coupon: Coupon(code: "OLD", kind: .percent(basisPoints: 1000), expiresAtUnixSeconds: 1_767_225_600)) {
        $0.couponCode = "OLD"
    },
    RuleRow(name: "rule21_coupon_below_v12", rule: 21, code: "feature_requires_api_version", path: "supportsCouponCode",
            requiredAPIVersion: 12) {
        $0.apiVersion = 11
    },
    RuleRow(name: "rule22_two_modes", rule: 22, code: "advanced_mode_multiple", path: "automaticReloadPaymentRequest") {
        $0.recurringPaymentRequest = Fixture.recurring; $0.automaticReloadPaymentRequest = Fixture.reload
    },
    RuleRow(name: "rule23_mode_below_v14", rule: 23, code: "feature_requires_api_version", path: "recurringPaymentRequest",
            requiredAPIVersion: 14) {
        $0.apiVersion = 13; $0.recurringPaymentRequest = Fixture.recurring
    },
    RuleRow(name: "rule24_regular_not_recurring", rule: 24, code: "billing_timing_mismatch",
            path: "recurringPaymentRequest.regularBilling.paymentTiming") {
        var mode = Fixture.recurring; mode.regularBilling.paymentTiming = .immediate
        $0.recurringPaymentRequest = mode
    },
    RuleRow(name: "rule24_management_url_http", rule: 24, code: "url_invalid", path: "recurringPaymentRequest.managementURL") {
        var mode = Fixture.recurring; mode.managementURL = "http://shop.example.com/account"
        $0.recurringPaymentRequest = mode
    },
    RuleRow(name: "rule24_description_empty", rule: 24, code: "payment_description_empty",
            path: "recurringPaymentRequest.paymentDescription") {
        var mode = Fixture.recurring; mode.paymentDescription = ""
        $0.recurringPaymentRequest = mode
    },
    RuleRow(name: "rule24_interval_zero", rule: 24, code: "recurring_interval_count_invalid",
            path: "recurringPaymentRequest.regularBilling.recurringPaymentIntervalCount") {
        var mode = Fixture.recurring; mode.regularBilling.recurringPaymentIntervalCount = 0
        $0.recurringPaymentRequest = mode
    },
    RuleRow(name: "rule24_end_before_start", rule: 24, code: "recurring_dates_inverted",
            path: "recurringPaymentRequest.regularBilling.recurringPaymentEndDate") {
        var mode = Fixture.recurring; mode.regularBilling.recurringPaymentEndDate = Timestamp(unixSeconds: 0)
        $0.recurringPaymentRequest = mode
    },
    RuleRow(name: "rule25_threshold_missing", rule: 25, code: "threshold_amount_missing",
            path: "automaticReloadPaymentRequest.automaticReloadBilling.automaticReloadPaymentThresholdAmount") {
        var mode = Fixture.reload; mode.automaticReloadBilling.automaticReloadPaymentThresholdAmount = nil
        $0.automaticReloadPaymentRequest = mode
    },
    RuleRow(name: "rule25_reload_zero", rule: 25, code: "amount_not_positive",
            path: "automaticReloadPaymentRequest.automaticReloadBilling.amount") {
        var mode = Fixture.reload; mode.automaticReloadBilling.amount = "0.00"
        $0.automaticReloadPaymentRequest = mode
    },
    RuleRow(name: "rule26_deferred_in_past", rule: 26, code: "deferred_date_not_future",
            path: "deferredPaymentRequest.deferredBilling.deferredPaymentDate") {
        var mode = Fixture.deferred; mode.deferredBilling.deferredPaymentDate = Timestamp(unixSeconds: 1_700_000_000)
        $0.deferredPaymentRequest = mode
    },
    RuleRow(name: "rule26_zone_without_date", rule: 26, code: "free_cancellation_incomplete",
            path: "deferredPaymentRequest.freeCancellationDateTimeZone") {
        var mode = Fixture.deferred; mode.freeCancellationDate = nil
        $0.deferredPaymentRequest = mode
    },
    RuleRow(name: "rule26_zone_invalid", rule: 26, code: "time_zone_invalid",
            path: "deferredPaymentRequest.freeCancellationDateTimeZone") {
        var mode = Fixture.deferred; mode.freeCancellationDateTimeZone = "Mars/Olympus"
        $0.deferredPaymentRequest = mode
    },
    RuleRow(name: "rule27_contexts_exceed_total", rule: 27, code: "token_contexts_exceed_total", path: "multiTokenContexts") {
        var contexts = Fixture.tokenContexts; contexts[0].amount = "50.00"
        $0.multiTokenContexts = contexts
    },
    RuleRow(name: "rule27_external_id_duplicate", rule: 27, code: "external_identifier_duplicate",
            path: "multiTokenContexts[1].externalIdentifier") {
        var contexts = Fixture.tokenContexts; contexts[1].externalIdentifier = "a"
        $0.multiTokenContexts = contexts
    },
    RuleRow(name: "rule27_context_zero", rule: 27, code: "amount_not_positive", path: "multiTokenContexts[0].amount") {
        var contexts = Fixture.tokenContexts; contexts[0].amount = "0.00"
        $0.multiTokenContexts = contexts
    },
    RuleRow(name: "rule28_pay_later_unknown", rule: 28, code: "apple_pay_later_availability_invalid",
            path: "applePayLaterAvailability") { $0.applePayLaterAvailability = ApplePayLaterAvailability(rawValue: "never") },

    // The amount ceiling (Tender's own, rule 0): Safari's total cap, per currency exponent, on every amount.
    RuleRow(name: "ceiling_item_int64_max_usd", rule: 0, code: "amount_too_large", path: "lineItems[0].amount") {
        $0.lineItems[0].amount = "92233720368547758.07"
    },
    RuleRow(name: "ceiling_item_beyond_int64_usd", rule: 0, code: "amount_too_large", path: "lineItems[0].amount") {
        $0.lineItems[0].amount = "92233720368547758.08"
    },
    RuleRow(name: "ceiling_item_just_past_usd", rule: 0, code: "amount_too_large", path: "lineItems[0].amount") {
        $0.lineItems[0].amount = "100000000.01"
    },
    RuleRow(name: "ceiling_discount_just_past_usd", rule: 0, code: "amount_too_large", path: "lineItems[1].amount") {
        $0.lineItems.append(.item("Credit", "-100000000.01"))
    },
    RuleRow(name: "ceiling_item_just_past_jpy", rule: 0, code: "amount_too_large", path: "lineItems[0].amount") {
        $0.currencyCode = "JPY"; $0.shippingMethods = nil; $0.lineItems[0].amount = "100000001"
    },
    RuleRow(name: "ceiling_item_just_past_kwd", rule: 0, code: "amount_too_large", path: "lineItems[0].amount") {
        $0.currencyCode = "KWD"; $0.shippingMethods = nil; $0.lineItems[0].amount = "100000000.001"
    },
    RuleRow(name: "ceiling_shipping_method", rule: 0, code: "amount_too_large", path: "shippingMethods[1].amount") {
        $0.shippingMethods?[1].amount = "100000000.01"
    },
    RuleRow(name: "ceiling_recurring_billing", rule: 0, code: "amount_too_large",
            path: "recurringPaymentRequest.regularBilling.amount") {
        var mode = Fixture.recurring; mode.regularBilling.amount = "100000000.01"
        $0.recurringPaymentRequest = mode
    },
    RuleRow(name: "ceiling_reload_threshold", rule: 0, code: "amount_too_large",
            path: "automaticReloadPaymentRequest.automaticReloadBilling.automaticReloadPaymentThresholdAmount") {
        var mode = Fixture.reload; mode.automaticReloadBilling.automaticReloadPaymentThresholdAmount = "100000000.01"
        $0.automaticReloadPaymentRequest = mode
    },
    RuleRow(name: "ceiling_deferred_billing", rule: 0, code: "amount_too_large",
            path: "deferredPaymentRequest.deferredBilling.amount") {
        var mode = Fixture.deferred; mode.deferredBilling.amount = "92233720368547758.07"
        $0.deferredPaymentRequest = mode
    },
    RuleRow(name: "ceiling_token_context", rule: 0, code: "amount_too_large", path: "multiTokenContexts[1].amount") {
        var contexts = Fixture.tokenContexts; contexts[1].amount = "100000000.01"
        $0.multiTokenContexts = contexts
    },
]

@Suite struct RuleTableTests {
    @Test func baseCartIsValid() throws {
        #expect(Fixture.issues(Fixture.cart()) == [])
    }

    @Test(arguments: ruleRows)
    func negativeVector(row: RuleRow) {
        var cart = Fixture.cart()
        row.mutate(&cart)
        let issues = Fixture.issues(cart, coupon: row.coupon, limits: row.limits, merchant: row.merchant,
                                    applicationData: row.applicationData)
        #expect(issues.contains(RequestIssue(code: row.code, path: row.path, rule: row.rule,
                                             requiredAPIVersion: row.requiredAPIVersion)), "got \(issues)")
    }

    /// The ceiling refuses before any rule runs: only the amounts above it are reported, so a sum or a
    /// comparison of them never happens.
    @Test func ceilingIssuesComeAlone() {
        var cart = Fixture.cart()
        cart.lineItems = [.item("A", "92233720368547758.07"), .item("B", "92233720368547758.07"), .item("C", "9.9")]
        #expect(Fixture.issues(cart) == [RequestIssue(code: "amount_too_large", path: "lineItems[0].amount", rule: 0),
                                         RequestIssue(code: "amount_too_large", path: "lineItems[1].amount", rule: 0)])
    }

    /// At and just past the cap, per exponent: 100 000 000 major units is the most Safari shows.
    @Test(arguments: [("USD", "100000000.00", "100000000.01"), ("JPY", "100000000", "100000001"),
                      ("KWD", "100000000.000", "100000000.001"), ("EUR", "100000000.00", "100000000.01")])
    func totalCapBoundary(currency: String, atCap: String, pastCap: String) throws {
        var cart = Fixture.cart(currency: currency)
        cart.shippingMethods = nil
        cart.lineItems = [.item("Everything", atCap)]
        let priced = try Fixture.build(cart)
        #expect(priced.total.amount == atCap)
        cart.lineItems = [.item("Everything", pastCap)]
        #expect(Fixture.issues(cart) == [RequestIssue(code: "amount_too_large", path: "lineItems[0].amount", rule: 0)])
        // Two amounts each at most the cap whose sum is just past it: the total rule refuses it.
        let unit = Fixture.currency(currency)
        cart.lineItems = [.item("Most", atCap), .item("One more", unit.formatAmount(1))]
        #expect(Fixture.issues(cart).contains(RequestIssue(code: "total_too_large", path: "total.amount", rule: 7)))
    }

    @Test func everyRequestRuleHasARow() {
        // Rules 1–28 by the builder table; 10 and 14 below (Tender never builds them wrong); 29/30 in the JSON suite.
        let covered = Set(ruleRows.map(\.rule)).union([10, 14])
        #expect(covered.isSuperset(of: Set(1...28)))
    }

    /// Rule 10 and 14 against a tampered request: the builder cannot produce these, the validator still catches them.
    @Test func rule10_total_mismatch_and_rule14_selection() throws {
        let priced = try Fixture.build(Fixture.cart())
        let context = ValidationContext(apiVersion: 14, enabledCurrencies: nil, now: Fixture.now,
                                        shippingLineIndex: 1)
        #expect(RequestValidator.issues(in: priced.paymentRequest, context: context) == [])

        var tampered = priced.paymentRequest
        tampered.total.amount = "15.00"
        #expect(RequestValidator.issues(in: tampered, context: context)
            .contains(RequestIssue(code: "total_mismatch", path: "total.amount", rule: 10)))

        tampered = priced.paymentRequest
        tampered.shippingMethods?[0].selected = true
        tampered.shippingMethods?[1].selected = true
        let issues = RequestValidator.issues(in: tampered, context: context)
        #expect(issues.contains(RequestIssue(code: "shipping_method_selected_multiple", path: "shippingMethods", rule: 14)))

        tampered = priced.paymentRequest
        tampered.shippingMethods?[1].selected = true
        #expect(RequestValidator.issues(in: tampered, context: context)
            .contains(RequestIssue(code: "shipping_method_selected_not_first", path: "shippingMethods[1].selected", rule: 14)))

        tampered = priced.paymentRequest
        tampered.lineItems?[1].amount = "14.99"
        tampered.total.amount = "24.98"
        #expect(RequestValidator.issues(in: tampered, context: context)
            .contains(RequestIssue(code: "shipping_line_mismatch", path: "lineItems[1].amount", rule: 14)))
    }
}
