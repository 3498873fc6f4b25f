// The only file that knows about currencies and decimal amounts: it forwards to the `Money` module
// (ISO 4217 table, exact decimal parsing) and adds the one rule Money does not have, Adyen's
// shortened fractions ("98.8", "100" for EUR, docs/finance-store.md §4.1).
import Money

/// How many fraction digits a decimal amount may carry.
enum FractionDigitsRule {
    /// Exactly the currency's exponent (`generic`: "10.00" USD, "10" JPY).
    case exact
    /// Up to the currency's exponent, the integer part possibly omitted (`adyen-sdr` writes "98.8",
    /// "100" and ".11" for EUR).
    case atMost
}

/// Why a decimal amount was refused; mapped to a `ReconciliationError.Code` by the caller.
enum AmountProblem: Error, Equatable {
    case invalid
    case wrongDecimals
    case overflow

    var code: ReconciliationError.Code {
        switch self {
        case .invalid: .amountInvalid
        case .wrongDecimals: .amountWrongDecimals
        case .overflow: .amountOverflow
        }
    }
}

enum MoneySeam {
    /// The currency's minor-unit exponent, or nil for a code Money does not accept as payable.
    static func exponent(of currencyCode: String) -> Int? {
        (try? Currency(code: currencyCode))?.minorUnits
    }

    /// Parses `-?digits(.digits)?` exactly into minor units through `Currency.parseAmount`.
    ///
    /// The sign is taken off first because settlement files may write a signed zero (`-0.00`), which
    /// Money refuses for payment amounts; with `.atMost` a short fraction is padded with zeros so
    /// Money sees exactly the currency's digits.
    static func parseMinor(_ text: String, exponent: Int, rule: FractionDigitsRule)
        -> Result<Int64, AmountProblem> {
        guard let currency = currency(exponent: exponent) else { return .failure(.invalid) }
        var body = Substring(text)
        var negative = false
        if body.utf8.first == UInt8(ascii: "-") {
            negative = true
            body = body.dropFirst()
        }
        // The common case (an unsigned amount with exactly the currency's digits) goes to Money as is.
        var normalized = negative || rule == .atMost ? String(body) : text
        if rule == .atMost {
            // Adyen writes amounts below one without the leading zero (".11").
            if body.utf8.first == UInt8(ascii: "."), body.utf8.count > 1 { normalized = "0" + normalized }
            let point = body.utf8.firstIndex(of: UInt8(ascii: "."))
            let fractionDigits = point.map { body.utf8.distance(from: $0, to: body.utf8.endIndex) - 1 } ?? 0
            // "5." stays as written so that Money refuses it as malformed.
            if point == nil || fractionDigits > 0, fractionDigits < exponent {
                if point == nil { normalized += "." }
                normalized += String(repeating: "0", count: exponent - fractionDigits)
            }
        }
        do {
            let magnitude = try currency.parseAmount(normalized, allowNegative: false)
            return .success(negative ? -magnitude : magnitude)
        } catch {
            switch error.code {
            case .amountWrongDecimals: return .failure(.wrongDecimals)
            case .amountOverflow: return .failure(.overflow)
            default: return .failure(.invalid)
            }
        }
    }

    /// One representative currency per exponent: parsing depends only on the digit count.
    private static func currency(exponent: Int) -> Currency? { byExponent[exponent] }

    private static let byExponent: [Int: Currency] = {
        var table: [Int: Currency] = [:]
        for currency in Currency.all where table[currency.minorUnits] == nil {
            table[currency.minorUnits] = currency
        }
        return table
    }()
}
