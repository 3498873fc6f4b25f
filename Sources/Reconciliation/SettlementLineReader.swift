// Turns a CSV byte stream into validated settlement lines, one at a time, refusing at the first error.

/// Streams `SettlementLine`s out of a report in `format`; the header is checked on the first call.
public struct SettlementLineReader<Source: ByteChunkSource> {
    /// The format being read.
    public var format: SettlementReportFormat { rows.format }
    /// The underlying CSV reader (exposes its buffering figures).
    public private(set) var csv: CSVReader<Source>
    // Not generic over the source, like the CSV reader's state machine.
    private var rows: SettlementRowParser

    /// A reader of `format` over `source` under the CSV `limits`.
    public init(format: SettlementReportFormat, source: Source, limits: CSVLimits = CSVLimits()) {
        self.rows = SettlementRowParser(format: format)
        self.csv = CSVReader(source: source, limits: limits)
    }

    /// The next settlement line, or nil at the end; throws the first error with its position.
    public mutating func next() throws(ReconciliationError) -> SettlementLine? {
        if !rows.headerRead {
            guard let header = try csv.next() else {
                rows.headerRead = true
                throw ReconciliationError(.csvEmpty, line: 1, column: 1)
            }
            try rows.checkHeader(header)
        }
        guard let record = try csv.nextRaw() else { return nil }
        return try rows.line(record)
    }

    /// Reads every line; convenient for tests and small files (the shell streams with `next()`).
    public mutating func readAll() throws(ReconciliationError) -> [SettlementLine] {
        var lines: [SettlementLine] = []
        while let line = try next() { lines.append(line) }
        return lines
    }
}

/// `SettlementLineReader`'s work on each record.
struct SettlementRowParser {
    let format: SettlementReportFormat
    var headerRead = false
    private var layout: AdyenLayout?
    private var generic = GenericFormat()
    /// Unreferenced lines seen so far per batch, type and net currency (`SettlementLine.batchLevelOrdinal`).
    private var unreferencedCounts: [String: Int] = [:]

    init(format: SettlementReportFormat) { self.format = format }

    mutating func checkHeader(_ header: CSVRecord) throws(ReconciliationError) {
        headerRead = true
        switch format {
        case .generic: try GenericFormat.checkHeader(header)
        case .adyenSDR: layout = try AdyenLayout(header: header)
        }
    }

    mutating func line(_ record: CSVRawRecord) throws(ReconciliationError) -> SettlementLine {
        var (line, unreferenced): (SettlementLine, Bool)
        switch format {
        case .generic:
            (line, unreferenced) = try generic.parse(record)
        case .adyenSDR:
            guard let layout else { preconditionFailure("header is read before any row") }
            (line, unreferenced) = try layout.parse(record.record)
        }
        if unreferenced {
            let slot = naturalKey([line.batchId, line.journalType, line.netCurrencyCode])
            let ordinal = (unreferencedCounts[slot] ?? 0) + 1
            unreferencedCounts[slot] = ordinal
            line.batchLevelOrdinal = ordinal
        }
        return line
    }
}

// Shared field helpers.
extension CSVRecord {
    func optional(_ index: Int) -> String? {
        let value = fields[index]
        return value.isEmpty ? nil : value
    }

    func required(_ index: Int, _ name: String) throws(ReconciliationError) -> String {
        let value = fields[index]
        if value.isEmpty { throw error(.fieldRequired, field: index, name: name) }
        return value
    }

    func currency(_ index: Int, _ name: String) throws(ReconciliationError) -> (String, Int) {
        let code = fields[index]
        guard let exponent = MoneySeam.exponent(of: code) else {
            throw error(.currencyUnknown, field: index, name: name)
        }
        return (code, exponent)
    }

    func amount(_ index: Int, _ name: String, exponent: Int, rule: FractionDigitsRule,
                emptyIsZero: Bool) throws(ReconciliationError) -> Int64 {
        let text = fields[index]
        if text.isEmpty && emptyIsZero { return 0 }
        switch MoneySeam.parseMinor(text, exponent: exponent, rule: rule) {
        case .success(let minor): return minor
        case .failure(let problem): throw error(problem.code, field: index, name: name)
        }
    }

    func checkColumnCount(_ expected: Int) throws(ReconciliationError) {
        if fields.count != expected {
            // Point at the first extra field, or at the end of the record where one is missing.
            throw error(.csvWrongColumnCount, field: min(fields.count, expected))
        }
    }
}

func checkedSum(_ values: [Int64], record: CSVRecord, field index: Int, name: String)
    throws(ReconciliationError) -> Int64 {
    var total: Int64 = 0
    for value in values {
        let (sum, overflow) = total.addingReportingOverflow(value)
        if overflow { throw record.error(.amountOverflow, field: index, name: name) }
        total = sum
    }
    return total
}

/// Tender's `generic` CSV (openapi.yaml).
///
/// Amounts carry exactly the currency's fraction digits. Direction comes from `type`: debit types
/// (refund, fee, chargeback, payout) may be written positive or negative and are stored negative;
/// payment and chargeback_reversal are stored as written; adjustment keeps its sign. `fee_amount`
/// is a cost and its sign is ignored (rebates are adjustments).
struct GenericFormat {
    static let header = ["settlement_date", "batch_id", "type", "payment_id", "processor_reference",
                         "currency", "gross_amount", "fee_amount", "net_amount"]

    static func checkHeader(_ record: CSVRecord) throws(ReconciliationError) {
        for (index, name) in header.enumerated() where index >= record.fields.count
            || record.fields[index] != name {
            throw record.error(.headerInvalid, field: index, name: name)
        }
        if record.fields.count != header.count {
            throw record.error(.headerInvalid, field: header.count)
        }
    }

