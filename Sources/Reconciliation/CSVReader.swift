// A streaming RFC 4180 reader: it holds one record at a time, so memory does not grow with the file.

/// A pull-based source of raw bytes; the shell adapts a file, socket or request body to it.
public protocol ByteChunkSource {
    /// The next chunk of bytes (any size, possibly empty), or nil at the end of the input.
    mutating func nextChunk() -> ArraySlice<UInt8>?
}

/// A source over bytes already in memory, handed out in fixed-size chunks without copying.
public struct ByteArraySource: ByteChunkSource, Sendable {
    private let bytes: [UInt8]
    private let chunkBytes: Int
    private var offset = 0

    /// Serves `bytes` in chunks of at most `chunkBytes` (at least 1).
    public init(_ bytes: [UInt8], chunkBytes: Int = 65_536) {
        precondition(chunkBytes > 0, "chunkBytes must be positive")
        self.bytes = bytes
        self.chunkBytes = chunkBytes
    }

    /// The next slice of the array, or nil once it is exhausted.
    public mutating func nextChunk() -> ArraySlice<UInt8>? {
        guard offset < bytes.count else { return nil }
        let end = min(offset + chunkBytes, bytes.count)
        defer { offset = end }
        return bytes[offset..<end]
    }
}

/// A source that shows every chunk to an observer before passing it on, e.g. to feed an incremental
/// SHA-256 while the file streams through the reader (the file digest of docs/finance-store.md §4.5).
public struct ObservedSource<Base: ByteChunkSource>: ByteChunkSource {
    private var base: Base
    private let observe: (ArraySlice<UInt8>) -> Void

    /// Wraps `base`; `observe` sees each chunk exactly once, in order.
    public init(_ base: Base, observe: @escaping (ArraySlice<UInt8>) -> Void) {
        self.base = base
        self.observe = observe
    }

    /// The base source's next chunk, after the observer has seen it.
    public mutating func nextChunk() -> ArraySlice<UInt8>? {
        guard let chunk = base.nextChunk() else { return nil }
        observe(chunk)
        return chunk
    }
}

/// Named limits of the CSV reader; each bounds something that would otherwise grow with the input.
public struct CSVLimits: Sendable, Equatable {
    /// Largest field content in bytes (after unquoting).
    public var fieldBytesMax: Int
    /// Largest record in bytes, quotes and separators included, terminator excluded.
    public var lineBytesMax: Int
    /// Most fields in one record.
    public var fieldsPerLineMax: Int
    /// Most records in one file, header included (blank lines are not records).
    public var linesMax: Int

    /// Defaults sized for processor reports: Adyen SDR rows are well under 2 KiB with ~30 columns.
    public init(fieldBytesMax: Int = 4_096, lineBytesMax: Int = 16_384, fieldsPerLineMax: Int = 64,
                linesMax: Int = 5_000_000) {
        self.fieldBytesMax = fieldBytesMax
        self.lineBytesMax = lineBytesMax
        self.fieldsPerLineMax = fieldsPerLineMax
        self.linesMax = linesMax
    }
}

/// One CSV record: its fields, validated as UTF-8, and where each one starts in the file.
public struct CSVRecord: Sendable, Equatable {
    /// 1-based physical line where the record starts.
    public let line: Int
    /// Field values, unquoted.
    public let fields: [String]
    /// Physical line where each field starts.
    public let fieldLines: [Int]
    /// Byte column where each field starts (the opening quote for a quoted field).
    public let fieldColumns: [Int]
    /// Line of the record terminator (or end of file): where a missing field would have been.
    public let endLine: Int
    /// Column of the record terminator (or end of file).
    public let endColumn: Int

    /// An error pointing at field `index`, or at the end of the record if there is no such field.
    public func error(_ code: ReconciliationError.Code, field index: Int, name: String? = nil)
        -> ReconciliationError {
        if index < fields.count {
            return ReconciliationError(code, line: fieldLines[index], column: fieldColumns[index],
                                       field: name)
        }
        return ReconciliationError(code, line: endLine, column: endColumn, field: name)
    }
}

/// One CSV record as the reader holds it: every field's bytes (unquoted, validated as UTF-8) one
/// after another in one buffer, so reading a record allocates nothing. Valid as long as the caller
/// keeps it; the reader reuses its buffers for the next record once this value is gone.
public struct CSVRawRecord: Sendable {
    /// 1-based physical line where the record starts.
    public let line: Int
    let content: [UInt8]
    let ends: [Int]
    /// Physical line where each field starts.
    public let fieldLines: [Int]
    /// Byte column where each field starts (the opening quote for a quoted field).
    public let fieldColumns: [Int]
    /// Line of the record terminator (or end of file).
    public let endLine: Int
    /// Column of the record terminator (or end of file).
    public let endColumn: Int

