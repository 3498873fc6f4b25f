// The one file that stands between FinanceStore and the Money module.
//
// FinanceStore needs three things from Money: "is this an ISO 4217 code we pay in", "how many minor
// digits", and exact decimal-string ⇄ Int64 minor-unit conversion at the JSON edge (CONTRACT §3:
// amounts are decimal strings with exactly the currency's minor digits). Until Money is merged this
// file carries a minimal table; switching to Money means replacing the bodies below with calls to
// `Money.Currency(code:)`, `minorUnits`, `parseAmount` and `formatAmount`, and nothing else.

/// A currency as FinanceStore sees it: its ISO 4217 code and minor-unit digits.
struct FinanceCurrency: Hashable, Sendable {
    /// ISO 4217 alphabetic code, upper case.
    let code: String
    /// Digits after the decimal point (2 for EUR, 0 for JPY, 3 for KWD).
    let minorUnits: Int

    /// Looks `code` up; unknown codes are refused rather than guessed (money needs an exponent).
    init(code: String) throws(FinanceError) {
        guard let digits = Self.minorUnitsByCode[code] else {
            throw FinanceError(.currencyUnknown, field: "currencyCode", detail: String(code.prefix(8)))
        }
        self.code = code
        self.minorUnits = digits
    }

    /// Minimal ISO 4217 excerpt (payable currencies only); Money holds the full table.
    private static let minorUnitsByCode: [String: Int] = [
        "AED": 2, "AUD": 2, "BHD": 3, "BRL": 2, "CAD": 2, "CHF": 2, "CLP": 0, "CNY": 2, "CZK": 2,
        "DKK": 2, "EUR": 2, "GBP": 2, "HKD": 2, "HUF": 2, "IDR": 2, "ILS": 2, "INR": 2, "ISK": 0,
        "JOD": 3, "JPY": 0, "KRW": 0, "KWD": 3, "MXN": 2, "MYR": 2, "NOK": 2, "NZD": 2, "OMR": 3,
        "PLN": 2, "QAR": 2, "RON": 2, "SAR": 2, "SEK": 2, "SGD": 2, "THB": 2, "TND": 3, "TRY": 2,
        "TWD": 2, "UAH": 2, "USD": 2, "VND": 0, "ZAR": 2,
    ]

    /// Formats non-negative or negative minor units with exactly `minorUnits` digits (500 JPY → "500").
    func formatAmount(_ amountMinor: Int64) -> String {
        var digits = String(amountMinor.magnitude)
        if minorUnits > 0 {
            if digits.count <= minorUnits {
                digits = String(repeating: "0", count: minorUnits - digits.count + 1) + digits
            }
            let split = digits.index(digits.endIndex, offsetBy: -minorUnits)
            digits = digits[..<split] + "." + digits[split...]
        }
        return amountMinor < 0 ? "-" + digits : digits
    }

    /// Parses a non-negative decimal string with exactly `minorUnits` fraction digits, never via Double.
    func parseAmount(_ text: String) throws(FinanceError) -> Int64 {
        let bytes = Array(text.utf8)
        let dot = bytes.firstIndex(of: UInt8(ascii: "."))
        let integerPart = dot.map { Array(bytes[..<$0]) } ?? bytes
        let fraction = dot.map { Array(bytes[($0 + 1)...]) } ?? []
        let isDigit: (UInt8) -> Bool = { $0 >= 0x30 && $0 <= 0x39 }
        guard !integerPart.isEmpty, integerPart.allSatisfy(isDigit), fraction.allSatisfy(isDigit),
              !(integerPart.count > 1 && integerPart[0] == UInt8(ascii: "0")),
              dot == nil || !fraction.isEmpty else {
            throw FinanceError(.amountInvalid, field: "amount", detail: "not a plain decimal")
        }
        guard fraction.count == minorUnits else {
            throw FinanceError(.amountInvalid, field: "amount", detail: "\(code) needs \(minorUnits) decimals")
        }
        var value: Int64 = 0
        for digit in integerPart + fraction {
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (added, overflowB) = shifted.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            if overflowA || overflowB { throw FinanceError(.amountOverflow, field: "amount") }
            value = added
        }
        return value
    }
}
