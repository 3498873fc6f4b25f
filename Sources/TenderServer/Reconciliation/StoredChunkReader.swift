import Reconciliation

/// Reads the stored form of an item chunk (`StoredItemChunk`) without `JSONDecoder`: the effects of a
/// chunk start by decoding its thousand entries, and the generic decoder cost more per line than
/// deriving and claiming the line's effects. It accepts the subset of JSON that `RowJSON` writes
/// (objects, strings, integers, `null`) and gives up, returning nil, on anything else: an unknown
/// value kind, a duplicate key, a number that is not a plain integer, a missing required field. The
/// caller then decodes the chunk with `JSONDecoder`, so the result, errors included, is always what
/// the `Codable` conformances would give (the tests compare both on the same chunks).
enum StoredChunkReader {
    /// A parsed JSON value of the subset.
    indirect enum Value {
        case string(String)
        case integer(Int64)
        case null
        case object(Members)
    }

    /// An object's members in file order; lookups are linear (a stored object has under twenty).
    struct Members {
        var keys: [String] = []
        var values: [Value] = []

        subscript(_ key: String) -> Value? {
            guard let index = keys.firstIndex(of: key) else { return nil }
            return values[index]
        }

        func contains(_ key: String) -> Bool { keys.contains(key) }
    }

    /// Every entry of `text` (JSON lines), or nil when some line is outside the subset.
    static func entries(_ text: String) -> [StoredItemChunk.Entry]? {
        var text = text
        return text.withUTF8 { bytes -> [StoredItemChunk.Entry]? in
            var entries: [StoredItemChunk.Entry] = []
            var parser = Parser(bytes: bytes)
            while parser.skipNewlines() {
                guard case .object(let members)? = parser.value(depth: 0), parser.atLineEnd(),
                      let entry = entry(members) else { return nil }
                entries.append(entry)
            }
            return entries
        }
    }

    // MARK: From members to values (the rules of `StoredItemChunk.Entry.init(from:)`)

    static func entry(_ members: Members) -> StoredItemChunk.Entry? {
        guard case .integer(let rawOrdinal)? = members["o"], let ordinal = Int(exactly: rawOrdinal) else { return nil }
        var line: SettlementLine?
        switch members["l"] {
        case nil, .null?: line = nil
        case .object(let fields)?:
            guard let parsed = settlementLine(fields) else { return nil }
            line = parsed
        default: return nil
        }
        var delta: Int64?
        switch members["d"] {
        case nil, .null?: delta = nil
        case .integer(let value)?: delta = value
        default: return nil
        }
        guard case .object(let fields)? = members["i"] else { return nil }
        if let line, delta == 1 {
            guard let item = deltaItem(fields, line: line) else { return nil }
            return StoredItemChunk.Entry(ordinal: ordinal, item: item, line: line)
        }
        guard let item = fullItem(fields) else { return nil }
        return StoredItemChunk.Entry(ordinal: ordinal, item: item, line: line)
    }

    /// A required or optional field's value: `.some(nil)` for null or absent, nil when of another kind.
    private static func text(_ members: Members, _ key: String) -> String?? {
        switch members[key] {
        case nil, .null?: return .some(nil)
        case .string(let value)?: return .some(value)
        default: return nil
        }
    }

    private static func number(_ members: Members, _ key: String) -> Int64?? {
        switch members[key] {
        case nil, .null?: return .some(nil)
        case .integer(let value)?: return .some(value)
        default: return nil
        }
    }

    private static func int(_ members: Members, _ key: String) -> Int?? {
        guard let value = number(members, key) else { return nil }
        guard let value else { return .some(nil) }
        guard let int = Int(exactly: value) else { return nil }
        return .some(int)
    }

