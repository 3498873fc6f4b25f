// The Apple Pay JS request dictionaries with Apple's exact member names (reference §1, §2).
// Encoding emits only these keys (rule 30), omits absent members, writes amounts as decimal strings
// and `Date` members as RFC 3339 UTC strings (rule 29).

/// `ApplePayLineItem` (§1.4).
public struct ApplePayLineItem: Codable, Hashable, Sendable {
    /// `final` (default) or `pending`.
    public var type: ApplePayLineItemType?
    /// Shown on the sheet.
    public var label: String
    /// Decimal string; may be absent only for `pending` items.
    public var amount: String?
    /// v12: when the item is charged.
    public var paymentTiming: ApplePayPaymentTiming?
    /// Recurring: first charge.
    public var recurringPaymentStartDate: Timestamp?
    /// Recurring: interval unit (default month).
    public var recurringPaymentIntervalUnit: ApplePayRecurringPaymentDateUnit?
    /// Recurring: units per interval (default 1).
    public var recurringPaymentIntervalCount: Int?
    /// Recurring: last charge.
    public var recurringPaymentEndDate: Timestamp?
    /// Deferred: charge date.
    public var deferredPaymentDate: Timestamp?
    /// Automatic reload: the balance that triggers a reload, as a decimal string.
    public var automaticReloadPaymentThresholdAmount: String?

    /// A line item; only `label` is required.
    public init(label: String, amount: String?, type: ApplePayLineItemType? = nil,
                paymentTiming: ApplePayPaymentTiming? = nil, recurringPaymentStartDate: Timestamp? = nil,
                recurringPaymentIntervalUnit: ApplePayRecurringPaymentDateUnit? = nil,
                recurringPaymentIntervalCount: Int? = nil, recurringPaymentEndDate: Timestamp? = nil,
                deferredPaymentDate: Timestamp? = nil, automaticReloadPaymentThresholdAmount: String? = nil) {
        self.type = type
        self.label = label
        self.amount = amount
        self.paymentTiming = paymentTiming
        self.recurringPaymentStartDate = recurringPaymentStartDate
        self.recurringPaymentIntervalUnit = recurringPaymentIntervalUnit
        self.recurringPaymentIntervalCount = recurringPaymentIntervalCount
        self.recurringPaymentEndDate = recurringPaymentEndDate
        self.deferredPaymentDate = deferredPaymentDate
        self.automaticReloadPaymentThresholdAmount = automaticReloadPaymentThresholdAmount
    }

    /// `type`, with Apple's default applied.
    public var effectiveType: ApplePayLineItemType { type ?? .final }

    static let keySchema = KeySchema.object([
        "type": .leaf, "label": .leaf, "amount": .leaf, "paymentTiming": .leaf,
        "recurringPaymentStartDate": .leaf, "recurringPaymentIntervalUnit": .leaf,
        "recurringPaymentIntervalCount": .leaf, "recurringPaymentEndDate": .leaf,
        "deferredPaymentDate": .leaf, "automaticReloadPaymentThresholdAmount": .leaf,
    ])
}

/// `ApplePayDateComponents` (§1.5): Gregorian, months 1-based.
public struct ApplePayDateComponents: Codable, Hashable, Sendable {
    /// Apple's `years` member.
    public var years: Int?
    /// Apple's `months` member.
    public var months: Int?
    /// Apple's `days` member.
    public var days: Int?
    /// Apple's `hours` member.
    public var hours: Int?

    /// Components of one absolute date.
    public init(years: Int? = nil, months: Int? = nil, days: Int? = nil, hours: Int? = nil) {
        self.years = years
        self.months = months
        self.days = days
        self.hours = hours
    }

    static let keySchema = KeySchema.object(["years": .leaf, "months": .leaf, "days": .leaf, "hours": .leaf])
}

/// `ApplePayDateComponentsRange` (§1.5, v12): expected delivery window.
public struct ApplePayDateComponentsRange: Codable, Hashable, Sendable {
    /// Apple's `startDateComponents` member.
    public var startDateComponents: ApplePayDateComponents
    /// Apple's `endDateComponents` member.
    public var endDateComponents: ApplePayDateComponents

    /// A delivery window.
    public init(startDateComponents: ApplePayDateComponents, endDateComponents: ApplePayDateComponents) {
        self.startDateComponents = startDateComponents
        self.endDateComponents = endDateComponents
    }

    static let keySchema = KeySchema.object([
        "startDateComponents": ApplePayDateComponents.keySchema,
        "endDateComponents": ApplePayDateComponents.keySchema,
    ])
}

/// `ApplePayShippingMethod` (§1.5).
public struct ApplePayShippingMethod: Codable, Hashable, Sendable {
    /// Apple's `label` member.
    public var label: String
    /// Apple's `detail` member.
    public var detail: String
    /// Non-negative decimal string.
    public var amount: String
    /// Tender's key for the method; not shown.
    public var identifier: String
    /// v12 delivery window.
    public var dateComponentsRange: ApplePayDateComponentsRange?
    /// v13, WebKit-only: Tender also always puts the selected method first.
    public var selected: Bool?

