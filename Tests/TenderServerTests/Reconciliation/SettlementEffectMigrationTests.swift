import Crypto
import Foundation
import Postgres
import Reconciliation
import Testing
@testable import TenderServer

/// migrations/0011: effects applied before it learn their batch and the postings that carry them, the
/// same postings FinanceSettlementSink created for them, so a later revision can take them back.
@Suite(.enabled(if: TestEnvironment.hasDatabase))
struct SettlementEffectMigrationTests {
    @Test func earlierEffectsKnowTheirBatchAndPostings() throws {
        let pool = PostgresPool(configuration: PostgresConfiguration(
            connectionString: try TestEnvironment.freshDatabase("mig_effects")))
        defer { pool.close() }
        let files = try MigrationFile.load(directory: TestEnvironment.migrationsDirectory)
        try Migrator(pool: pool, files: files.filter { $0.version < 11 }).migrate()
        // Keys as the Reconciler wrote them before 0011 ("recon|kind|" + natural key, amounts included).
        let rows: [(key: String, kind: String, subject: String?)] = [
            ("recon|fee|generic|B-1|fee|||USD|0|100|-100", "fee", nil),
            ("recon|payout|generic|B-1|payout|||USD|-435|0|-435", "payout", nil),
            ("recon|adjustment|adyen-sdr|Shop%7CUS|57|ManualCorrected||Manual 1", "adjustment", nil),
            ("recon|chargeback|adyen-sdr|Shop|57|Chargeback|8815|8816", "chargeback", "pay_1"),
            ("recon|chargeback_reversal|adyen-sdr|Shop|57|ChargebackReversed|8815|8817", "chargeback_reversal", nil),
            ("recon|book_payment|generic|B-1|payment|pay_1||USD", "book_payment", "pay_1"),
        ]
        for row in rows {
            _ = try pool.execute("""
                INSERT INTO settlement_effects (merchant_id, effect_key, report_id, kind, subject_id, amount_minor,
                                                currency_code, credit_debit_indicator)
                VALUES ('m', $1, 'sr_x', $2, $3, 100, 'USD', 'debit')
                """, [row.key, row.kind, row.subject])
        }
        try Migrator(pool: pool, files: files).migrate()
        func migrated(_ key: String) throws -> (format: String?, batch: String?, postings: [String]) {
            let row = try #require(try pool.query("""
                SELECT format, batch_id, array_to_string(posting_keys, ' ') AS p, version FROM settlement_effects
                 WHERE effect_key = $1
                """, [key]).first)
            #expect(try row.decode("version", as: Int.self) == 0)
            let postings: String = try row.decode("p")
            return (try row.decodeIfPresent("format"), try row.decodeIfPresent("batch_id"),
                    postings.split(separator: " ").map(String.init))
        }
        let id = FinanceSettlementSink.identifier
        var m = try migrated(rows[0].key)
        #expect(m.format == "generic" && m.batch == "B-1")
        #expect(m.postings == ["fee:" + id(rows[0].key)])
        m = try migrated(rows[1].key)
        #expect(m.postings == ["payout:" + id(rows[1].key), "payout-arrival:" + id(rows[1].key)])
        m = try migrated(rows[2].key)
        #expect(m.format == "adyen-sdr" && m.batch == "Shop|US:57")
        #expect(m.postings == ["adjustment:" + id(rows[2].key)])
        m = try migrated(rows[3].key)
        #expect(m.postings == ["chargeback:" + FinanceSettlementSink.chargebackId("pay_1")])
        m = try migrated(rows[4].key)
        #expect(m.postings == ["adjustment:" + id(rows[4].key)])  // a dispute over an unknown payment
        m = try migrated(rows[5].key)
        #expect(m.postings.isEmpty)
        #expect(try pool.query("SELECT count(*)::int FROM settlement_reports WHERE finish_pending").first?
            .decode(0, as: Int.self) == 0)
    }

    /// migrations/0025: effects applied before the keys became "C"-collated stay applied (a later revision
    /// books only its new line), and a chunk left pending before the upgrade is applied once after it.
    @Test func effectKeysInCCollationKeepEveryEffectAppliedOnce() throws {
        let url = try TestEnvironment.freshDatabase("mig_effect_keys")
        let files = try MigrationFile.load(directory: TestEnvironment.migrationsDirectory)
        let merchant = try Merchant.validated(merchantId: "merchant.keys", displayName: "Keys", domains: ["k.test"],
                                              countryCode: "US", currencies: ["USD"])
        let m = merchant.merchantId
        let finance = FinanceSettlementSink(processor: "simulator", logger: .silent)
        let header = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"
        let paymentId = fixtureId("pay_", "keys")
        let first = header + "2024-03-02,B1,payment,\(paymentId),psp_keys1,USD,10.00,0.30,9.70\n"
            + "2024-03-02,B1,fee,,,USD,0.00,0.25,0.25\n"
        func importText(_ text: String, into store: SettlementReportStore, supersede: Bool = false) throws -> SettlementImport {
            let bytes = Array(text.utf8)
            return try store.importReport(merchantId: m, format: .generic, fileSHA256: hexEncoded(Digest.sha256(bytes)),
                                          source: ByteArraySource(bytes), supersede: supersede, now: Date())
        }
        func count(_ pool: PostgresPool, _ table: String) throws -> Int {
            try #require(try pool.query(SQL(unsafeSQL: "SELECT count(*)::int FROM \(table)")).first?.decode(0, as: Int.self))
        }

        // Before the upgrade (a server of the earlier version): the payment booked, its fee and the fee line
        // posted; a second batch's report is stored but its effects are left pending (its sink fails).
        let old = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
        try Migrator(pool: old, files: files.filter { $0.version < 25 }).migrate()
        try MerchantStore(pool: old).add(merchant)
        try LedgerFixture.payment(old, merchantId: m, id: paymentId, amountMinor: 1_000, reference: "psp_keys1")
        #expect(try importText(first, into: SettlementReportStore(pool: old, sink: finance)).effectsApplied == 3)
        let pending = header + "2024-03-02,B2,fee,,,USD,0.00,0.40,0.40\n"
        #expect(throws: TenderError.self) {
            _ = try importText(pending, into: SettlementReportStore(pool: old, sink: RefusingSink()))
        }
        #expect(try count(old, "settlement_effects") == 3)
        let postingsBefore = try count(old, "finance_postings")
        old.close()

        // The upgrade, then a server of this version.
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
        defer { pool.close() }
        try Migrator(pool: pool, files: files).migrate()
        let collations = try pool.query("""
            SELECT a.attname, c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
             WHERE a.attrelid = 'settlement_effects'::regclass AND a.attname IN ('effect_key', 'batch_id')
             ORDER BY a.attname
            """).rows.map { "\(try $0.decode(0, as: String.self))=\(try $0.decode(1, as: String.self))" }
        #expect(collations == ["batch_id=C", "effect_key=C"])

        // The pending chunk is applied once, and a revision of B1 with one more line books that line only.
        let store = SettlementReportStore(pool: pool, sink: finance)
        #expect(try store.applyPendingEffects(merchantId: m, now: Date()) == 1)
        #expect(try store.applyPendingEffects(merchantId: m, now: Date()) == 0)
        let revision = try importText(first + "2024-03-02,B1,fee,,,USD,0.00,0.15,0.15\n", into: store, supersede: true)
        #expect(revision.effectsApplied == 1)
        #expect(revision.report.financeChanges.rebooked == 0 && revision.report.financeChanges.reversed == 0)
        #expect(try count(pool, "settlement_effects") == 5)
        #expect(try count(pool, "finance_postings") == postingsBefore + 2)
        #expect(try count(pool, "settlement_effects WHERE reversed_by IS NOT NULL") == 0)
    }
}

/// A sink whose every call fails: the chunk's transaction rolls back and its effects stay pending.
private struct RefusingSink: SettlementEffectSink {
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        throw TenderError("test_sink_refused", "refused")
    }
}
