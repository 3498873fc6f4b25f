import Foundation
import Postgres
import Testing
@testable import TenderServer

private let genericHeader = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

/// A payment made through `POST /v1/checkout-sessions/{id}/payments`, as the API reported it.
private struct APIPayment {
    let id: String
    let amountMinor: Int
    let status: String
    /// From `GET /v1/payments/{id}`; empty when the API shows none.
    let processorReference: String
}

extension PaymentsHarness {
    /// Pays a fresh session of `totalMinor` with a real sandbox token and reads the payment back.
    fileprivate func payThroughAPI(_ totalMinor: Int64, currency: String = "EUR", key: String) throws -> APIPayment {
        let checkout = try session(totalMinor: totalMinor, currencyCode: currency)
        let response = try pay(checkout, token: try token(for: checkout), key: key)
        try #require(response.status == 200, "\(key): \(response.text)")
        let payment = try #require(response.payment, "\(key): \(response.text)")
        let id = try #require(payment["id"] as? String)
        let shown = try get("/v1/payments/\(id)")
        try #require(shown.status == 200, "\(shown.text)")
        let body = try shown.json()
        return APIPayment(id: id, amountMinor: try #require(body["amountMinor"] as? Int),
                          status: try #require(body["status"] as? String),
                          processorReference: body["processorReference"] as? String ?? "")
    }

    /// `POST /v1/settlement-reports?format=generic` with the API key.
    fileprivate func importGeneric(_ csv: String) throws -> RawResponse {
        try RawHTTPClient(port: port).request("POST", "/v1/settlement-reports?format=generic",
                                              headers: [("Authorization", "Bearer \(apiKey)"), ("Content-Type", "text/csv")],
                                              body: Array(csv.utf8))
    }

    /// Every item of one category of a report, in report order.
    fileprivate func reportItems(_ reportId: String, _ category: String) throws -> [[String: Any]] {
        let response = try get("/v1/settlement-reports/\(reportId)/items?category=\(category)&limit=1000")
        try #require(response.status == 200, "\(response.text)")
        let body = try response.json()
        #expect(body["hasMore"] as? Bool == false)
        return try #require(body["data"] as? [[String: Any]])
    }

    /// Every finance-store transaction of the merchant (one page is enough for these tests).
    fileprivate func financeTransactions() throws -> [[String: Any]] {
        let response = try get("/v1/finance/transactions?limit=500")
        try #require(response.status == 200, "\(response.text)")
        return try #require(try response.json()["transactions"] as? [[String: Any]])
    }
}

private func amount(_ transaction: [String: Any]?) -> String? {
    (transaction?["transactionAmount"] as? [String: Any])?["amount"] as? String
}

/// The finance transaction Tender recorded for a payment (FinanceStore/Mapping: "Apple Pay payment <id>").
private func paymentTransaction(_ all: [[String: Any]], _ paymentId: String) -> [String: Any]? {
    all.first { $0["transactionDescription"] as? String == "Apple Pay payment \(paymentId)" }
}

