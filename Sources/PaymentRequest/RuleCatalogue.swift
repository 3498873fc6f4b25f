/// What each Apple Pay request rule enforces, in one line; error messages cite these numbers
/// ("Breaks Apple Pay request rule N"). `docs/apple-pay-rules.md` is generated from this table and
/// `RequestValidator.checks` by `tender docs apple-pay-rules`, and a test fails when the file is stale.
public enum RequestRuleCatalogue {
    /// One rule as the document lists it.
    public struct Rule: Sendable, Equatable {
        /// The number error messages cite.
        public let number: Int
        /// What the rule requires.
        public let summary: String
        /// Where Tender enforces it: the validator check's name, or another place.
        public let enforcedBy: String
    }

    /// Rules enforced outside `RequestValidator.checks`, and where.
    static let enforcedElsewhere: [Int: String] = [
        9: "the amount parser, inside rules 8, 12 and 24–27",
        29: "`Timestamp` (every date is written and read as RFC 3339 UTC)",
        30: "the model (the payment request holds only Apple's keys)",
        32: "recalculation (`shipping_method_unknown`)",
        40: "`MerchantValidationURL.check` (HTTPClient)",
        41: "`MerchantValidationService`",
        42: "`Merchant.validated` (`display_name_invalid`)",
        43: "`MerchantValidationService` over the merchant's identity key",
        44: "the HTTPClient call settings",
        45: "`MerchantValidationService` (`merchant_validation_failed`, 502)",
        46: "`MerchantValidationService` (nothing is cached)",
        55: "payments (`eciIndicator` passed to the processor when present)",
    ]

    /// Rule number → summary. Rules 1–30 shape the payment request, 31–39 govern recalculation, 40–46
    /// merchant validation, 47–58 the payment.
    static let summaries: [Int: String] = [
        1: "`apiVersion` is an integer Tender supports (1–15), and every feature used is available in that version.",
        2: "`countryCode` is an ISO 3166-1 alpha-2 code in upper case.",
        3: "`currencyCode` is an active ISO 4217 code with defined minor digits, and one the merchant enabled.",
        4: "`merchantCapabilities` is non-empty, has only Apple's four values, no duplicates, and includes `supports3DS`.",
        5: "`supportedNetworks` is non-empty, exact-case names Apple defines, no duplicates, each available in `apiVersion`.",
        6: "`total.label` is non-empty and within the length limit; `total.amount` has exactly the currency's minor digits.",
        7: "`total.amount` is not negative (and positive when `apiVersion` is below 4).",
        8: "Every line item has a valid `type` and `paymentTiming`, and a valid amount unless it is `pending`.",
        9: "No amount is a negative zero (`-0`, `-0.00`).",
        10: "The final line items add up to `total.amount`, in minor units.",
        11: "`shippingType` is `shipping`, `delivery`, `storePickup` or `servicePickup`.",
        12: "Every shipping method has a non-empty `label`, `detail` and `identifier`, and an amount of at least zero.",
        13: "Shipping method identifiers are unique.",
        14: "At most one shipping method is selected, it comes first, and its amount is the shipping line item.",
        15: "A `dateComponentsRange` has real Gregorian start and end dates, start not after end, and needs `apiVersion` 12.",
        16: "Required contact fields are among `email`, `name`, `phone`, `postalAddress`, `phoneticName` (the last needs `apiVersion` 3).",
        17: "A prefilled billing contact requires `postalAddress` among the billing contact fields.",
        18: "Store-pickup editing mode needs `shippingType` `storePickup`, `postalAddress` requested and a shipping contact.",
        19: "`supportedCountries` are unique ISO alpha-2 codes and need `apiVersion` 3.",
        20: "`applicationData` is padded Base64 within the size limit.",
        21: "`couponCode` needs `supportsCouponCode` and `apiVersion` 12.",
        22: "At most one advanced mode: recurring, automatic reload, deferred or multi-token.",
        23: "Advanced modes need `apiVersion` 14.",
        24: "Recurring: a description, recurring-timed billing items with labels and valid amounts, a valid interval,"
            + " start not after end, https management and notification URLs.",
        25: "Automatic reload: an automatic-reload billing item with a label and a positive amount, a threshold of at least zero,"
            + " https URLs.",
        26: "Deferred: a deferred billing item, a payment date in the future, a description, an https management URL,"
            + " free-cancellation date and time zone together.",
        27: "Multi-token: each context has a merchant identifier, external identifier, name and positive amount;"
            + " identifiers unique; the amounts add up to at most the total.",
        28: "`applePayLaterAvailability` is `available`, `unavailableItemIneligible` or `unavailableRecurringTransaction`.",
        29: "Dates are RFC 3339 strings.",
        30: "The payment request carries no keys outside Apple's dictionaries.",
        32: "A shipping method chosen on the sheet is one Tender offered for this session.",
        40: "A merchant-validation `validationURL` is https, on Apple's host list, without userinfo,"
            + " on port 443, at Apple's payment-session path.",
        41: "The validation request names a domain registered for the merchant.",
        42: "The merchant's display name is non-empty and at most 64 characters.",
        43: "The validation request body has exactly Apple's fields and goes over mutual TLS with the merchant identity certificate.",
        44: "The call to Apple has a hard timeout and follows no redirect.",
        45: "Apple's merchant session is returned unchanged; an Apple error becomes a 502 and Apple's text is only logged.",
        46: "Every payment attempt gets a fresh merchant session; none is reused.",
        55: "`eciIndicator` is optional and forwarded when present.",
    ]

    /// Every rule, by number: the validator's checks first-hand, the others with where they are enforced.
    public static var rules: [Rule] {
        var byRule: [Int: [String]] = [:]
        for check in RequestValidator.checks { byRule[check.rule, default: []].append("`\(check.name)`") }
        return summaries.keys.sorted().map { number in
            Rule(number: number, summary: summaries[number] ?? "",
                 enforcedBy: byRule[number].map { "check " + $0.joined(separator: ", ") } ?? enforcedElsewhere[number] ?? "")
        }
    }

    /// `docs/apple-pay-rules.md`.
    public static func markdown() -> String {
        var out = """
            # Apple Pay request rules

            Generated by `tender docs apple-pay-rules > docs/apple-pay-rules.md` from the validator's own table
            (`Sources/PaymentRequest/RequestValidator.swift`, `RuleCatalogue.swift`); a test fails when this file
            is stale. A `422` problem's field errors say "Breaks Apple Pay request rule N" with the field's JSON
            path and a stable `code`. Rules 1–30 shape the payment request (Apple Pay JS
            `ApplePayPaymentRequest`), 31–39 the sheet's updates, 40–46 merchant validation and 47–58 the
            payment. The validator's checks run in the order below, most basic first, and every failure is
            reported at once.

            | rule | what it requires | enforced by |
            |---|---|---|

            """
        for rule in rules {
            out += "| \(rule.number) | \(rule.summary) | \(rule.enforcedBy) |\n"
        }
        return out
    }
}
