// Adyen "Settlement details report" (docs/finance-store.md §4.1): columns are found by header name, so
// Adyen's optional extra columns (Booking Date, Store, Acquirer Reference…) may appear anywhere.

/// Adyen journal types Tender understands, mapped onto the common line types (docs/finance-store.md §4.4).
///
/// The list is Adyen's documented `Type` values of the Settlement details report (docs.adyen.com,
/// "Settlement details report" and its "Journal types" page), compared case-insensitively: Adyen's
/// own spelling varies (`Balancetransfer`, `BalanceTransfer`). A type not listed here is not an
/// error: the line becomes an `adjustment` item with reason `journal_type_unknown`.
public enum AdyenJournalType {
    /// Journal `Type` (Adyen's spelling) → normalized type.
    public static let mapping: [String: SettlementLineType] = [
        // Payments and their reversals; "Externally" = settled by an external acquirer but reported here.
        "Settled": .payment,
        "SettledExternally": .payment,
        "Refunded": .refund,
        "RefundedExternally": .refund,
        "RefundedReversed": .refund,
        "Chargeback": .chargeback,
        "ChargebackExternally": .chargeback,
        "SecondChargeback": .chargeback,
        "ChargebackReversed": .chargebackReversal,
        "ChargebackReversal": .chargebackReversal,
        // Costs: debits, and credits where Adyen gives a cost back (PaymentCost, MiscCosts).
        "Fee": .fee,
        "MiscCosts": .fee,
        "PaymentCost": .fee,
        "AuthorisationSchemeFee": .fee,
        "SettleCost": .fee,
        // Money to or back from the merchant's bank.
        "MerchantPayout": .payout,
        "BankInstructionReturned": .payout,
        // Payouts to a third party's card or account (Adyen Payouts) and their reversals: money leaves or
        // comes back to the balance, but never reaches the merchant's bank.
        "PaidOut": .adjustment,
        "PaidOutReversed": .adjustment,
        // Balance movements that are neither sales nor costs nor payouts to the bank.
        "DepositCorrection": .adjustment,
        "InvoiceDeduction": .adjustment,
        "ManualCorrected": .adjustment,
        "Balancetransfer": .adjustment,
        "MatchedStatement": .adjustment,
        "EpaPaid": .adjustment,
        "ReserveAdjustment": .adjustment,
        "MerchantPayin": .adjustment,
        // A split-settlement transfer to another account of the same company, not to a bank.
        "InternalCompanyPayout": .adjustment,
    ]

    /// Lower-cased type → (Adyen's spelling, normalized type).
    static let byLowercased: [String: (name: String, type: SettlementLineType)] = {
        var table: [String: (name: String, type: SettlementLineType)] = [:]
        for (name, type) in mapping { table[name.lowercased()] = (name, type) }
        return table
    }()

    /// The journal type as Adyen spells it and its normalized type; nil for a type not in the list.
    public static func lookup(_ journal: String) -> (name: String, type: SettlementLineType)? {
        if let type = mapping[journal] { return (journal, type) }
        return byLowercased[journal.lowercased()]
    }
}

struct AdyenLayout {
    enum Column: String, CaseIterable {
        case merchantAccount = "Merchant Account"
        case pspReference = "Psp Reference"
        case merchantReference = "Merchant Reference"
        case creationDate = "Creation Date"
        case type = "Type"
        case modificationReference = "Modification Reference"
        case grossCurrency = "Gross Currency"
        case grossDebit = "Gross Debit (GC)"
        case grossCredit = "Gross Credit (GC)"
        case netCurrency = "Net Currency"
        case netDebit = "Net Debit (NC)"
        case netCredit = "Net Credit (NC)"
        case commission = "Commission (NC)"
        case markup = "Markup (NC)"
        case schemeFees = "Scheme Fees (NC)"
        case interchange = "Interchange (NC)"
        case batchNumber = "Batch Number"
    }

    enum OptionalColumn: String, CaseIterable {
        case paymentMethodVariant = "Payment Method Variant"
        case modificationMerchantReference = "Modification Merchant Reference"
        case bookingDate = "Booking Date"
    }

    let columnCount: Int
    private let index: [Column: Int]
    private let optionalIndex: [OptionalColumn: Int]

    init(header: CSVRecord) throws(ReconciliationError) {
        var positions: [String: Int] = [:]
        for (position, name) in header.fields.enumerated() {
            if positions[name] != nil { throw header.error(.headerInvalid, field: position, name: name) }
            positions[name] = position
        }
        var index: [Column: Int] = [:]
        for column in Column.allCases {
            guard let position = positions[column.rawValue] else {
                throw header.error(.headerInvalid, field: header.fields.count, name: column.rawValue)
            }
            index[column] = position
        }
        var optionalIndex: [OptionalColumn: Int] = [:]
        for column in OptionalColumn.allCases {
            if let position = positions[column.rawValue] { optionalIndex[column] = position }
        }
        self.columnCount = header.fields.count
        self.index = index
        self.optionalIndex = optionalIndex
    }

    private func at(_ column: Column) -> Int {
        guard let position = index[column] else { preconditionFailure("every column is indexed") }
        return position
    }

