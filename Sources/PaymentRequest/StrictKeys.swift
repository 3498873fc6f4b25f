// Unknown-field refusal for Tender's own request objects (openapi.yaml): a typo or a client-sent
// `total` must never be silently dropped. Objects Apple produces are decoded leniently instead.

/// The structure of a JSON document with leaf values erased: enough to compare keys to a schema.
public indirect enum JSONShape: Decodable, Sendable, Equatable {
    /// A string, number, boolean or null.
    case scalar
    /// An array and its elements' shapes.
    case array([JSONShape])
    /// An object and its members' shapes.
    case object([String: JSONShape])

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .scalar; return }
        if (try? container.decode(Bool.self)) != nil { self = .scalar; return }
        if (try? container.decode(String.self)) != nil { self = .scalar; return }
        if (try? container.decode(Double.self)) != nil { self = .scalar; return }
        if let elements = try? container.decode([JSONShape].self) { self = .array(elements); return }
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

    /// Throws `unknown_field` naming the first unknown field of the JSON being decoded by `decoder`.
    public func refuseUnknownFields(_ decoder: any Decoder) throws {
        let shape = try decoder.singleValueContainer().decode(JSONShape.self)
        if let field = firstUnknownField(in: shape, path: JSONPath.render(decoder.codingPath)) {
            throw PaymentRequestError(code: "unknown_field", path: field, rule: 0)
        }
    }
}
