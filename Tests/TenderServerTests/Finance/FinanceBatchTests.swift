import FinanceStore
import Foundation
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// The list form of `FinanceRecorder.apply`: it must leave the rows the one-by-one form leaves, and keep
/// its rules (replay, conflict, missing posting, invalid transition) inside one batch.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct FinanceBatchTests {
    /// One fixed instant for every write, so balance payloads (`asOfDate`) compare across merchants.
    static let now = Date(timeIntervalSince1970: 1_767_300_000)

    static func applyBatch(_ s: FinanceTestServer, _ events: [BusinessEvent], merchant: String,
                           recorder: FinanceRecorder = FinanceRecorder(),
                           missing: MissingPostingPolicy = .fail) throws -> FinanceBatchOutcome {
        try s.pool.transaction { conn in
            try recorder.apply(events, merchantId: merchant, on: conn, now: now, missingPostings: missing)
        }
    }

    // MARK: Equivalence with the one-by-one path

    @Test func batchesOfAnySizeLeaveTheRowsOneByOneLeaves() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_eq")
        defer { s.stop() }
        let events = try MixedEvents.make(count: 400, seed: 0x5EED_F1AA)
        #expect(events.count >= 250)
        #expect(Set(events.map(MixedEvents.kind)).count == MixedEvents.kindCount)  // every kind of event is in the mix

        let (single, _) = try s.merchant()
        try s.pool.transaction { conn in
            for event in events { try FinanceRecorder().apply(event, merchantId: single, on: conn, now: Self.now) }
        }
        let expected = try StoredState.read(s, merchant: single)
        // The reference ledger is an independent model of the same rules.
        var reference = FinanceLedger(context: FinanceContext(identity: FinanceStoreIdentity.identity(single),
                                                              merchantName: "Finance Shop"))
        for event in events { _ = try reference.apply(event) }
        #expect(try StoredState.transactions(s, merchant: single) == Set(reference.transactions))
        #expect(try StoredState.balances(s, merchant: single)
                == Set(reference.balances(asOf: FinanceTimestamp(secondsSinceEpoch: Int64(Self.now.timeIntervalSince1970)))))
        #expect(try StoredState.accounts(s, merchant: single) == Set(reference.financeAccounts))
        #expect(expected.rows["finance_postings"]?.count == reference.allPostings.count)

        for size in [1, 7, events.count] {
            let (merchant, _) = try s.merchant()
            var outcome = FinanceBatchOutcome()
            for start in stride(from: 0, to: events.count, by: size) {
                let part = try Self.applyBatch(s, Array(events[start..<min(events.count, start + size)]), merchant: merchant)
                outcome.applied += part.applied
                outcome.replayed += part.replayed
                outcome.withoutEffect += part.withoutEffect
                outcome.missingPostings += part.missingPostings
            }
            #expect(outcome.applied + outcome.replayed + outcome.withoutEffect == events.count, "size \(size)")
            #expect(outcome.replayed > 0 && outcome.withoutEffect > 0, "size \(size)")
            let state = try StoredState.read(s, merchant: merchant)
            for table in StoredState.tables {
                let want = expected.rows[table] ?? []
                let got = state.rows[table] ?? []
                #expect(got.count == want.count, "size \(size): \(table) row count")
                // The first differing row names the table and the entity.
                if let index = zip(got, want).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset {
                    Issue.record("size \(size): \(table) differs\n got: \(got[index])\nwant: \(want[index])")
                }
            }
            // The change log names each changed entity once per batch (per transaction).
            let repeated = try s.pool.query("""
                SELECT count(*) AS n FROM (SELECT 1 FROM finance_change WHERE merchant_id = $1
                                            GROUP BY xid, scope_kind, entity_id HAVING count(*) > 1) d
                """, [merchant]).first?.decode("n", as: Int.self)
            #expect(repeated == 0, "size \(size)")
            // Every entity has a change row, so catch-up from zero rebuilds it.
            let unlogged = try s.pool.query("""
                SELECT count(*) AS n FROM finance_entity e WHERE e.merchant_id = $1 AND NOT EXISTS (
                    SELECT 1 FROM finance_change c WHERE c.merchant_id = e.merchant_id AND c.scope_kind = e.scope_kind
                       AND c.entity_id = e.entity_id)
                """, [merchant]).first?.decode("n", as: Int.self)
            #expect(unlogged == 0, "size \(size)")
        }
    }

    // MARK: Replay, conflict, missing postings, transitions inside a batch

    @Test func replayingABatchChangesNothing() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_replay")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        let events: [BusinessEvent] = [
            Events.paid("pay_1", 1_000), Events.paid("pay_2", 2_000),
            .paymentBooked(paymentID: "pay_1", at: Events.at(10)),
            .fee(feeID: "fee_1", paymentID: "pay_1", money: Events.money(30), at: Events.at(10)),
            .payout(payoutID: "po_1", bankReference: "1234", money: Events.money(500), at: Events.at(20)),
            Events.paid("pay_1", 1_000),  // the same event again inside the batch
        ]
        let first = try Self.applyBatch(s, events, merchant: merchant)
        #expect(first == FinanceBatchOutcome(applied: 5, replayed: 1))
        let before = try StoredState.counts(s, merchant: merchant)
        #expect(before["finance_postings"] == 5)

        let again = try Self.applyBatch(s, events, merchant: merchant)
        #expect(again == FinanceBatchOutcome(replayed: 6))
        #expect(try StoredState.counts(s, merchant: merchant) == before)
    }

    @Test func aConflictInsideABatchRollsBackTheCallersTransaction() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_conflict")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        _ = try Self.applyBatch(s, [Events.paid("pay_1", 1_000)], merchant: merchant)
        let before = try StoredState.counts(s, merchant: merchant)

        let cases: [(String, [BusinessEvent])] = [
            ("stored posting, other amount", [Events.paid("pay_2", 2_000),
                                              .fee(feeID: "fee_1", paymentID: nil, money: Events.money(5), at: Events.at(1)),
                                              Events.paid("pay_1", 1_001)]),
            ("same batch, other amount", [Events.paid("pay_3", 300), .paymentBooked(paymentID: "pay_3", at: Events.at(2)),
                                          Events.paid("pay_3", 301)]),
        ]
        for (name, events) in cases {
            do {
                try s.pool.transaction { conn in
                    // Work of the caller's own in the same transaction goes too.
                    try conn.execute("UPDATE merchants SET display_name = 'Renamed' WHERE merchant_id = $1", [merchant])
                    _ = try FinanceRecorder().apply(events, merchantId: merchant, on: conn, now: Self.now,
                                                    missingPostings: .fail)
                }
                Issue.record("\(name): a conflict must throw")
            } catch let error as FinanceError {
                #expect(error.code == .eventConflict, "\(name)")
            }
            #expect(try StoredState.counts(s, merchant: merchant) == before, "\(name)")
            #expect(try s.pool.query("SELECT display_name FROM merchants WHERE merchant_id = $1", [merchant])
                .first?.decode("display_name", as: String.self) == "Finance Shop", "\(name)")
        }
    }

    @Test func missingPostingsAreCountedUnderSkipAndRefusedUnderFail() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_missing")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        let events: [BusinessEvent] = [
            .paymentBooked(paymentID: "pay_unknown", at: Events.at(1)),
            Events.paid("pay_1", 1_000),
            .paymentBooked(paymentID: "pay_1", at: Events.at(2)),
            .refundBooked(refundID: "re_unknown", at: Events.at(3)),
            // Booked before it exists (one by one, it would not be found either), then created.
            .paymentBooked(paymentID: "pay_late", at: Events.at(4)),
            Events.paid("pay_late", 700, offset: 5),
        ]
        do {
            _ = try Self.applyBatch(s, events, merchant: merchant, missing: .fail)
            Issue.record("a status change of an unknown posting must be refused under .fail")
        } catch let error as FinanceError {
            #expect(error.code == .postingNotFound)
        }
        #expect(try StoredState.counts(s, merchant: merchant)["finance_postings"] == 0)

        let outcome = try Self.applyBatch(s, events, merchant: merchant, missing: .skip)
        #expect(outcome == FinanceBatchOutcome(applied: 3, missingPostings: 3))
        let statuses = try s.pool.query("""
            SELECT posting_key, status FROM finance_postings WHERE merchant_id = $1 ORDER BY posting_key
            """, [merchant]).rows.map { "\(try $0.decode("posting_key", as: String.self))=\(try $0.decode("status", as: String.self))" }
        #expect(statuses == ["payment:pay_1=booked", "payment:pay_late=authorized"])
    }

    @Test func transitionsInsideOneBatchFollowEachOther() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_moves")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        _ = try Self.applyBatch(s, [Events.paid("pay_old", 5_000)], merchant: merchant)

        let outcome = try Self.applyBatch(s, [
            Events.paid("pay_1", 1_000),
            .paymentBooked(paymentID: "pay_1", at: Events.at(10)),
            .paymentBooked(paymentID: "pay_1", at: Events.at(99)),  // already booked: the first date stays
            .refundCreated(refundID: "re_1", paymentID: "pay_1", money: Events.money(400), at: Events.at(11)),
            .refundBooked(refundID: "re_1", at: Events.at(12)),
            .paymentBooked(paymentID: "pay_old", at: Events.at(13)),
            .paymentBooked(paymentID: "pay_old", at: Events.at(98)),
        ], merchant: merchant)
        #expect(outcome == FinanceBatchOutcome(applied: 5, replayed: 2))
        let rows = try s.pool.query("""
            SELECT posting_key, status, extract(epoch FROM posted_date)::bigint AS posted FROM finance_postings
             WHERE merchant_id = $1 ORDER BY posting_key
            """, [merchant]).rows.map {
                "\(try $0.decode("posting_key", as: String.self)) \(try $0.decode("status", as: String.self)) "
                    + "\(try $0.decode("posted", as: Int64.self) - Events.t0)"
            }
        #expect(rows == ["payment:pay_1 booked 10", "payment:pay_old booked 13", "refund:re_1 booked 12"])
        // 1,000 + 5,000 booked in, 400 booked out.
        let balance = try s.pool.query("""
            SELECT booked_minor, available_minor FROM finance_balance WHERE merchant_id = $1 AND account_id = $2::uuid
            """, [merchant, account.description]).first
        #expect(try balance?.decode("booked_minor", as: Int64.self) == 5_600)
        #expect(try balance?.decode("available_minor", as: Int64.self) == 5_600)

        // booked → rejected is refused inside a batch as it is alone, and the batch leaves nothing.
        let before = try StoredState.counts(s, merchant: merchant)
        do {
            _ = try Self.applyBatch(s, [Events.paid("pay_2", 200), .paymentBooked(paymentID: "pay_2", at: Events.at(20)),
                                        .paymentVoided(paymentID: "pay_2", at: Events.at(21))], merchant: merchant)
            Issue.record("booked → rejected must be refused")
        } catch let error as FinanceError {
            #expect(error.code == .statusTransitionInvalid)
        }
        #expect(try StoredState.counts(s, merchant: merchant) == before)
    }

    // MARK: Concurrency

    @Test func concurrentFirstBatchesOfAMerchantShareItsNewAccounts() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_race", connectionsMax: 8)
        defer { s.stop() }
        for _ in 0..<4 {
            let (merchant, _) = try s.merchant()
            let writers = 4
            let start = DispatchSemaphore(value: 0)
            let finished = DispatchGroup()
            let failures = Mutex<[String]>([])
            for w in 0..<writers {
                // Each writer uses the merchant's accounts first, in its own order.
                let paid = Events.paid("pay_\(w)", 1_000)
                let fee = BusinessEvent.fee(feeID: "fee_\(w)", paymentID: nil, money: Events.money(10), at: Events.at(1))
                let payout = BusinessEvent.payout(payoutID: "po_\(w)", bankReference: "1234", money: Events.money(100),
                                                  at: Events.at(2))
                let events = w % 2 == 0 ? [fee, paid, payout] : [payout, paid, fee]
                finished.enter()
                Thread {
                    start.wait()
                    do { _ = try Self.applyBatch(s, events, merchant: merchant) } catch {
                        failures.withLock { $0.append(String(describing: error)) }
                    }
                    finished.leave()
                }.start()
            }
            for _ in 0..<writers { start.signal() }
            finished.wait()
            #expect(failures.withLock { $0 }.isEmpty)
            // psp, bank (exposed); sales, fees, transit (internal): each created once, by whoever came first.
            let counts = try StoredState.counts(s, merchant: merchant)
            #expect(counts["finance_ledger_accounts"] == 5)
            #expect(counts["finance_account"] == 2)
            #expect(counts["finance_postings"] == writers * 4)
            let psp = FinanceTestServer.settlementAccountID(merchant: merchant)
            let balance = try s.pool.query("""
                SELECT booked_minor, available_minor FROM finance_balance WHERE merchant_id = $1 AND account_id = $2::uuid
                """, [merchant, psp.description]).first
            // Per writer: fee 10 and payout 100 booked out; the authorized payment counts nowhere yet.
            #expect(try balance?.decode("booked_minor", as: Int64.self) == -110 * Int64(writers))
            #expect(try balance?.decode("available_minor", as: Int64.self) == -110 * Int64(writers))
            let accountInserts = try s.pool.query("""
                SELECT count(*) AS n FROM finance_change WHERE merchant_id = $1 AND scope_kind = 'accounts' AND op = 'insert'
                """, [merchant]).first?.decode("n", as: Int.self)
            #expect(accountInserts == 2)
        }
    }

    // MARK: Limits

    @Test func batchSizeIsBoundedAtAndPastTheLimit() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_limit")
        defer { s.stop() }
        let (merchant, _) = try s.merchant()
        let max = FinanceRecorder.batchEventsMaxDefault
        // Declined payments map to nothing: the bound itself is what is measured here.
        let declined = (0...max).map { BusinessEvent.paymentDeclined(paymentID: "pay_\($0)") }
        #expect(try Self.applyBatch(s, Array(declined.prefix(max)), merchant: merchant)
                == FinanceBatchOutcome(withoutEffect: max))
        do {
            _ = try Self.applyBatch(s, declined, merchant: merchant)
            Issue.record("\(max + 1) events must be refused")
        } catch let error as FinanceError {
            #expect(error.code == .eventInvalid)
            #expect(error.field == "events")
        }

        // A smaller configured bound holds the same way, with real writes.
        let small = FinanceRecorder(batchEventsMax: 3)
        let fees = (0..<4).map { BusinessEvent.fee(feeID: "fee_\($0)", paymentID: nil, money: Events.money(10), at: Events.at(0)) }
        #expect(try Self.applyBatch(s, Array(fees.prefix(3)), merchant: merchant, recorder: small)
                == FinanceBatchOutcome(applied: 3))
        do {
            _ = try Self.applyBatch(s, fees, merchant: merchant, recorder: small)
            Issue.record("4 events must be refused by a bound of 3")
        } catch let error as FinanceError {
            #expect(error.code == .eventInvalid)
        }
        #expect(try StoredState.counts(s, merchant: merchant)["finance_postings"] == 3)
    }

    // MARK: History

    @Test func historyShowsABatchBookingAsAnUpdateOfTheSameTransaction() throws {
        let s = try FinanceTestServer(prefix: "fin_batch_hist")
        defer { s.stop() }
        let (merchant, key) = try s.merchant()
        let account = FinanceTestServer.settlementAccountID(merchant: merchant)
        try s.record([Events.paid("pay_1", 1_000), Events.paid("pay_2", 2_000)], merchant: merchant)
        let first = try FinanceShellTests.follow(s, account: account, key: key, from: nil) { $0.count == 2 }
        let payment = try #require(first.transactions.first { $0.transactionAmount.amountMinor == 1_000 })
        #expect(payment.status == .authorized)

        _ = try Self.applyBatch(s, [
            .paymentBooked(paymentID: "pay_1", at: Events.at(50)),
            .fee(feeID: "fee_1", paymentID: "pay_1", money: Events.money(25), at: Events.at(50)),
        ], merchant: merchant)

        var updated: [Transaction] = []
        var inserted: [Transaction] = []
        var token = first.token
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline, updated.isEmpty || inserted.isEmpty {
            let page = try decode(DecodedPage<Transaction>.self, try s.get(
                "/v1/finance/transactions/history?accountID=\(account)" + (token.map { "&since=\($0)" } ?? ""), key: key).body)
            updated += page.updated
            inserted += page.inserted
            token = page.newToken
            if !page.hasMore { usleep(20_000) }
        }
        #expect(updated.map(\.id) == [payment.id])
        #expect(updated.first?.status == .booked)
        #expect(updated.first?.postedDate == Events.at(50))
        #expect(inserted.map(\.transactionAmount.amountMinor) == [25])
        #expect(inserted.first?.transactionType == .fee)
    }
}

