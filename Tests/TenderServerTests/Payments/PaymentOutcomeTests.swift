import Crypto
import Foundation
import HTTPClient
import HTTPServer
import Payments
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// A loopback processor speaking docs/processor-protocol.md with programmable behaviour; it records every call and
/// charges at most once per Idempotency-Key, like a real processor.
final class FakeProcessorServer: Sendable {
    enum Mode: Sendable { case approve, decline, decline402, fail500, slow(Int), malformed }
    struct State {
        var mode: Mode = .approve
        var calls: [String: Int] = [:]
        var charges: [String: String] = [:]
        var bodies: [String] = []
    }
    let state = Mutex(State())
    let server: HTTPServer
    var url: String { "http://127.0.0.1:\(server.boundPort)" }

    init() throws {
        var router = Router()
        let box = Mutex<(@Sendable (HTTPRequest) -> HTTPResponse)?>(nil)
        router.add("POST", "/authorizations") { request in box.withLock { $0 }?(request) ?? HTTPResponse(status: 500) }
        router.add("POST", "/refunds") { request in box.withLock { $0 }?(request) ?? HTTPResponse(status: 500) }
        var configuration = HTTPServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.workerThreads = 16
        server = HTTPServer(configuration: configuration, router: router)
        box.withLock { $0 = { [self] in handle($0) } }
        try server.start()
    }

