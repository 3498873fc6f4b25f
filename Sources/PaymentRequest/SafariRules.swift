// What Safari itself throws on, for every object Tender hands to Apple Pay JS: the request given to
// `new ApplePaySession(version, request)` and the update dictionaries given to the `complete…`
// methods. Taken from WebKit (Source/WebCore/Modules/applepay): ApplePaySession.cpp's
// `convertAndValidate*`, PaymentRequestValidator.mm's `validateTotal`/`validateShippingMethod`,
// ApplePayRequestBase.cpp's version and network checks, and PaymentRequestUtilities.cpp's
// `isValidDecimalMonetaryValue`.
//
// These checks are deliberately independent of Tender's own stricter rules (`RequestValidator`):
// they read the decimal strings as Safari does, with the W3C grammar and no currency table, so they
// are a second opinion on what Tender emits rather than the same code asked twice. A violation here
// means Tender would hand the page a dictionary that throws a TypeError: it is never emitted.

import Money

/// Safari's own checks on emitted Apple Pay JS objects.
public enum SafariRules {
    /// The total cap of WebKit's `validateTotal` in major units ("Total amount is too big.").
    public static let totalMaxMajorUnits = "100000000"

    /// Every check Safari would fail on `request` created with `apiVersion`.
    public static func issues(in request: ApplePayPaymentRequest, apiVersion: Int) -> [RequestIssue] {
        var out: [RequestIssue] = []
        // ApplePayRequestBase: "\"N\" is not a supported version."; 15 is the last number (§1.3).
        if apiVersion < 1 || apiVersion > 15 { out.append(issue("api_version_unsupported", "apiVersion", 1)) }
        // PaymentRequestValidator: "Missing merchant capabilities.", "At least one supported network…".
        if request.merchantCapabilities.isEmpty { out.append(issue("merchant_capabilities_empty", "merchantCapabilities", 4)) }
        if request.supportedNetworks.isEmpty { out.append(issue("supported_networks_empty", "supportedNetworks", 5)) }
        // PaymentCoordinator::validatedPaymentNetwork: unknown or too new → "is not a valid payment network."
        for (i, network) in request.supportedNetworks.enumerated()
        where (network.minimumVersion ?? Int.max) > apiVersion {
            out.append(issue("unsupported_network_for_version", "supportedNetworks[\(i)]", 5))
        }
        // WebIDL enumerations: a value outside the enum is a TypeError ("Type error.").
        for (i, capability) in request.merchantCapabilities.enumerated() where !capability.isKnown {
            out.append(issue("merchant_capability_unknown", "merchantCapabilities[\(i)]", 4))
        }
        if let type = request.shippingType, !type.isKnown { out.append(issue("shipping_type_invalid", "shippingType", 11)) }
        for (name, fields) in [("requiredShippingContactFields", request.requiredShippingContactFields),
                               ("requiredBillingContactFields", request.requiredBillingContactFields)] {
            for (i, field) in (fields ?? []).enumerated() {
                // v1–2: "\"phoneticName\" is not a valid contact field."
                if !field.isKnown || (field == .phoneticName && apiVersion < 3) {
                    out.append(issue("contact_field_invalid", "\(name)[\(i)]", 16))
                }
            }
        }
        if let mode = request.shippingContactEditingMode, !mode.isKnown {
            out.append(issue("shipping_contact_editing_mode_invalid", "shippingContactEditingMode", 18))
        }
        if let later = request.applePayLaterAvailability, !later.isKnown {
            out.append(issue("apple_pay_later_availability_invalid", "applePayLaterAvailability", 28))
        }
        if (try? Country(code: request.countryCode)) == nil { out.append(issue("country_unknown", "countryCode", 2)) }
        if (try? Currency(code: request.currencyCode)) == nil { out.append(issue("currency_unknown", "currencyCode", 3)) }
        out += total(request.total, path: "total", apiVersion: apiVersion)
        out += lineItems(request.lineItems, path: "lineItems")
        out += shippingMethods(request.shippingMethods, path: "shippingMethods")
        out += modes(recurring: request.recurringPaymentRequest, reload: request.automaticReloadPaymentRequest,
                     deferred: request.deferredPaymentRequest, contexts: request.multiTokenContexts, prefix: "")
        return out
    }

