import Money

/// A merchant's Apple Pay defaults: what a cart inherits when it does not say otherwise.
public struct MerchantProfile: Codable, Hashable, Sendable {
    /// Apple merchant identifier (`merchant.com.example`); used for merchant validation, not in the JS request.
    public var merchantIdentifier: String
    /// The total's label and the statement name (≤ 64 characters per Apple's merchant validation).
    public var displayName: String
    /// Networks in preference order; filtered to the cart's `apiVersion` when the cart gives none.
    public var supportedNetworks: [ApplePayNetwork]
    /// Capabilities; must contain `supports3DS` (rule 4).
    public var merchantCapabilities: [ApplePayMerchantCapability]
    /// Principal place of business (request `countryCode`, and the tax origin before an address is known).
    public var countryCode: Country
    /// Currencies the merchant may charge in (rule 3).
    public var currencies: [Currency]
    /// Registered web domains.
    public var domains: [String]

    /// A merchant profile.
    public init(merchantIdentifier: String, displayName: String, supportedNetworks: [ApplePayNetwork],
                merchantCapabilities: [ApplePayMerchantCapability], countryCode: Country, currencies: [Currency],
                domains: [String]) {
        self.merchantIdentifier = merchantIdentifier
        self.displayName = displayName
        self.supportedNetworks = supportedNetworks
        self.merchantCapabilities = merchantCapabilities
        self.countryCode = countryCode
        self.currencies = currencies
        self.domains = domains
    }
}

/// A sales-tax rate for a destination country, optionally one region (state/province) of it.
public struct TaxRule: Codable, Hashable, Sendable {
    /// Destination country.
    public var country: Country
    /// `administrativeArea` as Apple reports it (compared case-insensitively); nil = whole country.
    public var region: String?
    /// Rate in basis points (825 = 8.25 %), 0…10 000.
    public var rateBasisPoints: Int64
    /// Whether the shipping line is part of the taxable base.
    public var shippingTaxable: Bool

    /// A tax rule.
    public init(country: Country, region: String? = nil, rateBasisPoints: Int64, shippingTaxable: Bool) {
        self.country = country
        self.region = region
        self.rateBasisPoints = rateBasisPoints
        self.shippingTaxable = shippingTaxable
    }

    /// The rule for a destination: a region match wins over a country-wide rule; nil when none applies.
    public static func applicable(_ rules: [TaxRule], country: Country, region: String?) -> TaxRule? {
        let inCountry = rules.filter { $0.country == country }
        if let region, !region.isEmpty,
           let regional = inCountry.first(where: { $0.region.map { $0.lowercased() == region.lowercased() } ?? false }) {
            return regional
        }
        return inCountry.first { $0.region == nil }
    }
}

/// A merchant coupon (`POST /v1/coupons`), looked up by the shell and handed to the pricing core.
public struct Coupon: Codable, Hashable, Sendable {
    /// How much a coupon takes off the goods subtotal.
    public enum Kind: Codable, Hashable, Sendable {
        /// A percentage in basis points (1000 = 10 %), rounded by Tender's one rule (`Percent.of`).
        case percent(basisPoints: Int64)
        /// A fixed amount in the coupon's currency, capped at the goods subtotal.
        case fixed(amountMinor: Int64)
    }

    /// The code the shopper types.
    public var code: String
    /// Percent or fixed.
    public var kind: Kind
    /// Required for fixed coupons; a percent coupon with a currency applies only to that currency.
    public var currency: Currency?
    /// Unix seconds at which the coupon stops working; nil = never.
    public var expiresAtUnixSeconds: Int64?
    /// Goods subtotal (minor units, coupon currency or cart currency) the cart must reach.
    public var minimumSubtotalMinor: Int64?

    /// A coupon.
    public init(code: String, kind: Kind, currency: Currency? = nil, expiresAtUnixSeconds: Int64? = nil,
                minimumSubtotalMinor: Int64? = nil) {
        self.code = code
        self.kind = kind
        self.currency = currency
        self.expiresAtUnixSeconds = expiresAtUnixSeconds
        self.minimumSubtotalMinor = minimumSubtotalMinor
    }

    /// Why a coupon does or does not apply.
    public enum Outcome: Hashable, Sendable {
        /// Applies; the discount in minor units (≥ 0, ≤ subtotal).
        case applies(discountMinor: Int64)
        /// `now` is at or after `expiresAtUnixSeconds` → `couponCodeExpired`.
        case expired
        /// Subtotal below `minimumSubtotalMinor` → `couponCodeInvalid`.
        case belowMinimum
        /// A coupon in another currency → `couponCodeInvalid`.
        case currencyMismatch
        /// A rate outside 0…100 % or a negative amount: merchant data error → `couponCodeInvalid`.
        case misconfigured
    }

    /// Evaluates the coupon against a goods subtotal at `now` (the order of checks is the order above,
    /// so an expired coupon reads as expired even when it would also miss the minimum).
    public func evaluate(goodsSubtotalMinor: Int64, currency cartCurrency: Currency, now: Timestamp) -> Outcome {
        if let expiry = expiresAtUnixSeconds, now.unixSeconds >= expiry { return .expired }
        if let currency, currency != cartCurrency { return .currencyMismatch }
        if case .fixed = kind, currency == nil { return .currencyMismatch }
        if let minimum = minimumSubtotalMinor, goodsSubtotalMinor < minimum { return .belowMinimum }
        let base = max(goodsSubtotalMinor, 0)
        switch kind {
        case .percent(let basisPoints):
            guard let discount = try? Percent.of(base, basisPoints: basisPoints) else { return .misconfigured }
            return .applies(discountMinor: discount)
        case .fixed(let amountMinor):
            guard amountMinor >= 0 else { return .misconfigured }
            return .applies(discountMinor: min(amountMinor, base))
        }
    }
}