    /// Number of fields.
    public var count: Int { ends.count }

    /// The bytes of field `index`.
    public subscript(index: Int) -> ArraySlice<UInt8> {
        content[(index == 0 ? 0 : ends[index - 1])..<ends[index]]
    }

    /// Field `index` as a string (its bytes were validated as UTF-8, so nothing is substituted).
    public func string(_ index: Int) -> String { String(decoding: self[index], as: UTF8.self) }

    /// The record with its fields as strings.
    public var record: CSVRecord {
        CSVRecord(line: line, fields: (0..<count).map(string), fieldLines: fieldLines, fieldColumns: fieldColumns,
                  endLine: endLine, endColumn: endColumn)
    }

    /// An error pointing at field `index`, or at the end of the record if there is no such field.
    public func error(_ code: ReconciliationError.Code, field index: Int, name: String? = nil)
        -> ReconciliationError {
        if index < count {
            return ReconciliationError(code, line: fieldLines[index], column: fieldColumns[index], field: name)
        }
        return ReconciliationError(code, line: endLine, column: endColumn, field: name)
    }
}

/// Streaming RFC 4180 reader: quoted fields, doubled quotes, embedded separators and newlines,
/// CRLF or LF terminators, an optional UTF-8 BOM; every byte is checked to be well-formed UTF-8.
///
/// Deliberate strictness (RFC 4180 §2): a quote inside an unquoted field, text after a closing quote
/// and a CR not followed by LF are errors, never guessed at. Blank lines are skipped.
///
/// Inside a field, a run of plain ASCII bytes (no separator, quote, CR or LF) is taken in one step;
/// every other byte, and any run that would reach a limit, goes through the byte-at-a-time state
/// machine, so errors and their positions do not depend on the fast path.
public struct CSVReader<Source: ByteChunkSource> {
    /// The limits this reader enforces.
    public var limits: CSVLimits { scanner.limits }
    /// Bytes of field content the reader holds right now (the current record only).
    public var bufferedBytes: Int { scanner.bufferedBytes }
    /// The most field content bytes ever held at once; bounded by `limits.lineBytesMax`.
    public var bufferedBytesHighWater: Int { scanner.bufferedBytesHighWater }
    /// Records returned so far, header included.
    public var recordsRead: Int { scanner.recordsRead }

    private var source: Source
    // The state machine is not generic over the source, so it runs as compiled here whatever the
    // source (a generic one paid for a metadata lookup per call).
    private var scanner: CSVScanner
    private var primed = false

    /// A reader pulling from `source` under `limits`.
    public init(source: Source, limits: CSVLimits = CSVLimits()) {
        self.source = source
        self.scanner = CSVScanner(limits: limits)
    }

    /// The next record, or nil at the end of the input; throws at the first malformed byte.
    public mutating func next() throws(ReconciliationError) -> CSVRecord? {
        try nextRaw()?.record
    }

    /// The next record as bytes, or nil at the end of the input; throws at the first malformed byte.
    public mutating func nextRaw() throws(ReconciliationError) -> CSVRawRecord? {
        if scanner.finished { return nil }
        if !primed { prime() }
        while true {
            if let record = try scanner.scan() { return record }
            guard let next = source.nextChunk() else { return try scanner.finish() }
            scanner.feed(next)
        }
    }

    // The BOM may straddle chunks, so gather at least three bytes before deciding.
    private mutating func prime() {
        primed = true
        var head: [UInt8] = []
        while head.count < 3, let next = source.nextChunk() { head.append(contentsOf: next) }
        if head.count >= 3, head[0] == 0xEF, head[1] == 0xBB, head[2] == 0xBF {
            scanner.feed(head[3...])
        } else {
            scanner.feed(head[...])
        }
    }
}

/// `CSVReader`'s state machine over the chunks it is fed.
struct CSVScanner {
    let limits: CSVLimits
    private(set) var bufferedBytes = 0
    private(set) var bufferedBytesHighWater = 0
    private(set) var recordsRead = 0
    private(set) var finished = false

    private enum State { case fieldStart, unquoted, quoted, quoteInQuoted, afterCR }

    private var chunk: ArraySlice<UInt8> = []
    private var chunkIndex = 0
    private var state = State.fieldStart
    // Position of the byte being consumed (column 0 = before the first byte of the line).
    private var line = 1
    private var column = 0
    private var recordStarted = false
    private var recordStartLine = 1
    private var recordBytes = 0
    private var fieldStartLine = 1
    private var fieldStartColumn = 1
    // The current record's field contents, back to back, and where each field ends in them.
    private var content: [UInt8] = []
    private var fieldEnds: [Int] = []
    private var fieldContentStart = 0
    private var recordHandedOut = false
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

