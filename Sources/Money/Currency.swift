/// An active ISO 4217 currency: alphabetic code, numeric code and minor-unit exponent, from one table.
///
/// Only payable currencies exist as values: codes without minor units (metals, XDR, test and
/// "no currency" codes) are refused by every lookup with `currency_not_payable`.
public struct Currency: Hashable, Sendable, CustomStringConvertible {
    /// Three uppercase letters, e.g. `USD`.
    public let code: String
    /// ISO 4217 numeric code, e.g. 840 (Apple's decrypted token carries it as a 3-digit string).
    public let numericCode: Int
    /// Digits after the decimal point: 0 (JPY), 2 (USD), 3 (KWD) or 4 (CLF).
    public let minorUnits: Int
    /// True for ISO 4217 fund codes (BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW).
    public let isFund: Bool

    private init(code: String, numericCode: Int, minorUnits: Int, isFund: Bool) {
        self.code = code
        self.numericCode = numericCode
        self.minorUnits = minorUnits
        self.isFund = isFund
    }

    /// The alphabetic code.
    public var description: String { code }

    /// The numeric code as Apple's token writes it: three digits with leading zeros (`"048"`).
    public var numericCodeString: String {
        let digits = String(numericCode)
        return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }

    /// 10^minorUnits, the number of minor units in one major unit.
    public var minorUnitsPerMajor: Int64 {
        var result: Int64 = 1
        for _ in 0..<minorUnits { result *= 10 }
        return result
    }

    /// Safari's cap on a payment total in major units: WebKit's `PaymentRequestValidator::validateTotal`
    /// throws "Total amount is too big." above 100 000 000 (and Apple Pay JS refuses the whole request).
    public static let acceptedAmountMaxMajorUnits: Int64 = 100_000_000

    /// The largest magnitude of any amount Tender accepts, in this currency's minor units:
    /// `acceptedAmountMaxMajorUnits` × 10^minorUnits (10^10 for USD, 10^8 for JPY, 10^11 for KWD).
    /// Even a hundred such amounts summed stay far inside `Int64`.
    public var acceptedAmountMaxMinor: Int64 { Self.acceptedAmountMaxMajorUnits * minorUnitsPerMajor }

    /// Looks up an exact uppercase alphabetic code (`"usd"` is refused: ISO codes are case-sensitive here).
    public init(code: String) throws(MoneyError) {
        if let found = CurrencyTable.byCode[code] {
            self = found
            return
        }
        if CurrencyTable.notPayable.contains(where: { $0.code == code }) {
            throw MoneyError(.currencyNotPayable, detail: String(code.prefix(8)))
        }
        throw MoneyError(.currencyUnknown, detail: String(code.prefix(8)))
    }

    /// Looks up a numeric code given as Apple writes it in a decrypted token (`"840"`, `"048"`).
    public init(numericCode text: String) throws(MoneyError) {
        guard text.utf8.count == 3, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let number = Int(text) else {
            throw MoneyError(.currencyUnknown, detail: String(text.prefix(8)))
        }
        try self.init(numericCode: number)
    }

    /// Looks up an integer numeric code (840).
    public init(numericCode: Int) throws(MoneyError) {
        if let found = CurrencyTable.byNumeric[numericCode] {
            self = found
            return
        }
        if CurrencyTable.notPayable.contains(where: { $0.numericCode == numericCode }) {
            throw MoneyError(.currencyNotPayable, detail: String(numericCode))
        }
        throw MoneyError(.currencyUnknown, detail: String(numericCode))
    }

    /// Every payable currency, sorted by code.
    public static var all: [Currency] { CurrencyTable.payable }

    fileprivate static func tableEntry(code: String, numericCode: Int, minorUnits: Int, isFund: Bool) -> Currency {
        Currency(code: code, numericCode: numericCode, minorUnits: minorUnits, isFund: isFund)
    }
}

extension Currency: Codable {
    /// Decodes the alphabetic code; an unknown or unpayable code is a decoding failure with the MoneyError.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(code: text)
    }

    /// Encodes the alphabetic code.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(code)
    }
}

