import Crypto
import Foundation
import Observability
import Postgres
import Reconciliation
import Synchronization
import Testing
@testable import TenderServer

private let header = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

/// Issue 19 item 3: the settlement effects of large reports (stored with `effectsPending`, applied by
/// `SettlementEffectsService`) run on two nodes at once, each with its own pool on the same database, as
/// two `tender serve` processes do. Every effect must exist exactly once: the finance store, the effect
/// rows, the report's counters and its one `settlement_report.completed` event end up exactly as one node
/// alone leaves them (a reference database that applied the same files inline).
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct SettlementTwoNodeTests {
    /// One fixed instant for every write, so the reference and the two-node database can be compared row for row.
    static let now = Date(timeIntervalSince1970: 1_796_000_000)
    static let merchants = ["merchant.twonode.a", "merchant.twonode.b"]
    static let paymentsPerMerchant = 20
    /// Two chunks of fees per report: with the matched payments' and the payout's, four chunks with effects.
    static let feeLines = 1_500
    /// Reports above this many lines leave their effects pending (`SettlementReportStore.effectsInlineLinesMax`
    /// over HTTP; lowered here so the test stays quick with the same path).
    static let inlineLinesMax = 1_000

    /// A fresh migrated database and a second pool on it (node B's).
    private static func twoPools(_ prefix: String) throws -> (PostgresPool, PostgresPool) {
        let url = try TestEnvironment.freshDatabase(prefix)
        let a = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
        try Migrator(pool: a, files: try MigrationFile.load(directory: TestEnvironment.migrationsDirectory)).migrate()
        return (a, PostgresPool(configuration: PostgresConfiguration(connectionString: url)))
    }

    private static func paymentId(_ merchant: Int, _ index: Int) -> String {
        "pay_twonode\(merchant)x" + String(format: "%015d", index)
    }

    /// Each merchant with its recorded payments (in the finance store too, as the payments service leaves
    /// them), then its report imported: stored, with effects left pending when `leavePending`.
    private static func importReports(_ pool: PostgresPool, leavePending: Bool) throws -> [String] {
        let sink = FinancePaymentSink(processor: "simulator")
        var reportIds: [String] = []
        for (m, merchantId) in merchants.enumerated() {
            try MerchantStore(pool: pool).add(try Merchant.validated(merchantId: merchantId, displayName: "Two nodes",
                                                                     domains: ["two.test"], countryCode: "US", currencies: ["USD"]))
            var text = header
            for i in 0..<paymentsPerMerchant {
                let id = paymentId(m, i)
                try LedgerFixture.payment(pool, merchantId: merchantId, id: id, amountMinor: 1_000, createdAt: now)
                try pool.transaction { conn in
                    try sink.record(.paymentSucceeded(.init(paymentId: id, sessionId: "cs_" + id.dropFirst(4), amountMinor: 1_000,
                                                            currencyCode: "USD", processorReference: "psp_" + id)),
                                    merchantId: merchantId, on: conn, now: now)
                }
                text += "2026-11-27,P\(m),payment,\(id),psp_\(id),USD,10.00,0.30,9.70\n"
            }
            for i in 1...feeLines {
                let fee = "\(i / 100).\(String(format: "%02d", i % 100))"
                text += "2026-11-27,F\(m)-\(i / 1_000),fee,,,USD,0.00,\(fee),\(fee)\n"
            }
            text += "2026-11-28,P\(m),payout,,,USD,-150.00,0.00,-150.00\n"
            let bytes = Array(text.utf8)
            let store = SettlementReportStore(pool: pool, sink: FinanceSettlementSink(processor: "simulator", logger: .silent))
            let imported = try store.importReport(
                merchantId: merchantId, format: .generic, fileSHA256: hexEncoded(Digest.sha256(bytes)),
                source: ByteArraySource(bytes, chunkBytes: 64 * 1_024), supersede: false, now: now,
                effectsInlineLinesMax: leavePending ? inlineLinesMax : .max)
            #expect(imported.report.effectsPending == leavePending)
            reportIds.append(imported.report.id)
        }
        return reportIds
    }

    /// Effects each report should have: per payment its booking and its fee, every fee line, the payout.
    static var effectsPerReport: Int { 2 * paymentsPerMerchant + feeLines + 1 }

    /// What the effects left behind, per merchant, without row timestamps or report ids (which differ
    /// between databases): counts and digests of the finance store's rows, the effect rows, the
    /// report's counters and the events.
    static func snapshot(_ pool: PostgresPool) throws -> [String] {
        var out: [String] = []
        let queries: [(String, SQL)] = [
            ("postings", """
                SELECT count(*)::text || ' ' || md5(string_agg(posting_key || ':' || status || ':' || transaction_type || ':'
                       || coalesce(posted_date::text, '-'), ',' ORDER BY posting_key)) AS v
                  FROM finance_postings WHERE merchant_id = $1
                """),
            ("entries", """
                SELECT count(*)::text || ' ' || md5(string_agg(posting_key || ':' || leg || ':' || account_key || ':' || side || ':'
                       || amount_minor || currency_code, ',' ORDER BY posting_key, leg)) AS v
                  FROM finance_entries WHERE merchant_id = $1
                """),
            ("transactions", """
                SELECT count(*)::text || ' ' || md5(string_agg(id::text || ':' || posting_key || ':' || status || ':'
                       || credit_debit_indicator || ':' || amount_minor, ',' ORDER BY id)) AS v
                  FROM finance_transaction WHERE merchant_id = $1
                """),
            ("balances", """
                SELECT string_agg(a.account_key || '=' || b.booked_minor || '/' || b.available_minor, ' ' ORDER BY a.account_key) AS v
                  FROM finance_balance b JOIN finance_ledger_accounts a ON a.merchant_id = b.merchant_id AND a.account_id = b.account_id
                 WHERE b.merchant_id = $1
                """),
            ("effects", """
                SELECT count(*)::text || ' ' || md5(string_agg(effect_key || ':' || kind || ':' || amount_minor || ':' || version || ':'
                       || array_to_string(posting_keys, ' ') || ':' || payout_confirmed || ':' || (reversed_by IS NULL),
                       ',' ORDER BY effect_key)) AS v
                  FROM settlement_effects WHERE merchant_id = $1
                """),
            ("reports", """
                SELECT string_agg(line_count || ' rebooked ' || effects_rebooked || ' reversed ' || effects_reversed
                       || ' confirmed ' || payouts_confirmed || ' finish_pending ' || finish_pending, ';') AS v
                  FROM settlement_reports WHERE merchant_id = $1
                """),
            ("events", """
                SELECT string_agg(event_type || ' ' || n, ' ' ORDER BY event_type) AS v
                  FROM (SELECT event_type, count(*) AS n FROM events WHERE merchant_id = $1 GROUP BY event_type) e
                """),
        ]
        for merchantId in merchants {
            for (name, sql) in queries {
                let value = try pool.query(sql, [merchantId]).first?.decodeIfPresent("v", as: String.self) ?? "none"
                out.append("\(merchantId) \(name): \(value)")
            }
        }
        return out
    }

    /// The same files with their effects applied inline by one node (built once for the suite).
    private static let referenceSnapshot = Result { () throws -> [String] in
        let pool = try TestEnvironment.migratedPool("recon_two_ref")
        defer { pool.close() }
        _ = try importReports(pool, leavePending: false)
        return try snapshot(pool)
    }

    private static func reference() throws -> [String] { try referenceSnapshot.get() }

    /// Waits until no merchant has effects pending (at most `seconds`).
    private static func waitUntilApplied(_ store: SettlementReportStore, seconds: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try store.merchantsWithPendingEffects().isEmpty { return true }
            usleep(50_000)
        }
        return false
    }

    /// The effects each service's passes logged as applied (`settlement effects resumed`).
    private static func applied(_ logs: PaymentLogCapture) -> Int {
        logs.lines.withLock { lines in
            lines.compactMap { line -> Int? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      object["msg"] as? String == "settlement effects resumed" else { return nil }
                return (object["applied"] as? String).flatMap(Int.init)
            }.reduce(0, +)
        }
    }

    @Test func twoNodesApplyTheSamePendingReportsOnce() throws {
        let expected = try Self.reference()
        let (poolA, poolB) = try Self.twoPools("recon_two")
        defer {
            poolA.close()
            poolB.close()
        }
        let reportIds = try Self.importReports(poolA, leavePending: true)
        // Nothing applied yet: the nodes' services do all of it.
        #expect(try LedgerFixture.count(poolA, "settlement_effects") == 0)

        let logs = [PaymentLogCapture(), PaymentLogCapture()]
        let stores = [poolA, poolB].map {
            SettlementReportStore(pool: $0, sink: FinanceSettlementSink(processor: "simulator", logger: .silent))
        }
        let services = (0..<2).map { SettlementEffectsService(store: stores[$0], logger: logs[$0].logger, now: { Self.now },
                                                              intervalMilliseconds: 50) }
        // Both start at once, as two nodes started together; each begins with a pass over every merchant.
        for service in services { try service.start() }
        let done = try Self.waitUntilApplied(stores[0], seconds: 60)
        for service in services { _ = service.stop(deadline: .now.advanced(by: .seconds(10))) }
        #expect(done)

        let appliedA = Self.applied(logs[0]), appliedB = Self.applied(logs[1])
        print("measure settlement effects two nodes: node A applied \(appliedA), node B applied \(appliedB)")
        // Every effect was new to exactly one node's chunk transaction.
        #expect(appliedA + appliedB == Self.effectsPerReport * Self.merchants.count)
        for (merchantId, reportId) in zip(Self.merchants, reportIds) {
            #expect(try StoredEvent.all(poolA, objectId: reportId).map(\.type) == ["settlement_report.completed"])
            #expect(try stores[1].report(merchantId: merchantId, reportId: reportId)?.effectsPending == false)
        }
        #expect(try LedgerFixture.count(poolA, "settlement_effects") == Self.effectsPerReport * Self.merchants.count)
        let actual = try Self.snapshot(poolA)
        #expect(actual == expected, "\(zip(actual, expected).filter { $0 != $1 })")
    }

    /// Node A's connection dies in the middle of a chunk's transaction (as when the node is killed): the
    /// chunk rolls back, the merchant's lock goes with the session, and node B finishes everything, once.
    @Test func aNodeKilledMidChunkLeavesTheRestToTheOtherOnce() throws {
        let expected = try Self.reference()
        let (poolA, poolB) = try Self.twoPools("recon_two_kill")
        defer {
            poolA.close()
            poolB.close()
        }
        let reportIds = try Self.importReports(poolA, leavePending: true)
        let dying = DyingSink(base: FinanceSettlementSink(processor: "simulator", logger: .silent), dieOnCall: 3)
        let storeA = SettlementReportStore(pool: poolA, sink: dying)
        let storeB = SettlementReportStore(pool: poolB, sink: FinanceSettlementSink(processor: "simulator", logger: .silent))
        let serviceB = SettlementEffectsService(store: storeB, logger: .silent, now: { Self.now }, intervalMilliseconds: 50)
        // Node A's one pass; node B's service starts once A is inside its first chunk.
        let nodeA = Thread {
            SettlementEffectsService.pass(store: storeA, logger: .silent, now: Self.now, shouldStop: { false })
        }
        nodeA.start()
        let started = Date().addingTimeInterval(20)
        while dying.calls == 0 && Date() < started { usleep(1_000) }
        try serviceB.start()
        let done = try Self.waitUntilApplied(storeB, seconds: 60)
        _ = serviceB.stop(deadline: .now.advanced(by: .seconds(10)))
        #expect(done)
        #expect(dying.died, "node A's connection was killed inside a chunk")
        print("measure settlement effects kill: node A applied \(dying.calls - 1) chunks before it died")

        for reportId in reportIds {
            #expect(try StoredEvent.all(poolA, objectId: reportId).map(\.type) == ["settlement_report.completed"])
        }
        #expect(try LedgerFixture.count(poolA, "settlement_effects") == Self.effectsPerReport * Self.merchants.count)
        let actual = try Self.snapshot(poolA)
        #expect(actual == expected, "\(zip(actual, expected).filter { $0 != $1 })")
    }
}

