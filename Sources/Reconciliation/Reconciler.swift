// Matching settlement lines against what Tender recorded (docs/finance-store.md §4.4, openapi.yaml).
import Foundation

/// Ledger status of a recorded payment or refund (FinanceKit transaction status, docs/finance-store.md §5.7).
public enum RecordedStatus: String, Sendable, Codable, CaseIterable {
    /// Authorized, not yet captured.
    case authorized
    /// Captured, waiting for settlement.
    case pending
    /// Already settled and booked.
    case booked
    /// Declined, voided or expired: never expected in a settlement.
    case rejected
}

/// A payment as Tender recorded it.
public struct RecordedPayment: Sendable, Equatable {
    /// Tender payment id (what processors echo as the merchant reference).
    public var paymentId: String
    /// The processor's reference for the payment, when known.
    public var processorReference: String?
    /// Amount charged, in minor units of `currencyCode`.
    public var amountMinor: Int64
    /// ISO 4217 currency.
    public var currencyCode: String
    /// Ledger status.
    public var status: RecordedStatus
    /// When the payment was recorded; drives the expected-settlement lag.
    public var createdAt: Date
    /// For a `booked` payment, the natural key of the settlement line that booked it: the same line in
    /// a later revision of its batch matches again; any other line settling it is a `duplicate`.
    public var bookedByLineKey: String?

    /// A recorded payment.
    public init(paymentId: String, processorReference: String? = nil, amountMinor: Int64,
                currencyCode: String, status: RecordedStatus, createdAt: Date, bookedByLineKey: String? = nil) {
        self.paymentId = paymentId
        self.processorReference = processorReference
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.status = status
        self.createdAt = createdAt
        self.bookedByLineKey = bookedByLineKey
    }
}

/// A refund as Tender recorded it.
public struct RecordedRefund: Sendable, Equatable {
    /// Tender refund id.
    public var refundId: String
    /// The refunded payment.
    public var paymentId: String
    /// The processor's reference for the refund, when known.
    public var processorReference: String?
    /// Amount refunded (positive), in minor units of `currencyCode`.
    public var amountMinor: Int64
    /// ISO 4217 currency.
    public var currencyCode: String
    /// Ledger status.
    public var status: RecordedStatus
    /// When the refund was recorded.
    public var createdAt: Date

    /// A recorded refund.
    public init(refundId: String, paymentId: String, processorReference: String? = nil,
                amountMinor: Int64, currencyCode: String, status: RecordedStatus, createdAt: Date) {
        self.refundId = refundId
        self.paymentId = paymentId
        self.processorReference = processorReference
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.status = status
        self.createdAt = createdAt
    }
}

/// Matching rules, with documented defaults.
public struct ReconciliationConfiguration: Sendable, Equatable {
    /// Largest |settled − recorded| still counted as `matched`; 0 = exact minor units (§5.8 default).
    public var amountToleranceMinor: Int64
    /// How long after recording a capture may stay absent before it is `missing_in_settlement`.
    public var settlementLagSeconds: Int64

    /// Exact amounts; a 7-day lag (processors settle T+1…T+7, docs/finance-store.md §4.4).
    public init(amountToleranceMinor: Int64 = 0, settlementLagSeconds: Int64 = 7 * 86_400) {
        precondition(amountToleranceMinor >= 0 && settlementLagSeconds >= 0, "limits are non-negative")
        self.amountToleranceMinor = amountToleranceMinor
        self.settlementLagSeconds = settlementLagSeconds
    }
}