    func setMode(_ mode: Mode) { state.withLock { $0.mode = mode } }
    func calls(_ key: String) -> Int { state.withLock { $0.calls[key] ?? 0 } }
    var chargeCount: Int { state.withLock { $0.charges.count } }
    var bodies: [String] { state.withLock { $0.bodies } }

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        let key = request.headers["Idempotency-Key"] ?? ""
        let mode = state.withLock { s -> Mode in
            s.calls[key, default: 0] += 1
            s.bodies.append(String(decoding: request.body, as: UTF8.self))
            return s.mode
        }
        func approved() -> HTTPResponse {
            let reference = state.withLock { s -> String in
                if let existing = s.charges[key] { return existing }
                let fresh = "fp_\(s.charges.count + 1)"
                s.charges[key] = fresh
                return fresh
            }
            return .json(["status": "approved", "processorReference": reference, "authorizationCode": "A1"])
        }
        switch mode {
        case .approve: return approved()
        case .decline: return .json(["status": "declined", "declineCode": "do_not_honor", "processorReference": "fp_d"])
        case .decline402: return .json(["status": "declined", "declineCode": "insufficient_funds"], status: 402)
        case .fail500: return HTTPResponse(status: 500, body: Array("oops".utf8))
        case .malformed: return HTTPResponse(status: 200, body: Array("{not json".utf8))
        case .slow(let ms):
            // The charge happens, then the answer comes too late for the caller (unknown outcome).
            let response = approved()
            usleep(UInt32(ms) * 1_000)
            return response
        }
    }

    func stop() { server.shutdown(drainDeadlineMilliseconds: 3_000) }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct PaymentOutcomeTests {
    @Test func unknownOutcomeIsPendingThenResolvedWithOneCharge() throws {
        let h = try PaymentsHarness(prefix: "pay_unknown")
        defer { h.stop() }
        // Amount ending 08: the simulator charges, then loses its first answer.
        let s = try h.session(totalMinor: 2_008)
        let token = try h.token(for: s)
        let first = try h.pay(s, token: token, key: "u1")
        #expect(first.status == 202)
        let id = try #require(first.payment?["id"] as? String)
        #expect(first.payment?["status"] as? String == "pending")
        #expect(try h.get("/v1/payments/\(id)").json()["status"] as? String == "pending")
        // The resolver re-sends with the same key and records the answer.
        usleep(50_000)
        #expect(h.service.resolvePass() >= 1)
        let after = try h.get("/v1/payments/\(id)").json()
        #expect(after["status"] as? String == "succeeded")
        // The client's retry of its key now replays the final outcome.
        let retry = try h.pay(s, token: token, key: "u1")
        #expect(retry.status == 200)
        #expect(retry.payment?["status"] as? String == "succeeded")
        let charges = try h.simulatorCharges(paymentId: id)
        let calls = try h.simulatorCalls(paymentId: id)
        print("measure unknown outcome: processor charges = \(charges), calls with the same key = \(calls), ledger events = \(h.sink.count)")
        #expect(charges == 1)
        #expect(calls == 2)
        #expect(h.sink.count == 1)
    }

    @Test func retryOfThePendingKeyResumesWithTheSameProcessorKey() throws {
        let h = try PaymentsHarness(prefix: "pay_resume")
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_108)
        let token = try h.token(for: s)
        let first = try h.pay(s, token: token, key: "r1")
        #expect(first.status == 202)
        let id = try #require(first.payment?["id"] as? String)
        let second = try h.pay(s, token: token, key: "r1")
        #expect(second.status == 200)
        #expect(second.payment?["status"] as? String == "succeeded")
        #expect(second.payment?["id"] as? String == id)
        #expect(try h.simulatorCharges(paymentId: id) == 1)
        #expect(try h.simulatorCalls(paymentId: id) == 2)
    }

    @Test func declineIsFinalAndTheSessionStaysOpen() throws {
        let h = try PaymentsHarness(prefix: "pay_decline")
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_051)
        let r = try h.pay(s, token: try h.token(for: s), key: "d1")
        #expect(r.status == 200)
        #expect(r.payment?["status"] as? String == "declined")
        #expect((try r.json()["authorizationResult"] as? [String: Any])?["status"] as? Int == 1)
        let dpan = try h.session()
        let byCard = try h.pay(dpan, token: try h.token(for: dpan, pan: "4000000000000002"), key: "d2")
        #expect(byCard.payment?["declineCode"] as? String == "card_declined")
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM checkout_sessions WHERE session_id = $1 AND status = 'open'",
                             [s.sessionId]) == 1)
        #expect(h.sink.count == 0)
    }

    @Test func processorFailureMatrixOverHTTP() throws {
        let fake = try FakeProcessorServer()
        defer { fake.stop() }
        let h = try PaymentsHarness(prefix: "pay_http", processor: { _ in
            HTTPProcessor(baseURL: fake.url, timeoutMilliseconds: 300,
                          retryPolicy: RetryPolicy(attemptsMax: 3, baseDelayMilliseconds: 10, maxDelayMilliseconds: 20),
                          allowPlainHTTPForTesting: true)
        })
        defer { h.stop() }
        func attempt(_ mode: FakeProcessorServer.Mode, _ key: String) throws -> (RawResponse, String) {
            fake.setMode(mode)
            let s = try h.session()
            let r = try h.pay(s, token: try h.token(for: s), key: key)
            let id = try #require(r.payment?["id"] as? String)
            return (r, ProcessorKey.authorization(paymentId: id))
        }
        var table: [String] = []
        let (approved, approvedKey) = try attempt(.approve, "m-ok")
        #expect(approved.payment?["status"] as? String == "succeeded")
        #expect(fake.calls(approvedKey) == 1)
        table.append("approve → \(approved.payment?["status"] ?? "") calls=\(fake.calls(approvedKey))")

        let (declined, declinedKey) = try attempt(.decline, "m-decline")
        #expect(declined.payment?["status"] as? String == "declined")
        #expect(fake.calls(declinedKey) == 1)   // a decline is never retried
        table.append("decline → \(declined.payment?["status"] ?? "") calls=\(fake.calls(declinedKey))")

        let (declined402, key402) = try attempt(.decline402, "m-402")
        #expect(declined402.payment?["declineCode"] as? String == "insufficient_funds")
        #expect(fake.calls(key402) == 1)
        table.append("402 → \(declined402.payment?["status"] ?? "") calls=\(fake.calls(key402))")

        let (failed, failedKey) = try attempt(.fail500, "m-500")
        #expect(failed.status == 202)
        #expect(failed.payment?["status"] as? String == "pending")
        #expect(fake.calls(failedKey) == 3)     // bounded retries
        table.append("500 → \(failed.payment?["status"] ?? "") calls=\(fake.calls(failedKey))")

        let (malformed, malformedKey) = try attempt(.malformed, "m-bad")
        #expect(malformed.payment?["status"] as? String == "pending")
        table.append("malformed → \(malformed.payment?["status"] ?? "") calls=\(fake.calls(malformedKey))")

        let (slow, slowKey) = try attempt(.slow(600), "m-slow")
        #expect(slow.payment?["status"] as? String == "pending")
        let slowCalls = fake.calls(slowKey)
        table.append("timeout → \(slow.payment?["status"] ?? "") calls=\(slowCalls)")

        // The processor recovers: the resolver re-sends every pending payment with its own key.
        fake.setMode(.approve)
        usleep(100_000)
        _ = h.service.resolvePass()
        for key in [failedKey, malformedKey, slowKey] {
            let id = String(key.dropFirst("tender:".count).dropLast(":authorize".count))
            #expect(try h.get("/v1/payments/\(id)").json()["status"] as? String == "succeeded", "\(key)")
        }
        // The slow call charged once already; the re-send with the same key did not charge again.
        let slowCharges = fake.state.withLock { $0.charges.keys.filter { $0 == slowKey }.count }
        table.append("timeout resolved: charges for its key = \(slowCharges), calls = \(fake.calls(slowKey))")
        print("measure processor failure matrix:\n  " + table.joined(separator: "\n  "))
        #expect(slowCharges == 1)
        #expect(fake.chargeCount == 4)
        // The processor saw the DPAN (it must), Tender's database did not.
        #expect(fake.bodies.contains { $0.contains("4111111111119876") })
    }

    @Test func refundsPartialOverAndConcurrent() throws {
        let h = try PaymentsHarness(prefix: "pay_refund")
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_099)
        let paid = try h.pay(s, token: try h.token(for: s), key: "p")
        let id = try #require(paid.payment?["id"] as? String)

        let missingKey = try h.refund(id, amount: "1.00", key: nil)
        #expect(missingKey.code == "idempotency_key_missing")
        let badAmount = try h.refund(id, amount: "1.0", key: "rf-bad")
        #expect(badAmount.status == 400)
        #expect(badAmount.code == "amount_invalid")
        // Above Safari's cap (Int64.max minor units here): refused at the edge, before any sum with it.
        for huge in ["92233720368547758.07", "100000000.01"] {
            let tooLarge = try h.refund(id, amount: huge, key: "rf-huge-\(huge)")
            #expect(tooLarge.status == 400)
            #expect(tooLarge.code == "amount_too_large")
        }
        let unknown = try RawHTTPClient(port: h.port).request(
            "POST", "/v1/payments/\(id)/refunds",
            headers: [("Authorization", "Bearer \(h.apiKey)"), ("Idempotency-Key", "rf-x")],
            body: Array("{\"amount\":\"1.00\",\"reason\":\"x\"}".utf8))
        #expect(unknown.code == "unknown_field")

        let partial = try h.refund(id, amount: "5.00", key: "rf-1")
        #expect(partial.status == 200)
        #expect(try partial.json()["status"] as? String == "succeeded")
        #expect(try partial.json()["amountMinor"] as? Int == 500)
        let replay = try h.refund(id, amount: "5.00", key: "rf-1")
        #expect(replay.body == partial.body)
        let over = try h.refund(id, amount: "6.00", key: "rf-2")
        #expect(over.status == 422)
        #expect(over.code == "refund_exceeds_payment")
        let exact = try h.refund(id, amount: "5.99", key: "rf-3")
        #expect(exact.status == 200)

        // Concurrent: 20 refunds of 1.00 against 10.99 captured; at most 10 fit.
        let s2 = try h.session(totalMinor: 1_099)
        let id2 = try #require(try h.pay(s2, token: try h.token(for: s2), key: "p2").payment?["id"] as? String)
        let statuses = concurrently(20) { i -> Int in (try? h.refund(id2, amount: "1.00", key: "c-\(i)").status) ?? -1 }
        let refunded = try h.scalar("""
            SELECT COALESCE(SUM(amount_minor), 0)::bigint AS n FROM refunds WHERE payment_id = $1 AND status = 'succeeded'
            """, [id2])
        print("measure concurrent refunds: succeeded = \(statuses.filter { $0 == 200 }.count), refused = \(statuses.filter { $0 == 422 }.count), refunded minor = \(refunded) of 1099")
        #expect(statuses.filter { $0 == 200 }.count == 10)
        #expect(statuses.filter { $0 == 422 }.count == 10)
        #expect(refunded == 1_000)
        #expect(refunded <= 1_099)
        let refundEvents = h.sink.events.filter { if case .refundSucceeded = $0 { true } else { false } }.count
        #expect(refundEvents == 12)
    }

    @Test func readingAndListingAreMerchantScoped() throws {
        let h = try PaymentsHarness(prefix: "pay_list")
        defer { h.stop() }
        var ids: [String] = []
        for i in 0..<5 {
            let s = try h.session(totalMinor: 1_000 + Int64(i))
            let r = try h.pay(s, token: try h.token(for: s), key: "l-\(i)")
            ids.append(try #require(r.payment?["id"] as? String))
        }
        let other = try Merchant.validated(merchantId: "merchant.other.\(UUID().uuidString.prefix(6).lowercased())", displayName: "Other",
                                           domains: ["other.test"], countryCode: "US", currencies: ["USD"])
        try h.app.merchants.add(other)
        let otherKey = try h.app.merchants.createAPIKey(merchantId: other.merchantId).secret
        #expect(try h.get("/v1/payments/\(ids[0])", bearer: otherKey).status == 404)
        #expect(try h.get("/v1/payments/\(ids[0])").status == 200)
        #expect(try (h.get("/v1/payments", bearer: otherKey).json()["data"] as? [Any])?.count == 0)

        let page1 = try h.get("/v1/payments?limit=2").json()
        let data1 = try #require(page1["data"] as? [[String: Any]])
        #expect(data1.count == 2)
        #expect(page1["hasMore"] as? Bool == true)
        let last = try #require(data1.last?["id"] as? String)
        let page2 = try h.get("/v1/payments?limit=100&startingAfter=\(last)").json()
        let data2 = try #require(page2["data"] as? [[String: Any]])
        #expect(data2.count == 3)
        #expect(page2["hasMore"] as? Bool == false)
        #expect(Set((data1 + data2).compactMap { $0["id"] as? String }) == Set(ids))
        #expect(try h.get("/v1/payments?limit=101").status == 400)
        #expect(try h.get("/v1/payments?limit=0").status == 400)
        #expect(try h.get("/v1/payments?status=weird").status == 400)
        let succeeded = try h.get("/v1/payments?status=succeeded").json()["data"] as? [Any]
        #expect(succeeded?.count == 5)
    }

    @Test func noCardDataAtRestOrInLogsAfterHundredsOfPayments() throws {
        let h = try PaymentsHarness(prefix: "pay_pci")
        defer { h.stop() }
        var secrets: [String] = []
        for i in 0..<200 {
            let pan = "4" + String(format: "%015d", 100_000_000_000_000 + i * 7_919)
            let cryptogram = Data(SecureRandom.bytes(20)).base64EncodedString()
            secrets += [pan, cryptogram]
            let s = try h.session(totalMinor: 1_000 + Int64(i % 40) * 100 + 99)
            let r = try h.pay(s, token: try h.token(for: s, pan: pan, cryptogram: cryptogram), key: "pci-\(i)")
            #expect(r.status == 200)
            #expect(!r.text.contains(pan))
        }
        let database = try #require(try h.pool.query("SELECT current_database() AS d").first?.decode("d", as: String.self))
        let url = TestEnvironment.url(database: database)
        let dump = Process()
        dump.executableURL = URL(fileURLWithPath: "/usr/bin/pg_dump")
        dump.arguments = ["--data-only", url]
        let out = Pipe()
        dump.standardOutput = out
        try dump.run()
        let dumped = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        dump.waitUntilExit()
        #expect(dump.terminationStatus == 0)
        #expect(dumped.contains("succeeded"))
        let logs = h.logs.text
        let inDump = secrets.filter { dumped.contains($0) }.count
        let inLogs = secrets.filter { logs.contains($0) }.count
        print("measure card data at rest: payments = 200, dump bytes = \(dumped.utf8.count), DPAN/cryptogram hits in dump = \(inDump), in logs = \(inLogs)")
        #expect(inDump == 0)
        #expect(inLogs == 0)
    }
}
