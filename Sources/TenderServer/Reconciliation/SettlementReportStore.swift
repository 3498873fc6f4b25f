import Crypto
import Foundation
import HTTPServer
import Money
import Payments
import Postgres
import Reconciliation

/// Why an import was refused before anything was stored.
enum SettlementImportError: Error {
    /// The file is malformed; nothing was applied.
    case invalidFile(ReconciliationError)
    /// A batch already imported with other content, and the import did not ask to supersede it.
    case batchConflict(batchId: String, reportId: String)
}

/// What an import did, with the time each phase took (`tender reconcile` logs them, `make bench` reads them).
struct SettlementImport: Sendable {
    let report: SettlementReportView
    /// False when the same bytes had been imported before (nothing was re-applied).
    let created: Bool
    /// Reading, matching and storing the report (one transaction).
    let importSeconds: Double
    /// The part of `importSeconds` spent reading the recorded payments and refunds.
    let ledgerSeconds: Double
    /// Applying the finance-store effects afterwards (one transaction per item chunk).
    let effectsSeconds: Double
    /// Effects applied by this call (new keys only), including any an earlier crash left pending.
    let effectsApplied: Int
}

/// Settlement reports in PostgreSQL.
///
/// An import has two phases. Phase 1 streams the file through the reader and the reconciler and
/// stores the report, its batches and its items (in chunks, `settlement_item_chunks`) in ONE
/// transaction: a malformed file or a batch conflict leaves nothing behind. Phase 2 applies the
/// finance-store effects, one item chunk per transaction, each clearing the chunk's `effects_pending`
/// flag in the transaction that applies it: exactly once, resumable after a crash (the next import of
/// the merchant, `tender serve`'s settlement-effects service and a replayed import finish what is
/// pending), and never holding the finance balances' row locks (which live payments need) for longer
/// than one chunk. Its last transaction (`finish`, flag `finish_pending`) reverses what the batches the
/// report supersedes booked for lines it no longer has, confirms earlier payouts and writes the
/// `settlement_report.completed` event (docs/events.md).
///
/// Superseding replaces: effect keys come from the line's identity, not its amounts, so a corrected
/// line of a new revision is a recorded key with other content; its earlier postings are reversed and
/// it is booked again at the next version, in the chunk's transaction (migrations/0011).
///
/// Imports of one merchant are serialised by a transaction-level advisory lock that both phases take,
/// and phase 1 only starts once no effect of an earlier report is pending, so the ledger it matches
/// against already shows every earlier booking.
struct SettlementReportStore: Sendable {
    /// Lines matched between two drains of the reconciler: bounds what an import holds in memory.
    static let flushLines = 5_000
    /// Items per stored chunk (migrations/0009).
    static let chunkItems = 1_000
    /// Times phase 1 waits for effects another import left pending before giving up.
    static let pendingRetries = 5

    let pool: PostgresPool
    let sink: any SettlementEffectSink
    var configuration = ReconciliationConfiguration()
    /// Told the report id and phase 1's duration in seconds once the report is committed, before the
    /// effects (a long file's effects take minutes; `tender reconcile` logs the moment).
    var onReportStored: (@Sendable (String, Double) -> Void)?

    /// Reports with more lines than this leave their effects to `SettlementEffectsService` when imported
    /// over HTTP: the import answers once the report is stored (`effectsPending: true`); a smaller one
    /// answers with its effects applied.
    static let effectsInlineLinesMax = 10_000

    /// Imports a file whose SHA-256 is already known. The same bytes (same merchant and format)
    /// return the stored report with `created == false` and apply nothing new; otherwise `source` is
    /// streamed through the reader and the reconciler and stored (phase 1), then the effects are
    /// applied (phase 2) unless the report has more than `effectsInlineLinesMax` lines: then it returns
    /// at once, with `effectsPending` set, and the caller has them applied (`applyPendingEffects`).
    func importReport<Source: ByteChunkSource & Sendable>(
        merchantId: String, format: SettlementReportFormat, fileSHA256: String, source: Source,
        supersede: Bool, now: Date, effectsInlineLinesMax: Int = .max
    ) throws -> SettlementImport {
        let started = ContinuousClock.now
        var pendingBefore = 0
        var stored: String?
        var ledgerSeconds = 0.0
        var attempts = 0
        while stored == nil {
            pendingBefore += try applyPendingEffects(merchantId: merchantId, now: now)
            switch try storeReport(merchantId: merchantId, format: format, fileSHA256: fileSHA256,
                                   source: source, supersede: supersede, now: now) {
            case .stored(let reportId, let seconds):
                stored = reportId
                ledgerSeconds = seconds
            case .existing(let report):
                let seconds = Self.seconds(since: started)
                return SettlementImport(report: report, created: false, importSeconds: seconds, ledgerSeconds: 0,
                                        effectsSeconds: 0, effectsApplied: pendingBefore)
            case .effectsPending:
                // Another import committed its report between our sweep and our lock: apply, then retry.
                attempts += 1
                guard attempts < Self.pendingRetries else {
                    throw TenderError("settlement_import_busy", "another import of this merchant keeps effects pending")
                }
            }
        }
        let imported = ContinuousClock.now
        if let stored, let onReportStored { onReportStored(stored, Self.seconds(from: started, to: imported)) }
        if let stored, effectsInlineLinesMax < .max, let report = try report(merchantId: merchantId, reportId: stored),
           report.lineCount > effectsInlineLinesMax {
            return SettlementImport(report: report, created: true, importSeconds: Self.seconds(from: started, to: imported),
                                    ledgerSeconds: ledgerSeconds, effectsSeconds: 0, effectsApplied: pendingBefore)
        }
        let applied = try applyPendingEffects(merchantId: merchantId, now: now)
        guard let reportId = stored, let report = try report(merchantId: merchantId, reportId: reportId) else {
            throw TenderError("settlement_report_lost", "report not found after commit")
        }
        return SettlementImport(report: report, created: true,
                                importSeconds: Self.seconds(from: started, to: imported), ledgerSeconds: ledgerSeconds,
                                effectsSeconds: Self.seconds(since: imported), effectsApplied: pendingBefore + applied)
    }