/// A reproducible mix of every kind of business event, kept only where the reference ledger accepts it
/// in order, so applying the list one by one never throws.
enum MixedEvents {
    /// SplitMix64: a fixed seed gives the same list on every run.
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    /// How many kinds of `BusinessEvent` there are.
    static let kindCount = 17

    /// The case name of `event`.
    static func kind(_ event: BusinessEvent) -> String {
        switch event {
        case .paymentSucceeded: "paymentSucceeded"
        case .paymentDeclined: "paymentDeclined"
        case .paymentFailed: "paymentFailed"
        case .paymentBooked: "paymentBooked"
        case .paymentVoided: "paymentVoided"
        case .refundCreated: "refundCreated"
        case .refundBooked: "refundBooked"
        case .refundRejected: "refundRejected"
        case .fee: "fee"
        case .chargeback: "chargeback"
        case .chargebackReversal: "chargebackReversal"
        case .adjustment: "adjustment"
        case .payout: "payout"
        case .payoutArrived: "payoutArrived"
        case .reversal: "reversal"
        case .feeInvoiced: "feeInvoiced"
        case .feeInvoiceSettled: "feeInvoiceSettled"
        }
    }

    static func make(count: Int, seed: UInt64) throws -> [BusinessEvent] {
        var random = Generator(state: seed)
        var reference = FinanceLedger(context: FinanceContext(identity: FinanceStoreIdentity.identity("merchant.mix"),
                                                              merchantName: "Mix"))
        let sides: [(processor: String, currency: String)] = [("sim", "USD"), ("adyen", "EUR")]
        var events: [BusinessEvent] = []
        var payments: [String] = [], refunds: [String] = [], chargebacks: [String] = [], payouts: [String] = []
        var invoices: [String] = []
        for step in 0..<count {
            let side = sides[random.next(sides.count)]
            let money = EventMoney(amountMinor: Int64(1 + random.next(50_000)), currencyCode: side.currency,
                                   processor: side.processor)
            let at = Events.at(Int64(step))
            func pick(_ list: [String]) -> String { list.isEmpty ? "none" : list[random.next(list.count)] }
            let event: BusinessEvent
            switch random.next(21) {
            case 0...3:
                payments.append("pay_\(step)")
                event = .paymentSucceeded(paymentID: "pay_\(step)", money: money, at: at)
            case 4, 5: event = .paymentBooked(paymentID: pick(payments), at: at)
            case 6: event = .paymentVoided(paymentID: pick(payments), at: at)
            case 7:
                refunds.append("re_\(step)")
                event = .refundCreated(refundID: "re_\(step)", paymentID: pick(payments), money: money, at: at)
            case 8: event = .refundBooked(refundID: pick(refunds), at: at)
            case 9: event = .refundRejected(refundID: pick(refunds), at: at)
            case 10: event = .fee(feeID: "fee_\(step)", paymentID: random.next(2) == 0 ? nil : pick(payments), money: money, at: at)
            case 11:
                chargebacks.append("cb_\(step)")
                event = .chargeback(chargebackID: "cb_\(step)", paymentID: pick(payments), money: money, at: at)
            case 12: event = .chargebackReversal(reversalID: "cbr_\(step)", chargebackID: pick(chargebacks), money: money, at: at)
            case 13:
                event = .adjustment(adjustmentID: "adj_\(step)", direction: random.next(2) == 0 ? .credit : .debit,
                                    money: money, note: random.next(2) == 0 ? "" : "Correction \(step)", at: at)
            case 14:
                payouts.append("po_\(step)")
                event = .payout(payoutID: "po_\(step)", bankReference: ["1234", "5678"][random.next(2)], money: money, at: at)
            case 15: event = .payoutArrived(payoutID: pick(payouts), at: at)
            case 16:
                invoices.append("inv_\(step)")
                event = .feeInvoiced(invoiceID: "inv_\(step)", money: money, at: at)
            case 17: event = .feeInvoiceSettled(invoiceID: pick(invoices), money: money, at: at)
            case 18: event = random.next(2) == 0 ? .paymentDeclined(paymentID: "pay_d\(step)") : .paymentFailed(paymentID: "pay_f\(step)")
            case 19:
                // A correction takes back a payout (booked leg mirrored, pending deposit rejected) or a payment.
                let keys = payouts.flatMap { ["payout:\($0)", "payout-arrival:\($0)"] } + payments.map { "payment:\($0)" }
                event = .reversal(reversalID: "rev_\(step)", postingKey: pick(keys), at: at)
            default:
                guard !events.isEmpty else { continue }
                event = events[random.next(events.count)]  // an exact replay of an earlier event
            }
            do {
                _ = try reference.apply(event)
                events.append(event)
            } catch {
                continue  // not applicable at this point (unknown posting, final status, conflict)
            }
        }
        return events
    }
}

