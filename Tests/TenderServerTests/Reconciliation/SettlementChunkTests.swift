import Crypto
import Foundation
import Postgres
import Reconciliation
import Synchronization
import Testing
@testable import TenderServer

private let header = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

/// Items stored in chunks (migrations/0009) and effects applied after the report, chunk by chunk.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase))
struct SettlementChunkTests {
    private static func merchant(_ pool: PostgresPool, _ id: String) throws -> String {
        let merchant = try Merchant.validated(merchantId: id, displayName: "Chunks", domains: ["c.test"],
                                              countryCode: "US", currencies: ["USD"])
        try MerchantStore(pool: pool).add(merchant)
        return merchant.merchantId
    }

    private static func importText(_ store: SettlementReportStore, merchantId: String, _ text: String) throws
        -> SettlementImport {
        let bytes = Array(text.utf8)
        return try store.importReport(merchantId: merchantId, format: .generic, fileSHA256: hexEncoded(Digest.sha256(bytes)),
                                      source: ByteArraySource(bytes, chunkBytes: 4_096), supersede: false, now: Date())
    }

    /// Line i (1-based) is a fee line when i is a multiple of 3, else a payment Tender never recorded.
    private static func mixedReport(lines: Int) -> String {
        var text = header
        for i in 1...lines {
            if i % 3 == 0 {
                let fee = "\(i / 100).\(String(format: "%02d", i % 100))"
                text += "2024-03-02,B1,fee,,,USD,0.00,\(fee),\(fee)\n"
            } else {
                text += "2024-03-02,B1,payment,pay_unknown_\(i),,USD,1.00,0.00,1.00\n"
            }
        }
        return text
    }

    @Test func pagesReadAcrossChunkBoundariesInReportAndCategoryOrder() throws {
        let pool = try TestEnvironment.migratedPool("recon_chunks")
        defer { pool.close() }
        try LedgerFixture.install(pool)
        let m = try Self.merchant(pool, "merchant.chunks")
        let store = SettlementReportStore(pool: pool, sink: NoFinanceEffectSink())
        let lines = 3_300
        let outcome = try Self.importText(store, merchantId: m, Self.mixedReport(lines: lines))
        #expect(outcome.report.counts["fee"] == 1_100)
        #expect(outcome.report.counts["missing_in_ledger"] == 2_200)
        // Four chunk rows of fees (1,000 + 100) and three of missing lines (1,000 + 1,000 + 200).
        let chunks = try pool.query("""
            SELECT category, count(*)::int AS n, sum(item_count)::int AS items FROM settlement_item_chunks
             WHERE report_id = $1 GROUP BY category ORDER BY category
            """, [outcome.report.id]).rows.map { (try $0.decode("category", as: String.self), try $0.decode("n", as: Int.self),
                                                   try $0.decode("items", as: Int.self)) }
        #expect(chunks.map(\.0) == ["fee", "missing_in_ledger"])
        #expect(chunks.map(\.1) == [2, 3])
        #expect(chunks.map(\.2) == [1_100, 2_200])

        // The whole report in file order: ordinal k is line k + 1 (the header is line 1).
        let page = try store.items(reportId: outcome.report.id, category: nil, limit: 30, offset: 990)
        #expect(page.map(\.ordinal) == Array(991...1_020))
        #expect(page.map(\.lineNumber) == (991...1_020).map { $0 + 1 })
        #expect(page.map(\.category) == (991...1_020).map { $0 % 3 == 0 ? "fee" : "missing_in_ledger" })

        // One category: the 996th to 1,005th fees straddle the first chunk boundary.
        let fees = try store.items(reportId: outcome.report.id, category: .fee, limit: 10, offset: 995)
        let feeLines = (1...lines).filter { $0 % 3 == 0 }
        #expect(fees.map(\.ordinal) == Array(feeLines[995..<1_005]))
        #expect(fees.allSatisfy { $0.category == "fee" })
        let missing = try store.items(reportId: outcome.report.id, category: .missingInLedger, limit: 20, offset: 1_990)
        let missingLines = (1...lines).filter { $0 % 3 != 0 }
        #expect(missing.map(\.ordinal) == Array(missingLines[1_990..<2_010]))
        #expect(missing.map(\.paymentId) == missingLines[1_990..<2_010].map { "pay_unknown_\($0)" })

        // Past the end: short pages, then nothing.
        #expect(try store.items(reportId: outcome.report.id, category: nil, limit: 50, offset: 3_290).count == 10)
        #expect(try store.items(reportId: outcome.report.id, category: .fee, limit: 50, offset: 1_100).isEmpty)
    }

