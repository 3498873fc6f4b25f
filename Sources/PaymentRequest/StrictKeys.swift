// Unknown-field refusal for Tender's own request objects (openapi.yaml): a typo or a client-sent
// `total` must never be silently dropped, and a member is a value or absent, never `null` (a `null`
// that decoded as "absent" would let a client send what openapi.yaml forbids). Objects Apple
// produces are decoded leniently instead.

/// The structure of a JSON document with leaf values erased: enough to compare keys to a schema.
public indirect enum JSONShape: Decodable, Sendable, Equatable {
    /// `null`.
    case null
    /// A string, number or boolean.
    case scalar
    /// An array and its elements' shapes.
    case array([JSONShape])
    /// An object and its members' shapes.
    case object([String: JSONShape])

    /// Decodes any JSON value. A JSON value decodes as at most one of these, so the order only decides how
    /// many failed attempts (each a thrown `DecodingError`) a value costs: the kinds request bodies are
    /// made of come first (strings, then objects).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null; return }
        if (try? container.decode(String.self)) != nil { self = .scalar; return }
        if let members = try? container.decode([String: JSONShape].self) { self = .object(members); return }
        if let elements = try? container.decode([JSONShape].self) { self = .array(elements); return }
        if (try? container.decode(Bool.self)) != nil { self = .scalar; return }
        if (try? container.decode(Double.self)) != nil { self = .scalar; return }
        // Nothing decoded (a number beyond Double, or an object holding one): the object attempt again, so the
        // error thrown is the one it always was.
        self = .object(try container.decode([String: JSONShape].self))
    }
}

/// The keys a request object may carry, nested: what `unknown_field` is judged against.
public indirect enum KeySchema: Sendable {
    /// A scalar (or anything whose type the real decoder checks).
    case leaf
    /// An object with exactly these optional members.
    case object([String: KeySchema])
    /// An array whose elements follow the schema.
    case array(KeySchema)
    /// An object with free keys (e.g. `metadata`) whose values follow the schema.
    case map(KeySchema)
    /// Anything, unchecked: objects Apple produces (contacts) may gain fields.
    case open

    /// The path of the first unknown field in `shape` (keys visited in sorted order, so the answer
    /// is deterministic), or nil. Type mismatches are left to the typed decoder.
    public func firstUnknownField(in shape: JSONShape, path: String = "") -> String? {
        switch (self, shape) {
        case (.object(let members), .object(let fields)):
            for key in fields.keys.sorted() {
                let childPath = path.isEmpty ? key : path + "." + key
                guard let schema = members[key] else { return childPath }
                if let found = schema.firstUnknownField(in: fields[key] ?? .scalar, path: childPath) { return found }
            }
            return nil
        case (.map(let valueSchema), .object(let fields)):
            for key in fields.keys.sorted() {
                if let found = valueSchema.firstUnknownField(in: fields[key] ?? .scalar, path: path + "." + key) {
                    return found
                }
            }
            return nil
        case (.array(let element), .array(let elements)):
            for (index, value) in elements.enumerated() {
                if let found = element.firstUnknownField(in: value, path: "\(path)[\(index)]") { return found }
            }
            return nil
        default:
            return nil
        }
    }

    /// The path of the first member of a Tender object (`.object`, at any depth) whose value is `null`,
    /// or nil; members of `.open` objects are Apple's and may be null. Same order as `firstUnknownField`.
    public func firstNullMember(in shape: JSONShape, path: String = "") -> String? {
        switch (self, shape) {
        case (.object(let members), .object(let fields)):
            for key in fields.keys.sorted() {
                let childPath = path.isEmpty ? key : path + "." + key
                guard let schema = members[key], let value = fields[key] else { continue }
                if case .open = schema { continue }
                if value == .null { return childPath }
                if let found = schema.firstNullMember(in: value, path: childPath) { return found }
            }
            return nil
        case (.map(let valueSchema), .object(let fields)):
            for key in fields.keys.sorted() {
                if let found = valueSchema.firstNullMember(in: fields[key] ?? .scalar, path: path + "." + key) { return found }
            }
            return nil
        case (.array(let element), .array(let elements)):
            for (index, value) in elements.enumerated() {
                if let found = element.firstNullMember(in: value, path: "\(path)[\(index)]") { return found }
            }
            return nil
        default:
            return nil
        }
    }

    /// Throws `unknown_field` naming the first unknown field of the JSON being decoded by `decoder`,
    /// then `field_type_invalid` naming the first member that is `null` (absent is the only "no value").
    public func refuseUnknownFields(_ decoder: any Decoder) throws {
        let shape = try decoder.singleValueContainer().decode(JSONShape.self)
        let root = JSONPath.render(decoder.codingPath)
        if let field = firstUnknownField(in: shape, path: root) {
            throw PaymentRequestError(code: "unknown_field", path: field, rule: 0)
        }
        if let field = firstNullMember(in: shape, path: root) {
            throw PaymentRequestError(code: "field_type_invalid", path: field, rule: 0)
        }
    }
}