    private enum StoreOutcome {
        case stored(String, ledgerSeconds: Double)
        case existing(SettlementReportView)
        case effectsPending
    }

    /// Phase 1: one transaction under the merchant's import lock.
    private func storeReport<Source: ByteChunkSource & Sendable>(
        merchantId: String, format: SettlementReportFormat, fileSHA256: String, source: Source,
        supersede: Bool, now: Date
    ) throws -> StoreOutcome {
        let reportId = Self.newReportId()
        do {
            return try pool.transaction { conn -> StoreOutcome in
                try Self.lockImports(merchantId: merchantId, on: conn)
                if try conn.query("""
                    SELECT 1 FROM settlement_reports WHERE merchant_id = $1 AND format = $2 AND file_sha256 = $3
                    """, [merchantId, format.rawValue, fileSHA256]).first != nil {
                    return .existing(try find(merchantId: merchantId, format: format, fileSHA256: fileSHA256, on: conn))
                }
                if try Self.hasPendingEffects(merchantId: merchantId, on: conn) { return .effectsPending }
                // The parser starts first, so that reading the file overlaps reading the ledger.
                let pipeline = ParsedLinePipeline(format: format, source: source, batchLines: Self.flushLines)
                pipeline.start()
                defer { pipeline.stop() }
                let ledger = RecordedLedgerSource()
                let ledgerStarted = ContinuousClock.now
                var reconciler = Reconciler(payments: try ledger.payments(merchantId: merchantId, on: conn),
                                            refunds: try ledger.refunds(merchantId: merchantId, on: conn),
                                            configuration: configuration, collectsEffects: false)
                let ledgerSeconds = Self.seconds(since: ledgerStarted)
                _ = try conn.execute("""
                    INSERT INTO settlement_reports (report_id, merchant_id, format, file_sha256, line_count, summary,
                                                    finish_pending)
                    VALUES ($1, $2, $3, $4, 0, '{}', true)
                    """, [reportId, merchantId, format.rawValue, fileSHA256])
                var writer = ItemChunkWriter(reportId: reportId)
                do {
                    while let batch = try pipeline.next() {
                        for line in batch.lines { reconciler.add(line) }
                        try writer.add(items: reconciler.drain().items, lines: batch, on: conn)
                    }
                } catch let error as ReconciliationError {
                    throw SettlementImportError.invalidFile(error)
                }
                let batchDigests = pipeline.batchDigests()
                let finished = reconciler.report(now: now, listsAbsentItems: false)
                // Then the recorded items absent from the file, a chunk's worth at a time.
                var absent: [ReconciliationItem] = []
                absent.reserveCapacity(Self.chunkItems)
                for item in reconciler.absentItems(now: now) {
                    absent.append(item)
                    if absent.count == Self.chunkItems {
                        try writer.add(items: absent, lines: ParsedBatch(), on: conn)
                        absent.removeAll(keepingCapacity: true)
                    }
                }
                try writer.add(items: absent, lines: ParsedBatch(), on: conn)
                try writer.finish(on: conn)

                let (revision, supersedes, diffs, supersededBatches) = try recordBatches(
                    batchDigests, merchantId: merchantId, format: format, reportId: reportId, supersede: supersede,
                    on: conn)
                let summary = StoredSummary(counts: finished.counts, batches: finished.batches)
                let encoder = JSONCoding.encoder
                let summaryText = String(decoding: try encoder.encode(summary), as: UTF8.self)
                let diffText: String? = diffs.isEmpty
                    ? nil : String(decoding: try encoder.encode(diffs), as: UTF8.self)
                _ = try conn.execute("""
                    UPDATE settlement_reports
                    SET line_count = $2, revision = $3, supersedes = $4, summary = $5::jsonb, revision_diff = $6::jsonb,
                        superseded_batches = $7::text[]
                    WHERE report_id = $1
                    """, [reportId, finished.lineCount, revision, supersedes, summaryText, diffText,
                          PGArray.text(supersededBatches)])
                return .stored(reportId, ledgerSeconds: ledgerSeconds)
            }
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint?.contains("file_sha256") == true {
            // Defensive: the lock makes this unreachable for one database, but a report of those bytes
            // that committed first is the answer either way.
            return .existing(try pool.withConnection { conn in
                try find(merchantId: merchantId, format: format, fileSHA256: fileSHA256, on: conn)
            })
        }
    }

    /// Records each batch's digest; a batch seen before with other content is a conflict unless
    /// `supersede`, which makes this report its next revision with the differences recorded.
    private func recordBatches(_ batchDigests: [String: SHA256Hasher], merchantId: String,
                               format: SettlementReportFormat, reportId: String, supersede: Bool,
                               on conn: PostgresConnection)
        throws -> (revision: Int, supersedes: String?, diffs: [BatchRevisionDiff], supersededBatches: [String]) {
        var revision = 1
        var supersedes: String?
        var superseded: [(batchId: String, previousReport: String, revision: Int)] = []
        var digests: [String: String] = [:]
        for (batchId, hasher) in batchDigests.sorted(by: { $0.key < $1.key }) {
            let digest = hexEncoded(hasher.finalize())
            digests[batchId] = digest
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
            superseded.append((batchId, previousReport, try previous.decode("revision") + 1))
        }
        guard !superseded.isEmpty else { return (revision, supersedes, [], []) }
        // The lines of every superseded batch, old and new, read in one pass over each report's chunks.
        let wanted = Set(superseded.map(\.batchId))
        let newLines = try storedLines(reportId: reportId, batchIds: wanted, on: conn)
        var oldLinesByReport: [String: [String: [SettlementLine]]] = [:]
        for previousReport in Set(superseded.map(\.previousReport)) {
            oldLinesByReport[previousReport] = try storedLines(reportId: previousReport, batchIds: wanted, on: conn)
        }
        var diffs: [BatchRevisionDiff] = []
        for entry in superseded {
            let diff = RevisionDiff(old: oldLinesByReport[entry.previousReport]?[entry.batchId] ?? [],
                                    new: newLines[entry.batchId] ?? [])
            diffs.append(BatchRevisionDiff(batchId: entry.batchId, supersedes: entry.previousReport,
                                           revision: entry.revision, diff: diff))
            if entry.revision > revision {
                revision = entry.revision
                supersedes = entry.previousReport
            }
            _ = try conn.execute("""
                UPDATE settlement_batches SET report_id = $4, content_sha256 = $5, revision = $6
                WHERE merchant_id = $1 AND format = $2 AND batch_id = $3
                """, [merchantId, format.rawValue, entry.batchId, reportId, digests[entry.batchId], entry.revision])
        }
        return (revision, supersedes, diffs, superseded.map(\.batchId))
    }

    // MARK: Phase 2: effects

    /// Applies every effect of `merchantId` still pending, oldest report first, one item chunk per
    /// transaction; returns how many effects were new (a key already applied is skipped).
    /// `shouldStop` is asked between chunks (the effects service stopping); what is left stays pending.
    @discardableResult
    func applyPendingEffects(merchantId: String, now: Date, shouldStop: () -> Bool = { false }) throws -> Int {
        var applied = 0
        while !shouldStop(), let count = try applyNextChunk(merchantId: merchantId, now: now) { applied += count }
        return applied
    }

    /// Applies one pending chunk of the oldest report with work left, or once its chunks are done, its
    /// finishing step; nil when nothing is left.
    private func applyNextChunk(merchantId: String, now: Date) throws -> Int? {
        try pool.transaction { conn -> Int? in
            try Self.lockImports(merchantId: merchantId, on: conn)
            guard let report = try conn.query("""
                SELECT r.report_id, r.format, to_json(r.superseded_batches)::text FROM settlement_reports r
                 WHERE r.merchant_id = $1
                   AND (r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                                                    WHERE c.report_id = r.report_id AND c.effects_pending))
                 ORDER BY r.created_at, r.report_id
                 LIMIT 1
                """, [merchantId]).first else { return nil }
            let reportId: String = try report.decode(0)
            guard let row = try conn.query("""
                SELECT category, chunk, items FROM settlement_item_chunks
                 WHERE report_id = $1 AND effects_pending
                 ORDER BY first_ordinal
                 LIMIT 1
                   FOR UPDATE
                """, [reportId]).first else {
                let batches = try JSONDecoder().decode([String].self, from: Data(try report.decode(2, as: String.self).utf8))
                return try finish(reportId: reportId, format: try report.decode(1), supersededBatches: batches,
                                  merchantId: merchantId, on: conn, now: now)
            }
            let entries = try StoredItemChunk.decode(try row.decode(2))
            var effects: [FinanceEffect] = []
            for entry in entries {
                guard let line = entry.line else { continue }
                effects += Reconciler.effects(of: line, item: entry.item)
            }
            let (actions, counts) = try claim(effects, merchantId: merchantId, reportId: reportId,
                                              format: try report.decode(1), on: conn)
            if !actions.isEmpty { try sink.apply(actions, merchantId: merchantId, on: conn, now: now) }
            _ = try conn.execute("""
                UPDATE settlement_item_chunks SET effects_pending = false
                 WHERE report_id = $1 AND category = $2 AND chunk = $3
                """, [reportId, try row.decode(0, as: String.self), try row.decode(1, as: Int.self)])
            if counts.rebooked > 0 {
                _ = try conn.execute("UPDATE settlement_reports SET effects_rebooked = effects_rebooked + $2 WHERE report_id = $1",
                                     [reportId, counts.rebooked])
            }
            return counts.applied
        }
    }

    /// What one key of a chunk does.
    private enum Claim {
        /// Not booked before (or reversed since): book at this version.
        case book(version: Int)
        /// Booked with the same content (this or another revision carries the line): nothing to do.
        case same(version: Int, postingKeys: [String])
        /// Booked with other content by an earlier revision: reverse that booking, book this one.
        case rebook(version: Int, oldPostingKeys: [String])
    }

    /// Records the effects' keys (docs/finance-store.md §4.5 point 5) and returns the actions to apply, in line
    /// order: a key not recorded before is booked; one recorded with the same content only moves to this
    /// report (this revision still carries it); one recorded with other content (a corrected line of a
    /// superseding revision) has its postings reversed and is booked again at the next version. Status
    /// changes (booking a payment or refund) are final in the finance store and never rebooked.
    private func claim(_ effects: [FinanceEffect], merchantId: String, reportId: String, format: String,
                       on conn: PostgresConnection) throws -> (actions: [SettlementEffectAction], counts: (applied: Int, rebooked: Int)) {
        guard !effects.isEmpty else { return ([], (0, 0)) }
        var seen = Set<String>()
        let unique = effects.filter { seen.insert($0.key).inserted }
        // Every key not recorded before is recorded at version 0 by one statement (all of a new report's
        // keys); only the keys already recorded are read back, locked, and decided one by one.
        let fresh = unique.map { (effect: $0, version: 0, postingKeys: sink.postingKeys(of: $0, version: 0, merchantId: merchantId)) }
        var inserted = Set<String>()
        for row in try conn.query(Self.recordNewEffects, Self.effectRowParameters(fresh, merchantId: merchantId,
                                                                                   reportId: reportId, format: format)).rows {
            inserted.insert(try row.decode(0))
        }
        let stored = try storedEffects(unique.filter { !inserted.contains($0.key) }.map(\.key), merchantId: merchantId,
                                       on: conn)
        var actions: [SettlementEffectAction] = []
        var rows: [(effect: FinanceEffect, version: Int, postingKeys: [String])] = []
        var applied = 0, rebooked = 0
        for (index, effect) in unique.enumerated() {
            if inserted.contains(effect.key) {
                actions.append(.book(effect, version: 0))
                applied += 1
                continue
            }
            guard let old = stored[effect.key] else {
                throw TenderError("settlement_effect_lost", "effect \(effect.key) neither new nor recorded")
            }
            switch Self.decide(effect, against: old) {
            case .book(let version):
                actions.append(.book(effect, version: version))
                rows.append(version == 0 ? fresh[index]
                            : (effect, version, sink.postingKeys(of: effect, version: version, merchantId: merchantId)))
                applied += 1
            case let .same(version, postingKeys):
                rows.append((effect, version, postingKeys))
            case let .rebook(version, oldPostingKeys):
                actions.append(.reverse(postingKeys: oldPostingKeys, seed: "\(effect.key)|v\(version - 1)",
                                        postedDate: effect.postedDate))
                actions.append(.book(effect, version: version))
                rows.append((effect, version, sink.postingKeys(of: effect, version: version, merchantId: merchantId)))
                applied += 1
                rebooked += 1
            }
        }
        if !rows.isEmpty {
            _ = try conn.execute(Self.rerecordEffects, Self.effectRowParameters(rows, merchantId: merchantId,
                                                                                 reportId: reportId, format: format))
        }
        return (actions, (applied, rebooked))
    }

    /// A key's row as recorded before this chunk.
    private struct StoredEffect {
        let kind: String, amount: Int64, currency: String, indicator: String, subject: String?
        let version: Int, postingKeys: [String], reversed: Bool
    }

    /// The recorded rows of `keys`, locked until the chunk commits.
    private func storedEffects(_ keys: [String], merchantId: String,
                               on conn: PostgresConnection) throws -> [String: StoredEffect] {
        guard !keys.isEmpty else { return [:] }
        var stored: [String: StoredEffect] = [:]
        for row in try conn.query("""
            SELECT effect_key, kind, amount_minor, currency_code, credit_debit_indicator, subject_id, version,
                   array_to_string(posting_keys, ' ') AS posting_keys, reversed_by IS NOT NULL AS reversed
              FROM settlement_effects WHERE merchant_id = $1 AND effect_key = ANY($2::text[])
               FOR UPDATE
            """, [merchantId, PGArray.text(keys)]).rows {
            let keys: String = try row.decode("posting_keys")
            stored[try row.decode("effect_key")] = StoredEffect(
                kind: try row.decode("kind"), amount: try row.decode("amount_minor"), currency: try row.decode("currency_code"),
                indicator: try row.decode("credit_debit_indicator"), subject: try row.decodeIfPresent("subject_id"),
                version: try row.decode("version"), postingKeys: keys.split(separator: " ").map(String.init),
                reversed: try row.decode("reversed"))
        }
        return stored
    }

    /// What a key recorded before does now: a reversed one is booked again at the next version; one with the
    /// same content, or a status change (final in the finance store), stays; other content is rebooked.
    private static func decide(_ effect: FinanceEffect, against old: StoredEffect) -> Claim {
        let sameContent = old.kind == effect.kind.rawValue && old.amount == effect.amountMinor
            && old.currency == effect.currencyCode && old.indicator == effect.creditDebitIndicator
            && old.subject == subject(of: effect)
        if old.reversed { return .book(version: old.version + 1) }
        if sameContent || effect.kind == .bookPayment || effect.kind == .bookRefund || effect.kind == .refundReversal {
            return .same(version: old.version, postingKeys: old.postingKeys)
        }
        return .rebook(version: old.version + 1, oldPostingKeys: old.postingKeys)
    }

    /// The columns of `settlement_effects` rows, one array parameter each ($4 to $12).
    private static func effectRowParameters(_ rows: [(effect: FinanceEffect, version: Int, postingKeys: [String])],
                                            merchantId: String, reportId: String, format: String) -> [any PostgresEncodable] {
        [merchantId, reportId, format,
         PGArray.text(rows.map(\.effect.key)),
         PGArray.text(rows.map(\.effect.kind.rawValue)),
         PGArray.text(rows.map { subject(of: $0.effect) }),
         PGArray.text(rows.map { String($0.effect.amountMinor) }),
         PGArray.text(rows.map(\.effect.currencyCode)),
         PGArray.text(rows.map(\.effect.creditDebitIndicator)),
         PGArray.text(rows.map(\.effect.batchId)),
         PGArray.text(rows.map { String($0.version) }),
         PGArray.text(rows.map { $0.postingKeys.joined(separator: " ") })]
    }

    /// Records the keys not recorded before and returns them. Under the merchant's import lock no other
    /// writer adds one, so a plain insert of the keys the statement's snapshot does not hold is exact and
    /// costs less than `ON CONFLICT DO NOTHING`'s speculative insertion (a chunk's 2,000 keys: 44-84 ms
    /// against 56-94 ms); a key added anyway would fail the primary key and roll the chunk back, never
    /// apply twice. The keys are distinct (`claim` drops repeats). Each key is looked up on its own, through
    /// the primary key (a LATERAL subquery is never flattened into a join), whatever the statistics say.
    private static let recordNewEffects: SQL = """
        INSERT INTO settlement_effects (merchant_id, effect_key, report_id, kind, subject_id, amount_minor,
                                        currency_code, credit_debit_indicator, format, batch_id, version, posting_keys)
        SELECT $1, e.key, $2, e.kind, e.subject, e.amount, e.currency, e.indicator, $3, e.batch, e.version,
               string_to_array(e.posting_keys, ' ')
          FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[], $10::text[],
                      $11::int[], $12::text[])
               AS e(key, kind, subject, amount, currency, indicator, batch, version, posting_keys)
          LEFT JOIN LATERAL (SELECT true AS found FROM settlement_effects s
                              WHERE s.merchant_id = $1 AND s.effect_key = e.key OFFSET 0) r ON true
         WHERE r.found IS NULL
        RETURNING effect_key
        """

    /// Moves keys recorded before to this report at their decided version.
    private static let rerecordEffects: SQL = """
        INSERT INTO settlement_effects (merchant_id, effect_key, report_id, kind, subject_id, amount_minor,
                                        currency_code, credit_debit_indicator, format, batch_id, version, posting_keys)
        SELECT $1, e.key, $2, e.kind, e.subject, e.amount, e.currency, e.indicator, $3, e.batch, e.version,
               string_to_array(e.posting_keys, ' ')
          FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[], $10::text[],
                      $11::int[], $12::text[])
               AS e(key, kind, subject, amount, currency, indicator, batch, version, posting_keys)
        ON CONFLICT (merchant_id, effect_key) DO UPDATE
           SET report_id = EXCLUDED.report_id, kind = EXCLUDED.kind, subject_id = EXCLUDED.subject_id,
               amount_minor = EXCLUDED.amount_minor, currency_code = EXCLUDED.currency_code,
               credit_debit_indicator = EXCLUDED.credit_debit_indicator, format = EXCLUDED.format,
               batch_id = EXCLUDED.batch_id, version = EXCLUDED.version, posting_keys = EXCLUDED.posting_keys,
               reversed_by = NULL
        """

    /// The payment or refund an effect concerns, as `settlement_effects.subject_id` stores it.
    private static func subject(of effect: FinanceEffect) -> String? {
        effect.kind == .bookRefund ? effect.refundId : effect.paymentId
    }

    /// A report's last step, once its chunks are applied, in one transaction: (1) in every batch it
    /// supersedes, the effects an earlier revision booked that this one no longer carries are reversed;
    /// (2) each currency it pays out in confirms the earlier payouts still waiting for the bank (a
    /// processor closes the next payout batch only once the previous payout went out, and a returned
    /// payout comes back as a credit line, e.g. Adyen `BankInstructionReturned`: a currency with one
    /// confirms nothing). Returns the number of actions applied.
    private func finish(reportId: String, format: String, supersededBatches: [String], merchantId: String,
                        on conn: PostgresConnection, now: Date) throws -> Int {
        var actions: [SettlementEffectAction] = []
        var reversed = 0
        if !supersededBatches.isEmpty {
            let rows = try conn.query("""
                UPDATE settlement_effects SET reversed_by = $2
                 WHERE merchant_id = $1 AND format = $3 AND batch_id = ANY($4::text[]) AND reversed_by IS NULL
                   AND report_id <> $2
                RETURNING effect_key, version, array_to_string(posting_keys, ' ') AS posting_keys
                """, [merchantId, reportId, format, PGArray.text(supersededBatches)]).rows
            var removed: [(key: String, version: Int, postingKeys: [String])] = []
            for row in rows {
                let keys: String = try row.decode(2)
                removed.append((try row.decode(0), try row.decode(1), keys.split(separator: " ").map(String.init)))
            }
            // In key order, so a replay of this step (after a rollback) builds the same batch.
            for entry in removed.sorted(by: { $0.key < $1.key }) where !entry.postingKeys.isEmpty {
                actions.append(.reverse(postingKeys: entry.postingKeys, seed: "\(entry.key)|v\(entry.version)", postedDate: nil))
            }
            reversed = removed.count
        }
        let confirmed = try conn.query("""
            UPDATE settlement_effects e SET payout_confirmed = true
             WHERE e.merchant_id = $1 AND e.kind = 'payout' AND NOT e.payout_confirmed AND e.reversed_by IS NULL
               AND e.credit_debit_indicator = 'debit' AND e.report_id <> $2
               AND e.currency_code IN (
                   SELECT p.currency_code FROM settlement_effects p
                    WHERE p.merchant_id = $1 AND p.report_id = $2 AND p.kind = 'payout' AND p.reversed_by IS NULL
                    GROUP BY p.currency_code HAVING bool_and(p.credit_debit_indicator = 'debit'))
               AND NOT (e.format = $3 AND e.batch_id IN (
                   SELECT b.batch_id FROM settlement_batches b WHERE b.merchant_id = $1 AND b.report_id = $2))
            RETURNING array_to_string(e.posting_keys, ' ') AS posting_keys
            """, [merchantId, reportId, format]).rows
        for row in confirmed {
            let keys: String = try row.decode(0)
            for key in keys.split(separator: " ") { actions.append(.confirmPayout(postingKey: String(key))) }
        }
        if !actions.isEmpty { try sink.apply(actions, merchantId: merchantId, on: conn, now: now) }
        _ = try conn.execute("""
            UPDATE settlement_reports
               SET finish_pending = false, effects_reversed = effects_reversed + $2, payouts_confirmed = $3
             WHERE report_id = $1
            """, [reportId, reversed, confirmed.count])
        // The report is complete: matched, stored, and every finance-store effect booked (docs/events.md).
        guard let view = try Self.report(merchantId: merchantId, reportId: reportId, on: conn) else {
            throw TenderError("settlement_report_lost", "report \(reportId) not found while finishing")
        }
        try EventOutbox.append(.settlementReportCompleted, objectId: reportId, object: view, merchantId: merchantId,
                               on: conn, now: now)
        return actions.count
    }

    /// True when some report of the merchant still has effects to apply.
    private static func hasPendingEffects(merchantId: String, on conn: PostgresConnection) throws -> Bool {
        try conn.query("""
            SELECT 1 FROM settlement_reports r
             WHERE r.merchant_id = $1
               AND (r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                                                WHERE c.report_id = r.report_id AND c.effects_pending))
             LIMIT 1
            """, [merchantId]).first != nil
    }

    /// Merchants with pending effects (what `tender serve` finishes at start).
    func merchantsWithPendingEffects() throws -> [String] {
        try pool.query(SQL(idempotent: """
            SELECT DISTINCT r.merchant_id FROM settlement_reports r
             WHERE r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                                               WHERE c.report_id = r.report_id AND c.effects_pending)
             ORDER BY r.merchant_id
            """)).rows.map { try $0.decode(0) }
    }

    /// Serialises imports and effect application of one merchant until the transaction ends.
    private static func lockImports(merchantId: String, on conn: PostgresConnection) throws {
        _ = try conn.query("SELECT pg_advisory_xact_lock(hashtextextended('tender.settlement:' || $1, 0))",
                           [merchantId])
    }

    private static func seconds(from start: ContinuousClock.Instant, to end: ContinuousClock.Instant) -> Double {
        (end - start).secondsValue
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        seconds(from: start, to: ContinuousClock.now)
    }

    /// The report with that id as its GET shows it, read on `conn` (inside the transaction that finishes it).
    static func report(merchantId: String, reportId: String, on conn: PostgresConnection) throws -> SettlementReportView? {
        guard let row = try conn.query("""
            SELECT report_id, format, file_sha256, line_count, revision, supersedes, summary::text AS summary,
                   revision_diff::text AS revision_diff, created_at,
                   r.effects_rebooked, r.effects_reversed, r.payouts_confirmed,
                   r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                            WHERE c.report_id = r.report_id AND c.effects_pending) AS effects_pending
            FROM settlement_reports r WHERE merchant_id = $1 AND report_id = $2
            """, [merchantId, reportId]).first else { return nil }
        return try SettlementReportView(row: row)
    }

    /// The report with that id, if it belongs to `merchantId`.
    func report(merchantId: String, reportId: String) throws -> SettlementReportView? {
        guard let row = try pool.query(SQL(idempotent: """
            SELECT report_id, format, file_sha256, line_count, revision, supersedes, summary::text AS summary,
                   revision_diff::text AS revision_diff, created_at,
                   r.effects_rebooked, r.effects_reversed, r.payouts_confirmed,
                   r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                            WHERE c.report_id = r.report_id AND c.effects_pending) AS effects_pending
            FROM settlement_reports r WHERE merchant_id = $1 AND report_id = $2
            """), [merchantId, reportId]).first else { return nil }
        return try SettlementReportView(row: row)
    }

    /// One page of the merchant's reports, newest first, after report `startingAfter` (which must be
    /// the merchant's: nil when it is not); `limit` rows at most.
    func reports(merchantId: String, limit: Int, startingAfter: String?) throws -> [SettlementReportView]? {
        try pool.withConnection { conn in
            if let after = startingAfter {
                guard try conn.query("SELECT 1 AS found FROM settlement_reports WHERE report_id = $1 AND merchant_id = $2",
                                     [after, merchantId]).first != nil else { return nil }
            }
            return try conn.query("""
                SELECT report_id, format, file_sha256, line_count, revision, supersedes, summary::text AS summary,
                       revision_diff::text AS revision_diff, created_at,
                       r.effects_rebooked, r.effects_reversed, r.payouts_confirmed,
                       r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                                WHERE c.report_id = r.report_id AND c.effects_pending) AS effects_pending
                FROM settlement_reports r
                WHERE merchant_id = $1
                  AND ($2::text IS NULL OR (created_at, report_id) <
                       (SELECT created_at, report_id FROM settlement_reports WHERE report_id = $2 AND merchant_id = $1))
                ORDER BY created_at DESC, report_id DESC
                LIMIT $3
                """, [merchantId, startingAfter, limit]).rows.map(SettlementReportView.init(row:))
        }
    }

    /// The stored report for those bytes (it must exist).
    private func find(merchantId: String, format: SettlementReportFormat, fileSHA256: String,
                      on conn: PostgresConnection) throws -> SettlementReportView {
        guard let row = try conn.query("""
            SELECT report_id, format, file_sha256, line_count, revision, supersedes, summary::text AS summary,
                   revision_diff::text AS revision_diff, created_at,
                   r.effects_rebooked, r.effects_reversed, r.payouts_confirmed,
                   r.finish_pending OR EXISTS (SELECT 1 FROM settlement_item_chunks c
                            WHERE c.report_id = r.report_id AND c.effects_pending) AS effects_pending
            FROM settlement_reports r WHERE merchant_id = $1 AND format = $2 AND file_sha256 = $3
            """, [merchantId, format.rawValue, fileSHA256]).first else {
            throw TenderError("settlement_report_lost", "report of \(fileSHA256) not found")
        }
        return try SettlementReportView(row: row)
    }

    /// One page of a report's items in report order, optionally of one category. Ordinals are dense and
    /// every chunk but a category's last is full, so a page reads only the chunks it needs.
    func items(reportId: String, category: ReconciliationCategory?, limit: Int, offset: Int)
        throws -> [SettlementItemView] {
        guard limit > 0 else { return [] }
        var entries: [StoredItemChunk.Entry] = []
        if let category {
            let first = offset / Self.chunkItems
            let last = (offset + limit - 1) / Self.chunkItems
            let rows = try pool.query(SQL(idempotent: """
                SELECT items FROM settlement_item_chunks
                 WHERE report_id = $1 AND category = $2 AND chunk BETWEEN $3 AND $4 ORDER BY chunk
                """), [reportId, category.rawValue, first, last]).rows
            for row in rows { entries += try StoredItemChunk.decode(try row.decode(0)) }
            let skip = offset - first * Self.chunkItems
            entries = Array(entries.dropFirst(skip).prefix(limit))
        } else {
            let from = offset + 1
            let through = offset + limit
            let rows = try pool.query(SQL(idempotent: """
                SELECT items FROM settlement_item_chunks
                 WHERE report_id = $1 AND first_ordinal <= $3 AND last_ordinal >= $2
                """), [reportId, from, through]).rows
            for row in rows {
                entries += try StoredItemChunk.decode(try row.decode(0)).filter { (from...through).contains($0.ordinal) }
            }
            entries.sort { $0.ordinal < $1.ordinal }
        }
        return entries.map { SettlementItemView(ordinal: $0.ordinal, item: $0.item) }
    }

    /// The stored lines of `batchIds` in a report, by batch, in file order; one pass over its chunks.
    private func storedLines(reportId: String, batchIds: Set<String>, on conn: PostgresConnection)
        throws -> [String: [SettlementLine]] {
        var byBatch: [String: [(Int, SettlementLine)]] = [:]
        var after = -1
        // Keyset pages of chunks keep one page of decoded text in memory at a time.
        while true {
            let rows = try conn.query("""
                SELECT first_ordinal, items FROM settlement_item_chunks
                 WHERE report_id = $1 AND first_ordinal > $2 ORDER BY first_ordinal LIMIT 16
                """, [reportId, after]).rows
            for row in rows {
                after = try row.decode(0)
                for entry in try StoredItemChunk.decode(try row.decode(1)) {
                    guard let line = entry.line, batchIds.contains(line.batchId) else { continue }
                    byBatch[line.batchId, default: []].append((entry.ordinal, line))
                }
            }
            if rows.count < 16 { break }
        }
        return byBatch.mapValues { $0.sorted { $0.0 < $1.0 }.map(\.1) }
    }

    /// Appends a line's content without its position, the unit a batch digest is made of: the fields
    /// joined by the unit separator, then the record separator (neither can change a field's meaning
    /// here). The bytes must never change: stored batch digests are compared with new ones.
    static func appendCanonicalContent(_ line: SettlementLine, to bytes: inout [UInt8]) {
        let strings = line.naturalKey.utf8.count + line.type.rawValue.utf8.count + line.journalType.utf8.count
            + (line.paymentId?.utf8.count ?? 0) + (line.refundId?.utf8.count ?? 0)
            + (line.processorReference?.utf8.count ?? 0) + (line.paymentMethodVariant?.utf8.count ?? 0)
            + line.currencyCode.utf8.count + line.netCurrencyCode.utf8.count
        // 13 separators, the date and three numbers of at most 20 bytes.
        bytes.appendReserved(room: strings + 13 + 10 + 3 * 20) { out in
            func part(_ text: String) {
                out.put(utf8: text)
                out.put(0x1F)
            }
            part(line.naturalKey)
            out.putDate(line.settlementDate)
            out.put(0x1F)
            part(line.type.rawValue)
            part(line.journalType)
            part(line.paymentId ?? "")
            part(line.refundId ?? "")
            part(line.processorReference ?? "")
            part(line.paymentMethodVariant ?? "")
            part(line.currencyCode)
            out.putDecimal(line.grossMinor)
            out.put(0x1F)
            part(line.netCurrencyCode)
            out.putDecimal(line.feeMinor)
            out.put(0x1F)
            out.putDecimal(line.netMinor)
            out.put(0x1E)
        }
    }

    /// `sr_` + 24 lowercase alphanumerics from the CSPRNG (rejection sampling keeps it uniform).
    static func newReportId() -> String { PrefixedIdentifier.settlementReport.mint(randomBytes: SecureRandom.bytes) }
}

/// Summary stored with a report: counts and batch balances (openapi.yaml).
struct StoredSummary: Codable {
    let counts: [String: Int]
    let batches: [BatchBalance]
}

/// How one superseded batch changed (docs/finance-store.md §4.5 point 2).
struct BatchRevisionDiff: Codable {
    let batchId: String
    let supersedes: String
    let revision: Int
    let diff: RevisionDiff
}

/// Groups items into per-category chunks of `SettlementReportStore.chunkItems` and inserts each chunk
/// when full (and the partial last ones at `finish`), numbering items with dense ordinals.
struct ItemChunkWriter {
    /// One category's chunk being filled.
    struct Pending {
        var json = RowJSON(capacity: 256 * 1024)
        var count = 0
        var chunk = 0
        var firstOrdinal = 0
        var lastOrdinal = 0
    }