/// One merchant's stored finance rows as text, with every merchant-derived id replaced by the key it is
/// derived from, so two merchants fed the same events compare equal row for row.
struct StoredState {
    static let tables = ["finance_ledger_accounts", "finance_postings", "finance_entries", "finance_account",
                         "finance_balance", "finance_transaction", "finance_entity"]

    /// Sorted normalised rows per table.
    var rows: [String: [String]] = [:]

    static func read(_ s: FinanceTestServer, merchant: String) throws -> StoredState {
        let identity = FinanceStoreIdentity.identity(merchant)
        let accountKeys = try s.pool.query("SELECT account_key FROM finance_ledger_accounts WHERE merchant_id = $1",
                                           [merchant]).rows.map { try $0.decode("account_key", as: String.self) }
        let legs = try s.pool.query("SELECT posting_key, account_key FROM finance_entries WHERE merchant_id = $1",
                                    [merchant]).rows
        var names: [String: String] = [:]
        for key in accountKeys {
            let id = identity.id("account", key)
            names[id.description] = "<account \(key)>"
            names[FinanceBalances.balanceID(of: id, identity: identity).description] = "<balance \(key)>"
        }
        for leg in legs {
            let posting: String = try leg.decode("posting_key")
            let account: String = try leg.decode("account_key")
            names[identity.id("transaction", posting + "@" + account).description] = "<transaction \(posting)@\(account)>"
        }
        let statements: [String: SQL] = [
            "finance_ledger_accounts": """
                SELECT concat_ws('|', account_key, ledger_class, currency_code, exposed, account_id, display_name,
                                 institution_name) AS r FROM finance_ledger_accounts WHERE merchant_id = $1
                """,
            "finance_postings": """
                SELECT concat_ws('|', posting_key, transaction_type, transaction_date, status, coalesce(posted_date::text, '-'),
                                 description, original_description, encode(fingerprint, 'hex')) AS r
                  FROM finance_postings WHERE merchant_id = $1
                """,
            "finance_entries": """
                SELECT concat_ws('|', posting_key, leg, account_key, side, amount_minor, currency_code) AS r
                  FROM finance_entries WHERE merchant_id = $1
                """,
            "finance_account": """
                SELECT concat_ws('|', id, kind, currency_code, display_name, payload) AS r
                  FROM finance_account WHERE merchant_id = $1
                """,
            "finance_balance": """
                SELECT concat_ws('|', account_id, currency_code, booked_minor, available_minor) AS r
                  FROM finance_balance WHERE merchant_id = $1
                """,
            "finance_transaction": """
                SELECT concat_ws('|', id, account_id, posting_key, status, transaction_type, credit_debit_indicator,
                                 coalesce(merchant_category_code::text, '-'), transaction_date,
                                 coalesce(posted_date::text, '-'), amount_minor, currency_code, payload) AS r
                  FROM finance_transaction WHERE merchant_id = $1
                """,
            "finance_entity": """
                SELECT concat_ws('|', scope_kind, scope_id, entity_id, payload) AS r FROM finance_entity WHERE merchant_id = $1
                """,
        ]
        var state = StoredState()
        for table in tables {
            guard let sql = statements[table] else { continue }
            state.rows[table] = try s.pool.query(sql, [merchant]).rows.map { row in
                normalise(try row.decode("r", as: String.self), names: names)
            }.sorted()
        }
        return state
    }

