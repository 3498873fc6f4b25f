// Identifiers and timestamps of the finance model, without Foundation: the core stays pure and the
// text forms are exactly what PostgreSQL's `uuid` and `timestamptz` print and parse.
import Time

/// A 128-bit identifier in UUID text form (FinanceKit's `UUID` ids); orders like PostgreSQL's `uuid`.
public struct FinanceID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The first 8 bytes, big-endian.
    public let high: UInt64
    /// The last 8 bytes, big-endian.
    public let low: UInt64

    /// Creates an id from its two big-endian halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses the canonical `8-4-4-4-12` hex form (either case).
    public init(parsing text: String) throws(FinanceError) {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { throw FinanceError(.valueInvalid, detail: "uuid length") }
        var nibbles: [UInt64] = []
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { throw FinanceError(.valueInvalid, detail: "uuid form") }
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibbles.append(UInt64(byte - UInt8(ascii: "0")))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibbles.append(UInt64(byte - UInt8(ascii: "a") + 10))
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibbles.append(UInt64(byte - UInt8(ascii: "A") + 10))
            default: throw FinanceError(.valueInvalid, detail: "uuid form")
            }
        }
        self.high = nibbles[0..<16].reduce(0) { $0 << 4 | $1 }
        self.low = nibbles[16..<32].reduce(0) { $0 << 4 | $1 }
    }

    /// Builds an id from the first 16 bytes of a digest, stamped as UUID version 8 (RFC 9562 §5.8).
    init(digest: [UInt8]) {
        precondition(digest.count >= 16, "FinanceIdentity digest must return at least 16 bytes")
        var high = digest[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var low = digest[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        high = (high & ~0xF000) | 0x8000                       // version 8
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // RFC 9562 variant
        self.init(high: high, low: low)
    }

    /// The 16 bytes, big-endian.
    public var bytes: [UInt8] { BigEndian.bytes(high) + BigEndian.bytes(low) }

    /// Lower-case `8-4-4-4-12` form.
    /// Written straight into the string's storage: ids are formatted several times per finance-store row
    /// (columns, JSON payloads, change log), and slicing a `[Character]` cost more than the rows' SQL.
    public var description: String {
        String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibble < 16 ? high : low
                let value = UInt8(truncatingIfNeeded: (word >> UInt64(60 - (nibble % 16) * 4)) & 0xF)
                out[position] = value < 10 ? value + UInt8(ascii: "0") : value - 10 + UInt8(ascii: "a")
                position += 1
            }
            return position
        }
    }

    /// Byte order, as PostgreSQL compares `uuid` values.
    public static func < (lhs: FinanceID, rhs: FinanceID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }

    /// Decodes the UUID text form.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { self = try FinanceID(parsing: text) } catch { throw error }
    }

    /// Encodes the UUID text form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Derives deterministic ids from stable business keys, so re-applying an event is idempotent.
///
/// The digest is injected (the shell passes SHA-256 from `Crypto`): FinanceStore depends on Money only.
/// Inputs are length-prefixed so that no two (merchant, kind, key) triples share bytes.
public struct FinanceIdentity: Sendable {
    /// Tender merchant id; every derived id is private to it.
    public let merchantID: String
    private let digest: @Sendable ([UInt8]) -> [UInt8]

    /// Creates a deriver for `merchantID`; `digest` must return at least 16 bytes (SHA-256 in production).
    public init(merchantID: String, digest: @escaping @Sendable ([UInt8]) -> [UInt8]) {
        self.merchantID = merchantID
        self.digest = digest
    }

    /// The id of entity `kind` ("account", "transaction", "balance") named by `key` ("payment:pay_1").
    public func id(_ kind: String, _ key: String) -> FinanceID {
        var input = Array("tender.finance.id.v1".utf8)
        for part in [merchantID, kind, key] {
            input += BigEndian.bytes(UInt32(truncatingIfNeeded: part.utf8.count)) + Array(part.utf8)
        }
        return FinanceID(digest: digest(input))
    }
}

/// A UTC instant with second precision, as RFC 3339 text (`2026-03-01T12:00:00Z`) in JSON.
public struct FinanceTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// Seconds since 1970-01-01T00:00:00Z.
    public let secondsSinceEpoch: Int64

    /// Creates a timestamp from Unix seconds.
    public init(secondsSinceEpoch: Int64) {
        self.secondsSinceEpoch = secondsSinceEpoch
    }

    /// Years outside 0001…9999 cannot be written in RFC 3339.
    static let secondsMin: Int64 = -62_135_596_800
    static let secondsMax: Int64 = 253_402_300_799

    /// Parses RFC 3339 (`Z` or `±hh:mm` offset; fractional seconds are truncated).
    public init(parsing text: String) throws(FinanceError) {
        guard let micros = RFC3339.parse(text) else { throw FinanceError(.valueInvalid, detail: "timestamp") }
        self.secondsSinceEpoch = CivilCalendar.floorDivide(micros, 1_000_000)
    }

    /// RFC 3339 in UTC, e.g. `2026-03-01T12:00:00Z`.
    public var description: String {
        RFC3339.format(unixSeconds: min(max(secondsSinceEpoch, Self.secondsMin), Self.secondsMax))
    }

    /// Chronological order.
    public static func < (lhs: FinanceTimestamp, rhs: FinanceTimestamp) -> Bool {
        lhs.secondsSinceEpoch < rhs.secondsSinceEpoch
    }

    /// Decodes RFC 3339 text.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { self = try FinanceTimestamp(parsing: text) } catch { throw error }
    }

    /// Encodes RFC 3339 text in UTC.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Big-endian byte helpers for ids and tokens.
enum BigEndian {
    static func bytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        (0..<(T.bitWidth / 8)).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    static func read<T: FixedWidthInteger>(_ type: T.Type, _ bytes: ArraySlice<UInt8>) -> T {
        bytes.reduce(T(0)) { $0 << 8 | T($1) }
    }

    static func hex(_ value: UInt64) -> String {
        let digits = Array("0123456789abcdef")
        return String((0..<16).reversed().map { digits[Int((value >> (UInt64($0) * 4)) & 0xF)] })
    }
}

/// RFC 4648 §5 base64url without padding, for opaque history tokens.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * $1.offset) }
            for slot in 0..<(chunk.count + 1) {
                out.append(alphabet[Int((value >> (18 - 6 * slot)) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil on any non-alphabet byte, padding, or non-canonical trailing bits.
    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt32] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(UInt32(byte - UInt8(ascii: "A")))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(UInt32(byte - UInt8(ascii: "a") + 26))
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(UInt32(byte - UInt8(ascii: "0") + 52))
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < values.count {
            let group = values[index..<min(index + 4, values.count)]
            let value = group.enumerated().reduce(UInt32(0)) { $0 | $1.element << (18 - 6 * $1.offset) }
            let produced = group.count - 1
            // Canonical form only: unused low bits must be zero, so each token has one spelling.
            let usedBits = produced * 8
            if usedBits < 24 && value & ((1 << (24 - usedBits)) - 1) != 0 { return nil }
            for slot in 0..<produced { out.append(UInt8(truncatingIfNeeded: value >> (16 - 8 * slot))) }
            index += 4
        }
        return out
    }
}
