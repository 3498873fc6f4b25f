import Foundation
import Testing
@testable import Postgres

extension PostgresIntegration {
    @Suite struct PreparedStatements {
        static func open(prepared: Bool, max: Int = 256) throws -> PostgresConnection {
            let settings = try ConnectSettings.make(TestDatabase.configuration {
                $0.preparedStatements = prepared
                $0.preparedStatementsMax = max
            }).get()
            return try PostgresConnection.open(settings)
        }

        /// The statements this session holds prepared, read without preparing anything.
        static func serverSide(_ connection: PostgresConnection) throws -> Int {
            try connection.query(SQL(unsafeSQL: "SELECT count(*) FROM pg_prepared_statements")).first?.decode(0, as: Int.self) ?? -1
        }

        @Test func preparedAndUnnamedGiveTheSameResults() throws {
            let prepared = try Self.open(prepared: true)
            let unnamed = try Self.open(prepared: false)
            let uuid = UUID()
            let at = Date(timeIntervalSince1970: 1_709_251_198.123456)
            let statements: [(SQL, [any PostgresEncodable])] = [
                ("SELECT $1::text AS s, $2::int8 AS i, $3::bool AS b", ["grüße 'x'", Int64.min, true]),
                ("SELECT $1::text IS NULL AS n, $2::uuid AS u, $3::timestamptz AS at", [String?.none, uuid, at]),
                ("SELECT x FROM unnest($1::int8[]) AS x ORDER BY x DESC", ["{3,1,2}"]),
                ("SELECT 1 WHERE false", []),
            ]
            for _ in 0..<7 {  // past PostgreSQL's five custom plans, so a generic plan is in use too
                for (sql, parameters) in statements {
                    let a = try prepared.query(sql, parameters)
                    let b = try unnamed.query(sql, parameters)
                    #expect(a.rows.map(\.values) == b.rows.map(\.values))
                    #expect(a.affectedRows == b.affectedRows)
                }
            }
            #expect(prepared.preparedStatementCount == statements.count)
            #expect(try Self.serverSide(prepared) == statements.count)
            #expect(unnamed.preparedStatementCount == 0)
            #expect(try Self.serverSide(unnamed) == 0)
        }

        @Test func theCacheIsBoundedAndEvictedStatementsAreDeallocated() throws {
            let connection = try Self.open(prepared: true, max: 3)
            for round in 0..<2 {
                for value in 0..<5 {
                    let sql = SQL(unsafeSQL: "SELECT \(value) AS v", preparable: true)
                    #expect(try connection.query(sql).first?.decode("v", as: Int.self) == value, "round \(round)")
                }
            }
            #expect(connection.preparedStatementCount == 3)
            #expect(connection.resetForReuse())
            #expect(try Self.serverSide(connection) == 3)
        }

        @Test func aReconnectEmptiesTheCache() throws {
            let admin = PostgresPool(configuration: TestDatabase.configuration())
            defer { admin.close() }
            let connection = try Self.open(prepared: true)
            let pidSQL = SQL(idempotent: "SELECT pg_backend_pid() AS pid")
            let pid = try #require(try connection.query(pidSQL).first?.decode("pid", as: Int32.self))
            #expect(connection.preparedStatementCount == 1)
            _ = try admin.query("SELECT pg_terminate_backend($1, 5000)", [pid])
            connection.beginCheckout(reused: true)
            // Retried on the reset session, which has no statements: prepared there afresh.
            let newPid = try #require(try connection.query(pidSQL).first?.decode("pid", as: Int32.self))
            #expect(newPid != pid)
            #expect(connection.preparedStatementCount == 1)
            #expect(try Self.serverSide(connection) == 1)
        }

