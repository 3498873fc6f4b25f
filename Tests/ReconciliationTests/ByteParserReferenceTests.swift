import Foundation
import Testing
@testable import Reconciliation

/// The byte-level CSV reader and generic parser against the string versions they replaced
/// (Reference/ReferenceParsers.swift): over random inputs and the real processor files, the same
/// records, lines and errors (code, line, column, limit), whatever the chunk size.
@Suite struct ByteParserReferenceTests {
    /// A small deterministic generator (SplitMix64), so that a failure replays.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
    }

    enum Outcome<Value: Equatable>: Equatable {
        case value(Value)
        case error(ReconciliationError)
    }

    struct RecordView: Equatable {
        let line: Int, fields: [String], fieldLines: [Int], fieldColumns: [Int], endLine: Int, endColumn: Int
        init(_ record: CSVRecord) {
            (line, fields, fieldLines, fieldColumns) = (record.line, record.fields, record.fieldLines, record.fieldColumns)
            (endLine, endColumn) = (record.endLine, record.endColumn)
        }
    }

    static func newRecords(_ bytes: [UInt8], chunkBytes: Int, limits: CSVLimits) -> Outcome<[RecordView]> {
        var reader = CSVReader(source: ByteArraySource(bytes, chunkBytes: chunkBytes), limits: limits)
        var records: [RecordView] = []
        do {
            while let record = try reader.next() { records.append(RecordView(record)) }
            return .value(records + [RecordView(CSVRecord(line: reader.bufferedBytesHighWater, fields: [], fieldLines: [],
                                                          fieldColumns: [], endLine: reader.recordsRead, endColumn: 0))])
        } catch {
            return .error(error)
        }
    }

    static func referenceRecords(_ bytes: [UInt8], chunkBytes: Int, limits: CSVLimits) -> Outcome<[RecordView]> {
        var reader = ReferenceCSVReader(source: ByteArraySource(bytes, chunkBytes: chunkBytes), limits: limits)
        var records: [RecordView] = []
        do {
            while let record = try reader.next() { records.append(RecordView(record)) }
            return .value(records + [RecordView(CSVRecord(line: reader.bufferedBytesHighWater, fields: [], fieldLines: [],
                                                          fieldColumns: [], endLine: reader.recordsRead, endColumn: 0))])
        } catch {
            return .error(error)
        }
    }

    /// CSV-ish bytes: mostly plain text, with separators, quotes, CR, LF, multibyte and broken UTF-8.
    static func csvBytes(_ random: inout Random) -> [UInt8] {
        let pieces: [[UInt8]] = [
            Array("abc".utf8), Array("pay_0001".utf8), Array("10.00".utf8), [0x2C], [0x2C], [0x22], [0x22, 0x22],
            [0x0A], [0x0D, 0x0A], [0x0D], Array("ü".utf8), Array("€".utf8), Array("𝄞".utf8), [0xFF], [0xC3],
            [0xED, 0xA0, 0x80], [0x00], [0x09], Array(" x ".utf8), Array(String(repeating: "z", count: 40).utf8),
        ]
        var bytes: [UInt8] = random.below(8) == 0 ? [0xEF, 0xBB, 0xBF] : []
        for _ in 0..<random.below(40) { bytes += random.pick(pieces) }
        return bytes
    }

    @Test func csvReaderMatchesTheStringReaderOnRandomBytes() {
        var random = Random(state: 0x7E4D_E12C)
        let limitSets = [CSVLimits(), CSVLimits(fieldBytesMax: 8, lineBytesMax: 30, fieldsPerLineMax: 5, linesMax: 4),
                         CSVLimits(fieldBytesMax: 1, lineBytesMax: 3, fieldsPerLineMax: 2, linesMax: 2),
                         CSVLimits(fieldBytesMax: 0, lineBytesMax: 0, fieldsPerLineMax: 1, linesMax: 1)]
        for _ in 0..<4_000 {
            let bytes = Self.csvBytes(&random)
            let limits = random.pick(limitSets)
            let chunkBytes = random.pick([1, 2, 3, 7, 64, 65_536])
            let expected = Self.referenceRecords(bytes, chunkBytes: chunkBytes, limits: limits)
            let actual = Self.newRecords(bytes, chunkBytes: chunkBytes, limits: limits)
            #expect(actual == expected, "bytes \(bytes) chunk \(chunkBytes) limits \(limits)")
            if actual != expected { return }
        }
    }

    @Test(arguments: ["settlement_detail_report_batch_57_30_columns.csv", "settlement_detail_report_batch_57_49_columns.csv"])
    func csvReaderMatchesTheStringReaderOnProcessorFiles(name: String) throws {
        let url = try #require(Bundle.module.url(forResource: "Vectors/adyen-sdr/\(name)", withExtension: nil))
        let bytes = [UInt8](try Data(contentsOf: url))
        for chunkBytes in [1, 5, 4_096] {
            let expected = Self.referenceRecords(bytes, chunkBytes: chunkBytes, limits: CSVLimits())
            guard case .value(let records) = expected else { Issue.record("fixture \(name) does not read"); return }
            #expect(records.count > 2)
            #expect(Self.newRecords(bytes, chunkBytes: chunkBytes, limits: CSVLimits()) == expected)
        }
    }

    /// A record held past the next call keeps its own bytes (the reader copies rather than reuse them).
    @Test func rawRecordSurvivesTheNextRecord() throws {
        var reader = CSVReader(source: ByteArraySource(Array("ab,cd\nef,\"g,h\"\n".utf8), chunkBytes: 4))
        let first = try #require(try reader.nextRaw())
        let second = try #require(try reader.nextRaw())
        #expect(try reader.nextRaw() == nil)
        #expect(first.record.fields == ["ab", "cd"])
        #expect(second.record.fields == ["ef", "g,h"])
        #expect(Array(second[1]) == Array("g,h".utf8))
    }

    static func newLines(_ bytes: [UInt8], chunkBytes: Int) -> Outcome<[SettlementLine]> {
        var reader = SettlementLineReader(format: .generic, source: ByteArraySource(bytes, chunkBytes: chunkBytes))
        do { return .value(try reader.readAll()) } catch { return .error(error) }
    }

    static func referenceLines(_ bytes: [UInt8], chunkBytes: Int) -> Outcome<[SettlementLine]> {
        do { return .value(try referenceGenericLines(bytes, chunkBytes: chunkBytes)) } catch { return .error(error) }
    }

    /// One generic row, each field drawn from valid and broken values (the column count varies too).
    static func genericRow(_ random: inout Random) -> String {
        let dates = ["2024-03-02", "2024-02-29", "2023-02-29", "2024-13-01", "0000-01-01", "9999-12-31", "2024-3-02",
                     "2024/03/02", "", "２024-03-02", "2024-03-0x"]
        let batches = ["B1", "B1", "B2", "", "b|c", "b%7C", "batch-with-a-long-identifier-0001", "é"]
        let types = ["payment", "payment", "refund", "fee", "chargeback", "chargeback_reversal", "adjustment", "payout",
                     "unknown", "Payment", "", "paymen"]
        let ids = ["", "pay_000000000000000000000001", "pay_1", "p|1", "p%1", "\"q,uoted\"", "pay é"]
        let currencies = ["USD", "USD", "EUR", "JPY", "KWD", "usd", "XXX", "", "SE\u{212A}", "SEK", "CLF"]
        let amounts = ["10.00", "-10.00", "0.00", "-0.00", "10", "10.0", "10.000", "010.00", ".50", "5.", "1.2.3", "",
                       "-", "--1.00", "+1.00", "1e3", "92233720368547758.07", "92233720368547758.08", "100", "1.500",
                       "99999999999999999999", "0", "-0", "７.00"]
        var fields = [random.pick(dates), random.pick(batches), random.pick(types), random.pick(ids), random.pick(ids),
                      random.pick(currencies), random.pick(amounts), random.pick(amounts), random.pick(amounts)]
        switch random.below(20) {
        case 0: fields.removeLast()
        case 1: fields.append("extra")
        default: break
        }
        return fields.joined(separator: ",")
    }

    @Test func genericParserMatchesTheStringParserOnRandomRows() {
        var random = Random(state: 0x5E77_1E)
        for _ in 0..<3_000 {
            var text = genericHeader
            for _ in 0..<random.below(6) { text += Self.genericRow(&random) + random.pick(["\n", "\r\n"]) }
            let bytes = Array(text.utf8)
            let chunkBytes = random.pick([1, 3, 9, 65_536])
            let expected = Self.referenceLines(bytes, chunkBytes: chunkBytes)
            #expect(Self.newLines(bytes, chunkBytes: chunkBytes) == expected, "\(text)")
        }
    }

    /// Most random rows fail somewhere; these are the valid ones, where every field reaches the line.
    @Test func genericParserMatchesTheStringParserOnValidRows() {
        var random = Random(state: 0xC0FFEE)
        var text = genericHeader
        for row in 0..<2_000 {
            let exponent = random.pick([("USD", 2), ("JPY", 0), ("KWD", 3)])
            func amount() -> String {
                let minor = Int64(random.below(2_000_000)) - 1_000_000
                let digits = String(minor.magnitude)
                let padded = String(repeating: "0", count: max(0, exponent.1 + 1 - digits.count)) + digits
                let body = exponent.1 == 0 ? padded : "\(padded.dropLast(exponent.1)).\(padded.suffix(exponent.1))"
                return (minor < 0 ? "-" : "") + body
            }
            let type = random.pick(["payment", "refund", "fee", "chargeback", "chargeback_reversal", "adjustment", "payout"])
            let payment = random.below(4) == 0 ? "" : "pay_\(random.below(500))"
            let reference = random.below(4) == 0 ? "" : random.pick(["psp_\(row)", "r|\(row)", "r%\(row)"])
            text += "2024-03-\(10 + random.below(18)),B\(random.below(5)),\(type),\(payment),\(reference),\(exponent.0),"
                + "\(amount()),\(amount()),\(amount())\n"
        }
        let bytes = Array(text.utf8)
        let expected = Self.referenceLines(bytes, chunkBytes: 4_096)
        guard case .value(let lines) = expected else { Issue.record("valid rows refused: \(expected)"); return }
        #expect(lines.count == 2_000)
        #expect(Self.newLines(bytes, chunkBytes: 4_096) == expected)
        #expect(Self.newLines(bytes, chunkBytes: 1) == expected)
    }

    @Test func exactAmountParserMatchesMoneySeam() {
        var random = Random(state: 42)
        let alphabet = Array("-0123456789.".utf8) + [UInt8(ascii: "+"), UInt8(ascii: "e"), 0xC3, 0xA9]
        for _ in 0..<20_000 {
            let bytes = (0..<random.below(24)).map { _ in random.pick(alphabet) }
            let text = String(decoding: bytes, as: UTF8.self)
            for exponent in [0, 2, 3, 4] {
                #expect(MoneySeam.parseMinorExact(bytes[...], exponent: exponent)
                        == MoneySeam.parseMinor(text, exponent: exponent, rule: .exact), "\(text) \(exponent)")
            }
        }
    }

    @Test func dateFromBytesAndItsTextMatchTheStringVersions() {
        var random = Random(state: 7)
        for _ in 0..<5_000 {
            let text = String(format: "%04d-%02d-%02d", random.below(10_000), random.below(14), random.below(33))
            let date = SettlementDate(utf8: Array(text.utf8)[...])
            #expect(date == SettlementDate(text))
            if let date {
                #expect(date.description == referenceDescription(date))
                #expect(date.description == text)
            }
        }
        #expect(SettlementDate(utf8: Array("2024-03-021".utf8)[1...]) == SettlementDate("024-03-021"))
        #expect(SettlementDate(utf8: Array("x2024-03-02".utf8)[1...]) == SettlementDate("2024-03-02"))
    }
}
