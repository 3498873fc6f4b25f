import HTTPServer
import Testing
@testable import TenderServer

/// The byte-level encoders the recorder and the feed hub use instead of per-row statements and Strings.
struct FinanceEncodingTests {
    @Test func arrayLiteralQuotesEveryElementAndEscapesQuotesAndBackslashes() {
        #expect(PGArray.text([String]()) == "{}")
        #expect(PGArray.text(["a", "b c"]) == "{\"a\",\"b c\"}")
        #expect(PGArray.text(["say \"hi\"", "back\\slash", "{,}"]) == "{\"say \\\"hi\\\"\",\"back\\\\slash\",\"{,}\"}")
        #expect(PGArray.text(["x", nil]) == "{\"x\",NULL}")
        // A present string spelled NULL stays a string: only nil is unquoted.
        #expect(PGArray.text(["NULL"]) == "{\"NULL\"}")
    }

    @Test func changesFrameEqualsTheGeneralSSEEncoding() throws {
        let body = Array("{\"inserted\":[{\"id\":\"a\"}],\"hasMore\":false}".utf8)
        let expected = try SSEEvent(id: "tok_1", event: "changes", data: String(decoding: body, as: UTF8.self)).encoded
        #expect(try FinanceFeedHub.changesFrame(token: "tok_1", body: body) == expected)
    }

    @Test func changesFrameWithALineBreakFallsBackToSeveralDataLines() throws {
        let body = Array("{\"a\":1,\n\"b\":2}".utf8)
        let frame = try FinanceFeedHub.changesFrame(token: "t", body: body)
        #expect(String(decoding: frame, as: UTF8.self) == "id: t\nevent: changes\ndata: {\"a\":1,\ndata: \"b\":2}\n\n")
    }
}
