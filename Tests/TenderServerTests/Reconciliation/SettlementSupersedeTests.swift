import Crypto
import FinanceStore
import Foundation
import Observability
import Postgres
import Reconciliation
import Synchronization
import Testing
@testable import TenderServer

private let header = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

/// Booked and available balance (minor units, FinanceKit sign: credit positive) of every exposed account.
private func balances(_ pool: PostgresPool, _ merchantId: String) throws -> [String: (booked: Int64, available: Int64)] {
    var out: [String: (booked: Int64, available: Int64)] = [:]
    for row in try pool.query("""
        SELECT la.account_key, b.booked_minor, b.available_minor
          FROM finance_ledger_accounts la
          JOIN finance_balance b ON b.merchant_id = la.merchant_id AND b.account_id = la.account_id
         WHERE la.merchant_id = $1 AND la.exposed
        """, [merchantId]).rows {
        out[try row.decode(0)] = (try row.decode(1), try row.decode(2))
    }
    return out
}

/// Issue 12 parts 4 and 5: a superseding revision leaves the finance store as if only it had been
/// imported, and payouts land on one bank account per currency, where they can be marked arrived.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase))
struct SettlementSupersedeTests {
    static let original = header
        + "2026-11-20,B-1,adjustment,,,USD,-0.50,0.00,-0.50\n"
        + "2026-11-20,B-1,payout,,,USD,-4.35,0.00,-4.35\n"
    static let corrected = header
        + "2026-11-20,B-1,adjustment,,,USD,-0.40,0.00,-0.40\n"
        + "2026-11-20,B-1,payout,,,USD,-4.45,0.00,-4.45\n"

