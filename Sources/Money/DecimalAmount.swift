// Exact decimal strings ⇄ Int64 minor units. Decimal strings exist only at the JSON edge; nothing
// here goes through Double (Apple Pay JS amounts are decimal strings: docs/apple-pay-rules.md, rules 6 and 9).

extension Currency {
    /// Parses a decimal string with exactly this currency's minor-unit digits into minor units.
    ///
    /// Grammar (stricter than Apple's and WebKit's, so it satisfies both, reference §5.1):
    /// `-?(0|[1-9][0-9]*)(\.[0-9]{minorUnits})?` where the fraction is required when `minorUnits > 0`
    /// and forbidden when it is 0. Leading zeros (`"09.99"`, `"00"`) are refused as `amount_malformed`
    /// because two spellings of one amount would let a replayed or tampered value look different.
    /// A leading `-` is accepted only with `allowNegative` (discount line items), and a signed zero
    /// (`"-0"`, `"-0.00"`) is always refused. The range is ±`Int64.max` minor units, or
    /// ±`magnitudeMaxMinor` when given (`amount_too_large` above it, however many digits follow).
    public func parseAmount(_ text: String, allowNegative: Bool = false,
                            magnitudeMaxMinor: Int64? = nil) throws(MoneyError) -> Int64 {
        var bytes = Substring(text).utf8[...]
        guard !bytes.isEmpty else { throw MoneyError(.amountMalformed, detail: "empty") }
        var negative = false
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes = bytes.dropFirst()
        }
        let integerPart = bytes.prefix { $0 != UInt8(ascii: ".") }
        let rest = bytes.dropFirst(integerPart.count)
        guard !integerPart.isEmpty, integerPart.allSatisfy(Self.isDigit) else {
            throw MoneyError(.amountMalformed, detail: "not a decimal")
        }
        if integerPart.count > 1 && integerPart.first == UInt8(ascii: "0") {
            throw MoneyError(.amountMalformed, detail: "leading zero")
        }
        var fraction = rest
        if !rest.isEmpty {
            fraction = rest.dropFirst()  // the "."
            guard !fraction.isEmpty, fraction.allSatisfy(Self.isDigit) else {
                throw MoneyError(.amountMalformed, detail: "not a decimal")
            }
        }
        // Only now, with a well-formed number, judge the digit count.
        guard fraction.count == minorUnits else {
            throw MoneyError(.amountWrongDecimals,
                             detail: "\(code) needs \(minorUnits) decimals, got \(fraction.count)")
        }
        var value: Int64 = 0
        // The integer digits, then the fraction's, as one number of minor units (no copies: settlement
        // files parse a few million amounts).
        for part in [integerPart, fraction] {
            for digit in part {
                let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
                let (added, overflowB) = shifted.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
                if overflowA || overflowB {
                    if let magnitudeMaxMinor { throw MoneyError(.amountTooLarge, detail: "above \(formatAmount(magnitudeMaxMinor))") }
                    throw MoneyError(.amountOverflow, detail: "exceeds Int64 minor units")
                }
                value = added
            }
        }
        if let magnitudeMaxMinor, value > magnitudeMaxMinor {
            throw MoneyError(.amountTooLarge, detail: "above \(formatAmount(magnitudeMaxMinor))")
        }
        if negative {
            if value == 0 { throw MoneyError(.amountNegativeZero, detail: "signed zero") }
            if !allowNegative { throw MoneyError(.amountNegative, detail: "negative not allowed here") }
            return -value
        }
        return value
    }

    /// Parses an amount Tender accepts from a merchant or a shopper's page: `parseAmount` bounded by
    /// `acceptedAmountMaxMinor`, so no later sum, balance or refund of accepted amounts can overflow.
    public func parseAcceptedAmount(_ text: String, allowNegative: Bool = false) throws(MoneyError) -> Int64 {
        try parseAmount(text, allowNegative: allowNegative, magnitudeMaxMinor: acceptedAmountMaxMinor)
    }

    /// Formats minor units with exactly this currency's digits: 500 JPY → `"500"`, 1500 KWD → `"1.500"`,
    /// -5 USD → `"-0.05"`. Total for every `Int64`, including `Int64.min`.
    public func formatAmount(_ amountMinor: Int64) -> String {
        let magnitude = amountMinor.magnitude  // UInt64: no overflow at Int64.min
        var digits = String(magnitude)
        if minorUnits > 0 {
            if digits.count <= minorUnits {
                digits = String(repeating: "0", count: minorUnits - digits.count + 1) + digits
            }
            let split = digits.index(digits.endIndex, offsetBy: -minorUnits)
            digits = digits[..<split] + "." + digits[split...]
        }
        return amountMinor < 0 ? "-" + digits : digits
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
}

