import Reconciliation

/// Writes into room reserved at the end of a byte array, so that a row of many small pieces (the
/// line JSON, a digest's canonical content) costs one capacity check instead of one per piece. Every
/// write still checks that it stays inside the reserved room (a wrong bound traps, never overwrites).
struct ReservedBytes {
    private let base: UnsafeMutablePointer<UInt8>
    private let room: Int
    /// Bytes written so far.
    private(set) var count = 0

    fileprivate init(base: UnsafeMutablePointer<UInt8>, room: Int) {
        self.base = base
        self.room = room
    }

    private mutating func reserve(_ bytes: Int) -> UnsafeMutablePointer<UInt8> {
        precondition(bytes <= room - count, "ReservedBytes: the reserved room is too small")
        defer { count += bytes }
        return base + count
    }

    mutating func put(_ byte: UInt8) { reserve(1).pointee = byte }

    mutating func put(_ text: StaticString) {
        text.withUTF8Buffer { buffer in
            guard let source = buffer.baseAddress else { return }
            reserve(buffer.count).update(from: source, count: buffer.count)
        }
    }

    /// The string's UTF-8 as it is.
    mutating func put(utf8 text: String) {
        var text = text
        text.withUTF8 { buffer in
            guard let source = buffer.baseAddress else { return }
            reserve(buffer.count).update(from: source, count: buffer.count)
        }
    }

    /// RFC 8259 string: quote, backslash and control characters escaped; other UTF-8 as is. Needs at
    /// most `6 * text.utf8.count + 2` bytes.
    mutating func putJSONString(_ text: String) {
        put(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { buffer in
            var plain = true
            for byte in buffer where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                plain = false
                break
            }
            if plain {
                guard let source = buffer.baseAddress else { return }
                reserve(buffer.count).update(from: source, count: buffer.count)
                return
            }
            let hex: StaticString = "0123456789abcdef"
            for byte in buffer {
                switch byte {
                case UInt8(ascii: "\""): put(0x5C); put(0x22)
                case UInt8(ascii: "\\"): put(0x5C); put(0x5C)
                case 0..<0x20:
                    put(0x5C); put(UInt8(ascii: "u")); put(0x30); put(0x30)
                    put(hex.utf8Start[Int(byte >> 4)])
                    put(hex.utf8Start[Int(byte & 0xF)])
                default: put(byte)
                }
            }
        }
        put(UInt8(ascii: "\""))
    }

    /// `String(value)`'s bytes; at most 20.
    mutating func putDecimal(_ value: Int64) {
        if value < 0 { put(UInt8(ascii: "-")) }
        var rest = value.magnitude
        var digits = 1
        var probe = rest
        while probe >= 10 {
            probe /= 10
            digits += 1
        }
        let out = reserve(digits)
        var position = digits
        repeat {
            position -= 1
            out[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
    }

    /// `date.description` (`YYYY-MM-DD`, 10 bytes).
    mutating func putDate(_ date: SettlementDate) {
        let out = reserve(10)
        func digits(_ value: Int, _ at: Int, _ width: Int) {
            var rest = value
            for offset in stride(from: width - 1, through: 0, by: -1) {
                out[at + offset] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            }
        }
        digits(date.year, 0, 4)
        out[4] = UInt8(ascii: "-")
        digits(date.month, 5, 2)
        out[7] = UInt8(ascii: "-")
        digits(date.day, 8, 2)
    }
}

extension Array where Element == UInt8 {
    /// Appends what `body` writes into `room` bytes reserved at the end (the unused rest is dropped).
    mutating func appendReserved(room: Int, _ body: (inout ReservedBytes) -> Void) {
        let start = count
        append(contentsOf: repeatElement(0, count: room))
        let used = withUnsafeMutableBufferPointer { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            var writer = ReservedBytes(base: base + start, room: room)
            body(&writer)
            return writer.count
        }
        removeLast(room - used)
    }
}
