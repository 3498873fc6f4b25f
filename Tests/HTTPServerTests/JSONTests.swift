import Foundation
import Testing
@testable import HTTPServer

struct Cart: Decodable, Equatable {
    struct Item: Decodable, Equatable { var label: String; var amount: String }
    var currencyCode: String
    var lineItems: [Item]
}

func nested(_ depth: Int) -> [UInt8] {
    Array((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8)
}

@Suite struct JSONCodingTests {
    @Test func decodesAValidBody() throws {
        let cart = try JSONCoding.decode(Cart.self,
            from: Array(#"{"currencyCode":"USD","lineItems":[{"label":"W","amount":"9.99"}]}"#.utf8))
        #expect(cart == Cart(currencyCode: "USD", lineItems: [.init(label: "W", amount: "9.99")]))
    }

    @Test(arguments: ["", "{", "not json", "{\"currencyCode\":\"USD\",}"])
    func malformedBodyIsMalformedJSON(body: String) {
        let problem = #expect(throws: HTTPProblem.self) { try JSONCoding.decode(Cart.self, from: Array(body.utf8)) }
        #expect(problem?.code == "malformed_json")
        #expect(problem?.status == 400)
    }

    @Test func invalidUTF8IsMalformedJSON() {
        let problem = #expect(throws: HTTPProblem.self) {
            try JSONCoding.decode([String].self, from: [0x5B, 0x22, 0xFF, 0x22, 0x5D])
        }
        #expect(problem?.code == "malformed_json")
    }

    @Test func missingFieldNamesThePathWithoutEchoingValues() {
        let problem = #expect(throws: HTTPProblem.self) {
            try JSONCoding.decode(Cart.self, from: Array(#"{"currencyCode":"USD","lineItems":[{"label":"secret-4111"}]}"#.utf8))
        }
        #expect(problem?.code == "malformed_json")
        #expect(problem?.errors == [.init(field: "lineItems.0.amount", code: "required", message: "This field is required.")])
        #expect(problem?.detail.contains("4111") == false)
    }

    @Test func depthAtTheLimitIsAcceptedAndOneMoreIsRefused() throws {
        _ = try JSONCoding.decode(JSONValue.self, from: nested(JSONCoding.depthMax))
        let problem = #expect(throws: HTTPProblem.self) {
            try JSONCoding.decode(JSONValue.self, from: nested(JSONCoding.depthMax + 1))
        }
        #expect(problem?.code == "json_too_deep")
        #expect(problem?.status == 400)
    }

    @Test func bracketsInsideStringsDoNotCountAsDepth() throws {
        let body = Array(("[\"" + String(repeating: "[{", count: 100) + "\\\"]\"]").utf8)
        #expect(try JSONCoding.decode([String].self, from: body).count == 1)
    }

    @Test func problemThrownByTheTypeItselfPassesThrough() {
        struct Strict: Decodable {
            init(from decoder: any Decoder) throws {
                throw HTTPProblem(status: 400, code: "unknown_field", title: "Unknown field", detail: "An unknown field was sent.")
            }
        }
        let problem = #expect(throws: HTTPProblem.self) { try JSONCoding.decode(Strict.self, from: Array("{}".utf8)) }
        #expect(problem?.code == "unknown_field")
    }

    @Test func jsonValueKeepsNumbersExactly() throws {
        let text = #"{"a":19.99,"b":1234567890.123456789,"c":-7,"d":[true,null,"x/y"]}"#
        let value = try JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
        guard case .object(let members) = value else {
            Issue.record("not an object")
            return
        }
        #expect(members["a"] == .number("19.99"))
        #expect(members["b"] == .number("1234567890.123456789"))
        #expect(members["c"] == .number("-7"))
        #expect(members["d"] == .array([.bool(true), .null, .string("x/y")]))
        let encoded = String(decoding: try JSONCoding.encoder.encode(value), as: UTF8.self)
        #expect(encoded == #"{"a":19.99,"b":1234567890.123456789,"c":-7,"d":[true,null,"x/y"]}"#)
    }

    @Test func jsonValueRefusesToEncodeANonNumber() {
        #expect(throws: EncodingError.self) { try JSONCoding.encoder.encode(JSONValue.number("1e")) }
        #expect(throws: EncodingError.self) { try JSONCoding.encoder.encode(JSONValue.number("NaN")) }
    }
}

@Suite struct UnitTests {
    @Test func headersAreOrderedAndCaseInsensitive() {
        var headers = HTTPHeaders([("Set-Cookie", "a"), ("content-type", "text/plain")])
        headers.add("set-cookie", "b")
        #expect(headers["SET-COOKIE"] == "a")
        #expect(headers.values(for: "Set-Cookie") == ["a", "b"])
        headers.replaceOrAdd("Set-Cookie", "c")
        #expect(headers.values(for: "set-cookie") == ["c"])
        headers.replaceOrAdd("X-New", "1")
        #expect(headers.map(\.0) == ["Set-Cookie", "content-type", "X-New"])
    }

    @Test func routerMatches() {
        var router = Router()
        router.add("GET", "/v1/payments/{id}") { _ in .text("one") }
        router.add("POST", "/v1/payments/{id}/refunds") { _ in .text("refund") }
        router.add("GET", "/v1/payments/history", inline: true) { _ in .text("history") }
        guard case .found(_, let pattern, let parameters, let inline) = router.match(method: "GET", path: "/v1/payments/p1") else {
            Issue.record("no match")
            return
        }
        #expect(pattern == "/v1/payments/{id}")
        #expect(parameters == ["id": "p1"])
        #expect(inline == false)
        guard case .found(_, let literal, _, true) = router.match(method: "GET", path: "/v1/payments/history") else {
            Issue.record("literal route should win")
            return
        }
        #expect(literal == "/v1/payments/history")
        guard case .methodNotAllowed(let allowed) = router.match(method: "DELETE", path: "/v1/payments/p1") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET"])
        guard case .notFound = router.match(method: "GET", path: "/v1/payments/") else {
            Issue.record("an empty parameter must not match")
            return
        }
        guard case .notFound = router.match(method: "GET", path: "/v1/payments/p1/extra/x") else {
            Issue.record("expected 404")
            return
        }
    }

    @Test func responseHeadersWithLineBreaksAreNeverSent() {
        #expect(ServerCore.isSafeHeader(name: "X-Ok", value: "fine"))
        #expect(!ServerCore.isSafeHeader(name: "X-Bad", value: "a\r\nSet-Cookie: x"))
        #expect(!ServerCore.isSafeHeader(name: "X Bad", value: "a"))
        #expect(!ServerCore.isSafeHeader(name: "Content-Length", value: "5"))
    }
}

/// One row per refusal of the JSON edge (`JSONCoding.checkBody`), named after the rule it breaks.
struct BodyScanCase: CustomTestStringConvertible, Sendable {
    let rule: String
    let body: String
    let code: String
    let field: String
    var testDescription: String { rule }
}

let bodyScanCases: [BodyScanCase] = [
    BodyScanCase(rule: "nul_escape_in_a_value", body: #"{"label":"a\u0000b"}"#, code: "nul_character", field: "label"),
    BodyScanCase(rule: "nul_escape_upper_hex", body: #"{"a":{"b":"\u0000"}}"#, code: "nul_character", field: "a.b"),
    BodyScanCase(rule: "nul_escape_in_an_array_element", body: #"{"items":[{"l":"x"},{"l":"\u0000"}]}"#,
                 code: "nul_character", field: "items[1].l"),
    BodyScanCase(rule: "nul_escape_in_a_member_name", body: #"{"metadata":{"k\u0000":"v"}}"#,
                 code: "nul_character", field: "metadata.k\u{FFFD}"),
    BodyScanCase(rule: "nul_escape_in_a_top_level_array", body: #"[{"region":"\u0000"}]"#, code: "nul_character",
                 field: "[0].region"),
    BodyScanCase(rule: "nul_escape_after_an_escaped_backslash", body: #"{"a":"\\\u0000"}"#, code: "nul_character", field: "a"),
    BodyScanCase(rule: "duplicate_member", body: #"{"currencyCode":"USD","currencyCode":"EUR"}"#,
                 code: "duplicate_field", field: "currencyCode"),
    BodyScanCase(rule: "duplicate_member_nested", body: #"{"lineItems":[{"label":"a","amount":"1","label":"b"}]}"#,
                 code: "duplicate_field", field: "lineItems[0].label"),
    BodyScanCase(rule: "duplicate_member_spelled_with_an_escape", body: #"{"amount":"1.00","\u0061mount":"9.00"}"#,
                 code: "duplicate_field", field: "amount"),
    BodyScanCase(rule: "duplicate_member_canonically_equivalent", body: "{\"m\":{\"\u{E9}\":\"1\",\"e\\u0301\":\"2\"}}",
                 code: "duplicate_field", field: "m.\u{E9}"),
    BodyScanCase(rule: "duplicate_member_after_a_nested_object", body: #"{"token":{"a":{"b":1}},"token":{}}"#,
                 code: "duplicate_field", field: "token"),
    BodyScanCase(rule: "unpaired_high_surrogate", body: #"{"a":"\ud800x"}"#, code: "invalid_unicode_escape", field: "a"),
    BodyScanCase(rule: "unpaired_low_surrogate", body: #"{"a":"\udc00"}"#, code: "invalid_unicode_escape", field: "a"),
]

@Suite struct JSONBodyScanTests {
    @Test(arguments: bodyScanCases)
    func eachRefusalNamesItsField(_ row: BodyScanCase) {
        let problem = #expect(throws: HTTPProblem.self) { try JSONCoding.checkBody(Array(row.body.utf8)) }
        #expect(problem?.status == 400, "\(row.rule)")
        #expect(problem?.code == row.code, "\(row.rule)")
        #expect(problem?.errors == [.init(field: row.field, code: row.code, message: problem?.errors.first?.message ?? "")],
                "\(row.rule)")
        // Every route decodes through `decode`, which runs the same check first.
        let decoded = #expect(throws: HTTPProblem.self) { try JSONCoding.decode(JSONValue.self, from: Array(row.body.utf8)) }
        #expect(decoded?.code == row.code, "\(row.rule)")
    }

    @Test func aRawNULByteInsideAStringIsNamedToo() {
        let problem = #expect(throws: HTTPProblem.self) { try JSONCoding.checkBody(Array(#"{"a":"x"#.utf8) + [0] + Array(#""}"#.utf8)) }
        #expect(problem?.code == "nul_character")
        #expect(problem?.errors.first?.field == "a")
    }

    @Test(arguments: [
        #"{"a":"\u0001 \\u0000 \/ \"","b":[1,{"a":1}],"c":{"a":{"a":1}},"d":"\ud83d\ude00"}"#,
        #"[{"a":1},{"a":2}]"#,
        #"{"A":1,"a":2}"#,
    ])
    func sameNamesInDifferentObjectsAndEscapedLookalikesPass(body: String) throws {
        try JSONCoding.checkBody(Array(body.utf8))
        _ = try JSONCoding.decode(JSONValue.self, from: Array(body.utf8))
    }

    /// The scan runs on hostile bytes before any parser: every prefix and seeded random mutations of
    /// bodies full of escapes must end in an answer, never a trap.
    @Test func everyPrefixAndMutationEndsCleanly() {
        let seeds = bodyScanCases.map(\.body) + [#"{"a":"\ud83d\ude00","b":[{"c":"\\","d":"\u00e9"}],"e":"\"x\""}"#]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let alphabet = Array(#"{}[]:,"\u0dD8Cc0aF "#.utf8) + [0, 0xC3, 0xA9]
        for seed in seeds {
            let bytes = Array(seed.utf8)
            for end in 0...bytes.count { _ = JSONBodyScan.firstFinding(in: Array(bytes[0..<end])) }
            for _ in 0..<300 {
                var mutated = bytes
                for _ in 0..<(1 + Int(next() % 4)) where !mutated.isEmpty {
                    mutated[Int(next() % UInt64(mutated.count))] = alphabet[Int(next() % UInt64(alphabet.count))]
                }
                _ = JSONBodyScan.firstFinding(in: mutated)
                _ = try? JSONCoding.checkBody(mutated)
            }
        }
    }

    @Test func aLongPathIsCutToTheLimit() {
        let name = String(repeating: "n", count: 1_000)
        let problem = #expect(throws: HTTPProblem.self) { try JSONCoding.checkBody(Array("{\"\(name)\":1,\"\(name)\":2}".utf8)) }
        #expect(problem?.errors.first?.field.utf8.count == JSONBodyScan.fieldPathBytesMax)
    }
}
