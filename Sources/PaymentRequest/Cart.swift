// Tender's own input for POST /v1/checkout-sessions (openapi.yaml). Unknown fields anywhere in it are
// refused with `unknown_field`, so a typo or a client-sent `total` never silently changes a payment.

/// A shipping method as the merchant offers it: Apple's fields plus Tender's `countries` extension.
public struct CartShippingMethod: Codable, Hashable, Sendable {
    /// Tender's key; the only thing a shopper's selection may name (rule 32).
    public var identifier: String
    /// `label`.
    public var label: String
    /// `detail`.
    public var detail: String
    /// Non-negative decimal string in the cart currency.
    public var amount: String
    /// ISO alpha-2 codes this method ships to; nil = everywhere.
    public var countries: [String]?
    /// v12 delivery window.
    public var dateComponentsRange: ApplePayDateComponentsRange?

    /// A shipping method.
    public init(identifier: String, label: String, detail: String, amount: String, countries: [String]? = nil,
                dateComponentsRange: ApplePayDateComponentsRange? = nil) {
        self.identifier = identifier
        self.label = label
        self.detail = detail
        self.amount = amount
        self.countries = countries
        self.dateComponentsRange = dateComponentsRange
    }

    /// True when this method ships to `countryCode` (uppercase alpha-2).
    public func shipsTo(_ countryCode: String) -> Bool { countries.map { $0.contains(countryCode) } ?? true }

    /// The Apple form (Tender's `countries` dropped, rule 30).
    public var applePay: ApplePayShippingMethod {
        ApplePayShippingMethod(label: label, detail: detail, amount: amount, identifier: identifier,
                               dateComponentsRange: dateComponentsRange)
    }

    static let keySchema = KeySchema.object([
        "identifier": .leaf, "label": .leaf, "detail": .leaf, "amount": .leaf, "countries": .array(.leaf),
        "dateComponentsRange": ApplePayDateComponentsRange.keySchema,
    ])
}

/// The cart: items, shipping methods, coupon code and Apple Pay options, never a total.
/// Raw and unvalidated; `CheckoutBuilder.build` turns it into a `PricedCheckout` or a list of issues.
public struct Cart: Codable, Hashable, Sendable {
    /// `currencyCode`.
    public var currencyCode: String
    /// Defaults to the merchant's country.
    public var countryCode: String?
    /// `lineItems`.
    public var lineItems: [ApplePayLineItem]
    /// `shippingMethods`.
    public var shippingMethods: [CartShippingMethod]?
    /// `shippingType`.
    public var shippingType: ApplePayShippingType?
    /// `requiredShippingContactFields`.
    public var requiredShippingContactFields: [ApplePayContactField]?
    /// `requiredBillingContactFields`.
    public var requiredBillingContactFields: [ApplePayContactField]?
    /// Prefilled shipping contact; its country/region also seed the tax computation.
    public var shippingContact: ApplePayPaymentContact?
    /// `billingContact`.
    public var billingContact: ApplePayPaymentContact?
    /// `shippingContactEditingMode`.
    public var shippingContactEditingMode: ApplePayShippingContactEditingMode?
    /// `supportsCouponCode`.
    public var supportsCouponCode: Bool?
    /// Initial code ("" = none); applied to the initial totals (§1.7).
    public var couponCode: String?
    /// `recurringPaymentRequest`.
    public var recurringPaymentRequest: ApplePayRecurringPaymentRequest?
    /// `automaticReloadPaymentRequest`.
    public var automaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest?
    /// `deferredPaymentRequest`.
    public var deferredPaymentRequest: ApplePayDeferredPaymentRequest?
    /// `multiTokenContexts`.
    public var multiTokenContexts: [ApplePayPaymentTokenContext]?
    /// `applePayLaterAvailability`.
    public var applePayLaterAvailability: ApplePayLaterAvailability?
    /// The version the page passes to `new ApplePaySession`; when absent, the lowest that shows every
    /// feature the cart uses (`CheckoutBuilder.lowestAPIVersion`), returned in the session.
    public var apiVersion: Int?
    /// Merchant's own key/value pairs, bounded by `CheckoutLimits`.
    public var metadata: [String: String]?
    /// Session lifetime; defaults to `CheckoutLimits.expiresInSecondsDefault`.
    public var expiresInSeconds: Int64?
    /// Overrides the merchant's networks (validated strictly against `apiVersion`).
    public var supportedNetworks: [ApplePayNetwork]?
    /// Overrides the merchant's capabilities.
    public var merchantCapabilities: [ApplePayMerchantCapability]?
    /// Card-issuing countries.
    public var supportedCountries: [String]?

    /// A minimal cart; set the other members directly.
    public init(currencyCode: String, lineItems: [ApplePayLineItem]) {
        self.currencyCode = currencyCode
        self.lineItems = lineItems
    }

