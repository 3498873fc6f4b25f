// The one file that stands between FinanceStore and the Money module: FinanceStore's currencies,
// exponents and decimal strings come from `Money.Currency`, so Tender has a single ISO 4217 table
// (openapi.yaml: amounts are decimal strings with exactly the currency's minor digits). Money's
// errors become FinanceStore's own codes here, so FinanceStore keeps one error type.

import Money

/// A currency as FinanceStore sees it: `Money.Currency` with FinanceStore's error codes.
struct FinanceCurrency: Hashable, Sendable {
    /// The Money module's currency.
    let currency: Currency

    /// ISO 4217 alphabetic code, upper case.
    var code: String { currency.code }
    /// Digits after the decimal point (2 for EUR, 0 for JPY, 3 for KWD).
    var minorUnits: Int { currency.minorUnits }

    /// Looks `code` up; unknown or unpayable codes are refused rather than guessed (money needs an exponent).
    init(code: String) throws(FinanceError) {
        do {
            currency = try Currency(code: code)
        } catch {
            throw FinanceError(.currencyUnknown, field: "currencyCode", detail: String(code.prefix(8)))
        }
    }

    /// Formats minor units with exactly `minorUnits` digits (500 JPY → "500").
    func formatAmount(_ amountMinor: Int64) -> String {
        currency.formatAmount(amountMinor)
    }

    /// Parses a non-negative decimal string with exactly `minorUnits` fraction digits, never via Double.
    func parseAmount(_ text: String) throws(FinanceError) -> Int64 {
        do {
            return try currency.parseAmount(text)
        } catch {
            switch error.code {
            case .amountOverflow: throw FinanceError(.amountOverflow, field: "amount")
            default: throw FinanceError(.amountInvalid, field: "amount", detail: error.code.rawValue)
            }
        }
    }
}
