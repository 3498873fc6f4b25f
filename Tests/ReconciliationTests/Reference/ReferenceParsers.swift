// The CSV reader and generic-format parser as they were before they worked on bytes (the string
// versions, kept verbatim apart from their names): the reference the byte versions are compared with.
@testable import Reconciliation
import Time

/// Streaming RFC 4180 reader: quoted fields, doubled quotes, embedded separators and newlines,
/// CRLF or LF terminators, an optional UTF-8 BOM; every byte is checked to be well-formed UTF-8.
///
/// Deliberate strictness (RFC 4180 §2): a quote inside an unquoted field, text after a closing quote
/// and a CR not followed by LF are errors, never guessed at. Blank lines are skipped.
struct ReferenceCSVReader<Source: ByteChunkSource> {
    /// The limits this reader enforces.
    let limits: CSVLimits
    /// Bytes of field content the reader holds right now (the current record only).
    private(set) var bufferedBytes = 0
    /// The most field content bytes ever held at once; bounded by `limits.lineBytesMax`.
    private(set) var bufferedBytesHighWater = 0
    /// Records returned so far, header included.
    private(set) var recordsRead = 0

    private enum State { case fieldStart, unquoted, quoted, quoteInQuoted, afterCR }

    private var source: Source
    private var chunk: ArraySlice<UInt8> = []
    private var chunkIndex = 0
    private var primed = false
    private var finished = false
    private var state = State.fieldStart
    // Position of the byte being consumed (column 0 = before the first byte of the line).
    private var line = 1
    private var column = 0
    private var recordStarted = false
    private var recordStartLine = 1
    private var recordBytes = 0
    private var fieldStartLine = 1
    private var fieldStartColumn = 1
    private var fieldBuffer: [UInt8] = []
    private var fields: [String] = []
    private var fieldLines: [Int] = []
    private var fieldColumns: [Int] = []
    private var endLine = 1
    private var endColumn = 1
    // UTF-8 well-formedness (Unicode Table 3-7): continuation bytes still expected and their range.
    private var utf8Need = 0
    private var utf8Low: UInt8 = 0x80
    private var utf8High: UInt8 = 0xBF

    private static var quote: UInt8 { 0x22 }
    private static var comma: UInt8 { 0x2C }
    private static var lf: UInt8 { 0x0A }
    private static var cr: UInt8 { 0x0D }

    init(source: Source, limits: CSVLimits = CSVLimits()) {
        self.source = source
        self.limits = limits
    }

    /// The next record, or nil at the end of the input; throws at the first malformed byte.
    mutating func next() throws(ReconciliationError) -> CSVRecord? {
        if finished { return nil }
        if !primed { prime() }
        while true {
            while chunkIndex < chunk.endIndex {
                let byte = chunk[chunkIndex]
                chunkIndex += 1
                if try consume(byte) { return takeRecord() }
            }
            guard let next = source.nextChunk() else { return try finish() }
            chunk = next
            chunkIndex = next.startIndex
        }
    }

    // The BOM may straddle chunks, so gather at least three bytes before deciding.
    private mutating func prime() {
        primed = true
        var head: [UInt8] = []
        while head.count < 3, let next = source.nextChunk() { head.append(contentsOf: next) }
        if head.count >= 3, head[0] == 0xEF, head[1] == 0xBB, head[2] == 0xBF {
            chunk = head[3...]
        } else {
            chunk = head[...]
        }
        chunkIndex = chunk.startIndex
    }

    private mutating func finish() throws(ReconciliationError) -> CSVRecord? {
        finished = true
        if utf8Need > 0 {
            throw ReconciliationError(.csvInvalidUTF8, line: line, column: column)
        }
        switch state {
        case .quoted:
            throw ReconciliationError(.csvUnterminatedQuote, line: fieldStartLine,
                                      column: fieldStartColumn)
        case .afterCR:
            throw ReconciliationError(.csvBareCarriageReturn, line: line, column: column)
        case .fieldStart where !recordStarted:
            return nil
        case .fieldStart:
            fieldStartLine = line
            fieldStartColumn = column + 1
            endField()
        case .unquoted, .quoteInQuoted:
            endField()
        }
        endLine = line
        endColumn = column + 1
        return takeRecord()
    }

