import Foundation
import Postgres
import Testing
@testable import TenderServer

/// deploy/cluster/: while no database primary is reachable a node's `/readyz` answers 503 (so HAProxy
/// sends it nothing), and the same pool serves again once a primary answers, without a restart.
/// `make cluster-test` proves the same through a real Patroni failover.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct ReadinessWithoutPrimaryTests {
    @Test func readinessFailsWhileNoDatabaseAnswersAndRecoversWithoutARestart() throws {
        let s = try RunningServer(prefix: "srv_noprimary")
        defer { s.stop() }
        let database: String = try #require(try s.pool.query("SELECT current_database() AS name").first).decode("name")
        let admin = PostgresPool(configuration: PostgresConfiguration(connectionString: TestEnvironment.databaseURL ?? ""))
        defer { admin.close() }
        func allowConnections(_ allow: Bool) throws {
            try admin.withConnection { conn in
                try conn.simpleQuery(SQL(unsafeSQL: "ALTER DATABASE \(database) WITH ALLOW_CONNECTIONS \(allow)"))
            }
        }
        #expect(try RawHTTPClient(port: s.port).request("GET", "/readyz").status == 200)

        // As when the primary dies: every open connection is cut and no new one is accepted.
        try allowConnections(false)
        defer { try? allowConnections(true) }
        _ = try admin.query("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()
            """, [database])
        let down = try RawHTTPClient(port: s.port).request("GET", "/readyz")
        #expect(down.status == 503)
        #expect(try down.json()["code"] as? String == "database_unavailable")
        #expect(try RawHTTPClient(port: s.port).request("GET", "/healthz").status == 200)

        // A primary answers again: the same pool reconnects on its next checkout.
        try allowConnections(true)
        var status = 0
        for _ in 0..<50 {
            status = try RawHTTPClient(port: s.port).request("GET", "/readyz").status
            if status == 200 { break }
            usleep(100_000)
        }
        #expect(status == 200)
    }
}
