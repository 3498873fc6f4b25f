/// Hand-written JSON for hot documents: the caller writes each object's members itself, in the order
/// `JSONBytesEncoder` would (keys sorted by their UTF-8 bytes, absent optionals omitted), and gets the same
/// bytes without Swift's generic `Encodable` machinery (measured: two thirds of a checkout update's
/// instructions went to encoding its stored document generically). Members it does not spell itself go
/// through `value(_:)`, which is `JSONBytesEncoder`'s own path. Byte identity with the generic encoders is
/// the callers' tested contract.
public struct JSONBytesWriter {
    /// The JSON written so far.
    public private(set) var bytes: [UInt8]
    /// False once something was written at the current level (the next member or element takes a comma).
    private var atFirst = true

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 1_024) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    private mutating func separate() {
        if !atFirst { bytes.append(UInt8(ascii: ",")) }
        atFirst = false
    }

    /// `{`; members follow with `key(_:)`.
    public mutating func openObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        atFirst = true
    }

    /// `}`.
    public mutating func closeObject() {
        bytes.append(UInt8(ascii: "}"))
        atFirst = false
    }

    /// `[`; elements follow.
    public mutating func openArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        atFirst = true
    }

    /// `]`.
    public mutating func closeArray() {
        bytes.append(UInt8(ascii: "]"))
        atFirst = false
    }

    /// A member name (a literal that needs no escaping: ASCII letters and digits); its value comes next.
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(0x22)
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(0x22)
        bytes.append(UInt8(ascii: ":"))
        atFirst = true
    }

    /// A string value, escaped as `JSONBytesEncoder` escapes it.
    public mutating func string(_ text: String) {
        separate()
        JSONNode.writeString(text, into: &bytes)
    }

    /// An integer value.
    public mutating func integer<Integer: BinaryInteger>(_ number: Integer) {
        separate()
        bytes.append(contentsOf: String(number).utf8)
    }

    /// `null`.
    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
    }

    /// `true` or `false`.
    public mutating func bool(_ flag: Bool) {
        separate()
        bytes.append(contentsOf: flag ? Array("true".utf8) : Array("false".utf8))
    }

    /// JSON written earlier (by this writer or `JSONBytesEncoder`), copied as it is.
    public mutating func raw(_ json: [UInt8]) {
        separate()
        bytes.append(contentsOf: json)
    }

    /// Any Encodable, through `JSONBytesEncoder`'s generic path (for members rare enough not to need their own code).
    public mutating func value<T: Encodable>(_ value: T) throws {
        separate()
        try JSONTreeEncoder.node(of: value).write(into: &bytes)
    }

    // MARK: - Optional members (omitted when nil, as synthesized `encodeIfPresent` omits them)

    /// `"name":"…"` when `text` is not nil.
    public mutating func member(_ name: StaticString, _ text: String?) {
        guard let text else { return }
        key(name)
        string(text)
    }

    /// `"name":n` when `number` is not nil.
    public mutating func member(_ name: StaticString, _ number: Int?) {
        guard let number else { return }
        key(name)
        integer(number)
    }

    /// `"name":n` when `number` is not nil.
    public mutating func member(_ name: StaticString, _ number: Int64?) {
        guard let number else { return }
        key(name)
        integer(number)
    }

    /// `"name":true|false` when `flag` is not nil.
    public mutating func member(_ name: StaticString, _ flag: Bool?) {
        guard let flag else { return }
        key(name)
        bool(flag)
    }

    /// `"name":["…",…]` when `texts` is not nil.
    public mutating func member(_ name: StaticString, _ texts: [String]?) {
        guard let texts else { return }
        key(name)
        openArray()
        for text in texts { string(text) }
        closeArray()
    }

    /// `"name":<generic JSON>` when `value` is not nil.
    public mutating func memberValue<T: Encodable>(_ name: StaticString, _ value: T?) throws {
        guard let value else { return }
        key(name)
        try self.value(value)
    }
}