    /// A shipping method.
    public init(label: String, detail: String, amount: String, identifier: String,
                dateComponentsRange: ApplePayDateComponentsRange? = nil, selected: Bool? = nil) {
        self.label = label
        self.detail = detail
        self.amount = amount
        self.identifier = identifier
        self.dateComponentsRange = dateComponentsRange
        self.selected = selected
    }
}

/// `ApplePayRecurringPaymentRequest` (§2.1, v14).
public struct ApplePayRecurringPaymentRequest: Codable, Hashable, Sendable {
    /// Apple's `paymentDescription` member.
    public var paymentDescription: String
    /// `paymentTiming` must be `recurring`.
    public var regularBilling: ApplePayLineItem
    /// `paymentTiming` must be `recurring`.
    public var trialBilling: ApplePayLineItem?
    /// Apple's `billingAgreement` member.
    public var billingAgreement: String?
    /// Absolute https URL.
    public var managementURL: String
    /// Absolute https URL.
    public var tokenNotificationURL: String?

    static let keySchema = KeySchema.object([
        "paymentDescription": .leaf, "regularBilling": ApplePayLineItem.keySchema,
        "trialBilling": ApplePayLineItem.keySchema, "billingAgreement": .leaf, "managementURL": .leaf,
        "tokenNotificationURL": .leaf,
    ])
}

/// `ApplePayAutomaticReloadPaymentRequest` (§2.2, v14).
public struct ApplePayAutomaticReloadPaymentRequest: Codable, Hashable, Sendable {
    /// Apple's `paymentDescription` member.
    public var paymentDescription: String
    /// `paymentTiming` must be `automaticReload`; `amount` is the reload amount.
    public var automaticReloadBilling: ApplePayLineItem
    /// Apple's `billingAgreement` member.
    public var billingAgreement: String?
    /// Apple's `managementURL` member.
    public var managementURL: String
    /// Apple's `tokenNotificationURL` member.
    public var tokenNotificationURL: String?

    static let keySchema = KeySchema.object([
        "paymentDescription": .leaf, "automaticReloadBilling": ApplePayLineItem.keySchema,
        "billingAgreement": .leaf, "managementURL": .leaf, "tokenNotificationURL": .leaf,
    ])
}

/// `ApplePayDeferredPaymentRequest` (§2.3).
public struct ApplePayDeferredPaymentRequest: Codable, Hashable, Sendable {
    /// Apple's `billingAgreement` member.
    public var billingAgreement: String?
    /// `paymentTiming` must be `deferred` with a `deferredPaymentDate`.
    public var deferredBilling: ApplePayLineItem
    /// Apple's `freeCancellationDate` member.
    public var freeCancellationDate: Timestamp?
    /// IANA time zone; present iff `freeCancellationDate` is.
    public var freeCancellationDateTimeZone: String?
    /// Apple's `managementURL` member.
    public var managementURL: String
    /// Apple's `paymentDescription` member.
    public var paymentDescription: String
    /// Apple's `tokenNotificationURL` member.
    public var tokenNotificationURL: String?

    static let keySchema = KeySchema.object([
        "billingAgreement": .leaf, "deferredBilling": ApplePayLineItem.keySchema,
        "freeCancellationDate": .leaf, "freeCancellationDateTimeZone": .leaf, "managementURL": .leaf,
        "paymentDescription": .leaf, "tokenNotificationURL": .leaf,
    ])
}

/// `ApplePayPaymentTokenContext` (§2.4, v14): one sub-merchant's share of a multi-token payment.
public struct ApplePayPaymentTokenContext: Codable, Hashable, Sendable {
    /// Apple's `merchantIdentifier` member.
    public var merchantIdentifier: String
    /// Apple's `externalIdentifier` member.
    public var externalIdentifier: String
    /// Apple's `merchantName` member.
    public var merchantName: String
    /// Apple's `merchantDomain` member.
    public var merchantDomain: String?
    /// Decimal string, > 0; the sum over contexts must not exceed the total.
    public var amount: String

    static let keySchema = KeySchema.object([
        "merchantIdentifier": .leaf, "externalIdentifier": .leaf, "merchantName": .leaf,
        "merchantDomain": .leaf, "amount": .leaf,
    ])
}

/// `ApplePayDisbursementRequest` (WebKit 2024; payouts, carried for completeness).
public struct ApplePayDisbursementRequest: Codable, Hashable, Sendable {
    /// Apple's `requiredRecipientContactFields` member.
    public var requiredRecipientContactFields: [ApplePayContactField]?
}

/// `ApplePayPaymentContact` (§1.2). Produced by Apple: decoded leniently (unknown keys ignored).
public struct ApplePayPaymentContact: Codable, Hashable, Sendable {
    /// Apple's `phoneNumber` member.
    public var phoneNumber: String?
    /// Apple's `emailAddress` member.
    public var emailAddress: String?
    /// Apple's `givenName` member.
    public var givenName: String?
    /// Apple's `familyName` member.
    public var familyName: String?
    /// Apple's `phoneticGivenName` member.
    public var phoneticGivenName: String?
    /// Apple's `phoneticFamilyName` member.
    public var phoneticFamilyName: String?
    /// Apple's `addressLines` member.
    public var addressLines: [String]?
    /// Apple's `subLocality` member.
    public var subLocality: String?
    /// Apple's `locality` member.
    public var locality: String?
    /// Apple's `postalCode` member.
    public var postalCode: String?
    /// Apple's `subAdministrativeArea` member.
    public var subAdministrativeArea: String?
    /// Apple's `administrativeArea` member.
    public var administrativeArea: String?
    /// Apple's `country` member.
    public var country: String?
    /// Apple's `countryCode` member.
    public var countryCode: String?

