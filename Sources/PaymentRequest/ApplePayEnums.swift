// Apple Pay JS enumerations as open string values: decoding never fails on an unknown value, so the
// validator can report it as a RequestIssue with its path and rule instead of a generic decode error.

/// An Apple Pay JS string enumeration whose known values are listed.
public protocol AppleStringEnum: RawRepresentable, Codable, Hashable, Sendable where RawValue == String {
    /// Every value Apple defines (reference §1–§3).
    static var knownValues: [Self] { get }
    /// Wraps any string.
    init(rawValue: String)
}

extension AppleStringEnum {
    /// True when the value is one Apple defines.
    public var isKnown: Bool { Self.knownValues.contains(self) }
}

/// `ApplePayLineItemType` (§1.4).
public struct ApplePayLineItemType: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Known cost, counted in the total.
    public static let final = Self(rawValue: "final")
    /// Estimated cost; the sheet shows "pending".
    public static let pending = Self(rawValue: "pending")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.final, .pending]
}

/// `ApplePayPaymentTiming` (§1.4, v12).
public struct ApplePayPaymentTiming: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Charged now (default).
    public static let immediate = Self(rawValue: "immediate")
    /// Charged on a schedule.
    public static let recurring = Self(rawValue: "recurring")
    /// Charged at a later date.
    public static let deferred = Self(rawValue: "deferred")
    /// Charged when a balance falls below a threshold.
    public static let automaticReload = Self(rawValue: "automaticReload")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.immediate, .recurring, .deferred, .automaticReload]
}

/// `ApplePayRecurringPaymentDateUnit` (§1.4).
public struct ApplePayRecurringPaymentDateUnit: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"year"`.
    public static let year = Self(rawValue: "year")
    /// `"month"`.
    public static let month = Self(rawValue: "month")
    /// `"day"`.
    public static let day = Self(rawValue: "day")
    /// `"hour"`.
    public static let hour = Self(rawValue: "hour")
    /// `"minute"`.
    public static let minute = Self(rawValue: "minute")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.year, .month, .day, .hour, .minute]
}

/// `ApplePayShippingType` (§1.2).
public struct ApplePayShippingType: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"shipping"`.
    public static let shipping = Self(rawValue: "shipping")
    /// `"delivery"`.
    public static let delivery = Self(rawValue: "delivery")
    /// `"storePickup"`.
    public static let storePickup = Self(rawValue: "storePickup")
    /// `"servicePickup"`.
    public static let servicePickup = Self(rawValue: "servicePickup")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.shipping, .delivery, .storePickup, .servicePickup]
}

/// `ApplePayContactField` (§1.2).
public struct ApplePayContactField: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"email"`.
    public static let email = Self(rawValue: "email")
    /// `"name"`.
    public static let name = Self(rawValue: "name")
    /// `"phone"`.
    public static let phone = Self(rawValue: "phone")
    /// `"postalAddress"`.
    public static let postalAddress = Self(rawValue: "postalAddress")
    /// v3+.
    public static let phoneticName = Self(rawValue: "phoneticName")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.email, .name, .phone, .postalAddress, .phoneticName]
}

/// `ApplePayMerchantCapability` (§1.2).
public struct ApplePayMerchantCapability: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Required by Apple ("must be supplied").
    public static let supports3DS = Self(rawValue: "supports3DS")
    /// China UnionPay only.
    public static let supportsEMV = Self(rawValue: "supportsEMV")
    /// `"supportsCredit"`.
    public static let supportsCredit = Self(rawValue: "supportsCredit")
    /// `"supportsDebit"`.
    public static let supportsDebit = Self(rawValue: "supportsDebit")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.supports3DS, .supportsEMV, .supportsCredit, .supportsDebit]
}

/// `ApplePayShippingContactEditingMode` (§1.2; `available` per Apple's docs, `enabled` per WebKit).
public struct ApplePayShippingContactEditingMode: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"available"`.
    public static let available = Self(rawValue: "available")
    /// `"enabled"`.
    public static let enabled = Self(rawValue: "enabled")
    /// `"storePickup"`.
    public static let storePickup = Self(rawValue: "storePickup")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.available, .enabled, .storePickup]
}

