import Money
import Time

/// What the request rules need besides the request itself.
public struct ValidationContext: Sendable {
    /// The version the page will pass to `new ApplePaySession`.
    public var apiVersion: Int
    /// The merchant's enabled currencies (rule 3); nil skips that check.
    public var enabledCurrencies: [Currency]?
    /// The clock (rule 26: deferred dates in the future).
    public var now: Timestamp
    /// Bounds on lengths and counts.
    public var limits: CheckoutLimits
    /// False while checking a cart before pricing: total-dependent rules (6 amount, 7, 10, 14 line, 27 sum) wait.
    public var checkTotals: Bool
    /// Index in `lineItems` of Tender's shipping line, if any (rule 14).
    public var shippingLineIndex: Int?
    /// `RequestValidator.featureRequirements` of the request being validated, found once by `issues(in:context:)`
    /// for all the rules that read it (eight of them, each recomputing it was a fifth of an update's instructions).
    var featureRequirements: [RequestValidator.FeatureRequirement]?

    /// A context.
    public init(apiVersion: Int, enabledCurrencies: [Currency]?, now: Timestamp, limits: CheckoutLimits = .standard,
                checkTotals: Bool = true, shippingLineIndex: Int? = nil) {
        self.apiVersion = apiVersion
        self.enabledCurrencies = enabledCurrencies
        self.now = now
        self.limits = limits
        self.checkTotals = checkTotals
        self.shippingLineIndex = shippingLineIndex
    }
}

/// Rules 1–30 of docs/apple-pay-rules.md as a table of small named checks, most basic first.
public enum RequestValidator {
    /// One named check and the checklist rule it enforces.
    public struct Check: Sendable {
        /// Checklist rule (§8).
        public let rule: Int
        /// Short name for tests and logs.
        public let name: String
        let run: @Sendable (ApplePayPaymentRequest, ValidationContext) -> [RequestIssue]
    }

    /// The checks, in the order they run.
    public static let checks: [Check] = [
        Check(rule: 1, name: "api_version", run: apiVersion),
        Check(rule: 2, name: "country_code", run: countryCode),
        Check(rule: 3, name: "currency_code", run: currencyCode),
        Check(rule: 4, name: "merchant_capabilities", run: merchantCapabilities),
        Check(rule: 5, name: "supported_networks", run: supportedNetworks),
        Check(rule: 6, name: "total_label_and_amount", run: totalLabelAndAmount),
        Check(rule: 7, name: "total_sign", run: totalSign),
        Check(rule: 8, name: "line_items", run: lineItems),
        Check(rule: 10, name: "total_equals_final_items", run: totalEqualsItems),
        Check(rule: 11, name: "shipping_type", run: shippingType),
        Check(rule: 12, name: "shipping_methods", run: shippingMethods),
        Check(rule: 13, name: "shipping_identifiers_unique", run: shippingIdentifiersUnique),
        Check(rule: 14, name: "shipping_selection", run: shippingSelection),
        Check(rule: 15, name: "date_components_range", run: dateComponentsRanges),
        Check(rule: 16, name: "contact_fields", run: contactFields),
        Check(rule: 17, name: "billing_contact_prefill", run: billingContactPrefill),
        Check(rule: 18, name: "store_pickup_editing_mode", run: editingMode),
        Check(rule: 19, name: "supported_countries", run: supportedCountries),
        Check(rule: 20, name: "application_data", run: applicationData),
        Check(rule: 21, name: "coupon_code", run: couponCode),
        Check(rule: 22, name: "one_advanced_mode", run: oneAdvancedMode),
        Check(rule: 23, name: "advanced_mode_version", run: advancedModeVersion),
        Check(rule: 24, name: "recurring", run: recurring),
        Check(rule: 25, name: "automatic_reload", run: automaticReload),
        Check(rule: 26, name: "deferred", run: deferred),
        Check(rule: 27, name: "multi_token_contexts", run: multiTokenContexts),
        Check(rule: 28, name: "apple_pay_later", run: applePayLater),
    ]

