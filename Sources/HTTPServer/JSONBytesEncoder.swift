import Foundation

/// Tender's own JSON encoder for responses and stored documents: the exact bytes `JSONCoding.encoder`
/// writes (keys sorted by their UTF-8 bytes, a later value for a key replacing an earlier one, `/`
/// unescaped, `\b \t \n \f \r` and `\u00xx` for other control characters), without Foundation's boxing
/// of every value (measured: about half the instructions of a checkout update went to `JSONEncoder`).
/// What it does not write itself — floating point, `Date`, `Data`, `URL`, `Decimal`, super encoders, a
/// value that encodes nothing — makes `encode` return nil, and the caller falls back to Foundation.
public enum JSONBytesEncoder {
    /// The sorted-keys JSON of `value`, or nil when Foundation must write it (see above).
    public static func encode<T: Encodable>(_ value: T) -> [UInt8]? {
        do {
            let node = try JSONTreeEncoder.node(of: value)
            var out: [UInt8] = []
            out.reserveCapacity(256)
            node.write(into: &out)
            return out
        } catch {
            return nil
        }
    }

    /// `encode`, else `JSONCoding.encoder`.
    public static func bytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        if let bytes = encode(value) { return bytes }
        return [UInt8](try JSONCoding.encoder.encode(value))
    }
}

/// Something the fast path leaves to Foundation.
struct JSONBytesUnsupported: Error {}

/// One encoded value; objects and arrays are boxes, so containers handed out earlier keep writing into them.
enum JSONNode {
    case object(JSONObjectBox)
    case array(JSONArrayBox)
    case string(String)
    /// A number, `true`, `false` or `null`, as written.
    case literal(String)

