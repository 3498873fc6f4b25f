import FinanceStore
import HTTPServer

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

/// FinanceKit's JSON tokens over `JSONBytesWriter` (its escaping is `JSONCoding.encoder`'s): absent
/// optionals are written as `null`, as FinanceKit's own encoding writes them; the caller writes keys in
/// sorted order.
private struct FinanceKitJSONWriter {
    private var out = JSONBytesWriter(capacity: 640)
    var bytes: [UInt8] { out.bytes }

    mutating func open() { out.openObject() }
    mutating func close() { out.closeObject() }
    mutating func key(_ key: StaticString) { out.key(key) }

    mutating func number(_ value: Int64?) {
        guard let value else { return out.null() }
        out.integer(value)
    }

    /// `CurrencyAmount`'s shape: `{"amount":"12.34","currencyCode":"USD"}`.
    mutating func amount(_ value: CurrencyAmount?) {
        guard let value else { return out.null() }
        out.openObject()
        out.key("amount"); out.string(value.decimalString)
        out.key("currencyCode"); out.string(value.currencyCode)
        out.closeObject()
    }

    mutating func string(_ text: String?) {
        guard let text else { return out.null() }
        out.string(text)
    }
}