    /// Every issue in `request`, in check order (rule 9 is reported by the amount parser inside 8, 12, 24–27;
    /// rules 29 and 30 hold by construction: `Timestamp` encodes RFC 3339, the model has only Apple's keys).
    public static func issues(in request: ApplePayPaymentRequest, context: ValidationContext) -> [RequestIssue] {
        var context = context
        context.featureRequirements = featureRequirements(in: request)
        return checks.flatMap { $0.run(request, context) }
    }

    // MARK: - Helpers

    static func issue(_ code: String, _ path: String, _ rule: Int) -> RequestIssue {
        RequestIssue(code: code, path: path, rule: rule)
    }

    static func currency(of request: ApplePayPaymentRequest) -> Currency? { try? Currency(code: request.currencyCode) }

    /// Parses an amount; a signed zero is reported under rule 9 whatever the calling rule. Every amount
    /// is bounded by `Currency.acceptedAmountMaxMinor` (`amount_too_large`) except, with `bounded: false`,
    /// the total, whose cap rule 7 reports as `total_too_large`.
    static func amount(_ text: String?, _ request: ApplePayPaymentRequest, path: String, rule: Int,
                       allowNegative: Bool, bounded: Bool = true, into issues: inout [RequestIssue]) -> Int64? {
        guard let currency = currency(of: request) else { return nil }  // rule 3 reports it
        guard let text else {
            issues.append(issue("amount_missing", path, rule))
            return nil
        }
        do {
            return try currency.parseAmount(text, allowNegative: allowNegative,
                                            magnitudeMaxMinor: bounded ? currency.acceptedAmountMaxMinor : nil)
        } catch {
            issues.append(issue(error.code.rawValue, path, error.code == .amountNegativeZero ? 9 : rule))
            return nil
        }
    }

    static func isBlank(_ text: String) -> Bool { text.allSatisfy(\.isWhitespace) }

    static func label(_ text: String, path: String, rule: Int, emptyCode: String, context: ValidationContext,
                      into issues: inout [RequestIssue]) {
        if isBlank(text) {
            issues.append(issue(emptyCode, path, rule))
        } else if text.count > context.limits.labelLengthMax {
            issues.append(issue("label_too_long", path, rule))
        }
    }

    static func text(_ text: String?, path: String, rule: Int, required: Bool, emptyCode: String,
                     context: ValidationContext, into issues: inout [RequestIssue]) {
        guard let text else {
            if required { issues.append(issue(emptyCode, path, rule)) }
            return
        }
        if required && isBlank(text) {
            issues.append(issue(emptyCode, path, rule))
        } else if text.count > context.limits.textLengthMax {
            issues.append(issue("text_too_long", path, rule))
        }
    }