/// Reconciliation categories, raw values exactly as openapi.yaml.
public enum ReconciliationCategory: String, Sendable, Codable, CaseIterable, Comparable {
    case matched
    case amountMismatch = "amount_mismatch"
    case currencyMismatch = "currency_mismatch"
    case missingInLedger = "missing_in_ledger"
    case missingInSettlement = "missing_in_settlement"
    case awaitingSettlement = "awaiting_settlement"
    case duplicate
    case fee
    case refund
    case chargeback
    case payout
    case adjustment

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One reported finding. Amounts are minor units; `differenceMinor` = actual − expected.
public struct ReconciliationItem: Sendable, Equatable, Codable {
    /// The category.
    public var category: ReconciliationCategory
    /// Line in the report file, nil for recorded items absent from it.
    public var lineNumber: Int?
    /// Batch of the line.
    public var batchId: String?
    /// The provider's type word of the line.
    public var journalType: String?
    /// Tender payment id involved.
    public var paymentId: String?
    /// Tender refund id involved.
    public var refundId: String?
    /// Processor reference involved.
    public var processorReference: String?
    /// Currency of the amounts (the settlement's, or the record's when there is no line).
    public var currencyCode: String
    /// Currency Tender recorded, when it differs (`currency_mismatch`).
    public var expectedCurrencyCode: String?
    /// What Tender recorded.
    public var expectedMinor: Int64?
    /// What the processor settled (signed as on the line).
    public var actualMinor: Int64?
    /// actual − expected, compared as magnitudes.
    public var differenceMinor: Int64?
    /// Short machine reason for findings that need one (`payment_already_matched`…).
    public var reason: String?

    /// An item; absent fields are nil.
    public init(category: ReconciliationCategory, lineNumber: Int? = nil, batchId: String? = nil,
                journalType: String? = nil, paymentId: String? = nil, refundId: String? = nil,
                processorReference: String? = nil, currencyCode: String, expectedCurrencyCode: String? = nil,
                expectedMinor: Int64? = nil, actualMinor: Int64? = nil, differenceMinor: Int64? = nil,
                reason: String? = nil) {
        self.category = category
        self.lineNumber = lineNumber
        self.batchId = batchId
        self.journalType = journalType
        self.paymentId = paymentId
        self.refundId = refundId
        self.processorReference = processorReference
        self.currencyCode = currencyCode
        self.expectedCurrencyCode = expectedCurrencyCode
        self.expectedMinor = expectedMinor
        self.actualMinor = actualMinor
        self.differenceMinor = differenceMinor
        self.reason = reason
    }
}

/// Σ of a batch's lines against its payout (docs/finance-store.md §4.4 `payout` / batch row).
public struct BatchBalance: Sendable, Equatable, Codable {
    /// Batch identity.
    public var batchId: String
    /// Net currency of the batch lines.
    public var currencyCode: String
    /// Σ net of the batch's non-payout lines (duplicates excluded).
    public var linesNetMinor: Int64
    /// Amount paid out (Σ of payout lines, as a positive outflow).
    public var payoutMinor: Int64
    /// payout − lines; 0 when balanced.
    public var differenceMinor: Int64
    /// Number of payout lines seen.
    public var payoutLines: Int
    /// True when a payout exists and equals the lines exactly.
    public var balanced: Bool