    /// Every check Safari would fail on an update dictionary (`completeShippingMethodSelection` and siblings):
    /// `newTotal` as a total, `newLineItems` as line items, `newShippingMethods` and the `new…Request`s
    /// as in a request.
    public static func issues(in update: some ApplePaySafariCheckable, apiVersion: Int) -> [RequestIssue] {
        var out = total(update.newTotal, path: "newTotal", apiVersion: apiVersion)
        out += lineItems(update.newLineItems, path: "newLineItems")
        out += shippingMethods(update.newShippingMethods, path: "newShippingMethods")
        out += modes(recurring: update.newRecurringPaymentRequest, reload: update.newAutomaticReloadPaymentRequest,
                     deferred: update.newDeferredPaymentRequest, contexts: update.newMultiTokenContexts, prefix: "new")
        // ApplePayError's `code` and `contactField` are WebIDL enumerations too.
        for (i, error) in (update.sheetErrors ?? []).enumerated() {
            if !error.code.isKnown { out.append(issue("apple_pay_error_code_invalid", "errors[\(i)].code", 35)) }
            if let field = error.contactField, !field.isKnown {
                out.append(issue("apple_pay_error_contact_field_invalid", "errors[\(i)].contactField", 35))
            }
        }
        return out
    }

    // MARK: - Grammar and range

    /// `isValidDecimalMonetaryValue`: `^-?[0-9]+(\.[0-9]+)?$`, ASCII only, nothing else.
    public static func isDecimalMonetaryValue(_ text: String) -> Bool {
        var bytes = Substring(text).utf8[...]
        if bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        let whole = bytes.prefix(while: isDigit)
        guard !whole.isEmpty else { return false }
        let rest = bytes.dropFirst(whole.count)
        if rest.isEmpty { return true }
        guard rest.first == UInt8(ascii: "."), rest.count > 1 else { return false }
        return rest.dropFirst().allSatisfy(isDigit)
    }

    /// A valid decimal's sign and whether its magnitude exceeds `limitMajor` (a plain digit string),
    /// compared on the digits themselves: no `Double`, no currency exponent.
    static func exceeds(_ text: String, limitMajor: String) -> Bool {
        let unsigned = text.hasPrefix("-") ? String(text.dropFirst()) : text
        let parts = unsigned.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let whole = parts[0].drop { $0 == "0" }
        let fractionNonZero = parts.count == 2 && parts[1].contains { $0 != "0" }
        if whole.count != limitMajor.count { return whole.count > limitMajor.count }
        if whole != Substring(limitMajor) { return whole > Substring(limitMajor) }
        return fractionNonZero
    }

    /// True for a valid decimal below zero (`-0.00` is zero, as Safari's decimal number reads it).
    static func isNegative(_ text: String) -> Bool {
        text.hasPrefix("-") && text.contains { $0 >= "1" && $0 <= "9" }
    }

    static func isZero(_ text: String) -> Bool { !text.contains { $0 >= "1" && $0 <= "9" } }

    // MARK: - Members

    /// `convertAndValidateTotal` + `validateTotal`: label, valid amount, 0 ≤ amount ≤ 100 000 000;
    /// `v1–3` need a positive total (WebKit r235318 allowed $0 from v4).
    static func total(_ item: ApplePayLineItem, path: String, apiVersion: Int) -> [RequestIssue] {
        var out: [RequestIssue] = []
        if item.label.isEmpty { out.append(issue("total_label_empty", path + ".label", 6)) }
        if !item.effectiveType.isKnown { out.append(issue("line_item_type_invalid", path + ".type", 8)) }
        guard let amount = item.amount, isDecimalMonetaryValue(amount) else {
            return out + [issue("amount_not_decimal", path + ".amount", 6)]
        }
        if isNegative(amount) { out.append(issue("total_negative", path + ".amount", 7)) }
        if exceeds(amount, limitMajor: totalMaxMajorUnits) { out.append(issue("total_too_large", path + ".amount", 7)) }
        if apiVersion < 4 && isZero(amount) {
            out.append(RequestIssue(code: "total_zero_requires_api_version", path: path + ".amount", rule: 7,
                                    requiredAPIVersion: 4))
        }
        return out
    }