    @Test func aPaymentSettledAgainInAnotherBatchIsADuplicateButARevisionMatches() throws {
        let pool = try TestEnvironment.migratedPool("recon_twice")
        defer { pool.close() }
        try LedgerFixture.install(pool)
        let m = try Self.merchant(pool, "merchant.twice")
        let paid = fixtureId("pay_", "twice")
        try LedgerFixture.payment(pool, merchantId: m, id: paid, amountMinor: 1_000)
        let store = SettlementReportStore(pool: pool, sink: NoFinanceEffectSink())
        let first = header + "2024-03-02,B1,payment,\(paid),,USD,10.00,0.00,10.00\n"
        #expect(try Self.importText(store, merchantId: m, first).report.counts["matched"] == 1)
        // Another batch settles the same payment: flagged, nothing booked a second time.
        let second = try Self.importText(store, merchantId: m,
                                         header + "2024-03-09,B2,payment,\(paid),,USD,10.00,0.00,10.00\n")
        #expect(second.report.counts["matched"] == 0)
        #expect(second.report.counts["duplicate"] == 1)
        let flagged = try store.items(reportId: second.report.id, category: .duplicate, limit: 10, offset: 0)
        #expect(flagged.map(\.reason) == ["payment_already_settled"])
        #expect(second.effectsApplied == 0)
        // A new revision of B1 lists the same line again: it still matches, and applies nothing new.
        let bytes = Array((first + "2024-03-02,B1,fee,,,USD,0.00,0.10,0.10\n").utf8)
        let revision = try store.importReport(merchantId: m, format: .generic, fileSHA256: hexEncoded(Digest.sha256(bytes)),
                                              source: ByteArraySource(bytes), supersede: true, now: Date())
        #expect(revision.report.counts["matched"] == 1)
        #expect(revision.report.revision == 2)
        #expect(revision.effectsApplied == 1)  // the new fee line only
    }

    @Test func theSameFileImportedConcurrentlyIsStoredAndAppliedOnce() throws {
        let pool = try TestEnvironment.migratedPool("recon_conc")
        defer { pool.close() }
        try LedgerFixture.install(pool)
        let m = try Self.merchant(pool, "merchant.conc")
        var text = header
        for i in 1...1_500 {
            let fee = "\(i / 100).\(String(format: "%02d", i % 100))"
            text += "2024-03-02,B5,fee,,,USD,0.00,\(fee),\(fee)\n"
        }
        let sink = FailingOnceSink(failOnCall: Int.max)
        let store = SettlementReportStore(pool: pool, sink: sink)
        let file = text
        let outcomes = concurrently(4) { _ in try? Self.importText(store, merchantId: m, file) }
        #expect(outcomes.allSatisfy { $0 != nil })
        #expect(outcomes.filter { $0?.created == true }.count == 1)
        #expect(Set(outcomes.compactMap { $0?.report.id }).count == 1)
        #expect(sink.keys.count == 1_500)
        #expect(Set(sink.keys).count == 1_500)
        #expect(try LedgerFixture.count(pool, "settlement_reports") == 1)
    }

