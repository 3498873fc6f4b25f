import Foundation
import Postgres
import Testing
@testable import TenderServer

/// Issue 7: matched payments become `booked` in the finance store (an update of the same transaction
/// in the history feed), and fees and payouts become their own transactions.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase))
struct SettlementFinanceTests {
    @Test func matchedPaymentIsBookedAndFeesAndPayoutsAreRecorded() throws {
        let s = try RunningServer(prefix: "recon_fin")
        defer { s.stop() }
        let (merchant, key) = try s.merchantWithKey()
        let paymentId = fixtureId("pay_", "booked")
        try LedgerFixture.payment(s.pool, merchantId: merchant.merchantId, id: paymentId, amountMinor: 1_000,
                                  reference: "psp_booked")
        // The succeeded payment reached the finance store the way the payments service records it.
        try s.pool.transaction { conn in
            try FinancePaymentSink(processor: s.app.configuration.processor.rawValue).record(
                .paymentSucceeded(.init(paymentId: paymentId, sessionId: "cs_" + paymentId.dropFirst(4), amountMinor: 1_000,
                                  currencyCode: "USD", processorReference: "psp_booked")),
                merchantId: merchant.merchantId, on: conn, now: Date())
        }
        let client = try RawHTTPClient(port: s.port)
        let auth = [("Authorization", "Bearer \(key)")]
        let accounts = try client.request("GET", "/v1/finance/accounts", headers: auth).json()
        let accountID = try #require(((accounts["accounts"] as? [[String: Any]])?.first)?["id"] as? String)
        // Catch up until the payment's transaction is visible (the feed reads below the oldest running
        // transaction in the cluster, which other tests may hold open for a moment).
        var before: [String: Any] = [:]
        let catchUp = Date().addingTimeInterval(90)
        while Date() < catchUp {
            before = try client.request("GET", "/v1/finance/transactions/history?accountID=\(accountID)", headers: auth).json()
            if (before["inserted"] as? [[String: Any]])?.isEmpty == false { break }
            usleep(100_000)
        }
        let token = try #require(before["newToken"] as? String)
        let authorized = try #require((before["inserted"] as? [[String: Any]])?.first)
        #expect(authorized["status"] as? String == "authorized")

        let csv = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"
            + "2026-11-20,B7,payment,\(paymentId),psp_booked,USD,10.00,0.30,9.70\n"
            + "2026-11-20,B7,payout,,,USD,-9.70,0.00,-9.70\n"
        let report = try client.request("POST", "/v1/settlement-reports?format=generic",
                                        headers: auth + [("Content-Type", "text/csv")], body: Array(csv.utf8))
        #expect(report.status == 201)

        // Poll: the feed only shows changes below the oldest running transaction in the cluster.
        var updated: [[String: Any]] = []
        var inserted: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            let page = try client.request("GET", "/v1/finance/transactions/history?accountID=\(accountID)&since=\(token)",
                                          headers: auth).json()
            updated = page["updated"] as? [[String: Any]] ?? []
            inserted = page["inserted"] as? [[String: Any]] ?? []
            if !updated.isEmpty { break }
            usleep(100_000)
        }
        let booked = try #require(updated.first { $0["id"] as? String == authorized["id"] as? String })
        #expect(booked["status"] as? String == "booked")
        #expect(booked["postedDate"] as? String != nil)
        let types = Set(inserted.compactMap { $0["transactionType"] as? String })
        #expect(!inserted.isEmpty, "fee and payout transactions appear as inserts: \(inserted)")
        #expect(types.count >= 1)

        // Importing the same bytes again changes nothing in the ledger.
        let postings = try s.pool.query("SELECT count(*)::int AS n FROM finance_change").first?.decode("n", as: Int.self)
        let again = try client.request("POST", "/v1/settlement-reports?format=generic",
                                       headers: auth + [("Content-Type", "text/csv")], body: Array(csv.utf8))
        #expect(again.status == 200)
        let repostings = try s.pool.query("SELECT count(*)::int AS n FROM finance_change").first?.decode("n", as: Int.self)
        #expect(postings == repostings)
    }
}