    let reportId: String
    private var ordinal = 0
    /// One buffer per category, indexed like `ReconciliationCategory.allCases` and mutated in place
    /// (copying a buffer out of a dictionary per item would copy the whole chunk each time).
    private var pending: [Pending]
    private static let categories = ReconciliationCategory.allCases

    init(reportId: String) {
        self.reportId = reportId
        pending = Self.categories.map { _ in Pending() }
    }

    /// `lines.lines[i]` is the line of `items[i]` while lines last: every line yields exactly one item.
    mutating func add(items: [ReconciliationItem], lines: ParsedBatch, on conn: PostgresConnection) throws {
        let reportId = reportId
        try add(items: items, lines: lines) { category, chunk in
            try Self.write(category, chunk, reportId: reportId, on: conn)
        }
    }

    /// As `add(items:lines:on:)`, handing each full chunk to `write` (`tender bench reconcile` drops them).
    mutating func add(items: [ReconciliationItem], lines: ParsedBatch,
                      write: (ReconciliationCategory, Pending) throws -> Void) throws {
        for index in items.indices {
            let item = items[index]
            ordinal += 1
            guard let slot = Self.categories.firstIndex(of: item.category) else { continue }
            if pending[slot].count == 0 { pending[slot].firstOrdinal = ordinal }
            pending[slot].lastOrdinal = ordinal
            pending[slot].count += 1
            pending[slot].json.beginObject()
            pending[slot].json.field("o", ordinal)
            pending[slot].json.field("c", item.category.rawValue)
            pending[slot].json.field("n", item.lineNumber)
            pending[slot].json.field("b", item.batchId)
            if index < lines.lines.count {
                pending[slot].json.field("d", 1)
                pending[slot].json.item(item, besides: lines.lines[index])
                pending[slot].json.encodedMember(lines.encodedLine(index))
            } else {
                pending[slot].json.item(item)
            }
            pending[slot].json.endObject()
            pending[slot].json.newline()
            if pending[slot].count == SettlementReportStore.chunkItems {
                try write(item.category, pending[slot])
                pending[slot].json.removeAll()
                pending[slot].count = 0
                pending[slot].chunk += 1
            }
        }
    }

