import Money
import Testing

@Suite struct CurrencyTableTests {
    @Test func minorUnitsFromISOTable() throws {
        // Expected exponents from ISO 4217 List One (reference §5.2), not from the code under test.
        let expected: [(String, Int, Int)] = [
            ("USD", 840, 2), ("EUR", 978, 2), ("GBP", 826, 2), ("JPY", 392, 0), ("KRW", 410, 0),
            ("ISK", 352, 0), ("CLP", 152, 0), ("VND", 704, 0), ("XOF", 952, 0), ("UYI", 940, 0),
            ("BHD", 48, 3), ("KWD", 414, 3), ("JOD", 400, 3), ("OMR", 512, 3), ("TND", 788, 3),
            ("LYD", 434, 3), ("IQD", 368, 3), ("CLF", 990, 4), ("UYW", 927, 4),
        ]
        for (code, numeric, minor) in expected {
            let currency = try Currency(code: code)
            #expect(currency.minorUnits == minor, "\(code)")
            #expect(currency.numericCode == numeric, "\(code)")
            #expect(try Currency(numericCode: numeric) == currency)
        }
    }

    @Test func numericCodeKeepsLeadingZeros() throws {
        #expect(try Currency(code: "BHD").numericCodeString == "048")
        #expect(try Currency(numericCode: "048").code == "BHD")
        #expect(throws: MoneyError(.currencyUnknown, detail: "48")) { try Currency(numericCode: "48") }
    }

    @Test(arguments: ["XAU", "XAG", "XPD", "XPT", "XBA", "XBD", "XDR", "XSU", "XUA", "XTS", "XXX"])
    func fundsMetalsAndTestCodesAreNotPayable(code: String) {
        #expect { try Currency(code: code) } throws: { ($0 as? MoneyError)?.code == .currencyNotPayable }
    }

    @Test(arguments: ["usd", "US", "USDD", "", "ABC", "HRK", "CUC", "ANG", "ZWL"])
    func unknownCodes(code: String) {
        #expect { try Currency(code: code) } throws: { ($0 as? MoneyError)?.code == .currencyUnknown }
    }

    @Test func tableIsConsistent() {
        let all = Currency.all
        #expect(all.count > 150)
        #expect(Set(all.map(\.code)).count == all.count)
        #expect(Set(all.map(\.numericCode)).count == all.count)
        #expect(all.allSatisfy { $0.code.count == 3 && [0, 2, 3, 4].contains($0.minorUnits) })
    }

    @Test func countries() throws {
        #expect(Country.all.count == 249)
        #expect(try Country(code: "US").code == "US")
        for bad in ["us", "XX", "UK", "USA", ""] {
            #expect { try Country(code: bad) } throws: { ($0 as? MoneyError)?.code == .countryUnknown }
        }
    }
}

@Suite struct DecimalAmountTests {
    static let usd = try! Currency(code: "USD")
    static let jpy = try! Currency(code: "JPY")
    static let kwd = try! Currency(code: "KWD")
    static let clf = try! Currency(code: "CLF")

    @Test func parsesExactDigits() throws {
        #expect(try Self.usd.parseAmount("9.99") == 999)
        #expect(try Self.usd.parseAmount("0.00") == 0)
        #expect(try Self.usd.parseAmount("0.05") == 5)
        #expect(try Self.jpy.parseAmount("500") == 500)
        #expect(try Self.jpy.parseAmount("0") == 0)
        #expect(try Self.kwd.parseAmount("1.500") == 1500)
        #expect(try Self.clf.parseAmount("2.0001") == 20001)
        #expect(try Self.usd.parseAmount("-5.00", allowNegative: true) == -500)
    }