        @Test func errorsLeaveTheConnectionUsable() throws {
            let connection = try Self.open(prepared: true)
            // Refused at prepare: nothing cached, the session stays idle and usable.
            let refused = expectPostgresError(.queryFailed) { _ = try connection.query("SELECT no_such_column_x") }
            #expect(refused?.sqlState == "42703")
            #expect(connection.preparedStatementCount == 0)
            // Refused at execution of a prepared statement: still cached, runs again.
            let divide: SQL = "SELECT 10 / $1::int AS q"
            let failed = expectPostgresError(.queryFailed) { _ = try connection.query(divide, [Int32(0)]) }
            #expect(failed?.sqlState == "22012")
            #expect(try connection.query(divide, [Int32(5)]).first?.decode("q", as: Int.self) == 2)
            #expect(connection.preparedStatementCount == 1)
            #expect(connection.resetForReuse())
        }

        @Test func anAbortedTransactionRollsBackAndTheCacheSurvivesIt() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration {
                $0.connectionsMax = 1
                $0.preparedStatements = true
            })
            defer { pool.close() }
            let table = TestDatabase.tableName("prep_tx")
            try pool.withConnection { try $0.simpleQuery(SQL(unsafeSQL: "CREATE TABLE \(table) (id int PRIMARY KEY)")) }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            let count = SQL(unsafeSQL: "SELECT count(*) FROM \(table)", preparable: true)
            _ = try pool.transaction { try $0.execute(insert, [Int32(1)]) }
            // A duplicate key (execution error) and a refused prepare, each inside a transaction.
            let duplicate = expectPostgresError(.queryFailed) {
                try pool.transaction { conn in
                    try conn.execute(insert, [Int32(2)])
                    try conn.execute(insert, [Int32(1)])
                }
            }
            #expect(duplicate?.isUniqueViolation == true)
            expectPostgresError(.queryFailed) {
                try pool.transaction { conn in
                    try conn.execute(insert, [Int32(3)])
                    _ = try conn.query("SELECT no_such_column_y")
                }
            }
            _ = try pool.transaction { try $0.execute(insert, [Int32(4)]) }
            #expect(try pool.query(count).first?.decode(0, as: Int.self) == 2)
            let (cached, onServer) = try pool.withConnection { conn throws -> (Int, Int) in
                (conn.preparedStatementCount, try Self.serverSide(conn))
            }
            #expect(cached == 2 && onServer == 2)
        }

        @Test func aSchemaChangeOrALostStatementIsPreparedAgain() throws {
            let connection = try Self.open(prepared: true)
            let table = TestDatabase.tableName("prep_schema")
            try connection.simpleQuery(SQL(unsafeSQL: "CREATE TABLE \(table) (a int); INSERT INTO \(table) VALUES (1)"))
            let all = SQL(unsafeSQL: "SELECT * FROM \(table)", preparable: true)
            #expect(try connection.query(all).first?.values == ["1"])
            try connection.simpleQuery(SQL(unsafeSQL: "ALTER TABLE \(table) ADD COLUMN b text DEFAULT 'x'"))
            // Outside a transaction: 0A000 ("cached plan must not change result type"), prepared again, re-sent.
            #expect(try connection.query(all).first?.values == ["1", "x"])
            try connection.simpleQuery(SQL(unsafeSQL: "ALTER TABLE \(table) ADD COLUMN c int DEFAULT 7"))
            // Inside a transaction the error aborts it; the next use prepares afresh.
            try connection.simpleQuery("BEGIN")
            let stale = expectPostgresError(.queryFailed) { _ = try connection.query(all) }
            #expect(stale?.sqlState == "0A000")
            #expect(connection.rollbackQuietly())
            #expect(try connection.query(all).first?.values == ["1", "x", "7"])
            // A session that lost its statements (DEALLOCATE ALL): 26000, prepared again.
            try connection.simpleQuery("DEALLOCATE ALL")
            #expect(try connection.query(all).first?.values == ["1", "x", "7"])
            #expect(connection.resetForReuse())
            #expect(try Self.serverSide(connection) == 1)
        }

        @Test func aTransactionSendsBeginWithItsFirstStatement() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration { $0.connectionsMax = 1 })
            defer { pool.close() }
            let table = TestDatabase.tableName("prep_begin")
            try pool.withConnection { try $0.simpleQuery(SQL(unsafeSQL: "CREATE TABLE \(table) (id int PRIMARY KEY)")) }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            _ = try pool.transaction { try $0.execute(insert, [Int32(1)]) }  // prepares
            let firstPid = try pool.query(SQL(unsafeSQL: "SELECT pg_backend_pid()")).first?.decode(0, as: Int32.self)
            var trips: [Int] = []
            for id: Int32 in [2, 5] {
                let before = PostgresCounters.roundTrips
                let level = try pool.transaction(isolation: .repeatableRead) { conn -> String in
                    try conn.execute(insert, [id])
                    return try conn.query(SQL(idempotent: "SELECT current_setting('transaction_isolation') AS l"))
                        .first?.decode("l") ?? ""
                }
                #expect(level == "repeatable read")
                trips.append(PostgresCounters.roundTrips - before)
            }
            // BEGIN with the insert, the read (prepared first the first time), COMMIT.
            #expect(trips == [4, 3])
            // The statement timeout is set in the transaction, as before.
            let timeout = try pool.transaction { conn -> String in
                try conn.query(SQL(idempotent: "SELECT current_setting('statement_timeout') AS t")).first?.decode("t") ?? ""
            }
            #expect(timeout == "5s")
            // A transaction that sends nothing, one whose first command is a script, one that fails first.
            _ = try pool.transaction { _ in 0 }
            try pool.transaction { try $0.simpleQuery(SQL(unsafeSQL: "INSERT INTO \(table) VALUES (3)")) }
            let duplicate = expectPostgresError(.queryFailed) { _ = try pool.transaction { try $0.execute(insert, [Int32(1)]) } }
            #expect(duplicate?.isUniqueViolation == true)
            expectPostgresError(.queryFailed) { _ = try pool.transaction { try $0.query("SELECT no_such_column_z") } }
            let count = SQL(unsafeSQL: "SELECT count(*) FROM \(table)", preparable: true)
            #expect(try pool.transaction { try $0.query(count).first?.decode(0, as: Int.self) } == 4)
            let pidSQL = SQL(unsafeSQL: "SELECT pg_backend_pid()")
            #expect(try pool.query(pidSQL).first?.decode(0, as: Int32.self) == firstPid)  // every failure left it reusable
        }

        @Test func aTransactionOnAStaleConnectionIsSentAgainOnTheResetSession() throws {
            let admin = PostgresPool(configuration: TestDatabase.configuration())
            defer { admin.close() }
            let table = TestDatabase.tableName("prep_stale")
            try admin.withConnection { try $0.simpleQuery(SQL(unsafeSQL: "CREATE TABLE \(table) (id int PRIMARY KEY)")) }
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id) VALUES ($1)", preparable: true)
            let connection = try Self.open(prepared: true)
            let pid = try #require(try connection.query("SELECT pg_backend_pid()").first?.decode(0, as: Int32.self))
            _ = try admin.query("SELECT pg_terminate_backend($1, 5000)", [pid])
            connection.beginCheckout(reused: true)
            // Not idempotent, yet re-sent: the BEGIN travels with it and no COMMIT had been sent.
            try connection.begin(isolation: .readCommitted, statementTimeoutMilliseconds: 5_000)
            try connection.execute(insert, [Int32(1)])
            try connection.commit()
            #expect(try admin.query(SQL(unsafeSQL: "SELECT count(*) FROM \(table)")).first?.decode(0, as: Int.self) == 1)
        }

        @Test func roundTripsAreCounted() throws {
            let connection = try Self.open(prepared: true)
            let before = (PostgresCounters.roundTrips, PostgresCounters.prepares)
            for _ in 0..<3 { _ = try connection.query("SELECT 'counted' AS c") }
            // Other tests run concurrently in this process only outside this serialized suite.
            #expect(PostgresCounters.prepares - before.1 >= 1)
            #expect(PostgresCounters.roundTrips - before.0 >= 4)
        }
    }
}
