import FinanceStore
import Foundation
import Payments
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// The ledger refusing a refund's effects as the finance store does when a balance would pass Int64.max,
/// until an operator fixes the cause (`refusing = false`).
final class OverflowingRefundLedger: PaymentEventSubscriber {
    let refusing = Atomic<Bool>(true)
    func record(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        if case .refundSucceeded = event, refusing.load(ordering: .relaxed) { throw FinanceError(.amountOverflow, detail: "balance") }
    }
}

/// A processor whose declines carry a code longer than `payments.decline_code` holds (PostgreSQL refuses it).
final class OverlongDeclineProcessor: PaymentProcessor {
    let authorizations = Atomic<Int>(0)
    func authorize(_ request: AuthorizationRequest) -> ProcessorOutcome {
        authorizations.add(1, ordering: .relaxed)
        return .declined(declineCode: String(repeating: "x", count: 65), processorReference: "ref_overlong")
    }
    func refund(_ request: RefundRequest) -> ProcessorOutcome { .unknown(reason: "unused") }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct UnrecordableOutcomeTests {
    static func settings(attemptsMax: Int) -> PaymentsSettings {
        var s = PaymentsHarness.fastSettings
        s.recordAttemptsMax = attemptsMax
        s.resolverIntervalMilliseconds = 10
        s.resolverBackoffMaxMilliseconds = 40
        return s
    }

    /// Runs resolver passes for `seconds`, pausing past the longest backoff between them.
    static func resolve(_ h: PaymentsHarness, seconds: Double) {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            _ = h.service.resolvePass()
            usleep(50_000)
        }
    }

    @Test func refundApprovedButNotRecordableBacksOffAndWaitsForAnOperator() throws {
        let attemptsMax = 3
        let ledger = OverflowingRefundLedger()
        let h = try PaymentsHarness(prefix: "rf_unrecordable", settings: Self.settings(attemptsMax: attemptsMax), ledger: ledger)
        defer { h.stop() }
        let s = try h.session()
        let paymentId = try #require(try h.pay(s, token: try h.token(for: s), key: "p").payment?["id"] as? String)

        // The processor approves, the ledger refuses: the client sees the refund pending, not a 500.
        let first = try h.refund(paymentId, amount: "5.00", key: "rf-overflow")
        #expect(first.status == 202, "\(first.text)")
        let refundId = try #require(try first.json()["id"] as? String)
        #expect(try first.json()["status"] as? String == "pending")
        #expect(try first.json()["needsOperator"] as? Bool == false)

        // Well past the backoff of every attempt: the resolver must have stopped on its own.
        Self.resolve(h, seconds: 1.5)
        func refundCalls() throws -> Int64 {
            try h.scalar("SELECT COALESCE(SUM(calls), 0)::bigint AS n FROM simulator_authorizations WHERE kind = 'refund' AND payment_id = $1",
                         [paymentId])
        }
        #expect(try refundCalls() == Int64(attemptsMax))
        Self.resolve(h, seconds: 0.5)
        #expect(try refundCalls() == Int64(attemptsMax))

        let row = try #require(try h.pool.query("""
            SELECT status, record_failures, unrecorded_outcome, needs_operator_at IS NOT NULL AS marked, next_resolve_at IS NULL AS parked
            FROM refunds WHERE refund_id = $1
            """, [refundId]).first)
        #expect(try row.decode("status", as: String.self) == "pending")
        #expect(try row.decode("record_failures", as: Int.self) == attemptsMax)
        #expect(try row.decode("unrecorded_outcome", as: String.self) == "approved")
        #expect(try row.decode("marked", as: Bool.self))
        #expect(try row.decode("parked", as: Bool.self))

        // A merchant reads the mark; a retry of the key shows it and reaches nobody.
        let listed = try h.get("/v1/payments/\(paymentId)/refunds")
        #expect(listed.status == 200)
        let refund = try #require(objects(try listed.json()["data"]).first { $0["id"] as? String == refundId })
        #expect(refund["status"] as? String == "pending")
        #expect(refund["needsOperator"] as? Bool == true)
        let retry = try h.refund(paymentId, amount: "5.00", key: "rf-overflow")
        #expect(retry.status == 202)
        #expect(try retry.json()["needsOperator"] as? Bool == true)
        #expect(try refundCalls() == Int64(attemptsMax))

        let metrics = h.service.metrics.render()
        #expect(metrics.contains("tender_payments_outcome_record_failures_total{kind=\"refund\"} \(attemptsMax)"), "\(metrics)")
        #expect(metrics.contains("tender_payments_needs_operator_total{kind=\"refund\"} 1"))
        #expect(metrics.contains("tender_payments_needs_operator{kind=\"refund\"} 1"))
        // The pending refund still reserves its amount: nothing more than the captured total can be refunded.
        #expect(try h.refund(paymentId, amount: "6.00", key: "rf-more").code == "refund_exceeds_payment")

        // The operator fixes the cause and releases it: one more call (same processor key), then recorded.
        let environment = ["TENDER_DATABASE_URL": h.pool.configuration.connectionString]
        #expect(TenderCLI.run(["payments", "release", "--payment-id", paymentId], environment: environment) == ExitCode.failure.rawValue)
        ledger.refusing.store(false, ordering: .relaxed)
        #expect(TenderCLI.run(["payments", "release", "--refund-id", refundId], environment: environment) == ExitCode.success.rawValue)
        Self.resolve(h, seconds: 0.3)
        #expect(try refundCalls() == Int64(attemptsMax) + 1)
        let released = try #require(objects(try h.get("/v1/payments/\(paymentId)/refunds").json()["data"]).first)
        #expect(released["status"] as? String == "succeeded")
        #expect(released["needsOperator"] as? Bool == false)
        #expect(try h.refund(paymentId, amount: "5.00", key: "rf-overflow").status == 200)
    }

    @Test func paymentOutcomeThePostgresSchemaRefusesIsBoundedToo() throws {
        let attemptsMax = 2
        let processor = OverlongDeclineProcessor()
        let h = try PaymentsHarness(prefix: "pay_unrecordable", processor: { _ in processor },
                                    settings: Self.settings(attemptsMax: attemptsMax))
        defer { h.stop() }
        let s = try h.session()
        let token = try h.token(for: s)
        let first = try h.pay(s, token: token, key: "overlong")
        #expect(first.status == 202, "\(first.text)")
        let paymentId = try #require(first.payment?["id"] as? String)
        Self.resolve(h, seconds: 1.0)
        #expect(processor.authorizations.load(ordering: .relaxed) == attemptsMax)
        let got = try h.get("/v1/payments/\(paymentId)").json()
        #expect(got["status"] as? String == "pending")
        #expect(got["needsOperator"] as? Bool == true)
        #expect(try h.scalar("SELECT record_failures::bigint AS n FROM payments WHERE payment_id = $1", [paymentId]) == Int64(attemptsMax))
        // The client's retry of its key answers the state without another processor call.
        let retry = try h.pay(s, token: token, key: "overlong")
        #expect(retry.status == 202)
        #expect(retry.payment?["needsOperator"] as? Bool == true)
        Self.resolve(h, seconds: 0.3)
        #expect(processor.authorizations.load(ordering: .relaxed) == attemptsMax)
        #expect(h.service.metrics.render().contains("tender_payments_needs_operator{kind=\"payment\"} 1"))
    }
}
