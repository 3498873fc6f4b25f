public import Foundation
import Time

/// A value sent as a text-format parameter; `nil` means SQL NULL.
public protocol PostgresEncodable: Sendable {
    /// The PostgreSQL text input representation, or `nil` for NULL.
    var postgresText: String? { get }
}

/// A value decoded from a column's text-format output.
public protocol PostgresDecodable {
    /// Parses the column text; the error names `column` and the expected type, never the value.
    static func decode(postgresText: String, column: String) throws(PostgresError) -> Self
}

extension PostgresDecodable {
    static func mismatch(_ column: String, _ expected: String) -> PostgresError {
        PostgresError(code: .decodeFailed,
                      message: "column \"\(column)\" is not a valid \(expected)", column: column)
    }
}

extension String: PostgresEncodable, PostgresDecodable {
    /// The string itself.
    public var postgresText: String? { self }
    /// Any column text is a valid String.
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> String {
        postgresText
    }
}

extension Int: PostgresEncodable, PostgresDecodable {
    /// Decimal digits.
    public var postgresText: String? { String(self) }
    /// Parses an integer column (int2/int4/int8 text).
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> Int {
        guard let value = Int(postgresText) else { throw mismatch(column, "Int") }
        return value
    }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    /// Decimal digits.
    public var postgresText: String? { String(self) }
    /// Parses an integer column (int8 text).
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> Int64 {
        guard let value = Int64(postgresText) else { throw mismatch(column, "Int64") }
        return value
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    /// Decimal digits.
    public var postgresText: String? { String(self) }
    /// Parses an integer column (int4 text); out-of-range values fail.
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> Int32 {
        guard let value = Int32(postgresText) else { throw mismatch(column, "Int32") }
        return value
    }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    /// "t" or "f", PostgreSQL's canonical boolean text.
    public var postgresText: String? { self ? "t" : "f" }
    /// Accepts only the canonical output "t" / "f".
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> Bool {
        switch postgresText {
        case "t": return true
        case "f": return false
        default: throw mismatch(column, "Bool")
        }
    }
}

extension Array: PostgresEncodable where Element == UInt8 {
    /// bytea hex format `\x0a1b…` (PostgreSQL docs 8.4.1).
    public var postgresText: String? {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        out.reserveCapacity(2 + count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Array: PostgresDecodable where Element == UInt8 {
    /// Parses bytea hex output (`bytea_output = hex`, the default since PostgreSQL 9.0).
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> [UInt8] {
        let text = Array<UInt8>(postgresText.utf8)
        guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x"),
              text.count % 2 == 0 else { throw mismatch(column, "bytea") }
        var out: [UInt8] = []
        out.reserveCapacity((text.count - 2) / 2)
        var index = 2
        while index < text.count {
            guard let high = hexValue(text[index]), let low = hexValue(text[index + 1]) else {
                throw mismatch(column, "bytea")
            }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    /// `nil` becomes SQL NULL.
    public var postgresText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.postgresText
        }
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    /// Canonical lowercase 8-4-4-4-12 form, as PostgreSQL prints it.
    public var postgresText: String? { uuidString.lowercased() }
    /// Parses `uuid` output.
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> UUID {
        guard let value = UUID(uuidString: postgresText) else { throw mismatch(column, "UUID") }
        return value
    }
}

extension Date: PostgresEncodable, PostgresDecodable {
    /// RFC 3339 UTC with microseconds (`2024-05-01T12:00:00.123456Z`), PostgreSQL's precision.
    public var postgresText: String? {
        let micros = (timeIntervalSince1970 * 1_000_000).rounded()
        // Dates beyond ±292,000 years cannot be represented; PostgreSQL has matching sentinels.
        guard micros.isFinite, abs(micros) < 9.2e18 else { return micros < 0 ? "-infinity" : "infinity" }
        return TimestampText.format(microsecondsSince1970: Int64(micros))
    }

    /// Parses `timestamptz` ISO output (DateStyle ISO, any TimeZone offset), keeping microseconds.
    public static func decode(postgresText: String, column: String) throws(PostgresError) -> Date {
        guard let micros = TimestampText.parse(postgresText) else { throw mismatch(column, "timestamptz") }
        let seconds = micros.floorDivided(by: 1_000_000)
        let fraction = micros - seconds * 1_000_000
        return Date(timeIntervalSince1970: Double(seconds) + Double(fraction) / 1_000_000)
    }
}

extension Int64 {
    func floorDivided(by divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}

/// Conversions between microseconds since the Unix epoch and PostgreSQL timestamp text (RFC 3339 out,
/// PostgreSQL's ISO output in), on Time's calendar, without locale or time zone data.
enum TimestampText {
    static func format(microsecondsSince1970 micros: Int64) -> String {
        RFC3339.format(unixMicroseconds: micros, fraction: .microseconds)
    }

    /// Parses `YYYY-MM-DD[ T]HH:MM:SS[.ffffff](Z|±HH[:MM[:SS]])`; BC dates and infinities are rejected.
    static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(minDigits: Int, maxDigits: Int) -> Int64? {
            var value: Int64 = 0
            var digits = 0
            while index < bytes.count, digits < maxDigits, bytes[index] >= 48, bytes[index] <= 57 {
                value = value * 10 + Int64(bytes[index] - 48)
                index += 1
                digits += 1
            }
            return digits >= minDigits ? value : nil
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(minDigits: 4, maxDigits: 6), expect("-"),
              let month = number(minDigits: 2, maxDigits: 2), expect("-"),
              let day = number(minDigits: 2, maxDigits: 2), CivilCalendar.isValid(year: year, month: month, day: day),
              expect(" T"),
              let hour = number(minDigits: 2, maxDigits: 2), hour < 24, expect(":"),
              let minute = number(minDigits: 2, maxDigits: 2), minute < 60, expect(":"),
              let second = number(minDigits: 2, maxDigits: 2), second < 60
        else { return nil }
        var fraction: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            guard let digits = number(minDigits: 1, maxDigits: 6) else { return nil }
            fraction = digits
            for _ in 0..<(6 - (index - start)) { fraction *= 10 }
        }
        var offsetSeconds: Int64 = 0
        guard index < bytes.count else { return nil }  // a timestamp without zone is not a timestamptz
        if bytes[index] == UInt8(ascii: "Z") {
            index += 1
        } else {
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            guard expect("+-"), let offsetHours = number(minDigits: 2, maxDigits: 2) else { return nil }
            var offsetMinutes: Int64 = 0
            var offsetSecondsPart: Int64 = 0
            if expect(":") {
                guard let value = number(minDigits: 2, maxDigits: 2) else { return nil }
                offsetMinutes = value
                if expect(":") {
                    guard let value = number(minDigits: 2, maxDigits: 2) else { return nil }
                    offsetSecondsPart = value
                }
            }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60 + offsetSecondsPart)
        }
        guard index == bytes.count else { return nil }
        let days = CivilCalendar.days(year: year, month: month, day: day)
        let local = days * 86_400 + hour * 3600 + minute * 60 + second
        return (local - offsetSeconds) * 1_000_000 + fraction
    }
}
