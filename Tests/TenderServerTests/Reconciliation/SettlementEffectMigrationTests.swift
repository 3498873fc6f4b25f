import Foundation
import Postgres
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
}
