import Foundation

/// A deterministic ZIP writer (APPNOTE 6.3.10): stored entries, in the order given, with a fixed
/// modification time, so the same files always make the same bytes (Wallet's `.order` and `.pkpass`).
public struct ZipArchive: Sendable {
    /// One file of the archive.
    public struct Entry: Sendable, Equatable {
        /// Path inside the archive (`/` separated, no leading `/`, no `..`).
        public let name: String
        /// The file's bytes.
        public let bytes: [UInt8]

        /// Creates an entry.
        public init(name: String, bytes: [UInt8]) {
            self.name = name
            self.bytes = bytes
        }
    }

    /// Most entries and bytes per entry: ZIP64 is never needed for Wallet packages.
    public static let entriesMax = 1_000
    /// See `entriesMax`.
    public static let entryBytesMax = 16 * 1_024 * 1_024

    /// DOS date 1980-01-01, time 00:00: the same for every entry of every archive.
    static let dosTime: UInt16 = 0
    static let dosDate: UInt16 = (0 << 9) | (1 << 5) | 1

    /// The archive's bytes for `entries`, in their order. Throws `invalid_argument` for a name that
    /// is empty, absolute, climbs with `..`, repeats, or for limits passed.
    public static func write(_ entries: [Entry]) throws(CryptoError) -> [UInt8] {
        guard entries.count <= entriesMax else { throw CryptoError(.invalidArgument, "too many zip entries") }
        var seen = Set<String>()
        var out: [UInt8] = []
        var central: [UInt8] = []
        for entry in entries {
            let name = Array(entry.name.utf8)
            guard !name.isEmpty, name.count <= 255, !entry.name.hasPrefix("/"),
                  !entry.name.split(separator: "/").contains(".."), seen.insert(entry.name).inserted else {
                throw CryptoError(.invalidArgument, "zip entry name not allowed")
            }
            guard entry.bytes.count <= entryBytesMax else { throw CryptoError(.invalidArgument, "zip entry too large") }
            let crc = CRC32.checksum(entry.bytes)
            let size = UInt32(entry.bytes.count)
            let offset = UInt32(out.count)
            // Local file header (APPNOTE 4.3.7); bit 11: names are UTF-8.
            out.le32(0x0403_4b50); out.le16(20); out.le16(0x0800); out.le16(0)
            out.le16(dosTime); out.le16(dosDate); out.le32(crc); out.le32(size); out.le32(size)
            out.le16(UInt16(name.count)); out.le16(0)
            out.append(contentsOf: name)
            out.append(contentsOf: entry.bytes)
            // Central directory header (APPNOTE 4.3.12).
            central.le32(0x0201_4b50); central.le16(20); central.le16(20); central.le16(0x0800); central.le16(0)
            central.le16(dosTime); central.le16(dosDate); central.le32(crc); central.le32(size); central.le32(size)
            central.le16(UInt16(name.count)); central.le16(0); central.le16(0); central.le16(0); central.le16(0)
            central.le32(0o100644 << 16); central.le32(offset)
            central.append(contentsOf: name)
        }
        let centralOffset = UInt32(out.count)
        out.append(contentsOf: central)
        // End of central directory record (APPNOTE 4.3.16).
        out.le32(0x0605_4b50); out.le16(0); out.le16(0)
        out.le16(UInt16(entries.count)); out.le16(UInt16(entries.count))
        out.le32(UInt32(central.count)); out.le32(centralOffset); out.le16(0)
        return out
    }

    /// Reads back an archive this writer made (stored entries only), for tests and verification.
    public static func read(_ bytes: [UInt8]) throws(CryptoError) -> [Entry] {
        var entries: [Entry] = []
        var index = 0
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        while index + 30 <= bytes.count, u32(index) == 0x0403_4b50 {
            guard u16(index + 8) == 0 else { throw CryptoError(.invalidArgument, "compressed zip entry") }
            let size = u32(index + 18), nameLength = u16(index + 26), extraLength = u16(index + 28)
            let start = index + 30 + nameLength + extraLength
            guard start + size <= bytes.count else { throw CryptoError(.invalidArgument, "truncated zip") }
            let name = String(decoding: bytes[(index + 30)..<(index + 30 + nameLength)], as: UTF8.self)
            let data = Array(bytes[start..<(start + size)])
            guard CRC32.checksum(data) == UInt32(u32(index + 14)) else { throw CryptoError(.invalidArgument, "zip CRC mismatch") }
            entries.append(Entry(name: name, bytes: data))
            index = start + size
        }
        return entries
    }
}

/// CRC-32 (ISO 3309, the polynomial ZIP uses).
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}

extension Array where Element == UInt8 {
    mutating func le16(_ value: UInt16) {
        append(UInt8(value & 0xFF)); append(UInt8(value >> 8))
    }

    mutating func le32(_ value: UInt32) {
        le16(UInt16(value & 0xFFFF)); le16(UInt16(value >> 16))
    }
}