    /// Replaces every UUID in `text` by its name; an unknown UUID stays, and then fails the comparison.
    static func normalise(_ text: String, names: [String: String]) -> String {
        var out = ""
        var rest = Substring(text)
        let uuidLength = 36
        while let dash = rest.firstIndex(of: "-") {
            // A UUID's first dash follows 8 hex digits.
            let start = rest.index(dash, offsetBy: -8, limitedBy: rest.startIndex) ?? rest.startIndex
            if rest.distance(from: start, to: dash) == 8,
               let end = rest.index(start, offsetBy: uuidLength, limitedBy: rest.endIndex),
               let name = names[String(rest[start..<end])] {
                out += rest[rest.startIndex..<start] + name
                rest = rest[end...]
            } else {
                out += rest[rest.startIndex...dash]
                rest = rest[rest.index(after: dash)...]
            }
        }
        return out + rest
    }

    /// Row counts of every finance table (and the change log) for `merchant`.
    static func counts(_ s: FinanceTestServer, merchant: String) throws -> [String: Int] {
        guard let row = try s.pool.query("""
            SELECT (SELECT count(*) FROM finance_ledger_accounts WHERE merchant_id = $1) AS finance_ledger_accounts,
                   (SELECT count(*) FROM finance_postings WHERE merchant_id = $1) AS finance_postings,
                   (SELECT count(*) FROM finance_entries WHERE merchant_id = $1) AS finance_entries,
                   (SELECT count(*) FROM finance_account WHERE merchant_id = $1) AS finance_account,
                   (SELECT count(*) FROM finance_balance WHERE merchant_id = $1) AS finance_balance,
                   (SELECT count(*) FROM finance_transaction WHERE merchant_id = $1) AS finance_transaction,
                   (SELECT count(*) FROM finance_entity WHERE merchant_id = $1) AS finance_entity,
                   (SELECT count(*) FROM finance_change WHERE merchant_id = $1) AS finance_change
            """, [merchant]).first else { return [:] }
        var counts: [String: Int] = [:]
        for table in tables + ["finance_change"] { counts[table] = try row.decode(table, as: Int.self) }
        return counts
    }

