// Apple's WebIDL `Date` members are served as RFC 3339 UTC strings (reference §1.9, rule 29);
// the page converts them with `new Date(...)`. The text and the calendar are Time's.
import Time

/// An instant as Unix milliseconds, encoded as an RFC 3339 UTC string (`2026-01-31T09:30:00Z`).
public struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSinceEpoch: Int64

    /// Years outside 0001…9999 are refused: RFC 3339 has four-digit years.
    static let millisecondsMin: Int64 = -62_135_596_800_000  // 0001-01-01T00:00:00Z
    static let millisecondsMax: Int64 = 253_402_300_799_999  // 9999-12-31T23:59:59.999Z

    /// From Unix milliseconds; `rfc3339` clamps instants outside years 0001…9999 to that range.
    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// From Unix seconds.
    public init(unixSeconds: Int64) {
        let (ms, overflow) = unixSeconds.multipliedReportingOverflow(by: 1000)
        precondition(!overflow, "unix seconds out of range")
        self.millisecondsSinceEpoch = ms
    }

    /// Whole Unix seconds (floor).
    public var unixSeconds: Int64 {
        millisecondsSinceEpoch >= 0 ? millisecondsSinceEpoch / 1000 : (millisecondsSinceEpoch - 999) / 1000
    }

    /// Orders by instant.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSinceEpoch < rhs.millisecondsSinceEpoch
    }

    /// RFC 3339 in UTC with `Z`; milliseconds appear only when non-zero.
    public var rfc3339: String {
        RFC3339.format(unixMilliseconds: millisecondsSinceEpoch, fraction: .millisecondsWhenNonZero)
    }

    /// The RFC 3339 string.
    public var description: String { rfc3339 }

    /// Parses RFC 3339 `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `T`/`Z` may be lowercase per RFC 3339 §5.6.
    /// Fractions beyond milliseconds are truncated; leap second 60 is refused.
    public init?(rfc3339 text: String) {
        guard let micros = RFC3339.parse(text) else { return nil }
        self.millisecondsSinceEpoch = CivilCalendar.floorDivide(micros, 1000)
    }

    /// Decodes an RFC 3339 string; anything else fails as `date_malformed`.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let parsed = Timestamp(rfc3339: text) else {
            throw PaymentRequestError(code: "date_malformed", path: JSONPath.render(decoder.codingPath), rule: 29)
        }
        self = parsed
    }

    /// Encodes the RFC 3339 UTC string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rfc3339)
    }
}
