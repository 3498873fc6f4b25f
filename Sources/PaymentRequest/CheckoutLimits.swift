/// Every bound on what a cart may hold, in one value with documented defaults (STYLE: limits).
public struct CheckoutLimits: Codable, Hashable, Sendable {
    /// Cart line items (the priced request adds at most discount, shipping and tax lines). Default 100.
    public var lineItemsMax: Int
    /// Shipping methods offered. Default 20.
    public var shippingMethodsMax: Int
    /// Characters in any label shown on the sheet (items, methods, total). Default 128.
    public var labelLengthMax: Int
    /// Characters in other free text (shipping detail, payment description, billing agreement). Default 512.
    public var textLengthMax: Int
    /// Characters in a shipping method identifier or coupon code. Default 64.
    public var identifierLengthMax: Int
    /// Characters in a URL (managementURL, tokenNotificationURL). Default 2048.
    public var urlLengthMax: Int
    /// `metadata` entries. Default 20.
    public var metadataEntriesMax: Int
    /// Characters in a metadata key. Default 40.
    public var metadataKeyLengthMax: Int
    /// Characters in a metadata value. Default 500.
    public var metadataValueLengthMax: Int
    /// `multiTokenContexts` entries. Default 10.
    public var multiTokenContextsMax: Int
    /// Decoded bytes of `applicationData` (rule 20). Default 1024.
    public var applicationDataBytesMax: Int
    /// Shortest session lifetime. Default 300 s.
    public var expiresInSecondsMin: Int64
    /// Longest session lifetime. Default 86 400 s (24 h, as Stripe and Adyen cap theirs).
    public var expiresInSecondsMax: Int64
    /// Lifetime when the cart gives none. Default 3600 s.
    public var expiresInSecondsDefault: Int64
    /// Highest Apple Pay JS version Tender knows (reference §1.3: 15 is the last number). Default 15.
    public var apiVersionMax: Int
    /// Lowest version Tender picks when the cart gives none (`CheckoutBuilder.lowestAPIVersion` goes
    /// higher for the features the cart uses): 3, the first with update dictionaries and errors.
    public var apiVersionDefault: Int

    /// The documented defaults.
    public init(lineItemsMax: Int = 100, shippingMethodsMax: Int = 20, labelLengthMax: Int = 128,
                textLengthMax: Int = 512, identifierLengthMax: Int = 64, urlLengthMax: Int = 2048,
                metadataEntriesMax: Int = 20, metadataKeyLengthMax: Int = 40, metadataValueLengthMax: Int = 500,
                multiTokenContextsMax: Int = 10, applicationDataBytesMax: Int = 1024,
                expiresInSecondsMin: Int64 = 300, expiresInSecondsMax: Int64 = 86_400,
                expiresInSecondsDefault: Int64 = 3600, apiVersionMax: Int = 15, apiVersionDefault: Int = 3) {
        self.lineItemsMax = lineItemsMax
        self.shippingMethodsMax = shippingMethodsMax
        self.labelLengthMax = labelLengthMax
        self.textLengthMax = textLengthMax
        self.identifierLengthMax = identifierLengthMax
        self.urlLengthMax = urlLengthMax
        self.metadataEntriesMax = metadataEntriesMax
        self.metadataKeyLengthMax = metadataKeyLengthMax
        self.metadataValueLengthMax = metadataValueLengthMax
        self.multiTokenContextsMax = multiTokenContextsMax
        self.applicationDataBytesMax = applicationDataBytesMax
        self.expiresInSecondsMin = expiresInSecondsMin
        self.expiresInSecondsMax = expiresInSecondsMax
        self.expiresInSecondsDefault = expiresInSecondsDefault
        self.apiVersionMax = apiVersionMax
        self.apiVersionDefault = apiVersionDefault
    }

    /// The defaults.
    public static let standard = CheckoutLimits()
}