    /// The fields a cart may carry, nested (openapi.yaml plus Apple's request options).
    public static let keySchema: KeySchema = {
        let contact = KeySchema.object(Dictionary(uniqueKeysWithValues: [
            "phoneNumber", "emailAddress", "givenName", "familyName", "phoneticGivenName", "phoneticFamilyName",
            "addressLines", "subLocality", "locality", "postalCode", "subAdministrativeArea",
            "administrativeArea", "country", "countryCode",
        ].map { ($0, KeySchema.leaf) }))
        return .object([
            "currencyCode": .leaf, "countryCode": .leaf, "lineItems": .array(ApplePayLineItem.keySchema),
            "shippingMethods": .array(CartShippingMethod.keySchema), "shippingType": .leaf,
            "requiredShippingContactFields": .array(.leaf), "requiredBillingContactFields": .array(.leaf),
            "shippingContact": contact, "billingContact": contact, "shippingContactEditingMode": .leaf,
            "supportsCouponCode": .leaf, "couponCode": .leaf,
            "recurringPaymentRequest": ApplePayRecurringPaymentRequest.keySchema,
            "automaticReloadPaymentRequest": ApplePayAutomaticReloadPaymentRequest.keySchema,
            "deferredPaymentRequest": ApplePayDeferredPaymentRequest.keySchema,
            "multiTokenContexts": .array(ApplePayPaymentTokenContext.keySchema),
            "applePayLaterAvailability": .leaf, "apiVersion": .leaf, "metadata": .map(.leaf),
            "expiresInSeconds": .leaf, "supportedNetworks": .array(.leaf), "merchantCapabilities": .array(.leaf),
            "supportedCountries": .array(.leaf),
        ])
    }()

    enum CodingKeys: String, CodingKey {
        case currencyCode, countryCode, lineItems, shippingMethods, shippingType, requiredShippingContactFields
        case requiredBillingContactFields, shippingContact, billingContact, shippingContactEditingMode
        case supportsCouponCode, couponCode, recurringPaymentRequest, automaticReloadPaymentRequest
        case deferredPaymentRequest, multiTokenContexts, applePayLaterAvailability, apiVersion, metadata
        case expiresInSeconds, supportedNetworks, merchantCapabilities, supportedCountries
    }

    /// Decodes a cart, refusing unknown fields at any depth (`unknown_field` naming the path).
    /// Map thrown errors with `PaymentRequestError(decoding:)`.
    public init(from decoder: any Decoder) throws {
        try Self.keySchema.refuseUnknownFields(decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        currencyCode = try c.decode(String.self, forKey: .currencyCode)
        countryCode = try c.decodeIfPresent(String.self, forKey: .countryCode)
        lineItems = try c.decode([ApplePayLineItem].self, forKey: .lineItems)
        shippingMethods = try c.decodeIfPresent([CartShippingMethod].self, forKey: .shippingMethods)
        shippingType = try c.decodeIfPresent(ApplePayShippingType.self, forKey: .shippingType)
        requiredShippingContactFields = try c.decodeIfPresent([ApplePayContactField].self,
                                                              forKey: .requiredShippingContactFields)
        requiredBillingContactFields = try c.decodeIfPresent([ApplePayContactField].self,
                                                             forKey: .requiredBillingContactFields)
        shippingContact = try c.decodeIfPresent(ApplePayPaymentContact.self, forKey: .shippingContact)
        billingContact = try c.decodeIfPresent(ApplePayPaymentContact.self, forKey: .billingContact)
        shippingContactEditingMode = try c.decodeIfPresent(ApplePayShippingContactEditingMode.self,
                                                           forKey: .shippingContactEditingMode)
        supportsCouponCode = try c.decodeIfPresent(Bool.self, forKey: .supportsCouponCode)
        couponCode = try c.decodeIfPresent(String.self, forKey: .couponCode)
        recurringPaymentRequest = try c.decodeIfPresent(ApplePayRecurringPaymentRequest.self,
                                                        forKey: .recurringPaymentRequest)
        automaticReloadPaymentRequest = try c.decodeIfPresent(ApplePayAutomaticReloadPaymentRequest.self,
                                                              forKey: .automaticReloadPaymentRequest)
        deferredPaymentRequest = try c.decodeIfPresent(ApplePayDeferredPaymentRequest.self,
                                                       forKey: .deferredPaymentRequest)
        multiTokenContexts = try c.decodeIfPresent([ApplePayPaymentTokenContext].self, forKey: .multiTokenContexts)
        applePayLaterAvailability = try c.decodeIfPresent(ApplePayLaterAvailability.self,
                                                          forKey: .applePayLaterAvailability)
        apiVersion = try c.decodeIfPresent(Int.self, forKey: .apiVersion)
        metadata = try c.decodeIfPresent([String: String].self, forKey: .metadata)
        expiresInSeconds = try c.decodeIfPresent(Int64.self, forKey: .expiresInSeconds)
        supportedNetworks = try c.decodeIfPresent([ApplePayNetwork].self, forKey: .supportedNetworks)
        merchantCapabilities = try c.decodeIfPresent([ApplePayMerchantCapability].self, forKey: .merchantCapabilities)
        supportedCountries = try c.decodeIfPresent([String].self, forKey: .supportedCountries)
    }
}
