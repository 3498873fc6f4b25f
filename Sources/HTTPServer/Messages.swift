import Foundation

/// Ordered HTTP header fields with case-insensitive lookup (RFC 9110 §5.1: field names are case-insensitive).
public struct HTTPHeaders: Sendable, Sequence {
    private var pairs: [(String, String)]

    /// Creates headers from ordered (name, value) pairs.
    public init(_ pairs: [(String, String)] = []) {
        self.pairs = pairs
    }

    /// The first value of the named field, if any.
    public subscript(name: String) -> String? {
        pairs.first { Self.sameName($0.0, name) }?.1
    }

    /// Every value of the named field, in order.
    public func values(for name: String) -> [String] {
        pairs.filter { Self.sameName($0.0, name) }.map(\.1)
    }

    /// Appends a field, keeping any existing ones with the same name.
    public mutating func add(_ name: String, _ value: String) {
        pairs.append((name, value))
    }

    /// Replaces every field with this name by a single one (appended if absent).
    public mutating func replaceOrAdd(_ name: String, _ value: String) {
        if let index = pairs.firstIndex(where: { Self.sameName($0.0, name) }) {
            pairs[index] = (name, value)
            var next = index + 1
            while next < pairs.count {
                if Self.sameName(pairs[next].0, name) { pairs.remove(at: next) } else { next += 1 }
            }
        } else {
            pairs.append((name, value))
        }
    }

    /// Removes every field with this name.
    public mutating func remove(_ name: String) {
        pairs.removeAll { Self.sameName($0.0, name) }
    }

    /// Number of fields.
    public var count: Int { pairs.count }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[(String, String)]> {
        pairs.makeIterator()
    }

    /// Case-insensitive name comparison without allocating: field names are ASCII tokens (the edge refuses
    /// others), compared with ASCII case folding; a non-ASCII name falls back to `lowercased()`.
    static func sameName(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        var nonASCII = false
        let equal = a.utf8.elementsEqual(b.utf8) { x, y in
            if x == y { return true }
            if x >= 0x80 || y >= 0x80 {
                nonASCII = true
                return true
            }
            let foldedX = x >= 0x41 && x <= 0x5A ? x | 0x20 : x
            let foldedY = y >= 0x41 && y <= 0x5A ? y | 0x20 : y
            return foldedX == foldedY
        }
        return nonASCII ? a.lowercased() == b.lowercased() : equal
    }
}

/// A fully received HTTP request, as handed to a route handler.
public struct HTTPRequest: Sendable {
    /// Request method as sent, e.g. "GET".
    public var method: String
    /// Percent-decoded path, without the query.
    public var path: String
    /// Decoded query pairs, in order.
    public var query: [(String, String)]
    /// Request header fields.
    public var headers: HTTPHeaders
    /// Request body bytes (at most `bodyBytesMax`).
    public var body: [UInt8]
    /// Numeric address of the peer.
    public var remoteAddress: String
    /// From a valid `X-Request-Id` header, or freshly generated.
    public var requestID: String
    /// Values captured by `{name}` segments of the route pattern.
    public var pathParameters: [String: String]
    /// The matched route pattern (e.g. "/v1/checkout-sessions/{id}"), or "unmatched".
    public var routePattern: String

    /// Creates a request (mostly for tests; the server builds its own).
    public init(method: String, path: String, query: [(String, String)] = [], headers: HTTPHeaders = HTTPHeaders(),
                body: [UInt8] = [], remoteAddress: String = "127.0.0.1", requestID: String = "test") {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.requestID = requestID
        self.pathParameters = [:]
        self.routePattern = "unmatched"
    }

    /// The first value of the named query parameter.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.0 == name }?.1
    }
}

/// A response produced by a handler or by the server.
public struct HTTPResponse: Sendable {
    /// HTTP status code.
    public var status: Int
    /// Response header fields (Content-Length is set by the server).
    public var headers: HTTPHeaders
    /// Response body bytes (ignored when `stream` is set).
    public var body: [UInt8]
    /// When set, the body is streamed with chunked encoding from this source instead of `body`.
    public var stream: HTTPStreamSource?

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response with the bytes of the shared `JSONCoding.encoder` (written by `JSONBytesEncoder`
    /// where it can); an encoding failure becomes a 500 problem.
    public static func json<T: Encodable>(_ value: T, status: Int = 200) -> HTTPResponse {
        do {
            return HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]),
                                body: try JSONBytesEncoder.bytes(value))
        } catch {
            return problem(.internalError, requestID: "")
        }
    }

    /// A text response.
    public static func text(_ text: String, status: Int = 200,
                            contentType: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", contentType)]), body: Array(text.utf8))
    }

    /// An RFC 9457 `application/problem+json` response carrying the request id.
    public static func problem(_ problem: HTTPProblem, requestID: String) -> HTTPResponse {
        var headers = problem.headers
        headers.replaceOrAdd("Content-Type", "application/problem+json")
        return HTTPResponse(status: problem.status, headers: headers, body: problem.jsonBody(requestID: requestID))
    }
}