    /// A batch balance as computed by `Reconciler`.
    public init(batchId: String, currencyCode: String, linesNetMinor: Int64, payoutMinor: Int64,
                differenceMinor: Int64, payoutLines: Int, balanced: Bool) {
        self.batchId = batchId
        self.currencyCode = currencyCode
        self.linesNetMinor = linesNetMinor
        self.payoutMinor = payoutMinor
        self.differenceMinor = differenceMinor
        self.payoutLines = payoutLines
        self.balanced = balanced
    }
}

/// Kinds of finance-store effects a reconciliation asks the shell to apply (docs/finance-store.md §5.7).
public enum FinanceEffectKind: String, Sendable, Codable, CaseIterable {
    /// Mark the recorded payment `booked` with `postedDate` (an update, same transaction id).
    case bookPayment = "book_payment"
    /// Mark the recorded refund `booked` with `postedDate`.
    case bookRefund = "book_refund"
    /// Credit back a reversed refund.
    case refundReversal = "refund_reversal"
    /// New `fee` transaction.
    case fee
    /// New `adjustment` transaction (debit).
    case chargeback
    /// New `adjustment` transaction (credit).
    case chargebackReversal = "chargeback_reversal"
    /// New `adjustment` transaction.
    case adjustment
    /// New `transfer` transaction out of the processor account.
    case payout
}

/// One change to apply to the finance store, with a key derived only from the settlement line.
public struct FinanceEffect: Sendable, Equatable, Codable {
    /// Deterministic idempotency key (§4.5 point 5): same line → same key. Built from the line's
    /// `effectIdentity`, never from its amounts, so a corrected revision of the line has the same key
    /// and replaces what the old revision booked.
    public var key: String
    /// What to do.
    public var kind: FinanceEffectKind
    /// Line that caused it.
    public var lineNumber: Int
    /// Batch of the line.
    public var batchId: String
    /// Payment concerned, if any.
    public var paymentId: String?
    /// Refund concerned, if any.
    public var refundId: String?
    /// Magnitude in minor units of `currencyCode`.
    public var amountMinor: Int64
    /// ISO 4217 currency.
    public var currencyCode: String
    /// `credit` (money in on the processor account) or `debit` (money out).
    public var creditDebitIndicator: String
    /// FinanceKit `transactionType` for new transactions; nil for status updates.
    public var transactionType: String?
    /// Booking date.
    public var postedDate: SettlementDate
    /// Provider's journal type and reference, for `originalTransactionDescription`.
    public var originalDescription: String
}

/// Outcome of one reconciliation run. Encoded with sorted keys (the shell's `JSONCoding.encoder`), it is byte-identical
/// across runs on the same input (sorted keys, line order, then recorded items by date and id).
public struct ReconciliationReport: Sendable, Equatable, Codable {
    /// Number of settlement lines read.
    public var lineCount: Int
    /// Count per category; every category is present, zeros included.
    public var counts: [String: Int]
    /// Findings, in a deterministic order.
    public var items: [ReconciliationItem]
    /// Balance of each batch, ordered by batch id and currency.
    public var batches: [BatchBalance]
    /// Effects to apply, in line order.
    public var effects: [FinanceEffect]
}

/// Accumulates settlement lines one at a time and matches them against recorded payments and refunds
/// through dictionary lookups (Tender payment id first, then processor reference, §5.8).
public struct Reconciler {
    /// The rules in force.
    public let configuration: ReconciliationConfiguration
    /// Whether `add` gathers effects for `drain`/`report` (a caller that derives them later from the
    /// stored lines with `effects(of:item:)` saves the work).
    public let collectsEffects: Bool

    private let payments: [RecordedPayment]
    private let refunds: [RecordedRefund]
    private var paymentById: IdIndex
    private var paymentByReference: IdIndex
    private var refundById: IdIndex
    private var refundByReference: IdIndex
    private var refundsByPayment: [String: [Int]] = [:]
    private var paymentSeen: [Bool]
    private var refundSeen: [Bool]
    private var duplicates = DuplicateLineDetector()
    private var lineItems: [ReconciliationItem] = []
    private var effects: [FinanceEffect] = []
    private var batchTotals: [BatchKey: BatchTotal] = [:]
    private var current: (key: BatchKey, total: BatchTotal)?
    private var lineCount = 0
    private var lineCounts: [ReconciliationCategory: Int] = [:]

    private struct BatchKey: Hashable { var batchId: String; var currencyCode: String }
    private struct BatchTotal { var lines: Int64 = 0; var payout: Int64 = 0; var payoutLines = 0 }

    /// A reconciler over what Tender recorded; the first record wins if an id repeats.
    public init(payments: [RecordedPayment], refunds: [RecordedRefund] = [],
                configuration: ReconciliationConfiguration = ReconciliationConfiguration(),
                collectsEffects: Bool = true) {
        self.configuration = configuration
        self.collectsEffects = collectsEffects
        self.payments = payments
        self.refunds = refunds
        paymentSeen = Array(repeating: false, count: payments.count)
        refundSeen = Array(repeating: false, count: refunds.count)
        paymentById = IdIndex(capacity: payments.count)
        paymentByReference = IdIndex(capacity: payments.count)
        refundById = IdIndex(capacity: refunds.count)
        refundByReference = IdIndex(capacity: refunds.count)
        for (index, payment) in payments.enumerated() {
            paymentById.insert(payment.paymentId, position: index) { payments[$0].paymentId }
            if let reference = payment.processorReference {
                paymentByReference.insert(reference, position: index) { payments[$0].processorReference }
            }
        }
        for (index, refund) in refunds.enumerated() {
            refundById.insert(refund.refundId, position: index) { refunds[$0].refundId }
            if let reference = refund.processorReference {
                refundByReference.insert(reference, position: index) { refunds[$0].processorReference }
            }
            refundsByPayment[refund.paymentId, default: []].append(index)
        }
    }

