// Turns a CSV byte stream into validated settlement lines, one at a time, refusing at the first error.

/// Streams `SettlementLine`s out of a report in `format`; the header is checked on the first call.
public struct SettlementLineReader<Source: ByteChunkSource> {
    /// The format being read.
    public let format: SettlementReportFormat
    /// The underlying CSV reader (exposes its buffering figures).
    public private(set) var csv: CSVReader<Source>
    private var layout: AdyenLayout?
    private var headerRead = false
    /// Unreferenced lines seen so far per batch, type and net currency (`SettlementLine.batchLevelOrdinal`).
    private var unreferencedCounts: [String: Int] = [:]

    /// A reader of `format` over `source` under the CSV `limits`.
    public init(format: SettlementReportFormat, source: Source, limits: CSVLimits = CSVLimits()) {
        self.format = format
        self.csv = CSVReader(source: source, limits: limits)
    }

    /// The next settlement line, or nil at the end; throws the first error with its position.
    public mutating func next() throws(ReconciliationError) -> SettlementLine? {
        if !headerRead {
            headerRead = true
            guard let header = try csv.next() else {
                throw ReconciliationError(.csvEmpty, line: 1, column: 1)
            }
            switch format {
            case .generic: try GenericFormat.checkHeader(header)
            case .adyenSDR: layout = try AdyenLayout(header: header)
            }
        }
        guard let record = try csv.next() else { return nil }
        var (line, unreferenced): (SettlementLine, Bool)
        switch format {
        case .generic:
            (line, unreferenced) = try GenericFormat.parse(record)
        case .adyenSDR:
            guard let layout else { preconditionFailure("header is read before any row") }
            (line, unreferenced) = try layout.parse(record)
        }
        if unreferenced {
            let slot = naturalKey([line.batchId, line.journalType, line.netCurrencyCode])
            let ordinal = (unreferencedCounts[slot] ?? 0) + 1
            unreferencedCounts[slot] = ordinal
            line.batchLevelOrdinal = ordinal
        }
        return line
    }

    /// Reads every line; convenient for tests and small files (the shell streams with `next()`).
    public mutating func readAll() throws(ReconciliationError) -> [SettlementLine] {
        var lines: [SettlementLine] = []
        while let line = try next() { lines.append(line) }
        return lines
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
enum GenericFormat {
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

    /// Parses one row; `unreferenced` is true for a row with neither payment id nor reference.
    static func parse(_ record: CSVRecord) throws(ReconciliationError) -> (line: SettlementLine, unreferenced: Bool) {
        try record.checkColumnCount(header.count)
        guard let date = SettlementDate(record.fields[0]) else {
            throw record.error(.dateInvalid, field: 0, name: header[0])
        }
        let batchId = try record.required(1, header[1])
        guard let type = SettlementLineType(rawValue: record.fields[2]), type != .unknown else {
            throw record.error(.typeUnknown, field: 2, name: header[2])
        }
        let paymentId = record.optional(3)
        let reference = record.optional(4)
        let (currency, exponent) = try record.currency(5, header[5])
        var gross = try record.amount(6, header[6], exponent: exponent, rule: .exact, emptyIsZero: false)
        let fee = try record.amount(7, header[7], exponent: exponent, rule: .exact, emptyIsZero: false)
        var net = try record.amount(8, header[8], exponent: exponent, rule: .exact, emptyIsZero: false)
        switch type {
        case .refund, .fee, .chargeback, .payout:
            gross = -abs(gross)
            net = -abs(net)
        case .payment, .chargebackReversal, .adjustment, .unknown:
            break
        }
        var keyParts = ["generic", batchId, type.rawValue, paymentId ?? "", reference ?? "", currency]
        if paymentId == nil && reference == nil {
            // Batch-level lines have no reference: their amounts are what tells two of them apart.
            keyParts += [String(gross), String(abs(fee)), String(net)]
        }
        let line = SettlementLine(
            lineNumber: record.line, naturalKey: naturalKey(keyParts), batchId: batchId,
            settlementDate: date, type: type, journalType: type.rawValue, paymentId: paymentId,
            refundId: nil, processorReference: reference, paymentMethodVariant: nil,
            currencyCode: currency, grossMinor: gross, netCurrencyCode: currency,
            feeMinor: abs(fee), netMinor: net)
        return (line, paymentId == nil && reference == nil)
    }
}