    // Returns true when `byte` completes a record.
    private mutating func consume(_ byte: UInt8) throws(ReconciliationError) -> Bool {
        column += 1
        if byte >= 0x80 || utf8Need > 0 { try checkUTF8(byte) }
        switch state {
        case .fieldStart:
            if !recordStarted {
                if byte == Self.lf { newline(); return false }  // blank line
                if byte == Self.cr { state = .afterCR; return false }
                if recordsRead >= limits.linesMax {
                    throw ReconciliationError(.csvTooManyLines, line: line, column: column,
                                              limit: limits.linesMax)
                }
                recordStarted = true
                recordStartLine = line
            }
            fieldStartLine = line
            fieldStartColumn = column
            switch byte {
            case Self.quote:
                try countRecordByte()
                state = .quoted
            case Self.comma:
                try countRecordByte()
                try endFieldAtSeparator()
            case Self.lf:
                endField()
                return endRecord()
            case Self.cr:
                state = .afterCR
            default:
                try countRecordByte()
                try append(byte)
                state = .unquoted
            }
        case .unquoted:
            switch byte {
            case Self.comma:
                try countRecordByte()
                try endFieldAtSeparator()
            case Self.lf:
                endField()
                return endRecord()
            case Self.cr:
                state = .afterCR
            case Self.quote:
                // RFC 4180 §2.5: a field containing quotes must itself be quoted.
                throw ReconciliationError(.csvBareQuote, line: line, column: column)
            default:
                try countRecordByte()
                try append(byte)
            }
        case .quoted:
            try countRecordByte()
            if byte == Self.quote {
                state = .quoteInQuoted
            } else {
                try append(byte)
                if byte == Self.lf { newline() }
            }
        case .quoteInQuoted:
            switch byte {
            case Self.quote:
                // RFC 4180 §2.7: a doubled quote is one literal quote.
                try countRecordByte()
                try append(Self.quote)
                state = .quoted
            case Self.comma:
                try countRecordByte()
                try endFieldAtSeparator()
            case Self.lf:
                endField()
                return endRecord()
            case Self.cr:
                state = .afterCR
            default:
                throw ReconciliationError(.csvTextAfterClosingQuote, line: line, column: column)
            }
        case .afterCR:
            guard byte == Self.lf else {
                throw ReconciliationError(.csvBareCarriageReturn, line: line, column: column - 1)
            }
            if !recordStarted {  // blank CRLF line
                newline()
                state = .fieldStart
                return false
            }
            endLine = line
            endColumn = column - 1
            endField()
            newline()
            state = .fieldStart
            return true
        }
        return false
    }

    private mutating func endRecord() -> Bool {
        endLine = line
        endColumn = column
        newline()
        state = .fieldStart
        return true
    }

    private mutating func newline() {
        line += 1
        column = 0
    }

    private mutating func countRecordByte() throws(ReconciliationError) {
        recordBytes += 1
        if recordBytes > limits.lineBytesMax {
            throw ReconciliationError(.csvLineTooLong, line: line, column: column,
                                      limit: limits.lineBytesMax)
        }
    }

    private mutating func append(_ byte: UInt8) throws(ReconciliationError) {
        fieldBuffer.append(byte)
        if fieldBuffer.count > limits.fieldBytesMax {
            throw ReconciliationError(.csvFieldTooLong, line: line, column: column,
                                      limit: limits.fieldBytesMax)
        }
        bufferedBytes += 1
        if bufferedBytes > bufferedBytesHighWater { bufferedBytesHighWater = bufferedBytes }
    }

    private mutating func endFieldAtSeparator() throws(ReconciliationError) {
        endField()
        if fields.count >= limits.fieldsPerLineMax {
            throw ReconciliationError(.csvTooManyFields, line: line, column: column,
                                      limit: limits.fieldsPerLineMax)
        }
        state = .fieldStart
    }