    /// A contact; every member optional (redacted contacts carry only a few).
    public init(phoneNumber: String? = nil, emailAddress: String? = nil, givenName: String? = nil,
                familyName: String? = nil, phoneticGivenName: String? = nil, phoneticFamilyName: String? = nil,
                addressLines: [String]? = nil, subLocality: String? = nil, locality: String? = nil,
                postalCode: String? = nil, subAdministrativeArea: String? = nil, administrativeArea: String? = nil,
                country: String? = nil, countryCode: String? = nil) {
        self.phoneNumber = phoneNumber
        self.emailAddress = emailAddress
        self.givenName = givenName
        self.familyName = familyName
        self.phoneticGivenName = phoneticGivenName
        self.phoneticFamilyName = phoneticFamilyName
        self.addressLines = addressLines
        self.subLocality = subLocality
        self.locality = locality
        self.postalCode = postalCode
        self.subAdministrativeArea = subAdministrativeArea
        self.administrativeArea = administrativeArea
        self.country = country
        self.countryCode = countryCode
    }
}

/// `ApplePayPaymentRequest` (§1.1): what a page passes to `new ApplePaySession(version, request)`.
public struct ApplePayPaymentRequest: Codable, Hashable, Sendable {
    // ApplePayRequestBase
    /// WebKit-only v15+ feature flags.
    public var features: [String]?
    /// Apple's `merchantCapabilities` member.
    public var merchantCapabilities: [ApplePayMerchantCapability]
    /// Apple's `supportedNetworks` member.
    public var supportedNetworks: [ApplePayNetwork]
    /// ISO 3166-1 alpha-2 of the merchant.
    public var countryCode: String
    /// Apple's `requiredBillingContactFields` member.
    public var requiredBillingContactFields: [ApplePayContactField]?
    /// Apple's `billingContact` member.
    public var billingContact: ApplePayPaymentContact?
    /// Apple's `requiredShippingContactFields` member.
    public var requiredShippingContactFields: [ApplePayContactField]?
    /// Apple's `shippingContact` member.
    public var shippingContact: ApplePayPaymentContact?
    /// Base64; binds the token to this checkout session (§1.6).
    public var applicationData: String?
    /// Card-issuing countries (v3+).
    public var supportedCountries: [String]?
    /// Apple's `supportsCouponCode` member.
    public var supportsCouponCode: Bool?
    /// Apple's `couponCode` member.
    public var couponCode: String?
    /// Apple's `shippingContactEditingMode` member.
    public var shippingContactEditingMode: ApplePayShippingContactEditingMode?
    /// Apple's `applePayLaterAvailability` member.
    public var applePayLaterAvailability: ApplePayLaterAvailability?
    /// WebKit conditional, undocumented.
    public var merchantCategoryCode: String?
    // ApplePayPaymentRequest
    /// Computed by Tender: label = merchant display name, amount = Σ final line items.
    public var total: ApplePayLineItem
    /// Apple's `lineItems` member.
    public var lineItems: [ApplePayLineItem]?
    /// ISO 4217 alphabetic.
    public var currencyCode: String
    /// Apple's `shippingType` member.
    public var shippingType: ApplePayShippingType?
    /// The selected method first.
    public var shippingMethods: [ApplePayShippingMethod]?
    /// Apple's `recurringPaymentRequest` member.
    public var recurringPaymentRequest: ApplePayRecurringPaymentRequest?
    /// Apple's `automaticReloadPaymentRequest` member.
    public var automaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest?
    /// Apple's `multiTokenContexts` member.
    public var multiTokenContexts: [ApplePayPaymentTokenContext]?
    /// Apple's `deferredPaymentRequest` member.
    public var deferredPaymentRequest: ApplePayDeferredPaymentRequest?
    /// Apple's `disbursementRequest` member.
    public var disbursementRequest: ApplePayDisbursementRequest?

    /// Every member name Apple defines for this dictionary (rule 30).
    public static let appleKeys: Set<String> = [
        "features", "merchantCapabilities", "supportedNetworks", "countryCode", "requiredBillingContactFields",
        "billingContact", "requiredShippingContactFields", "shippingContact", "applicationData",
        "supportedCountries", "installmentConfiguration", "supportsCouponCode", "couponCode",
        "shippingContactEditingMode", "applePayLaterAvailability", "merchantCategoryCode", "total", "lineItems",
        "currencyCode", "shippingType", "shippingMethods", "recurringPaymentRequest",
        "automaticReloadPaymentRequest", "multiTokenContexts", "deferredPaymentRequest", "disbursementRequest",
    ]
}