    /// Writes every partial chunk left.
    mutating func finish(on conn: PostgresConnection) throws {
        for (slot, category) in Self.categories.enumerated() where pending[slot].count > 0 {
            try Self.write(category, pending[slot], reportId: reportId, on: conn)
            pending[slot].json.removeAll()
            pending[slot].count = 0
        }
    }

    private static func write(_ category: ReconciliationCategory, _ chunk: Pending, reportId: String,
                              on conn: PostgresConnection) throws {
        _ = try conn.execute("""
            INSERT INTO settlement_item_chunks (report_id, category, chunk, first_ordinal, last_ordinal, item_count,
                                                items, effects_pending)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            """, [reportId, category.rawValue, chunk.chunk, chunk.firstOrdinal, chunk.lastOrdinal, chunk.count,
                  chunk.json.text, Self.mayHaveEffects(category)])
    }

    /// Categories whose lines can carry finance-store effects (Reconciler.effects(of:item:)).
    static func mayHaveEffects(_ category: ReconciliationCategory) -> Bool {
        switch category {
        case .matched, .refund, .fee, .chargeback, .adjustment, .payout: true
        case .amountMismatch, .currencyMismatch, .missingInLedger, .missingInSettlement, .awaitingSettlement,
             .duplicate: false
        }
    }
}

/// The stored form of a chunk: JSON lines `{"o":ordinal,"c":category,"n":line,"b":batch,"i":item,"l":line}`.
/// With `"d":1` the item holds only what differs from its line (`RowJSON.item(_:besides:)`); without
/// it (items without a line, rows migrated from the per-item table) the item is complete.
enum StoredItemChunk {
    struct Entry: Decodable, Equatable {
        let ordinal: Int
        let item: ReconciliationItem
        let line: SettlementLine?