    /// The last currency and batch seen, as read and as parsed: consecutive lines nearly always repeat
    /// them, so a line costs a byte comparison instead of a lookup and a string.
    private var currencyBytes: [UInt8] = []
    private var currency = ("", 0)
    private var currencyParsesAmounts = false
    private var batchBytes: [UInt8] = []
    private var batchId = ""

    /// The type words, as bytes, in `SettlementLineType.allCases` order.
    private static let typeWords: [(bytes: [UInt8], type: SettlementLineType)] =
        SettlementLineType.allCases.map { (Array($0.rawValue.utf8), $0) }

    /// Parses one row; `unreferenced` is true for a row with neither payment id nor reference.
    ///
    /// Works on the field bytes: the checks and their order are those of the string parser this
    /// replaced (`GenericFormatReferenceTests` compares the two), so every error keeps its code and position.
    mutating func parse(_ record: CSVRawRecord) throws(ReconciliationError) -> (line: SettlementLine, unreferenced: Bool) {
        if record.count != Self.header.count {
            // Point at the first extra field, or at the end of the record where one is missing.
            throw record.error(.csvWrongColumnCount, field: min(record.count, Self.header.count))
        }
        guard let date = SettlementDate(utf8: record[0]) else {
            throw record.error(.dateInvalid, field: 0, name: Self.header[0])
        }
        let batchField = record[1]
        if batchField.isEmpty { throw record.error(.fieldRequired, field: 1, name: Self.header[1]) }
        if !batchField.elementsEqual(batchBytes) {
            batchBytes = Array(batchField)
            batchId = record.string(1)
        }
        let batchId = self.batchId
        guard let type = Self.lineType(record, 2), type != .unknown else {
            throw record.error(.typeUnknown, field: 2, name: Self.header[2])
        }
        let paymentId = record[3].isEmpty ? nil : record.string(3)
        let reference = record[4].isEmpty ? nil : record.string(4)
        let currencyField = record[5]
        if !currencyField.elementsEqual(currencyBytes) || currencyBytes.isEmpty {
            let code = record.string(5)
            guard let exponent = MoneySeam.exponent(of: code) else {
                throw record.error(.currencyUnknown, field: 5, name: Self.header[5])
            }
            currencyBytes = Array(currencyField)
            currency = (code, exponent)
            currencyParsesAmounts = MoneySeam.parsesAmounts(exponent: exponent)
        }
        let (currencyCode, exponent) = currency
        var gross = try amount(record, 6, exponent: exponent)
        let fee = try amount(record, 7, exponent: exponent)
        var net = try amount(record, 8, exponent: exponent)
        switch type {
        case .refund, .fee, .chargeback, .payout:
            gross = -abs(gross)
            net = -abs(net)
        case .payment, .chargebackReversal, .adjustment, .unknown:
            break
        }
        let unreferenced = paymentId == nil && reference == nil
        let key: String
        if !unreferenced, let joined = Self.joinedKey(record, type: type) {
            key = joined
        } else {
            var keyParts = ["generic", batchId, type.rawValue, paymentId ?? "", reference ?? "", currencyCode]
            if unreferenced {
                // Batch-level lines have no reference: their amounts are what tells two of them apart.
                keyParts += [String(gross), String(abs(fee)), String(net)]
            }
            key = naturalKey(keyParts)
        }
        let line = SettlementLine(
            lineNumber: record.line, naturalKey: key, batchId: batchId,
            settlementDate: date, type: type, journalType: type.rawValue, paymentId: paymentId,
            refundId: nil, processorReference: reference, paymentMethodVariant: nil,
            currencyCode: currencyCode, grossMinor: gross, netCurrencyCode: currencyCode,
            feeMinor: abs(fee), netMinor: net)
        return (line, unreferenced)
    }

    private static func lineType(_ record: CSVRawRecord, _ index: Int) -> SettlementLineType? {
        let field = record[index]
        for word in typeWords where word.bytes.count == field.count && word.bytes.elementsEqual(field) {
            return word.type
        }
        // Not byte-equal to a type word: decide as the string parser did (`String` equality).
        return SettlementLineType(rawValue: record.string(index))
    }

    private func amount(_ record: CSVRawRecord, _ index: Int, exponent: Int) throws(ReconciliationError) -> Int64 {
        guard currencyParsesAmounts else { throw record.error(.amountInvalid, field: index, name: Self.header[index]) }
        switch MoneySeam.parseMinorExact(record[index], exponent: exponent) {
        case .success(let minor): return minor
        case .failure(let problem): throw record.error(problem.code, field: index, name: Self.header[index])
        }
    }

    /// `naturalKey(["generic", batch, type, payment id, reference, currency])` built from the bytes, or
    /// nil when a part holds `%` or `|` (then the parts need escaping).
    private static func joinedKey(_ record: CSVRawRecord, type: SettlementLineType) -> String? {
        let batch = record[1], payment = record[3], reference = record[4], currency = record[5]
        func plain(_ field: ArraySlice<UInt8>) -> Bool {
            !field.contains { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "|") }
        }
        guard plain(batch), plain(payment), plain(reference), plain(currency) else { return nil }
        let word = type.rawValue.utf8
        let length = 12 + word.count + batch.count + payment.count + reference.count + currency.count
        return String(unsafeUninitializedCapacity: length) { buffer in
            var position = 0
            func put<Bytes: Collection<UInt8>>(_ bytes: Bytes, separator: Bool = true) {
                for byte in bytes {
                    buffer[position] = byte
                    position += 1
                }
                if separator {
                    buffer[position] = UInt8(ascii: "|")
                    position += 1
                }
            }
            put("generic".utf8)
            put(batch)
            put(word)
            put(payment)
            put(reference)
            put(currency, separator: false)
            return position
        }
    }
}
