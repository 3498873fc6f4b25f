import Foundation
import HTTPServer
import Postgres
import Testing
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// Round trips of one payment, and the commit-unknown answers of the two transactions whose last statement
/// carries its COMMIT (`executeAndCommit`, `queryAndCommit`).
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"), .serialized)
struct PaymentRoundTripTests {
    /// The request as the router hands it to the payments route (run on the test's own thread, so the
    /// thread's round-trip counter counts this payment alone).
    private func request(_ h: PaymentsHarness, _ s: SessionFixture, key: String, bearer: String? = nil) throws -> HTTPRequest {
        var request = HTTPRequest(method: "POST", path: "/v1/checkout-sessions/\(s.sessionId)/payments",
                                  headers: HTTPHeaders([("Authorization", "Bearer \(bearer ?? h.apiKey)"),
                                                        ("Content-Type", "application/json"), ("Idempotency-Key", key)]),
                                  body: PaymentsHarness.body(token: try h.token(for: s)))
        request.pathParameters["id"] = s.sessionId
        return request
    }

    private func roundTrips(_ body: () throws -> HTTPResponse) throws -> (Int, HTTPResponse) {
        let before = PostgresCounters.roundTripsOnThisThread
        let response = try body()
        return (PostgresCounters.roundTripsOnThisThread - before, response)
    }