        init(ordinal: Int, item: ReconciliationItem, line: SettlementLine?) {
            self.ordinal = ordinal
            self.item = item
            self.line = line
        }

        enum CodingKeys: String, CodingKey { case ordinal = "o", item = "i", line = "l", delta = "d" }
        enum ItemKeys: String, CodingKey {
            case category, lineNumber, batchId, journalType, paymentId, refundId, processorReference, currencyCode
            case expectedCurrencyCode, expectedMinor, actualMinor, differenceMinor, reason
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            ordinal = try container.decode(Int.self, forKey: .ordinal)
            line = try container.decodeIfPresent(SettlementLine.self, forKey: .line)
            guard let line, try container.decodeIfPresent(Int.self, forKey: .delta) == 1 else {
                item = try container.decode(ReconciliationItem.self, forKey: .item)
                return
            }
            let i = try container.nestedContainer(keyedBy: ItemKeys.self, forKey: .item)
            // Absent: the line's value; present: the item's own (null included).
            func text(_ key: ItemKeys, _ fallback: String?) throws -> String? {
                i.contains(key) ? try i.decodeIfPresent(String.self, forKey: key) : fallback
            }
            func number(_ key: ItemKeys, _ fallback: Int64?) throws -> Int64? {
                i.contains(key) ? try i.decodeIfPresent(Int64.self, forKey: key) : fallback
            }
            item = ReconciliationItem(
                category: try i.decode(ReconciliationCategory.self, forKey: .category),
                lineNumber: i.contains(.lineNumber) ? try i.decodeIfPresent(Int.self, forKey: .lineNumber) : line.lineNumber,
                batchId: try text(.batchId, line.batchId),
                journalType: try text(.journalType, line.journalType),
                paymentId: try text(.paymentId, line.paymentId),
                refundId: try text(.refundId, line.refundId),
                processorReference: try text(.processorReference, line.processorReference),
                currencyCode: try i.decodeIfPresent(String.self, forKey: .currencyCode) ?? line.currencyCode,
                expectedCurrencyCode: try i.decodeIfPresent(String.self, forKey: .expectedCurrencyCode),
                expectedMinor: try i.decodeIfPresent(Int64.self, forKey: .expectedMinor),
                actualMinor: try number(.actualMinor, line.grossMinor),
                differenceMinor: try i.decodeIfPresent(Int64.self, forKey: .differenceMinor),
                reason: try i.decodeIfPresent(String.self, forKey: .reason))
        }
    }

    /// Decodes a chunk; a malformed one is a stored-data error, never silently skipped. What `RowJSON`
    /// wrote is read by `StoredChunkReader`; anything it does not take goes through `JSONDecoder`.
    static func decode(_ text: String) throws -> [Entry] {
        if let entries = StoredChunkReader.entries(text) { return entries }
        return try decodeWithFoundation(text)
    }

    /// The reference decoding, with the `Codable` conformances.
    static func decodeWithFoundation(_ text: String) throws -> [Entry] {
        var json = Array("[".utf8)
        json.reserveCapacity(text.utf8.count + 2)
        var first = true
        for byte in text.utf8 {
            if byte == UInt8(ascii: "\n") {
                first = true
                continue
            }
            if first && json.count > 1 { json.append(UInt8(ascii: ",")) }
            first = false
            json.append(byte)
        }
        json.append(UInt8(ascii: "]"))
        do {
            return try JSONDecoder().decode([Entry].self, from: Data(json))
        } catch {
            throw TenderError("settlement_chunk_invalid", "a stored item chunk does not decode")
        }
    }
}