/// An RFC 9457 problem; thrown by handlers or built by the server itself.
public struct HTTPProblem: Error, Sendable {
    /// HTTP status (also the `status` member).
    public var status: Int
    /// Stable snake_case machine code, e.g. "body_too_large".
    public var code: String
    /// Short human summary of the problem type.
    public var title: String
    /// Generic explanation; never SQL, paths, secrets or stack traces (RFC 9457 §5).
    public var detail: String
    /// Field-level errors; may be empty.
    public var errors: [FieldError]
    /// Extra top-level members (e.g. "authorizationResult"); may be empty.
    public var extra: [String: JSONValue]
    /// Extra response headers, e.g. Retry-After.
    public var headers: HTTPHeaders

    /// Base of the `type` URI; the problem code is appended to it.
    public static let typeBase = "https://docs.tender.dev/problems/"

    /// Creates a problem.
    public init(status: Int, code: String, title: String, detail: String, errors: [FieldError] = [],
                extra: [String: JSONValue] = [:], headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.errors = errors
        self.extra = extra
        self.headers = headers
    }

    /// One field-level error.
    public struct FieldError: Sendable, Codable, Equatable {
        /// Dotted path of the offending field, e.g. "lineItems.0.amount".
        public var field: String
        /// Stable snake_case code.
        public var code: String
        /// Human message.
        public var message: String

        /// Creates a field error.
        public init(field: String, code: String, message: String) {
            self.field = field
            self.code = code
            self.message = message
        }
    }

    /// The problem document; the standard members win over same-named extras.
    func jsonBody(requestID: String) -> [UInt8] {
        var members = extra
        members["type"] = .string(Self.typeBase + code)
        members["title"] = .string(title)
        members["status"] = .number(String(status))
        members["detail"] = .string(detail)
        members["code"] = .string(code)
        members["requestId"] = .string(requestID)
        if !errors.isEmpty {
            members["errors"] = .array(errors.map {
                .object(["field": .string($0.field), "code": .string($0.code), "message": .string($0.message)])
            })
        }
        if let data = try? JSONCoding.encoder.encode(JSONValue.object(members)) {
            return [UInt8](data)
        }
        // Only an extra holding an invalid number can fail; fall back to the members we control.
        var fallback = members.filter { ["type", "title", "status", "detail", "code", "requestId"].contains($0.key) }
        fallback["status"] = .number(String(status))
        return (try? JSONCoding.encoder.encode(JSONValue.object(fallback))).map { [UInt8]($0) } ?? []
    }

    /// 500 with a generic detail: what any unexpected error becomes.
    static let internalError = HTTPProblem(.internalError,
                                           detail: "The server could not complete the request.")
}

/// A minimal JSON tree for untyped members (problem extras, metadata).
public enum JSONValue: Sendable, Codable, Equatable {
    case null
    case bool(Bool)
    case string(String)
    /// The number's exact text; never goes through Double.
    case number(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Decodes any JSON value; numbers keep their value exactly via Decimal.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // A JSON value decodes as at most one kind, so the order only sets how many failed attempts (each a
        // thrown DecodingError) it costs: strings and objects, what stored documents are made of, first.
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .number(String(value))
        } else if let value = try? container.decode(Decimal.self) {
            self = .number(value.description)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Unsupported JSON value")
        }
    }

    /// Encodes the value; a number whose text is not a JSON number fails.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .number(let text):
            if let value = Int64(text) {
                try container.encode(value)
            } else if Self.isJSONNumber(text), let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) {
                try container.encode(value)
            } else {
                throw EncodingError.invalidValue(text, .init(codingPath: encoder.codingPath,
                                                             debugDescription: "Not a JSON number"))
            }
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// RFC 8259 §6 number grammar.
    static func isJSONNumber(_ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        func digits() -> Int {
            var count = 0
            while let byte = bytes.first, byte >= 0x30, byte <= 0x39 { bytes.removeFirst(); count += 1 }
            return count
        }
        if bytes.first == UInt8(ascii: "-") { bytes.removeFirst() }
        if bytes.first == UInt8(ascii: "0") {
            bytes.removeFirst()
        } else if digits() == 0 {
            return false
        }
        if bytes.first == UInt8(ascii: ".") {
            bytes.removeFirst()
            if digits() == 0 { return false }
        }
        if bytes.first == UInt8(ascii: "e") || bytes.first == UInt8(ascii: "E") {
            bytes.removeFirst()
            if bytes.first == UInt8(ascii: "+") || bytes.first == UInt8(ascii: "-") { bytes.removeFirst() }
            if digits() == 0 { return false }
        }
        return bytes.isEmpty
    }
}
