import Reconciliation

/// Hand-written JSON for the rows an import writes in bulk: the generic encoder cost more than the
/// matching itself on a million-line file. The output decodes with the types' own `Codable`
/// conformances (same keys, `SettlementDate` as `YYYY-MM-DD`), which the tests check by reading
/// items and revision diffs back.
struct RowJSON {
    private(set) var bytes: [UInt8] = []
    private var needsComma: [Bool] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func beginArray() { separator(); bytes.append(UInt8(ascii: "[")); needsComma.append(false) }
    mutating func endArray() { bytes.append(UInt8(ascii: "]")); needsComma.removeLast() }
    mutating func beginObject(_ key: StaticString? = nil) {
        if let key { self.key(key) } else { separator() }
        bytes.append(UInt8(ascii: "{"))
        needsComma.append(false)
    }
    mutating func endObject() { bytes.append(UInt8(ascii: "}")); needsComma.removeLast() }

    mutating func field(_ key: StaticString, _ value: String?) {
        guard let value else { return }
        self.key(key)
        string(value)
    }

    mutating func field(_ key: StaticString, _ value: Int64?) {
        guard let value else { return }
        self.key(key)
        integer(value)
    }

    mutating func field(_ key: StaticString, _ value: Int?) { field(key, value.map(Int64.init)) }

    /// Decimal digits without an intermediate String.
    private mutating func integer(_ value: Int64) { Self.appendDecimal(value, to: &bytes) }

    /// `String(value)`'s bytes appended to `bytes`.
    static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var digits = 1
        var rest = magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        let end = bytes.count + digits
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var position = end
            rest = magnitude
            repeat {
                position -= 1
                buffer[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
        }
    }

    mutating func item(_ item: ReconciliationItem) {
        beginObject("i")
        field("category", item.category.rawValue)
        field("lineNumber", item.lineNumber)
        field("batchId", item.batchId)
        field("journalType", item.journalType)
        field("paymentId", item.paymentId)
        field("refundId", item.refundId)
        field("processorReference", item.processorReference)
        field("currencyCode", item.currencyCode)
        field("expectedCurrencyCode", item.expectedCurrencyCode)
        field("expectedMinor", item.expectedMinor)
        field("actualMinor", item.actualMinor)
        field("differenceMinor", item.differenceMinor)
        field("reason", item.reason)
        endObject()
    }

    /// An item stored next to its line: the fields the line already holds (line number, batch, journal
    /// type, ids, currency, actual = gross) are written only where the item differs, `null` where the
    /// item has none; `StoredItemChunk` fills the rest from the line. Most items are `matched` lines,
    /// whose item then costs a few bytes.
    mutating func item(_ item: ReconciliationItem, besides line: SettlementLine) {
        beginObject("i")
        field("category", item.category.rawValue)
        if item.lineNumber != line.lineNumber { orNull("lineNumber", item.lineNumber) }
        if item.batchId != line.batchId { orNull("batchId", item.batchId) }
        if item.journalType != line.journalType { orNull("journalType", item.journalType) }
        if item.paymentId != line.paymentId { orNull("paymentId", item.paymentId) }
        if item.refundId != line.refundId { orNull("refundId", item.refundId) }
        if item.processorReference != line.processorReference { orNull("processorReference", item.processorReference) }
        if item.currencyCode != line.currencyCode { field("currencyCode", item.currencyCode) }
        field("expectedCurrencyCode", item.expectedCurrencyCode)
        field("expectedMinor", item.expectedMinor)
        if item.actualMinor != line.grossMinor { orNull("actualMinor", item.actualMinor) }
        field("differenceMinor", item.differenceMinor)
        field("reason", item.reason)
        endObject()
    }

    private mutating func orNull(_ key: StaticString, _ value: String?) {
        if let value { field(key, value) } else { null(key) }
    }

    private mutating func orNull(_ key: StaticString, _ value: Int?) {
        if let value { field(key, value) } else { null(key) }
    }

    private mutating func orNull(_ key: StaticString, _ value: Int64?) {
        if let value { field(key, value) } else { null(key) }
    }

