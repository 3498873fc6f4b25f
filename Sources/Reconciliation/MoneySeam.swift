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

    /// `parseMinor(_:exponent:rule: .exact)` over the field's bytes, without building a string: the
    /// same checks in the same order (an optional `-`, then Money's optional `-` and `digits(.digits)?`
    /// with no leading zero and exactly `exponent` fraction digits), so the same text gives the same
    /// result (`ByteParserReferenceTests`). The
    /// caller checks `parsesAmounts(exponent:)` once per currency, as `parseMinor` does per call.
    static func parseMinorExact(_ bytes: ArraySlice<UInt8>, exponent: Int) -> Result<Int64, AmountProblem> {
        var index = bytes.startIndex
        let end = bytes.endIndex
        var negative = false
        if index < end, bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        // A second sign is Money's own: it judges the rest as usual and refuses a negative only at the end.
        var signedAgain = false
        if negative, index < end, bytes[index] == UInt8(ascii: "-") {
            signedAgain = true
            index += 1
        }
        let integerStart = index
        while index < end, bytes[index] != UInt8(ascii: ".") {
            guard isDigit(bytes[index]) else { return .failure(.invalid) }
            index += 1
        }
        let integerEnd = index
        guard integerEnd > integerStart else { return .failure(.invalid) }
        if integerEnd - integerStart > 1 && bytes[integerStart] == UInt8(ascii: "0") { return .failure(.invalid) }
        var fractionStart = end
        if index < end {
            fractionStart = index + 1  // after the "."
            guard fractionStart < end else { return .failure(.invalid) }
            for position in fractionStart..<end where !isDigit(bytes[position]) { return .failure(.invalid) }
        }
        guard end - fractionStart == exponent else { return .failure(.wrongDecimals) }
        var value: Int64 = 0
        guard accumulate(&value, bytes[integerStart..<integerEnd]), accumulate(&value, bytes[fractionStart..<end]) else {
            return .failure(.overflow)
        }
        if signedAgain { return .failure(.invalid) }
        return .success(negative ? -value : value)
    }

    // The digits appended to `value` as one number of minor units; false on Int64 overflow.
    private static func accumulate(_ value: inout Int64, _ digits: ArraySlice<UInt8>) -> Bool {
        for digit in digits {
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (added, overflowB) = shifted.addingReportingOverflow(Int64(digit &- UInt8(ascii: "0")))
            if overflowA || overflowB { return false }
            value = added
        }
        return true
    }

    /// False when `parseMinor` refuses every amount of a currency with this exponent (none in the table).
    static func parsesAmounts(exponent: Int) -> Bool { currency(exponent: exponent) != nil }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

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
