import Money

/// The part of a shipping address pricing uses: what Apple reveals before authorization (§3.2).
/// Names and street lines are deliberately not kept.
public struct ShippingAddress: Codable, Hashable, Sendable {
    /// Uppercase ISO alpha-2.
    public var countryCode: String
    /// `administrativeArea`.
    public var administrativeArea: String?
    /// `locality`.
    public var locality: String?
    /// `postalCode`.
    public var postalCode: String?

    /// An address.
    public init(countryCode: String, administrativeArea: String? = nil, locality: String? = nil,
                postalCode: String? = nil) {
        self.countryCode = countryCode
        self.administrativeArea = administrativeArea
        self.locality = locality
        self.postalCode = postalCode
    }

    /// The redacted part of an Apple contact; nil when it has no usable country code.
    /// Apple sometimes reports `countryCode` in lowercase, so ASCII letters are uppercased first.
    public init?(contact: ApplePayPaymentContact) {
        guard let raw = contact.countryCode, raw.utf8.count == 2,
              let country = try? Country(code: raw.uppercased()) else { return nil }
        self.init(countryCode: country.code, administrativeArea: contact.administrativeArea,
                  locality: contact.locality, postalCode: contact.postalCode)
    }
}

/// Everything fixed at creation that pricing depends on: a snapshot, so recalculation on a stored
/// session gives the same answer whatever the merchant changes later (rule 37).
public struct CheckoutInputs: Codable, Hashable, Sendable {
    /// The cart as the merchant sent it.
    public var cart: Cart
    /// The merchant profile at creation.
    public var merchant: MerchantProfile
    /// The tax rules at creation.
    public var taxRules: [TaxRule]
    /// Base64 `applicationData` put in the request (rule 20); the shell stores its SHA-256 hex.
    public var applicationData: String?
    /// The limits the cart was checked against.
    public var limits: CheckoutLimits
    /// Creation time.
    public var createdAt: Timestamp
}

/// What the shopper has chosen so far.
public struct CheckoutSelection: Codable, Hashable, Sendable {
    /// Identifier of the selected shipping method; nil when none is offered or none ships to the address.
    public var shippingMethodIdentifier: String?
    /// The last (redacted) shipping address, if any.
    public var shippingAddress: ShippingAddress?
    /// The coupon code as entered ("" = none).
    public var couponCode: String
    /// The coupon in force, if the code was valid.
    public var coupon: Coupon?
}

/// A validated, priced checkout: the Apple Pay request Tender shows, the total and the inputs that made it.
/// Codable so the shell can store it per session version and recalculate from it later.
public struct PricedCheckout: Codable, Hashable, Sendable {
    /// The creation snapshot.
    public let inputs: CheckoutInputs
    /// The shopper's current choices.
    public let selection: CheckoutSelection
    /// Ready for `new ApplePaySession(apiVersion, paymentRequest)`; only Apple's keys.
    public let paymentRequest: ApplePayPaymentRequest
    /// The total in minor units (= Σ final line items).
    public let totalMinor: Int64
    /// The cart currency.
    public let currency: Currency
    /// The Apple Pay JS version validated against.
    public let apiVersion: Int
    /// When the session stops accepting updates and payments.
    public let expiresAt: Timestamp
    /// Methods offered for the current address, selected first (what `newShippingMethods` shows).
    public let availableShippingMethods: [ApplePayShippingMethod]
    /// The discount of the applied coupon, in minor units (0 when none).
    public let discountMinor: Int64
    /// The tax line, in minor units (nil when no tax rule applies).
    public let taxMinor: Int64?

    /// The total as Apple's line item.
    public var total: ApplePayLineItem { paymentRequest.total }
    /// The line items shown, as Apple's line items.
    public var lineItems: [ApplePayLineItem] { paymentRequest.lineItems ?? [] }
    /// The merchant's metadata from the cart.
    public var metadata: [String: String] { inputs.cart.metadata ?? [:] }
}

/// A recalculation's result: the new state to store (as the next session version) and Apple's update dictionary.
public struct Recalculation<Update: ApplePayDetailsUpdate>: Sendable {
    /// Store this as the next version.
    public let checkout: PricedCheckout
    /// Return this JSON to the page.
    public let update: Update
}
