import Foundation
import Testing
@testable import Postgres

extension PostgresIntegration {
    @Suite struct Listener {
        @Test func receivesNotificationsOnQuotedChannelNames() throws {
            let channel = "tender \"odd\"; chan " + UUID().uuidString.prefix(8)
            let other = "plain_" + UUID().uuidString.prefix(8)
            let listener = PostgresListener(configuration: TestDatabase.configuration(), channels: [channel, other])
            defer { listener.close() }
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            #expect(listener.wait(timeoutMilliseconds: 0).notifications.isEmpty)
            _ = try pool.query("SELECT pg_notify($1, $2), pg_notify($3, '')", [channel, "payment 42", other])
            var received: [PostgresNotification] = []
            let deadline = Date().addingTimeInterval(5)
            while received.count < 2, Date() < deadline {
                received += listener.wait(timeoutMilliseconds: 500).notifications
            }
            #expect(received.map(\.channel) == [channel, other])
            #expect(received.map(\.payload) == ["payment 42", ""])
            let started = Date()
            let quiet = listener.wait(timeoutMilliseconds: 200)
            #expect(quiet.notifications.isEmpty && !quiet.reconnected)
            #expect(Date().timeIntervalSince(started) >= 0.15)
        }

        /// Queued notifications go out once, in order, after COMMIT (never inside it, never after a rollback);
        /// outside a transaction at once.
        @Test func notificationsQueuedInATransactionGoOutAfterItCommits() throws {
            let channel = "tender_after_" + UUID().uuidString.prefix(8)
            let listener = PostgresListener(configuration: TestDatabase.configuration(), channels: [channel])
            defer { listener.close() }
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            #expect(listener.wait(timeoutMilliseconds: 0).notifications.isEmpty)
            func drain(_ count: Int) -> [String] {
                var payloads: [String] = []
                let deadline = Date().addingTimeInterval(5)
                while payloads.count < count, Date() < deadline {
                    payloads += listener.wait(timeoutMilliseconds: 200).notifications.map(\.payload)
                }
                payloads += listener.wait(timeoutMilliseconds: 200).notifications.map(\.payload)
                return payloads
            }
            struct Refused: Error {}
            #expect(throws: Refused.self) {
                try pool.transaction { connection in
                    connection.notifyAfterCommit(channel: channel, payload: "rolled back")
                    throw Refused()
                }
            }
            try pool.transaction { connection in
                _ = try connection.query("SELECT 1")
                connection.notifyAfterCommit(channel: channel, payload: "a")
                connection.notifyAfterCommit(channel: channel, payload: "b")
                connection.notifyAfterCommit(channel: channel, payload: "a")
                #expect(listener.wait(timeoutMilliseconds: 300).notifications.isEmpty, "nothing before COMMIT")
            }
            #expect(drain(2) == ["a", "b"])
            try pool.withConnection { connection in connection.notifyAfterCommit(channel: channel, payload: "now") }
            #expect(drain(1) == ["now"])
            try pool.transaction { connection in _ = try connection.query("SELECT 1") }
            #expect(drain(0).isEmpty, "a later transaction on the pooled session sends nothing left over")
        }

        @Test func closeWakesAWaitingThread() {
            let listener = PostgresListener(configuration: TestDatabase.configuration(), channels: ["tender_close"])
            let started = Date()
            let waiter = BackgroundThread { _ = listener.wait(timeoutMilliseconds: 10_000) }
            Thread.sleep(forTimeInterval: 0.1)
            listener.close()
            waiter.join()
            #expect(Date().timeIntervalSince(started) < 5)
            #expect(listener.wait(timeoutMilliseconds: 1_000).notifications.isEmpty)
        }
    }

    /// Restarts the shared PostgreSQL once and checks both the pool and the listener recover.
    @Test(.enabled(if: TestDatabase.restartCommand != nil, "TENDER_TEST_PG_RESTART is not set"))
    func poolAndListenerSurviveADatabaseRestart() throws {
        let channel = "tender_restart_" + UUID().uuidString.prefix(8)
        let pool = PostgresPool(configuration: TestDatabase.configuration { $0.connectionsMax = 2 })
        let listener = PostgresListener(configuration: TestDatabase.configuration(), channels: [channel])
        defer { pool.close(); listener.close() }
        let table = TestDatabase.tableName("restart")
        try pool.execute(SQL(unsafeSQL: "CREATE TABLE \(table) (id int4)"))
        _ = try pool.query("SELECT pg_notify($1, 'before')", [channel])
        #expect(listener.wait(timeoutMilliseconds: 5_000).notifications.map(\.payload) == ["before"])
        #expect(pool.stats.idle == 1)

        TestDatabase.restart(try #require(TestDatabase.restartCommand))

        // A plain, non-idempotent statement on the pool succeeds: the stale idle connection is
        // discarded at checkout, before anything is sent.
        #expect(try pool.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1)")) == 1)
        #expect(try pool.transaction { connection in
            try connection.query(SQL(unsafeSQL: "SELECT count(*) FROM \(table)")).first?.decode(0, as: Int.self)
        } == 1)

        var reconnected = false
        let deadline = Date().addingTimeInterval(15)
        while !reconnected, Date() < deadline {
            let result = listener.wait(timeoutMilliseconds: 500)
            #expect(result.notifications.isEmpty)
            reconnected = result.reconnected
        }
        #expect(reconnected)
        _ = try pool.query("SELECT pg_notify($1, 'after')", [channel])
        var payloads: [String] = []
        let afterDeadline = Date().addingTimeInterval(5)
        while payloads.isEmpty, Date() < afterDeadline {
            payloads += listener.wait(timeoutMilliseconds: 500).notifications.map(\.payload)
        }
        #expect(payloads == ["after"])
    }
}
