import Foundation
import Reconciliation
import Testing
@testable import TenderServer

/// `StoredChunkReader` gives exactly what `JSONDecoder` gives for the chunks `RowJSON` writes, and gives
/// up (leaving the chunk to `JSONDecoder`) on anything else.
struct StoredChunkReaderTests {
    private static func line(_ number: Int, paymentId: String?, reference: String?, gross: Int64,
                             batchLevelOrdinal: Int? = nil) -> SettlementLine {
        guard let date = SettlementDate("2024-03-02") else { preconditionFailure("valid date") }
        return SettlementLine(lineNumber: number, naturalKey: "generic|B \"1\"|payment|\(paymentId ?? "")", batchId: "B \"1\"",
                              settlementDate: date, type: .payment, journalType: "payment", paymentId: paymentId,
                              refundId: nil, processorReference: reference, paymentMethodVariant: nil,
                              currencyCode: "EUR", grossMinor: gross, netCurrencyCode: "EUR", feeMinor: 25,
                              netMinor: gross - 25, batchLevelOrdinal: batchLevelOrdinal)
    }

    /// A chunk as `ItemChunkWriter` writes it: delta items beside their lines, complete ones without.
    private static func chunk() -> String {
        let lines = [
            line(2, paymentId: "pay_1", reference: "psp\\1", gross: 1_099),
            line(3, paymentId: nil, reference: "ref é ✓ 😀", gross: -500, batchLevelOrdinal: 2),
            line(4, paymentId: "pay_\u{1}tab\t", reference: nil, gross: Int64.max),
        ]
        var items = [
            ReconciliationItem(category: .matched, lineNumber: 2, batchId: "B \"1\"", journalType: "payment",
                               paymentId: "pay_1", processorReference: "psp\\1", currencyCode: "EUR",
                               expectedMinor: 1_099, actualMinor: 1_099, differenceMinor: 0),
            ReconciliationItem(category: .duplicate, lineNumber: 3, batchId: "B \"1\"", journalType: "payment",
                               processorReference: "ref é ✓ 😀", currencyCode: "EUR", actualMinor: nil,
                               reason: "repeated_line"),
            ReconciliationItem(category: .currencyMismatch, lineNumber: 9, batchId: nil, journalType: "payment",
                               paymentId: "pay_other", currencyCode: "USD", expectedCurrencyCode: "EUR",
                               expectedMinor: Int64.min + 1, actualMinor: Int64.max),
        ]
        var json = RowJSON(capacity: 4_096)
        for (index, item) in items.enumerated() {
            json.beginObject()
            json.field("o", index + 1)
            json.field("c", item.category.rawValue)
            json.field("n", item.lineNumber)
            json.field("b", item.batchId)
            json.field("d", 1)
            json.item(item, besides: lines[index])
            json.line(lines[index])
            json.endObject()
            json.newline()
        }
        // A recorded item absent from the file: complete, without a line.
        items = [ReconciliationItem(category: .awaitingSettlement, paymentId: "pay_9", processorReference: "p9",
                                    currencyCode: "EUR", expectedMinor: 700)]
        json.beginObject()
        json.field("o", 4)
        json.field("c", items[0].category.rawValue)
        json.item(items[0])
        json.endObject()
        json.newline()
        return json.text
    }

    @Test func readsWhatRowJSONWritesAsJSONDecoderDoes() throws {
        let text = Self.chunk()
        let fast = try #require(StoredChunkReader.entries(text))
        let reference = try StoredItemChunk.decodeWithFoundation(text)
        #expect(fast == reference)
        #expect(fast.count == 4)
        #expect(fast[1].line?.processorReference == "ref é ✓ 😀")
        #expect(fast[1].item.actualMinor == nil)
        #expect(fast[2].item.batchId == nil)
        #expect(fast[2].item.expectedMinor == Int64.min + 1)
        #expect(fast[3].line == nil)
        #expect(try StoredItemChunk.decode(text) == reference)
    }

    @Test func storedRowsOfEveryFormRead() throws {
        let line = #""l":{"lineNumber":7,"naturalKey":"k","batchId":"B1","settlementDate":"2024-03-02","type":"refund","#
            + #""journalType":"refund","paymentId":"pay_1","refundId":"re_9","currencyCode":"USD","grossMinor":-500,"#
            + #""netCurrencyCode":"USD","feeMinor":0,"netMinor":-500,"batchLevelOrdinal":null}"#
        let rows = [
            // Migrated: complete item beside a line.
            #"{"o":3,"i":{"category":"missing_in_ledger","currencyCode":"USD","reason":"no_recorded_refund"},"# + line + "}",
            // Delta: absent from the line, null stays nil, present wins; escapes of every kind.
            #"{"o":4,"d":1,"i":{"category":"refund","refundId":null,"actualMinor":500,"reason":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"},"#
                + line + "}",
            // "d" other than 1, and whitespace between tokens.
            #"{ "o" : 5 , "d" : 0 , "i" : { "category" : "fee" , "currencyCode" : "USD" } , "l" : null }"#,
        ]
        let text = rows.joined(separator: "\n") + "\n\n"
        let fast = try #require(StoredChunkReader.entries(text))
        #expect(fast == (try StoredItemChunk.decodeWithFoundation(text)))
        #expect(fast[1].item.reason == "a\"\\/\u{8}\u{c}\n\r\té😀")
        #expect(fast[1].item.paymentId == "pay_1")
        #expect(fast[1].item.refundId == nil)
        #expect(fast[2].line == nil)
    }

    /// Outside the subset: the reader gives up and `decode` answers as `JSONDecoder` does (value or error).
    @Test(arguments: [
        #"{"o":1.0,"i":{"category":"fee","currencyCode":"USD"}}"#,              // not a plain integer
        #"{"o":1,"o":2,"i":{"category":"fee","currencyCode":"USD"}}"#,          // duplicate key
        #"{"o":1,"c":["fee"],"i":{"category":"fee","currencyCode":"USD"}}"#,    // array
        #"{"o":1,"c":true,"i":{"category":"fee","currencyCode":"USD"}}"#,       // boolean
        #"{"o":1,"i":{"category":"nonsense","currencyCode":"USD"}}"#,           // unknown category
        #"{"o":1,"i":{"category":"fee"}}"#,                                      // required field missing
        #"{"o":01,"i":{"category":"fee","currencyCode":"USD"}}"#,               // leading zero
        #"{"o":99999999999999999999,"i":{"category":"fee","currencyCode":"USD"}}"#,  // overflow
        #"{"o":1,"i":{"category":"fee","currencyCode":"\ud800"}}"#,             // lone surrogate
        #"{"o":1,"i":{"category":"fee","currencyCode":"USD"}} x"#,              // trailing text
        #"{"o":1}"#,
    ])
    func outsideTheSubsetFallsBackToJSONDecoder(row: String) {
        #expect(StoredChunkReader.entries(row) == nil)
        let reference = Result { try StoredItemChunk.decodeWithFoundation(row) }
        let decoded = Result { try StoredItemChunk.decode(row) }
        switch (reference, decoded) {
        case (.success(let a), .success(let b)): #expect(a == b)
        case (.failure, .failure): break
        default: Issue.record("decode and JSONDecoder disagree on \(row)")
        }
    }
}