    /// Parses one row; `unreferenced` is true for a row with neither Psp nor Modification Reference.
    func parse(_ record: CSVRecord) throws(ReconciliationError) -> (line: SettlementLine, unreferenced: Bool) {
        try record.checkColumnCount(columnCount)
        let typeIndex = at(.type)
        let written = try record.required(typeIndex, Column.type.rawValue)
        let known = AdyenJournalType.lookup(written)
        let journal = known?.name ?? written
        let type = known?.type ?? .unknown
        let date = try settlementDate(record)
        let merchantAccount = try record.required(at(.merchantAccount), Column.merchantAccount.rawValue)
        let batchNumber = try record.required(at(.batchNumber), Column.batchNumber.rawValue)
        let (netCurrency, netExponent) = try record.currency(at(.netCurrency), Column.netCurrency.rawValue)
        // Batch-level rows (Fee, MerchantPayout…) may leave the gross currency empty.
        var grossCurrency = netCurrency
        var grossExponent = netExponent
        if !record.fields[at(.grossCurrency)].isEmpty {
            (grossCurrency, grossExponent) = try record.currency(at(.grossCurrency),
                                                                 Column.grossCurrency.rawValue)
        }
        // An empty amount is an absent one (Adyen leaves the side that does not apply empty).
        func amount(_ column: Column, _ exponent: Int) throws(ReconciliationError) -> Int64 {
            try record.amount(at(column), column.rawValue, exponent: exponent, rule: .atMost,
                              emptyIsZero: true)
        }
        let grossCredit = try amount(.grossCredit, grossExponent)
        let grossDebit = try amount(.grossDebit, grossExponent)
        let netCredit = try amount(.netCredit, netExponent)
        let netDebit = try amount(.netDebit, netExponent)
        let feeParts = [try amount(.commission, netExponent), try amount(.markup, netExponent),
                        try amount(.schemeFees, netExponent), try amount(.interchange, netExponent)]
        var gross = try checkedSum([grossCredit, -grossDebit], record: record,
                                   field: at(.grossCredit), name: Column.grossCredit.rawValue)
        let net = try checkedSum([netCredit, -netDebit], record: record,
                                 field: at(.netCredit), name: Column.netCredit.rawValue)
        let fee = try checkedSum(feeParts, record: record, field: at(.commission),
                                 name: Column.commission.rawValue)
        // A row whose only amount is its net (Fee, MerchantPayout, InvoiceDeduction… often carry a
        // Gross Currency with no gross amount) is money in the net currency: its gross is that net.
        let grossWritten = !record.fields[at(.grossCredit)].isEmpty || !record.fields[at(.grossDebit)].isEmpty
        let netWritten = !record.fields[at(.netCredit)].isEmpty || !record.fields[at(.netDebit)].isEmpty
        if !grossWritten && netWritten {
            grossCurrency = netCurrency
            gross = net
        }

        let pspReference = record.optional(at(.pspReference))
        let modificationReference = record.optional(at(.modificationReference))
        var refundId: String?
        if type == .refund, let position = optionalIndex[.modificationMerchantReference] {
            refundId = record.optional(position)
        }
        let variant = optionalIndex[.paymentMethodVariant].flatMap { record.optional($0) }
        // docs/finance-store.md §4.5: Psp Reference + Modification Reference + Type (+ batch).
        var keyParts = ["adyen-sdr", merchantAccount, batchNumber, journal, pspReference ?? "",
                        modificationReference ?? ""]
        let unreferenced = pspReference == nil && modificationReference == nil
        if unreferenced {
            keyParts += [String(gross), String(fee), String(net)]
        }
        let line = SettlementLine(
            lineNumber: record.line, naturalKey: naturalKey(keyParts),
            batchId: "\(merchantAccount):\(batchNumber)", settlementDate: date, type: type,
            journalType: journal, paymentId: record.optional(at(.merchantReference)),
            refundId: refundId, processorReference: pspReference, paymentMethodVariant: variant,
            currencyCode: grossCurrency, grossMinor: gross, netCurrencyCode: netCurrency,
            feeMinor: fee, netMinor: net)
        return (line, unreferenced)
    }

    // Booking Date when present (when funds were booked), else the date of Creation Date.
    private func settlementDate(_ record: CSVRecord) throws(ReconciliationError) -> SettlementDate {
        if let position = optionalIndex[.bookingDate], !record.fields[position].isEmpty {
            return try Self.date(record, position, OptionalColumn.bookingDate.rawValue)
        }
        return try Self.date(record, at(.creationDate), Column.creationDate.rawValue)
    }

    // Adyen writes `YYYY-MM-DD HH:MM:SS`; the date alone is also accepted.
    private static func date(_ record: CSVRecord, _ position: Int, _ name: String)
        throws(ReconciliationError) -> SettlementDate {
        let text = record.fields[position]
        let utf8 = Array(text.utf8)
        var valid = utf8.count == 10
        if utf8.count == 19 {
            valid = utf8[10] == UInt8(ascii: " ") && utf8[13] == UInt8(ascii: ":")
                && utf8[16] == UInt8(ascii: ":")
            for offset in [11, 12, 14, 15, 17, 18] where !(UInt8(ascii: "0")...UInt8(ascii: "9"))
                .contains(utf8[offset]) {
                valid = false
            }
        }
        guard valid, let date = SettlementDate(text.prefix(10)) else {
            throw record.error(.dateInvalid, field: position, name: name)
        }
        return date
    }
}