    /// Matches every line of `reader`; throws the reader's first error (then nothing may be applied).
    public mutating func addAll<Source>(from reader: inout SettlementLineReader<Source>)
        throws(ReconciliationError) {
        while let line = try reader.next() { add(line) }
    }

    /// Matches one line.
    public mutating func add(_ line: SettlementLine) {
        lineCount += 1
        var item = ReconciliationItem(
            category: .matched, lineNumber: line.lineNumber, batchId: line.batchId,
            journalType: line.journalType, paymentId: line.paymentId, refundId: line.refundId,
            processorReference: line.processorReference, currencyCode: line.currencyCode,
            actualMinor: line.grossMinor)
        if duplicates.isRepeat(line) {
            item.category = .duplicate
            item.reason = "repeated_line"
            lineItems.append(item)
            lineCounts[.duplicate, default: 0] += 1
            return
        }
        accumulateBatch(line)
        switch line.type {
        case .payment: matchPayment(line, &item)
        case .refund: matchRefund(line, &item)
        case .fee:
            item.category = .fee
            item.actualMinor = line.netMinor
            item.currencyCode = line.netCurrencyCode
        case .chargeback, .chargebackReversal:
            item.category = .chargeback
            if let index = findPayment(line) {
                item.paymentId = payments[index].paymentId
                item.expectedMinor = payments[index].amountMinor
            } else {
                item.reason = "no_recorded_payment"
            }
        case .adjustment:
            item.category = .adjustment
            item.actualMinor = line.netMinor
            item.currencyCode = line.netCurrencyCode
        case .payout:
            item.category = .payout
            item.actualMinor = line.netMinor
            item.currencyCode = line.netCurrencyCode
        case .unknown:
            // Reported for a person to look at, never booked: Tender cannot tell what it means.
            item.category = .adjustment
            item.actualMinor = line.netMinor
            item.currencyCode = line.netCurrencyCode
            item.reason = "journal_type_unknown"
        }
        lineItems.append(item)
        lineCounts[item.category, default: 0] += 1
        if collectsEffects { effects.append(contentsOf: Self.effects(of: line, item: item)) }
    }

    /// The finance-store effects of one line, given the item matching made of it: a pure function of
    /// the two, so effects can be derived again from stored lines and items (the shell applies them
    /// after the report is stored). Mismatches and duplicates have none.
    public static func effects(of line: SettlementLine, item: ReconciliationItem) -> [FinanceEffect] {
        var out: [FinanceEffect] = []
        func add(_ kind: FinanceEffectKind, amount: Int64, type: String?, paymentId: String? = nil,
                 refundId: String? = nil, currencyCode: String? = nil) {
            if let effect = effect(kind, line, amount: amount, type: type, paymentId: paymentId,
                                   refundId: refundId, currencyCode: currencyCode) {
                out.append(effect)
            }
        }
        func lineFee() {
            add(.fee, amount: -line.feeMinor, type: "fee", paymentId: line.paymentId,
                currencyCode: line.netCurrencyCode)
        }
        switch item.category {
        case .matched:
            guard let paymentId = item.paymentId, let amount = item.expectedMinor else { return out }
            add(.bookPayment, amount: amount, type: nil, paymentId: paymentId)
            lineFee()
        case .refund:
            if item.reason == "refund_reversed" {
                // Adyen RefundedReversed: the refund came back; money in, nothing to book as a refund.
                add(.refundReversal, amount: line.grossMinor, type: "refund", paymentId: line.paymentId)
            } else if let refundId = item.refundId, let amount = item.expectedMinor {
                add(.bookRefund, amount: amount, type: nil, paymentId: item.paymentId, refundId: refundId)
            } else {
                return out
            }
            lineFee()
        case .fee:
            add(.fee, amount: line.netMinor, type: "fee")
        case .chargeback:
            add(line.type == .chargeback ? .chargeback : .chargebackReversal, amount: line.grossMinor,
                type: "adjustment", paymentId: item.paymentId)
            lineFee()
        case .adjustment:
            guard line.type != .unknown else { return out }
            add(.adjustment, amount: line.netMinor, type: "adjustment")
        case .payout:
            add(.payout, amount: line.netMinor, type: "transfer")
        case .amountMismatch, .currencyMismatch, .missingInLedger, .missingInSettlement,
             .awaitingSettlement, .duplicate:
            break
        }
        return out
    }

