import FinanceStore
import Foundation
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// The commit-ordered feed (docs/finance-feed.md): no merchant's feed waits on anybody else's open
/// transaction, every change is fed once in commit order, a restart of the writer resumes from the
/// slot, and v1 tokens keep working or are refused exactly.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct FinanceFeedTests {
    /// The amounts of `account`'s feed from the origin, in delivery order, once `count` have arrived.
    static func amounts(_ s: FinanceTestServer, account: FinanceID, key: String, count: Int) throws -> [Int64] {
        try FinanceShellTests.follow(s, account: account, key: key, from: nil) { $0.count >= count }
            .transactions.map(\.transactionAmount.amountMinor)
    }

    /// Every finance_change row has exactly one feed position (change_seq is unique by schema, so this
    /// is "none lost"), and positions follow commit order within each source transaction's rows.
    static func expectFedOnce(_ s: FinanceTestServer, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let deadline = Date().addingTimeInterval(30)
        var missing = -1
        while Date() < deadline {
            missing = try s.pool.query("""
                SELECT count(*)::int AS n FROM finance_change c
                 WHERE NOT EXISTS (SELECT 1 FROM finance_feed f WHERE f.change_seq = c.seq)
                """).first?.decode("n", as: Int.self) ?? -1
            if missing == 0 { break }
            usleep(20_000)
        }
        #expect(missing == 0, sourceLocation: sourceLocation)
        let extra = try s.pool.query("""
            SELECT count(*)::int AS n FROM finance_feed f
             WHERE NOT EXISTS (SELECT 1 FROM finance_change c WHERE c.seq = f.change_seq)
            """).first?.decode("n", as: Int.self)
        #expect(extra == 0, sourceLocation: sourceLocation)
    }

    @Test func aLongTransactionInAnotherDatabaseDoesNotDelayTheFeed() throws {
        let s = try FinanceTestServer(prefix: "feed_otherdb")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        try s.record([Events.paid("pay_0", 100)], merchant: merchant)
        #expect(try Self.amounts(s, account: account, key: key, count: 1) == [100])

        // A write transaction holding an xid in another database of the cluster, open throughout.
        let other = PostgresPool(configuration: PostgresConfiguration(connectionString: try TestEnvironment.freshDatabase("feed_blocker")))
        defer { other.close() }
        let opened = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let released = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            try? other.transaction { conn in
                try conn.simpleQuery("CREATE TABLE held (id int)")
                _ = try conn.query("SELECT pg_current_xact_id()::text")
                opened.signal()
                release.wait()
            }
            finished.signal()
        }.start()
        opened.wait()
        try s.record([Events.paid("pay_1", 200)], merchant: merchant)
        let seen = try Self.amounts(s, account: account, key: key, count: 2)
        let stillOpen = !released.load(ordering: .acquiring)
        #expect(stillOpen)
        #expect(seen == [100, 200])  // delivered while the other database's transaction is still open
        released.store(true, ordering: .releasing)
        release.signal()
        finished.wait()
    }

    @Test func anotherMerchantsLargeOpenImportDoesNotDelayTheFeed() throws {
        let s = try FinanceTestServer(prefix: "feed_import")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let (importer, importerKey) = try s.merchant("Importer")
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        let importerAccount = FinanceTestServer.settlementAccountID(merchant: importer)
        let lines = 5_000
        let opened = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<String?>(nil)
        Thread {
            do {
                try s.pool.transaction { conn in
                    // One transaction of settlement-style batches, open while the other merchant pays.
                    let recorder = FinanceRecorder()
                    for first in stride(from: 0, to: lines, by: 5_000) {
                        let events = (first..<(first + 5_000)).map { Events.paid("imp_\($0)", Int64(1 + $0 % 50)) }
                        _ = try recorder.apply(events, merchantId: importer, on: conn, now: Date(), missingPostings: .fail)
                    }
                    // A rolled-back subtransaction inside the streamed transaction is never fed.
                    try conn.simpleQuery("SAVEPOINT undone")
                    _ = try recorder.apply([Events.paid("undone_1", 9), Events.paid("undone_2", 9)], merchantId: importer,
                                           on: conn, now: Date(), missingPostings: .fail)
                    try conn.simpleQuery("ROLLBACK TO SAVEPOINT undone")
                    opened.signal()
                    release.wait()
                }
            } catch {
                failure.withLock { $0 = String(describing: error) }
                opened.signal()
            }
            finished.signal()
        }.start()
        opened.wait()
        try s.record([Events.paid("pay_1", 4_242)], merchant: merchant)
        let seen = try Self.amounts(s, account: account, key: key, count: 1)
        #expect(seen == [4_242])  // delivered while the import's transaction is still open
        release.signal()
        finished.wait()
        #expect(failure.withLock { $0 } == nil)
        // The import arrives whole, once: every line is one insert in its account's feed.
        let imported = try FinanceShellTests.follow(s, account: importerAccount, key: importerKey, from: nil) { $0.count >= lines }
        #expect(imported.transactions.count == lines)
        #expect(Set(imported.transactions.map(\.id)).count == lines)
        #expect(!imported.transactions.contains { $0.originalTransactionDescription.contains("undone") })
        try Self.expectFedOnce(s)
        // The import exceeded the session's logical_decoding_work_mem: it reached the writer while it ran.
        let streamed = try s.pool.query("SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = $1",
                                        [try s.app.finance.ingest.slotName()]).first?.decode("stream_txns", as: Int64.self)
        #expect((streamed ?? 0) > 0)
    }

    /// Two writers with steps begin (takes an xid), write, commit, in every one of the 20 interleavings:
    /// each change is fed once, and the feed's positions follow commit order, not xid order.
    @Test func everyInterleavingOfTwoWritersIsFedOnceInCommitOrder() throws {
        let s = try FinanceTestServer(prefix: "feed_interleave", connectionsMax: 16)
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let accounts = ["sim", "sim2"].map { FinanceTestServer.settlementAccountID(merchant: merchant, processor: $0) }
        // Both accounts exist first, so the two writers touch disjoint rows and never wait on each other.
        try s.record([Events.paid("seed_a", 1, processor: "sim"), Events.paid("seed_b", 1, processor: "sim2")], merchant: merchant)

        var interleavings: [[Int]] = []
        func build(_ prefix: [Int], _ left: [Int]) {
            if left == [0, 0] { interleavings.append(prefix); return }
            for writer in 0..<2 where left[writer] > 0 {
                var rest = left
                rest[writer] -= 1
                build(prefix + [writer], rest)
            }
        }
        build([], [3, 3])
        #expect(interleavings.count == 20)

        for (round, schedule) in interleavings.enumerated() {
            let connections = try (0..<2).map { _ in try PostgresConnectionHolder(s.pool) }
            var step = [0, 0]
            var commitOrder: [Int] = []
            for writer in schedule {
                let conn = connections[writer]
                switch step[writer] {
                case 0:
                    try conn.run("BEGIN")
                    _ = try conn.query("SELECT pg_current_xact_id()::text")
                case 1:
                    try conn.record(Events.paid("r\(round)_w\(writer)", Int64(1_000 * round + writer + 10),
                                                processor: writer == 0 ? "sim" : "sim2"), merchant: merchant)
                default:
                    try conn.run("COMMIT")
                    commitOrder.append(writer)
                }
                step[writer] += 1
            }
            connections.forEach { $0.close() }
            let ids = commitOrder.map { "r\(round)_w\($0)" }
            // The positions of the two payments' transaction rows, in feed order.
            let deadline = Date().addingTimeInterval(30)
            var fed: [String] = []
            while Date() < deadline {
                fed = try s.pool.query("""
                    SELECT t.posting_key FROM finance_feed f
                      JOIN finance_transaction t ON t.merchant_id = f.merchant_id AND t.id = f.entity_id
                     WHERE f.merchant_id = $1 AND f.scope_kind = 'transactions' AND t.posting_key = ANY($2::text[])
                     ORDER BY f.position
                    """, [merchant, "{" + ids.map { "payment:\($0)" }.joined(separator: ",") + "}"])
                    .rows.map { try $0.decode("posting_key", as: String.self) }
                if fed.count >= 2 { break }
                usleep(5_000)
            }
            #expect(fed == ids.map { "payment:\($0)" }, "schedule \(schedule)")
        }
        // Through the API: each account's feed has every payment of its writer once.
        for (writer, account) in accounts.enumerated() {
            let page = try FinanceShellTests.follow(s, account: account, key: key, from: nil) { $0.count >= 21 }
            let descriptions = page.transactions.map(\.originalTransactionDescription)
            #expect(descriptions.count == 21)
            #expect(Set(descriptions).count == 21)
            #expect(descriptions.filter { $0.contains("_w\(writer)") }.count == 20)
        }
        try Self.expectFedOnce(s)
    }

    /// Payments keep arriving while the writer's stream is cut (its walsender terminated, as a crash of
    /// the connection) and while the writer itself is replaced by a new one (a restart of the process):
    /// afterwards every change is fed exactly once and the feed delivers every payment once.
    @Test func aRestartOfTheWriterMidStreamResumesWithoutLossOrDuplicate() throws {
        let s = try FinanceTestServer(prefix: "feed_restart", connectionsMax: 16)
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        let total = 300
        let written = Atomic<Int>(0)
        let writer = Thread {
            for i in 0..<total {
                try? s.record([Events.paid("pay_\(i)", Int64(i + 1))], merchant: merchant)
                written.add(1, ordering: .releasing)
                usleep(2_000)
            }
        }
        writer.start()
        while written.load(ordering: .acquiring) < total / 4 { usleep(5_000) }
        // Cut the stream: the writer reconnects and resumes from the slot.
        let slot = try s.app.finance.ingest.slotName()
        _ = try s.pool.query("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", [slot])
        while written.load(ordering: .acquiring) < total / 2 { usleep(5_000) }
        // Replace the writer: a second one (as after a restart) takes the slot once the first lets go.
        s.app.finance.ingest.stop()
        let second = FinanceFeedIngest(pool: s.pool, logger: .silent)
        second.start()
        defer { second.stop() }
        while written.load(ordering: .acquiring) < total { usleep(5_000) }
        try Self.expectFedOnce(s)
        let amounts = try Self.amounts(s, account: account, key: key, count: total)
        #expect(amounts.count == total)
        #expect(Set(amounts) == Set((1...total).map { Int64($0) }))
        #expect(second.status.rowsFed > 0)
    }

    /// A node that does not stream counts the feed as behind from the last time it saw another process
    /// stream the slot, not from its own start: when the streaming node dies, the others stay ready
    /// while one of them takes the slot over (a cluster must not go unready all at once).
    @Test func aStandbyNodeStaysReadyWhenTheStreamingNodeStops() throws {
        let s = try FinanceTestServer(prefix: "feed_standby", connectionsMax: 8)
        defer { s.stop() }
        var settings = FinanceFeedIngest.Settings()
        settings.lagSecondsMax = 1
        let standby = FinanceFeedIngest(pool: s.pool, logger: .silent, settings: settings)
        // Older than the bound before the streaming process goes away.
        usleep(1_500_000)
        let before = try standby.health()
        #expect(before.slotActive && !before.streamingHere)
        #expect(before.problem(settings) == nil)
        s.app.finance.ingest.stop()
        // PostgreSQL marks the slot inactive once the walsender has gone: read until it says so (each
        // read that still finds it streamed moves the standby's last sight forward).
        var after = try standby.health()
        for _ in 0..<100 where after.slotActive {
            usleep(50_000)
            after = try standby.health()
        }
        #expect(!after.slotActive)
        #expect(after.lagSeconds < 1, "counted from the last sight of a streaming process: \(after.lagSeconds) s")
        #expect(after.problem(settings) == nil)
        // Nobody takes over: past the bound it is the alarm again.
        usleep(1_200_000)
        #expect(try standby.health().problem(settings) == "finance_feed_not_streaming")
    }

    @Test func aV1TokenResumesAtItsFeedPositionOrIsRefusedWith410() throws {
        let s = try FinanceTestServer(prefix: "feed_v1", connectionsMax: 16)
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        // A: takes its xid first, commits last. B and C commit in between.
        let a = try PostgresConnectionHolder(s.pool)
        try a.run("BEGIN")
        _ = try a.query("SELECT pg_current_xact_id()::text")
        try s.record([Events.paid("pay_b", 2)], merchant: merchant)
        try s.record([Events.paid("pay_c", 3)], merchant: merchant)
        try a.record(Events.paid("pay_a", 1), merchant: merchant)
        try a.run("COMMIT")
        a.close()
        #expect(try Self.amounts(s, account: account, key: key, count: 3) == [2, 3, 1])

        let rows = try s.pool.query("""
            SELECT f.xid::text AS xid, f.change_seq, t.transaction_amount FROM finance_feed f
              JOIN (SELECT id, amount_minor AS transaction_amount FROM finance_transaction WHERE merchant_id = $1) t
                ON t.id = f.entity_id
             WHERE f.merchant_id = $1 AND f.scope_kind = 'transactions' ORDER BY f.position
            """, [merchant]).rows
        let byAmount = Dictionary(uniqueKeysWithValues: try rows.map {
            (try $0.decode("transaction_amount", as: Int64.self),
             HistoryPosition(epoch: 1, xid: UInt64(try $0.decode("xid", as: String.self)) ?? 0, seq: try $0.decode("change_seq")))
        })
        let codec = try s.app.finance.codec()
        let scope = try HistoryScope(merchantID: merchant, resource: .transactions, accountID: account)
        let now = FinanceTimestamp(secondsSinceEpoch: Int64(Date().timeIntervalSince1970))
        let path = "/v1/finance/transactions/history?accountID=\(account)"

        // v1 at C delivered every row at or before C in (xid, seq) order: A (lowest xid), B and C, which
        // is the whole feed (B, C, A): it resumes after everything.
        let atC = codec.issue(scope: scope, position: try #require(byAmount[3]), now: now)
        let afterC = try decode(DecodedPage<Transaction>.self, try s.get(path + "&since=\(atC)", key: key).body)
        #expect(afterC.inserted.isEmpty && afterC.updated.isEmpty)
        #expect(afterC.newToken.hasPrefix("hst2."))
        // v1 at B: delivered {A, B}, which is not a prefix of the feed (B, C, A): refused, never guessed.
        let atB = codec.issue(scope: scope, position: try #require(byAmount[2]), now: now)
        let refused = try s.get(path + "&since=\(atB)", key: key)
        #expect(refused.status == 410)
        #expect(try refused.json()["code"] as? String == "history_token_invalid")
        // A v1 token from before any of them (the origin): everything, once.
        let origin = codec.issue(scope: scope, position: .origin(epoch: 1), now: now)
        let all = try decode(DecodedPage<Transaction>.self, try s.get(path + "&since=\(origin)", key: key).body)
        #expect(all.inserted.map(\.transactionAmount.amountMinor) == [2, 3, 1])
    }

    @Test func aSlotLostOrFarBehindIsAnAlarm() {
        var settings = FinanceFeedIngest.Settings()
        settings.lagSecondsMax = 30
        settings.lagBytesMax = 1_000
        let rows: [(String, FinanceFeedHealth, String?)] = [
            ("healthy", FinanceFeedHealth(slotExists: true, slotActive: true, walStatus: "reserved", lagBytes: 10), nil),
            ("lost", FinanceFeedHealth(slotExists: true, slotActive: false, walStatus: "lost"), "finance_feed_slot_lost"),
            ("unreserved", FinanceFeedHealth(slotExists: true, slotActive: true, walStatus: "unreserved"), "finance_feed_slot_lost"),
            ("nobody streams", FinanceFeedHealth(slotExists: true, slotActive: false, walStatus: "reserved", lagSeconds: 31),
             "finance_feed_not_streaming"),
            ("bytes behind", FinanceFeedHealth(slotExists: true, slotActive: true, walStatus: "reserved", lagBytes: 1_001),
             "finance_feed_lagging"),
            ("seconds behind", FinanceFeedHealth(slotExists: true, slotActive: true, walStatus: "extended", lagSeconds: 31),
             "finance_feed_lagging"),
            ("at the bound", FinanceFeedHealth(slotExists: true, slotActive: true, walStatus: "reserved", lagBytes: 1_000,
                                               lagSeconds: 30), nil),
        ]
        for (name, health, expected) in rows {
            #expect(health.problem(settings) == expected, "\(name)")
        }
    }

    @Test func slotNamesAreValidForEveryDatabaseName() {
        #expect(FinanceFeedIngest.slotName(forDatabase: "fin_sse_1a2b3c4d") == "tender_feed_fin_sse_1a2b3c4d")
        for name in ["Tender-Prod", String(repeating: "a", count: 63), "données"] {
            let slot = FinanceFeedIngest.slotName(forDatabase: name)
            #expect(PostgresReplicationConnection.isValidSlotName(slot), "\(name)")
        }
        #expect(FinanceFeedIngest.slotName(forDatabase: "Tender-Prod") != FinanceFeedIngest.slotName(forDatabase: "tender_prod"))
    }
}

/// One pooled connection held across steps, for interleaving transactions by hand.
final class PostgresConnectionHolder: @unchecked Sendable {
    private let pool: PostgresPool
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private let ready = DispatchSemaphore(value: 0)

    init(_ pool: PostgresPool) throws {
        self.pool = pool
        Thread { [self] in
            try? pool.withConnection { conn in
                lock.withLock { connection = conn }
                ready.signal()
                done.wait()  // the pool rolls back a connection returned mid-transaction
            }
            ready.signal()
        }.start()
        ready.wait()
        guard lock.withLock({ connection }) != nil else { throw TenderError("test_connection", "no connection") }
    }

    private var conn: PostgresConnection { lock.withLock { connection! } }

    func run(_ text: String) throws { try conn.simpleQuery(SQL(unsafeSQL: text)) }
    func query(_ text: String) throws -> PostgresResult { try conn.query(SQL(unsafeSQL: text)) }
    func record(_ event: BusinessEvent, merchant: String) throws {
        try FinanceRecorder().apply(event, merchantId: merchant, on: conn, now: Date())
    }
    func close() {
        done.signal()
        ready.wait()
    }
}

extension FinanceFeedTests {
    /// A database with history from before the feed (the upgrade): the slot's creation numbers every
    /// existing change once, in the (xid, seq) order v1 tokens were issued in, so a v1 token issued
    /// before the upgrade resumes exactly where it was.
    @Test func theFirstStartFeedsExistingHistoryOnceAndV1TokensResume() throws {
        let s = try FinanceTestServer(prefix: "feed_upgrade", startIngest: false)
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        for i in 1...4 { try s.record([Events.paid("pay_\(i)", Int64(i))], merchant: merchant) }
        // A v1 reader's token after the second payment's transaction row (its (xid, seq)).
        let row = try #require(try s.pool.query("""
            SELECT c.xid::text AS xid, c.seq FROM finance_change c JOIN finance_transaction t
                ON t.merchant_id = c.merchant_id AND t.id = c.entity_id
             WHERE c.merchant_id = $1 AND c.scope_kind = 'transactions' AND t.posting_key = 'payment:pay_2'
            """, [merchant]).first)
        let codec = try s.app.finance.codec()
        let scope = try HistoryScope(merchantID: merchant, resource: .transactions, accountID: account)
        let v1 = codec.issue(scope: scope, position: HistoryPosition(epoch: 1, xid: UInt64(try row.decode("xid", as: String.self)) ?? 0,
                                                                      seq: try row.decode("seq")),
                             now: FinanceTimestamp(secondsSinceEpoch: Int64(Date().timeIntervalSince1970)))
        try s.startFeed()
        try Self.expectFedOnce(s)
        let resumed = try FinanceShellTests.follow(s, account: account, key: key, from: v1) { $0.count >= 2 }
        #expect(resumed.transactions.map(\.transactionAmount.amountMinor) == [3, 4])
        #expect(resumed.token?.hasPrefix("hst2.") == true)
        try s.record([Events.paid("pay_5", 5)], merchant: merchant)
        let live = try FinanceShellTests.follow(s, account: account, key: key, from: resumed.token) { $0.count >= 1 }
        #expect(live.transactions.map(\.transactionAmount.amountMinor) == [5])
    }
}

extension FinanceFeedTests {
    /// `tender serve` runs the feed writer; it is killed with SIGKILL while payments keep committing,
    /// and a second `tender serve` takes the slot over: every change is fed exactly once.
    @Test func killMinus9OfTheServerMidStreamLosesNothing() throws {
        let s = try FinanceTestServer(prefix: "feed_kill", connectionsMax: 16, startIngest: false)
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        let url = s.pool.configuration.connectionString
        func serve() throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestEnvironment.tenderBinary)
            process.arguments = ["serve", "--listen", "127.0.0.1:\(freePort())"]
            var environment = ProcessInfo.processInfo.environment
            environment["TENDER_DATABASE_URL"] = url
            environment["TENDER_MIGRATIONS_DIR"] = TestEnvironment.migrationsDirectory
            environment["TENDER_DATA_DIR"] = s.keyDirectory
            process.environment = environment
            process.standardError = FileHandle.nullDevice
            try process.run()
            return process
        }
        func fed() throws -> Int {
            try s.pool.query("SELECT count(*)::int AS n FROM finance_feed").first?.decode("n", as: Int.self) ?? 0
        }
        let total = 200
        let written = Atomic<Int>(0)
        let writer = Thread {
            for i in 0..<total {
                try? s.record([Events.paid("pay_\(i)", Int64(i + 1))], merchant: merchant)
                written.add(1, ordering: .releasing)
                usleep(5_000)
            }
        }
        let first = try serve()
        let deadline = Date().addingTimeInterval(60)
        writer.start()
        // Killed once it has fed some of the stream, mid-stream.
        while try fed() < 20, Date() < deadline { usleep(10_000) }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect(first.terminationReason == .uncaughtSignal)
        let writtenAtKill = written.load(ordering: .acquiring)
        let second = try serve()
        defer {
            kill(second.processIdentifier, SIGTERM)
            second.waitUntilExit()
        }
        while written.load(ordering: .acquiring) < total, Date() < deadline { usleep(10_000) }
        #expect(writtenAtKill < total)  // the kill came mid-stream, not after the last payment
        try Self.expectFedOnce(s)
        let payments = try s.pool.query("""
            SELECT count(DISTINCT t.posting_key)::int AS n FROM finance_feed f
              JOIN finance_transaction t ON t.merchant_id = f.merchant_id AND t.id = f.entity_id
             WHERE f.merchant_id = $1 AND f.scope_kind = 'transactions'
            """, [merchant]).first?.decode("n", as: Int.self)
        #expect(payments == total)
    }
}

extension FinanceFeedTests {
    /// TENDER_FINANCE_FEED_DATABASE_URL is where the replication session goes: an unreachable one means
    /// no streaming and a stable reason, while the pool itself works.
    @Test func theWriterConnectsToItsOwnURL() throws {
        let pool = try TestEnvironment.migratedPool("feed_url")
        defer { pool.close() }
        var settings = FinanceFeedIngest.Settings()
        settings.replicationConnectionString = "postgresql://tender@127.0.0.1:1/none?connect_timeout=1"
        let ingest = FinanceFeedIngest(pool: pool, logger: .silent, settings: settings)
        ingest.start()
        defer { ingest.stop() }
        let deadline = Date().addingTimeInterval(20)
        while ingest.status.lastError == nil && Date() < deadline { usleep(20_000) }
        #expect(ingest.status.lastError == "connection_failed")
        #expect(!ingest.status.streaming)
        #expect(try pool.query("SELECT count(*)::int AS n FROM pg_replication_slots WHERE database = current_database()")
            .first?.decode("n", as: Int.self) == 0)
    }
}
