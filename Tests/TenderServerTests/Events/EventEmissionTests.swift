import Foundation
import Postgres
import Testing
@testable import TenderServer

private let genericHeader = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

/// `checkout_session.expired` and `settlement_report.completed` are written in the transaction that makes
/// the change, and are absent when that transaction rolls back (docs/events.md).
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct EventEmissionTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    /// Moves a session's expiry into the past.
    static func overdue(_ f: CheckoutFixture, _ sessionId: String) throws {
        _ = try f.server.pool.execute("UPDATE checkout_sessions SET expires_at = now() - interval '1 second' WHERE session_id = $1",
                                      [sessionId])
    }

    static func status(_ f: CheckoutFixture, _ sessionId: String) throws -> String? {
        try f.query("SELECT status FROM checkout_sessions WHERE session_id = $1", [sessionId]).first?.decode("status")
    }

    @Test func sweeperExpiresOverdueSessionsWithTheirEventInBoundedBatches() throws {
        let f = try CheckoutFixture("ev_sweep")
        defer { f.stop() }
        let ids = try (0..<3).map { _ in try #require(try f.createSession(usdCart())["id"] as? String) }
        let fresh = try #require(try f.createSession(usdCart())["id"] as? String)
        for id in ids { try Self.overdue(f, id) }

        #expect(try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 2, now: Self.now) == 2)
        #expect(try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 2, now: Self.now) == 1)
        #expect(try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 2, now: Self.now) == 0)

        for id in ids {
            #expect(try Self.status(f, id) == "expired")
            let events = try StoredEvent.all(f.server.pool, objectId: id)
            #expect(events.count == 1)
            #expect(events.first?.type == "checkout_session.expired")
            // data.object is the session exactly as its GET returns it.
            let get = try f.call("GET", "/v1/checkout-sessions/\(id)")
            #expect(get.status == 200)
            #expect(sameJSON(try #require(events.first).object(), try get.json()))
            #expect(try #require(events.first).object()["status"] as? String == "expired")
            let envelope = jsonObject(Array(try #require(events.first).body.utf8))
            #expect(envelope["createdAt"] as? String == "2026-09-21T14:13:20.000Z")
            #expect((envelope["id"] as? String)?.hasPrefix("evt_") == true)
        }
        #expect(try Self.status(f, fresh) == "open")
        #expect(try StoredEvent.all(f.server.pool, objectId: fresh).isEmpty)
    }

    @Test func theSweeperServiceExpiresWhatBecomesOverdueAndStops() throws {
        let f = try CheckoutFixture("ev_sweep_svc")
        defer { f.stop() }
        let sweeper = SessionExpirySweeper(pool: f.server.pool, settings: .init(intervalMilliseconds: 20, batchMax: 1),
                                           logger: .silent, now: { Self.now })
        try sweeper.start()
        let ids = try (0..<3).map { _ in try #require(try f.createSession(usdCart())["id"] as? String) }
        for id in ids { try Self.overdue(f, id) }
        var expired = 0
        for _ in 0..<200 where expired < 3 {
            expired = try f.query("SELECT count(*)::int AS n FROM checkout_sessions WHERE status = 'expired'", [])
                .first?.decode("n") ?? 0
            if expired < 3 { usleep(20_000) }
        }
        #expect(sweeper.stop(deadline: .now.advanced(by: .seconds(5))))
        #expect(expired == 3)
        #expect(try StoredEvent.all(f.server.pool).map(\.type) == Array(repeating: "checkout_session.expired", count: 3))
    }

    @Test func sweeperSkipsASessionAnotherTransactionHolds() throws {
        let f = try CheckoutFixture("ev_skip")
        defer { f.stop() }
        let held = try #require(try f.createSession(usdCart())["id"] as? String)
        let free = try #require(try f.createSession(usdCart())["id"] as? String)
        try Self.overdue(f, held)
        try Self.overdue(f, free)
        let swept: Int = try f.server.pool.transaction { conn in
            _ = try conn.query("SELECT 1 FROM checkout_sessions WHERE session_id = $1 FOR UPDATE", [held])
            return try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 10, now: Self.now)
        }
        #expect(swept == 1)
        #expect(try Self.status(f, free) == "expired")
        #expect(try Self.status(f, held) == "open")
        #expect(try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 10, now: Self.now) == 1)
        #expect(try StoredEvent.all(f.server.pool, objectId: held).count == 1)
    }

    @Test func aSweepThatRollsBackLeavesNeitherTheExpiryNorItsEvent() throws {
        let f = try CheckoutFixture("ev_sweep_rb")
        defer { f.stop() }
        let id = try #require(try f.createSession(usdCart())["id"] as? String)
        try Self.overdue(f, id)
        try ForcedCommitFailure.install(f.server.pool)
        #expect(throws: PostgresError.self) { try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 10, now: Self.now) }
        #expect(try Self.status(f, id) == "open")
        #expect(try StoredEvent.all(f.server.pool).isEmpty)

        try ForcedCommitFailure.remove(f.server.pool)
        #expect(try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 10, now: Self.now) == 1)
        #expect(try StoredEvent.all(f.server.pool, objectId: id).map(\.type) == ["checkout_session.expired"])
    }

    @Test func anUpdateThatFindsItsSessionOverdueExpiresItWithTheEvent() throws {
        let f = try CheckoutFixture("ev_upd")
        defer { f.stop() }
        let id = try #require(try f.createSession(usdCart())["id"] as? String)
        try Self.overdue(f, id)
        let update = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-method", ["shippingMethod": ["identifier": "express"]])
        #expect(update.status == 410)
        #expect(try update.json()["code"] as? String == "session_expired")
        #expect(try Self.status(f, id) == "expired")
        let events = try StoredEvent.all(f.server.pool, objectId: id)
        #expect(events.map(\.type) == ["checkout_session.expired"])
        // Neither a second update nor a sweep writes it again.
        _ = try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-method", ["shippingMethod": ["identifier": "express"]])
        #expect(try SessionExpiry.sweepBatch(pool: f.server.pool, batchMax: 10, now: Self.now) == 0)
        #expect(try StoredEvent.all(f.server.pool, objectId: id).count == 1)
    }

    @Test func settlementReportCompletedIsWrittenWhenItsEffectsAreBookedAndNotOnRollback() throws {
        let s = try RunningServer(prefix: "ev_recon")
        defer { s.stop() }
        let (merchant, key) = try s.merchantWithKey()
        let paid = fixtureId("pay_", "evrecon")
        try LedgerFixture.payment(s.pool, merchantId: merchant.merchantId, id: paid, amountMinor: 1_000)
        let csv = genericHeader + "2024-03-02,B1,payment,\(paid),psp_\(paid),USD,10.00,0.30,9.70\n"
            + "2024-03-02,B1,fee,,,USD,0.00,1.25,1.25\n"
        let client = try RawHTTPClient(port: s.port)
        let auth = [("Authorization", "Bearer \(key)")]

        // Phase 2's last transaction fails at COMMIT: the report stays pending and has no event.
        try ForcedCommitFailure.install(s.pool)
        let failed = try client.request("POST", "/v1/settlement-reports?format=generic",
                                        headers: auth + [("Content-Type", "text/csv")], body: Array(csv.utf8))
        #expect(failed.status >= 500)
        let reportId: String = try #require(try s.pool.query("SELECT report_id FROM settlement_reports").first?.decode("report_id"))
        let pending = try client.request("GET", "/v1/settlement-reports/\(reportId)", headers: auth)
        #expect(try pending.json()["effectsPending"] as? Bool == true)
        #expect(try StoredEvent.all(s.pool).isEmpty)

        // The effects service finishes it: the event is written with the report as its GET now returns it.
        try ForcedCommitFailure.remove(s.pool)
        let store = SettlementReportStore(pool: s.pool, sink: s.app.settlementEffectSink)
        SettlementEffectsService.pass(store: store, logger: .silent, now: Self.now, shouldStop: { false })
        let events = try StoredEvent.all(s.pool, objectId: reportId)
        #expect(events.map(\.type) == ["settlement_report.completed"])
        let get = try client.request("GET", "/v1/settlement-reports/\(reportId)", headers: auth)
        #expect(try get.json()["effectsPending"] as? Bool == false)
        #expect(sameJSON(try #require(events.first).object(), try get.json()))

        // The same bytes again replay the report and write nothing.
        let replay = try client.request("POST", "/v1/settlement-reports?format=generic",
                                        headers: auth + [("Content-Type", "text/csv")], body: Array(csv.utf8))
        #expect(replay.status == 200)
        #expect(try StoredEvent.all(s.pool).count == 1)
    }

    @Test func anImportThatCompletesWritesItsEventOnce() throws {
        let s = try RunningServer(prefix: "ev_recon_ok")
        defer { s.stop() }
        let (_, key) = try s.merchantWithKey()
        let csv = genericHeader + "2024-03-02,B7,fee,,,USD,0.00,1.25,1.25\n"
        let created = try RawHTTPClient(port: s.port).request(
            "POST", "/v1/settlement-reports?format=generic",
            headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "text/csv")], body: Array(csv.utf8))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(try created.json()["id"] as? String)
        let events = try StoredEvent.all(s.pool)
        #expect(events.map(\.type) == ["settlement_report.completed"])
        #expect(events.first?.objectId == id)
        #expect(sameJSON(try #require(events.first).object(), try created.json()))
    }
}