    /// Line items and effects produced since the last drain, handed over and forgotten, so a caller
    /// that stores them in batches keeps memory flat however long the file is. `report(now:)` still
    /// counts drained items but lists only those not drained.
    public mutating func drain() -> (items: [ReconciliationItem], effects: [FinanceEffect]) {
        defer {
            lineItems.removeAll(keepingCapacity: true)
            effects.removeAll(keepingCapacity: true)
        }
        return (lineItems, effects)
    }

    /// Number of line items and effects waiting to be drained.
    public var pendingCount: Int { lineItems.count + effects.count }

    private func findPayment(_ line: SettlementLine) -> Int? {
        if let id = line.paymentId, let index = paymentById.position(of: id, idAt: { payments[$0].paymentId }) {
            return index
        }
        if let reference = line.processorReference,
           let index = paymentByReference.position(of: reference, idAt: { payments[$0].processorReference }) {
            return index
        }
        return nil
    }

    private mutating func matchPayment(_ line: SettlementLine, _ item: inout ReconciliationItem) {
        guard let index = findPayment(line) else {
            item.category = .missingInLedger
            item.reason = "no_recorded_payment"
            return
        }
        let payment = payments[index]
        item.paymentId = payment.paymentId
        item.expectedMinor = payment.amountMinor
        if paymentSeen[index] {
            // §4.4: one ledger item matched twice is a duplicate, not a second match.
            item.category = .duplicate
            item.reason = "payment_already_matched"
            return
        }
        paymentSeen[index] = true
        if payment.status == .booked, let bookedBy = payment.bookedByLineKey, bookedBy != line.naturalKey {
            // Settled by another line already (an earlier report): a second settlement, not a match.
            item.category = .duplicate
            item.reason = "payment_already_settled"
            return
        }
        if payment.status == .rejected {
            item.category = .missingInLedger
            item.reason = "payment_rejected"
            return
        }
        if payment.currencyCode != line.currencyCode {
            item.category = .currencyMismatch
            item.expectedCurrencyCode = payment.currencyCode
            return
        }
        if isOutsideTolerance(actual: line.grossMinor, expected: payment.amountMinor, &item) {
            item.category = .amountMismatch
            return
        }
        item.category = .matched
    }

    private mutating func matchRefund(_ line: SettlementLine, _ item: inout ReconciliationItem) {
        item.category = .refund
        if line.grossMinor > 0 {
            // Adyen RefundedReversed: the refund came back; money in, nothing to book as a refund.
            item.reason = "refund_reversed"
            return
        }
        guard let index = findRefund(line) else {
            item.category = .missingInLedger
            item.reason = "no_recorded_refund"
            return
        }
        let refund = refunds[index]
        item.refundId = refund.refundId
        item.paymentId = refund.paymentId
        item.expectedMinor = refund.amountMinor
        refundSeen[index] = true
        if refund.currencyCode != line.currencyCode {
            item.category = .currencyMismatch
            item.expectedCurrencyCode = refund.currencyCode
            return
        }
        // grossMinor ≤ 0 here and never Int64.min: parsers bound amounts to ±Int64.max.
        let settled = -line.grossMinor
        item.actualMinor = settled
        if isOutsideTolerance(actual: settled, expected: refund.amountMinor, &item) {
            item.category = .amountMismatch
            return
        }
    }