    static func settlementLine(_ m: Members) -> SettlementLine? {
        guard let lineNumber = int(m, "lineNumber") ?? nil, let naturalKey = text(m, "naturalKey") ?? nil,
              let batchId = text(m, "batchId") ?? nil, let dateText = text(m, "settlementDate") ?? nil,
              let date = SettlementDate(dateText), let typeText = text(m, "type") ?? nil,
              let type = SettlementLineType(rawValue: typeText), let journalType = text(m, "journalType") ?? nil,
              let paymentId = text(m, "paymentId"), let refundId = text(m, "refundId"),
              let reference = text(m, "processorReference"), let variant = text(m, "paymentMethodVariant"),
              let currency = text(m, "currencyCode") ?? nil, let gross = number(m, "grossMinor") ?? nil,
              let netCurrency = text(m, "netCurrencyCode") ?? nil, let fee = number(m, "feeMinor") ?? nil,
              let net = number(m, "netMinor") ?? nil, let ordinal = int(m, "batchLevelOrdinal") else { return nil }
        return SettlementLine(
            lineNumber: lineNumber, naturalKey: naturalKey, batchId: batchId, settlementDate: date, type: type,
            journalType: journalType, paymentId: paymentId, refundId: refundId, processorReference: reference,
            paymentMethodVariant: variant, currencyCode: currency, grossMinor: gross, netCurrencyCode: netCurrency,
            feeMinor: fee, netMinor: net, batchLevelOrdinal: ordinal)
    }

    static func fullItem(_ m: Members) -> ReconciliationItem? {
        guard let categoryText = text(m, "category") ?? nil, let category = ReconciliationCategory(rawValue: categoryText),
              let currency = text(m, "currencyCode") ?? nil, let lineNumber = int(m, "lineNumber"),
              let batchId = text(m, "batchId"), let journalType = text(m, "journalType"),
              let paymentId = text(m, "paymentId"), let refundId = text(m, "refundId"),
              let reference = text(m, "processorReference"), let expectedCurrency = text(m, "expectedCurrencyCode"),
              let expected = number(m, "expectedMinor"), let actual = number(m, "actualMinor"),
              let difference = number(m, "differenceMinor"), let reason = text(m, "reason") else { return nil }
        return ReconciliationItem(
            category: category, lineNumber: lineNumber, batchId: batchId, journalType: journalType, paymentId: paymentId,
            refundId: refundId, processorReference: reference, currencyCode: currency,
            expectedCurrencyCode: expectedCurrency, expectedMinor: expected, actualMinor: actual,
            differenceMinor: difference, reason: reason)
    }

    /// Absent: the line's value; present: the item's own (null included).
    static func deltaItem(_ m: Members, line: SettlementLine) -> ReconciliationItem? {
        func text(_ key: String, _ fallback: String?) -> String?? {
            m.contains(key) ? Self.text(m, key) : .some(fallback)
        }
        guard let categoryText = Self.text(m, "category") ?? nil,
              let category = ReconciliationCategory(rawValue: categoryText),
              let lineNumber = m.contains("lineNumber") ? int(m, "lineNumber") : .some(line.lineNumber),
              let batchId = text("batchId", line.batchId), let journalType = text("journalType", line.journalType),
              let paymentId = text("paymentId", line.paymentId), let refundId = text("refundId", line.refundId),
              let reference = text("processorReference", line.processorReference),
              let currency = Self.text(m, "currencyCode"), let expectedCurrency = Self.text(m, "expectedCurrencyCode"),
              let expected = number(m, "expectedMinor"),
              let actual = m.contains("actualMinor") ? number(m, "actualMinor") : .some(line.grossMinor),
              let difference = number(m, "differenceMinor"), let reason = Self.text(m, "reason") else { return nil }
        return ReconciliationItem(
            category: category, lineNumber: lineNumber, batchId: batchId, journalType: journalType, paymentId: paymentId,
            refundId: refundId, processorReference: reference, currencyCode: currency ?? line.currencyCode,
            expectedCurrencyCode: expectedCurrency, expectedMinor: expected, actualMinor: actual,
            differenceMinor: difference, reason: reason)
    }
}