    static func post(_ client: RawHTTPClient, _ key: String, _ csv: String, supersede: Bool = false) throws -> RawResponse {
        try client.request("POST", "/v1/settlement-reports?format=generic" + (supersede ? "&supersede=true" : ""),
                           headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "text/csv")],
                           body: Array(csv.utf8))
    }

    @Test func aCorrectedBatchLeavesTheLedgerAsIfOnlyTheCorrectionWasImported() throws {
        let s = try RunningServer(prefix: "recon_supersede")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let client = try RawHTTPClient(port: s.port)
        let psp = "psp:\(s.app.configuration.processor.rawValue):USD"
        let bank = "bank:payouts:USD"

        #expect(try Self.post(client, key, Self.original).status == 201)
        var booked = try balances(s.pool, merchant.merchantId)
        #expect(booked[psp]?.booked == -485)
        #expect(booked[bank]?.booked == 0)

        let revised = try Self.post(client, key, Self.corrected, supersede: true)
        #expect(revised.status == 201, "\(revised.text)")
        let body = try revised.json()
        #expect(body["revision"] as? Int == 2)
        #expect(body["effectsPending"] as? Bool == false)
        let changes = try #require(body["financeChanges"] as? [String: Any])
        #expect(changes["rebooked"] as? Int == 2)
        #expect(changes["reversed"] as? Int == 0)
        booked = try balances(s.pool, merchant.merchantId)
        #expect(booked[psp]?.booked == -485, "not -970: the first revision's lines were reversed")
        #expect(booked[psp]?.available == -485)
        // One bank account for every payout in USD; the first revision's deposit was rejected.
        #expect(booked.keys.filter { $0.hasPrefix("bank:") } == [bank])
        #expect(booked[bank]?.booked == 0)
        let deposits = try s.pool.query("""
            SELECT t.id::text, t.status, t.amount_minor FROM finance_transaction t
             WHERE t.merchant_id = $1 AND t.transaction_type = 'deposit' ORDER BY t.amount_minor
            """, [merchant.merchantId]).rows.map {
            (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self), try $0.decode(2, as: Int64.self))
        }
        #expect(deposits.map(\.1) == ["rejected", "pending"])
        #expect(deposits.map(\.2) == [435, 445])

        // Arrived through the API: the deposit is booked and the bank balance shows it; twice is the same.
        let auth = [("Authorization", "Bearer \(key)")]
        let arrived = try client.request("POST", "/v1/finance/payouts/\(deposits[1].0)/arrived", headers: auth)
        #expect(arrived.status == 200, "\(arrived.text)")
        #expect(try arrived.json()["status"] as? String == "booked")
        #expect(try balances(s.pool, merchant.merchantId)[bank]?.booked == 445)
        let again = try client.request("POST", "/v1/finance/payouts/\(deposits[1].0)/arrived", headers: auth)
        #expect(again.status == 200)
        #expect(again.body == arrived.body)
        #expect(try balances(s.pool, merchant.merchantId)[bank]?.booked == 445)
        // The reversed payout cannot arrive; another merchant cannot see this one; a non-payout is no payout.
        let reversed = try client.request("POST", "/v1/finance/payouts/\(deposits[0].0)/arrived", headers: auth)
        #expect(reversed.status == 409)
        #expect(try reversed.json()["code"] as? String == "payout_reversed")
        let (_, otherKey) = try s.merchantWithKey()
        let foreign = try client.request("POST", "/v1/finance/payouts/\(deposits[1].0)/arrived",
                                         headers: [("Authorization", "Bearer \(otherKey)")])
        #expect(foreign.status == 404)
        #expect(try foreign.json()["code"] as? String == "not_found")
        let adjustment = try #require(try s.pool.query("""
            SELECT id::text FROM finance_transaction WHERE merchant_id = $1 AND transaction_type = 'adjustment' LIMIT 1
            """, [merchant.merchantId]).first?.decode(0, as: String.self))
        #expect(try client.request("POST", "/v1/finance/payouts/\(adjustment)/arrived", headers: auth).status == 404)
        #expect(try client.request("POST", "/v1/finance/payouts/not-a-uuid/arrived", headers: auth).status == 404)
        #expect(try client.request("POST", "/v1/finance/payouts/\(deposits[1].0)/arrived").status == 401)

        // A third revision without the adjustment takes it back when the report finishes.
        let third = header + "2026-11-20,B-1,payout,,,USD,-4.45,0.00,-4.45\n"
        let dropped = try Self.post(client, key, third, supersede: true)
        #expect(dropped.status == 201, "\(dropped.text)")
        #expect((try dropped.json()["financeChanges"] as? [String: Any])?["reversed"] as? Int == 1)
        #expect(try balances(s.pool, merchant.merchantId)[psp]?.booked == -445)
        #expect(try balances(s.pool, merchant.merchantId)[bank]?.booked == 445)
    }

    @Test func anInterruptedSupersedeIsFinishedOnceByItsReplay() throws {
        let pool = try TestEnvironment.migratedPool("recon_supersede_resume")
        defer { pool.close() }
        try LedgerFixture.install(pool)
        let merchantId = "merchant.supersede.resume"
        try MerchantStore(pool: pool).add(try Merchant.validated(
            merchantId: merchantId, displayName: "Resume", domains: ["r.test"], countryCode: "US", currencies: ["USD"]))
        let finance = FinanceSettlementSink(processor: "adyen", logger: Logger(minimumLevel: .error))
        let sink = FailingSink(inner: finance)
        let store = SettlementReportStore(pool: pool, sink: sink)
        func load(_ text: String, supersede: Bool) throws -> SettlementImport {
            let bytes = Array(text.utf8)
            return try store.importReport(merchantId: merchantId, format: .generic, fileSHA256: hexEncoded(Digest.sha256(bytes)),
                                          source: ByteArraySource(bytes, chunkBytes: 11), supersede: supersede, now: Date())
        }
        _ = try load(Self.original, supersede: false)
        // The corrected revision's second chunk (the payout) fails: the adjustment chunk is committed.
        sink.failOnCall(sink.calls + 2)
        #expect(throws: SinkFailure.self) { _ = try load(Self.corrected, supersede: true) }
        #expect(try balances(pool, merchantId)["psp:adyen:USD"]?.booked == -475)  // 0.40 for 0.50, payout not yet

        let replay = try load(Self.corrected, supersede: true)
        #expect(replay.created == false)
        #expect(replay.report.effectsPending == false)
        #expect(replay.report.financeChanges.rebooked == 2)
        #expect(try balances(pool, merchantId)["psp:adyen:USD"]?.booked == -485)
        let changes = try pool.query("SELECT count(*)::int FROM finance_change WHERE merchant_id = $1", [merchantId])
            .first?.decode(0, as: Int.self)
        let postings = try pool.query("SELECT count(*)::int FROM finance_postings WHERE merchant_id = $1", [merchantId])
            .first?.decode(0, as: Int.self)
        // Original adjustment, payout and its deposit; the adjustment's and the payout's reversals
        // (the pending deposit is rejected in place); the corrected adjustment, payout and deposit.
        #expect(postings == 8)

        // Replayed again, and with every pending step swept: nothing moves.
        _ = try load(Self.corrected, supersede: true)
        #expect(try store.applyPendingEffects(merchantId: merchantId, now: Date()) == 0)
        #expect(try pool.query("SELECT count(*)::int FROM finance_change WHERE merchant_id = $1", [merchantId])
            .first?.decode(0, as: Int.self) == changes)
        #expect(try balances(pool, merchantId)["psp:adyen:USD"]?.booked == -485)
    }

    @Test func theNextPayoutConfirmsTheEarlierOnes() throws {
        let s = try RunningServer(prefix: "recon_payout_next")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let client = try RawHTTPClient(port: s.port)
        let bank = "bank:payouts:USD"
        #expect(try Self.post(client, key, header + "2026-11-20,B-1,payout,,,USD,-4.35,0.00,-4.35\n").status == 201)
        #expect(try balances(s.pool, merchant.merchantId)[bank]?.booked == 0)
        #expect(try balances(s.pool, merchant.merchantId)[bank]?.available == 0)
        let next = try Self.post(client, key, header + "2026-11-21,B-2,payout,,,USD,-1.00,0.00,-1.00\n")
        #expect(next.status == 201)
        #expect((try next.json()["financeChanges"] as? [String: Any])?["payoutsConfirmed"] as? Int == 1)
        // B-1's deposit arrived; B-2's waits for the report after it. Both on the one USD bank account.
        #expect(try balances(s.pool, merchant.merchantId)[bank]?.booked == 435)
        let statuses = try s.pool.query("""
            SELECT status, amount_minor FROM finance_transaction
             WHERE merchant_id = $1 AND transaction_type = 'deposit' ORDER BY amount_minor
            """, [merchant.merchantId]).rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self)) }
        #expect(statuses.map(\.0) == ["pending", "booked"])
        #expect(statuses.map(\.1) == [100, 435])
        #expect(try s.pool.query("SELECT count(*)::int FROM finance_ledger_accounts WHERE merchant_id = $1 AND account_key LIKE 'bank:%'",
                                 [merchant.merchantId]).first?.decode(0, as: Int.self) == 1)
    }

    @Test func aReturnedPayoutConfirmsNothing() throws {
        let s = try RunningServer(prefix: "recon_payout_back")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let client = try RawHTTPClient(port: s.port)
        let adyenHeader = "Company Account,Merchant Account,Psp Reference,Merchant Reference,Payment Method,Creation Date,"
            + "TimeZone,Type,Modification Reference,Gross Currency,Gross Debit (GC),Gross Credit (GC),Exchange Rate,"
            + "Net Currency,Net Debit (NC),Net Credit (NC),Commission (NC),Markup (NC),Scheme Fees (NC),"
            + "Interchange (NC),Payment Method Variant,Modification Merchant Reference,Batch Number\n"
        func file(batch: Int, _ rows: [String]) -> String {
            // Fields 1–7, then Type … Net Credit (8–16) as given, then 17–22 empty and the batch number.
            adyenHeader + rows.map { "Co,Shop,,,,2026-11-2\(batch) 23:00:00,CET,\($0)" + String(repeating: ",",
                count: 7) + "\(batch)\n" }.joined()
        }
        func post(_ text: String) throws -> RawResponse {
            try client.request("POST", "/v1/settlement-reports?format=adyen-sdr",
                               headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "text/csv")],
                               body: Array(text.utf8))
        }
        #expect(try post(file(batch: 1, ["MerchantPayout,TX1,EUR,,,,USD,4.35,"])).status == 201)
        // The next batch pays out again, but also brings a payout back: no earlier payout is confirmed.
        let next = try post(file(batch: 2, ["BankInstructionReturned,TX1 returned,,,,,USD,,4.35",
                                            "MerchantPayout,TX2,EUR,,,,USD,4.35,"]))
        #expect(next.status == 201, "\(next.text)")
        #expect((try next.json()["financeChanges"] as? [String: Any])?["payoutsConfirmed"] as? Int == 0)
        let bank = try balances(s.pool, merchant.merchantId)["bank:payouts:USD"]
        #expect(bank?.booked == 0)
        // The returned money is back on the processor balance: −4.35 + 4.35 − 4.35.
        #expect(try balances(s.pool, merchant.merchantId)["psp:\(s.app.configuration.processor.rawValue):USD"]?.booked == -435)
    }
}

private struct SinkFailure: Error {}

/// Forwards to the finance sink; the call numbered `failOn` throws instead.
private final class FailingSink: SettlementEffectSink {
    private let state = Mutex<(calls: Int, failOn: Int)>((0, 0))
    let inner: FinanceSettlementSink
    init(inner: FinanceSettlementSink) { self.inner = inner }
    var calls: Int { state.withLock { $0.calls } }
    func failOnCall(_ call: Int) { state.withLock { $0.failOn = call } }

    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        try apply(effects.map { .book($0, version: 0) }, merchantId: merchantId, on: conn, now: now)
    }

    func apply(_ actions: [SettlementEffectAction], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let fail = state.withLock { state -> Bool in
            state.calls += 1
            return state.calls == state.failOn
        }
        if fail { throw SinkFailure() }
        try inner.apply(actions, merchantId: merchantId, on: conn, now: now)
    }

    func postingKeys(of effect: FinanceEffect, version: Int, merchantId: String) -> [String] {
        inner.postingKeys(of: effect, version: version, merchantId: merchantId)
    }
}
