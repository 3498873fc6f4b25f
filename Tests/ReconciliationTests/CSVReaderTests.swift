import Testing
import Reconciliation

@Suite struct CSVReaderTests {
    @Test func readsLFAndCRLFRecords() throws {
        let result = try records("a,b\r\nc,d\n")
        #expect(result.map(\.fields) == [["a", "b"], ["c", "d"]])
        #expect(result.map(\.line) == [1, 2])
    }

    @Test func lastRecordWithoutTerminatorAndTrailingEmptyField() throws {
        let result = try records("a,\nb,c")
        #expect(result.map(\.fields) == [["a", ""], ["b", "c"]])
    }

    @Test func quotedFieldsWithCommasQuotesAndNewlines() throws {
        let text = "x,\"a,b\",\"he said \"\"hi\"\"\",\"l1\nl2\"\r\nnext,\"\",3\n"
        let result = try records(text)
        #expect(result.count == 2)
        #expect(result[0].fields == ["x", "a,b", "he said \"hi\"", "l1\nl2"])
        #expect(result[1].fields == ["next", "", "3"])
        // The embedded newline moves the second record to physical line 3.
        #expect(result[1].line == 3)
        #expect(result[0].fieldColumns == [1, 3, 9, 26])
    }

    @Test func byteOrderMarkIsSkippedAndNotCounted() throws {
        let result = try records("\u{FEFF}h1,h2\nv1,v2\n", chunkBytes: 1)
        #expect(result[0].fields == ["h1", "h2"])
        #expect(result[0].fieldColumns == [1, 4])
        let error = csvError("\u{FEFF}\"abc")
        #expect(error?.code == .csvUnterminatedQuote)
        #expect(error?.line == 1)
        #expect(error?.column == 1)
    }

    @Test func blankLinesAreSkipped() throws {
        let result = try records("a\r\n\r\n\nb\n")
        #expect(result.map(\.fields) == [["a"], ["b"]])
        #expect(result[1].line == 4)
    }

    @Test func chunkSizeDoesNotChangeTheResult() throws {
        let text = "\u{FEFF}id,\"n,ame\",x\r\n1,\"é\"\"\n\",ü\n2,b,c"
        let expected = try records(text, chunkBytes: 4096)
        for size in 1...9 {
            #expect(try records(text, chunkBytes: size) == expected)
        }
    }

    @Test func unterminatedQuotePointsAtTheOpeningQuote() {
        let error = csvError("a,b\nc,\"de\nf\n")
        #expect(error?.code == .csvUnterminatedQuote)
        #expect(error?.line == 2)
        #expect(error?.column == 3)
    }

    @Test func bareQuoteInUnquotedField() {
        let error = csvError("a,b\nab\"c,d\n")
        #expect(error?.code == .csvBareQuote)
        #expect(error?.line == 2)
        #expect(error?.column == 3)
    }

    @Test func textAfterClosingQuote() {
        let error = csvError("1,2\n\"ab\"x,1\n")
        #expect(error?.code == .csvTextAfterClosingQuote)
        #expect(error?.line == 2)
        #expect(error?.column == 5)
    }

    @Test func bareCarriageReturn() {
        let error = csvError("a,b\nc\rd\n")
        #expect(error?.code == .csvBareCarriageReturn)
        #expect(error?.line == 2)
        #expect(error?.column == 2)
    }

    @Test func lineLengthAtAndPastTheLimit() throws {
        let limits = CSVLimits(lineBytesMax: 5)
        #expect(try records("abcde\r\n\"a\",b\n", limits: limits).count == 2)
        let error = csvError("abcde\nab,def\n", limits: limits)
        #expect(error?.code == .csvLineTooLong)
        #expect(error?.line == 2)
        #expect(error?.column == 6)
        #expect(error?.limit == 5)
    }

    @Test func fieldLengthAtAndPastTheLimit() throws {
        let limits = CSVLimits(fieldBytesMax: 3)
        #expect(try records("abc,\"d\"\"e\"\n", limits: limits).count == 1)
        let error = csvError("abc,d\nx,abcd\n", limits: limits)
        #expect(error?.code == .csvFieldTooLong)
        #expect(error?.line == 2)
        #expect(error?.column == 6)
    }

