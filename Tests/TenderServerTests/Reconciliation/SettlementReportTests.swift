import Crypto
import Foundation
import Postgres
import Reconciliation
import Synchronization
import Testing
@testable import TenderServer

private let genericHeader = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"

private func post(_ client: RawHTTPClient, key: String, format: String = "generic", supersede: Bool = false,
                  _ csv: String) throws -> RawResponse {
    try client.request("POST", "/v1/settlement-reports?format=\(format)" + (supersede ? "&supersede=true" : ""),
                       headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "text/csv")],
                       body: Array(csv.utf8))
}

private func get(_ client: RawHTTPClient, key: String, _ path: String) throws -> RawResponse {
    try client.request("GET", path, headers: [("Authorization", "Bearer \(key)")])
}

@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase))
struct SettlementReportTests {
    @Test func reportHasEveryCategoryAndAnotherMerchantSeesNothing() throws {
        let s = try RunningServer(prefix: "recon_cat")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let m = merchant.merchantId
        let matched = fixtureId("pay_", "match"), short = fixtureId("pay_", "short")
        let euro = fixtureId("pay_", "euro"), old = fixtureId("pay_", "old"), new = fixtureId("pay_", "new")
        let unknown = fixtureId("pay_", "unknown"), refund = fixtureId("re_", "refund")
        try LedgerFixture.payment(s.pool, merchantId: m, id: matched, amountMinor: 1_000, reference: "psp_match")
        try LedgerFixture.payment(s.pool, merchantId: m, id: short, amountMinor: 1_000)
        try LedgerFixture.payment(s.pool, merchantId: m, id: euro, amountMinor: 1_000, currency: "EUR")
        try LedgerFixture.payment(s.pool, merchantId: m, id: old, amountMinor: 500,
                                  createdAt: Date().addingTimeInterval(-30 * 86_400))
        try LedgerFixture.payment(s.pool, merchantId: m, id: new, amountMinor: 700)
        try LedgerFixture.refund(s.pool, merchantId: m, id: refund, paymentId: matched, amountMinor: 200)
        let csv = genericHeader + """
            2024-03-02,B1,payment,\(matched),psp_match,USD,10.00,0.30,9.70
            2024-03-02,B1,payment,\(short),,USD,9.50,0.00,9.50
            2024-03-02,B1,payment,\(euro),,USD,10.00,0.00,10.00
            2024-03-02,B1,payment,\(unknown),,USD,4.00,0.00,4.00
            2024-03-02,B1,payment,\(matched),psp_match,USD,10.00,0.30,9.70
            2024-03-02,B1,refund,\(refund),,USD,2.00,0.00,2.00
            2024-03-02,B1,fee,,,USD,0.00,1.25,1.25
            2024-03-02,B1,chargeback,\(matched),psp_match,USD,10.00,0.00,10.00
            2024-03-02,B1,adjustment,,,USD,0.40,0.00,0.40
            2024-03-02,B1,payout,,,USD,19.75,0.00,19.75

            """
        let client = try RawHTTPClient(port: s.port)
        let created = try post(client, key: key, csv)
        #expect(created.status == 201, "\(created.text)")
        let body = try created.json()
        let id = try #require(body["id"] as? String)
        #expect(id.hasPrefix("sr_") && id.count == 27)
        let counts = try #require(body["counts"] as? [String: Int])
        #expect(counts.count == 12)
        for category in ["matched", "amount_mismatch", "currency_mismatch", "missing_in_ledger", "missing_in_settlement",
                         "awaiting_settlement", "duplicate", "fee", "refund", "chargeback", "payout", "adjustment"] {
            #expect(counts[category] == 1, "\(category)")
        }
        #expect(body["lineCount"] as? Int == 10)

        let fetched = try get(client, key: key, "/v1/settlement-reports/\(id)")
        #expect(fetched.status == 200)
        #expect(try fetched.json()["counts"] as? [String: Int] == counts)
        let batches = try #require(try fetched.json()["batches"] as? [[String: Any]])
        #expect(batches.first?["batchId"] as? String == "B1")
        // Lines net: 9.70 + 9.50 + 10.00 + 4.00 − 2.00 − 1.25 − 10.00 + 0.40 = 20.35 (duplicate excluded).
        #expect(batches.first?["linesNetAmount"] as? String == "20.35")
        #expect(batches.first?["payoutAmount"] as? String == "19.75")
        #expect(batches.first?["balanced"] as? Bool == false)

        let mismatch = try get(client, key: key, "/v1/settlement-reports/\(id)/items?category=amount_mismatch")
        #expect(mismatch.status == 200)
        let items = try #require(try mismatch.json()["data"] as? [[String: Any]])
        #expect(items.count == 1)
        #expect(items.first?["paymentId"] as? String == short)
        #expect(items.first?["expectedAmount"] as? String == "10.00")
        #expect(items.first?["actualAmount"] as? String == "9.50")
        #expect(items.first?["differenceAmount"] as? String == "-0.50")
        #expect(items.first?["lineNumber"] as? Int == 3)
        let missing = try get(client, key: key, "/v1/settlement-reports/\(id)/items?category=missing_in_settlement")
        #expect(try (missing.json()["data"] as? [[String: Any]])?.first?["paymentId"] as? String == old)
        let page = try get(client, key: key, "/v1/settlement-reports/\(id)/items?limit=4&offset=0")
        #expect(try (page.json()["data"] as? [[String: Any]])?.count == 4)
        #expect(try page.json()["hasMore"] as? Bool == true)
        #expect(try get(client, key: key, "/v1/settlement-reports/\(id)/items?limit=1001").status == 400)
        #expect(try get(client, key: key, "/v1/settlement-reports/\(id)/items?category=bogus").status == 400)

        let (_, otherKey) = try s.merchantWithKey()
        let foreign = try get(client, key: otherKey, "/v1/settlement-reports/\(id)")
        #expect(foreign.status == 404)
        #expect(try foreign.json()["code"] as? String == "not_found")
        #expect(try get(client, key: otherKey, "/v1/settlement-reports/\(id)/items").status == 404)
        #expect(try get(client, key: key, "/v1/settlement-reports/sr_doesnotexist").status == 404)
        #expect(try client.request("GET", "/v1/settlement-reports/\(id)").status == 401)
    }

