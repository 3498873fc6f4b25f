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
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Known cost, counted in the total.
    public static let final = Self(rawValue: "final")
    /// Estimated cost; the sheet shows "pending".
    public static let pending = Self(rawValue: "pending")
    public static let knownValues: [Self] = [.final, .pending]
}

/// `ApplePayPaymentTiming` (§1.4, v12).
public struct ApplePayPaymentTiming: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Charged now (default).
    public static let immediate = Self(rawValue: "immediate")
    /// Charged on a schedule.
    public static let recurring = Self(rawValue: "recurring")
    /// Charged at a later date.
    public static let deferred = Self(rawValue: "deferred")
    /// Charged when a balance falls below a threshold.
    public static let automaticReload = Self(rawValue: "automaticReload")
    public static let knownValues: [Self] = [.immediate, .recurring, .deferred, .automaticReload]
}

/// `ApplePayRecurringPaymentDateUnit` (§1.4).
public struct ApplePayRecurringPaymentDateUnit: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let year = Self(rawValue: "year")
    public static let month = Self(rawValue: "month")
    public static let day = Self(rawValue: "day")
    public static let hour = Self(rawValue: "hour")
    public static let minute = Self(rawValue: "minute")
    public static let knownValues: [Self] = [.year, .month, .day, .hour, .minute]
}

/// `ApplePayShippingType` (§1.2).
public struct ApplePayShippingType: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let shipping = Self(rawValue: "shipping")
    public static let delivery = Self(rawValue: "delivery")
    public static let storePickup = Self(rawValue: "storePickup")
    public static let servicePickup = Self(rawValue: "servicePickup")
    public static let knownValues: [Self] = [.shipping, .delivery, .storePickup, .servicePickup]
}

/// `ApplePayContactField` (§1.2).
public struct ApplePayContactField: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let email = Self(rawValue: "email")
    public static let name = Self(rawValue: "name")
    public static let phone = Self(rawValue: "phone")
    public static let postalAddress = Self(rawValue: "postalAddress")
    /// v3+.
    public static let phoneticName = Self(rawValue: "phoneticName")
    public static let knownValues: [Self] = [.email, .name, .phone, .postalAddress, .phoneticName]
}

/// `ApplePayMerchantCapability` (§1.2).
public struct ApplePayMerchantCapability: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Required by Apple ("must be supplied").
    public static let supports3DS = Self(rawValue: "supports3DS")
    /// China UnionPay only.
    public static let supportsEMV = Self(rawValue: "supportsEMV")
    public static let supportsCredit = Self(rawValue: "supportsCredit")
    public static let supportsDebit = Self(rawValue: "supportsDebit")
    public static let knownValues: [Self] = [.supports3DS, .supportsEMV, .supportsCredit, .supportsDebit]
}

/// `ApplePayShippingContactEditingMode` (§1.2; `available` per Apple's docs, `enabled` per WebKit).
public struct ApplePayShippingContactEditingMode: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let available = Self(rawValue: "available")
    public static let enabled = Self(rawValue: "enabled")
    public static let storePickup = Self(rawValue: "storePickup")
    public static let knownValues: [Self] = [.available, .enabled, .storePickup]
}

/// `ApplePayLaterAvailability` (§2.5).
public struct ApplePayLaterAvailability: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let available = Self(rawValue: "available")
    public static let unavailableItemIneligible = Self(rawValue: "unavailableItemIneligible")
    public static let unavailableRecurringTransaction = Self(rawValue: "unavailableRecurringTransaction")
    public static let knownValues: [Self] = [.available, .unavailableItemIneligible, .unavailableRecurringTransaction]
}

/// `ApplePayErrorCode` (§3.3).
public struct ApplePayErrorCode: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let shippingContactInvalid = Self(rawValue: "shippingContactInvalid")
    public static let billingContactInvalid = Self(rawValue: "billingContactInvalid")
    public static let addressUnserviceable = Self(rawValue: "addressUnserviceable")
    public static let couponCodeInvalid = Self(rawValue: "couponCodeInvalid")
    public static let couponCodeExpired = Self(rawValue: "couponCodeExpired")
    public static let unknown = Self(rawValue: "unknown")
    public static let knownValues: [Self] = [
        .shippingContactInvalid, .billingContactInvalid, .addressUnserviceable,
        .couponCodeInvalid, .couponCodeExpired, .unknown,
    ]
}

/// `ApplePayErrorContactField` (§3.3).
public struct ApplePayErrorContactField: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let phoneNumber = Self(rawValue: "phoneNumber")
    public static let emailAddress = Self(rawValue: "emailAddress")
    public static let name = Self(rawValue: "name")
    public static let phoneticName = Self(rawValue: "phoneticName")
    public static let postalAddress = Self(rawValue: "postalAddress")
    public static let addressLines = Self(rawValue: "addressLines")
    public static let locality = Self(rawValue: "locality")
    public static let subLocality = Self(rawValue: "subLocality")
    public static let postalCode = Self(rawValue: "postalCode")
    public static let administrativeArea = Self(rawValue: "administrativeArea")
    public static let subAdministrativeArea = Self(rawValue: "subAdministrativeArea")
    public static let country = Self(rawValue: "country")
    public static let countryCode = Self(rawValue: "countryCode")
    public static let knownValues: [Self] = [
        .phoneNumber, .emailAddress, .name, .phoneticName, .postalAddress, .addressLines, .locality,
        .subLocality, .postalCode, .administrativeArea, .subAdministrativeArea, .country, .countryCode,
    ]
}

/// A `supportedNetworks` value with the first Apple Pay JS version that accepts it (reference §1.3).
public struct ApplePayNetwork: AppleStringEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Case-sensitive network name → minimum `apiVersion` (§1.3 table).
    public static let minimumVersions: [String: Int] = [
        "amex": 1, "chinaUnionPay": 1, "discover": 1, "interac": 1, "masterCard": 1, "privateLabel": 1,
        "visa": 1, "jcb": 2, "cartesBancaires": 4, "eftpos": 4, "electron": 4, "maestro": 4, "vPay": 4,
        "elo": 5, "mada": 5, "girocard": 11, "mir": 11, "dankort": 13, "bancomat": 14, "bancontact": 14,
        "bankAxept": 15,
    ]
    public static let knownValues: [Self] = minimumVersions.keys.sorted().map(Self.init(rawValue:))

    /// The first API version that accepts this network, or nil for an unknown name.
    public var minimumVersion: Int? { Self.minimumVersions[rawValue] }

    public static let visa = Self(rawValue: "visa")
    public static let masterCard = Self(rawValue: "masterCard")
    public static let amex = Self(rawValue: "amex")
    public static let discover = Self(rawValue: "discover")
}
