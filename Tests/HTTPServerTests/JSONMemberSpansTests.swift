import Testing
@testable import HTTPServer

struct JSONMemberSpansTests {
    static func member(_ body: String, _ name: String) -> String? {
        let bytes = Array(body.utf8)
        return JSONMemberSpans.topLevel(bytes)[name].map { String(decoding: bytes[$0], as: UTF8.self) }
    }

    @Test func membersAreTheBytesAsSent() {
        let body = #" { "a" : {"x": "}\"{", "y": [1, {"z": 2}]} , "\u0074oken":{ "k" : 1 },"n": -1.5e3, "s": "q\"", "t": true}"#
        #expect(Self.member(body, "a") == #"{"x": "}\"{", "y": [1, {"z": 2}]}"#)
        #expect(Self.member(body, "token") == #"{ "k" : 1 }"#)
        #expect(Self.member(body, "n") == "-1.5e3")
        #expect(Self.member(body, "s") == #""q\"""#)
        #expect(Self.member(body, "t") == "true")
        #expect(JSONMemberSpans.isObject(Array(body.utf8)))
    }

    @Test func notAnObjectHasNoMembers() {
        #expect(JSONMemberSpans.topLevel(Array("[1]".utf8)).isEmpty)
        #expect(!JSONMemberSpans.isObject(Array(" [1]".utf8)))
        #expect(JSONMemberSpans.topLevel(Array("{}".utf8)).isEmpty)
    }
}
