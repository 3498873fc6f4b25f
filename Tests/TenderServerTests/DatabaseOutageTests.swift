import Foundation
import Postgres
import Testing
@testable import TenderServer

@Suite struct DatabaseProblemTests {
    /// One row per failure class: what a client sees, never a 500 for anything an outage causes.
    @Test(arguments: [
        (PostgresError(code: .transactionCommitUnknown, message: "lost"), 503, "transaction_outcome_unknown"),
        (PostgresError(code: .connectionFailed, message: "down"), 503, "database_unavailable"),
        (PostgresError(code: .transactionBeginFailed, message: "BEGIN failed (connection_failed)"), 503, "database_unavailable"),
        (PostgresError(code: .poolTimeout, message: "busy"), 503, "database_unavailable"),
        (PostgresError(code: .queryFailed, message: "shutdown", sqlState: "57P01"), 503, "database_unavailable"),
        (PostgresError(code: .queryFailed, message: "too many", sqlState: "53300"), 503, "database_unavailable"),
        (PostgresError(code: .transactionCommitFailed, message: "serialization", sqlState: "40001"), 503, "database_unavailable"),
        (PostgresError(code: .queryFailed, message: "bug", sqlState: "42703"), 500, "internal_error"),
        (PostgresError(code: .decodeFailed, message: "bug"), 500, "internal_error"),
    ])
    func eachFailureClassMapsToItsProblem(error: PostgresError, status: Int, code: String) {
        let problem = TenderApp.problem(for: error)
        #expect(problem.status == status, "\(error.code.rawValue)")
        #expect(problem.code == code, "\(error.code.rawValue)")
        #expect((problem.headers["Retry-After"] != nil) == (status == 503), "\(error.code.rawValue)")
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct DatabaseOutageTests {
    /// The server process of the transaction dies during its COMMIT (a deferred trigger terminates its
    /// own backend), so Tender cannot know whether it committed: 503 + Retry-After, and the retry with
    /// the same key creates the session exactly once.
    @Test func commitWithUnknownOutcomeIs503AndTheRetryIsSafe() throws {
        let f = try CheckoutFixture("outage_commit")
        defer { f.stop() }
        try f.server.pool.withConnection { conn in
            try conn.simpleQuery(SQL(unsafeSQL: """
                CREATE FUNCTION test_die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM pg_terminate_backend(pg_backend_pid());
                    PERFORM pg_sleep(5);
                    RETURN NULL;
                END $$;
                CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT ON checkout_sessions
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_die_at_commit();
                """))
        }
        let body = [UInt8](try JSONSerialization.data(withJSONObject: usdCart()))
        let headers = [("Authorization", "Bearer \(f.key)"), ("Idempotency-Key", "order-outage-1")]
        let lost = try f.client().request("POST", "/v1/checkout-sessions", headers: headers, body: body)
        #expect(lost.status == 503, "\(lost.text)")
        #expect(lost.header("Retry-After") == "1")
        #expect(try lost.json()["code"] as? String == "transaction_outcome_unknown")

        try f.server.pool.withConnection { conn in
            try conn.simpleQuery("DROP TRIGGER die_at_commit ON checkout_sessions")
        }
        let retried = try f.client().request("POST", "/v1/checkout-sessions", headers: headers, body: body)
        #expect(retried.status == 201, "\(retried.text)")
        let again = try f.client().request("POST", "/v1/checkout-sessions", headers: headers, body: body)
        #expect(again.status == 201)
        #expect(again.header("Idempotent-Replayed") == "true")
        #expect(try again.json()["id"] as? String == (try retried.json()["id"] as? String))
        let count: Int64 = try #require(try f.query("SELECT count(*) AS n FROM checkout_sessions", []).first).decode("n")
        #expect(count == 1)
    }
}