    private mutating func null(_ key: StaticString) {
        self.key(key)
        let null: StaticString = "null"
        null.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// `"l":{…}`, the line as its `Codable` conformance writes it (keys in declaration order, nil
    /// members left out), written in one reserved run (`ReservedBytes`): literal key prefixes, the date
    /// and numbers as digits. Same bytes as building it member by member (`RowJSONLineTests`).
    mutating func line(_ line: SettlementLine) {
        key("l")
        let strings = line.naturalKey.utf8.count + line.batchId.utf8.count + line.type.rawValue.utf8.count
            + line.journalType.utf8.count + line.currencyCode.utf8.count + line.netCurrencyCode.utf8.count
            + (line.paymentId?.utf8.count ?? 0) + (line.refundId?.utf8.count ?? 0)
            + (line.processorReference?.utf8.count ?? 0) + (line.paymentMethodVariant?.utf8.count ?? 0)
        // Keys and punctuation under 320 bytes, five numbers of at most 20, a JSON string at most 6 per byte + 2.
        bytes.appendReserved(room: 320 + 5 * 20 + 6 * strings + 20) { out in
            out.put("{\"lineNumber\":")
            out.putDecimal(Int64(line.lineNumber))
            out.put(",\"naturalKey\":")
            out.putJSONString(line.naturalKey)
            out.put(",\"batchId\":")
            out.putJSONString(line.batchId)
            out.put(",\"settlementDate\":\"")
            out.putDate(line.settlementDate)
            out.put("\",\"type\":")
            out.putJSONString(line.type.rawValue)
            out.put(",\"journalType\":")
            out.putJSONString(line.journalType)
            if let value = line.paymentId { out.put(",\"paymentId\":"); out.putJSONString(value) }
            if let value = line.refundId { out.put(",\"refundId\":"); out.putJSONString(value) }
            if let value = line.processorReference { out.put(",\"processorReference\":"); out.putJSONString(value) }
            if let value = line.paymentMethodVariant { out.put(",\"paymentMethodVariant\":"); out.putJSONString(value) }
            out.put(",\"currencyCode\":")
            out.putJSONString(line.currencyCode)
            out.put(",\"grossMinor\":")
            out.putDecimal(line.grossMinor)
            out.put(",\"netCurrencyCode\":")
            out.putJSONString(line.netCurrencyCode)
            out.put(",\"feeMinor\":")
            out.putDecimal(line.feeMinor)
            out.put(",\"netMinor\":")
            out.putDecimal(line.netMinor)
            if let value = line.batchLevelOrdinal { out.put(",\"batchLevelOrdinal\":"); out.putDecimal(Int64(value)) }
            out.put(UInt8(ascii: "}"))
        }
    }

    private mutating func separator() {
        if let last = needsComma.indices.last {
            if needsComma[last] { bytes.append(UInt8(ascii: ",")) }
            needsComma[last] = true
        }
    }

    /// Keys are literals of plain ASCII (nothing to escape): copied as they are.
    private mutating func key(_ key: StaticString) {
        separator()
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        // Byte by byte: an array literal here was an allocation per key.
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// RFC 8259 string: quote, backslash and control characters escaped; other UTF-8 as is.
    private mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        // Fast path: nothing to escape (ids, codes, dates), one copy of the contiguous UTF-8.
        let copied: Bool = value.utf8.withContiguousStorageIfAvailable { utf8 in
            for byte in utf8 where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                return false
            }
            bytes.append(contentsOf: utf8)
            return true
        } ?? false
        if copied {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends an already encoded `"key":value` member of the current object.
    mutating func encodedMember(_ member: ArraySlice<UInt8>) {
        separator()
        bytes.append(contentsOf: member)
    }

    /// Ends a JSON-lines record (top level only: strings never hold a raw newline).
    mutating func newline() { bytes.append(UInt8(ascii: "\n")) }

    /// Empties the buffer, keeping its capacity.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        needsComma.removeAll()
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }
}