    private mutating func endField() {
        // Bytes were validated as UTF-8 on the way in, so decoding cannot substitute anything.
        fields.append(String(decoding: fieldBuffer, as: UTF8.self))
        fieldLines.append(fieldStartLine)
        fieldColumns.append(fieldStartColumn)
        fieldBuffer.removeAll(keepingCapacity: true)
    }

    private mutating func takeRecord() -> CSVRecord {
        let record = CSVRecord(line: recordStartLine, fields: fields, fieldLines: fieldLines,
                               fieldColumns: fieldColumns, endLine: endLine, endColumn: endColumn)
        fields.removeAll(keepingCapacity: true)
        fieldLines.removeAll(keepingCapacity: true)
        fieldColumns.removeAll(keepingCapacity: true)
        recordStarted = false
        recordBytes = 0
        bufferedBytes = 0
        recordsRead += 1
        return record
    }

    private mutating func checkUTF8(_ byte: UInt8) throws(ReconciliationError) {
        if utf8Need == 0 {
            switch byte {
            case 0x00...0x7F: return
            case 0xC2...0xDF: (utf8Need, utf8Low, utf8High) = (1, 0x80, 0xBF)
            case 0xE0: (utf8Need, utf8Low, utf8High) = (2, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (utf8Need, utf8Low, utf8High) = (2, 0x80, 0xBF)
            case 0xED: (utf8Need, utf8Low, utf8High) = (2, 0x80, 0x9F)
            case 0xF0: (utf8Need, utf8Low, utf8High) = (3, 0x90, 0xBF)
            case 0xF1...0xF3: (utf8Need, utf8Low, utf8High) = (3, 0x80, 0xBF)
            case 0xF4: (utf8Need, utf8Low, utf8High) = (3, 0x80, 0x8F)
            default: throw ReconciliationError(.csvInvalidUTF8, line: line, column: column)
            }
            return
        }
        guard byte >= utf8Low, byte <= utf8High else {
            throw ReconciliationError(.csvInvalidUTF8, line: line, column: column)
        }
        utf8Need -= 1
        (utf8Low, utf8High) = (0x80, 0xBF)
    }
}

// Shared field helpers.
extension CSVRecord {
    func referenceOptional(_ index: Int) -> String? {
        let value = fields[index]
        return value.isEmpty ? nil : value
    }

    func referenceRequired(_ index: Int, _ name: String) throws(ReconciliationError) -> String {
        let value = fields[index]
        if value.isEmpty { throw error(.fieldRequired, field: index, name: name) }
        return value
    }

    func referenceCurrency(_ index: Int, _ name: String) throws(ReconciliationError) -> (String, Int) {
        let code = fields[index]
        guard let exponent = MoneySeam.exponent(of: code) else {
            throw error(.currencyUnknown, field: index, name: name)
        }
        return (code, exponent)
    }

    func referenceAmount(_ index: Int, _ name: String, exponent: Int, rule: FractionDigitsRule,
                emptyIsZero: Bool) throws(ReconciliationError) -> Int64 {
        let text = fields[index]
        if text.isEmpty && emptyIsZero { return 0 }
        switch MoneySeam.parseMinor(text, exponent: exponent, rule: rule) {
        case .success(let minor): return minor
        case .failure(let problem): throw error(problem.code, field: index, name: name)
        }
    }

    func referenceCheckColumnCount(_ expected: Int) throws(ReconciliationError) {
        if fields.count != expected {
            // Point at the first extra field, or at the end of the record where one is missing.
            throw error(.csvWrongColumnCount, field: min(fields.count, expected))
        }
    }
}

func referenceCheckedSum(_ values: [Int64], record: CSVRecord, field index: Int, name: String)
    throws(ReconciliationError) -> Int64 {
    var total: Int64 = 0
    for value in values {
        let (sum, overflow) = total.addingReportingOverflow(value)
        if overflow { throw record.error(.amountOverflow, field: index, name: name) }
        total = sum
    }
    return total
}

/// Tender's `generic` CSV (openapi.yaml).
///
/// Amounts carry exactly the currency's fraction digits. Direction comes from `type`: debit types
/// (refund, fee, chargeback, payout) may be written positive or negative and are stored negative;
/// payment and chargeback_reversal are stored as written; adjustment keeps its sign. `fee_amount`
/// is a cost and its sign is ignored (rebates are adjustments).
enum ReferenceGenericFormat {
    static let header = ["settlement_date", "batch_id", "type", "payment_id", "processor_reference",
                         "currency", "gross_amount", "fee_amount", "net_amount"]

