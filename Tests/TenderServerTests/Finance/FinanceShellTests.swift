import FinanceStore
import Foundation
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// History reads come from the commit-ordered feed, which the feed writer fills a moment after each
/// commit: readers here poll with a deadline, as a real client does, and never assume a commit is in
/// the feed at once.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct FinanceShellTests {
    /// Pages from `token` until `done` holds for the transactions gathered (or 30 s pass).
    static func follow(_ s: FinanceTestServer, account: FinanceID, key: String, from token: String?,
                       until done: ([Transaction]) -> Bool) throws -> (transactions: [Transaction], token: String?) {
        var gathered: [Transaction] = []
        var token = token
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            let page = try decode(DecodedPage<Transaction>.self, try s.get(
                "/v1/finance/transactions/history?accountID=\(account)" + (token.map { "&since=\($0)" } ?? ""), key: key).body)
            gathered += page.inserted + page.updated
            token = page.newToken
            if done(gathered) { break }
            if !page.hasMore { usleep(20_000) }
        }
        return (gathered, token)
    }

    // MARK: Event → transaction mapping, idempotency, balances

    @Test func paymentEventsMapToTransactionsAndBalancesSumThem() throws {
        let s = try FinanceTestServer(prefix: "fin_map")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)

        try s.record([Events.paid("pay_1", 10_000)], merchant: merchant)
        try s.record([.paymentDeclined(paymentID: "pay_2"), .paymentFailed(paymentID: "pay_3")], merchant: merchant)
        try s.record([Events.paid("pay_4", 2_500, offset: 10)], merchant: merchant)
        // Full refund of pay_4, partial refund of pay_1.
        try s.record([.refundCreated(refundID: "re_1", paymentID: "pay_4", money: Events.money(2_500), at: Events.at(20))],
                     merchant: merchant)
        try s.record([.refundCreated(refundID: "re_2", paymentID: "pay_1", money: Events.money(3_000), at: Events.at(30))],
                     merchant: merchant)
        try s.record([.paymentBooked(paymentID: "pay_1", at: Events.at(100))], merchant: merchant)

        // The in-memory reference ledger, fed the same events.
        var reference = FinanceLedger(context: FinanceContext(identity: FinanceStoreIdentity.identity(merchant),
                                                              merchantName: "Finance Shop"))
        for event: BusinessEvent in [Events.paid("pay_1", 10_000), .paymentDeclined(paymentID: "pay_2"),
                                     .paymentFailed(paymentID: "pay_3"), Events.paid("pay_4", 2_500, offset: 10),
                                     .refundCreated(refundID: "re_1", paymentID: "pay_4", money: Events.money(2_500), at: Events.at(20)),
                                     .refundCreated(refundID: "re_2", paymentID: "pay_1", money: Events.money(3_000), at: Events.at(30)),
                                     .paymentBooked(paymentID: "pay_1", at: Events.at(100))] {
            _ = try reference.apply(event)
        }

        let response = try s.get("/v1/finance/transactions?limit=500", key: key)
        #expect(response.status == 200)
        let transactions = try decode(TransactionList.self, response.body).transactions
        #expect(transactions.count == 4)  // declined and failed created nothing
        #expect(Set(transactions) == Set(reference.transactions))
        let payment1 = try #require(transactions.first { $0.originalTransactionDescription.contains("pay_1")
            && $0.transactionType == .pointOfSale })
        #expect(payment1.status == .booked)
        #expect(payment1.creditDebitIndicator == .credit)
        #expect(payment1.accountID == account)
        #expect(payment1.transactionAmount.amountMinor == 10_000)
        let refunds = transactions.filter { $0.transactionType == .refund }
        #expect(refunds.map(\.creditDebitIndicator) == [.debit, .debit])
        #expect(Set(refunds.map(\.transactionAmount.amountMinor)) == [2_500, 3_000])
        #expect(refunds.allSatisfy { $0.status == .pending })

        // The stored balance equals the balance computed from the transactions themselves.
        let balances = try decode(BalanceList.self, try s.get("/v1/finance/account-balances?accountID=\(account)", key: key).body)
        let stored = try #require(balances.accountBalances.first)
        let accounts = try decode(AccountList.self, try s.get("/v1/finance/accounts", key: key).body).accounts
        let accountView = try #require(accounts.first { $0.id == account })
        let computed = try FinanceBalances.balance(of: accountView, transactions: transactions, asOf: Events.at(0),
                                                   identity: FinanceStoreIdentity.identity(merchant))
        #expect(stored.id == computed.id)
        #expect(stored.currentBalance.booked?.amount == computed.currentBalance.booked?.amount)
        #expect(stored.currentBalance.booked?.creditDebitIndicator == computed.currentBalance.booked?.creditDebitIndicator)
        #expect(stored.currentBalance.available?.amount == computed.currentBalance.available?.amount)
        #expect(stored.currentBalance.available?.creditDebitIndicator == computed.currentBalance.available?.creditDebitIndicator)
    }

    @Test func replayIsANoOpAndConflictIsRefused() throws {
        let s = try FinanceTestServer(prefix: "fin_idem")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        try s.record([Events.paid("pay_1", 1_000)], merchant: merchant)
        let changes = { try s.pool.query("SELECT count(*) AS n FROM finance_change").first?.decode("n", as: Int.self) ?? -1 }
        let before = try changes()
        try s.record([Events.paid("pay_1", 1_000)], merchant: merchant)
        try s.record([.paymentBooked(paymentID: "pay_1", at: Events.at(5))], merchant: merchant)
        let afterBooked = try changes()
        try s.record([.paymentBooked(paymentID: "pay_1", at: Events.at(5))], merchant: merchant)
        #expect(try changes() == afterBooked)
        #expect(afterBooked > before)
        #expect(try s.pool.query("SELECT count(*) AS n FROM finance_postings").first?.decode("n", as: Int.self) == 1)

        do {
            try s.record([Events.paid("pay_1", 1_001)], merchant: merchant)
            Issue.record("a different amount under the same payment id must be refused")
        } catch let error as FinanceError {
            #expect(error.code == .eventConflict)
        }
        do {
            try s.record([.paymentBooked(paymentID: "pay_unknown", at: Events.at(5))], merchant: merchant)
            Issue.record("a status change of an unknown payment must be refused")
        } catch let error as FinanceError {
            #expect(error.code == .postingNotFound)
        }
    }

    @Test func unbalancedPostingIsRefusedByTheSchema() throws {
        let s = try FinanceTestServer(prefix: "fin_bal")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        try s.record([Events.paid("pay_1", 1_000)], merchant: merchant)
        do {
            try s.pool.transaction { conn in
                _ = try conn.execute("""
                    INSERT INTO finance_postings (merchant_id, posting_key, transaction_type, transaction_date, status,
                        description, original_description, fingerprint)
                    VALUES ($1, 'manual:1', 'adjustment', now(), 'booked', 'x', 'x', $2)
                    """, [merchant, [UInt8](repeating: 0, count: 32)])
                for (leg, side, amount) in [(0, "debit", 500), (1, "credit", 400)] {
                    _ = try conn.execute("""
                        INSERT INTO finance_entries (merchant_id, posting_key, leg, account_key, side, amount_minor, currency_code)
                        VALUES ($1, 'manual:1', $2, 'psp:sim:USD', $3, $4, 'USD')
                        """, [merchant, leg, side, amount])
                }
            }
            Issue.record("an unbalanced posting must not commit")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23514")
        }
    }

    /// migrations/0021: the check runs once per statement over the statement's legs, so both legs in one
    /// INSERT that do not balance are refused at that INSERT (23514), a leg naming no posting or no ledger
    /// account is refused as the dropped foreign keys refused it (23503), and postings are never deleted.
    @Test func statementCheckRefusesUnbalancedAndDanglingLegs() throws {
        let s = try FinanceTestServer(prefix: "fin_stmt")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        try s.record([Events.paid("pay_1", 1_000)], merchant: merchant)
        let posting: SQL = """
            INSERT INTO finance_postings (merchant_id, posting_key, transaction_type, transaction_date, status,
                description, original_description, fingerprint)
            VALUES ($1, 'manual:2', 'adjustment', now(), 'booked', 'x', 'x', $2)
            """
        let legs: SQL = """
            INSERT INTO finance_entries (merchant_id, posting_key, leg, account_key, side, amount_minor, currency_code)
            VALUES ($1, $2, 0, $3, 'debit', $4, 'USD'), ($1, $2, 1, 'psp:sim:USD', 'credit', 500, 'USD')
            """
        let cases: [(name: String, postingKey: String, accountKey: String, debit: Int, sqlState: String)] = [
            ("unbalanced in one statement", "manual:2", "psp:sim:USD", 499, "23514"),
            ("leg without its posting", "manual:none", "psp:sim:USD", 500, "23503"),
            ("leg on an unknown ledger account", "manual:2", "nowhere:USD", 500, "23503"),
        ]
        for row in cases {
            do {
                try s.pool.transaction { conn in
                    _ = try conn.execute(posting, [merchant, [UInt8](repeating: 0, count: 32)])
                    _ = try conn.execute(legs, [merchant, row.postingKey, row.accountKey, row.debit])
                }
                Issue.record("\(row.name) must not commit")
            } catch let error as PostgresError {
                #expect(error.sqlState == row.sqlState, "\(row.name)")
            }
        }
        // The balanced form of the same posting commits, and then the posting can never be deleted.
        try s.pool.transaction { conn in
            _ = try conn.execute(posting, [merchant, [UInt8](repeating: 0, count: 32)])
            _ = try conn.execute(legs, [merchant, "manual:2", "psp:sim:USD", 500])
        }
        do {
            _ = try s.pool.execute("DELETE FROM finance_postings WHERE merchant_id = $1", [merchant])
            Issue.record("a posting must never be deleted")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23514")
        }
    }

    /// migrations/0024: the foreign keys of postings (to merchants) and FinanceKit transactions (to their
    /// posting and account) are checked once per statement; a dangling row is refused with the foreign
    /// key's SQLSTATE (23503), and what a transaction points at can neither go away nor be re-pointed.
    @Test func statementChecksRefuseDanglingPostingsAndTransactions() throws {
        let s = try FinanceTestServer(prefix: "fin_stmt24")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        try s.record([Events.paid("pay_1", 1_000)], merchant: merchant)
        let account = FinanceTestServer.settlementAccountID(merchant: merchant).description
        let posting: SQL = """
            INSERT INTO finance_postings (merchant_id, posting_key, transaction_type, transaction_date, status,
                description, original_description, fingerprint)
            VALUES ($1, 'manual:3', 'adjustment', now(), 'booked', 'x', 'x', $2)
            """
        let transaction: SQL = """
            INSERT INTO finance_transaction (merchant_id, id, account_id, posting_key, status, transaction_type,
                credit_debit_indicator, transaction_date, amount_minor, currency_code, payload)
            VALUES ($1, gen_random_uuid(), $2::uuid, $3, 'booked', 'adjustment', 'credit', now(), 5, 'USD', '{}')
            """
        let fingerprint = [UInt8](repeating: 0, count: 32)
        let cases: [(name: String, run: (PostgresConnection) throws -> Void)] = [
            ("posting of an unknown merchant", { conn in _ = try conn.execute(posting, ["merchant.nobody", fingerprint]) }),
            ("transaction without its posting", { conn in _ = try conn.execute(transaction, [merchant, account, "manual:none"]) }),
            ("transaction on an unknown account", { conn in
                _ = try conn.execute(transaction, [merchant, "00000000-0000-0000-0000-000000000001", "payment:pay_1"])
            }),
        ]
        for row in cases {
            do {
                try s.pool.transaction { conn in try row.run(conn) }
                Issue.record("\(row.name) must not commit")
            } catch let error as PostgresError {
                #expect(error.sqlState == "23503", "\(row.name)")
            }
        }
        // The valid forms commit.
        try s.pool.transaction { conn in
            _ = try conn.execute(posting, [merchant, fingerprint])
            _ = try conn.execute(transaction, [merchant, account, "manual:3"])
        }
        let refusals: [(name: String, sql: SQL)] = [
            ("account deleted", "DELETE FROM finance_account WHERE merchant_id = $1"),
            ("account re-keyed", "UPDATE finance_account SET id = gen_random_uuid() WHERE merchant_id = $1"),
            ("transaction re-pointed at another posting",
             "UPDATE finance_transaction SET posting_key = 'manual:3' WHERE merchant_id = $1 AND posting_key = 'payment:pay_1'"),
            ("transaction moved to another account",
             "UPDATE finance_transaction SET account_id = gen_random_uuid() WHERE merchant_id = $1"),
        ]
        for row in refusals {
            do {
                _ = try s.pool.execute(row.sql, [merchant])
                Issue.record("\(row.name) must be refused")
            } catch let error as PostgresError {
                #expect(error.sqlState == "23514", "\(row.name)")
            }
        }
        // A status change (what the recorder rewrites) is still allowed.
        #expect(try s.pool.execute("UPDATE finance_transaction SET status = 'booked' WHERE merchant_id = $1 AND posting_key = $2",
                                   [merchant, "payment:pay_1"]) == 1)
    }

    // MARK: History correctness

    @Test func outOfOrderCommitsWithKilledReaderLoseNothing() throws {
        let s = try FinanceTestServer(prefix: "fin_ooo", connectionsMax: 16)
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        let writers = 8, perWriter = 15
        let done = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        var threads: [Thread] = []
        for w in 0..<writers {
            let thread = Thread {
                for i in 0..<perWriter {
                    do {
                        try s.pool.transaction { conn in
                            // Take the xid now, commit after a random delay: commit order ≠ xid order.
                            _ = try conn.query("SELECT pg_current_xact_id()::text")
                            usleep(UInt32.random(in: 0...15_000))
                            try FinanceRecorder().apply(Events.paid("pay_\(w)_\(i)", Int64(100 + i)), merchantId: merchant,
                                                        on: conn, now: Date())
                        }
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                }
                done.add(1, ordering: .releasing)
            }
            threads.append(thread)
            thread.start()
        }

        // The consumer persists (seen set, token) together; a "kill" loses the page read since.
        var token: String?
        var seen: [String: Transaction] = [:]
        var kills = 0
        var committed: Set<String> = []
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let writersDone = done.load(ordering: .acquiring) == writers
            let path = "/v1/finance/transactions/history?accountID=\(account)&limit=7" + (token.map { "&since=\($0)" } ?? "")
            let response = try s.get(path, key: key)
            #expect(response.status == 200)
            let page = try decode(DecodedPage<Transaction>.self, response.body)
            for t in page.inserted + page.updated {
                if let earlier = seen[t.id.description] {
                    #expect(earlier == t)  // a re-delivery carries the same state
                }
                seen[t.id.description] = t
            }
            if Int.random(in: 0..<5) == 0 {
                kills += 1  // killed after applying the page, before saving its token: it comes again
                continue
            }
            token = page.newToken
            if writersDone && committed.isEmpty {
                committed = Set(try s.pool.query("SELECT id::text AS id FROM finance_transaction WHERE merchant_id = $1",
                                                 [merchant]).rows.map { try $0.decode("id", as: String.self) })
            }
            if writersDone && Set(seen.keys) == committed { break }
            if !page.hasMore { usleep(5_000) }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(committed.count == writers * perWriter)
        #expect(Set(seen.keys) == committed)
        #expect(kills > 0)
    }

    @Test func longOpenTransactionNeitherStallsTheFeedNorLosesAnything() throws {
        let s = try FinanceTestServer(prefix: "fin_stall")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        try s.record([Events.paid("pay_0", 100)], merchant: merchant)
        let first = try Self.follow(s, account: account, key: key, from: nil) { $0.count == 1 }
        #expect(first.transactions.map(\.transactionAmount.amountMinor) == [100])

        let opened = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            try? s.pool.transaction { conn in
                // The slow payment's transaction has its xid before the fast one starts.
                _ = try conn.query("SELECT pg_current_xact_id()::text")
                opened.signal()
                release.wait()
                try FinanceRecorder().apply(Events.paid("pay_slow", 200), merchantId: merchant, on: conn, now: Date())
            }
            finished.signal()
        }.start()
        opened.wait()
        try s.record([Events.paid("pay_fast", 300)], merchant: merchant)
        // The feed is in commit order: pay_fast arrives while the older transaction is still open.
        let fast = try Self.follow(s, account: account, key: key, from: first.token) { $0.count >= 1 }
        #expect(fast.transactions.map(\.transactionAmount.amountMinor) == [300])

        release.signal()
        finished.wait()
        let after = try Self.follow(s, account: account, key: key, from: fast.token) { $0.count >= 1 }
        #expect(after.transactions.map(\.transactionAmount.amountMinor) == [200])
    }

    @Test func catchUpFromZeroEqualsQuerySnapshot() throws {
        let s = try FinanceTestServer(prefix: "fin_snap")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        for i in 0..<40 { try s.record([Events.paid("pay_\(i)", Int64(1_000 + i), offset: Int64(i))], merchant: merchant) }
        for i in 0..<10 { try s.record([.paymentBooked(paymentID: "pay_\(i)", at: Events.at(500))], merchant: merchant) }
        try s.record([.refundCreated(refundID: "re_1", paymentID: "pay_3", money: Events.money(400), at: Events.at(600))],
                     merchant: merchant)
        try s.record([.paymentVoided(paymentID: "pay_20", at: Events.at(700))], merchant: merchant)

        let snapshot = try decode(TransactionList.self,
                                  try s.get("/v1/finance/transactions?accountID=\(account)&limit=500", key: key).body)
        var state: [FinanceID: Transaction] = [:]
        var token: String?
        var pages = 0
        // The feed writer numbers the last changes a moment after their commit (hasMore false, nothing
        // new meanwhile), so follow until the feed has caught up with the snapshot or a deadline passes;
        // the assertions below then say what was missing.
        let deadline = Date().addingTimeInterval(90)
        repeat {
            let page = try decode(DecodedPage<Transaction>.self, try s.get(
                "/v1/finance/transactions/history?accountID=\(account)&limit=9" + (token.map { "&since=\($0)" } ?? ""),
                key: key).body)
            for t in page.inserted + page.updated { state[t.id] = t }
            for id in page.deleted { state[try FinanceID(parsing: id)] = nil }
            token = page.newToken
            pages += 1
            if !page.hasMore {
                if Set(state.values) == Set(snapshot.transactions) { break }
                usleep(20_000)
            }
        } while pages < 2_000 && Date() < deadline
        #expect(state.count == 41)
        #expect(Set(state.values) == Set(snapshot.transactions))

        // Accounts and balances catch up too.
        let accounts = try decode(DecodedPage<Account>.self, try s.get("/v1/finance/accounts/history", key: key).body)
        #expect(accounts.inserted.map(\.id) == [account])
        let balances = try decode(DecodedPage<AccountBalance>.self,
                                  try s.get("/v1/finance/account-balances/history?accountID=\(account)", key: key).body)
        let current = try decode(BalanceList.self, try s.get("/v1/finance/account-balances?accountID=\(account)", key: key).body)
        #expect(balances.inserted == current.accountBalances)
    }

    @Test func everyTokenErrorIs410() throws {
        let s = try FinanceTestServer(prefix: "fin_tok")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let (_, otherKey) = try s.merchant("Other Shop")
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        try s.record([Events.paid("pay_1", 100)], merchant: merchant)
        let path = "/v1/finance/transactions/history?accountID=\(account)"
        let valid = try decode(DecodedPage<Transaction>.self, try s.get(path, key: key).body).newToken
        #expect(try s.get(path + "&since=\(valid)", key: key).status == 200)

        var forged = Array(valid)
        forged[forged.count - 3] = forged[forged.count - 3] == "A" ? "B" : "A"
        let codec = try s.app.finance.codec()
        let scope = try HistoryScope(merchantID: merchant, resource: .transactions, accountID: account)
        let old = FinanceTimestamp(secondsSinceEpoch: Int64(Date().timeIntervalSince1970)
                                   - codec.limits.changeLogRetentionSeconds - 86_400)
        let expired = codec.issue(scope: scope, position: .origin(epoch: 1), now: old)
        let accountsToken = try decode(DecodedPage<Account>.self, try s.get("/v1/finance/accounts/history", key: key).body).newToken

        let cases: [(String, String, String)] = [
            ("forged", path + "&since=\(String(forged))", key),
            ("garbage", path + "&since=nonsense", key),
            ("other version", path + "&since=hst9.AAAA", key),
            ("expired", path + "&since=\(expired)", key),
            ("other resource", path + "&since=\(accountsToken)", key),
            ("other account", "/v1/finance/transactions/history?accountID=\(FinanceID(high: 1, low: 2))&since=\(valid)", key),
            ("other merchant", path + "&since=\(valid)", otherKey),
        ]
        for (name, casePath, caseKey) in cases {
            let response = try s.get(casePath, key: caseKey)
            #expect(response.status == 410, "\(name)")
            #expect(try response.json()["code"] as? String == "history_token_invalid", "\(name)")
        }
    }

    // MARK: Monitoring

    @Test func monitoringStreamsNewPaymentsAndResumesByLastEventID() throws {
        let s = try FinanceTestServer(prefix: "fin_sse")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        try s.record([Events.paid("pay_1", 100)], merchant: merchant)
        let path = "/v1/finance/transactions/history?accountID=\(account)"

        /// Reads `changes` events until one holds an amount in `wanted`; returns every amount seen and that event.
        func read(_ client: SSETestClient, until wanted: Int64) throws -> (amounts: [Int64], event: SSETestClient.Event?) {
            var amounts: [Int64] = []
            let deadline = Date().addingTimeInterval(90)
            while Date() < deadline {
                guard let event = client.next(timeoutSeconds: 1) else { continue }
                guard event.event == "changes" else { continue }
                let page = try decode(DecodedPage<Transaction>.self, Array(event.data.utf8))
                #expect(event.id == page.newToken)
                amounts += page.inserted.map(\.transactionAmount.amountMinor)
                if amounts.contains(wanted) { return (amounts, event) }
            }
            return (amounts, nil)
        }

        let client = try SSETestClient(port: s.port, path: path, key: key)
        #expect(try read(client, until: 100).amounts == [100])
        #expect(client.status == 200)

        try s.record([Events.paid("pay_2", 222)], merchant: merchant)
        let live = try read(client, until: 222)
        #expect(live.amounts == [222])
        let liveID = try #require(live.event?.id)

        try s.record([Events.paid("pay_3", 333)], merchant: merchant)
        let resumed = try SSETestClient(port: s.port, path: path, key: key, lastEventID: liveID)
        #expect(try read(resumed, until: 333).amounts == [333])

        let bad = try SSETestClient(port: s.port, path: path, key: key, lastEventID: "hst1.forged")
        _ = bad.next(timeoutSeconds: 1)
        #expect(bad.status == 410)
    }

    // MARK: Restriction and queries

    @Test func restrictedMerchantGets403OnEveryFinanceEndpoint() throws {
        let s = try FinanceTestServer(prefix: "fin_403")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        try s.record([Events.paid("pay_1", 100)], merchant: merchant)
        try s.pool.execute("UPDATE merchants SET finance_restricted = true WHERE merchant_id = $1", [merchant])
        for path in ["/v1/finance/accounts", "/v1/finance/account-balances", "/v1/finance/transactions",
                     "/v1/finance/accounts/history", "/v1/finance/account-balances/history?accountID=\(account)",
                     "/v1/finance/transactions/history?accountID=\(account)"] {
            let response = try s.get(path, key: key)
            #expect(response.status == 403, "\(path)")
            #expect(try response.json()["code"] as? String == "data_restricted", "\(path)")
        }
        #expect(try s.get("/v1/finance/accounts", key: "tk_nope").status == 401)
    }

    @Test func transactionQueryFiltersSortAndLimitsThroughHTTP() throws {
        let s = try FinanceTestServer(prefix: "fin_query")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        for i in 0..<12 {
            try s.record([Events.paid("pay_\(i)", Int64(500 + (i * 37) % 7 * 100), offset: Int64(i % 5))], merchant: merchant)
        }
        for i in 0..<4 { try s.record([.paymentBooked(paymentID: "pay_\(i)", at: Events.at(50))], merchant: merchant) }
        try s.record([.refundCreated(refundID: "re_1", paymentID: "pay_5", money: Events.money(100), at: Events.at(60))],
                     merchant: merchant)
        let all = try decode(TransactionList.self, try s.get("/v1/finance/transactions?limit=500", key: key).body).transactions
        #expect(all.count == 13)

        let queries = [
            "status=booked", "status=authorized,pending&sort=amount:asc", "creditDebitIndicator=debit",
            "transactionType=pointOfSale&sort=amount:desc,transactionDate:asc&limit=5&offset=2",
            "transactionDateFrom=2026-01-01T00:00:02Z&transactionDateTo=2026-01-01T00:00:04Z",
            "sort=postedDate:asc", "limit=1", "offset=12", "offset=13",
        ]
        for text in queries {
            let pairs = text.split(separator: "&").map { pair -> QueryPair in
                let parts = pair.split(separator: "=", maxSplits: 1)
                return QueryPair(String(parts[0]), String(parts[1]))
            }
            let expected = try TransactionQuery.parse(pairs).apply(to: all)
            let response = try s.get("/v1/finance/transactions?\(text)", key: key)
            #expect(response.status == 200, "\(text)")
            #expect(try decode(TransactionList.self, response.body).transactions == expected, "\(text)")
        }
        let limits = FinanceLimits()
        #expect(try s.get("/v1/finance/transactions?limit=\(limits.queryLimitMax)", key: key).status == 200)
        for bad in ["limit=\(limits.queryLimitMax + 1)", "limit=0", "offset=\(limits.queryOffsetMax + 1)", "colour=red",
                    "status=settled", "sort=amount:sideways", "status=booked&status=pending"] {
            let response = try s.get("/v1/finance/transactions?\(bad)", key: key)
            #expect(response.status == 400, "\(bad)")
            #expect(try response.json()["code"] as? String == "query_parameter_invalid", "\(bad)")
        }
        let historyLimit = try s.get("/v1/finance/accounts/history?limit=\(limits.historyPageSizeMax + 1)", key: key)
        #expect(historyLimit.status == 400)
        #expect(try s.get("/v1/finance/accounts/history?limit=\(limits.historyPageSizeMax)", key: key).status == 200)
    }
}
