import Foundation
import HTTPClient
import Payments
import Synchronization
import Testing
@testable import TenderServer

/// A payment and a refund through Tender's API with the Adyen connector and the schema-checking stand-in.
@Suite struct AdyenPaymentFlowTests {
    @Test func paymentSucceedsAndTheRefundWaitsAsAcceptedByAdyen() throws {
        let stand = try AdyenStandIn.get()
        let h = try PaymentsHarness(prefix: "pay_adyen", processor: { _ in
            AdyenProcessor(settings: stand.settings(), timeoutMilliseconds: 3_000,
                           retryPolicy: RetryPolicy(attemptsMax: 2, baseDelayMilliseconds: 10, maxDelayMilliseconds: 20))
        })
        defer { h.stop() }
        let s = try h.session(totalMinor: 2_500)
        let r = try h.pay(s, token: try h.token(for: s), key: "adyen-pay-1")
        #expect(r.status == 200)
        #expect(r.payment?["status"] as? String == "succeeded")
        let paymentId = try #require(r.payment?["id"] as? String)
        let psp = try #require(r.payment?["processorReference"] as? String)
        let authorization = try stand.calls(key: ProcessorKey.authorization(paymentId: paymentId))
        #expect(authorization.count == 1)
        #expect(authorization.first?.violations == [])
        #expect(authorization.first?.body?["reference"]?.string == paymentId)
        #expect(authorization.first?.body?["amount.value"]?.number == 2_500)

        let refund = try h.refund(paymentId, amount: "5.00", key: "adyen-refund-1")
        #expect(refund.status == 202)
        let view = try refund.json()
        #expect(view["status"] as? String == "pending")
        let refundId = try #require(view["id"] as? String)
        let refundReference = try #require(view["processorReference"] as? String)
        #expect(refundReference != psp)
        let refundKey = ProcessorKey.refund(refundId: refundId)
        #expect(try stand.calls(key: refundKey).map(\.path) == ["/v71/payments/\(psp)/refunds"])
        #expect(try stand.calls(key: refundKey).first?.violations == [])
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM refunds WHERE refund_id = $1 AND processor_accepted_at IS NOT NULL",
                             [refundId]) == 1)

        // Accepted is not re-sent: the resolver leaves it alone, a retry of the key replays the stored answer.
        usleep(50_000)
        _ = h.service.resolvePass()
        #expect(try stand.calls(key: refundKey).count == 1)
        let replay = try h.refund(paymentId, amount: "5.00", key: "adyen-refund-1")
        #expect(replay.status == 202)
        #expect(try replay.json()["id"] as? String == refundId)
        #expect(try stand.calls(key: refundKey).count == 1)
        // No ledger event for the refund: nothing is paid back until Adyen confirms it.
        #expect(h.sink.events.allSatisfy { if case .refundSucceeded = $0 { false } else { true } })
        // The pending refund still counts against the captured amount.
        #expect(try h.refund(paymentId, amount: "20.01", key: "adyen-refund-2").status == 422)

        // Adyen confirms later (its REFUND notification); the operator records it: the ledger gets it now.
        let environment = ["TENDER_DATABASE_URL": h.pool.configuration.connectionString]
        #expect(TenderCLI.run(["payments", "settle-refund", "--refund-id", refundId, "--succeeded", "--declined", "x"],
                              environment: environment) == ExitCode.usage.rawValue)
        #expect(TenderCLI.run(["payments", "settle-refund", "--refund-id", refundId, "--succeeded"], environment: environment)
            == ExitCode.success.rawValue)
        #expect(TenderCLI.run(["payments", "settle-refund", "--refund-id", refundId, "--succeeded"], environment: environment)
            == ExitCode.failure.rawValue)
        let settled = try h.get("/v1/payments/\(paymentId)/refunds").json()["data"] as? [[String: Any]]
        #expect(settled?.first { $0["id"] as? String == refundId }?["status"] as? String == "succeeded")
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM refunds WHERE refund_id = $1 AND status = 'succeeded'", [refundId]) == 1)
        // A refund Adyen later fails frees its amount again.
        let second = try h.refund(paymentId, amount: "20.00", key: "adyen-refund-3")
        let secondId = try #require(try second.json()["id"] as? String)
        #expect(TenderCLI.run(["payments", "settle-refund", "--refund-id", secondId, "--declined", "refund_failed"],
                              environment: environment) == ExitCode.success.rawValue)
        #expect(try h.refund(paymentId, amount: "20.00", key: "adyen-refund-4").status == 202)

        // Card data reached Adyen (it must) and nothing else: not the logs, not the database.
        #expect(authorization.first?.body?["paymentMethod.number"]?.string == "4111111111119876")
        #expect(!h.logs.text.contains("4111111111119876"))
        #expect(!h.logs.text.contains("Q3J5cHRvZ3JhbVNlY3JldA=="))
        #expect(!h.logs.text.contains(stand.apiKey))
        #expect(try h.scalar("""
            SELECT count(*)::bigint AS n FROM payments
            WHERE payment_id = $1 AND row_to_json(payments)::text LIKE '%4111111111119876%'
            """, [paymentId]) == 0)
    }

    @Test func aDeclineIsFinalAndPendingIsResent() throws {
        let stand = try AdyenStandIn.get()
        let h = try PaymentsHarness(prefix: "pay_adyen_d", processor: { _ in
            AdyenProcessor(settings: stand.settings(), timeoutMilliseconds: 3_000,
                           retryPolicy: RetryPolicy(attemptsMax: 2, baseDelayMilliseconds: 10, maxDelayMilliseconds: 20))
        })
        defer { h.stop() }
        let s = try h.session(totalMinor: 1_051)
        let declined = try h.pay(s, token: try h.token(for: s), key: "adyen-decline")
        #expect(declined.payment?["status"] as? String == "declined")
        #expect(declined.payment?["declineCode"] as? String == "insufficient_funds")
        let pendingSession = try h.session(totalMinor: 1_062)
        let pending = try h.pay(pendingSession, token: try h.token(for: pendingSession), key: "adyen-pending")
        #expect(pending.status == 202)
        #expect(pending.payment?["status"] as? String == "pending")
        let id = try #require(pending.payment?["id"] as? String)
        usleep(100_000)
        _ = h.service.resolvePass()
        // Re-sent with the same Idempotency-Key: Adyen's stored answer, still pending.
        let calls = try stand.calls(key: ProcessorKey.authorization(paymentId: id))
        #expect(calls.count >= 2)
        #expect(Set(calls.compactMap(\.idempotencyKey)).count == 1)
        #expect(try h.get("/v1/payments/\(id)").json()["status"] as? String == "pending")
    }
}
