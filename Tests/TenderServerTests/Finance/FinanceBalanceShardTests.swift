import FinanceStore
import Foundation
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// Balances kept in shard rows (migrations/0022): concurrent writers of one account do not wait on one
/// row, the sums stay exact, and every reader sees the balance JSON the writer used to store.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct FinanceBalanceShardTests {
    static func shardOfCurrentTransaction(_ conn: PostgresConnection) throws -> Int {
        try conn.query("SELECT (pg_current_xact_id()::text::bigint % 64)::int AS s").first?.decode("s") ?? -1
    }

    /// The old shape made every writer of an account update its one balance row (and its one balance
    /// entity row): a second payment of the merchant waited for the first one's COMMIT. Now it does not.
    @Test func aPaymentDoesNotWaitForAnotherPaymentOfTheSameMerchant() throws {
        let s = try FinanceTestServer(prefix: "fin_shard_wait", startIngest: false)
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        try s.record([Events.paid("pay_0", 100)], merchant: merchant)  // accounts exist, committed

        let holderShard = Atomic<Int>(-1)
        let release = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        let holderError = Mutex<String?>(nil)
        Thread.detachNewThread {
            do {
                try s.pool.transaction { conn in
                    try FinanceRecorder().apply(Events.paid("pay_held", 1_000), merchantId: merchant, on: conn, now: Date())
                    holderShard.store(try Self.shardOfCurrentTransaction(conn), ordering: .relaxed)
                    held.signal()
                    release.wait()
                }
            } catch {
                holderError.withLock { $0 = String(describing: error) }
                held.signal()
            }
        }
        held.wait()
        defer { release.signal() }
        #expect(holderError.withLock { $0 } == nil)

        // The writer below must finish while the first transaction still holds its locks. A transaction id
        // that happens to choose the holder's shard (1 in 64) would wait by design: that attempt is rolled back.
        struct SameShard: Error {}
        var written = false
        for attempt in 0..<8 where !written {
            do {
                try s.pool.transaction { conn in
                    _ = try conn.execute("SET LOCAL lock_timeout = '3s'")
                    guard try Self.shardOfCurrentTransaction(conn) != holderShard.load(ordering: .relaxed) else { throw SameShard() }
                    try FinanceRecorder().apply(Events.paid("pay_free_\(attempt)", 2_000), merchantId: merchant, on: conn, now: Date())
                }
                written = true
            } catch is SameShard {
                continue
            }
        }
        #expect(written)
        release.signal()
        // Both committed: the balance is the exact sum, read through the view the readers use.
        let deadline = Date().addingTimeInterval(10)
        while try s.pool.query("SELECT count(*)::int AS n FROM finance_postings WHERE merchant_id = $1",
                               [merchant]).first?.decode("n", as: Int.self) != 3, Date() < deadline {
            usleep(10_000)
        }
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        let row = try #require(try s.pool.query("""
            SELECT booked_minor, available_minor FROM finance_balance WHERE merchant_id = $1 AND account_id = $2::uuid
            """, [merchant, account.description]).first)
        // Authorized credits count in neither side until booked (FinanceBalances' rules).
        #expect(try row.decode("booked_minor", as: Int64.self) == 0)
        #expect(try s.pool.query("SELECT count(*)::int AS n FROM finance_balance_shard WHERE merchant_id = $1 AND account_id = $2::uuid",
                                 [merchant, account.description]).first?.decode("n", as: Int.self) ?? 0 >= 2)
    }

    /// Many concurrent writers of one merchant: the balance read is exactly the sum of what they booked,
    /// spread over several shard rows, with one change row per writer.
    @Test func concurrentPaymentsOfOneMerchantSumExactly() throws {
        let s = try FinanceTestServer(prefix: "fin_shard_sum", connectionsMax: 12, startIngest: false)
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let threads = 8, perThread = 15
        let failures = Mutex<[String]>([])
        benchConcurrently(threads) { t in
            for i in 0..<perThread {
                let id = "pay_\(t)_\(i)"
                let amount = Int64(100 + t * 1_000 + i)
                do {
                    try s.pool.transaction { conn in
                        let recorder = FinanceRecorder()
                        try recorder.apply(Events.paid(id, amount), merchantId: merchant, on: conn, now: Date())
                        try recorder.apply(.paymentBooked(paymentID: id, at: Events.at(60)), merchantId: merchant, on: conn, now: Date())
                    }
                } catch {
                    failures.withLock { $0.append(String(describing: error)) }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
        var expected: Int64 = 0
        for t in 0..<threads { for i in 0..<perThread { expected += Int64(100 + t * 1_000 + i) } }

        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        let row = try #require(try s.pool.query("""
            SELECT booked_minor, available_minor FROM finance_balance WHERE merchant_id = $1 AND account_id = $2::uuid
            """, [merchant, account.description]).first)
        #expect(try row.decode("booked_minor", as: Int64.self) == expected)
        #expect(try row.decode("available_minor", as: Int64.self) == expected)
        let shards = try s.pool.query("""
            SELECT count(*)::int AS n FROM finance_balance_shard WHERE merchant_id = $1 AND account_id = $2::uuid
            """, [merchant, account.description]).first?.decode("n", as: Int.self) ?? 0
        #expect(shards > 1)
        // The API serves the same sum.
        let balances = try decode(BalanceList.self, try s.get("/v1/finance/account-balances?accountID=\(account)", key: key).body)
        let balance = try #require(balances.accountBalances.first)
        #expect(balance.currentBalance.booked?.amount.amountMinor == expected)
        #expect(balance.currentBalance.booked?.creditDebitIndicator == .credit)
        #expect(balance.id == FinanceBalances.balanceID(of: account, identity: FinanceStoreIdentity.identity(merchant)))
        // One balance change row per recorder call (each transaction made two: the payment and its booking).
        let changes = try s.pool.query("""
            SELECT count(*)::int AS n FROM finance_change WHERE merchant_id = $1 AND scope_kind = 'account_balances'
               AND scope_id = $2::uuid
            """, [merchant, account.description]).first?.decode("n", as: Int.self)
        #expect(changes == threads * perThread * 2)
    }

    /// The JSON `finance_entity` builds for a balance is, byte for byte, the jsonb the writer stored before
    /// (`FinanceBatchSQL.accountBalance` through `JSONCoding.encoder`), for currencies with 0, 2 and 3
    /// digits, positive, negative and zero sums.
    @Test func balancesReadAsTheWriterStoredThem() throws {
        let s = try FinanceTestServer(prefix: "fin_shard_json", startIngest: false)
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        let now = Date(timeIntervalSince1970: 1_767_300_123)
        let events: [BusinessEvent] = [
            .paymentSucceeded(paymentID: "pay_usd", money: Events.money(1_099), at: Events.at(0)),
            .paymentBooked(paymentID: "pay_usd", at: Events.at(5)),
            .payout(payoutID: "po_usd", bankReference: "77", money: Events.money(5_000), at: Events.at(9)),
            .paymentSucceeded(paymentID: "pay_jpy", money: Events.money(500, "JPY"), at: Events.at(0)),
            .paymentBooked(paymentID: "pay_jpy", at: Events.at(5)),
            .paymentSucceeded(paymentID: "pay_kwd", money: Events.money(7, "KWD"), at: Events.at(0)),
            .paymentBooked(paymentID: "pay_kwd", at: Events.at(5)),
            .paymentSucceeded(paymentID: "pay_eur", money: Events.money(250, "EUR"), at: Events.at(0)),
        ]
        for event in events {
            try s.pool.transaction { conn in try FinanceRecorder().apply(event, merchantId: merchant, on: conn, now: now) }
        }
        let identity = FinanceStoreIdentity.identity(merchant)
        let rows = try s.pool.query("""
            SELECT b.account_id::text AS account_id, b.currency_code, b.booked_minor, b.available_minor,
                   e.entity_id::text AS entity_id, e.payload::text AS payload
              FROM finance_balance b
              JOIN finance_entity e ON e.merchant_id = b.merchant_id AND e.scope_kind = 'account_balances'
                                   AND e.scope_id = b.account_id
             WHERE b.merchant_id = $1
            """, [merchant]).rows
        #expect(rows.count >= 4)
        var signs: Set<String> = []
        for row in rows {
            let accountID = try FinanceID(parsing: try row.decode("account_id"))
            let booked: Int64 = try row.decode("booked_minor")
            signs.insert(booked > 0 ? "+" : booked < 0 ? "-" : "0")
            let before = try FinanceBatchSQL.accountBalance(
                accountID: accountID, currency: try row.decode("currency_code"), booked: booked,
                available: try row.decode("available_minor"),
                asOf: FinanceTimestamp(secondsSinceEpoch: 1_767_300_123), identity: identity)
            let storedBefore = try s.pool.query("SELECT $1::jsonb::text AS t", [try FinanceBatchSQL.json(before)])
                .first?.decode("t", as: String.self)
            #expect(try row.decode("payload", as: String.self) == storedBefore)
            #expect(try row.decode("entity_id", as: String.self) == before.id.description)
        }
        #expect(signs == ["+", "-", "0"])
        // No balance JSON is stored any more: the table behind the view holds accounts and transactions only.
        #expect(try s.pool.query("""
            SELECT count(*)::int AS n FROM finance_entity_stored WHERE merchant_id = $1 AND scope_kind = 'account_balances'
            """, [merchant]).first?.decode("n", as: Int.self) == 0)
        // The last write's date: a later write moves every balance's asOfDate it touches.
        try s.pool.transaction { conn in
            try FinanceRecorder().apply(Events.paid("pay_late", 300), merchantId: merchant, on: conn,
                                        now: now.addingTimeInterval(3_600))
        }
        let late = try s.pool.query("""
            SELECT e.payload #>> '{currentBalance,booked,asOfDate}' AS d FROM finance_entity e
             WHERE e.merchant_id = $1 AND e.scope_kind = 'account_balances' AND e.scope_id = $2::uuid
            """, [merchant, FinanceTestServer.settlementAccountID(merchant: merchant).description]).first?.decode("d", as: String.self)
        #expect(late == FinanceTimestamp(secondsSinceEpoch: 1_767_300_123 + 3_600).description)
    }

    /// A balance row of the shard table refuses a shard outside 0...63, and the stored entity table refuses a
    /// balance (its JSON is only ever computed).
    @Test func theShapeRefusesWhatItDoesNotHold() throws {
        let s = try FinanceTestServer(prefix: "fin_shard_refuse", startIngest: false)
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        try s.record([Events.paid("pay_1", 100)], merchant: merchant)
        let account = FinanceTestServer.settlementAccountID(merchant: merchant).description
        do {
            _ = try s.pool.execute("""
                INSERT INTO finance_balance_shard (merchant_id, account_id, shard, balance_id, currency_code, minor_digits,
                                                   booked_minor, available_minor, as_of_seconds)
                VALUES ($1, $2::uuid, 64, $2::uuid, 'USD', 2, 0, 0, 0)
                """, [merchant, account])
            Issue.record("shard 64 must be refused")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23514")
        }
        do {
            _ = try s.pool.execute("""
                INSERT INTO finance_entity_stored (merchant_id, scope_kind, scope_id, entity_id, payload)
                VALUES ($1, 'account_balances', $2::uuid, $2::uuid, '{}')
                """, [merchant, account])
            Issue.record("a stored balance entity must be refused")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23514")
        }
    }
    /// The recorder's first statement reads the merchant, the epoch and the stored postings together: an
    /// unknown merchant is still `event_invalid` on `merchantId` (with or without a ledger effect), and a
    /// replay or a status change still finds the stored posting.
    @Test func theOpeningReadKeepsTheRecordersRules() throws {
        let s = try FinanceTestServer(prefix: "fin_opening", startIngest: false)
        defer { s.stop() }
        for event in [Events.paid("pay_1", 100), BusinessEvent.paymentDeclined(paymentID: "pay_2")] {
            do {
                try s.record([event], merchant: "merchant.fin.unknown")
                Issue.record("an unknown merchant must be refused")
            } catch let error as FinanceError {
                #expect(error.code == .eventInvalid)
                #expect(error.field == "merchantId")
            }
        }
        let (merchant, _) = try s.merchant()
        let first = try FinanceBatchTests.applyBatch(s, [Events.paid("pay_1", 100), Events.paid("pay_2", 200)], merchant: merchant)
        #expect(first == FinanceBatchOutcome(applied: 2))
        let again = try FinanceBatchTests.applyBatch(s, [Events.paid("pay_2", 200), .paymentBooked(paymentID: "pay_1", at: Events.at(9)),
                                                         .paymentDeclined(paymentID: "pay_3")], merchant: merchant)
        #expect(again == FinanceBatchOutcome(applied: 1, replayed: 1, withoutEffect: 1))
        do {
            _ = try FinanceBatchTests.applyBatch(s, [Events.paid("pay_2", 201)], merchant: merchant)
            Issue.record("other content under a stored posting's key must be refused")
        } catch let error as FinanceError {
            #expect(error.code == .eventConflict)
        }
    }
}