    static func checkHeader(_ record: CSVRecord) throws(ReconciliationError) {
        for (index, name) in header.enumerated() where index >= record.fields.count
            || record.fields[index] != name {
            throw record.error(.headerInvalid, field: index, name: name)
        }
        if record.fields.count != header.count {
            throw record.error(.headerInvalid, field: header.count)
        }
    }

    /// Parses one row; `unreferenced` is true for a row with neither payment id nor reference.
    static func parse(_ record: CSVRecord) throws(ReconciliationError) -> (line: SettlementLine, unreferenced: Bool) {
        try record.referenceCheckColumnCount(header.count)
        guard let date = SettlementDate(record.fields[0]) else {
            throw record.error(.dateInvalid, field: 0, name: header[0])
        }
        let batchId = try record.referenceRequired(1, header[1])
        guard let type = SettlementLineType(rawValue: record.fields[2]), type != .unknown else {
            throw record.error(.typeUnknown, field: 2, name: header[2])
        }
        let paymentId = record.referenceOptional(3)
        let reference = record.referenceOptional(4)
        let (currency, exponent) = try record.referenceCurrency(5, header[5])
        var gross = try record.referenceAmount(6, header[6], exponent: exponent, rule: .exact, emptyIsZero: false)
        let fee = try record.referenceAmount(7, header[7], exponent: exponent, rule: .exact, emptyIsZero: false)
        var net = try record.referenceAmount(8, header[8], exponent: exponent, rule: .exact, emptyIsZero: false)
        switch type {
        case .refund, .fee, .chargeback, .payout:
            gross = -abs(gross)
            net = -abs(net)
        case .payment, .chargebackReversal, .adjustment, .unknown:
            break
        }
        var keyParts = ["generic", batchId, type.rawValue, paymentId ?? "", reference ?? "", currency]
        if paymentId == nil && reference == nil {
            // Batch-level lines have no reference: their amounts are what tells two of them apart.
            keyParts += [String(gross), String(abs(fee)), String(net)]
        }
        let line = SettlementLine(
            lineNumber: record.line, naturalKey: naturalKey(keyParts), batchId: batchId,
            settlementDate: date, type: type, journalType: type.rawValue, paymentId: paymentId,
            refundId: nil, processorReference: reference, paymentMethodVariant: nil,
            currencyCode: currency, grossMinor: gross, netCurrencyCode: currency,
            feeMinor: abs(fee), netMinor: net)
        return (line, paymentId == nil && reference == nil)
    }
}

/// The line reader's loop over the reference CSV reader and the reference generic parser.
func referenceGenericLines(_ bytes: [UInt8], chunkBytes: Int, limits: CSVLimits = CSVLimits())
    throws(ReconciliationError) -> [SettlementLine] {
    var csv = ReferenceCSVReader(source: ByteArraySource(bytes, chunkBytes: chunkBytes), limits: limits)
    guard let header = try csv.next() else { throw ReconciliationError(.csvEmpty, line: 1, column: 1) }
    try ReferenceGenericFormat.checkHeader(header)
    var unreferencedCounts: [String: Int] = [:]
    var lines: [SettlementLine] = []
    while let record = try csv.next() {
        var (line, unreferenced) = try ReferenceGenericFormat.parse(record)
        if unreferenced {
            let slot = naturalKey([line.batchId, line.journalType, line.netCurrencyCode])
            let ordinal = (unreferencedCounts[slot] ?? 0) + 1
            unreferencedCounts[slot] = ordinal
            line.batchLevelOrdinal = ordinal
        }
        lines.append(line)
    }
    return lines
}

/// `SettlementDate.description` as it was written (string padding).
func referenceDescription(_ date: SettlementDate) -> String {
    func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(pad(date.year, 4))-\(pad(date.month, 2))-\(pad(date.day, 2))"
}
