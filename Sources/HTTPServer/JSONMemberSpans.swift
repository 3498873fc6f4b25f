import Foundation

/// Byte ranges of the member values of a top-level JSON object that `JSONCoding.checkBody` accepted
/// (valid UTF-8, no duplicate members), so a member Tender does not own (an Apple Pay token) can be
/// handed on as the bytes the client sent, never re-serialised.
public enum JSONMemberSpans {
    /// True when the first non-space byte opens an object.
    public static func isObject(_ body: [UInt8]) -> Bool {
        body.first(where: { !isSpace($0) }) == UInt8(ascii: "{")
    }

    /// Member name → value range; empty when `body` is not an object.
    public static func topLevel(_ body: [UInt8]) -> [String: Range<Int>] {
        var spans: [String: Range<Int>] = [:]
        var i = skipSpace(body, 0)
        guard i < body.count, body[i] == UInt8(ascii: "{") else { return [:] }
        i += 1
        while true {
            i = skipSpace(body, i)
            guard i < body.count, body[i] == UInt8(ascii: "\"") else { return spans }
            let keyEnd = stringEnd(body, i)
            let name = (try? JSONCoding.decoder.decode(String.self, from: Data(body[i..<keyEnd]))) ?? ""
            i = skipSpace(body, keyEnd)
            guard i < body.count, body[i] == UInt8(ascii: ":") else { return spans }
            let start = skipSpace(body, i + 1)
            let end = valueEnd(body, start)
            spans[name] = start..<end
            i = skipSpace(body, end)
            guard i < body.count, body[i] == UInt8(ascii: ",") else { return spans }
            i += 1
        }
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    private static func skipSpace(_ body: [UInt8], _ from: Int) -> Int {
        var i = from
        while i < body.count, isSpace(body[i]) { i += 1 }
        return i
    }

    /// Index just past the string opening at `start`.
    private static func stringEnd(_ body: [UInt8], _ start: Int) -> Int {
        var i = start + 1
        while i < body.count {
            switch body[i] {
            case UInt8(ascii: "\\"): i += 2
            case UInt8(ascii: "\""): return i + 1
            default: i += 1
            }
        }
        return body.count
    }

    /// Index just past the value starting at `start`.
    private static func valueEnd(_ body: [UInt8], _ start: Int) -> Int {
        guard start < body.count else { return start }
        switch body[start] {
        case UInt8(ascii: "\""):
            return stringEnd(body, start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var i = start
            while i < body.count {
                switch body[i] {
                case UInt8(ascii: "\""):
                    i = stringEnd(body, i)
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return i + 1 }
                default:
                    break
                }
                i += 1
            }
            return body.count
        default:
            var i = start
            while i < body.count, ![UInt8(ascii: ","), UInt8(ascii: "}")].contains(body[i]), !isSpace(body[i]) { i += 1 }
            return i
        }
    }
}