/// Hands effects on to `base`; on its `dieOnCall`-th call it terminates its own database session first,
/// so that chunk's transaction dies with the connection.
private final class DyingSink: SettlementEffectSink {
    let base: FinanceSettlementSink
    let dieOnCall: Int
    private let state = Mutex<(calls: Int, died: Bool)>((0, false))
    init(base: FinanceSettlementSink, dieOnCall: Int) {
        self.base = base
        self.dieOnCall = dieOnCall
    }
    var calls: Int { state.withLock { $0.calls } }
    var died: Bool { state.withLock { $0.died } }

    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        try apply(effects.map { .book($0, version: 0) }, merchantId: merchantId, on: conn, now: now)
    }

    func apply(_ actions: [SettlementEffectAction], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let call = state.withLock { state -> Int in
            state.calls += 1
            return state.calls
        }
        try base.apply(actions, merchantId: merchantId, on: conn, now: now)
        guard call == dieOnCall else { return }
        // The chunk's work is done but not committed when the session goes.
        state.withLock { $0.died = true }
        _ = try conn.query("SELECT pg_terminate_backend(pg_backend_pid())")
        throw TenderError("test_node_killed", "the session was terminated")
    }

    func postingKeys(of effect: FinanceEffect, version: Int, merchantId: String) -> [String] {
        base.postingKeys(of: effect, version: version, merchantId: merchantId)
    }
}
