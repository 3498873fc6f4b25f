import ApplePayToken
import Crypto
import Foundation
import Payments
import Testing
@testable import TenderServer

/// The reviewer's list (docs/reliability-security.md "Tests a reviewer would demand") for payments; each test
/// prints its measure.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct PaymentFlowTests {
    @Test func succeededPaymentMarksTheSessionPaidAndReplaysByteForByte() throws {
        let h = try PaymentsHarness(prefix: "pay_replay")
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let first = try h.pay(s, token: token, key: "order-1")
        #expect(first.status == 200)
        let payment = try #require(first.payment)
        #expect(payment["status"] as? String == "succeeded")
        #expect(payment["amountMinor"] as? Int == 1_099)
        #expect(payment["last4"] as? String == "9876")
        #expect(payment["network"] as? String == "Visa")
        #expect((try first.json()["authorizationResult"] as? [String: Any])?["status"] as? Int == 0)
        let paymentId = try #require(payment["id"] as? String)
        // Test 1: 20 sequential retries replay the same bytes and reach the processor zero more times.
        var bodies = Set<[UInt8]>([first.body])
        for _ in 0..<20 {
            let again = try h.pay(s, token: token, key: "order-1")
            #expect(again.status == 200)
            #expect(again.header("Idempotent-Replayed") == "true")
            bodies.insert(again.body)
        }
        let calls = try h.simulatorCalls(paymentId: paymentId)
        print("measure replay: distinct bodies = \(bodies.count), processor calls = \(calls), ledger events = \(h.sink.count)")
        #expect(bodies.count == 1)
        #expect(calls == 1)
        #expect(h.sink.count == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM checkout_sessions WHERE session_id = $1 AND status = 'paid'",
                             [s.sessionId]) == 1)
        // Test 2: the same key with another body is 422 and calls nothing.
        let other = try h.pay(s, token: try h.token(for: s), key: "order-1")
        #expect(other.status == 422)
        #expect(other.code == "idempotency_key_reused")
        #expect(try h.simulatorCalls(paymentId: paymentId) == 1)
        // A paid session refuses another payment (rule 58) and records the refusal.
        let second = try h.pay(s, token: try h.token(for: s), key: "order-2")
        #expect(second.status == 409)
        #expect(second.code == "session_already_paid")
        #expect((try second.json()["authorizationResult"] as? [String: Any])?["status"] as? Int == 1)
    }

    /// `paymentMethod` is outside Apple's signature: a Visa DPAN presented as AmEx is refused, and the
    /// network stored and sent is always the DPAN's.
    @Test func networkIsTheDPANsAndAMismatchedClaimIsRefused() throws {
        let h = try PaymentsHarness(prefix: "pay_network")
        defer { h.stop() }
        func mint(_ s: SessionFixture, pan: String, network: String) throws -> [UInt8] {
            let request = SandboxTokenRequest(amountMinor: s.totalMinor, currencyCodeNumeric: "978", applicationData: s.applicationData,
                                              pan: pan, cryptogram: "Q3J5cHRvZ3JhbVNlY3JldA==", signingTime: Date(), network: network)
            return try PaymentsHarness.authority.mintToken(request, for: h.merchantKeys[0])
        }
        let s = try h.session()
        let lying = try h.pay(s, token: try mint(s, pan: "4111111111119876", network: "AmEx"), key: "net-1")
        #expect(lying.status == 422)
        #expect(lying.code == "payment_network_mismatch")
        #expect((try lying.json()["authorizationResult"] as? [String: Any])?["status"] as? Int == 1)
        #expect(try h.scalar("""
            SELECT count(*)::bigint AS n FROM payments WHERE session_id = $1 AND status = 'failed'
               AND failure_code = 'payment_network_mismatch'
            """, [s.sessionId]) == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", []) == 0)

        let honest = try h.pay(s, token: try mint(s, pan: "5555555555554444", network: "masterCard"), key: "net-2")
        #expect(honest.status == 200)
        #expect(honest.payment?["network"] as? String == "MasterCard")
    }

    @Test func clientSecretPaysOnlyItsSession() throws {
        let h = try PaymentsHarness(prefix: "pay_secret")
        defer { h.stop() }
        let a = try h.session()
        let b = try h.session()
        let wrong = try h.pay(a, token: try h.token(for: a), key: "k1", bearer: b.clientSecret)
        #expect(wrong.status == 401)
        #expect(wrong.code == "unauthorized")
        let ok = try h.pay(a, token: try h.token(for: a), key: "k1", bearer: a.clientSecret)
        #expect(ok.status == 200)
        #expect(ok.payment?["status"] as? String == "succeeded")
    }

    @Test func fiftyConcurrentRequestsWithOneKeyChargeOnce() throws {
        var rules = SimulatorRules()
        rules.latencyMilliseconds = 500
        let h = try PaymentsHarness(prefix: "pay_conc", rules: rules)
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let statuses = concurrently(50) { _ -> Int in (try? h.pay(s, token: token, key: "same-key").status) ?? -1 }
        var histogram: [Int: Int] = [:]
        for status in statuses { histogram[status, default: 0] += 1 }
        let charges = try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", [])
        let calls = try h.scalar("SELECT COALESCE(SUM(calls), 0)::bigint AS n FROM simulator_authorizations", [])
        print("measure concurrent duplicates: statuses = \(histogram), processor charges = \(charges), calls = \(calls)")
        #expect(charges == 1)
        #expect(calls == 1)
        #expect(Set(statuses).isSubset(of: [200, 409]))
        #expect((histogram[200] ?? 0) >= 1)
        #expect((histogram[409] ?? 0) >= 1)
        let conflict = try h.pay(s, token: token, key: "same-key")
        #expect(conflict.status == 200)
    }

    @Test func inFlightKeyIs409WithRetryAfter() throws {
        var rules = SimulatorRules()
        rules.latencyMilliseconds = 800
        let h = try PaymentsHarness(prefix: "pay_409", rules: rules)
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let results = concurrently(2) { i -> RawResponse? in
            if i == 1 { usleep(200_000) }
            return try? h.pay(s, token: token, key: "k")
        }
        let second = try #require(results[1])
        #expect(second.status == 409)
        #expect(second.code == "idempotency_key_in_progress")
        #expect(Int(second.header("Retry-After") ?? "") ?? 0 >= 1)
        #expect(results[0]?.status == 200)
    }

    @Test func missingAndMalformedKeys() throws {
        let h = try PaymentsHarness(prefix: "pay_keys")
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let missing = try h.pay(s, token: token, key: nil)
        #expect(missing.status == 400)
        #expect(missing.code == "idempotency_key_missing")
        let long = try h.pay(s, token: token, key: String(repeating: "k", count: 256))
        #expect(long.status == 400)
        #expect(long.code == "idempotency_key_invalid")
        // A control character never reaches the route: the edge refuses it in any header value (RFC 9110 §5.5).
        let control = try h.pay(s, token: token, key: "bad\u{7f}key")
        #expect(control.status == 400)
        #expect(control.code == "invalid_header_value")
        let nonASCII = try h.pay(s, token: token, key: "bad\u{e9}key")
        #expect(nonASCII.status == 400)
        #expect(nonASCII.code == "idempotency_key_invalid")
        let rows = try h.scalar("SELECT count(*)::bigint AS n FROM idempotency_keys", [])
        print("measure malformed keys: statuses = [\(missing.status), \(long.status), \(control.status)], key rows = \(rows)")
        #expect(rows == 0)
        let atLimit = try h.pay(s, token: token, key: "\"" + String(repeating: "k", count: 255) + "\"")
        #expect(atLimit.status == 200)
        let quoted = try h.pay(try h.session(), token: try h.token(for: try h.session()), key: "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"")
        #expect(quoted.status == 422 || quoted.status == 200)
    }

    @Test func quotedKeyIsTheSameKeyAsBare() throws {
        let h = try PaymentsHarness(prefix: "pay_quoted")
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let quoted = try h.pay(s, token: token, key: "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"")
        #expect(quoted.status == 200)
        let bare = try h.pay(s, token: token, key: "8e03978e-40d5-43e8-bc93-6894a57f9324")
        #expect(bare.status == 200)
        #expect(bare.header("Idempotent-Replayed") == "true")
    }

    @Test func validationFailuresAreNotStored() throws {
        let h = try PaymentsHarness(prefix: "pay_valid")
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let bad = try RawHTTPClient(port: h.port).request(
            "POST", "/v1/checkout-sessions/\(s.sessionId)/payments",
            headers: [("Authorization", "Bearer \(h.apiKey)"), ("Idempotency-Key", "K6")],
            body: Array("{\"token\":".utf8) + token + Array(",\"amount\":\"1.00\"}".utf8))
        #expect(bad.status == 400)
        #expect(bad.code == "unknown_field")
        let noToken = try RawHTTPClient(port: h.port).request(
            "POST", "/v1/checkout-sessions/\(s.sessionId)/payments",
            headers: [("Authorization", "Bearer \(h.apiKey)"), ("Idempotency-Key", "K6")], body: Array("{}".utf8))
        #expect(noToken.status == 400)
        let rowsAfterInvalid = try h.scalar("SELECT count(*)::bigint AS n FROM idempotency_keys", [])
        let good = try h.pay(s, token: token, key: "K6")
        print("measure validation: statuses = [\(bad.status), \(noToken.status), \(good.status)], "
              + "key rows after invalid = \(rowsAfterInvalid)")
        #expect(rowsAfterInvalid == 0)
        #expect(good.status == 200)
        #expect(good.header("Idempotent-Replayed") == nil)
    }

    @Test func transactionIdReplayIsRefusedAlsoConcurrently() throws {
        let h = try PaymentsHarness(prefix: "pay_txid")
        defer { h.stop() }
        // Sequential: one token, two keys, on a session whose first attempt was declined (so it stays open).
        let s = try h.session(totalMinor: 1_051)
        let token = try h.token(for: s)
        let first = try h.pay(s, token: token, key: "a")
        #expect(first.status == 200)
        #expect(first.payment?["status"] as? String == "declined")
        #expect(first.payment?["declineCode"] as? String == "insufficient_funds")
        let replay = try h.pay(s, token: token, key: "b")
        #expect(replay.status == 409)
        #expect(replay.code == "token_replayed")
        // Concurrent: 2 × 25 requests, each with its own key, all carrying one token.
        let c = try h.session()
        let shared = try h.token(for: c)
        let results = concurrently(50) { i -> RawResponse? in try? h.pay(c, token: shared, key: "conc-\(i)") }.compactMap { $0 }
        let succeeded = results.filter { $0.status == 200 }.count
        let refusedCodes = Set(results.filter { $0.status == 409 }.compactMap(\.code))
        let charges = try h.scalar("""
            SELECT count(*)::bigint AS n FROM simulator_authorizations s JOIN payments p ON p.payment_id = s.payment_id
            WHERE p.session_id = $1
            """, [c.sessionId])
        let other = results.filter { $0.status != 200 && $0.status != 409 }
        #expect(other.isEmpty, "\(other.map { "\($0.status) \($0.text)" })")
        print("measure txid replay: succeeded = \(succeeded), refused = \(results.count - succeeded) \(refusedCodes), charges = \(charges)")
        #expect(results.count == 50)
        #expect(succeeded == 1)
        #expect(charges == 1)
        #expect(refusedCodes.isSubset(of: ["token_replayed", "session_already_paid", "session_payment_in_progress"]))
    }

    @Test func amountCurrencyAndApplicationDataAreBound() throws {
        let h = try PaymentsHarness(prefix: "pay_bind")
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_099, currencyCode: "EUR")
        let other = try h.session()
        let cases: [(String, [UInt8], String)] = [
            ("amount", try h.token(for: s, amountMinor: 1_000), "amount_mismatch"),
            ("currency", try h.token(for: s, currencyNumeric: "840"), "currency_mismatch"),
            ("foreign session", try h.token(for: other), "application_data_mismatch"),
            ("no applicationData", try h.token(for: s, applicationData: .some(nil)), "application_data_mismatch"),
        ]
        for (index, (name, token, code)) in cases.enumerated() {
            let r = try h.pay(s, token: token, key: "bind-\(index)")
            #expect(r.status == 422, "\(name)")
            #expect(r.code == code, "\(name)")
            #expect((try r.json()["authorizationResult"] as? [String: Any])?["status"] as? Int == 1)
            // A refusal is stored: the same key replays it.
            let again = try h.pay(s, token: token, key: "bind-\(index)")
            #expect(again.body == r.body)
        }
        let processorCalls = try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", [])
        let failed = try h.scalar("SELECT count(*)::bigint AS n FROM payments WHERE status = 'failed' AND session_id = $1", [s.sessionId])
        print("measure binding: processor calls = \(processorCalls), failed payments recorded = \(failed)")
        #expect(processorCalls == 0)
        #expect(failed == 4)
        // The real token still pays afterwards.
        #expect(try h.pay(s, token: try h.token(for: s), key: "bind-ok").status == 200)
    }

    @Test func rotatedKeysBothDecryptAndUnknownKeyIsRefused() throws {
        let h = try PaymentsHarness(prefix: "pay_rotate", merchantKeyCount: 2)
        defer { h.stop() }
        for index in 0..<2 {
            let s = try h.session()
            let r = try h.pay(s, token: try h.token(for: s, keyIndex: index), key: "rot-\(index)")
            #expect(r.status == 200, "key \(index)")
            #expect(r.payment?["status"] as? String == "succeeded")
        }
        let stranger = try PaymentsHarness.authority.makeMerchantKey(merchantIdentifier: h.merchantId,
                                                                     validFrom: Date().addingTimeInterval(-3_600))
        let s = try h.session()
        let refused = try h.pay(s, token: try h.token(for: s, key: stranger), key: "rot-x")
        #expect(refused.status == 422)
        #expect(refused.code == "token_rejected")
        #expect(try refused.json()["tokenErrorCode"] as? String == "unknown_merchant_key")
        #expect(!refused.text.contains(stranger.publicKeyHashBase64))
    }

    @Test func expiredAndUnknownSessions() throws {
        let h = try PaymentsHarness(prefix: "pay_sess")
        defer { h.stop() }
        let expired = try h.session(expiresInSeconds: -10)
        let r = try h.pay(expired, token: try h.token(for: expired), key: "e")
        #expect(r.status == 410)
        #expect(r.code == "session_expired")
        let ghost = SessionFixture(sessionId: "cs_" + String(repeating: "0", count: 24), clientSecret: "", applicationData: [],
                                   totalMinor: 1, currencyCode: "EUR")
        let missing = try h.pay(ghost, token: try h.token(for: expired), key: "g")
        #expect(missing.status == 404)
        #expect(missing.code == "session_not_found")
    }
}
