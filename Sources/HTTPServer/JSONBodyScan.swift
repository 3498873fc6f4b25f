/// One pass over a request body's JSON text before any decoder sees it, refusing what a decoder would
/// silently resolve one way or another, or what PostgreSQL would refuse once stored:
///
/// - a member name twice in one object (`duplicate_field`): RFC 8259 §4 leaves the meaning open and
///   decoders differ (first wins in one, last in another), so the same bytes could mean two requests;
///   names are compared as Swift strings, i.e. after unescaping and up to canonical equivalence,
///   exactly as a decoded dictionary would merge them;
/// - `\u0000` or a raw NUL byte in any string, name or value (`nul_character`): PostgreSQL `text`
///   and `jsonb` cannot hold U+0000, so it would surface as a 500 deep inside a transaction;
/// - an unpaired UTF-16 surrogate escape (`invalid_unicode_escape`): no valid string carries one.
///
/// Syntax errors are not judged here: the scan stops quietly and the decoder reports `malformed_json`.
enum JSONBodyScan {
    /// What the scan found, with the path of the offending member (`lineItems[0].label`).
    struct Finding: Equatable {
        enum Kind: Equatable {
            case duplicateField
            case nulCharacter
            case invalidUnicodeEscape
        }
        let kind: Kind
        let field: String
    }

    /// Longest field path reported back; longer names are cut (the path names the field, it is not an echo).
    static let fieldPathBytesMax = 256

    private enum Frame {
        case object(names: Set<String>, current: String?)
        case array(index: Int)
    }

    /// A decoded string's flags, and its text when asked for (member names only).
    private struct ScannedString {
        var end: Int
        var hasNUL = false
        var hasBadSurrogate = false
        var text: [UInt8] = []
    }

    /// The first finding in document order, or nil for a body with none (or with a syntax error).
    static func firstFinding(in body: [UInt8]) -> Finding? {
        var stack: [Frame] = []
        var expectName = false
        var index = 0
        let count = body.count
        while index < count {
            let byte = body[index]
            switch byte {
            case UInt8(ascii: "{"):
                stack.append(.object(names: [], current: nil))
                expectName = true
                index += 1
            case UInt8(ascii: "["):
                stack.append(.array(index: 0))
                expectName = false
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard stack.popLast() != nil else { return nil }
                expectName = false
                index += 1
            case UInt8(ascii: ","):
                switch stack.last {
                case .array(let position)?:
                    stack[stack.count - 1] = .array(index: position + 1)
                    expectName = false
                case .object?:
                    expectName = true
                case nil:
                    return nil
                }
                index += 1
            case UInt8(ascii: ":"):
                expectName = false
                index += 1
            case UInt8(ascii: "\""):
                let isName: Bool
                if case .object? = stack.last, expectName { isName = true } else { isName = false }
                guard let scanned = scanString(body, from: index + 1, keepText: isName) else { return nil }
                if isName, case .object(var names, _)? = stack.last {
                    let name = String(decoding: scanned.text, as: UTF8.self)
                    stack[stack.count - 1] = .object(names: [], current: name)
                    if scanned.hasNUL { return Finding(kind: .nulCharacter, field: path(stack)) }
                    if scanned.hasBadSurrogate { return Finding(kind: .invalidUnicodeEscape, field: path(stack)) }
                    if !names.insert(name).inserted { return Finding(kind: .duplicateField, field: path(stack)) }
                    stack[stack.count - 1] = .object(names: names, current: name)
                    expectName = false
                } else {
                    if scanned.hasNUL { return Finding(kind: .nulCharacter, field: path(stack)) }
                    if scanned.hasBadSurrogate { return Finding(kind: .invalidUnicodeEscape, field: path(stack)) }
                }
                index = scanned.end
            default:
                index += 1
            }
        }
        return nil
    }

    /// Scans a string whose opening quote precedes `start`; nil when it is unterminated or a `\u` escape
    /// is cut short (a syntax error, left to the decoder).
    private static func scanString(_ body: [UInt8], from start: Int, keepText: Bool) -> ScannedString? {
        var result = ScannedString(end: start)
        var index = start
        let count = body.count
        while index < count {
            let byte = body[index]
            if byte == UInt8(ascii: "\"") {
                result.end = index + 1
                return result
            }
            if byte == 0 { result.hasNUL = true }
            guard byte == UInt8(ascii: "\\") else {
                if keepText { result.text.append(byte) }
                index += 1
                continue
            }
            guard index + 1 < count else { return nil }
            let escape = body[index + 1]
            guard escape == UInt8(ascii: "u") else {
                if keepText { result.text.append(unescaped(escape)) }
                index += 2
                continue
            }
            guard let unit = hex4(body, at: index + 2) else { return nil }
            index += 6
            var scalar = UInt32(unit)
            switch unit {
            case 0:
                result.hasNUL = true
            case 0xD800...0xDBFF:
                // A high surrogate must be followed at once by `\u` and a low surrogate.
                if index + 1 < count, body[index] == UInt8(ascii: "\\"), body[index + 1] == UInt8(ascii: "u"),
                   let low = hex4(body, at: index + 2), (0xDC00...0xDFFF).contains(low) {
                    scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                    index += 6
                } else {
                    result.hasBadSurrogate = true
                    scalar = 0xFFFD
                }
            case 0xDC00...0xDFFF:
                result.hasBadSurrogate = true
                scalar = 0xFFFD
            default:
                break
            }
            if keepText, let value = Unicode.Scalar(scalar) { result.text.append(contentsOf: String(Character(value)).utf8) }
        }
        return nil
    }

    private static func unescaped(_ escape: UInt8) -> UInt8 {
        switch escape {
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: escape  // `"`, `\`, `/` (anything else is a syntax error the decoder reports)
        }
    }

    private static func hex4(_ body: [UInt8], at start: Int) -> UInt16? {
        guard start + 4 <= body.count else { return nil }
        var value: UInt16 = 0
        for byte in body[start..<start + 4] {
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt16(nibble)
        }
        return value
    }

    /// `a.b[2].c`, with control characters in names shown as U+FFFD and the whole cut to `fieldPathBytesMax`.
    private static func path(_ stack: [Frame]) -> String {
        var out = ""
        for frame in stack {
            switch frame {
            case .object(_, let current?):
                let shown = String(String.UnicodeScalarView(current.unicodeScalars.map {
                    $0.value < 0x20 || $0.value == 0x7F ? "\u{FFFD}" : $0
                }))
                out += out.isEmpty ? shown : "." + shown
            case .object(_, nil):
                break
            case .array(let index):
                out += "[\(index)]"
            }
        }
        guard out.utf8.count > fieldPathBytesMax else { return out }
        var cut = ""
        for character in out {
            guard cut.utf8.count + character.utf8.count <= fieldPathBytesMax else { break }
            cut.append(character)
        }
        return cut
    }
}
