/// The one error type of the Money module: a stable machine `code` plus the offending input's context.
///
/// Codes are part of Tender's contract (they surface in `problem+json` bodies) and never change meaning.
public struct MoneyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Stable snake_case reason codes.
    public enum Code: String, Sendable, CaseIterable {
        /// Not a plain decimal: empty, whitespace, `+`, exponent, stray characters, leading zeros, `.5`, `5.`.
        case amountMalformed = "amount_malformed"
        /// The fraction does not have exactly the currency's minor-unit digits.
        case amountWrongDecimals = "amount_wrong_decimals"
        /// `-0`, `-0.00`: a signed zero has no meaning in a payment.
        case amountNegativeZero = "amount_negative_zero"
        /// A leading `-` where negatives are not allowed.
        case amountNegative = "amount_negative"
        /// The value, or the result of arithmetic on it, does not fit in `Int64` minor units.
        case amountOverflow = "amount_overflow"
        /// Above the ceiling the caller accepts (`Currency.acceptedAmountMaxMinor`): no real payment has it.
        case amountTooLarge = "amount_too_large"
        /// Not an active ISO 4217 code.
        case currencyUnknown = "currency_unknown"
        /// An ISO 4217 code with no minor units (metals, funds units, test, "no currency"): never payable.
        case currencyNotPayable = "currency_not_payable"
        /// Not a current ISO 3166-1 alpha-2 code.
        case countryUnknown = "country_unknown"
        /// A percentage outside the accepted basis-point range.
        case rateOutOfRange = "rate_out_of_range"
    }

    /// Machine-readable reason.
    public let code: Code
    /// Short context (the rejected code or a length); never contains secrets.
    public let detail: String

    /// Creates an error with `code` and optional `detail`.
    public init(_ code: Code, detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// `code` and detail, for logs.
    public var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }
}