    @Test func identicalBytesReturnTheSameReportAndApplyNothingAgain() throws {
        let s = try RunningServer(prefix: "recon_same")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let paid = fixtureId("pay_", "same")
        try LedgerFixture.payment(s.pool, merchantId: merchant.merchantId, id: paid, amountMinor: 2_500)
        let csv = genericHeader + "2024-03-02,B7,payment,\(paid),,USD,25.00,0.75,24.25\n"
            + "2024-03-02,B7,payout,,,USD,24.25,0.00,24.25\n"
        let client = try RawHTTPClient(port: s.port)
        let first = try post(client, key: key, csv)
        #expect(first.status == 201)
        let effects = try LedgerFixture.count(s.pool, "settlement_effects")
        #expect(effects == 3)  // book_payment, its fee, the payout
        let items = try LedgerFixture.count(s.pool, "settlement_item_chunks")
        let again = try post(client, key: key, csv)
        #expect(again.status == 200)
        #expect(try again.json()["id"] as? String == (try first.json()["id"] as? String))
        #expect(again.body == (try get(client, key: key, "/v1/settlement-reports/\(try first.json()["id"] as? String ?? "")").body))
        #expect(try LedgerFixture.count(s.pool, "settlement_effects") == effects)
        #expect(try LedgerFixture.count(s.pool, "settlement_item_chunks") == items)
        #expect(try LedgerFixture.count(s.pool, "settlement_reports") == 1)
        // The same bytes as another format are another file.
        let asAdyen = try post(client, key: key, format: "adyen-sdr", csv)
        #expect(asAdyen.status == 422)
    }

