import Foundation
import Testing
@testable import TenderServer

/// The sample Adyen Settlement details reports (Tests/ReconciliationTests/Vectors/adyen-sdr) imported
/// through the API: every row is reported in its category and booked in the currency its amount is in.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase))
struct SettlementAdyenFixtureTests {
    static func fixture(_ name: String) throws -> [UInt8] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("ReconciliationTests/Vectors/adyen-sdr")
        return Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    @Test(arguments: ["settlement_detail_report_batch_57_30_columns.csv", "settlement_detail_report_batch_57_49_columns.csv"])
    func aRealFormatFileImportsAndBooksEveryRow(layout: String) throws {
        let s = try RunningServer(prefix: "recon_adyen_fx")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let m = merchant.merchantId
        let sink = FinancePaymentSink(processor: s.app.configuration.processor.rawValue)
        let payments: [(String, Int64, String)] = [("pay_adyensample0000000000001", 5_200, "USD"), ("pay_adyensample0000000000002", 2_000, "USD"),
                                                   ("pay_adyensample0000000000003", 50, "EUR"), ("pay_adyensample0000000000007", 999, "USD")]
        for (id, amount, currency) in payments {
            try LedgerFixture.payment(s.pool, merchantId: m, id: id, amountMinor: amount, currency: currency)
            try s.pool.transaction { conn in
                try sink.record(.paymentSucceeded(.init(paymentId: id, sessionId: "cs_" + id.dropFirst(4), amountMinor: amount,
                                                  currencyCode: currency, processorReference: "psp_" + id)),
                                merchantId: m, on: conn, now: Date())
            }
        }
        for (id, payment, amount) in [("re_adyensample0000000000001", "pay_adyensample0000000000001", Int64(1_000)), ("re_adyensample0000000000002", "pay_adyensample0000000000002", 500)] {
            try LedgerFixture.refund(s.pool, merchantId: m, id: id, paymentId: payment, amountMinor: amount)
            try s.pool.transaction { conn in
                try sink.record(.refundSucceeded(.init(refundId: id, paymentId: payment, amountMinor: amount, currencyCode: "USD",
                                                 processorReference: "psp_" + id)), merchantId: m, on: conn, now: Date())
            }
        }
        let client = try RawHTTPClient(port: s.port)
        let response = try client.request("POST", "/v1/settlement-reports?format=adyen-sdr",
                                          headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "text/csv")],
                                          body: try Self.fixture(layout))
        #expect(response.status == 201, "\(response.text)")
        let body = try response.json()
        #expect(body["lineCount"] as? Int == 31)
        let counts = try #require(body["counts"] as? [String: Int])
        // Counted by hand from the file (README): 4 settled, 3 refund rows, 5 disputes, 5 costs,
        // 11 balance movements (payouts to a card among them) and the unknown type, 2 payout rows.
        #expect(counts["matched"] == 4)
        #expect(counts["refund"] == 3)
        #expect(counts["chargeback"] == 5)
        #expect(counts["fee"] == 5)
        #expect(counts["adjustment"] == 12)
        #expect(counts["payout"] == 2)
        #expect(counts["missing_in_ledger"] == 0 && counts["currency_mismatch"] == 0 && counts["amount_mismatch"] == 0)

        let processor = s.app.configuration.processor.rawValue
        var booked: [String: Int64] = [:]
        for row in try s.pool.query("""
            SELECT la.account_key, b.booked_minor FROM finance_ledger_accounts la
              JOIN finance_balance b ON b.merchant_id = la.merchant_id AND b.account_id = la.account_id
             WHERE la.merchant_id = $1 AND la.exposed
            """, [m]).rows {
            booked[try row.decode(0)] = try row.decode(1)
        }
        // EUR holds only the EUR payment: the EUR-labelled Fee, MiscCosts, InvoiceDeduction and
        // MerchantPayout rows are USD money.
        #expect(booked["psp:\(processor):EUR"] == 50)
        #expect(try s.pool.query("SELECT count(*)::int FROM finance_transaction WHERE merchant_id = $1 AND currency_code = 'EUR'",
                                 [m]).first?.decode(0, as: Int.self) == 1)
        // USD, by hand: payments 52.00 + 20.00 + 9.99; their fees −0.47 −0.59 −0.29 and the refund's −0.12 and
        // the chargeback's −7.50; refunds −10.00 −5.00 and +10.00 returned; disputes −30 +30 −30 −12 +4;
        // costs −1.25 −0.40 +0.15 −0.07 −0.02; balance movements −5 −3.10 +1 +2 +50 −0.90 −4 −6 +3;
        // payouts to a card −8 +8; payouts +25 −89.08; the unknown type is not booked.
        #expect(booked["psp:\(processor):USD"] == 135)
        #expect(booked.keys.filter { $0.hasPrefix("bank:") }.sorted() == ["bank:payouts:USD"])
        let pending = try s.pool.query("""
            SELECT amount_minor FROM finance_transaction
             WHERE merchant_id = $1 AND transaction_type = 'deposit' AND status = 'pending' ORDER BY amount_minor
            """, [m]).rows.map { try $0.decode(0, as: Int64.self) }
        #expect(pending == [8_908])  // only MerchantPayout reaches the bank
        // PaymentCost as a credit is money in.
        #expect(try s.pool.query("""
            SELECT count(*)::int FROM finance_transaction
             WHERE merchant_id = $1 AND amount_minor = 15 AND credit_debit_indicator = 'credit'
            """, [m]).first?.decode(0, as: Int.self) == 1)
    }
}