    /// With the API key: the key's read; phase 1 in two (the session locked with the key's claim, the payment
    /// insert with COMMIT); the simulator's one; phase 3 in two (the outcome and its outbox event with BEGIN,
    /// the key's response with COMMIT and the event's wake-up). With the client secret,
    /// one more: the session read that names the merchant whose key decrypts the token.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["TENDER_DB_PREPARED_STATEMENTS"] != "off",
                   "without prepared statements nothing is pipelined: BEGIN and COMMIT are round trips of their own"))
    func onePaymentTakesAnExactNumberOfRoundTrips() throws {
        let h = try PaymentsHarness(prefix: "pay_trips", connectionsMax: 1)
        defer { h.stop() }
        // Warm up: every statement prepared on the one connection (a replay's too), the API key's last use fresh.
        for i in 0..<3 {
            let s = try h.session()
            let warm = try request(h, s, key: "warm-\(i)")
            #expect(try h.service.createPayment(warm).status == 200)
            #expect(try h.service.createPayment(warm).status == 200)
        }
        let s = try h.session()
        let counted = try request(h, s, key: "counted")
        let (trips, response) = try roundTrips { try h.service.createPayment(counted) }
        #expect(response.status == 200)
        #expect(trips == 6)
        let secret = try h.session()
        let (secretTrips, secretResponse) = try roundTrips {
            try h.service.createPayment(try request(h, secret, key: "counted-secret", bearer: secret.clientSecret))
        }
        #expect(secretResponse.status == 200)
        #expect(secretTrips == 7)
        // A replay reads the key under the session lock and answers from it: the key's read, one statement
        // with BEGIN, the key's row, COMMIT.
        let (replayTrips, replay) = try roundTrips { try h.service.createPayment(counted) }
        #expect(replay.status == 200)
        #expect(replay.headers["Idempotent-Replayed"] == "true")
        #expect(replay.body == response.body)
        #expect(replayTrips == 4)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM payments", []) == 5)
    }

    /// Phase 1's COMMIT, sent with the payment insert, never answers: 503 `transaction_outcome_unknown`; the
    /// transaction did not commit, so a retry with the same key pays once.
    @Test func aLostAcceptCommitIsOutcomeUnknownAndTheRetryPaysOnce() throws {
        let h = try PaymentsHarness(prefix: "pay_lost_accept")
        defer { h.stop() }
        try dieAtCommit(h, table: "payments", when: "true")
        let s = try h.session()
        let token = try h.token(for: s)
        let lost = try h.pay(s, token: token, key: "lost-accept")
        #expect(lost.status == 503, "\(lost.text)")
        #expect(try lost.json()["code"] as? String == "transaction_outcome_unknown")
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM payments", []) == 0)
        try h.pool.withConnection { try $0.simpleQuery("DROP TRIGGER die_at_commit ON payments") }
        let retried = try h.pay(s, token: token, key: "lost-accept")
        #expect(retried.status == 200, "\(retried.text)")
        try expectPaidOnce(h, s, retried)
    }

    /// Phase 3's COMMIT, sent with the key's response, never answers: 503 `transaction_outcome_unknown`; the
    /// retry with the same key (once the key's lock has run out) re-sends with the same processor key and
    /// records the outcome once: one charge, one payment, one event.
    @Test func aLostOutcomeCommitIsOutcomeUnknownAndTheRetryRecordsItOnce() throws {
        var settings = PaymentsHarness.fastSettings
        settings.keyLockMilliseconds = 500
        let h = try PaymentsHarness(prefix: "pay_lost_outcome", settings: settings)
        defer { h.stop() }
        try dieAtCommit(h, table: "idempotency_keys", when: "NEW.finished_at IS NOT NULL")
        let s = try h.session()
        let token = try h.token(for: s)
        let lost = try h.pay(s, token: token, key: "lost-outcome")
        #expect(lost.status == 503, "\(lost.text)")
        #expect(try lost.json()["code"] as? String == "transaction_outcome_unknown")
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM payments WHERE status = 'pending'", []) == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM events", []) == 0)
        try h.pool.withConnection { try $0.simpleQuery("DROP TRIGGER die_at_commit ON idempotency_keys") }
        var statuses: [Int] = []
        var final: RawResponse?
        let started = Date()
        while Date().timeIntervalSince(started) < 10 {
            let r = try h.pay(s, token: token, key: "lost-outcome")
            statuses.append(r.status)
            if r.status == 200 { final = r; break }
            #expect(r.status == 409, "\(r.text)")
            usleep(100_000)
        }
        let retried = try #require(final, "statuses \(statuses)")
        try expectPaidOnce(h, s, retried)
        let paymentId = try #require(retried.payment?["id"] as? String)
        #expect(try h.simulatorCalls(paymentId: paymentId) == 2, "the lost attempt and the retry, with one key")
    }

    /// Phase 3 forecasts the row phase 1 left; when another holder moved it meanwhile (here: marked it for an
    /// operator), the statement's row differs, the transaction rolls back with its event, and the outcome is
    /// recorded as read: one event, whose object is the payment as GET shows it.
    @Test func aMissedForecastRollsBackAndRecordsTheOutcomeAsRead() throws {
        let h = try PaymentsHarness(prefix: "pay_forecast")
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_008)  // the simulator's unknown-outcome ending: left pending
        let pending = try h.pay(s, token: try h.token(for: s), key: "forecast")
        #expect(pending.status == 202, "\(pending.text)")
        let paymentId = try #require(pending.payment?["id"] as? String)
        let stale = try #require(try h.pool.withConnection { try PaymentRecord.load(paymentId, on: $0) })
        #expect(try h.pool.execute("UPDATE payments SET needs_operator_at = now() WHERE payment_id = $1", [paymentId]) == 1)
        let response = try h.service.recordOutcome(paymentId: paymentId,
                                                   outcome: .approved(processorReference: "sim_forecast", authorizationCode: nil),
                                                   pending: stale)
        #expect(response.status == 200)
        let events = try h.pool.query("SELECT body FROM events WHERE object_id = $1 AND event_type = 'payment.succeeded'",
                                      [paymentId]).rows
        #expect(events.count == 1)
        let body = try #require(events.first).decode("body", as: String.self)
        let object = try #require((try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["data"]
            as? [String: Any])?["object"] as? [String: Any]
        #expect(object?["needsOperator"] as? Bool == true)
        #expect(object?["processorReference"] as? String == "sim_forecast")
        let shown = try h.get("/v1/payments/\(paymentId)").json()
        #expect(shown["status"] as? String == "succeeded")
        #expect(shown["needsOperator"] as? Bool == true)
    }

    /// A constraint trigger that kills its own backend at COMMIT when a row of `table` was written (`when`).
    private func dieAtCommit(_ h: PaymentsHarness, table: String, when condition: String) throws {
        try h.pool.withConnection { conn in
            try conn.simpleQuery(SQL(unsafeSQL: """
                CREATE OR REPLACE FUNCTION test_die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM pg_terminate_backend(pg_backend_pid());
                    PERFORM pg_sleep(5);
                    RETURN NULL;
                END $$;
                CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT OR UPDATE ON \(table)
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (\(condition)) EXECUTE FUNCTION test_die_at_commit();
                """))
        }
    }

    private func expectPaidOnce(_ h: PaymentsHarness, _ s: SessionFixture, _ response: RawResponse) throws {
        let paymentId = try #require(response.payment?["id"] as? String)
        #expect(response.payment?["status"] as? String == "succeeded")
        #expect(try h.simulatorCharges(paymentId: paymentId) == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", []) == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM payments", []) == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM events WHERE object_id = $1 AND event_type = 'payment.succeeded'",
                             [paymentId]) == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM checkout_sessions WHERE session_id = $1 AND status = 'paid'",
                             [s.sessionId]) == 1)
    }
}
