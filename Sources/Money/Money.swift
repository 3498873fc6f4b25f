/// An amount of money: signed `Int64` minor units plus its ISO 4217 currency.
///
/// Arithmetic reports overflow by throwing `amount_overflow`; combining two currencies is a
/// programming error and traps, since no caller can recover a meaningful sum from it.
public struct Money: Hashable, Sendable, CustomStringConvertible {
    /// Signed amount in minor units (cents for USD, yen for JPY, fils for KWD).
    public let amountMinor: Int64
    /// The currency the minor units belong to.
    public let currency: Currency

    /// Creates money from minor units.
    public init(amountMinor: Int64, currency: Currency) {
        self.amountMinor = amountMinor
        self.currency = currency
    }

    /// Parses a decimal string in `currency` (see `Currency.parseAmount`).
    public init(parsing text: String, currency: Currency, allowNegative: Bool = false) throws(MoneyError) {
        self.amountMinor = try currency.parseAmount(text, allowNegative: allowNegative)
        self.currency = currency
    }

    /// Zero in `currency`.
    public static func zero(_ currency: Currency) -> Money { Money(amountMinor: 0, currency: currency) }

    /// The decimal string with exactly the currency's digits.
    public var decimalString: String { currency.formatAmount(amountMinor) }

    /// `"9.99 USD"`.
    public var description: String { "\(decimalString) \(currency.code)" }

    /// Sum; throws `amount_overflow`. Traps if the currencies differ.
    public func adding(_ other: Money) throws(MoneyError) -> Money {
        precondition(currency == other.currency, "adding \(other.currency) to \(currency)")
        let (sum, overflow) = amountMinor.addingReportingOverflow(other.amountMinor)
        if overflow { throw MoneyError(.amountOverflow, detail: "sum") }
        return Money(amountMinor: sum, currency: currency)
    }

    /// Difference; throws `amount_overflow`. Traps if the currencies differ.
    public func subtracting(_ other: Money) throws(MoneyError) -> Money {
        precondition(currency == other.currency, "subtracting \(other.currency) from \(currency)")
        let (difference, overflow) = amountMinor.subtractingReportingOverflow(other.amountMinor)
        if overflow { throw MoneyError(.amountOverflow, detail: "difference") }
        return Money(amountMinor: difference, currency: currency)
    }

    /// Product with an integer quantity; throws `amount_overflow`.
    public func multiplied(by quantity: Int64) throws(MoneyError) -> Money {
        let (product, overflow) = amountMinor.multipliedReportingOverflow(by: quantity)
        if overflow { throw MoneyError(.amountOverflow, detail: "product") }
        return Money(amountMinor: product, currency: currency)
    }

    /// Sum of minor-unit amounts in one currency; throws `amount_overflow`.
    public static func sum(_ amountsMinor: some Sequence<Int64>) throws(MoneyError) -> Int64 {
        var total: Int64 = 0
        for amount in amountsMinor {
            let (next, overflow) = total.addingReportingOverflow(amount)
            if overflow { throw MoneyError(.amountOverflow, detail: "sum") }
            total = next
        }
        return total
    }
}

/// Percentages for taxes and discounts, in basis points (1 bp = 0.01 %), integer math only.
///
/// The one rounding rule of Tender: a percentage of an amount is computed exactly
/// (`amount × bp / 10 000` in 128-bit) and rounded once to the nearest minor unit, **half away
/// from zero** ("commercial rounding": 0.5 ¢ → 1 ¢, −0.5 ¢ → −1 ¢). Each tax or discount line is
/// rounded once and the total is the sum of rounded lines (reference §5.4).
public enum Percent {
    /// Largest accepted rate: 100 % (a discount or tax above the whole amount is a configuration error).
    public static let basisPointsMax: Int64 = 10_000

    /// `amountMinor × basisPoints / 10 000`, rounded half away from zero.
    /// Throws `rate_out_of_range` outside 0…`basisPointsMax`; the result always fits since rate ≤ 100 %.
    public static func of(_ amountMinor: Int64, basisPoints: Int64) throws(MoneyError) -> Int64 {
        guard basisPoints >= 0 && basisPoints <= basisPointsMax else {
            throw MoneyError(.rateOutOfRange, detail: String(basisPoints))
        }
        let product = Int128(amountMinor) * Int128(basisPoints)
        let (quotient, remainder) = product.quotientAndRemainder(dividingBy: 10_000)
        var rounded = quotient
        if remainder.magnitude * 2 >= 10_000 {
            rounded += product < 0 ? -1 : 1
        }
        // |rounded| ≤ |amountMinor| because basisPoints ≤ 10 000, so the conversion cannot fail.
        return Int64(rounded)
    }
}