/// `ApplePayLaterAvailability` (§2.5).
public struct ApplePayLaterAvailability: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"available"`.
    public static let available = Self(rawValue: "available")
    /// `"unavailableItemIneligible"`.
    public static let unavailableItemIneligible = Self(rawValue: "unavailableItemIneligible")
    /// `"unavailableRecurringTransaction"`.
    public static let unavailableRecurringTransaction = Self(rawValue: "unavailableRecurringTransaction")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [.available, .unavailableItemIneligible, .unavailableRecurringTransaction]
}

/// `ApplePayErrorCode` (§3.3).
public struct ApplePayErrorCode: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"shippingContactInvalid"`.
    public static let shippingContactInvalid = Self(rawValue: "shippingContactInvalid")
    /// `"billingContactInvalid"`.
    public static let billingContactInvalid = Self(rawValue: "billingContactInvalid")
    /// `"addressUnserviceable"`.
    public static let addressUnserviceable = Self(rawValue: "addressUnserviceable")
    /// `"couponCodeInvalid"`.
    public static let couponCodeInvalid = Self(rawValue: "couponCodeInvalid")
    /// `"couponCodeExpired"`.
    public static let couponCodeExpired = Self(rawValue: "couponCodeExpired")
    /// `"unknown"`.
    public static let unknown = Self(rawValue: "unknown")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [
        .shippingContactInvalid, .billingContactInvalid, .addressUnserviceable,
        .couponCodeInvalid, .couponCodeExpired, .unknown,
    ]
}

/// `ApplePayErrorContactField` (§3.3).
public struct ApplePayErrorContactField: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `"phoneNumber"`.
    public static let phoneNumber = Self(rawValue: "phoneNumber")
    /// `"emailAddress"`.
    public static let emailAddress = Self(rawValue: "emailAddress")
    /// `"name"`.
    public static let name = Self(rawValue: "name")
    /// `"phoneticName"`.
    public static let phoneticName = Self(rawValue: "phoneticName")
    /// `"postalAddress"`.
    public static let postalAddress = Self(rawValue: "postalAddress")
    /// `"addressLines"`.
    public static let addressLines = Self(rawValue: "addressLines")
    /// `"locality"`.
    public static let locality = Self(rawValue: "locality")
    /// `"subLocality"`.
    public static let subLocality = Self(rawValue: "subLocality")
    /// `"postalCode"`.
    public static let postalCode = Self(rawValue: "postalCode")
    /// `"administrativeArea"`.
    public static let administrativeArea = Self(rawValue: "administrativeArea")
    /// `"subAdministrativeArea"`.
    public static let subAdministrativeArea = Self(rawValue: "subAdministrativeArea")
    /// `"country"`.
    public static let country = Self(rawValue: "country")
    /// `"countryCode"`.
    public static let countryCode = Self(rawValue: "countryCode")
    /// Every value Apple defines.
    public static let knownValues: [Self] = [
        .phoneNumber, .emailAddress, .name, .phoneticName, .postalAddress, .addressLines, .locality,
        .subLocality, .postalCode, .administrativeArea, .subAdministrativeArea, .country, .countryCode,
    ]
}

/// A `supportedNetworks` value with the first Apple Pay JS version that accepts it (reference §1.3).
public struct ApplePayNetwork: AppleStringEnum {
    /// The string Apple Pay JS uses.
    public let rawValue: String
    /// Wraps any string; `isKnown` tells whether Apple defines it.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Case-sensitive network name → minimum `apiVersion` (§1.3 table).
    public static let minimumVersions: [String: Int] = [
        "amex": 1, "chinaUnionPay": 1, "discover": 1, "interac": 1, "masterCard": 1, "privateLabel": 1,
        "visa": 1, "jcb": 2, "cartesBancaires": 4, "eftpos": 4, "electron": 4, "maestro": 4, "vPay": 4,
        "elo": 5, "mada": 5, "girocard": 11, "mir": 11, "dankort": 13, "bancomat": 14, "bancontact": 14,
        "bankAxept": 15,
    ]
    /// Every value Apple defines.
    public static let knownValues: [Self] = minimumVersions.keys.sorted().map(Self.init(rawValue:))

    /// The first API version that accepts this network, or nil for an unknown name.
    public var minimumVersion: Int? { Self.minimumVersions[rawValue] }

    /// `"visa"`.
    public static let visa = Self(rawValue: "visa")
    /// `"masterCard"`.
    public static let masterCard = Self(rawValue: "masterCard")
    /// `"amex"`.
    public static let amex = Self(rawValue: "amex")
    /// `"discover"`.
    public static let discover = Self(rawValue: "discover")
}
