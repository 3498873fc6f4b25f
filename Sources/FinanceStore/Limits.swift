/// Every bound FinanceStore enforces, with its default; the shell reads it from configuration.
public struct FinanceLimits: Sendable, Equatable {
    /// `limit` when a query omits it (docs/finance-store.md §5.2).
    public var queryLimitDefault = 100
    /// Largest accepted `limit` (Plaid/Stripe-like ceiling, §5.2).
    public var queryLimitMax = 500
    /// Largest accepted `offset`: deep offsets cost a scan; use history for bulk reads.
    public var queryOffsetMax = 10_000
    /// Most values in one comma-separated filter (`status=a,b,…`).
    public var queryListValuesMax = 32
    /// Most sort keys in `sort=`.
    public var querySortKeysMax = 4
    /// History page size when the request omits `limit` (§5.3).
    public var historyPageSizeDefault = 100
    /// Largest history page.
    public var historyPageSizeMax = 1_000
    /// Longest history token accepted before any decoding.
    public var historyTokenBytesMax = 256
    /// How long the change log keeps superseded rows and delete tombstones (≥ 35 days, §5.4).
    public var changeLogRetentionSeconds: Int64 = 35 * 86_400
    /// Longest a write transaction may stay open (statement and idle-in-transaction timeouts);
    /// a token's unread rows may have been written this long before it was issued.
    public var writeTransactionMaxSeconds: Int64 = 15 * 60
    /// Tolerated clock difference between servers for token issue times.
    public var clockSkewMaxSeconds: Int64 = 5 * 60
    /// Longest business id (payment, refund, payout…) in bytes.
    public var eventIDBytesMax = 128
    /// Longest free text (processor name, bank reference, note) in bytes.
    public var eventTextBytesMax = 140

    /// The documented defaults.
    public init() {}
}
