public import Foundation
import Time

/// Shared, reused JSON coders (creating them per request costs measurable CPU) and the request-body decoder.
public enum JSONCoding {
    /// Sorted keys, and `/` left unescaped.
    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Pretty-printed, sorted keys, `/` unescaped, dates as RFC 3339 in whole seconds: command output.
    public static let prettyEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.string(from: date, fraction: .none))
        }
        return encoder
    }()

    /// Default decoding strategies.
    public static let decoder = JSONDecoder()

    /// Deepest accepted nesting of arrays and objects in a request body.
    public static let depthMax = 32

    /// Decodes a request body as `T`; a bad body throws a 400 problem (`malformed_json`, `json_too_deep`,
    /// or one of `checkBody`'s) with a generic detail and, where the decoder names a field, a field-level error.
    /// A problem thrown by `T`'s own `init(from:)` (e.g. `unknown_field`) passes through unchanged.
    public static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws(HTTPProblem) -> T {
        try checkBody(body)
        do {
            return try decoder.decode(T.self, from: Data(body))
        } catch let problem as HTTPProblem {
            throw problem
        } catch let error as DecodingError {
            throw malformed(fieldError(error))
        } catch {
            throw malformed()
        }
    }

    /// The checks every JSON request body passes before any decoder reads it (the one JSON edge: `decode`
    /// runs it, and so must any route that parses a body another way): non-empty valid UTF-8, nesting
    /// within `depthMax`, and `JSONBodyScan`'s refusals, each a 400 naming the field:
    /// `duplicate_field`, `nul_character` (PostgreSQL text cannot store U+0000), `invalid_unicode_escape`.
    public static func checkBody(_ body: [UInt8]) throws(HTTPProblem) {
        guard !body.isEmpty else { throw malformed() }
        guard String(validating: body, as: UTF8.self) != nil else { throw malformed() }
        guard nestingDepth(body) <= depthMax else {
            throw HTTPProblem(.jsonTooDeep,
                              detail: "The request body nests arrays or objects deeper than \(depthMax) levels.")
        }
        guard let finding = JSONBodyScan.firstFinding(in: body) else { return }
        let (type, message): (ProblemType, String) = switch finding.kind {
        case .duplicateField: (.duplicateField, "This member appears more than once in its object.")
        case .nulCharacter: (.nulCharacter, "Strings must not contain U+0000.")
        case .invalidUnicodeEscape: (.invalidUnicodeEscape, "A \\u escape is an unpaired UTF-16 surrogate.")
        }
        throw HTTPProblem(type, errors: [.init(field: finding.field, code: type.code, message: message)])
    }

    /// Deepest bracket nesting outside strings; a cheap pre-check so a hostile body never reaches the recursive parser.
    public static func nestingDepth(_ body: [UInt8]) -> Int {
        var depth = 0
        var deepest = 0
        var inString = false
        var escaped = false
        for byte in body {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                deepest = max(deepest, depth)
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return deepest
    }

    private static func malformed(_ fieldError: HTTPProblem.FieldError? = nil) -> HTTPProblem {
        HTTPProblem(.malformedJSON, errors: fieldError.map { [$0] } ?? [])
    }

    /// Names the offending field without echoing any of the client's values.
    private static func fieldError(_ error: DecodingError) -> HTTPProblem.FieldError? {
        func path(_ codingPath: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            (codingPath + (last.map { [$0] } ?? [])).map { $0.intValue.map(String.init) ?? $0.stringValue }
                .joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return .init(field: path(context.codingPath, key), code: "required", message: "This field is required.")
        case .valueNotFound(_, let context):
            return .init(field: path(context.codingPath), code: "required", message: "This field must not be null.")
        case .typeMismatch(_, let context):
            return .init(field: path(context.codingPath), code: "invalid_type", message: "This field has the wrong type.")
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            return .init(field: path(context.codingPath), code: "invalid_value", message: "This field has an invalid value.")
        default:
            return nil
        }
    }
}