/// Issue 7, "a report per category built from real payments made through the API": every payment
/// and refund below goes through HTTP with a sandbox Apple Pay token and the simulator processor,
/// and the expected figures are worked out by hand from the file written here.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct SettlementAPITests {
    /// Settlement lag the category test runs with: short enough to wait past, long enough for one
    /// payment plus one import to stay inside it.
    static let lagSeconds = 4.0

    /// Issue 15 item 5: a report larger than `SettlementReportStore.effectsInlineLinesMax` answers once
    /// stored, with `effectsPending: true`; the settlement-effects service then applies every effect once.
    @Test func aLargeReportAnswersOnceStoredAndItsEffectsFollow() throws {
        let h = try PaymentsHarness(prefix: "recon_big", settlement: true)
        defer { h.stop() }
        // The settlement-effects service, as `serve` runs it: the import wakes it.
        try h.app.settlementEffects.start()
        defer { _ = h.app.settlementEffects.stop(deadline: .now.advanced(by: .seconds(10))) }
        let lines = SettlementReportStore.effectsInlineLinesMax + 1
        var csv = genericHeader
        for i in 1...lines {
            let fee = "\(i / 100).\(String(format: "%02d", i % 100))"
            csv += "2026-11-27,BIG\(i / 1_000),fee,,,EUR,0.00,\(fee),\(fee)\n"
        }
        let response = try h.importGeneric(csv)
        try #require(response.status == 201, "\(response.text)")
        let report = try response.json()
        let id = try #require(report["id"] as? String)
        #expect(report["lineCount"] as? Int == lines)
        #expect(report["effectsPending"] as? Bool == true)
        var pending = true
        for _ in 0..<600 where pending {
            Thread.sleep(forTimeInterval: 0.5)
            pending = try h.get("/v1/settlement-reports/\(id)").json()["effectsPending"] as? Bool ?? true
        }
        #expect(pending == false)
        let effects = try h.pool.query("SELECT count(*)::int AS n FROM settlement_effects WHERE report_id = $1", [id])
        #expect(try effects.first?.decode("n", as: Int.self) == lines)
        // The same bytes again: the same report, nothing applied twice.
        let replay = try h.importGeneric(csv)
        #expect(replay.status == 200)
        #expect(try replay.json()["id"] as? String == id)
        #expect(try h.pool.query("SELECT count(*)::int AS n FROM settlement_effects").first?.decode("n", as: Int.self) == lines)
    }

    @Test func reportFromRealPaymentsHasEveryCategory() throws {
        let h = try PaymentsHarness(prefix: "recon_api", environment: [
            "TENDER_RECON_SETTLEMENT_LAG_SECONDS": String(Int(Self.lagSeconds)),
        ], settlement: true)
        defer { h.stop() }

        // Recorded first, never settled, and older than the lag when the report arrives.
        let missing = try h.payThroughAPI(700, key: "missing")
        let missingPaidAt = Date()
        let match1 = try h.payThroughAPI(2_500, key: "match1")
        let match2 = try h.payThroughAPI(1_240, key: "match2")
        let disputed = try h.payThroughAPI(1_800, key: "disputed")
        let short = try h.payThroughAPI(3_000, key: "short")
        let over = try h.payThroughAPI(999, key: "over")
        let euro = try h.payThroughAPI(1_500, key: "euro")
        // The simulator declines amounts ending in 51: the payment exists, but as declined.
        let declined = try h.payThroughAPI(2_051, key: "declined")
        for p in [missing, match1, match2, disputed, short, over, euro] {
            #expect(p.status == "succeeded", "\(p.id)")
            #expect(p.processorReference.hasPrefix("sim_"), "\(p.id)")
        }
        #expect([missing, match1, match2, disputed, short, over, euro, declined].map(\.amountMinor)
                    == [700, 2_500, 1_240, 1_800, 3_000, 999, 1_500, 2_051])
        #expect(declined.status == "declined")
        let refundResponse = try h.refund(match1.id, amount: "5.00", key: "refund-1")
        try #require(refundResponse.status == 200, "\(refundResponse.text)")
        let refund = try refundResponse.json()
        let refundId = try #require(refund["id"] as? String)
        let refundReference = try #require(refund["processorReference"] as? String)
        #expect(refund["amountMinor"] as? Int == 500)
        #expect(refund["status"] as? String == "succeeded")

        let pause = missingPaidAt.addingTimeInterval(Self.lagSeconds + 1).timeIntervalSinceNow
        if pause > 0 { Thread.sleep(forTimeInterval: pause) }
        // Recorded last: still inside the lag when the report is imported right after.
        let awaitingPaidFrom = Date()
        let awaiting = try h.payThroughAPI(820, key: "awaiting")
        let unknown = "pay_" + String(repeating: "0", count: 24)

        let csv = genericHeader + """
            2026-11-27,B1,payment,\(match1.id),\(match1.processorReference),EUR,25.00,0.75,24.25
            2026-11-27,B1,payment,\(match2.id),,EUR,12.40,0.37,12.03
            2026-11-27,B1,payment,\(disputed.id),\(disputed.processorReference),EUR,18.00,0.54,17.46
            2026-11-27,B1,payment,\(short.id),\(short.processorReference),EUR,29.50,0.00,29.50
            2026-11-27,B1,payment,\(over.id),\(over.processorReference),EUR,10.09,0.00,10.09
            2026-11-27,B1,payment,\(euro.id),\(euro.processorReference),USD,15.00,0.00,15.00
            2026-11-27,B1,payment,\(match1.id),\(match1.processorReference),EUR,25.00,0.75,24.25
            2026-11-27,B1,payment,\(match2.id),\(match2.processorReference),EUR,12.40,0.37,12.03
            2026-11-27,B1,refund,\(match1.id),\(refundReference),EUR,5.00,0.00,5.00
            2026-11-27,B1,chargeback,\(disputed.id),\(disputed.processorReference),EUR,18.00,15.00,33.00
            2026-11-27,B1,fee,,,EUR,0.00,1.25,1.25
            2026-11-27,B1,adjustment,,,EUR,0.40,0.00,0.40
            2026-11-27,B1,payout,,,EUR,66.51,0.00,66.51
            2026-11-28,B2,payment,\(unknown),psp_unknown,EUR,4.00,0.00,4.00
            2026-11-28,B2,payment,\(declined.id),\(declined.processorReference),EUR,20.51,0.00,20.51
            2026-11-28,B2,payout,,,EUR,24.41,0.00,24.41

            """
        let created = try h.importGeneric(csv)
        let importSeconds = Date().timeIntervalSince(awaitingPaidFrom)
        try #require(importSeconds < Self.lagSeconds,
                     "paying and importing took \(importSeconds) s, past the \(Self.lagSeconds) s lag this test relies on")
        try #require(created.status == 201, "\(created.text)")
        let report = try created.json()
        let reportId = try #require(report["id"] as? String)
        #expect(report["lineCount"] as? Int == 16)

        // File lines 2…17 (line 1 is the header), then the two recorded payments absent from the file.
        let counts = try #require(report["counts"] as? [String: Int])
        #expect(counts == [
            "matched": 3,                // lines 2, 3, 4
            "amount_mismatch": 2,        // line 5 (−0.50), line 6 (+0.10)
            "currency_mismatch": 1,      // line 7: USD settled for a EUR payment
            "duplicate": 2,              // line 8 repeats line 2; line 9 settles match2 a second time
            "refund": 1,                 // line 10
            "chargeback": 1,             // line 11
            "fee": 1,                    // line 12
            "adjustment": 1,             // line 13
            "payout": 2,                 // lines 14 and 17
            "missing_in_ledger": 2,      // line 15 unknown payment, line 16 a declined one
            "missing_in_settlement": 1,  // `missing`, older than the lag
            "awaiting_settlement": 1,    // `awaiting`, inside the lag
        ])

        try Self.checkItems(h, report, reportId: reportId, CategoryPayments(
            match1: match1, match2: match2, disputed: disputed, short: short, over: over, euro: euro,
            missing: missing, awaiting: awaiting, declined: declined, refundId: refundId, unknown: unknown))

        let ledger = try h.financeTransactions()
        Self.checkLedger(ledger, booked: [match1, match2, disputed], unbooked: [short, over, euro, missing, awaiting],
                         declined: declined, refunded: (refundId, match1), disputed: disputed)

        // The same bytes again: the same report, and the ledger does not move.
        let again = try h.importGeneric(csv)
        #expect(again.status == 200)
        #expect(try again.json()["id"] as? String == reportId)
        #expect(try h.financeTransactions().count == ledger.count)
    }

    /// The payments of the category test, by role.
    fileprivate struct CategoryPayments {
        let match1, match2, disputed, short, over, euro, missing, awaiting, declined: APIPayment
        let refundId, unknown: String
    }

    /// The category test's report items and batch balances, category by category.
    fileprivate static func checkItems(_ h: PaymentsHarness, _ report: [String: Any], reportId: String,
                                       _ p: CategoryPayments) throws {
        let (match1, match2, disputed, short, over, euro) = (p.match1, p.match2, p.disputed, p.short, p.over, p.euro)
        let (missing, awaiting, declined, refundId, unknown) = (p.missing, p.awaiting, p.declined, p.refundId, p.unknown)
        let matched = try h.reportItems(reportId, "matched")
        #expect(matched.map { $0["paymentId"] as? String } == [match1.id, match2.id, disputed.id])
        #expect(matched.map { $0["lineNumber"] as? Int } == [2, 3, 4])
        #expect(matched.map { $0["expectedAmount"] as? String } == ["25.00", "12.40", "18.00"])
        #expect(matched.map { $0["actualAmount"] as? String } == ["25.00", "12.40", "18.00"])
        #expect(matched.map { $0["differenceAmount"] as? String } == ["0.00", "0.00", "0.00"])

        let mismatched = try h.reportItems(reportId, "amount_mismatch")
        #expect(mismatched.map { $0["paymentId"] as? String } == [short.id, over.id])
        #expect(mismatched.map { $0["lineNumber"] as? Int } == [5, 6])
        #expect(mismatched.map { $0["expectedAmount"] as? String } == ["30.00", "9.99"])
        #expect(mismatched.map { $0["actualAmount"] as? String } == ["29.50", "10.09"])
        #expect(mismatched.map { $0["differenceAmount"] as? String } == ["-0.50", "0.10"])

        let currency = try #require(try h.reportItems(reportId, "currency_mismatch").first)
        #expect(currency["paymentId"] as? String == euro.id)
        #expect(currency["lineNumber"] as? Int == 7)
        #expect(currency["currency"] as? String == "USD")
        #expect(currency["expectedCurrency"] as? String == "EUR")
        #expect(currency["expectedAmount"] as? String == "15.00")
        #expect(currency["actualAmount"] as? String == "15.00")

        let duplicates = try h.reportItems(reportId, "duplicate")
        #expect(duplicates.map { $0["lineNumber"] as? Int } == [8, 9])
        #expect(duplicates.map { $0["reason"] as? String } == ["repeated_line", "payment_already_matched"])
        #expect(duplicates.map { $0["paymentId"] as? String } == [match1.id, match2.id])

        let refunds = try h.reportItems(reportId, "refund")
        #expect(refunds.count == 1)
        #expect(refunds.first?["refundId"] as? String == refundId)
        #expect(refunds.first?["paymentId"] as? String == match1.id)
        #expect(refunds.first?["expectedAmount"] as? String == "5.00")
        #expect(refunds.first?["actualAmount"] as? String == "5.00")
        #expect(refunds.first?["differenceAmount"] as? String == "0.00")

        let chargebacks = try h.reportItems(reportId, "chargeback")
        #expect(chargebacks.count == 1)
        #expect(chargebacks.first?["paymentId"] as? String == disputed.id)
        #expect(chargebacks.first?["expectedAmount"] as? String == "18.00")
        #expect(chargebacks.first?["actualAmount"] as? String == "-18.00")

        let fees = try h.reportItems(reportId, "fee")
        #expect(fees.map { $0["lineNumber"] as? Int } == [12])
        #expect(fees.map { $0["actualAmount"] as? String } == ["-1.25"])
        let adjustments = try h.reportItems(reportId, "adjustment")
        #expect(adjustments.map { $0["actualAmount"] as? String } == ["0.40"])
        let payouts = try h.reportItems(reportId, "payout")
        #expect(payouts.map { $0["lineNumber"] as? Int } == [14, 17])
        #expect(payouts.map { $0["actualAmount"] as? String } == ["-66.51", "-24.41"])

        let notInLedger = try h.reportItems(reportId, "missing_in_ledger")
        #expect(notInLedger.map { $0["lineNumber"] as? Int } == [15, 16])
        #expect(notInLedger.map { $0["paymentId"] as? String } == [unknown, declined.id])
        #expect(notInLedger.map { $0["reason"] as? String } == ["no_recorded_payment", "payment_rejected"])
        #expect(notInLedger.map { $0["actualAmount"] as? String } == ["4.00", "20.51"])

        let notSettled = try h.reportItems(reportId, "missing_in_settlement")
        #expect(notSettled.map { $0["paymentId"] as? String } == [missing.id])
        #expect(notSettled.first?["expectedAmount"] as? String == "7.00")
        #expect(notSettled.first?["lineNumber"] == nil)
        let waiting = try h.reportItems(reportId, "awaiting_settlement")
        #expect(waiting.map { $0["paymentId"] as? String } == [awaiting.id])
        #expect(waiting.first?["expectedAmount"] as? String == "8.20")

        // B1 EUR lines (line 8 excluded as a repeat, line 9 counted as settled money):
        //   24.25 + 12.03 + 17.46 + 29.50 + 10.09 + 12.03 − 5.00 − 33.00 − 1.25 + 0.40 = 66.51 = the payout.
        // B1 USD: line 7 alone, 15.00, never paid out. B2: 4.00 + 20.51 = 24.51 against a 24.41 payout.
        let batches = try #require(report["batches"] as? [[String: Any]])
        #expect(batches.map { $0["batchId"] as? String } == ["B1", "B1", "B2"])
        #expect(batches.map { $0["currency"] as? String } == ["EUR", "USD", "EUR"])
        #expect(batches.map { $0["linesNetAmount"] as? String } == ["66.51", "15.00", "24.51"])
        #expect(batches.map { $0["payoutAmount"] as? String } == ["66.51", "0.00", "24.41"])
        #expect(batches.map { $0["differenceAmount"] as? String } == ["0.00", "-15.00", "-0.10"])
        #expect(batches.map { $0["payoutLines"] as? Int } == [1, 0, 1])
        #expect(batches.map { $0["balanced"] as? Bool } == [true, false, false])
    }

    /// The finance store after the category import: settled payments and the refund booked on the
    /// settlement date, the others still waiting; fees, the chargeback, the adjustment and the payouts.
    fileprivate static func checkLedger(_ ledger: [[String: Any]], booked: [APIPayment], unbooked: [APIPayment],
                                        declined: APIPayment, refunded: (id: String, payment: APIPayment),
                                        disputed: APIPayment) {
        let (refundId, match1) = refunded
        // The finance store: settled payments and the refund booked on the settlement date, the
        // others still waiting; fees, the chargeback, the adjustment and the payouts as their own rows.
        let postedB1 = "2026-11-27T12:00:00Z"
        for p in booked {
            let t = paymentTransaction(ledger, p.id)
            #expect(t?["status"] as? String == "booked", "\(p.id)")
            #expect(t?["postedDate"] as? String == postedB1, "\(p.id)")
            #expect(t?["creditDebitIndicator"] as? String == "credit", "\(p.id)")
        }
        #expect(amount(paymentTransaction(ledger, match1.id)) == "25.00")
        for p in unbooked {
            let t = paymentTransaction(ledger, p.id)
            #expect(t?["status"] as? String == "authorized", "\(p.id) stays unbooked")
            #expect(t?["postedDate"] is NSNull, "\(p.id)")
        }
        #expect(paymentTransaction(ledger, declined.id) == nil)
        let refunded = ledger.first { $0["transactionDescription"] as? String == "Refund \(refundId) of payment \(match1.id)" }
        #expect(refunded?["status"] as? String == "booked")
        #expect(refunded?["postedDate"] as? String == postedB1)
        #expect(refunded?["creditDebitIndicator"] as? String == "debit")
        #expect(amount(refunded) == "5.00")

        // One fee per settled line that carried one (2, 3, 4 and the chargeback's), plus line 12;
        // the duplicate lines add none.
        let feeRows = ledger.filter { $0["transactionType"] as? String == "fee" }
        #expect(feeRows.compactMap(amount).sorted() == ["0.37", "0.54", "0.75", "1.25", "15.00"])
        #expect(feeRows.allSatisfy { $0["creditDebitIndicator"] as? String == "debit" })
        #expect(feeRows.allSatisfy { $0["status"] as? String == "booked" && $0["postedDate"] as? String == postedB1 })
        #expect(feeRows.contains { $0["transactionDescription"] as? String == "Processing fee payment \(match1.id)"
            && amount($0) == "0.75" })

        let adjustmentRows = ledger.filter { $0["transactionType"] as? String == "adjustment" }
        let chargeback = adjustmentRows.first { $0["transactionDescription"] as? String == "Chargeback on payment \(disputed.id)" }
        #expect(amount(chargeback) == "18.00")
        #expect(chargeback?["creditDebitIndicator"] as? String == "debit")
        #expect(adjustmentRows.filter { $0["creditDebitIndicator"] as? String == "credit" }.compactMap(amount) == ["0.40"])
        let transfers = ledger.filter { $0["transactionType"] as? String == "transfer" }
        #expect(transfers.compactMap(amount).sorted() == ["24.41", "66.51"])
        #expect(transfers.allSatisfy { $0["creditDebitIndicator"] as? String == "debit" })
        let postedB2 = transfers.first { amount($0) == "24.41" }?["postedDate"] as? String
        #expect(postedB2 == "2026-11-28T12:00:00Z")
    }

    /// "Exact minor-unit amounts by default with a configurable tolerance", end to end: the server
    /// reads TENDER_RECON_AMOUNT_TOLERANCE_MINOR, and `tender reconcile` flags override the environment.
    @Test func amountToleranceFromTheEnvironmentAndTheCommandLine() throws {
        // Tolerance 0 (the default): one minor unit off is a mismatch.
        let exact = try PaymentsHarness(prefix: "recon_tol0", settlement: true)
        defer { exact.stop() }
        let x = try exact.payThroughAPI(1_000, key: "x")
        let exactReport = try exact.importGeneric(genericHeader + "2026-11-27,T1,payment,\(x.id),,EUR,10.01,0.00,10.01\n")
        try #require(exactReport.status == 201, "\(exactReport.text)")
        let exactBody = try exactReport.json()
        let exactCounts = try #require(exactBody["counts"] as? [String: Int])
        #expect(exactCounts["amount_mismatch"] == 1)
        #expect(exactCounts["matched"] == 0)
        let offByOne = try exact.reportItems(try #require(exactBody["id"] as? String), "amount_mismatch")
        #expect(offByOne.first?["paymentId"] as? String == x.id)
        #expect(offByOne.first?["differenceAmount"] as? String == "0.01")
        #expect(paymentTransaction(try exact.financeTransactions(), x.id)?["status"] as? String == "authorized")

        // Tolerance 1: one minor unit either way matches (and is booked); two do not.
        let tolerant = try PaymentsHarness(prefix: "recon_tol1", environment: ["TENDER_RECON_AMOUNT_TOLERANCE_MINOR": "1"],
                                           settlement: true)
        defer { tolerant.stop() }
        let up = try tolerant.payThroughAPI(1_000, key: "up")
        let down = try tolerant.payThroughAPI(1_000, key: "down")
        let past = try tolerant.payThroughAPI(1_000, key: "past")
        let tolerantReport = try tolerant.importGeneric(genericHeader + """
            2026-11-27,T1,payment,\(up.id),,EUR,10.01,0.00,10.01
            2026-11-27,T1,payment,\(down.id),,EUR,9.99,0.00,9.99
            2026-11-27,T1,payment,\(past.id),,EUR,10.02,0.00,10.02

            """)
        try #require(tolerantReport.status == 201, "\(tolerantReport.text)")
        let tolerantBody = try tolerantReport.json()
        let tolerantId = try #require(tolerantBody["id"] as? String)
        let tolerantCounts = try #require(tolerantBody["counts"] as? [String: Int])
        #expect(tolerantCounts["matched"] == 2)
        #expect(tolerantCounts["amount_mismatch"] == 1)
        let within = try tolerant.reportItems(tolerantId, "matched")
        #expect(within.map { $0["paymentId"] as? String } == [up.id, down.id])
        #expect(within.map { $0["differenceAmount"] as? String } == ["0.01", "-0.01"])
        let beyond = try tolerant.reportItems(tolerantId, "amount_mismatch")
        #expect(beyond.map { $0["paymentId"] as? String } == [past.id])
        #expect(beyond.map { $0["differenceAmount"] as? String } == ["0.02"])
        let tolerantLedger = try tolerant.financeTransactions()
        #expect(paymentTransaction(tolerantLedger, up.id)?["status"] as? String == "booked")
        #expect(paymentTransaction(tolerantLedger, down.id)?["status"] as? String == "booked")
        #expect(paymentTransaction(tolerantLedger, past.id)?["status"] as? String == "authorized")

        // `tender reconcile` on the exact server's database: the environment says exact and a week,
        // the flags say one minor unit and no lag, and the flags win.
        let database = try #require(try exact.pool.query("SELECT current_database() AS d").first?.decode("d", as: String.self))
        let v = try exact.payThroughAPI(1_000, key: "v")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("recon-tol-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("t2.csv")
        try Data((genericHeader + "2026-11-28,T2,payment,\(v.id),,EUR,9.99,0.00,9.99\n").utf8).write(to: file)
        let environment = ["TENDER_DATABASE_URL": TestEnvironment.url(database: database),
                           "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
                           "TENDER_RECON_AMOUNT_TOLERANCE_MINOR": "0",
                           "TENDER_RECON_SETTLEMENT_LAG_SECONDS": "604800"]
        let run = try runTender(["reconcile", "--merchant-id", exact.merchantId, "--format", "generic", file.path,
                                 "--amount-tolerance-minor", "1", "--settlement-lag-seconds", "0"], environment: environment)
        try #require(run.status == 0, "\(run.stderr)")
        let printed = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let printedCounts = try #require(printed["counts"] as? [String: Int])
        #expect(printedCounts["matched"] == 1)            // v, 0.01 short
        #expect(printedCounts["amount_mismatch"] == 0)
        #expect(printedCounts["missing_in_settlement"] == 1)  // x: still unbooked, absent, and any age is past a 0 s lag
        #expect(printedCounts["awaiting_settlement"] == 0)
        let cliItems = try exact.reportItems(try #require(printed["id"] as? String), "missing_in_settlement")
        #expect(cliItems.map { $0["paymentId"] as? String } == [x.id])
        #expect(paymentTransaction(try exact.financeTransactions(), v.id)?["status"] as? String == "booked")
    }
}