    /// An absolute `https` URL with a host, no userinfo, no whitespace or control characters.
    static func isHTTPSURL(_ text: String, limits: CheckoutLimits) -> Bool {
        guard text.count <= limits.urlLengthMax, text.lowercased().hasPrefix("https://") else { return false }
        let rest = text.dropFirst("https://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@") else { return false }
        return !text.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F || $0 == "\\" }
    }

    static func url(_ text: String?, path: String, rule: Int, required: Bool, context: ValidationContext,
                    into issues: inout [RequestIssue]) {
        guard let text else {
            if required { issues.append(issue("url_invalid", path, rule)) }
            return
        }
        if !isHTTPSURL(text, limits: context.limits) { issues.append(issue("url_invalid", path, rule)) }
    }

    /// One member of a request that exists only from some Apple Pay JS version on.
    public struct FeatureRequirement: Hashable, Sendable {
        /// Where the feature is used, e.g. `supportsCouponCode`.
        public let path: String
        /// The first version that has it.
        public let minimumVersion: Int
        /// The checklist rule that gates it.
        public let rule: Int
        /// The issue code when the version is too low.
        public let code: String
    }

    /// Every version-gated feature `request` uses (reference §1.3, WebKit's PaymentAPIVersion), the one
    /// table behind both the validator's version issues and the version Tender picks when a cart gives
    /// none. A zero total (v4, rule 7) depends on pricing and is judged on its own.
    public static func featureRequirements(in r: ApplePayPaymentRequest) -> [FeatureRequirement] {
        var out: [FeatureRequirement] = []
        func add(_ path: String, _ version: Int, _ rule: Int, _ code: String = "feature_requires_api_version") {
            out.append(FeatureRequirement(path: path, minimumVersion: version, rule: rule, code: code))
        }
        for (i, item) in (r.lineItems ?? []).enumerated() where item.paymentTiming != nil {
            add("lineItems[\(i)].paymentTiming", 12, 1)
        }
        if r.shippingContactEditingMode != nil { add("shippingContactEditingMode", 12, 1) }
        for (i, network) in r.supportedNetworks.enumerated() {
            if let minimum = network.minimumVersion { add("supportedNetworks[\(i)]", minimum, 5, "unsupported_network_for_version") }
        }
        let methods = r.shippingMethods ?? []
        if let selected = methods.indices.first(where: { methods[$0].selected == true }) {
            add("shippingMethods[\(selected)].selected", 13, 14)
        }
        for (i, method) in methods.enumerated() where method.dateComponentsRange != nil {
            add("shippingMethods[\(i)].dateComponentsRange", 12, 15)
        }
        for (name, fields) in [("requiredShippingContactFields", r.requiredShippingContactFields),
                               ("requiredBillingContactFields", r.requiredBillingContactFields)] {
            for (i, field) in (fields ?? []).enumerated() where field == .phoneticName { add("\(name)[\(i)]", 3, 16) }
        }
        if r.supportedCountries != nil { add("supportedCountries", 3, 19) }
        if r.supportsCouponCode != nil { add("supportsCouponCode", 12, 21) }
        for mode in advancedModes(r) { add(mode, 14, 23) }
        return out
    }

    /// The version issues of one rule: each feature of that rule the context's version cannot show,
    /// naming the version it needs.
    static func versionIssues(_ r: ApplePayPaymentRequest, _ c: ValidationContext, rule: Int) -> [RequestIssue] {
        (c.featureRequirements ?? featureRequirements(in: r)).filter { $0.rule == rule && $0.minimumVersion > c.apiVersion }.map {
            RequestIssue(code: $0.code, path: $0.path, rule: rule, requiredAPIVersion: $0.minimumVersion)
        }
    }

    /// Checks a billing line item of an advanced mode (rules 24–26).
    static func billingItem(_ item: ApplePayLineItem, timing: ApplePayPaymentTiming, path: String, rule: Int,
                            request: ApplePayPaymentRequest, context: ValidationContext,
                            into issues: inout [RequestIssue]) -> Int64? {
        if item.paymentTiming != timing { issues.append(issue("billing_timing_mismatch", path + ".paymentTiming", rule)) }
        label(item.label, path: path + ".label", rule: rule, emptyCode: "line_item_label_empty", context: context,
              into: &issues)
        if !item.effectiveType.isKnown { issues.append(issue("line_item_type_invalid", path + ".type", rule)) }
        if item.effectiveType == .pending && item.amount == nil { return nil }
        return amount(item.amount, request, path: path + ".amount", rule: rule, allowNegative: false, into: &issues)
    }

    // MARK: - Rules

    // Rule 1: apiVersion in 1…max; version-gated members not covered by a more specific rule.
    static func apiVersion(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out: [RequestIssue] = []
        if c.apiVersion < 1 || c.apiVersion > c.limits.apiVersionMax {
            return [issue("api_version_unsupported", "apiVersion", 1)]
        }
        out += versionIssues(r, c, rule: 1)
        return out
    }

    // Rule 2: ISO 3166-1 alpha-2, exact uppercase.
    static func countryCode(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        (try? Country(code: r.countryCode)) == nil ? [issue("country_unknown", "countryCode", 2)] : []
    }

    // Rule 3: active, payable ISO 4217 code, enabled for the merchant.
    static func currencyCode(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        do {
            let currency = try Currency(code: r.currencyCode)
            if let enabled = c.enabledCurrencies, !enabled.contains(currency) {
                return [issue("currency_not_enabled", "currencyCode", 3)]
            }
            return []
        } catch {
            return [issue(error.code.rawValue, "currencyCode", 3)]
        }
    }

    // Rule 4: non-empty, known, unique, contains supports3DS (Apple: "must be supplied").
    static func merchantCapabilities(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        if r.merchantCapabilities.isEmpty { return [issue("merchant_capabilities_empty", "merchantCapabilities", 4)] }
        var out: [RequestIssue] = []
        var seen: Set<ApplePayMerchantCapability> = []
        for (i, capability) in r.merchantCapabilities.enumerated() {
            if !capability.isKnown { out.append(issue("merchant_capability_unknown", "merchantCapabilities[\(i)]", 4)) }
            if !seen.insert(capability).inserted {
                out.append(issue("merchant_capability_duplicate", "merchantCapabilities[\(i)]", 4))
            }
        }
        if !seen.contains(.supports3DS) { out.append(issue("supports3ds_missing", "merchantCapabilities", 4)) }
        return out
    }

    // Rule 5: non-empty, exact-case members of the §1.3 table, unique, each minVersion ≤ apiVersion.
    static func supportedNetworks(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        if r.supportedNetworks.isEmpty { return [issue("supported_networks_empty", "supportedNetworks", 5)] }
        var out: [RequestIssue] = []
        var seen: Set<ApplePayNetwork> = []
        for (i, network) in r.supportedNetworks.enumerated() {
            let path = "supportedNetworks[\(i)]"
            if network.minimumVersion == nil { out.append(issue("network_unknown", path, 5)) }
            if !seen.insert(network).inserted { out.append(issue("network_duplicate", path, 5)) }
        }
        return out + versionIssues(r, c, rule: 5)
    }

    // Rule 6: total label non-empty and bounded; total amount has exactly the currency's digits.
    static func totalLabelAndAmount(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out: [RequestIssue] = []
        label(r.total.label, path: "total.label", rule: 6, emptyCode: "total_label_empty", context: c, into: &out)
        if c.checkTotals {
            _ = amount(r.total.amount, r, path: "total.amount", rule: 6, allowNegative: true, bounded: false, into: &out)
        }
        return out
    }

    // Rule 7: 0 ≤ total ≤ Safari's cap (WebKit validateTotal: "Total amount is too big." above
    // 100 000 000 major units); > 0 below version 4.
    static func totalSign(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard c.checkTotals, let currency = currency(of: r), let text = r.total.amount,
              let total = try? currency.parseAmount(text, allowNegative: true) else { return [] }
        if total < 0 { return [issue("total_negative", "total.amount", 7)] }
        if total > currency.acceptedAmountMaxMinor { return [issue("total_too_large", "total.amount", 7)] }
        if total == 0 && c.apiVersion < 4 {
            return [RequestIssue(code: "total_zero_requires_api_version", path: "total.amount", rule: 7, requiredAPIVersion: 4)]
        }
        return []
    }

    // Rules 8–9: item type and timing known, label present, amount valid unless pending, no signed zero.
    static func lineItems(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out: [RequestIssue] = []
        let items = r.lineItems ?? []
        if items.count > c.limits.lineItemsMax + 3 { return [issue("line_items_too_many", "lineItems", 0)] }
        for (i, item) in items.enumerated() {
            let path = "lineItems[\(i)]"
            if !item.effectiveType.isKnown { out.append(issue("line_item_type_invalid", path + ".type", 8)) }
            if let timing = item.paymentTiming, !timing.isKnown {
                out.append(issue("payment_timing_invalid", path + ".paymentTiming", 8))
            }
            if let unit = item.recurringPaymentIntervalUnit, !unit.isKnown {
                out.append(issue("recurring_interval_unit_invalid", path + ".recurringPaymentIntervalUnit", 8))
            }
            if let count = item.recurringPaymentIntervalCount, count < 1 {
                out.append(issue("recurring_interval_count_invalid", path + ".recurringPaymentIntervalCount", 8))
            }
            label(item.label, path: path + ".label", rule: 8, emptyCode: "line_item_label_empty", context: c, into: &out)
            if item.effectiveType == .pending && item.amount == nil { continue }
            // Rule 9: negatives are discounts; the parser still refuses "-0".
            _ = amount(item.amount, r, path: path + ".amount", rule: 8, allowNegative: true, into: &out)
            if let threshold = item.automaticReloadPaymentThresholdAmount {
                _ = amount(threshold, r, path: path + ".automaticReloadPaymentThresholdAmount", rule: 8,
                           allowNegative: false, into: &out)
            }
        }
        return out
    }

    // Rule 10: a final total equals the sum of final line items (product rule, §5.3).
    static func totalEqualsItems(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard c.checkTotals, r.total.effectiveType == .final, let currency = currency(of: r),
              let text = r.total.amount, let total = try? currency.parseAmount(text, allowNegative: true) else {
            return []
        }
        var amounts: [Int64] = []
        for item in r.lineItems ?? [] where item.effectiveType == .final {
            guard let text = item.amount, let value = try? currency.parseAmount(text, allowNegative: true) else {
                return []  // rule 8 reports it
            }
            amounts.append(value)
        }
        guard let sum = try? Money.sum(amounts) else { return [issue("amount_overflow", "lineItems", 10)] }
        return sum == total ? [] : [issue("total_mismatch", "total.amount", 10)]
    }

    // Rule 11.
    static func shippingType(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let type = r.shippingType, !type.isKnown else { return [] }
        return [issue("shipping_type_invalid", "shippingType", 11)]
    }

    // Rule 12: label, detail, identifier non-empty; amount valid and ≥ 0.
    static func shippingMethods(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        let methods = r.shippingMethods ?? []
        if methods.count > c.limits.shippingMethodsMax {
            return [issue("shipping_methods_too_many", "shippingMethods", 0)]
        }
        var out: [RequestIssue] = []
        for (i, method) in methods.enumerated() {
            let path = "shippingMethods[\(i)]"
            label(method.label, path: path + ".label", rule: 12, emptyCode: "shipping_method_label_empty",
                  context: c, into: &out)
            text(method.detail, path: path + ".detail", rule: 12, required: true,
                 emptyCode: "shipping_method_detail_empty", context: c, into: &out)
            if isBlank(method.identifier) {
                out.append(issue("shipping_method_identifier_empty", path + ".identifier", 12))
            } else if method.identifier.count > c.limits.identifierLengthMax {
                out.append(issue("identifier_too_long", path + ".identifier", 12))
            }
            _ = amount(method.amount, r, path: path + ".amount", rule: 12, allowNegative: false, into: &out)
        }
        return out
    }

    // Rule 13.
    static func shippingIdentifiersUnique(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var seen: Set<String> = []
        var out: [RequestIssue] = []
        for (i, method) in (r.shippingMethods ?? []).enumerated() where !seen.insert(method.identifier).inserted {
            out.append(issue("shipping_method_identifier_duplicate", "shippingMethods[\(i)].identifier", 13))
        }
        return out
    }

    // Rule 14: at most one `selected`, and it is first; the shipping line carries the first method's amount.
    static func shippingSelection(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out: [RequestIssue] = []
        let methods = r.shippingMethods ?? []
        let selected = methods.indices.filter { methods[$0].selected == true }
        if selected.count > 1 { out.append(issue("shipping_method_selected_multiple", "shippingMethods", 14)) }
        if let first = selected.first, first != 0 {
            out.append(issue("shipping_method_selected_not_first", "shippingMethods[\(first)].selected", 14))
        }
        out += versionIssues(r, c, rule: 14)
        if c.checkTotals, let index = c.shippingLineIndex {
            let items = r.lineItems ?? []
            if index >= items.count || methods.isEmpty || items[index].amount != methods[0].amount {
                out.append(issue("shipping_line_mismatch", "lineItems[\(index)].amount", 14))
            }
        }
        return out
    }

    // Rule 15: both ends present, real Gregorian dates, start ≤ end, version ≥ 12.
    static func dateComponentsRanges(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out: [RequestIssue] = []
        for (i, method) in (r.shippingMethods ?? []).enumerated() {
            guard let range = method.dateComponentsRange else { continue }
            let path = "shippingMethods[\(i)].dateComponentsRange"
            guard let start = sortKey(range.startDateComponents), let end = sortKey(range.endDateComponents) else {
                out.append(issue("date_components_invalid", path, 15))
                continue
            }
            if start > end { out.append(issue("date_components_range_inverted", path, 15)) }
        }
        return out + versionIssues(r, c, rule: 15)
    }

    /// A comparable key for an absolute date given as components; nil unless years, months and days
    /// form a real date (Apple: supply every component down to the shown granularity).
    static func sortKey(_ d: ApplePayDateComponents) -> Int64? {
        guard let year = d.years, let month = d.months, let day = d.days, year >= 1, year <= 9999,
              CivilCalendar.isValid(year: Int64(year), month: Int64(month), day: Int64(day)) else { return nil }
        let hours = d.hours ?? 0
        guard hours >= 0 && hours < 24 else { return nil }
        return CivilCalendar.days(year: Int64(year), month: Int64(month), day: Int64(day)) * 24 + Int64(hours)
    }

    // Rule 16: known, unique contact fields; phoneticName needs version 3.
    static func contactFields(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out: [RequestIssue] = []
        for (name, fields) in [("requiredShippingContactFields", r.requiredShippingContactFields),
                               ("requiredBillingContactFields", r.requiredBillingContactFields)] {
            var seen: Set<ApplePayContactField> = []
            for (i, field) in (fields ?? []).enumerated() {
                let path = "\(name)[\(i)]"
                if !field.isKnown { out.append(issue("contact_field_invalid", path, 16)) }
                if !seen.insert(field).inserted { out.append(issue("contact_field_duplicate", path, 16)) }
            }
        }
        return out + versionIssues(r, c, rule: 16)
    }

    // Rule 17.
    static func billingContactPrefill(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard r.billingContact != nil, !(r.requiredBillingContactFields ?? []).contains(.postalAddress) else { return [] }
        return [issue("billing_contact_requires_postal_address", "requiredBillingContactFields", 17)]
    }

    // Rule 18: known mode; storePickup needs storePickup shipping, postalAddress and a contact.
    static func editingMode(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let mode = r.shippingContactEditingMode else { return [] }
        if !mode.isKnown { return [issue("shipping_contact_editing_mode_invalid", "shippingContactEditingMode", 18)] }
        guard mode == .storePickup else { return [] }
        if r.shippingType == .storePickup, (r.requiredShippingContactFields ?? []).contains(.postalAddress),
           r.shippingContact != nil {
            return []
        }
        return [issue("store_pickup_requirements", "shippingContactEditingMode", 18)]
    }

    // Rule 19: valid unique alpha-2 codes; version ≥ 3.
    static func supportedCountries(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let countries = r.supportedCountries else { return [] }
        var out = versionIssues(r, c, rule: 19)
        var seen: Set<String> = []
        for (i, code) in countries.enumerated() {
            if (try? Country(code: code)) == nil { out.append(issue("supported_country_unknown", "supportedCountries[\(i)]", 19)) }
            if !seen.insert(code).inserted { out.append(issue("supported_country_duplicate", "supportedCountries[\(i)]", 19)) }
        }
        return out
    }

    // Rule 20: padded canonical Base64 within the size limit (§1.6).
    static func applicationData(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let data = r.applicationData else { return [] }
        // Refuse before decoding anything absurdly large.
        guard data.utf8.count <= (c.limits.applicationDataBytesMax + 2) / 3 * 4 else {
            return [issue("application_data_too_large", "applicationData", 20)]
        }
        guard let bytes = StrictBase64.decode(data), !bytes.isEmpty else {
            return [issue("application_data_invalid", "applicationData", 20)]
        }
        return bytes.count > c.limits.applicationDataBytesMax ? [issue("application_data_too_large", "applicationData", 20)] : []
    }

    // Rule 21: couponCode only with supportsCouponCode, both need version 12.
    static func couponCode(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        var out = versionIssues(r, c, rule: 21)
        if let code = r.couponCode, !code.isEmpty {
            if r.supportsCouponCode != true { out.append(issue("coupon_code_without_support", "couponCode", 21)) }
            if code.count > c.limits.identifierLengthMax { out.append(issue("coupon_code_too_long", "couponCode", 21)) }
        }
        return out
    }

    /// The advanced modes present, by member name. `applePayLaterAvailability` is a base-request field
    /// and not counted (§2.5; decision (b) of §2.6): it combines with recurring by design.
    static func advancedModes(_ r: ApplePayPaymentRequest) -> [String] {
        var modes: [String] = []
        if r.recurringPaymentRequest != nil { modes.append("recurringPaymentRequest") }
        if r.automaticReloadPaymentRequest != nil { modes.append("automaticReloadPaymentRequest") }
        if r.deferredPaymentRequest != nil { modes.append("deferredPaymentRequest") }
        if !(r.multiTokenContexts ?? []).isEmpty { modes.append("multiTokenContexts") }
        return modes
    }

    // Rule 22.
    static func oneAdvancedMode(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        let modes = advancedModes(r)
        return modes.count > 1 ? [issue("advanced_mode_multiple", modes[1], 22)] : []
    }

    // Rule 23: advanced modes need version 14.
    static func advancedModeVersion(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        versionIssues(r, c, rule: 23)
    }

    // Rule 24.
    static func recurring(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let mode = r.recurringPaymentRequest else { return [] }
        let base = "recurringPaymentRequest"
        var out: [RequestIssue] = []
        text(mode.paymentDescription, path: base + ".paymentDescription", rule: 24, required: true,
             emptyCode: "payment_description_empty", context: c, into: &out)
        text(mode.billingAgreement, path: base + ".billingAgreement", rule: 24, required: false,
             emptyCode: "", context: c, into: &out)
        for (name, item) in [("regularBilling", Optional(mode.regularBilling)), ("trialBilling", mode.trialBilling)] {
            guard let item else { continue }
            let path = base + "." + name
            _ = billingItem(item, timing: .recurring, path: path, rule: 24, request: r, context: c, into: &out)
            if let unit = item.recurringPaymentIntervalUnit, !unit.isKnown {
                out.append(issue("recurring_interval_unit_invalid", path + ".recurringPaymentIntervalUnit", 24))
            }
            if let count = item.recurringPaymentIntervalCount, count < 1 {
                out.append(issue("recurring_interval_count_invalid", path + ".recurringPaymentIntervalCount", 24))
            }
            if let start = item.recurringPaymentStartDate, let end = item.recurringPaymentEndDate, start > end {
                out.append(issue("recurring_dates_inverted", path + ".recurringPaymentEndDate", 24))
            }
        }
        url(mode.managementURL, path: base + ".managementURL", rule: 24, required: true, context: c, into: &out)
        url(mode.tokenNotificationURL, path: base + ".tokenNotificationURL", rule: 24, required: false, context: c,
            into: &out)
        return out
    }

    // Rule 25.
    static func automaticReload(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let mode = r.automaticReloadPaymentRequest else { return [] }
        let base = "automaticReloadPaymentRequest"
        let path = base + ".automaticReloadBilling"
        var out: [RequestIssue] = []
        text(mode.paymentDescription, path: base + ".paymentDescription", rule: 25, required: true,
             emptyCode: "payment_description_empty", context: c, into: &out)
        let item = mode.automaticReloadBilling
        if let reload = billingItem(item, timing: .automaticReload, path: path, rule: 25, request: r, context: c,
                                    into: &out), reload == 0 {
            out.append(issue("amount_not_positive", path + ".amount", 25))
        }
        if item.automaticReloadPaymentThresholdAmount == nil {
            out.append(issue("threshold_amount_missing", path + ".automaticReloadPaymentThresholdAmount", 25))
        } else {
            _ = amount(item.automaticReloadPaymentThresholdAmount, r,
                       path: path + ".automaticReloadPaymentThresholdAmount", rule: 25, allowNegative: false, into: &out)
        }
        url(mode.managementURL, path: base + ".managementURL", rule: 25, required: true, context: c, into: &out)
        url(mode.tokenNotificationURL, path: base + ".tokenNotificationURL", rule: 25, required: false, context: c,
            into: &out)
        return out
    }

    // Rule 26.
    static func deferred(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let mode = r.deferredPaymentRequest else { return [] }
        let base = "deferredPaymentRequest"
        let path = base + ".deferredBilling"
        var out: [RequestIssue] = []
        _ = billingItem(mode.deferredBilling, timing: .deferred, path: path, rule: 26, request: r, context: c,
                        into: &out)
        if let date = mode.deferredBilling.deferredPaymentDate {
            if date <= c.now { out.append(issue("deferred_date_not_future", path + ".deferredPaymentDate", 26)) }
        } else {
            out.append(issue("deferred_date_missing", path + ".deferredPaymentDate", 26))
        }
        text(mode.paymentDescription, path: base + ".paymentDescription", rule: 26, required: true,
             emptyCode: "payment_description_empty", context: c, into: &out)
        url(mode.managementURL, path: base + ".managementURL", rule: 26, required: true, context: c, into: &out)
        url(mode.tokenNotificationURL, path: base + ".tokenNotificationURL", rule: 26, required: false, context: c,
            into: &out)
        switch (mode.freeCancellationDate, mode.freeCancellationDateTimeZone) {
        case (nil, nil):
            break
        case (.some, .some(let zone)):
            if !isPlausibleTimeZone(zone) {
                out.append(issue("time_zone_invalid", base + ".freeCancellationDateTimeZone", 26))
            }
        default:
            out.append(issue("free_cancellation_incomplete", base + ".freeCancellationDateTimeZone", 26))
        }
        return out
    }

    /// IANA zone id shape: `UTC`, or `Area/Location[/Sub]` with a known area. Without a tz database this
    /// refuses typos in the area and malformed ids, not every non-existent location.
    static func isPlausibleTimeZone(_ zone: String) -> Bool {
        if zone == "UTC" || zone == "GMT" { return true }
        let areas: Set<Substring> = ["Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia",
                                     "Europe", "Indian", "Pacific", "Etc"]
        let parts = zone.split(separator: "/", omittingEmptySubsequences: false)
        guard zone.count <= 64, parts.count >= 2, parts.count <= 3, areas.contains(parts[0]) else { return false }
        return parts.dropFirst().allSatisfy { part in
            !part.isEmpty && part.unicodeScalars.allSatisfy {
                ($0 >= "A" && $0 <= "Z") || ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || "_-+".unicodeScalars.contains($0)
            }
        }
    }

    // Rule 27: fields present, amount > 0, external ids unique, Σ amounts ≤ total.
    static func multiTokenContexts(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let contexts = r.multiTokenContexts else { return [] }
        if contexts.count > c.limits.multiTokenContextsMax {
            return [issue("multi_token_contexts_too_many", "multiTokenContexts", 0)]
        }
        var out: [RequestIssue] = []
        var seen: Set<String> = []
        var amounts: [Int64] = []
        for (i, context) in contexts.enumerated() {
            let path = "multiTokenContexts[\(i)]"
            for (name, value) in [("merchantIdentifier", context.merchantIdentifier),
                                  ("externalIdentifier", context.externalIdentifier),
                                  ("merchantName", context.merchantName)] where isBlank(value) {
                out.append(issue("token_context_field_empty", path + "." + name, 27))
            }
            if !seen.insert(context.externalIdentifier).inserted {
                out.append(issue("external_identifier_duplicate", path + ".externalIdentifier", 27))
            }
            if let value = amount(context.amount, r, path: path + ".amount", rule: 27, allowNegative: false, into: &out) {
                if value == 0 { out.append(issue("amount_not_positive", path + ".amount", 27)) }
                amounts.append(value)
            }
        }
        if c.checkTotals, out.isEmpty, let currency = currency(of: r), let text = r.total.amount,
           let total = try? currency.parseAmount(text, allowNegative: true) {
            let sum = try? Money.sum(amounts)
            if sum.map({ $0 > total }) ?? true {
                out.append(issue("token_contexts_exceed_total", "multiTokenContexts", 27))
            }
        }
        return out
    }

    // Rule 28.
    static func applePayLater(_ r: ApplePayPaymentRequest, _ c: ValidationContext) -> [RequestIssue] {
        guard let value = r.applePayLaterAvailability, !value.isKnown else { return [] }
        return [issue("apple_pay_later_availability_invalid", "applePayLaterAvailability", 28)]
    }
}