extension StoredChunkReader {
    /// A cursor over one chunk's UTF-8; every method returns nil (or false) on input outside the subset.
    struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0
        /// Nesting a stored entry never exceeds (entry, item or line).
        static let depthMax = 4

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        /// Skips record separators; false at the end of the text.
        mutating func skipNewlines() -> Bool {
            while position < bytes.count, bytes[position] == UInt8(ascii: "\n") { position += 1 }
            return position < bytes.count
        }

        /// True when only blanks are left before the next record separator or the end.
        mutating func atLineEnd() -> Bool {
            skipBlanks()
            return position == bytes.count || bytes[position] == UInt8(ascii: "\n")
        }

        private mutating func skipBlanks() {
            while position < bytes.count,
                  bytes[position] == UInt8(ascii: " ") || bytes[position] == UInt8(ascii: "\t")
                    || bytes[position] == UInt8(ascii: "\r") { position += 1 }
        }

        mutating func value(depth: Int) -> Value? {
            skipBlanks()
            guard position < bytes.count else { return nil }
            switch bytes[position] {
            case UInt8(ascii: "{"):
                guard depth < Self.depthMax else { return nil }
                return object(depth: depth + 1)
            case UInt8(ascii: "\""):
                return string().map(Value.string)
            case UInt8(ascii: "n"):
                guard position + 4 <= bytes.count, bytes[position + 1] == UInt8(ascii: "u"),
                      bytes[position + 2] == UInt8(ascii: "l"), bytes[position + 3] == UInt8(ascii: "l") else { return nil }
                position += 4
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return integer().map(Value.integer)
            default:
                return nil
            }
        }

        private mutating func object(depth: Int) -> Value? {
            position += 1  // {
            var members = Members()
            skipBlanks()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            }
            while true {
                skipBlanks()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\""), let key = string(),
                      !members.contains(key) else { return nil }
                skipBlanks()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { return nil }
                position += 1
                guard let value = value(depth: depth) else { return nil }
                members.keys.append(key)
                members.values.append(value)
                skipBlanks()
                guard position < bytes.count else { return nil }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                guard bytes[position] == UInt8(ascii: "}") else { return nil }
                position += 1
                return .object(members)
            }
        }

        /// An integer as RFC 8259 writes one (no leading zeros), within Int64; a fraction or exponent is nil.
        private mutating func integer() -> Int64? {
            var negative = false
            if bytes[position] == UInt8(ascii: "-") {
                negative = true
                position += 1
            }
            let start = position
            var number: Int64 = 0
            while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
                let digit = Int64(bytes[position] - UInt8(ascii: "0"))
                let (shifted, overflowA) = number.multipliedReportingOverflow(by: 10)
                let (next, overflowB) = negative ? shifted.subtractingReportingOverflow(digit)
                                                 : shifted.addingReportingOverflow(digit)
                guard !overflowA, !overflowB else { return nil }
                number = next
                position += 1
            }
            let digits = position - start
            guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
            if position < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[position]) {
                return nil
            }
            return number
        }

        /// A string at the opening quote: escapes decoded, raw control characters refused.
        private mutating func string() -> String? {
            position += 1  // "
            let start = position
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
                    position += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { return escapedString(from: start) }
                guard byte >= 0x20 else { return nil }
                position += 1
            }
            return nil
        }

        private mutating func escapedString(from start: Int) -> String? {
            var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard position < bytes.count else { return nil }
                    let escape = bytes[position]
                    position += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = unicodeEscape() else { return nil }
                        out.append(contentsOf: String(Character(scalar)).utf8)
                    default: return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    out.append(byte)
                }
            }
            return nil
        }

        /// After `\u`: one BMP scalar or a surrogate pair; a lone surrogate is nil.
        private mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let high = hex4() else { return nil }
            if (0xD800...0xDBFF).contains(high) {
                guard position + 2 <= bytes.count, bytes[position] == UInt8(ascii: "\\"),
                      bytes[position + 1] == UInt8(ascii: "u") else { return nil }
                position += 2
                guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            }
            return Unicode.Scalar(high)
        }

        private mutating func hex4() -> UInt32? {
            guard position + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                position += 1
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
    }
}
