import Foundation
import HTTPServer
import Money
import Postgres
import Reconciliation
import Time

/// A settlement report as the API and `tender reconcile` show it (openapi.yaml). Amounts are decimal
/// strings with exactly the currency's digits; every category is present in `counts`.
struct SettlementReportView: Encodable, Sendable {
    /// A batch's balance with decimal amounts.
    struct Batch: Encodable, Sendable {
        let batchId: String
        let currency: String
        let linesNetAmount: String
        let payoutAmount: String
        let differenceAmount: String
        let payoutLines: Int
        let balanced: Bool
    }

    /// How much a superseded batch changed.
    struct Revision: Encodable, Sendable {
        let batchId: String
        let supersedes: String
        let revision: Int
        let added: Int
        let removed: Int
        let changed: Int
    }

    let id: String
    let object = "settlement_report"
    let format: String
    let fileSha256: String
    let lineCount: Int
    let revision: Int
    let supersedes: String?
    let counts: [String: Int]
    let batches: [Batch]
    let revisions: [Revision]
    /// True while finance-store effects of this report are still to be applied (after an interrupted
    /// import; the merchant's next import, a replay of this one, or a restart finishes them).
    let effectsPending: Bool
    /// What the import changed in the finance store besides booking its lines: corrected lines whose
    /// earlier booking was reversed and booked again, lines a superseded batch no longer has whose
    /// booking was reversed, and earlier payouts it confirmed as arrived.
    let financeChanges: FinanceChanges
    let createdAt: String

    /// Counts of `financeChanges`.
    struct FinanceChanges: Encodable, Sendable {
        let rebooked: Int
        let reversed: Int
        let payoutsConfirmed: Int
    }

    init(row: PostgresRow) throws {
        id = try row.decode("report_id")
        format = try row.decode("format")
        fileSha256 = try row.decode("file_sha256")
        lineCount = try row.decode("line_count")
        revision = try row.decode("revision")
        supersedes = try row.decodeIfPresent("supersedes")
        let decoder = JSONDecoder()
        let summaryText: String = try row.decode("summary")
        let summary = try decoder.decode(StoredSummary.self, from: Data(summaryText.utf8))
        var counts: [String: Int] = [:]
        for category in ReconciliationCategory.allCases { counts[category.rawValue] = summary.counts[category.rawValue] ?? 0 }
        self.counts = counts
        batches = summary.batches.map { balance in
            Batch(batchId: balance.batchId, currency: balance.currencyCode,
                  linesNetAmount: decimal(balance.linesNetMinor, balance.currencyCode),
                  payoutAmount: decimal(balance.payoutMinor, balance.currencyCode),
                  differenceAmount: decimal(balance.differenceMinor, balance.currencyCode),
                  payoutLines: balance.payoutLines, balanced: balance.balanced)
        }
        if let diffText: String = try row.decodeIfPresent("revision_diff") {
            let diffs = try decoder.decode([BatchRevisionDiff].self, from: Data(diffText.utf8))
            revisions = diffs.map {
                Revision(batchId: $0.batchId, supersedes: $0.supersedes, revision: $0.revision,
                         added: $0.diff.added.count, removed: $0.diff.removed.count, changed: $0.diff.changed.count)
            }
        } else {
            revisions = []
        }
        effectsPending = try row.decode("effects_pending")
        financeChanges = FinanceChanges(rebooked: try row.decode("effects_rebooked"),
                                        reversed: try row.decode("effects_reversed"),
                                        payoutsConfirmed: try row.decode("payouts_confirmed"))
        let created: Date = try row.decode("created_at")
        createdAt = Self.timestamp(created)
    }

    /// RFC 3339 UTC with milliseconds: the same report always prints the same text.
    static func timestamp(_ date: Date) -> String {
        RFC3339.string(from: date, fraction: .milliseconds)
    }

    /// Canonical JSON (sorted keys): what `tender reconcile` prints.
    func jsonBytes() throws -> [UInt8] {
        Array(try JSONCoding.encoder.encode(self))
    }
}

/// One finding of a report, amounts as decimal strings.
struct SettlementItemView: Encodable, Sendable {
    let ordinal: Int
    let category: String
    let lineNumber: Int?
    let batchId: String?
    let journalType: String?
    let paymentId: String?
    let refundId: String?
    let processorReference: String?
    let currency: String
    let expectedCurrency: String?
    let expectedAmount: String?
    let actualAmount: String?
    let differenceAmount: String?
    let reason: String?

    init(ordinal: Int, item: ReconciliationItem) {
        self.ordinal = ordinal
        category = item.category.rawValue
        lineNumber = item.lineNumber
        batchId = item.batchId
        journalType = item.journalType
        paymentId = item.paymentId
        refundId = item.refundId
        processorReference = item.processorReference
        currency = item.currencyCode
        expectedCurrency = item.expectedCurrencyCode
        // The expected amount is in the recorded currency when the two differ.
        expectedAmount = item.expectedMinor.map { decimal($0, item.expectedCurrencyCode ?? item.currencyCode) }
        actualAmount = item.actualMinor.map { decimal($0, item.currencyCode) }
        differenceAmount = item.differenceMinor.map { decimal($0, item.currencyCode) }
        reason = item.reason
    }
}

/// Minor units as a decimal string of `currencyCode`; a code Money does not know (only possible for
/// recorded rows) falls back to the integer minor units.
private func decimal(_ minor: Int64, _ currencyCode: String) -> String {
    guard let currency = try? Currency(code: currencyCode) else { return String(minor) }
    return currency.formatAmount(minor)
}
