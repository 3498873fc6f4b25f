// The only file that knows about currencies and decimal amounts. When the `Money` module lands,
// this file becomes a thin forwarder to it (ISO 4217 table, exact decimal parsing) and nothing
// else in Reconciliation changes.

/// How many fraction digits a decimal amount may carry.
enum FractionDigitsRule {
    /// Exactly the currency's exponent (`generic`: "10.00" USD, "10" JPY).
    case exact
    /// Up to the currency's exponent (`adyen-sdr` writes "98.8" and "100" for EUR).
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
    /// ISO 4217 minor-unit exponents (List One, current codes); 2 unless listed otherwise.
    private static let exponents: [String: Int] = {
        var table: [String: Int] = [:]
        let two = ["AED", "AUD", "BGN", "BRL", "CAD", "CHF", "CNY", "COP", "CZK", "DKK", "EGP",
                   "EUR", "GBP", "HKD", "HUF", "IDR", "ILS", "INR", "MAD", "MXN", "MYR", "NGN",
                   "NOK", "NZD", "PEN", "PHP", "PKR", "PLN", "QAR", "RON", "RSD", "RUB", "SAR",
                   "SEK", "SGD", "THB", "TRY", "TWD", "UAH", "USD", "ZAR"]
        let zero = ["BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX",
                    "UYI", "VND", "VUV", "XAF", "XOF", "XPF"]
        let three = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"]
        for code in two { table[code] = 2 }
        for code in zero { table[code] = 0 }
        for code in three { table[code] = 3 }
        return table
    }()

    /// The currency's minor-unit exponent, or nil for a code Tender does not know.
    static func exponent(of currencyCode: String) -> Int? {
        exponents[currencyCode]
    }

    /// Parses `-?digits(.digits)?` exactly into minor units; never goes through floating point.
    static func parseMinor(_ text: String, exponent: Int, rule: FractionDigitsRule)
        -> Result<Int64, AmountProblem> {
        var utf8 = Substring(text).utf8[...]
        var negative = false
        if utf8.first == UInt8(ascii: "-") {
            negative = true
            utf8 = utf8.dropFirst()
        }
        var whole: Int64 = 0
        var wholeDigits = 0
        var fraction: Int64 = 0
        var fractionDigits = 0
        var sawPoint = false
        for byte in utf8 {
            if byte == UInt8(ascii: ".") {
                if sawPoint { return .failure(.invalid) }
                sawPoint = true
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                return .failure(.invalid)
            }
            let digit = Int64(byte - UInt8(ascii: "0"))
            if sawPoint {
                fractionDigits += 1
                if fractionDigits > exponent { return .failure(.wrongDecimals) }
                fraction = fraction * 10 + digit
            } else {
                wholeDigits += 1
                let (times, overflow1) = whole.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(digit)
                if overflow1 || overflow2 { return .failure(.overflow) }
                whole = sum
            }
        }
        // "1." and ".5" are not amounts; neither is "-".
        if wholeDigits == 0 || (sawPoint && fractionDigits == 0) { return .failure(.invalid) }
        if rule == .exact && fractionDigits != exponent { return .failure(.wrongDecimals) }
        for _ in fractionDigits..<exponent { fraction *= 10 }
        var scale: Int64 = 1
        for _ in 0..<exponent { scale *= 10 }
        let (scaled, overflow1) = whole.multipliedReportingOverflow(by: scale)
        let (minor, overflow2) = scaled.addingReportingOverflow(fraction)
        if overflow1 || overflow2 { return .failure(.overflow) }
        return .success(negative ? -minor : minor)
    }
}
