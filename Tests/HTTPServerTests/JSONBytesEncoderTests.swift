import Foundation
import Testing
@testable import HTTPServer

/// `JSONBytesEncoder` must write exactly what `JSONCoding.encoder` writes, or leave the value to it.
@Suite struct JSONBytesEncoderTests {
    struct Inner: Codable {
        var label: String
        var amount: String?
        var count: Int
        var flags: [Bool]
    }

    struct Outer: Codable {
        var id: String
        var version: Int
        var total: Int64
        var small: Int8
        var unsigned: UInt32
        var inner: Inner
        var items: [Inner]
        var metadata: [String: String]
        var optional: Inner?
        var nothing: String?
        var nested: [[String: [Int]]]
        var value: JSONValue
    }

    /// A custom encoding that writes one key twice and uses nested containers and an explicit null.
    struct Custom: Encodable {
        enum Keys: String, CodingKey { case b, a, list, object, gone }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("first", forKey: .b)
            try container.encodeNil(forKey: .gone)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode(1)
            try list.encodeNil()
            var object = list.nestedContainer(keyedBy: Keys.self)
            try object.encode(true, forKey: .a)
            var inner = container.nestedContainer(keyedBy: Keys.self, forKey: .object)
            try inner.encode([String](), forKey: .list)
            try container.encode("second", forKey: .b)
        }
    }

    static func randomText(_ generator: inout SystemRandomNumberGenerator) -> String {
        let scalars = (0..<Int.random(in: 0...10, using: &generator)).compactMap { _ -> Unicode.Scalar? in
            switch Int.random(in: 0..<6, using: &generator) {
            case 0: return Unicode.Scalar(UInt32.random(in: 0..<0x20, using: &generator))
            case 1: return ["\"", "\\", "/", "\u{7f}", "\u{2028}", "\u{301}"].randomElement(using: &generator)?.unicodeScalars.first
            case 2: return Unicode.Scalar(UInt32.random(in: 0x80..<0xD800, using: &generator))
            case 3: return Unicode.Scalar(UInt32.random(in: 0x1F300..<0x1F700, using: &generator))
            default: return Unicode.Scalar(UInt32.random(in: 0x20..<0x7f, using: &generator))
            }
        }
        return String(String.UnicodeScalarView(scalars))
    }

    static func foundation<T: Encodable>(_ value: T) throws -> [UInt8] { [UInt8](try JSONCoding.encoder.encode(value)) }

    @Test func randomDocumentsMatchFoundationByteForByte() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<400 {
            func inner() -> Inner {
                Inner(label: Self.randomText(&generator),
                      amount: Bool.random(using: &generator) ? nil : ["0.00", "9.99", "-1.5", "100000000.00", "1e3"]
                        .randomElement(using: &generator),
                      count: Int.random(in: Int.min...Int.max, using: &generator),
                      flags: (0..<Int.random(in: 0...3, using: &generator)).map { _ in Bool.random(using: &generator) })
            }
            var metadata: [String: String] = [:]
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                metadata[Self.randomText(&generator)] = Self.randomText(&generator)
            }
            let value: JSONValue = .object(["s": .string(Self.randomText(&generator)), "n": .number("42"), "z": .null,
                                            "a": .array([.bool(true), .number("-7")]), "k" + Self.randomText(&generator): .bool(false)])
            let document = Outer(id: Self.randomText(&generator), version: .random(in: 0...1_000, using: &generator),
                                 total: .random(in: Int64.min...Int64.max, using: &generator),
                                 small: .random(in: Int8.min...Int8.max, using: &generator),
                                 unsigned: .random(in: 0...UInt32.max, using: &generator), inner: inner(),
                                 items: (0..<Int.random(in: 0...4, using: &generator)).map { _ in inner() }, metadata: metadata,
                                 optional: Bool.random(using: &generator) ? inner() : nil, nothing: nil,
                                 nested: [["k": [1, 2]], [:]], value: value)
            let ours = try #require(JSONBytesEncoder.encode(document))
            #expect(ours == (try Self.foundation(document)), "\(String(decoding: ours, as: UTF8.self))")
        }
    }

    @Test func customEncodingsScalarsAndTopLevelValuesMatch() throws {
        #expect(JSONBytesEncoder.encode(Custom()) == (try Self.foundation(Custom())))
        #expect(JSONBytesEncoder.encode("a/b\u{0}\u{8}\u{c}") == (try Self.foundation("a/b\u{0}\u{8}\u{c}")))
        #expect(JSONBytesEncoder.encode([Int64.min, Int64.max]) == (try Self.foundation([Int64.min, Int64.max])))
        #expect(JSONBytesEncoder.encode([UInt64.max]) == (try Self.foundation([UInt64.max])))
        #expect(JSONBytesEncoder.encode(["k": Int?.none]) == (try Self.foundation(["k": Int?.none])))
        #expect(JSONBytesEncoder.encode(["é": 1, "e\u{301}x": 2, "f": 3, "B": 4, "a": 5, "": 6])
                == (try Self.foundation(["é": 1, "e\u{301}x": 2, "f": 3, "B": 4, "a": 5, "": 6])))
        #expect(JSONBytesEncoder.encode([String: Int]()) == (try Self.foundation([String: Int]())))
        #expect(JSONBytesEncoder.encode([[Int]]()) == (try Self.foundation([[Int]]())))
    }

    @Test func whatFoundationWritesItsOwnWayIsLeftToFoundation() throws {
        #expect(JSONBytesEncoder.encode([1.5]) == nil)
        #expect(JSONBytesEncoder.encode([Float(1)]) == nil)
        #expect(JSONBytesEncoder.encode(["x": Int128(5)]) == nil)
        #expect(JSONBytesEncoder.encode([Int16(-3), Int16(7)]) == (try Self.foundation([Int16(-3), Int16(7)])))
        #expect(JSONBytesEncoder.encode([UInt8(255)]) == (try Self.foundation([UInt8(255)])))
        #expect(JSONBytesEncoder.encode(["at": Date(timeIntervalSince1970: 0)]) == nil)
        #expect(JSONBytesEncoder.encode([Data([1, 2])]) == nil)
        #expect(JSONBytesEncoder.encode([URL(fileURLWithPath: "/tmp")]) == nil)
        #expect(JSONBytesEncoder.encode(JSONValue.number("1.25")) == nil)
        #expect(try JSONBytesEncoder.bytes(JSONValue.number("1.25")) == (try Self.foundation(JSONValue.number("1.25"))))
        let anyData: [any Encodable] = [Data([1])]
        #expect(JSONBytesEncoder.encode(AnyList(values: anyData)) == nil)
    }

    @Test func responsesAndProblemsAreFoundationsBytes() throws {
        let response = HTTPResponse.json(["status": "ok", "path": "/v1/x"])
        #expect(response.body == (try Self.foundation(["status": "ok", "path": "/v1/x"])))
        #expect(response.headers["Content-Type"] == "application/json")
    }
}

/// Existential values reach the encoder as `any Encodable`; special types must still be recognised.
struct AnyList: Encodable {
    let values: [any Encodable]
    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        for value in values { try container.encode(value) }
    }
}
