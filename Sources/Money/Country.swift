/// A current ISO 3166-1 alpha-2 country code (uppercase), validated against one table.
public struct Country: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// Two uppercase letters, e.g. `US`.
    public let code: String

    /// Accepts only an exact uppercase code from the current list (`"us"`, `"XX"`, `"UK"` are refused).
    public init(code: String) throws(MoneyError) {
        guard CountryTable.codes.contains(code) else {
            throw MoneyError(.countryUnknown, detail: String(code.prefix(8)))
        }
        self.code = code
    }

    /// The code.
    public var description: String { code }

    /// Every current code, sorted.
    public static var all: [Country] {
        CountryTable.codes.sorted().compactMap { try? Country(code: $0) }
    }

    /// Orders by code.
    public static func < (lhs: Country, rhs: Country) -> Bool { lhs.code < rhs.code }
}

extension Country: Codable {
    /// Decodes the alpha-2 code; an unknown code fails with `country_unknown`.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(code: text)
    }

    /// Encodes the alpha-2 code.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(code)
    }
}

/// ISO 3166-1 officially assigned alpha-2 codes (249 entries, current as of 2025).
private enum CountryTable {
    static let codes: Set<String> = Set("""
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ
    BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ
    CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ
    DE DJ DK DM DO DZ
    EC EE EG EH ER ES ET
    FI FJ FK FM FO FR
    GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY
    HK HM HN HR HT HU
    ID IE IL IM IN IO IQ IR IS IT
    JE JM JO JP
    KE KG KH KI KM KN KP KR KW KY KZ
    LA LB LC LI LK LR LS LT LU LV LY
    MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ
    NA NC NE NF NG NI NL NO NP NR NU NZ
    OM
    PA PE PF PG PH PK PL PM PN PR PS PT PW PY
    QA
    RE RO RS RU RW
    SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ
    TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ
    UA UG UM US UY UZ
    VA VC VE VG VI VN VU
    WF WS
    YE YT
    ZA ZM ZW
    """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
}