/// ISO 4217 List One (current currency & funds), as amended through 2025: ANG replaced by XCG,
/// ZWL by ZWG, SLL by SLE, HRK and CUC withdrawn; ISK has 0 minor units per ISO (reference §5.2).
private enum CurrencyTable {
    // code numeric minorUnits [F = fund]
    static let text = """
    AED 784 2|AFN 971 2|ALL 008 2|AMD 051 2|AOA 973 2|ARS 032 2|AUD 036 2|AWG 533 2|AZN 944 2|
    BAM 977 2|BBD 052 2|BDT 050 2|BGN 975 2|BHD 048 3|BIF 108 0|BMD 060 2|BND 096 2|BOB 068 2|
    BOV 984 2 F|BRL 986 2|BSD 044 2|BTN 064 2|BWP 072 2|BYN 933 2|BZD 084 2|CAD 124 2|CDF 976 2|
    CHE 947 2 F|CHF 756 2|CHW 948 2 F|CLF 990 4 F|CLP 152 0|CNY 156 2|COP 170 2|COU 970 2 F|
    CRC 188 2|CUP 192 2|CVE 132 2|CZK 203 2|DJF 262 0|DKK 208 2|DOP 214 2|DZD 012 2|EGP 818 2|
    ERN 232 2|ETB 230 2|EUR 978 2|FJD 242 2|FKP 238 2|GBP 826 2|GEL 981 2|GHS 936 2|GIP 292 2|
    GMD 270 2|GNF 324 0|GTQ 320 2|GYD 328 2|HKD 344 2|HNL 340 2|HTG 332 2|HUF 348 2|IDR 360 2|
    ILS 376 2|INR 356 2|IQD 368 3|IRR 364 2|ISK 352 0|JMD 388 2|JOD 400 3|JPY 392 0|KES 404 2|
    KGS 417 2|KHR 116 2|KMF 174 0|KPW 408 2|KRW 410 0|KWD 414 3|KYD 136 2|KZT 398 2|LAK 418 2|
    LBP 422 2|LKR 144 2|LRD 430 2|LSL 426 2|LYD 434 3|MAD 504 2|MDL 498 2|MGA 969 2|MKD 807 2|
    MMK 104 2|MNT 496 2|MOP 446 2|MRU 929 2|MUR 480 2|MVR 462 2|MWK 454 2|MXN 484 2|MXV 979 2 F|
    MYR 458 2|MZN 943 2|NAD 516 2|NGN 566 2|NIO 558 2|NOK 578 2|NPR 524 2|NZD 554 2|OMR 512 3|
    PAB 590 2|PEN 604 2|PGK 598 2|PHP 608 2|PKR 586 2|PLN 985 2|PYG 600 0|QAR 634 2|RON 946 2|
    RSD 941 2|RUB 643 2|RWF 646 0|SAR 682 2|SBD 090 2|SCR 690 2|SDG 938 2|SEK 752 2|SGD 702 2|
    SHP 654 2|SLE 925 2|SOS 706 2|SRD 968 2|SSP 728 2|STN 930 2|SVC 222 2|SYP 760 2|SZL 748 2|
    THB 764 2|TJS 972 2|TMT 934 2|TND 788 3|TOP 776 2|TRY 949 2|TTD 780 2|TWD 901 2|TZS 834 2|
    UAH 980 2|UGX 800 0|USD 840 2|USN 997 2 F|UYI 940 0 F|UYU 858 2|UYW 927 4 F|UZS 860 2|
    VED 926 2|VES 928 2|VND 704 0|VUV 548 0|WST 882 2|XAF 950 0|XCD 951 2|XCG 532 2|XOF 952 0|
    XPF 953 0|YER 886 2|ZAR 710 2|ZMW 967 2|ZWG 924 2
    """

    /// Codes in List One with "N.A." minor units: bond units, metals, XDR, XSU, XUA, test and no-currency.
    static let notPayable: [(code: String, numericCode: Int)] = [
        ("XAG", 961), ("XAU", 959), ("XBA", 955), ("XBB", 956), ("XBC", 957), ("XBD", 958),
        ("XDR", 960), ("XPD", 964), ("XPT", 962), ("XSU", 994), ("XTS", 963), ("XUA", 965),
        ("XXX", 999),
    ]

    static let payable: [Currency] = {
        var result: [Currency] = []
        for entry in text.split(whereSeparator: { $0 == "|" || $0 == "\n" }) {
            let fields = entry.split(separator: " ")
            guard fields.count >= 3, let numeric = Int(fields[1]), let minor = Int(fields[2]) else {
                preconditionFailure("malformed ISO 4217 table entry \(entry)")
            }
            result.append(Currency.tableEntry(code: String(fields[0]), numericCode: numeric,
                                              minorUnits: minor, isFund: fields.count == 4))
        }
        return result.sorted { $0.code < $1.code }
    }()

    static let byCode: [String: Currency] = Dictionary(uniqueKeysWithValues: payable.map { ($0.code, $0) })
    static let byNumeric: [Int: Currency] = Dictionary(uniqueKeysWithValues: payable.map { ($0.numericCode, $0) })
}