    func write(into out: inout [UInt8]) {
        switch self {
        case .string(let text):
            Self.writeString(text, into: &out)
        case .literal(let text):
            out.append(contentsOf: text.utf8)
        case .array(let box):
            out.append(UInt8(ascii: "["))
            for (index, element) in box.elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                element.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let box):
            out.append(UInt8(ascii: "{"))
            let members = box.sortedMembers()
            for index in members.indices {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(members[index].key, into: &out)
                out.append(UInt8(ascii: ":"))
                members[index].value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22: out.append(0x5C); out.append(0x22)
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x08: out.append(0x5C); out.append(UInt8(ascii: "b"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0C: out.append(0x5C); out.append(UInt8(ascii: "f"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0..<0x20:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

final class JSONObjectBox {
    var members: [(key: String, value: JSONNode)] = []

    /// Sorted by the keys' UTF-8 bytes; of equal keys the last one written (a dictionary's replacement).
    func sortedMembers() -> [(key: String, value: JSONNode)] {
        var sorted = members.enumerated().sorted { a, b in
            if a.element.key == b.element.key { return a.offset < b.offset }
            return a.element.key.utf8.lexicographicallyPrecedes(b.element.key.utf8)
        }.map(\.element)
        var index = sorted.count - 1
        while index > 0 {
            if sorted[index - 1].key == sorted[index].key { sorted.remove(at: index - 1) }
            index -= 1
        }
        return sorted
    }
}

final class JSONArrayBox {
    var elements: [JSONNode] = []
}

/// The Encoder a value's `encode(to:)` writes into; it holds that value's node once a container is taken.
final class JSONTreeEncoder: Encoder {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var node: JSONNode?

    /// The node of any Encodable: scalars directly, everything else through its `encode(to:)`.
    static func node<T: Encodable>(of value: T) throws -> JSONNode {
        // Scalars and the types Foundation writes its own way are recognised by their dynamic type (a pointer
        // comparison each): a dynamic cast to a protocol per value cost more than Foundation's own boxing.
        let type: Any.Type = Swift.type(of: value)
        if type == String.self, let text = value as? String { return .string(text) }
        if type == Int.self, let number = value as? Int { return .literal(String(number)) }
        if type == Bool.self, let flag = value as? Bool { return .literal(flag ? "true" : "false") }
        if integerTypes.contains(where: { $0 == type }), let number = value as? any BinaryInteger {
            return .literal(String(describing: number))
        }
        if foundationTypes.contains(where: { $0 == type }) { throw JSONBytesUnsupported() }
        let encoder = JSONTreeEncoder()
        try value.encode(to: encoder)
        guard let node = encoder.node else { throw JSONBytesUnsupported() }
        return node
    }

    private static let integerTypes: [Any.Type] = [Int64.self, Int32.self, Int16.self, Int8.self, UInt.self, UInt64.self,
                                                   UInt32.self, UInt16.self, UInt8.self]
    /// Floating point, dates, data, URLs and decimals (Foundation formats them itself), and any other standard
    /// scalar this encoder does not spell: left to Foundation.
    private static let foundationTypes: [Any.Type] = [Double.self, Float.self, Float16.self, Date.self, Data.self, URL.self,
                                                      Decimal.self, Int128.self, UInt128.self]

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: JSONObjectBox
        if case .object(let existing)? = node {
            box = existing
        } else {
            box = JSONObjectBox()
            node = .object(box)
        }
        return KeyedEncodingContainer(JSONTreeKeyedContainer<Key>(box: box))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: JSONArrayBox
        if case .array(let existing)? = node {
            box = existing
        } else {
            box = JSONArrayBox()
            node = .array(box)
        }
        return JSONTreeUnkeyedContainer(box: box)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { JSONTreeSingleContainer(encoder: self) }
}

struct JSONTreeKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let box: JSONObjectBox
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { box.members.append((key.stringValue, .literal("null"))) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        box.members.append((key.stringValue, try JSONTreeEncoder.node(of: value)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                        forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONObjectBox()
        box.members.append((key.stringValue, .object(nested)))
        return KeyedEncodingContainer(JSONTreeKeyedContainer<NestedKey>(box: nested))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = JSONArrayBox()
        box.members.append((key.stringValue, .array(nested)))
        return JSONTreeUnkeyedContainer(box: nested)
    }

    mutating func superEncoder() -> any Encoder { JSONUnsupportedEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { JSONUnsupportedEncoder() }
}

struct JSONTreeUnkeyedContainer: UnkeyedEncodingContainer {
    let box: JSONArrayBox
    var codingPath: [any CodingKey] { [] }
    var count: Int { box.elements.count }

    mutating func encodeNil() throws { box.elements.append(.literal("null")) }

    mutating func encode<T: Encodable>(_ value: T) throws { box.elements.append(try JSONTreeEncoder.node(of: value)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONObjectBox()
        box.elements.append(.object(nested))
        return KeyedEncodingContainer(JSONTreeKeyedContainer<NestedKey>(box: nested))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = JSONArrayBox()
        box.elements.append(.array(nested))
        return JSONTreeUnkeyedContainer(box: nested)
    }

    mutating func superEncoder() -> any Encoder { JSONUnsupportedEncoder() }
}

struct JSONTreeSingleContainer: SingleValueEncodingContainer {
    let encoder: JSONTreeEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() throws { try set(.literal("null")) }

    mutating func encode<T: Encodable>(_ value: T) throws { try set(try JSONTreeEncoder.node(of: value)) }

    /// One value per single-value container, as Foundation requires.
    private func set(_ node: JSONNode) throws {
        guard encoder.node == nil else { throw JSONBytesUnsupported() }
        encoder.node = node
    }
}

/// Handed out for `superEncoder()`, which the fast path does not support: any use fails the encoding.
final class JSONUnsupportedEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(JSONFailingKeyedContainer<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { JSONFailingUnkeyedContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { JSONFailingUnkeyedContainer() }
}

struct JSONFailingKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws { throw JSONBytesUnsupported() }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw JSONBytesUnsupported() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                        forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(JSONFailingKeyedContainer<NestedKey>())
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { JSONFailingUnkeyedContainer() }
    mutating func superEncoder() -> any Encoder { JSONUnsupportedEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { JSONUnsupportedEncoder() }
}

struct JSONFailingUnkeyedContainer: UnkeyedEncodingContainer, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws { throw JSONBytesUnsupported() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw JSONBytesUnsupported() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(JSONFailingKeyedContainer<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { JSONFailingUnkeyedContainer() }
    mutating func superEncoder() -> any Encoder { JSONUnsupportedEncoder() }
}