    /// `convertAndValidate(ApplePayLineItem)`: a pending item's amount is dropped, any other must be valid.
    static func lineItems(_ items: [ApplePayLineItem]?, path: String) -> [RequestIssue] {
        var out: [RequestIssue] = []
        for (i, item) in (items ?? []).enumerated() {
            if !item.effectiveType.isKnown { out.append(issue("line_item_type_invalid", "\(path)[\(i)].type", 8)) }
            if let timing = item.paymentTiming, !timing.isKnown {
                out.append(issue("payment_timing_invalid", "\(path)[\(i)].paymentTiming", 8))
            }
            if item.effectiveType != .pending && !(item.amount.map(isDecimalMonetaryValue) ?? false) {
                out.append(issue("amount_not_decimal", "\(path)[\(i)].amount", 8))
            }
        }
        return out
    }

    /// `convertAndValidate(ApplePayShippingMethod)` + `validateShippingMethod`: a valid, non-negative amount.
    static func shippingMethods(_ methods: [ApplePayShippingMethod]?, path: String) -> [RequestIssue] {
        var out: [RequestIssue] = []
        for (i, method) in (methods ?? []).enumerated() {
            let amountPath = "\(path)[\(i)].amount"
            if !isDecimalMonetaryValue(method.amount) {
                out.append(issue("amount_not_decimal", amountPath, 12))
            } else if isNegative(method.amount) {
                out.append(issue("amount_negative", amountPath, 12))
            }
        }
        return out
    }

    /// A billing item of an advanced mode: the right `paymentTiming`, a label, a valid amount unless pending.
    static func billing(_ item: ApplePayLineItem, timing: ApplePayPaymentTiming, path: String, rule: Int) -> [RequestIssue] {
        var out: [RequestIssue] = []
        if item.paymentTiming != timing { out.append(issue("billing_timing_mismatch", path + ".paymentTiming", rule)) }
        if item.label.isEmpty { out.append(issue("line_item_label_empty", path + ".label", rule)) }
        if item.effectiveType != .pending && !(item.amount.map(isDecimalMonetaryValue) ?? false) {
            out.append(issue("amount_not_decimal", path + ".amount", rule))
        }
        return out
    }

    /// `managementURL` must parse; `tokenNotificationURL` too when present.
    static func urls(management: String, token: String?, path: String, rule: Int) -> [RequestIssue] {
        var out: [RequestIssue] = []
        if !isURL(management) { out.append(issue("url_invalid", path + ".managementURL", rule)) }
        if let token, !isURL(token) { out.append(issue("url_invalid", path + ".tokenNotificationURL", rule)) }
        return out
    }

