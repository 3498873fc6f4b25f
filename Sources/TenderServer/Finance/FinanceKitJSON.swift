import FinanceStore

/// The FinanceKit transaction JSON written by hand: a settlement chunk encodes one per fee line, and
/// the generic `Encodable` path (even through `JSONBytesEncoder`) was about a fifth of the chunk's
/// instructions in Tender. The bytes are `JSONCoding.encoder`'s (keys sorted by their UTF-8 bytes,
/// absent optionals as `null`, `/` unescaped, `\b \t \n \f \r` and `\u00xx` for other control
/// characters); FinanceEncodingTests compares the two.
extension FinanceBatchSQL {
    /// `Transaction`'s sorted-keys JSON (the overload the recorder's generic `json` defers to).
    static func json(_ t: Transaction) throws -> String {
        var out = FinanceKitJSONWriter()
        out.open()
        out.key("accountID"); out.string(t.accountID.description)
        out.key("creditDebitIndicator"); out.string(t.creditDebitIndicator.rawValue)
        out.key("foreignCurrencyAmount"); out.amount(t.foreignCurrencyAmount)
        out.key("foreignCurrencyExchangeRate"); out.string(t.foreignCurrencyExchangeRate)
        out.key("id"); out.string(t.id.description)
        out.key("merchantCategoryCode"); out.number(t.merchantCategoryCode.map(Int64.init))
        out.key("merchantName"); out.string(t.merchantName)
        out.key("originalTransactionDescription"); out.string(t.originalTransactionDescription)
        out.key("postedDate"); out.string(t.postedDate?.description)
        out.key("status"); out.string(t.status.rawValue)
        out.key("transactionAmount"); out.amount(t.transactionAmount)
        out.key("transactionDate"); out.string(t.transactionDate.description)
        out.key("transactionDescription"); out.string(t.transactionDescription)
        out.key("transactionType"); out.string(t.transactionType.rawValue)
        out.close()
        return String(decoding: out.bytes, as: UTF8.self)
    }
}

/// Appends JSON tokens with `JSONCoding.encoder`'s escaping; the caller writes keys in sorted order.
private struct FinanceKitJSONWriter {
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
    private(set) var bytes: [UInt8] = []
    private var first = true

    init() { bytes.reserveCapacity(640) }

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        first = true
    }

    mutating func close() { bytes.append(UInt8(ascii: "}")) }

    /// Keys are plain ASCII literals: nothing to escape.
    mutating func key(_ key: StaticString) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func null() { bytes.append(contentsOf: "null".utf8) }

    mutating func number(_ value: Int64?) {
        guard let value else { return null() }
        bytes.append(contentsOf: String(value).utf8)
    }

    /// `CurrencyAmount`'s shape: `{"amount":"12.34","currencyCode":"USD"}`.
    mutating func amount(_ value: CurrencyAmount?) {
        guard let value else { return null() }
        open()
        key("amount"); string(value.decimalString)
        key("currencyCode"); string(value.currencyCode)
        close()
        first = false
    }

    mutating func string(_ text: String?) {
        guard let text else { return null() }
        let hex = Self.hexDigits
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case 0x22: bytes.append(0x5C); bytes.append(0x22)
            case 0x5C: bytes.append(0x5C); bytes.append(0x5C)
            case 0x08: bytes.append(0x5C); bytes.append(UInt8(ascii: "b"))
            case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
            case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
            case 0x0C: bytes.append(0x5C); bytes.append(UInt8(ascii: "f"))
            case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
            case 0..<0x20: bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
