// Apple's WebIDL `Date` members are served as RFC 3339 UTC strings (reference §1.9, rule 29);
// the page converts them with `new Date(...)`. A tiny exact converter, no calendar library.

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
        let clamped = min(max(millisecondsSinceEpoch, Self.millisecondsMin), Self.millisecondsMax)
        let millis = Int(((clamped % 1000) + 1000) % 1000)
        let seconds = (clamped - Int64(millis)) / 1000
        let days = Int((seconds - (((seconds % 86_400) + 86_400) % 86_400)) / 86_400)
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = CivilCalendar.date(fromDays: days)
        var text = pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        if millis != 0 { text += "." + pad(millis, 3) }
        return text + "Z"
    }

    /// The RFC 3339 string.
    public var description: String { rfc3339 }

    /// Parses RFC 3339 `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `T`/`Z` may be lowercase per RFC 3339 §5.6.
    /// Fractions beyond milliseconds are truncated; leap second 60 is refused.
    public init?(rfc3339 text: String) {
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var value = 0
            for i in from..<(from + count) {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard b.count >= 20, b.count <= 40,
              let year = number(0, 4), b[4] == UInt8(ascii: "-"), let month = number(5, 2),
              b[7] == UInt8(ascii: "-"), let day = number(8, 2),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
              let hour = number(11, 2), b[13] == UInt8(ascii: ":"), let minute = number(14, 2),
              b[16] == UInt8(ascii: ":"), let second = number(17, 2),
              year >= 1, CivilCalendar.isValid(year: year, month: month, day: day),
              hour < 24, minute < 60, second < 60 else { return nil }
        var index = 19
        var millis = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < b.count, b[index] >= 0x30 && b[index] <= 0x39 {
                if digits < 3 { millis = millis * 10 + Int(b[index] - 0x30) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 3)..<3 { millis *= 10 }
        }
        guard index < b.count else { return nil }
        var offsetSeconds = 0
        if b[index] == UInt8(ascii: "Z") || b[index] == UInt8(ascii: "z") {
            index += 1
        } else if b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-") {
            guard let offsetHours = number(index + 1, 2), b.count > index + 3, b[index + 3] == UInt8(ascii: ":"),
                  let offsetMinutes = number(index + 4, 2), offsetHours < 24, offsetMinutes < 60 else { return nil }
            offsetSeconds = (offsetHours * 3600 + offsetMinutes * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == b.count else { return nil }
        let days = Int64(CivilCalendar.days(year: year, month: month, day: day))
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        self.millisecondsSinceEpoch = seconds * 1000 + Int64(millis)
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

    private func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

/// Proleptic Gregorian conversions (Howard Hinnant's days-from-civil algorithm).
enum CivilCalendar {
    static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    static func isValid(year: Int, month: Int, day: Int) -> Bool {
        month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year: year, month: month)
    }

    /// Days since 1970-01-01.
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func date(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
