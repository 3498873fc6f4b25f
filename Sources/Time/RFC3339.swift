import Foundation

/// RFC 3339 timestamps in UTC: Tender's one formatter and one parser, exact and locale-free.
public enum RFC3339 {
    /// How many fraction digits `format` writes.
    public enum Fraction: Sendable {
        /// `2026-01-31T09:30:00Z`.
        case none
        /// Always `.mmm`.
        case milliseconds
        /// `.mmm` only when non-zero.
        case millisecondsWhenNonZero
        /// Always `.uuuuuu`.
        case microseconds
    }

    /// Earliest and latest instants with a four-digit year (0001-01-01T00:00:00Z … 9999-12-31T23:59:59.999999Z).
    public static let microsecondsMin: Int64 = -62_135_596_800_000_000
    public static let microsecondsMax: Int64 = 253_402_300_799_999_999

    /// Formats microseconds since the epoch; instants outside years 0001…9999 are clamped to that range.
    public static func format(unixMicroseconds: Int64, fraction: Fraction = .none) -> String {
        let clamped = min(max(unixMicroseconds, microsecondsMin), microsecondsMax)
        let seconds = CivilCalendar.floorDivide(clamped, 1_000_000)
        let micros = clamped - seconds * 1_000_000
        let days = CivilCalendar.floorDivide(seconds, 86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = CivilCalendar.date(fromDays: days)
        var text = pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        switch fraction {
        case .none: break
        case .milliseconds: text += "." + pad(micros / 1000, 3)
        case .millisecondsWhenNonZero where micros / 1000 != 0: text += "." + pad(micros / 1000, 3)
        case .millisecondsWhenNonZero: break
        case .microseconds: text += "." + pad(micros, 6)
        }
        return text + "Z"
    }

    /// Formats milliseconds since the epoch.
    public static func format(unixMilliseconds: Int64, fraction: Fraction = .milliseconds) -> String {
        let (micros, overflow) = unixMilliseconds.multipliedReportingOverflow(by: 1000)
        return format(unixMicroseconds: overflow ? (unixMilliseconds < 0 ? .min : .max) : micros, fraction: fraction)
    }

    /// Formats whole seconds since the epoch, without a fraction.
    public static func format(unixSeconds: Int64) -> String {
        let (micros, overflow) = unixSeconds.multipliedReportingOverflow(by: 1_000_000)
        return format(unixMicroseconds: overflow ? (unixSeconds < 0 ? .min : .max) : micros, fraction: .none)
    }

    /// Formats `date` (floored to the fraction's precision), by default with milliseconds:
    /// `2026-01-31T09:30:00.000Z`.
    public static func string(from date: Date, fraction: Fraction = .milliseconds) -> String {
        format(unixMicroseconds: UnixTime.microseconds(date), fraction: fraction)
    }

    /// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    public static func string(fromUnixMilliseconds milliseconds: Int64) -> String {
        format(unixMilliseconds: milliseconds, fraction: .milliseconds)
    }

    /// Parses RFC 3339 text into a `Date` (microsecond precision), or nil.
    public static func date(from text: String) -> Date? {
        guard let micros = parse(text) else { return nil }
        let seconds = CivilCalendar.floorDivide(micros, 1_000_000)
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros - seconds * 1_000_000) / 1_000_000)
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` into microseconds since the epoch (fraction digits
    /// beyond microseconds truncated). `T` and `Z` may be lowercase (RFC 3339 §5.6); years before 0001,
    /// leap second 60 and text longer than 40 bytes are refused.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int64? {
            guard from + count <= b.count else { return nil }
            var value: Int64 = 0
            for i in from..<(from + count) {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                value = value * 10 + Int64(b[i] - 0x30)
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
        var micros: Int64 = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < b.count, b[index] >= 0x30 && b[index] <= 0x39 {
                if digits < 6 { micros = micros * 10 + Int64(b[index] - 0x30) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 6)..<6 { micros *= 10 }
        }
        guard index < b.count else { return nil }
        var offsetSeconds: Int64 = 0
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
        let days = CivilCalendar.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return seconds * 1_000_000 + micros
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