    private func isOutsideTolerance(actual: Int64, expected: Int64,
                                    _ item: inout ReconciliationItem) -> Bool {
        let (difference, overflow) = actual.subtractingReportingOverflow(expected)
        if overflow { return true }
        item.differenceMinor = difference
        return difference.magnitude > configuration.amountToleranceMinor.magnitude
    }

    // Refund id, then processor reference, then the only unmatched refund of that payment.
    private func findRefund(_ line: SettlementLine) -> Int? {
        for id in [line.refundId, line.paymentId].compactMap({ $0 }) {
            if let index = refundById.position(of: id, idAt: { refunds[$0].refundId }), !refundSeen[index] {
                return index
            }
        }
        if let reference = line.processorReference,
           let index = refundByReference.position(of: reference, idAt: { refunds[$0].processorReference }),
           !refundSeen[index] {
            return index
        }
        if let paymentId = line.paymentId, let candidates = refundsByPayment[paymentId] {
            let open = candidates.filter { !refundSeen[$0] }
            let sameAmount = open.filter { refunds[$0].amountMinor == line.grossMinor.magnitude }
            if let index = sameAmount.first { return index }
            if open.count == 1 { return open[0] }
        }
        return nil
    }

    private mutating func accumulateBatch(_ line: SettlementLine) {
        // Lines of a batch usually come together: sum into the current batch and store it once it
        // changes, rather than hashing the batch key for every line.
        if current?.key.batchId != line.batchId || current?.key.currencyCode != line.netCurrencyCode {
            flushCurrentBatch()
            let key = BatchKey(batchId: line.batchId, currencyCode: line.netCurrencyCode)
            current = (key, batchTotals[key, default: BatchTotal()])
        }
        if line.type == .payout {
            current?.total.payout &-= line.netMinor
            current?.total.payoutLines += 1
        } else {
            current?.total.lines &+= line.netMinor
        }
    }

    private mutating func flushCurrentBatch() {
        if let current { batchTotals[current.key] = current.total }
        current = nil
    }

    // `amount` is signed in the processor-balance view: positive = credit, negative = debit.
    private static func effect(_ kind: FinanceEffectKind, _ line: SettlementLine, amount: Int64,
                               type: String?, paymentId: String?, refundId: String?,
                               currencyCode: String?) -> FinanceEffect? {
        guard amount != 0 else { return nil }
        let indicator: String
        switch kind {
        case .bookPayment: indicator = "credit"
        case .bookRefund: indicator = "debit"
        default: indicator = amount > 0 ? "credit" : "debit"
        }
        let reference = line.processorReference ?? line.paymentId ?? ""
        return FinanceEffect(
            key: "recon|\(kind.rawValue)|\(line.effectIdentity)", kind: kind, lineNumber: line.lineNumber,
            batchId: line.batchId, paymentId: paymentId, refundId: refundId,
            amountMinor: Int64(clamping: amount.magnitude),
            currencyCode: currencyCode ?? (kind == .fee || kind == .adjustment || kind == .payout
                                           ? line.netCurrencyCode : line.currencyCode),
            creditDebitIndicator: indicator, transactionType: type, postedDate: line.settlementDate,
            originalDescription: reference.isEmpty ? line.journalType : "\(line.journalType) \(reference)")
    }

    /// Finishes the run: recorded items absent from the report become `missing_in_settlement` when
    /// older than the lag at `now`, else `awaiting_settlement`.
    public func report(now: Date) -> ReconciliationReport {
        report(now: now, listsAbsentItems: true)
    }

    /// Finishes the run; with `listsAbsentItems` false the report counts the recorded items absent
    /// from the file but does not list them (`absentItems(now:)` hands them out one at a time).
    public func report(now: Date, listsAbsentItems: Bool) -> ReconciliationReport {
        var batchTotals = self.batchTotals
        if let current { batchTotals[current.key] = current.total }
        let absent = absentItems(now: now)
        var counts: [String: Int] = [:]
        for category in ReconciliationCategory.allCases { counts[category.rawValue] = lineCounts[category] ?? 0 }
        for record in absent.order { counts[absent.category(of: record).rawValue, default: 0] += 1 }
        let batches = batchTotals.map { key, total in
            let difference = total.payout &- total.lines
            return BatchBalance(batchId: key.batchId, currencyCode: key.currencyCode,
                                linesNetMinor: total.lines, payoutMinor: total.payout,
                                differenceMinor: difference, payoutLines: total.payoutLines,
                                balanced: total.payoutLines > 0 && difference == 0)
        }.sorted { ($0.batchId, $0.currencyCode) < ($1.batchId, $1.currencyCode) }
        return ReconciliationReport(lineCount: lineCount, counts: counts,
                                    items: listsAbsentItems ? lineItems + Array(absent) : lineItems,
                                    batches: batches, effects: effects)
    }

