/// Why a `JSONReader` stopped: the text is not RFC 8259 JSON, or not the shape asked for, or nested
/// deeper than allowed. Callers turn it into their own code (`token_malformed`, `payload_malformed`).
package struct JSONReadError: Error, Equatable {
    enum Reason: Equatable {
        case syntax
        case shape
        case depth
    }
    let reason: Reason
    let offset: Int

    static func syntax(_ offset: Int) -> JSONReadError { JSONReadError(reason: .syntax, offset: offset) }
    static func shape(_ offset: Int) -> JSONReadError { JSONReadError(reason: .shape, offset: offset) }
}

/// A strict pull reader of RFC 8259 JSON over UTF-8 bytes, for the fixed shapes Tender reads from
/// Apple (the token and its decrypted payload; the shipping method Apple Pay JS hands the page) without
/// Foundation's `JSONDecoder`, which built a map of the whole document, then Strings and containers per
/// key, and cost more than a token's ECDH.
///
/// Stricter than `JSONDecoder` where that one is lenient, since a payment token is never written so:
/// no trailing commas, numbers only in RFC 8259 grammar (also inside ignored values), UTF-8 only (a
/// leading byte-order mark is skipped), and a key read twice in one object is refused rather than
/// taken first. Everything else matches it: any whitespace between tokens, every escape including
/// surrogate pairs (lone surrogates, control characters and invalid UTF-8 refused), unknown keys
/// ignored, `null` read as absent for optional members.
///
/// The buffer must outlive the reader: use it only inside the `withUnsafeBufferPointer` that made it.
package struct JSONReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private(set) var index: Int
    private let end: Int
    private var depth: Int
    private let depthMax: Int

    /// Reads `bytes[range]` (all of it when nil); `depth` is the nesting already around it.
    package init(_ bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>? = nil, depth: Int = 0, depthMax: Int) {
        self.bytes = bytes
        let range = range ?? 0..<bytes.count
        index = range.lowerBound
        end = range.upperBound
        self.depth = depth
        self.depthMax = depthMax
        if index + 3 <= end, bytes[index] == 0xEF, bytes[index + 1] == 0xBB, bytes[index + 2] == 0xBF { index += 3 }
    }

    // MARK: Structure

    /// Whitespace (RFC 8259 §2: space, tab, LF, CR).
    mutating func skipWhitespace() {
        while index < end {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The next byte after whitespace, not consumed; nil at the end.
    mutating func peek() -> UInt8? {
        skipWhitespace()
        return index < end ? bytes[index] : nil
    }

    /// Only whitespace may follow the value.
    package mutating func expectEnd() throws(JSONReadError) {
        skipWhitespace()
        guard index == end else { throw .syntax(index) }
    }

    /// Consumes `{`; `.shape` if the value is another JSON type.
    package mutating func beginObject() throws(JSONReadError) {
        guard let byte = peek() else { throw .syntax(index) }
        guard byte == UInt8(ascii: "{") else { throw JSONReadError(reason: isValueStart(byte) ? .shape : .syntax, offset: index) }
        try enter()
        index += 1
    }

    /// The index in `names` of the next member's key, -1 for a key not in `names`, or nil after the
    /// closing `}`. `first` is true for the first call on an object (no comma before the member). The
    /// reader then stands before the member's value, which the caller reads or skips.
    package mutating func nextKey(_ names: [[UInt8]], first: Bool) throws(JSONReadError) -> Int? {
        guard let byte = peek() else { throw .syntax(index) }
        if byte == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return nil
        }
        if !first {
            guard byte == UInt8(ascii: ",") else { throw .syntax(index) }
            index += 1
            guard peek() == UInt8(ascii: "\"") else { throw .syntax(index) }
        } else {
            guard byte == UInt8(ascii: "\"") else { throw .syntax(index) }
        }
        let found = try withString { (key: UnsafeBufferPointer<UInt8>) -> Int in
            for (position, name) in names.enumerated() where name.count == key.count && name.elementsEqual(key) { return position }
            return -1
        }
        guard peek() == UInt8(ascii: ":") else { throw .syntax(index) }
        index += 1
        return found
    }

    /// Consumes `null` if it is next; true if it was.
    mutating func skipNull() throws(JSONReadError) -> Bool {
        guard peek() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// Skips one value of any type, checking its syntax and depth.
    mutating func skipValue() throws(JSONReadError) {
        guard let byte = peek() else { throw .syntax(index) }
        switch byte {
        case UInt8(ascii: "\""):
            _ = try withString { (_: UnsafeBufferPointer<UInt8>) in () }
        case UInt8(ascii: "{"):
            try beginObject()
            var first = true
            while try nextKey([], first: first) != nil {
                first = false
                try skipValue()
            }
        case UInt8(ascii: "["):
            try enter()
            index += 1
            if peek() == UInt8(ascii: "]") {
                index += 1
            } else {
                while true {
                    try skipValue()
                    guard let next = peek() else { throw .syntax(index) }
                    index += 1
                    if next == UInt8(ascii: "]") { break }
                    guard next == UInt8(ascii: ",") else { throw .syntax(index - 1) }
                }
            }
            depth -= 1
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: _ = try number()
        }
    }

    /// Skips one value and returns the range of its bytes, to be read again later with a reader on that range.
    mutating func skipValueRange() throws(JSONReadError) -> Range<Int> {
        skipWhitespace()
        let start = index
        try skipValue()
        return start..<index
    }

    /// Current nesting depth (objects and arrays entered and not yet closed).
    var currentDepth: Int { depth }

    /// Calls `element` for each element of an array (the reader stands before each one); `.shape` if not an array.
    mutating func forEachElement(_ element: (inout JSONReader) throws(JSONReadError) -> Void) throws(JSONReadError) {
        guard let byte = peek() else { throw .syntax(index) }
        guard byte == UInt8(ascii: "[") else { throw JSONReadError(reason: isValueStart(byte) ? .shape : .syntax, offset: index) }
        try enter()
        index += 1
        if peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return
        }
        while true {
            try element(&self)
            guard let next = peek() else { throw .syntax(index) }
            index += 1
            if next == UInt8(ascii: "]") { break }
            guard next == UInt8(ascii: ",") else { throw .syntax(index - 1) }
        }
        depth -= 1
    }

    /// Reads an object whose members are looked up in `names`: each named member at most once (a repeat
    /// is `.shape`), any other member skipped; `member` reads the value of the named member at that index.
    /// Returns which of `names` were present.
    @discardableResult
    package mutating func forEachMember(_ names: [[UInt8]],
                                _ member: (Int, inout JSONReader) throws(JSONReadError) -> Void) throws(JSONReadError) -> [Bool] {
        var seen = [Bool](repeating: false, count: names.count)
        try beginObject()
        var first = true
        while let key = try nextKey(names, first: first) {
            first = false
            guard key >= 0 else {
                try skipValue()
                continue
            }
            guard !seen[key] else { throw .shape(index) }
            seen[key] = true
            try member(key, &self)
        }
        return seen
    }

    // MARK: Scalars

    /// A string's unescaped UTF-8 bytes; `.shape` if the value is another JSON type.
    mutating func readStringBytes() throws(JSONReadError) -> [UInt8] {
        try expectString()
        switch try scanString() {
        case .plain(let range): return Array(UnsafeBufferPointer(rebasing: bytes[range]))
        case .escaped(let decoded): return decoded
        }
    }

    /// A string; `.shape` if the value is another JSON type.
    package mutating func readString() throws(JSONReadError) -> String {
        try expectString()
        return try withString { (text: UnsafeBufferPointer<UInt8>) in String(decoding: text, as: UTF8.self) }
    }

    /// A string, or nil for `null`.
    mutating func readOptionalString() throws(JSONReadError) -> String? {
        try skipNull() ? nil : readString()
    }

    /// An integer in RFC 8259 grammar without fraction or exponent that fits Int64; `.shape` otherwise.
    mutating func readInt64() throws(JSONReadError) -> Int64 {
        guard let byte = peek() else { throw .syntax(index) }
        guard byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else {
            throw JSONReadError(reason: isValueStart(byte) ? .shape : .syntax, offset: index)
        }
        let start = index
        guard try number() else { throw .shape(start) }
        var cursor = start
        let negative = bytes[cursor] == UInt8(ascii: "-")
        if negative { cursor += 1 }
        var value: Int64 = 0
        while cursor < index {
            let digit = Int64(bytes[cursor] - UInt8(ascii: "0"))
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowB) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            guard !overflowA, !overflowB else { throw .shape(start) }
            value = next
            cursor += 1
        }
        return value
    }

    // MARK: Internals

    private mutating func enter() throws(JSONReadError) {
        depth += 1
        guard depth <= depthMax else { throw JSONReadError(reason: .depth, offset: index) }
    }

    private func isValueStart(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"),
             UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return false
        }
    }

    private mutating func expectString() throws(JSONReadError) {
        guard let byte = peek() else { throw .syntax(index) }
        guard byte == UInt8(ascii: "\"") else { throw JSONReadError(reason: isValueStart(byte) ? .shape : .syntax, offset: index) }
    }

    private mutating func literal(_ word: StaticString) throws(JSONReadError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= end else { throw .syntax(index) }
        let matches = word.withUTF8Buffer { expected in
            for offset in 0..<count where bytes[index + offset] != expected[offset] { return false }
            return true
        }
        guard matches else { throw .syntax(index) }
        index += count
    }

    /// Consumes a number in RFC 8259 §6 grammar; returns true when it is an integer (no fraction, no exponent).
    private mutating func number() throws(JSONReadError) -> Bool {
        let start = index
        if index < end, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < end else { throw .syntax(start) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() > 0 else { throw .syntax(start) }
        }
        var integer = true
        if index < end, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw .syntax(start) }
            integer = false
        }
        if index < end, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < end, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw .syntax(start) }
            integer = false
        }
        return integer
    }

    private mutating func digits() -> Int {
        let start = index
        while index < end, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        return index - start
    }

    private enum ScannedString {
        /// No escapes: the string's bytes in place.
        case plain(Range<Int>)
        /// Escapes decoded into a copy.
        case escaped([UInt8])
    }

    /// Reads the string at `index` (which is its opening quote) and hands `body` its unescaped, validated UTF-8.
    private mutating func withString<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONReadError) -> T {
        switch try scanString() {
        case .plain(let range): return body(UnsafeBufferPointer(rebasing: bytes[range]))
        case .escaped(let decoded): return decoded.withUnsafeBufferPointer(body)
        }
    }

    /// Reads the string at `index` (its opening quote): UTF-8 validated, no raw control characters.
    private mutating func scanString() throws(JSONReadError) -> ScannedString {
        let open = index
        index += 1
        let start = index
        var ascii = true
        while true {
            guard index < end else { throw .syntax(open) }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\") { return .escaped(try escapedString(from: start)) }
            guard byte >= 0x20 else { throw .syntax(index) }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        let range = start..<index
        index += 1
        guard ascii || String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) != nil else { throw .syntax(start) }
        return .plain(range)
    }

    private mutating func escapedString(from start: Int) throws(JSONReadError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(index - start + 64)
        var runStart = start
        while true {
            guard index < end else { throw .syntax(start) }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                // Copy the unescaped run before it in one go (JSONEncoder writes `\/` all through base64).
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                index += 1
                if byte == UInt8(ascii: "\"") {
                    guard String(validating: out, as: UTF8.self) != nil else { throw .syntax(start) }
                    return out
                }
                try appendEscape(to: &out)
                runStart = index
            } else {
                guard byte >= 0x20 else { throw .syntax(index) }
                index += 1
            }
        }
    }

    private mutating func appendEscape(to out: inout [UInt8]) throws(JSONReadError) {
        guard index < end else { throw .syntax(index) }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low one (RFC 8259 §7).
                guard index + 2 <= end, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw .syntax(index)
                }
                index += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw .syntax(index) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw .syntax(index)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw .syntax(index) }
            if let encoded = UTF8.encode(unicode) { out.append(contentsOf: encoded) }
        default:
            throw .syntax(index - 1)
        }
    }

    private mutating func hex4() throws(JSONReadError) -> UInt32 {
        guard index + 4 <= end else { throw .syntax(index) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let nibble = Hex.nibble(bytes[index]) else { throw .syntax(index) }
            value = value << 4 | UInt32(nibble)
            index += 1
        }
        return value
    }
}
