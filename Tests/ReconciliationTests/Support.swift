import Reconciliation

/// Reads every record of `text` (as UTF-8) in chunks of `chunkBytes`.
func records(_ text: String, chunkBytes: Int = 3, limits: CSVLimits = CSVLimits()) throws -> [CSVRecord] {
    try records(Array(text.utf8), chunkBytes: chunkBytes, limits: limits)
}

func records(_ bytes: [UInt8], chunkBytes: Int = 3, limits: CSVLimits = CSVLimits()) throws -> [CSVRecord] {
    var reader = CSVReader(source: ByteArraySource(bytes, chunkBytes: chunkBytes), limits: limits)
    var result: [CSVRecord] = []
    while let record = try reader.next() { result.append(record) }
    return result
}

/// The error reading `bytes` throws, or nil if it reads cleanly.
func csvError(_ bytes: [UInt8], limits: CSVLimits = CSVLimits()) -> ReconciliationError? {
    do {
        _ = try records(bytes, limits: limits)
        return nil
    } catch let error as ReconciliationError {
        return error
    } catch {
        return nil
    }
}

func csvError(_ text: String, limits: CSVLimits = CSVLimits()) -> ReconciliationError? {
    csvError(Array(text.utf8), limits: limits)
}

func lines(_ text: String, format: SettlementReportFormat) throws -> [SettlementLine] {
    var reader = SettlementLineReader(format: format, source: ByteArraySource(Array(text.utf8), chunkBytes: 7))
    return try reader.readAll()
}

func parseError(_ text: String, format: SettlementReportFormat) -> ReconciliationError? {
    do {
        _ = try lines(text, format: format)
        return nil
    } catch let error as ReconciliationError {
        return error
    } catch {
        return nil
    }
}

let genericHeader =
    "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

/// 1-based byte column where field `index` starts in an unquoted CSV line (test-side arithmetic).
func column(ofField index: Int, in line: String) -> Int {
    let fields = line.split(separator: ",", omittingEmptySubsequences: false)
    return fields.prefix(index).reduce(1) { $0 + $1.utf8.count + 1 }
}
