import Crypto
import Foundation
import Reconciliation
import Testing
@testable import TenderServer

/// The parser thread's outputs written straight into reserved bytes (`RowJSON.line`,
/// `appendCanonicalContent`) and the batch digests fed once per run of lines are byte for byte what
/// the member-by-member writers and the per-line digests gave: stored rows and stored batch digests
/// from before still compare equal.
struct ParserStageTests {
    /// The line JSON as it was written: one `field` call per member.
    private static func referenceLineJSON(_ line: SettlementLine) -> [UInt8] {
        var json = RowJSON(capacity: 512)
        json.beginObject("l")
        json.field("lineNumber", line.lineNumber)
        json.field("naturalKey", line.naturalKey)
        json.field("batchId", line.batchId)
        json.field("settlementDate", line.settlementDate.description)
        json.field("type", line.type.rawValue)
        json.field("journalType", line.journalType)
        json.field("paymentId", line.paymentId)
        json.field("refundId", line.refundId)
        json.field("processorReference", line.processorReference)
        json.field("paymentMethodVariant", line.paymentMethodVariant)
        json.field("currencyCode", line.currencyCode)
        json.field("grossMinor", line.grossMinor)
        json.field("netCurrencyCode", line.netCurrencyCode)
        json.field("feeMinor", line.feeMinor)
        json.field("netMinor", line.netMinor)
        json.field("batchLevelOrdinal", line.batchLevelOrdinal)
        json.endObject()
        return json.bytes
    }

    /// The canonical content as it was written, through `String`s.
    private static func referenceCanonicalContent(_ line: SettlementLine) -> [UInt8] {
        var bytes: [UInt8] = []
        func part(_ text: String) {
            bytes.append(contentsOf: text.utf8)
            bytes.append(0x1F)
        }
        part(line.naturalKey)
        part(line.settlementDate.description)
        part(line.type.rawValue)
        part(line.journalType)
        part(line.paymentId ?? "")
        part(line.refundId ?? "")
        part(line.processorReference ?? "")
        part(line.paymentMethodVariant ?? "")
        part(line.currencyCode)
        part(String(line.grossMinor))
        part(line.netCurrencyCode)
        part(String(line.feeMinor))
        bytes.append(contentsOf: String(line.netMinor).utf8)
        bytes.append(0x1E)
        return bytes
    }

    private static func lines() -> [SettlementLine] {
        let texts = ["", "pay_1", "psp\\1", "ref é ✓ 😀", "q\"uote", "tab\t\u{1}\u{1F}", String(repeating: "long", count: 40)]
        let amounts: [Int64] = [0, 1, -1, 9, 10, -10, 1_099, Int64.max, Int64.min, Int64.min + 1, 1_000_000_000_000_000_000]
        var result: [SettlementLine] = []
        var index = 0
        for date in ["0001-01-01", "2024-03-02", "9999-12-31"] {
            for type in SettlementLineType.allCases {
                for amount in amounts {
                    index += 1
                    let text = texts[index % texts.count]
                    let other = texts[(index * 3) % texts.count]
                    result.append(SettlementLine(
                        lineNumber: index, naturalKey: "generic|\(text)|\(type.rawValue)", batchId: other,
                        settlementDate: SettlementDate(date) ?? SettlementDate("2024-01-01")!, type: type,
                        journalType: text.isEmpty ? type.rawValue : text, paymentId: index % 2 == 0 ? text : nil,
                        refundId: index % 3 == 0 ? other : nil, processorReference: index % 5 == 0 ? nil : other,
                        paymentMethodVariant: index % 7 == 0 ? "visa_applepay" : nil, currencyCode: "EUR",
                        grossMinor: amount, netCurrencyCode: index % 4 == 0 ? "USD" : "EUR", feeMinor: amount / 3,
                        netMinor: amount &- 7, batchLevelOrdinal: index % 6 == 0 ? index : nil))
                }
            }
        }
        return result
    }

    @Test func lineJSONIsWhatTheMemberWriterWrote() throws {
        for line in Self.lines() {
            var json = RowJSON(capacity: 0)
            json.line(line)
            #expect(json.bytes == Self.referenceLineJSON(line), "\(line)")
            // And it still decodes as the line.
            let object = try JSONDecoder().decode([String: SettlementLine].self, from: Data([0x7B] + json.bytes + [0x7D]))
            #expect(object["l"] == line)
        }
    }

    @Test func canonicalContentIsWhatTheStringWriterWrote() {
        var all: [UInt8] = []
        var expected: [UInt8] = []
        for line in Self.lines() {
            var bytes: [UInt8] = []
            SettlementReportStore.appendCanonicalContent(line, to: &bytes)
            #expect(bytes == Self.referenceCanonicalContent(line), "\(line)")
            SettlementReportStore.appendCanonicalContent(line, to: &all)
            expected += Self.referenceCanonicalContent(line)
        }
        #expect(all == expected)
    }

    /// Batches interleaved (A, B, A), one run past the 64 KiB feed threshold: each batch's digest is
    /// SHA-256 over its lines' canonical content in file order, as when every line was fed alone.
    @Test func batchDigestsAreThoseOfPerLineFeeding() throws {
        var text = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"
        var order: [String] = []
        for (batch, count) in [("A", 10), ("B", 1_200), ("A", 3), ("C", 1), ("B", 2)] {
            for _ in 0..<count {
                order.append(batch)
                text += "2024-03-02,\(batch),payment,pay_\(order.count),psp_\(order.count),USD,10.00,0.30,9.70\n"
            }
        }
        var reader = SettlementLineReader(format: .generic, source: ByteArraySource(Array(text.utf8), chunkBytes: 999))
        let lines = try reader.readAll()
        var hashers: [String: SHA256Hasher] = [:]
        for line in lines {
            let hasher = hashers[line.batchId] ?? SHA256Hasher()
            hashers[line.batchId] = hasher
            hasher.update(Self.referenceCanonicalContent(line))
        }
        let expected = hashers.mapValues { hexEncoded($0.finalize()) }
        #expect(expected.count == 3)
        for batchLines in [1, 7, 5_000] {
            var stage = ParserStage(reader: SettlementLineReader(format: .generic,
                                                                 source: ByteArraySource(Array(text.utf8), chunkBytes: 999)),
                                    batchLines: batchLines)
            var parsed: [SettlementLine] = []
            while true {
                var batch = stage.newBatch()
                try stage.fill(&batch)
                for index in batch.lines.indices {
                    var json = RowJSON(capacity: 0)
                    json.line(batch.lines[index])
                    #expect(Array(batch.encodedLine(index)) == json.bytes)
                }
                parsed += batch.lines
                if batch.lines.count < batchLines { break }
            }
            #expect(parsed == lines)
            #expect(stage.finishDigests().mapValues { hexEncoded($0.finalize()) } == expected)
        }
    }
}
