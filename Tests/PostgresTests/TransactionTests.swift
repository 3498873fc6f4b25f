import Foundation
import Testing
@testable import Postgres

extension PostgresIntegration {
    @Suite struct Transactions {
        private func setUp(_ prefix: String) throws -> (PostgresPool, String) {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            let table = TestDatabase.tableName(prefix)
            try pool.execute(SQL(unsafeSQL: "CREATE TABLE \(table) (id int4 PRIMARY KEY)"))
            return (pool, table)
        }

        private func count(_ pool: PostgresPool, _ table: String) throws -> Int {
            try pool.query(SQL(unsafeSQL: "SELECT count(*) FROM \(table)")).first?.decode(0, as: Int.self) ?? -1
        }

        @Test func committedWorkIsVisible() throws {
            let (pool, table) = try setUp("tx_commit")
            defer { pool.close() }
            let value = try pool.transaction(isolation: .serializable) { connection in
                try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1), ($2)"), [1, 2])
                return try connection.query("SHOW transaction_isolation").first?.decode(0, as: String.self)
            }
            #expect(value == "serializable")
            #expect(try count(pool, table) == 2)
        }

        @Test func bodyErrorRollsBackAndSurfacesUnchanged() throws {
            let (pool, table) = try setUp("tx_rollback")
            defer { pool.close() }
            #expect(throws: TestFailure(marker: "declined")) {
                try pool.transaction { connection in
                    try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1)"))
                    throw TestFailure(marker: "declined")
                }
            }
            #expect(try count(pool, table) == 0)
            // A statement error inside the body also surfaces as itself, and the connection is reusable.
            let error = expectPostgresError(.queryFailed) {
                try pool.transaction { connection in
                    _ = try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1), (1)"))
                }
            }
            #expect(error?.sqlState == "23505")
            #expect(try count(pool, table) == 0)
            #expect(pool.stats.idle == 1)
        }

        @Test func commitRejectedByServerIsCommitFailed() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let table = TestDatabase.tableName("tx_deferred")
            try pool.execute(SQL(unsafeSQL: """
                CREATE TABLE \(table) (id int4 CONSTRAINT \(table)_id_key UNIQUE DEFERRABLE INITIALLY DEFERRED)
                """))
            // The deferred unique check runs at COMMIT, so PostgreSQL itself refuses the commit.
            let error = expectPostgresError(.transactionCommitFailed) {
                try pool.transaction { connection in
                    _ = try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1), (1)"))
                }
            }
            #expect(error?.sqlState == "23505")
            #expect(error?.constraint == "\(table)_id_key")
            #expect(try pool.query(SQL(unsafeSQL: "SELECT count(*) FROM \(table)")).first?.decode(0, as: Int.self) == 0)
        }

        @Test func connectionLostDuringCommitIsCommitUnknown() throws {
            let (pool, table) = try setUp("tx_unknown")
            defer { pool.close() }
            // A deferred constraint trigger runs inside COMMIT and kills its own backend, so the
            // client never learns whether the commit happened.
            try TestDatabase.killBackendAtCommit(of: table, pool: pool)
            let error = expectPostgresError(.transactionCommitUnknown) {
                try pool.transaction { connection in
                    _ = try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1)"))
                }
            }
            #expect(error?.isSerializationFailure == false)
            #expect(pool.stats.inUse == 0 && pool.stats.idle == 0, "the dead connection is discarded")
            #expect(try count(pool, table) == 0)
        }

        @Test func swallowedErrorMakesCommitFail() throws {
            let (pool, table) = try setUp("tx_swallow")
            defer { pool.close() }
            expectPostgresError(.transactionCommitFailed) {
                try pool.transaction { connection in
                    try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1)"))
                    _ = try? connection.query("SELECT 1/0")
                }
            }
            #expect(try count(pool, table) == 0)
        }

        @Test func lostConnectionDuringBodySurfacesAndPoolRecovers() throws {
            let (pool, table) = try setUp("tx_lost")
            let admin = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close(); admin.close() }
            expectPostgresError(.connectionFailed) {
                try pool.transaction { connection in
                    try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1)"))
                    let pid = try connection.query("SELECT pg_backend_pid()").first?.decode(0, as: Int32.self)
                    _ = try admin.query("SELECT pg_terminate_backend($1, 5000)", [pid])
                    try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (2)"))
                }
            }
            #expect(try count(pool, table) == 0)
            #expect(pool.stats.inUse == 0)
        }

        @Test func openTransactionLeftByWithConnectionIsRolledBack() throws {
            let (pool, table) = try setUp("tx_leftover")
            defer { pool.close() }
            try pool.withConnection { connection in
                try connection.simpleQuery("BEGIN")
                try connection.execute(SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES (1)"))
            }
            #expect(try count(pool, table) == 0)
            #expect(pool.stats.idle == 1)
        }
    }
}
