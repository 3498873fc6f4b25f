import Foundation
import Synchronization
import Testing
@testable import Postgres

extension PostgresIntegration {
    @Suite struct Pool {
        @Test func acquireTimesOutWhenTheOnlyConnectionIsHeld() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration {
                $0.connectionsMax = 1
                $0.acquireTimeoutMilliseconds = 300
                $0.allowNestedAcquisitionForTesting = true
            })
            defer { pool.close() }
            try pool.withConnection { _ in
                let started = Date()
                expectPostgresError(.poolTimeout) { _ = try pool.query("SELECT 1") }
                let elapsed = Date().timeIntervalSince(started)
                #expect(elapsed >= 0.25, "gave up before the acquire timeout")
                #expect(elapsed < 3, "waited far past the acquire timeout")
                #expect(pool.stats.waiting == 0, "a timed-out waiter must leave the queue")
            }
            #expect(try pool.query("SELECT 1 AS one").first?.decode("one", as: Int.self) == 1)
        }

        @Test func waitQueueOverflowFailsAtOnceWithPoolExhausted() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration {
                $0.connectionsMax = 1
                $0.waitQueueMax = 1
                $0.acquireTimeoutMilliseconds = 10_000
                $0.allowNestedAcquisitionForTesting = true
            })
            defer { pool.close() }
            let queuedResult = Mutex<Int?>(nil)
            var queued: BackgroundThread?
            try pool.withConnection { _ in
                // At the boundary: one waiter fits in the queue.
                queued = BackgroundThread {
                    let value = try? pool.query("SELECT 7 AS seven").first?.decode("seven", as: Int.self)
                    queuedResult.withLock { $0 = value }
                }
                #expect(eventually { pool.stats.waiting == 1 })
                // Just past it: the next caller is refused without waiting.
                let started = Date()
                expectPostgresError(.poolExhausted) { _ = try pool.query("SELECT 1") }
                #expect(Date().timeIntervalSince(started) < 1)
                #expect(pool.stats.inUse == 1)
            }
            queued?.join()
            #expect(eventually { queuedResult.withLock { $0 } == 7 })
            #expect(eventually { pool.stats.inUse == 0 && pool.stats.waiting == 0 })
        }

        #if DEBUG
        @Test func eachThreadsHeldConnectionsAreCounted() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            #expect(pool.heldConnections.heldByCurrentThread == 0)
            try pool.transaction { _ in
                #expect(pool.heldConnections.heldByCurrentThread == 1)
                let other = BackgroundThread { #expect(pool.heldConnections.heldByCurrentThread == 0) }
                other.join()
            }
            #expect(pool.heldConnections.heldByCurrentThread == 0)
        }
        #endif

        @Test func waitersAreServedInArrivalOrder() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration {
                $0.connectionsMax = 1
                $0.acquireTimeoutMilliseconds = 10_000
            })
            defer { pool.close() }
            let order = Mutex<[Int]>([])
            var threads: [BackgroundThread] = []
            try pool.withConnection { _ in
                for index in 0..<4 {
                    threads.append(BackgroundThread {
                        try? pool.withConnection { _ in order.withLock { $0.append(index) } }
                    })
                    #expect(eventually { pool.stats.waiting == index + 1 })
                }
            }
            threads.forEach { $0.join() }
            #expect(order.withLock { $0 } == [0, 1, 2, 3])
        }

        @Test func closedPoolRefusesAcquisition() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            _ = try pool.query("SELECT 1")
            #expect(pool.stats.idle == 1)
            pool.close()
            #expect(pool.stats.idle == 0)
            expectPostgresError(.poolClosed) { _ = try pool.query("SELECT 1") }
        }

        @Test func unreachableDatabaseFailsWithConnectionFailed() {
            let pool = PostgresPool(configuration: PostgresConfiguration(
                connectionString: "postgresql://tender@127.0.0.1:1/nowhere?connect_timeout=2"))
            defer { pool.close() }
            expectPostgresError(.connectionFailed) { _ = try pool.query("SELECT 1") }
            #expect(pool.stats.inUse == 0, "a failed connect must give its slot back")
            expectPostgresError(.connectionFailed) {
                _ = try PostgresPool(configuration: PostgresConfiguration(connectionString: "postgresql://[bad")).query("SELECT 1")
            }
        }

        @Test func statementTimeoutCancelsLongStatements() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration { $0.statementTimeoutMilliseconds = 200 })
            defer { pool.close() }
            let started = Date()
            let error = expectPostgresError(.statementTimeout) { _ = try pool.query("SELECT pg_sleep(5)") }
            #expect(error?.sqlState == "57014")
            #expect(Date().timeIntervalSince(started) < 4)
            // Inside a transaction the limit comes from SET LOCAL (the pgbouncer-safe path).
            expectPostgresError(.statementTimeout) {
                _ = try pool.transaction { connection in try connection.query("SELECT pg_sleep(5)") }
            }
            #expect(try pool.query("SHOW statement_timeout").first?.decode(0, as: String.self) == "200ms")
            #expect(pool.stats.idle >= 1, "a cancelled statement leaves a reusable connection")
        }

        @Test func parameterCountLimitHoldsAtAndPastTheBoundary() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let limit = PostgresConnection.parametersMax
            let placeholders = (1...limit).map { "$\($0)::int4" }.joined(separator: ",")
            let values: [any PostgresEncodable] = (0..<limit).map { Int32($0) }
            let sql = SQL(unsafeSQL: "SELECT array_length(ARRAY[\(placeholders)], 1) AS n")
            #expect(try pool.query(sql, values).first?.decode("n", as: Int.self) == limit)
            let error = expectPostgresError(.queryFailed) { _ = try pool.query(sql, values + [Int32(0)]) }
            #expect(error?.sqlState == nil, "refused before reaching the server")
        }

        @Test func concurrentUseFromManyThreads() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration {
                $0.connectionsMax = 3
                $0.acquireTimeoutMilliseconds = 20_000
            })
            defer { pool.close() }
            let table = TestDatabase.tableName("concurrent")
            try pool.execute(SQL(unsafeSQL: "CREATE TABLE \(table) (thread int4, n int4, PRIMARY KEY (thread, n))"))
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (thread, n) VALUES ($1, $2)")
            let failures = Mutex<[String]>([])
            let peakInUse = Mutex(0)
            onThreads(8) { thread in
                for n in 0..<25 {
                    do {
                        try pool.execute(insert, [Int32(thread), Int32(n)])
                        let inUse = pool.stats.inUse
                        peakInUse.withLock { $0 = max($0, inUse) }
                    } catch {
                        failures.withLock { $0.append(String(describing: error)) }
                    }
                }
            }
            #expect(failures.withLock { $0 } == [])
            #expect(try pool.query(SQL(unsafeSQL: "SELECT count(*) AS c FROM \(table)")).first?.decode("c", as: Int.self) == 200)
            let stats = pool.stats
            #expect(stats.inUse == 0)
            #expect(stats.idle <= 3)
            #expect(peakInUse.withLock { $0 } <= 3)
        }

        @Test func terminatedIdleConnectionIsReplacedOnCheckout() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration { $0.connectionsMax = 1 })
            let admin = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close(); admin.close() }
            let pid = try #require(try pool.query("SELECT pg_backend_pid() AS pid").first?.decode("pid", as: Int32.self))
            #expect(try admin.query("SELECT pg_terminate_backend($1, 5000) AS ok", [pid]).first?.decode("ok", as: Bool.self) == true)
            // Not idempotent, so never retried: it succeeds because checkout validation noticed the
            // dead session before anything was sent.
            let newPid = try #require(try pool.query("SELECT pg_backend_pid() AS pid").first?.decode("pid", as: Int32.self))
            #expect(newPid != pid)
        }

        @Test func idempotentStatementIsRetriedOnceOnAStaleConnectionOthersAreNot() throws {
            let admin = PostgresPool(configuration: TestDatabase.configuration())
            defer { admin.close() }
            let settings = try ConnectSettings.make(TestDatabase.configuration()).get()
            func staleConnection() throws -> PostgresConnection {
                let connection = try PostgresConnection.open(settings)
                let pid = try #require(try connection.query("SELECT pg_backend_pid()").first?.decode(0, as: Int32.self))
                _ = try admin.query("SELECT pg_terminate_backend($1, 5000)", [pid])
                // As if it came from the idle list and validation missed it (e.g. a silent network drop).
                connection.beginCheckout(reused: true)
                return connection
            }
            let retried = try staleConnection()
            #expect(try retried.query(SQL(idempotent: "SELECT 42 AS answer")).first?.decode("answer", as: Int.self) == 42)

            let notRetried = try staleConnection()
            expectPostgresError(.connectionFailed) { _ = try notRetried.query("SELECT 42 AS answer") }
            #expect(notRetried.resetForReuse() == false, "a connection that failed must be discarded")

            // Inside a transaction nothing is retried, even an idempotent statement.
            let inTransaction = try PostgresConnection.open(settings)
            inTransaction.beginCheckout(reused: true)
            try inTransaction.simpleQuery("BEGIN")
            let pid = try #require(try inTransaction.query("SELECT pg_backend_pid()").first?.decode(0, as: Int32.self))
            _ = try admin.query("SELECT pg_terminate_backend($1, 5000)", [pid])
            expectPostgresError(.connectionFailed) { _ = try inTransaction.query(SQL(idempotent: "SELECT 1")) }
        }
    }
}