    @Test func sinkSeesEachEffectOnce() throws {
        let pool = try TestEnvironment.migratedPool("recon_sink")
        defer { pool.close() }
        try LedgerFixture.install(pool)
        let store = MerchantStore(pool: pool)
        let merchant = try Merchant.validated(merchantId: "merchant.sink", displayName: "Sink", domains: ["s.test"],
                                              countryCode: "US", currencies: ["USD"])
        try store.add(merchant)
        let paid = fixtureId("pay_", "sink")
        try LedgerFixture.payment(pool, merchantId: merchant.merchantId, id: paid, amountMinor: 1_000)
        let sink = CountingSink()
        let reports = SettlementReportStore(pool: pool, sink: sink)
        let first = genericHeader + "2024-03-02,B1,payment,\(paid),,USD,10.00,0.20,9.80\n"
        // Same batch B1 bytes, plus a new batch: the B1 effects must not be applied a second time.
        let second = first + "2024-03-03,B2,fee,,,USD,0.00,1.00,1.00\n"
        for text in [first, first, second] {
            let bytes = Array(text.utf8)
            _ = try reports.importReport(merchantId: merchant.merchantId, format: .generic,
                                         fileSHA256: hexEncoded(Digest.sha256(bytes)),
                                         source: ByteArraySource(bytes, chunkBytes: 5), supersede: false, now: Date())
        }
        #expect(sink.keys.sorted() == [
            "recon|book_payment|generic|B1|payment|\(paid)||USD",
            "recon|fee|generic|B1|payment|\(paid)||USD",
            // An unreferenced line is known by its batch, type, currency and position, not its amounts.
            "recon|fee|slot|generic|B2|fee|USD|1",
        ])
    }

    @Test func aChangedBatchNeedsAnExplicitNewRevision() throws {
        let s = try RunningServer(prefix: "recon_rev")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let a = fixtureId("pay_", "reva"), b = fixtureId("pay_", "revb")
        try LedgerFixture.payment(s.pool, merchantId: merchant.merchantId, id: a, amountMinor: 1_000)
        try LedgerFixture.payment(s.pool, merchantId: merchant.merchantId, id: b, amountMinor: 2_000)
        let original = genericHeader + "2024-03-02,B9,payment,\(a),,USD,10.00,0.00,10.00\n"
            + "2024-03-02,B9,payment,\(b),,USD,19.00,0.00,19.00\n"
        let corrected = genericHeader + "2024-03-02,B9,payment,\(a),,USD,10.00,0.00,10.00\n"
            + "2024-03-02,B9,payment,\(b),,USD,20.00,0.00,20.00\n"
            + "2024-03-02,B9,payout,,,USD,30.00,0.00,30.00\n"
        let client = try RawHTTPClient(port: s.port)
        let first = try post(client, key: key, original)
        #expect(first.status == 201)
        let firstId = try #require(try first.json()["id"] as? String)
        let refused = try post(client, key: key, corrected)
        #expect(refused.status == 409)
        #expect(try refused.json()["code"] as? String == "settlement_batch_conflict")
        #expect(try LedgerFixture.count(s.pool, "settlement_reports") == 1)

        let revised = try post(client, key: key, supersede: true, corrected)
        #expect(revised.status == 201, "\(revised.text)")
        let body = try revised.json()
        #expect(body["revision"] as? Int == 2)
        #expect(body["supersedes"] as? String == firstId)
        let revisions = try #require(body["revisions"] as? [[String: Any]])
        #expect(revisions.count == 1)
        #expect(revisions.first?["batchId"] as? String == "B9")
        #expect(revisions.first?["changed"] as? Int == 1)
        #expect(revisions.first?["added"] as? Int == 1)
        #expect(revisions.first?["removed"] as? Int == 0)
        let stored = try s.pool.query("SELECT revision_diff::text AS d FROM settlement_reports WHERE report_id = $1",
                                      [try #require(body["id"] as? String)]).first?.decode("d", as: String.self)
        #expect(stored?.contains("\"grossMinor\": 1900") == true)
        #expect(stored?.contains("\"grossMinor\": 2000") == true)
    }

    @Test(arguments: [
        ("unterminated_quote", genericHeader + "2024-03-02,B1,fee,,,USD,0.00,1.00,1.00\n2024-03-02,B1,fee,\"oops,,USD,0.00,1.00,1.00\n",
         "csv_unterminated_quote", 3),
        ("wrong_column_count", genericHeader + "2024-03-02,B1,fee,,,USD,0.00,1.00\n", "csv_wrong_column_count", 2),
        ("bad_amount", genericHeader + "2024-03-02,B1,fee,,,USD,0.00,1.00,1.00\n2024-03-02,B1,fee,,,USD,0.00,1.O0,1.00\n",
         "amount_invalid", 3),
        ("unknown_type", genericHeader + "2024-03-02,B1,fee,,,USD,0.00,1.00,1.00\n\n2024-03-02,B1,bonus,,,USD,0.00,1.00,1.00\n",
         "type_unknown", 4),
        ("wrong_currency_digits", genericHeader + "2024-03-02,B1,fee,,,JPY,0,100.00,100\n", "amount_wrong_decimals", 2),
    ])
    func malformedFilesAreRefusedWithTheirLine(name: String, csv: String, code: String, line: Int) throws {
        let s = try RunningServer(prefix: "recon_bad")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (_, key) = try s.merchantWithKey()
        let response = try post(try RawHTTPClient(port: s.port), key: key, csv)
        #expect(response.status == 422, "\(name)")
        let body = try response.json()
        #expect(body["code"] as? String == "settlement_file_invalid")
        let errors = try #require(body["errors"] as? [[String: Any]])
        #expect(errors.first?["code"] as? String == code, "\(name)")
        #expect((errors.first?["field"] as? String)?.hasPrefix("line \(line), column ") == true, "\(name): \(errors)")
        for table in ["settlement_reports", "settlement_item_chunks", "settlement_effects", "settlement_batches"] {
            #expect(try LedgerFixture.count(s.pool, table) == 0, "\(name) \(table)")
        }
    }

    @Test func adyenFileWithEveryJournalType() throws {
        let s = try RunningServer(prefix: "recon_adyen")
        defer { s.stop() }
        try LedgerFixture.install(s.pool)
        let (merchant, key) = try s.merchantWithKey()
        let settled = fixtureId("pay_", "adyen")
        try LedgerFixture.payment(s.pool, merchantId: merchant.merchantId, id: settled, amountMinor: 1_000,
                                  currency: "EUR", reference: "PSPSettled")
        var csv = "Company Account,Merchant Account,Psp Reference,Merchant Reference,Payment Method,"
            + "Creation Date,TimeZone,Type,Modification Reference,Gross Currency,Gross Debit (GC),"
            + "Gross Credit (GC),Exchange Rate,Net Currency,Net Debit (NC),Net Credit (NC),Commission (NC),"
            + "Markup (NC),Scheme Fees (NC),Interchange (NC),Payment Method Variant,"
            + "Modification Merchant Reference,Batch Number,Booking Date\n"
        let journals = AdyenJournalType.mapping.keys.sorted()
        for journal in journals {
            let reference = journal == "Settled" ? settled : "ref_\(journal)"
            // Adyen writes fewer decimals than the exponent ("10" for 10.00 EUR).
            let gross = journal == "Settled" ? ("", "10") : ("", "1.5")
            csv += ["Tender", "TenderEU", "PSP\(journal)", reference, "visa", "2024-03-01 10:15:00", "CET", journal,
                    "MOD\(journal)", "EUR", gross.0, gross.1, "1", "EUR", gross.0, gross.1, "", "", "", "",
                    "visa_applepay", "", "42", "2024-03-02"].joined(separator: ",") + "\n"
        }
        let response = try post(try RawHTTPClient(port: s.port), key: key, format: "adyen-sdr", csv)
        #expect(response.status == 201, "\(response.text)")
        let body = try response.json()
        #expect(body["format"] as? String == "adyen-sdr")
        #expect(body["lineCount"] as? Int == journals.count)
        let counts = try #require(body["counts"] as? [String: Int])
        func expected(_ types: Set<SettlementLineType>) -> Int {
            AdyenJournalType.mapping.values.filter { types.contains($0) }.count
        }
        #expect(counts["matched"] == 1)
        #expect(counts["fee"] == expected([.fee]))
        #expect(counts["chargeback"] == expected([.chargeback, .chargebackReversal]))
        #expect(counts["payout"] == expected([.payout]))
        #expect(counts["adjustment"] == expected([.adjustment]))
        #expect(counts["refund"] == expected([.refund]))
        #expect(counts.values.reduce(0, +) == journals.count)
        let batches = try #require(body["batches"] as? [[String: Any]])
        #expect(batches.map { $0["batchId"] as? String } == ["TenderEU:42"])
    }

    @Test func reconcileCommandPrintsTheSameBytesTwice() throws {
        let url = try TestEnvironment.freshDatabase("recon_cli")
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
        defer { pool.close() }
        try Migrator(pool: pool, files: try MigrationFile.load(directory: TestEnvironment.migrationsDirectory)).migrate()
        try LedgerFixture.install(pool)
        let merchant = try Merchant.validated(merchantId: "merchant.cli", displayName: "CLI", domains: ["c.test"],
                                              countryCode: "US", currencies: ["USD"])
        try MerchantStore(pool: pool).add(merchant)
        let paid = fixtureId("pay_", "cli")
        try LedgerFixture.payment(pool, merchantId: merchant.merchantId, id: paid, amountMinor: 1_234)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("recon-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("good.csv")
        try Data((genericHeader + "2024-03-02,C1,payment,\(paid),,USD,12.34,0.10,12.24\n").utf8).write(to: good)
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory]
        let argv = ["reconcile", "--merchant-id", merchant.merchantId, "--format", "generic", good.path]
        let first = try runTender(argv, environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try runTender(argv, environment: env)
        #expect(second.status == 0)
        #expect(first.stdout == second.stdout)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
        #expect((json["counts"] as? [String: Int])?["matched"] == 1)
        #expect(try LedgerFixture.count(pool, "settlement_reports") == 1)

        let bad = directory.appendingPathComponent("bad.csv")
        try Data((genericHeader + "2024-03-02,C1,payment,\"\(paid),,USD,12.34,0.10,12.24\n").utf8).write(to: bad)
        let refused = try runTender(["reconcile", "--merchant-id", merchant.merchantId, "--format", "generic", bad.path],
                                    environment: env)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("settlement_file_invalid: csv_unterminated_quote at line 2, column"))
        #expect(refused.stdout.isEmpty)
        #expect(try LedgerFixture.count(pool, "settlement_reports") == 1)
    }

    @Test(arguments: [1, 7, 64, 1 << 20])
    func incrementalDigestMatchesOneShot(chunk: Int) {
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hasher = SHA256Hasher()
        var source = ByteArraySource(bytes, chunkBytes: chunk)
        while let piece = source.nextChunk() { hasher.update(piece) }
        #expect(hasher.finalize() == Digest.sha256(bytes))
    }
}

/// Records the keys the store hands to the finance-store seam.
private final class CountingSink: SettlementEffectSink {
    private let applied = Mutex<[String]>([])
    var keys: [String] { applied.withLock { $0 } }
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        applied.withLock { $0.append(contentsOf: effects.map(\.key)) }
    }
}