    init(limits: CSVLimits) { self.limits = limits }

    /// Content of an unquoted field that needs no check: ASCII other than separator, quote, CR and LF.
    private static func isPlainUnquoted(_ byte: UInt8) -> Bool {
        byte < 0x80 && byte != comma && byte != quote && byte != lf && byte != cr
    }

    /// Makes `next` the bytes to scan; the previous chunk must have been used up.
    mutating func feed(_ next: ArraySlice<UInt8>) {
        chunk = next
        chunkIndex = next.startIndex
    }

    /// The next record completed within the current chunk, or nil once the chunk is used up.
    mutating func scan() throws(ReconciliationError) -> CSVRawRecord? {
        if recordHandedOut {
            // The previous record's buffers are reused here (copied only if its caller still holds it).
            recordHandedOut = false
            content.removeAll(keepingCapacity: true)
            fieldEnds.removeAll(keepingCapacity: true)
            fieldLines.removeAll(keepingCapacity: true)
            fieldColumns.removeAll(keepingCapacity: true)
            fieldContentStart = 0
        }
        while chunkIndex < chunk.endIndex {
            if utf8Need == 0 {
                if state == .fieldStart, recordStarted, Self.isPlainUnquoted(chunk[chunkIndex]) {
                    // A field after a separator starting with a plain byte: what `consume` does at
                    // `.fieldStart` before taking the byte as unquoted content.
                    fieldStartLine = line
                    fieldStartColumn = column + 1
                    state = .unquoted
                }
                if state == .unquoted || state == .quoted {
                    takePlainRun()
                    if chunkIndex == chunk.endIndex { break }
                }
            }
            let byte = chunk[chunkIndex]
            chunkIndex += 1
            if try consume(byte) { return takeRecord() }
        }
        return nil
    }

    /// Takes the plain ASCII bytes that follow inside the current field in one step: in an unquoted
    /// field anything but a separator, quote, CR or LF; in a quoted one anything but a quote or LF.
    /// Stops short of the line and field limits, so the byte that breaks one takes the slow path.
    private mutating func takePlainRun() {
        let room = min(limits.lineBytesMax - recordBytes, limits.fieldBytesMax - (content.count - fieldContentStart))
        guard room > 0 else { return }
        let quoted = state == .quoted
        let start = chunkIndex
        let run = chunk.withUnsafeBufferPointer { buffer -> Int in
            let base = start - chunk.startIndex
            let limit = min(buffer.count, base + room)
            var index = base
            if quoted {
                while index < limit {
                    let byte = buffer[index]
                    if byte >= 0x80 || byte == Self.quote || byte == Self.lf { break }
                    index += 1
                }
            } else {
                while index < limit, Self.isPlainUnquoted(buffer[index]) { index += 1 }
            }
            return index - base
        }
        guard run > 0 else { return }
        content.append(contentsOf: chunk[start..<(start + run)])
        chunkIndex += run
        column += run
        recordBytes += run
        bufferedBytes += run
        if bufferedBytes > bufferedBytesHighWater { bufferedBytesHighWater = bufferedBytes }
    }

    /// At the end of the input: the last record if it had no terminator, or the error of a record cut short.
    mutating func finish() throws(ReconciliationError) -> CSVRawRecord? {
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
        content.append(byte)
        if content.count - fieldContentStart > limits.fieldBytesMax {
            throw ReconciliationError(.csvFieldTooLong, line: line, column: column,
                                      limit: limits.fieldBytesMax)
        }
        bufferedBytes += 1
        if bufferedBytes > bufferedBytesHighWater { bufferedBytesHighWater = bufferedBytes }
    }

    private mutating func endFieldAtSeparator() throws(ReconciliationError) {
        endField()
        if fieldEnds.count >= limits.fieldsPerLineMax {
            throw ReconciliationError(.csvTooManyFields, line: line, column: column,
                                      limit: limits.fieldsPerLineMax)
        }
        state = .fieldStart
    }

    private mutating func endField() {
        fieldEnds.append(content.count)
        fieldLines.append(fieldStartLine)
        fieldColumns.append(fieldStartColumn)
        fieldContentStart = content.count
    }

    private mutating func takeRecord() -> CSVRawRecord {
        let record = CSVRawRecord(line: recordStartLine, content: content, ends: fieldEnds, fieldLines: fieldLines,
                                  fieldColumns: fieldColumns, endLine: endLine, endColumn: endColumn)
        recordHandedOut = true
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