    /// The advanced modes, in a request (`prefix` "") or an update (`prefix` "new").
    static func modes(recurring: ApplePayRecurringPaymentRequest?, reload: ApplePayAutomaticReloadPaymentRequest?,
                      deferred: ApplePayDeferredPaymentRequest?, contexts: [ApplePayPaymentTokenContext]?,
                      prefix: String) -> [RequestIssue] {
        func name(_ member: String) -> String {
            prefix.isEmpty ? member : prefix + member.prefix(1).uppercased() + member.dropFirst()
        }
        var out: [RequestIssue] = []
        if let mode = recurring {
            let path = name("recurringPaymentRequest")
            out += billing(mode.regularBilling, timing: .recurring, path: path + ".regularBilling", rule: 24)
            if let trial = mode.trialBilling {
                out += billing(trial, timing: .recurring, path: path + ".trialBilling", rule: 24)
            }
            out += urls(management: mode.managementURL, token: mode.tokenNotificationURL, path: path, rule: 24)
        }
        if let mode = reload {
            let path = name("automaticReloadPaymentRequest")
            let item = mode.automaticReloadBilling
            out += billing(item, timing: .automaticReload, path: path + ".automaticReloadBilling", rule: 25)
            // Checked even for a pending item: "… is not a valid automaticReloadPaymentThresholdAmount."
            if !(item.automaticReloadPaymentThresholdAmount.map(isDecimalMonetaryValue) ?? false) {
                out.append(issue("amount_not_decimal",
                                 path + ".automaticReloadBilling.automaticReloadPaymentThresholdAmount", 25))
            }
            out += urls(management: mode.managementURL, token: mode.tokenNotificationURL, path: path, rule: 25)
        }
        if let mode = deferred {
            let path = name("deferredPaymentRequest")
            out += billing(mode.deferredBilling, timing: .deferred, path: path + ".deferredBilling", rule: 26)
            out += urls(management: mode.managementURL, token: mode.tokenNotificationURL, path: path, rule: 26)
            // "Unexpected/Missing 'freeCancellationDateTimeZone'…", "… is not a valid time zone."
            switch (mode.freeCancellationDate, mode.freeCancellationDateTimeZone) {
            case (nil, nil), (nil, ""?): break
            case (.some, let zone?) where !zone.isEmpty:
                if !RequestValidator.isPlausibleTimeZone(zone) {
                    out.append(issue("time_zone_invalid", path + ".freeCancellationDateTimeZone", 26))
                }
            default:
                out.append(issue("free_cancellation_incomplete", path + ".freeCancellationDateTimeZone", 26))
            }
            if mode.paymentDescription.isEmpty { out.append(issue("payment_description_empty", path + ".paymentDescription", 26)) }
        }
        for (i, context) in (contexts ?? []).enumerated() where !isDecimalMonetaryValue(context.amount) {
            out.append(issue("amount_not_decimal", "\(name("multiTokenContexts"))[\(i)].amount", 27))
        }
        return out
    }

    /// What WebKit's `URL { … }.isValid()` needs at least: a scheme, a colon and no whitespace or controls.
    static func isURL(_ text: String) -> Bool {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return false }
        let scheme = text[..<colon]
        guard let first = scheme.unicodeScalars.first, (first >= "a" && first <= "z") || (first >= "A" && first <= "Z"),
              scheme.unicodeScalars.allSatisfy({ ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z")
                  || ($0 >= "0" && $0 <= "9") || $0 == "+" || $0 == "-" || $0 == "." }) else { return false }
        return text.index(after: colon) < text.endIndex
            && !text.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F }
    }

    static func issue(_ code: String, _ path: String, _ rule: Int) -> RequestIssue {
        RequestIssue(code: code, path: path, rule: rule)
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
}

/// The members of an update dictionary Safari validates (§3.2); every Tender update type has them.
public protocol ApplePaySafariCheckable: ApplePayDetailsUpdate {
    /// `newShippingMethods`.
    var newShippingMethods: [ApplePayShippingMethod]? { get }
    /// `newMultiTokenContexts`.
    var newMultiTokenContexts: [ApplePayPaymentTokenContext]? { get }
    /// `newRecurringPaymentRequest`.
    var newRecurringPaymentRequest: ApplePayRecurringPaymentRequest? { get }
    /// `newAutomaticReloadPaymentRequest`.
    var newAutomaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest? { get }
    /// `newDeferredPaymentRequest`.
    var newDeferredPaymentRequest: ApplePayDeferredPaymentRequest? { get }
    /// `errors`, for the dictionaries that have it.
    var sheetErrors: [ApplePayError]? { get }
}

extension ApplePayShippingMethodUpdate: ApplePaySafariCheckable {
    /// Apple defines no `errors` here.
    public var sheetErrors: [ApplePayError]? { nil }
}

extension ApplePayShippingContactUpdate: ApplePaySafariCheckable {
    /// `errors`.
    public var sheetErrors: [ApplePayError]? { errors }
}

extension ApplePayCouponCodeUpdate: ApplePaySafariCheckable {
    /// `errors`.
    public var sheetErrors: [ApplePayError]? { errors }
}

extension ApplePayPaymentMethodUpdate: ApplePaySafariCheckable {
    /// `errors`.
    public var sheetErrors: [ApplePayError]? { errors }
}
