/// Strict padded Base64 (RFC 4648 §4), as Apple's `applicationData` requires (reference §1.6, rule 20):
/// WebKit decodes with options 0, so anything unpadded, URL-safe or with whitespace would silently
/// drop the binding from the token.
public enum StrictBase64 {
    /// Decodes canonical padded Base64, or returns nil.
    public static func decode(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count / 4 * 3)
        var index = 0
        while index < bytes.count {
            let isLast = index + 4 == bytes.count
            var values: [UInt8] = []
            var padding = 0
            for offset in 0..<4 {
                let byte = bytes[index + offset]
                if byte == UInt8(ascii: "=") {
                    guard isLast, offset >= 2 else { return nil }
                    padding += 1
                    continue
                }
                guard padding == 0, let value = sextet(byte) else { return nil }
                values.append(value)
            }
            let word = values.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (18 - 6 * UInt32($1.offset)) }
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            if padding < 2 { out.append(UInt8(truncatingIfNeeded: word >> 8)) }
            if padding < 1 { out.append(UInt8(truncatingIfNeeded: word)) }
            // Canonical form: bits below the padding must be zero.
            if padding == 1, word & 0xFF != 0 { return nil }
            if padding == 2, word & 0xFFFF != 0 { return nil }
            index += 4
        }
        return out
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
