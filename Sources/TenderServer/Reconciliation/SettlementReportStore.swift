import Crypto
import Foundation
import Money
import Postgres
import Reconciliation

/// Why an import was refused before anything was stored.
enum SettlementImportError: Error {
    /// The file is malformed; nothing was applied.
    case invalidFile(ReconciliationError)
    /// A batch already imported with other content, and the import did not ask to supersede it.
    case batchConflict(batchId: String, reportId: String)
}

/// Settlement reports in PostgreSQL: streaming import (one transaction), reads, item pages.
struct SettlementReportStore: Sendable {
    /// Lines matched between two writes of items and effects: bounds what an import holds in memory.
    static let flushLines = 5_000

    let pool: PostgresPool
    let sink: any SettlementEffectSink
    var configuration = ReconciliationConfiguration()

    /// Imports a file whose SHA-256 is already known. The same bytes (same merchant and format)
    /// return the stored report with `created == false` and apply nothing; otherwise `source` is
    /// streamed through the reader and the reconciler, and report, items, batches and effects are
    /// stored in one transaction.
    func importReport<Source: ByteChunkSource>(
        merchantId: String, format: SettlementReportFormat, fileSHA256: String, source: Source,
        supersede: Bool, now: Date
    ) throws -> (report: SettlementReportView, created: Bool) {
        if let existing = try find(merchantId: merchantId, format: format, fileSHA256: fileSHA256) {
            return (existing, false)
        }
        let ledger = RecordedLedgerSource(pool: pool)
        var reconciler = Reconciler(payments: try ledger.payments(merchantId: merchantId),
                                    refunds: try ledger.refunds(merchantId: merchantId),
                                    configuration: configuration)
        let reportId = Self.newReportId()
        do {
            try pool.transaction { conn in
                _ = try conn.execute("""
                    INSERT INTO settlement_reports (report_id, merchant_id, format, file_sha256, line_count, summary)
                    VALUES ($1, $2, $3, $4, 0, '{}')
                    """, [reportId, merchantId, format.rawValue, fileSHA256])
                var writer = ItemWriter(reportId: reportId, merchantId: merchantId, sink: sink, now: now)
                var reader = SettlementLineReader(format: format, source: source)
                var batchDigests: [String: SHA256Hasher] = [:]
                var lines: [SettlementLine] = []
                lines.reserveCapacity(Self.flushLines)
                do {
                    while let line = try reader.next() {
                        reconciler.add(line)
                        let hasher = batchDigests[line.batchId] ?? SHA256Hasher()
                        batchDigests[line.batchId] = hasher
                        hasher.update(Self.canonicalContent(line))
                        lines.append(line)
                        if lines.count >= Self.flushLines {
                            let drained = reconciler.drain()
                            try writer.write(items: drained.items, lines: lines, effects: drained.effects, on: conn)
                            lines.removeAll(keepingCapacity: true)
                        }
                    }
                } catch let error as ReconciliationError {
                    throw SettlementImportError.invalidFile(error)
                }
                let drained = reconciler.drain()
                try writer.write(items: drained.items, lines: lines, effects: drained.effects, on: conn)
                let finished = reconciler.report(now: now)
                // What is left after draining is the recorded items absent from the file.
                for start in stride(from: 0, to: finished.items.count, by: Self.flushLines) {
                    let end = min(start + Self.flushLines, finished.items.count)
                    try writer.write(items: Array(finished.items[start..<end]), lines: [], effects: [], on: conn)
                }
                try writer.write(items: [], lines: [], effects: finished.effects, on: conn)

                var revision = 1
                var supersedes: String?
                var diffs: [BatchRevisionDiff] = []
                for (batchId, hasher) in batchDigests.sorted(by: { $0.key < $1.key }) {
                    let digest = hexEncoded(hasher.finalize())
                    let previous = try conn.query("""
                        SELECT report_id, content_sha256, revision FROM settlement_batches
                        WHERE merchant_id = $1 AND format = $2 AND batch_id = $3 FOR UPDATE
                        """, [merchantId, format.rawValue, batchId]).first
                    guard let previous else {
                        _ = try conn.execute("""
                            INSERT INTO settlement_batches (merchant_id, format, batch_id, report_id, content_sha256, revision)
                            VALUES ($1, $2, $3, $4, $5, 1)
                            """, [merchantId, format.rawValue, batchId, reportId, digest])
                        continue
                    }
                    let previousDigest: String = try previous.decode("content_sha256")
                    if previousDigest == digest { continue }
                    let previousReport: String = try previous.decode("report_id")
                    guard supersede else {
                        throw SettlementImportError.batchConflict(batchId: batchId, reportId: previousReport)
                    }
                    let batchRevision: Int = try previous.decode("revision") + 1
                    let diff = RevisionDiff(old: try storedLines(reportId: previousReport, batchId: batchId, on: conn),
                                            new: try storedLines(reportId: reportId, batchId: batchId, on: conn))
                    diffs.append(BatchRevisionDiff(batchId: batchId, supersedes: previousReport,
                                                   revision: batchRevision, diff: diff))
                    if batchRevision > revision {
                        revision = batchRevision
                        supersedes = previousReport
                    }
                    _ = try conn.execute("""
                        UPDATE settlement_batches SET report_id = $4, content_sha256 = $5, revision = $6
                        WHERE merchant_id = $1 AND format = $2 AND batch_id = $3
                        """, [merchantId, format.rawValue, batchId, reportId, digest, batchRevision])
                }
                let summary = StoredSummary(counts: finished.counts, batches: finished.batches)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                let summaryText = String(decoding: try encoder.encode(summary), as: UTF8.self)
                let diffText: String? = diffs.isEmpty
                    ? nil : String(decoding: try encoder.encode(diffs), as: UTF8.self)
                _ = try conn.execute("""
                    UPDATE settlement_reports
                    SET line_count = $2, revision = $3, supersedes = $4, summary = $5::jsonb, revision_diff = $6::jsonb
                    WHERE report_id = $1
                    """, [reportId, finished.lineCount, revision, supersedes, summaryText, diffText])
            }
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint?.contains("file_sha256") == true {
            // The same bytes were imported concurrently and committed first: that report is the answer.
            if let existing = try find(merchantId: merchantId, format: format, fileSHA256: fileSHA256) {
                return (existing, false)
            }
            throw error
        }
        guard let stored = try report(merchantId: merchantId, reportId: reportId) else {
            throw TenderError("settlement_report_lost", "report \(reportId) not found after commit")
        }
        return (stored, true)
    }

    /// The report with that id, if it belongs to `merchantId`.
    func report(merchantId: String, reportId: String) throws -> SettlementReportView? {
        guard let row = try pool.query(SQL(idempotent: """
            SELECT report_id, format, file_sha256, line_count, revision, supersedes, summary::text AS summary,
                   revision_diff::text AS revision_diff, created_at
            FROM settlement_reports WHERE merchant_id = $1 AND report_id = $2
            """), [merchantId, reportId]).first else { return nil }
        return try SettlementReportView(row: row)
    }

    /// The stored report for those bytes, if any.
    func find(merchantId: String, format: SettlementReportFormat, fileSHA256: String) throws -> SettlementReportView? {
        guard let row = try pool.query(SQL(idempotent: """
            SELECT report_id, format, file_sha256, line_count, revision, supersedes, summary::text AS summary,
                   revision_diff::text AS revision_diff, created_at
            FROM settlement_reports WHERE merchant_id = $1 AND format = $2 AND file_sha256 = $3
            """), [merchantId, format.rawValue, fileSHA256]).first else { return nil }
        return try SettlementReportView(row: row)
    }

    /// One page of a report's items in report order, optionally of one category.
    func items(reportId: String, category: ReconciliationCategory?, limit: Int, offset: Int)
        throws -> [SettlementItemView] {
        let rows = try pool.query(SQL(idempotent: """
            SELECT ordinal, item::text AS item FROM settlement_report_items
            WHERE report_id = $1 AND ($2::text IS NULL OR category = $2)
            ORDER BY ordinal LIMIT $3 OFFSET $4
            """), [reportId, category?.rawValue, limit, offset]).rows
        return try rows.map { row in
            let text: String = try row.decode("item")
            let item = try JSONDecoder().decode(ReconciliationItem.self, from: Data(text.utf8))
            return SettlementItemView(ordinal: try row.decode("ordinal"), item: item)
        }
    }

    private func storedLines(reportId: String, batchId: String, on conn: PostgresConnection) throws -> [SettlementLine] {
        let rows = try conn.query("""
            SELECT line::text AS line FROM settlement_report_items
            WHERE report_id = $1 AND batch_id = $2 AND line IS NOT NULL ORDER BY ordinal
            """, [reportId, batchId]).rows
        let decoder = JSONDecoder()
        return try rows.map { row in
            let text: String = try row.decode("line")
            return try decoder.decode(SettlementLine.self, from: Data(text.utf8))
        }
    }

    /// A line's content without its position, the unit a batch digest is made of.
    static func canonicalContent(_ line: SettlementLine) -> [UInt8] {
        let parts: [String] = [
            line.naturalKey, line.settlementDate.description, line.type.rawValue, line.journalType,
            line.paymentId ?? "", line.refundId ?? "", line.processorReference ?? "",
            line.paymentMethodVariant ?? "", line.currencyCode, String(line.grossMinor),
            line.netCurrencyCode, String(line.feeMinor), String(line.netMinor),
        ]
        // Unit and record separators cannot occur unescaped in a parsed field's meaning here.
        var bytes = Array(parts.joined(separator: "\u{1F}").utf8)
        bytes.append(0x1E)
        return bytes
    }

    /// `sr_` + 24 lowercase alphanumerics from the CSPRNG (rejection sampling keeps it uniform).
    static func newReportId() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var out: [UInt8] = Array("sr_".utf8)
        while out.count < 27 {
            for byte in SecureRandom.bytes(32) where byte < 252 && out.count < 27 {
                out.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Summary stored with a report: counts and batch balances (CONTRACT §3).
struct StoredSummary: Codable {
    let counts: [String: Int]
    let batches: [BatchBalance]
}

/// How one superseded batch changed (finance-store.md §4.5 point 2).
struct BatchRevisionDiff: Codable {
    let batchId: String
    let supersedes: String
    let revision: Int
    let diff: RevisionDiff
}

/// Writes drained items (with their lines) and effects in batches on the import's connection.
private struct ItemWriter {
    let reportId: String
    let merchantId: String
    let sink: any SettlementEffectSink
    let now: Date
    var ordinal = 0
    /// `lines[i]` is the line of `items[i]` while lines last: every line yields exactly one item.
    mutating func write(items: [ReconciliationItem], lines: [SettlementLine], effects: [FinanceEffect],
                        on conn: PostgresConnection) throws {
        if !items.isEmpty {
            var json = RowJSON(capacity: items.count * 640)
            json.beginArray()
            for (index, item) in items.enumerated() {
                ordinal += 1
                json.beginObject()
                json.field("o", ordinal)
                json.field("c", item.category.rawValue)
                json.field("n", item.lineNumber)
                json.field("b", item.batchId)
                json.item(item)
                if index < lines.count { json.line(lines[index]) }
                json.endObject()
            }
            json.endArray()
            _ = try conn.execute("""
                INSERT INTO settlement_report_items (report_id, ordinal, category, line_number, batch_id, item, line)
                SELECT $1, r.o, r.c, r.n, r.b, r.i, r.l
                FROM jsonb_to_recordset($2::jsonb) AS r(o integer, c text, n integer, b text, i jsonb, l jsonb)
                """, [reportId, json.text])
        }
        if !effects.isEmpty {
            var json = RowJSON(capacity: effects.count * 160)
            json.beginArray()
            for effect in effects {
                json.beginObject()
                json.field("k", effect.key)
                json.field("kind", effect.kind.rawValue)
                json.field("s", effect.kind == .bookRefund ? effect.refundId : effect.paymentId)
                json.field("a", effect.amountMinor)
                json.field("c", effect.currencyCode)
                json.field("d", effect.creditDebitIndicator)
                json.endObject()
            }
            json.endArray()
            let inserted = try conn.query("""
                INSERT INTO settlement_effects (merchant_id, effect_key, report_id, kind, subject_id, amount_minor,
                                                currency_code, credit_debit_indicator)
                SELECT DISTINCT ON (r.k) $1, r.k, $2, r.kind, r.s, r.a, r.c, r.d
                FROM jsonb_to_recordset($3::jsonb) AS r(k text, kind text, s text, a bigint, c text, d text)
                ON CONFLICT (merchant_id, effect_key) DO NOTHING
                RETURNING effect_key
                """, [merchantId, reportId, json.text])
            var fresh = Set<String>()
            for row in inserted.rows { fresh.insert(try row.decode("effect_key")) }
            // Apply in line order, each new key once.
            for effect in effects where fresh.remove(effect.key) != nil {
                try sink.apply(effect, merchantId: merchantId, on: conn, now: now)
            }
        }
    }
}