    @Test func formats() {
        #expect(Self.usd.formatAmount(999) == "9.99")
        #expect(Self.usd.formatAmount(5) == "0.05")
        #expect(Self.usd.formatAmount(0) == "0.00")
        #expect(Self.usd.formatAmount(-5) == "-0.05")
        #expect(Self.jpy.formatAmount(500) == "500")
        #expect(Self.kwd.formatAmount(1500) == "1.500")
        #expect(Self.clf.formatAmount(1) == "0.0001")
        #expect(Self.usd.formatAmount(Int64.max) == "92233720368547758.07")
        #expect(Self.usd.formatAmount(Int64.min) == "-92233720368547758.08")
    }

    static let rejected: [(Currency, String, MoneyError.Code)] = [
        (usd, "", .amountMalformed), (usd, " 9.99", .amountMalformed), (usd, "9.99 ", .amountMalformed),
        (usd, "+9.99", .amountMalformed), (usd, "9.99e0", .amountMalformed), (usd, "1e3", .amountMalformed),
        (usd, "09.99", .amountMalformed), (usd, "00.00", .amountMalformed), (usd, ".99", .amountMalformed),
        (usd, "9.", .amountMalformed), (usd, "9,99", .amountMalformed), (usd, "-", .amountMalformed),
        (usd, "--1.00", .amountMalformed), (usd, "1.0.0", .amountMalformed), (usd, "٩.٩٩", .amountMalformed),
        (usd, "9.9", .amountWrongDecimals), (usd, "9.999", .amountWrongDecimals), (usd, "9", .amountWrongDecimals),
        (jpy, "500.0", .amountWrongDecimals), (kwd, "1.50", .amountWrongDecimals),
        (usd, "-0.00", .amountNegativeZero), (jpy, "-0", .amountNegativeZero),
        (usd, "-1.00", .amountNegative),
        (usd, "92233720368547758.08", .amountOverflow), (jpy, "9223372036854775808", .amountOverflow),
        (jpy, "99999999999999999999999", .amountOverflow),
    ]

    @Test(arguments: 0..<rejected.count)
    func rejects(index: Int) {
        let (currency, text, code) = Self.rejected[index]
        #expect { try currency.parseAmount(text) } throws: { ($0 as? MoneyError)?.code == code }
    }

    @Test func int64Boundary() throws {
        #expect(try Self.usd.parseAmount("92233720368547758.07") == Int64.max)
        #expect(try Self.jpy.parseAmount("9223372036854775807") == Int64.max)
        #expect(try Self.jpy.parseAmount("-9223372036854775807", allowNegative: true) == -Int64.max)
        // Int64.min has no positive twin; refusing it keeps negation safe everywhere.
        #expect { try Self.jpy.parseAmount("-9223372036854775808", allowNegative: true) } throws: {
            ($0 as? MoneyError)?.code == .amountOverflow
        }
    }

    /// The accepted-amount ceiling: Safari's 100 000 000 major units in each exponent, at and just past it,
    /// both signs, and far past Int64 (still `amount_too_large`, never `amount_overflow`).
    @Test(arguments: [("USD", "100000000.00", "100000000.01", Int64(10_000_000_000)),
                      ("JPY", "100000000", "100000001", Int64(100_000_000)),
                      ("KWD", "100000000.000", "100000000.001", Int64(100_000_000_000)),
                      ("CLF", "100000000.0000", "100000000.0001", Int64(1_000_000_000_000))])
    func acceptedAmountCeiling(code: String, atCeiling: String, pastCeiling: String, maxMinor: Int64) throws {
        let currency = try Currency(code: code)
        #expect(currency.acceptedAmountMaxMinor == maxMinor)
        #expect(try currency.parseAcceptedAmount(atCeiling) == maxMinor)
        #expect(try currency.parseAcceptedAmount("-" + atCeiling, allowNegative: true) == -maxMinor)
        for text in [pastCeiling, "-" + pastCeiling, "92233720368547758.07", "99999999999999999999999"] {
            let digits = text.firstIndex(of: ".").map { text.distance(from: $0, to: text.endIndex) - 1 } ?? 0
            guard digits == currency.minorUnits else { continue }  // other exponents fail on their digits first
            #expect { try currency.parseAcceptedAmount(text, allowNegative: true) } throws: {
                ($0 as? MoneyError)?.code == .amountTooLarge
            }
        }
        // The plain parser keeps its Int64 range (settlement files, ledgers).
        #expect(try currency.parseAmount(pastCeiling) == maxMinor + 1)
    }

    @Test func ceilingBeyondInt64IsTooLargeNotOverflow() {
        #expect { try Self.usd.parseAcceptedAmount("92233720368547758.08") } throws: {
            ($0 as? MoneyError)?.code == .amountTooLarge
        }
        #expect { try Self.jpy.parseAcceptedAmount("99999999999999999999999") } throws: {
            ($0 as? MoneyError)?.code == .amountTooLarge
        }
    }

    @Test func roundTripsAcrossExponents() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2000 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let value = Int64(bitPattern: state) / Int64(1 + (state >> 60))
            for currency in [Self.usd, Self.jpy, Self.kwd, Self.clf] where value != Int64.min {
                #expect(try currency.parseAmount(currency.formatAmount(value), allowNegative: true) == value)
            }
        }
    }
}