    @Test func fieldCountAtAndPastTheLimit() throws {
        let limits = CSVLimits(fieldsPerLineMax: 3)
        #expect(try records("a,b,c\n,,\n", limits: limits).count == 2)
        let error = csvError("a,b,c\na,b,c,d\n", limits: limits)
        #expect(error?.code == .csvTooManyFields)
        #expect(error?.line == 2)
        #expect(error?.column == 6)
    }

    @Test func lineCountAtAndPastTheLimit() throws {
        let limits = CSVLimits(linesMax: 2)
        #expect(try records("a\n\nb\n\n", limits: limits).count == 2)
        let error = csvError("a\nb\nc\n", limits: limits)
        #expect(error?.code == .csvTooManyLines)
        #expect(error?.line == 3)
        #expect(error?.column == 1)
    }

    @Test(arguments: [
        ([0x6F, 0x6B, 0x0A, 0x61, 0x62, 0xFF, 0x63, 0x0A] as [UInt8], 2, 3),  // never valid
        ([0x61, 0x2C, 0xC3, 0x2C, 0x62] as [UInt8], 1, 4),                    // truncated sequence
        ([0xC0, 0xAF] as [UInt8], 1, 1),                                       // overlong "/"
        ([0x78, 0xED, 0xA0, 0x80] as [UInt8], 1, 3),                           // UTF-16 surrogate
        ([0x61, 0xE2, 0x82] as [UInt8], 1, 3),                                 // cut at end of file
    ])
    func invalidUTF8(bytes: [UInt8], line: Int, column: Int) {
        let error = csvError(bytes)
        #expect(error?.code == .csvInvalidUTF8)
        #expect(error?.line == line)
        #expect(error?.column == column)
    }

    @Test func validMultibyteUTF8IsKept() throws {
        let result = try records("ü,€,𝄞\n")
        #expect(result[0].fields == ["ü", "€", "𝄞"])
    }

    @Test func observedSourceSeesEveryByteOnce() throws {
        let text = Array("a,b\n\"c\nd\",e\n".utf8)
        final class Sink: @unchecked Sendable { var bytes: [UInt8] = [] }
        let sink = Sink()
        let source = ObservedSource(ByteArraySource(text, chunkBytes: 2)) { sink.bytes += $0 }
        var reader = CSVReader(source: source)
        while try reader.next() != nil {}
        #expect(sink.bytes == text)
    }
}

/// Produces `count` synthetic generic lines on demand without ever holding the file.
struct SyntheticGenericSource: ByteChunkSource {
    let count: Int
    private var produced = -1

    init(count: Int) { self.count = count }

    mutating func nextChunk() -> ArraySlice<UInt8>? {
        defer { produced += 1 }
        if produced < 0 { return ArraySlice(genericHeader.utf8) }
        guard produced < count else { return nil }
        let line = "2024-03-01,B\(produced / 1000),payment,pay_\(produced),psp_\(produced),USD,10.00,0.30,9.70\n"
        return ArraySlice(line.utf8)
    }
}

@Suite struct StreamingTests {
    @Test func readerHoldsOneRecordAtATime() throws {
        let count = 200_000
        let limits = CSVLimits(lineBytesMax: 256)
        var reader = SettlementLineReader(format: .generic, source: SyntheticGenericSource(count: count),
                                          limits: limits)
        var read = 0
        var lastLine = 0
        while let line = try reader.next() {
            read += 1
            lastLine = line.lineNumber
        }
        #expect(read == count)
        #expect(lastLine == count + 1)
        // The header is the longest record (its content without commas and LF); every data line is
        // shorter, so holding any two records at once would exceed it.
        let headerContentBytes = genericHeader.utf8.count - 1 - 8
        #expect(reader.csv.bufferedBytesHighWater == headerContentBytes)
        #expect(reader.csv.bufferedBytesHighWater <= limits.lineBytesMax)
        #expect(reader.csv.bufferedBytes == 0)
    }
}