    @Test func storedEntriesDecodeInBothForms() throws {
        let line = #""l":{"lineNumber":7,"naturalKey":"k","batchId":"B1","settlementDate":"2024-03-02","type":"refund","#
            + #""journalType":"refund","paymentId":"pay_1","refundId":"re_9","currencyCode":"USD","grossMinor":-500,"#
            + #""netCurrencyCode":"USD","feeMinor":0,"netMinor":-500}"#
        // A migrated row: the item is complete, so a field it lacks is nil even where the line has one.
        let migrated = #"{"o":3,"i":{"category":"missing_in_ledger","currencyCode":"USD","reason":"no_recorded_refund"},"# + line + "}"
        // A delta row: absent fields come from the line, null ones stay nil, present ones win.
        let delta = #"{"o":4,"d":1,"i":{"category":"refund","refundId":null,"actualMinor":500,"expectedMinor":500,"differenceMinor":0},"#
            + line + "}"
        let entries = try StoredItemChunk.decode(migrated + "\n" + delta)
        #expect(entries.map(\.ordinal) == [3, 4])
        #expect(entries[0].item.paymentId == nil)
        #expect(entries[0].item.lineNumber == nil)
        #expect(entries[0].item.reason == "no_recorded_refund")
        #expect(entries[1].item.paymentId == "pay_1")
        #expect(entries[1].item.lineNumber == 7)
        #expect(entries[1].item.batchId == "B1")
        #expect(entries[1].item.refundId == nil)
        #expect(entries[1].item.actualMinor == 500)
        #expect(entries[1].item.currencyCode == "USD")
        #expect(entries[1].line?.grossMinor == -500)
        #expect(throws: TenderError.self) { _ = try StoredItemChunk.decode(#"{"o":1}"#) }
    }

    @Test func effectsInterruptedAfterTheReportAreFinishedExactlyOnce() throws {
        let pool = try TestEnvironment.migratedPool("recon_resume")
        defer { pool.close() }
        try LedgerFixture.install(pool)
        let m = try Self.merchant(pool, "merchant.resume")
        // 2,500 fee lines: three chunks with effects; the sink fails on the second chunk.
        var text = header
        for i in 1...2_500 {
            let fee = "\(i / 100).\(String(format: "%02d", i % 100))"
            text += "2024-03-02,B9,fee,,,USD,0.00,\(fee),\(fee)\n"
        }
        let sink = FailingOnceSink(failOnCall: 2)
        let store = SettlementReportStore(pool: pool, sink: sink)
        #expect(throws: SinkFailure.self) { _ = try Self.importText(store, merchantId: m, text) }

        // The report is stored (phase 1 committed) and says its effects are pending.
        let reportId = try #require(try pool.query("SELECT report_id FROM settlement_reports WHERE merchant_id = $1",
                                                   [m]).first?.decode("report_id", as: String.self))
        #expect(try store.report(merchantId: m, reportId: reportId)?.effectsPending == true)
        #expect(try store.merchantsWithPendingEffects().contains(m))
        #expect(sink.keys.count == 1_000)  // the first chunk only; the failed one rolled back

        // A replay of the same bytes returns the stored report and finishes the rest, once.
        let replay = try Self.importText(store, merchantId: m, text)
        #expect(replay.created == false)
        #expect(replay.report.id == reportId)
        #expect(replay.effectsApplied == 1_500)
        #expect(replay.report.effectsPending == false)
        #expect(sink.keys.count == 2_500)
        #expect(Set(sink.keys).count == 2_500)
        #expect(try LedgerFixture.count(pool, "settlement_effects") == 2_500)
        #expect(try store.merchantsWithPendingEffects().contains(m) == false)
        // Nothing is left to apply a second time.
        #expect(try store.applyPendingEffects(merchantId: m, now: Date()) == 0)
        #expect(sink.keys.count == 2_500)
    }
}

private struct SinkFailure: Error {}

/// Records keys; its `failOnCall`-th call throws instead (once).
private final class FailingOnceSink: SettlementEffectSink {
    private let state = Mutex<(calls: Int, keys: [String])>((0, []))
    let failOnCall: Int
    init(failOnCall: Int) { self.failOnCall = failOnCall }
    var keys: [String] { state.withLock { $0.keys } }
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        try state.withLock { state in
            state.calls += 1
            if state.calls == failOnCall { throw SinkFailure() }
            state.keys.append(contentsOf: effects.map(\.key))
        }
    }
}