    /// The recorded payments and refunds (authorized or pending) absent from the file, by date then
    /// id: `missing_in_settlement` past the lag at `now`, else `awaiting_settlement`. Each item is
    /// built when the sequence reaches it, so a caller storing them in chunks never holds them all.
    public func absentItems(now: Date) -> AbsentItems {
        var order: [AbsentItems.Record] = []
        for (index, payment) in payments.enumerated()
        where !paymentSeen[index] && (payment.status == .authorized || payment.status == .pending) {
            order.append(.payment(Int32(index)))
        }
        for (index, refund) in refunds.enumerated()
        where !refundSeen[index] && (refund.status == .authorized || refund.status == .pending) {
            order.append(.refund(Int32(index)))
        }
        var items = AbsentItems(payments: payments, refunds: refunds, order: order, now: now,
                                lagSeconds: configuration.settlementLagSeconds)
        items.sortByDateAndId()
        return items
    }

    /// One-shot convenience: match `lines` and finish at `now`.
    public static func reconcile(lines: [SettlementLine], payments: [RecordedPayment],
                                 refunds: [RecordedRefund] = [],
                                 configuration: ReconciliationConfiguration = ReconciliationConfiguration(),
                                 now: Date) -> ReconciliationReport {
        var reconciler = Reconciler(payments: payments, refunds: refunds, configuration: configuration)
        for line in lines { reconciler.add(line) }
        return reconciler.report(now: now)
    }
}

/// Recorded items absent from a report, in report order; see `Reconciler.absentItems(now:)`.
public struct AbsentItems: Sequence {
    enum Record { case payment(Int32), refund(Int32) }

    let payments: [RecordedPayment]
    let refunds: [RecordedRefund]
    private(set) var order: [Record]
    let now: Date
    let lagSeconds: Int64

    /// How many there are.
    public var count: Int { order.count }

    mutating func sortByDateAndId() {
        let keyed = self
        order.sort { keyed.sortKey($0) < keyed.sortKey($1) }
    }

    func sortKey(_ record: Record) -> (Date, String) {
        switch record {
        case .payment(let i): (payments[Int(i)].createdAt, payments[Int(i)].paymentId)
        case .refund(let i): (refunds[Int(i)].createdAt, refunds[Int(i)].refundId)
        }
    }

    func category(of record: Record) -> ReconciliationCategory {
        now.timeIntervalSince(sortKey(record).0) > Double(lagSeconds) ? .missingInSettlement : .awaitingSettlement
    }

    func item(_ record: Record) -> ReconciliationItem {
        switch record {
        case .payment(let i):
            let payment = payments[Int(i)]
            return ReconciliationItem(category: category(of: record), paymentId: payment.paymentId,
                                      processorReference: payment.processorReference,
                                      currencyCode: payment.currencyCode, expectedMinor: payment.amountMinor)
        case .refund(let i):
            let refund = refunds[Int(i)]
            return ReconciliationItem(category: category(of: record), paymentId: refund.paymentId,
                                      refundId: refund.refundId, processorReference: refund.processorReference,
                                      currencyCode: refund.currencyCode, expectedMinor: refund.amountMinor)
        }
    }

    public struct Iterator: IteratorProtocol {
        let items: AbsentItems
        var position = 0
        public mutating func next() -> ReconciliationItem? {
            guard position < items.order.count else { return nil }
            defer { position += 1 }
            return items.item(items.order[position])
        }
    }

    public func makeIterator() -> Iterator { Iterator(items: self) }
}