    /// The stored FinanceKit transactions of `merchant`.
    static func transactions(_ s: FinanceTestServer, merchant: String) throws -> Set<Transaction> {
        Set(try s.pool.query("SELECT payload::text AS p FROM finance_transaction WHERE merchant_id = $1", [merchant])
            .rows.map { try JSONDecoder().decode(Transaction.self, from: Data(try $0.decode("p", as: String.self).utf8)) })
    }

    /// The stored FinanceKit accounts of `merchant`.
    static func accounts(_ s: FinanceTestServer, merchant: String) throws -> Set<Account> {
        Set(try s.pool.query("SELECT payload::text AS p FROM finance_account WHERE merchant_id = $1", [merchant])
            .rows.map { try JSONDecoder().decode(Account.self, from: Data(try $0.decode("p", as: String.self).utf8)) })
    }

    /// The stored FinanceKit balances of `merchant` (the entity payloads the API serves).
    static func balances(_ s: FinanceTestServer, merchant: String) throws -> Set<AccountBalance> {
        Set(try s.pool.query("""
            SELECT payload::text AS p FROM finance_entity WHERE merchant_id = $1 AND scope_kind = 'account_balances'
            """, [merchant])
            .rows.map { try JSONDecoder().decode(AccountBalance.self, from: Data(try $0.decode("p", as: String.self).utf8)) })
    }
}
