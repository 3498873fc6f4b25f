import Foundation
import Testing
@testable import Postgres

extension PostgresIntegration {
    /// `executeAndCommit`: the transaction's last statement and its COMMIT in one round trip, with the
    /// same error meanings as a COMMIT sent on its own.
    @Suite struct CommitPipeline {
        private func setUp(_ prefix: String, prepared: Bool = true) throws -> (PostgresPool, String) {
            let pool = PostgresPool(configuration: TestDatabase.configuration {
                $0.connectionsMax = 1
                $0.preparedStatements = prepared
            })
            let table = TestDatabase.tableName(prefix)
            try pool.withConnection { try $0.simpleQuery(SQL(unsafeSQL: "CREATE TABLE \(table) (id int4 PRIMARY KEY)")) }
            return (pool, table)
        }

        private func ids(_ pool: PostgresPool, _ table: String) throws -> [Int] {
            try pool.query(SQL(unsafeSQL: "SELECT id FROM \(table) ORDER BY id")).rows.map { try $0.decode(0, as: Int.self) }
        }

        @Test func theLastStatementCarriesTheCommit() throws {
            let (pool, table) = try setUp("cp_trips")
            defer { pool.close() }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            let read = SQL(unsafeSQL: "SELECT count(*) FROM \(table)", preparable: true)
            _ = try pool.transaction { conn in
                _ = try conn.query(read)
                return try conn.executeAndCommit(insert, [Int32(1)])
            }
            var trips: [Int] = []
            var affected: [Int] = []
            for id: Int32 in [2, 3] {
                let before = PostgresCounters.roundTripsOnThisThread
                affected.append(try pool.transaction { conn in
                    _ = try conn.query(read)
                    return try conn.executeAndCommit(insert, [id])
                })
                trips.append(PostgresCounters.roundTripsOnThisThread - before)
            }
            // BEGIN with the read, the insert with COMMIT: two round trips, where three were before.
            #expect(trips == [2, 2])
            #expect(affected == [1, 1])
            // As the first statement too: BEGIN, the insert and COMMIT in one.
            let before = PostgresCounters.roundTripsOnThisThread
            _ = try pool.transaction { conn in try conn.executeAndCommit(insert, [Int32(4)]) }
            #expect(PostgresCounters.roundTripsOnThisThread - before == 1)
            #expect(try ids(pool, table) == [1, 2, 3, 4])
        }

        @Test func aStatementErrorRollsBackAndLeavesTheConnectionUsable() throws {
            let (pool, table) = try setUp("cp_fail")
            defer { pool.close() }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            _ = try pool.transaction { conn in try conn.executeAndCommit(insert, [Int32(1)]) }
            let error = expectPostgresError(.queryFailed) {
                _ = try pool.transaction { conn in
                    try conn.execute(insert, [Int32(2)])
                    try conn.executeAndCommit(insert, [Int32(1)])
                }
            }
            #expect(error?.isUniqueViolation == true)
            #expect(try ids(pool, table) == [1], "the earlier insert of the failed transaction rolled back")
            #expect(pool.stats.idle == 1)
        }

        @Test func aCommitRefusedByTheServerIsCommitFailed() throws {
            let (pool, table) = try setUp("cp_refused")
            defer { pool.close() }
            try pool.withConnection { conn in
                try conn.simpleQuery(SQL(unsafeSQL: """
                    ALTER TABLE \(table) ADD COLUMN k int4;
                    ALTER TABLE \(table) ADD CONSTRAINT \(table)_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED
                    """))
            }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id, k) VALUES ($1, 7)", preparable: true)
            let error = expectPostgresError(.transactionCommitFailed) {
                _ = try pool.transaction { conn in
                    try conn.execute(insert, [Int32(1)])
                    try conn.executeAndCommit(insert, [Int32(2)])
                }
            }
            #expect(error?.sqlState == "23505")
            #expect(try ids(pool, table) == [])
            #expect(pool.stats.idle == 1)
        }

        @Test func aLostSessionAtCommitIsCommitUnknown() throws {
            let (pool, table) = try setUp("cp_unknown")
            defer { pool.close() }
            try TestDatabase.killBackendAtCommit(of: table, pool: pool)
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            expectPostgresError(.transactionCommitUnknown) {
                _ = try pool.transaction { conn in
                    _ = try conn.query("SELECT 1")
                    try conn.executeAndCommit(insert, [Int32(1)])
                }
            }
            #expect(pool.stats.inUse == 0 && pool.stats.idle == 0, "the dead connection is discarded")
            #expect(try ids(pool, table) == [])
        }

        @Test func nothingRunsAfterTheCommitAndNotificationsFollowIt() throws {
            let (pool, table) = try setUp("cp_after")
            defer { pool.close() }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            expectPostgresError(.statementAfterCommit) {
                try pool.transaction { conn in
                    try conn.executeAndCommit(insert, [Int32(1)])
                    _ = try conn.query("SELECT 1")
                }
            }
            // The insert committed before the misuse was refused.
            #expect(try ids(pool, table) == [1])
            let listener = try PostgresConnection.open(try ConnectSettings.make(TestDatabase.configuration()).get())
            let channel = table + "_wake"
            try listener.listen(channel: channel)
            let before = PostgresCounters.roundTripsOnThisThread
            _ = try pool.transaction { conn in
                conn.notifyAfterCommit(channel: channel, payload: "after")
                try conn.executeAndCommit(insert, [Int32(2)])
            }
            // BEGIN, the insert, COMMIT and the wake-up's own transaction after it: one round trip.
            #expect(PostgresCounters.roundTripsOnThisThread - before == 1)
            var received: [PostgresNotification] = []
            #expect(eventually {
                received += listener.consumeNotifications(limit: 8).notifications
                return !received.isEmpty
            })
            #expect(received.map(\.payload) == ["after"])
        }

        @Test func aRefusedWakeUpLeavesTheCommitAndTheConnectionAlone() throws {
            let (pool, table) = try setUp("cp_wake_refused")
            defer { pool.close() }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            // PostgreSQL refuses a payload of 8000 bytes or more: the wake-up's transaction fails after the COMMIT.
            let affected = try pool.transaction { conn in
                conn.notifyAfterCommit(channel: table + "_wake", payload: String(repeating: "x", count: 9_000))
                return try conn.executeAndCommit(insert, [Int32(1)])
            }
            #expect(affected == 1)
            #expect(try ids(pool, table) == [1])
            #expect(pool.stats.idle == 1, "the connection went back to the pool, idle")
            _ = try pool.transaction { conn in try conn.executeAndCommit(insert, [Int32(2)]) }
            #expect(try ids(pool, table) == [1, 2])
        }

        @Test func withoutTheStatementCacheTheCommitIsSentOnItsOwn() throws {
            let (pool, table) = try setUp("cp_plain", prepared: false)
            defer { pool.close() }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)")
            let before = PostgresCounters.roundTripsOnThisThread
            let affected = try pool.transaction { conn in try conn.executeAndCommit(insert, [Int32(1)]) }
            #expect(affected == 1)
            #expect(PostgresCounters.roundTripsOnThisThread - before == 3)  // BEGIN, the insert, COMMIT
            #expect(try ids(pool, table) == [1])
        }
    }
}
