/// The one error type of FinanceStore: a stable machine `code`, the offending field, and log-only context.
///
/// Codes surface in `problem+json` bodies (openapi.yaml, docs/finance-store.md §5.4) and never change meaning.
/// `reason` refines `history_token_invalid` for logs only: clients always see the bare code so a forger
/// learns nothing about which check failed.
public struct FinanceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Stable snake_case reason codes.
    public enum Code: String, Sendable, CaseIterable {
        /// A history token is malformed, forged, foreign to the scope, from another epoch or expired (HTTP 410).
        case historyTokenInvalid = "history_token_invalid"
        /// The merchant's finance data is switched off (FinanceKit `dataRestricted(.financialData)`, HTTP 403).
        case dataRestricted = "data_restricted"
        /// A query-string parameter is unknown, repeated, empty or out of range (HTTP 400).
        case queryParameterInvalid = "query_parameter_invalid"
        /// A posting's debits and credits differ in some currency, or a leg is not positive.
        case unbalancedPosting = "unbalanced_posting"
        /// Not an ISO 4217 code FinanceStore knows the exponent of.
        case currencyUnknown = "currency_unknown"
        /// A decimal amount string is malformed, negative or has the wrong number of digits.
        case amountInvalid = "amount_invalid"
        /// A sum of minor units does not fit in `Int64`.
        case amountOverflow = "amount_overflow"
        /// A business event carries an unusable value (empty id, non-positive amount, over-long text).
        case eventInvalid = "event_invalid"
        /// The same event id was applied before with different content (idempotency conflict).
        case eventConflict = "event_conflict"
        /// A status change names a posting that does not exist (yet): transient, retry after the insert.
        case postingNotFound = "posting_not_found"
        /// A status change that FinanceKit's lifecycle forbids (e.g. booked → rejected).
        case statusTransitionInvalid = "status_transition_invalid"
        /// Change-log rows handed to the page builder are out of order or incomplete (shell bug).
        case changeLogInvalid = "change_log_invalid"
        /// A JSON value (id, timestamp, enum) could not be decoded.
        case valueInvalid = "value_invalid"
    }

    /// Why a history token was refused; written to logs, never to clients.
    public enum TokenRejection: String, Sendable, CaseIterable {
        /// Too long, bad prefix, bad base64url or wrong length.
        case malformed
        /// A version this build does not read.
        case unsupportedVersion = "unsupported_version"
        /// Signed with a key id no longer (or never) accepted.
        case unknownKey = "unknown_key"
        /// The MAC does not verify.
        case forged
        /// Genuine, but minted for another merchant, resource kind or account.
        case foreignScope = "foreign_scope"
        /// Genuine, but from before a logical restore (the xid counter changed).
        case epochChanged = "epoch_changed"
        /// Issued later than `now` plus the allowed clock skew.
        case issuedInFuture = "issued_in_future"
        /// Older than the change log's retention: rows it still needs may be gone.
        case expired
        /// A v1 (change-log) token whose delivered rows are not a prefix of the commit-ordered feed, so
        /// no feed position resumes it exactly (docs/finance-feed.md).
        case notInFeed = "not_in_feed"
    }

    /// Machine-readable reason.
    public let code: Code
    /// The request field or parameter at fault, if any.
    public let field: String?
    /// Short context for logs (a limit, a length); never secrets or full tokens.
    public let detail: String
    /// Sub-reason for `history_token_invalid`; nil otherwise.
    public let tokenRejection: TokenRejection?

    /// Creates an error with `code` and optional context.
    public init(_ code: Code, field: String? = nil, detail: String = "", tokenRejection: TokenRejection? = nil) {
        self.code = code
        self.field = field
        self.detail = detail
        self.tokenRejection = tokenRejection
    }

    /// A `history_token_invalid` error with its log-only sub-reason.
    public static func tokenInvalid(_ rejection: TokenRejection) -> FinanceError {
        FinanceError(.historyTokenInvalid, field: "since", tokenRejection: rejection)
    }

    /// `code`, field, sub-reason and detail, for logs.
    public var description: String {
        var text = code.rawValue
        if let field { text += " field=\(field)" }
        if let tokenRejection { text += " reason=\(tokenRejection.rawValue)" }
        if !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}

/// The restriction analogue of FinanceKit's `dataRestricted`: refuse before any finance read.
public enum FinanceAccess {
    /// Throws `data_restricted` when the merchant's finance data is switched off (issue 6, item 6).
    public static func check(financeDataEnabled: Bool) throws(FinanceError) {
        guard financeDataEnabled else { throw FinanceError(.dataRestricted, detail: "financialData") }
    }
}