@Suite struct ArithmeticTests {
    @Test func checkedArithmetic() throws {
        let usd = try Currency(code: "USD")
        let a = Money(amountMinor: 999, currency: usd)
        #expect(try a.adding(Money(amountMinor: 1, currency: usd)).amountMinor == 1000)
        #expect(try a.subtracting(Money(amountMinor: 1000, currency: usd)).amountMinor == -1)
        #expect(try a.multiplied(by: 3).amountMinor == 2997)
        #expect(try Money(parsing: "9.99", currency: usd).description == "9.99 USD")
        let max = Money(amountMinor: Int64.max, currency: usd)
        #expect { try max.adding(Money(amountMinor: 1, currency: usd)) } throws: { ($0 as? MoneyError)?.code == .amountOverflow }
        #expect { try Money(amountMinor: Int64.min, currency: usd).subtracting(Money(amountMinor: 1, currency: usd)) } throws: {
            ($0 as? MoneyError)?.code == .amountOverflow
        }
        #expect { try max.multiplied(by: 2) } throws: { ($0 as? MoneyError)?.code == .amountOverflow }
        #expect { try Money.sum([Int64.max, 1]) } throws: { ($0 as? MoneyError)?.code == .amountOverflow }
    }

    @Test func percentRoundsHalfAwayFromZero() throws {
        // 8.25 % of 10.00 = 0.825 → 0.83 (half away from zero); of 10.01 = 0.825825 → 0.83.
        #expect(try Percent.of(1000, basisPoints: 825) == 83)
        #expect(try Percent.of(1001, basisPoints: 825) == 83)
        // 10 % of 0.05 = 0.005 → 0.01; of -0.05 → -0.01.
        #expect(try Percent.of(5, basisPoints: 1000) == 1)
        #expect(try Percent.of(-5, basisPoints: 1000) == -1)
        // 10 % of 0.04 = 0.004 → 0.00.
        #expect(try Percent.of(4, basisPoints: 1000) == 0)
        #expect(try Percent.of(Int64.max, basisPoints: 10_000) == Int64.max)
        #expect(try Percent.of(Int64.min, basisPoints: 10_000) == Int64.min)
        #expect(try Percent.of(Int64.max, basisPoints: 5000) == Int64.max / 2 + 1)
        #expect(try Percent.of(1000, basisPoints: 0) == 0)
        #expect { try Percent.of(1000, basisPoints: 10_001) } throws: { ($0 as? MoneyError)?.code == .rateOutOfRange }
        #expect { try Percent.of(1000, basisPoints: -1) } throws: { ($0 as? MoneyError)?.code == .rateOutOfRange }
    }
}
