import FinanceStore
import Foundation
import Payments
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// A subscriber that refuses captured payments (as the ledger refuses a balance past Int64.max).
final class RefusingPaymentSubscriber: PaymentEventSubscriber {
    let refusing = Atomic<Bool>(true)
    func record(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        if case .paymentSucceeded = event, refusing.load(ordering: .relaxed) { throw FinanceError(.amountOverflow, detail: "balance") }
    }
}

/// Outcomes are written to the events outbox in the transaction that records them (CONTRACT §6).
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct PaymentEventTests {
    /// The events about `objectId`, oldest first: (type, data.object).
    static func events(_ h: PaymentsHarness, objectId: String) throws -> [(String, NSDictionary)] {
        try h.pool.query("SELECT event_type, body FROM events WHERE object_id = $1 ORDER BY seq", [objectId]).rows.map { row in
            let body: String = try row.decode("body")
            let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            let object = (json?["data"] as? [String: Any])?["object"] as? [String: Any] ?? [:]
            #expect(json?["type"] as? String == (try row.decode("event_type", as: String.self)))
            #expect((json?["id"] as? String)?.hasPrefix("evt_") == true)
            return (try row.decode("event_type"), object as NSDictionary)
        }
    }

    @Test func eachOutcomeIsAnEventWhoseObjectIsTheResourceAsGETShowsIt() throws {
        let h = try PaymentsHarness(prefix: "pay_events")
        defer { h.stop() }
        // Succeeded.
        let s = try h.session()
        let paid = try h.pay(s, token: try h.token(for: s), key: "e1")
        let paymentId = try #require(paid.payment?["id"] as? String)
        let succeeded = try Self.events(h, objectId: paymentId)
        #expect(succeeded.map(\.0) == ["payment.succeeded"])
        let shown = try h.get("/v1/payments/\(paymentId)").json() as NSDictionary
        #expect(succeeded.first?.1 == shown)
        // Declined (amount ending 51), and refused before the processor (amount mismatch).
        let d = try h.session(totalMinor: 1_051)
        let declined = try #require(try h.pay(d, token: try h.token(for: d), key: "e2").payment?["id"] as? String)
        #expect(try Self.events(h, objectId: declined).map(\.0) == ["payment.declined"])
        let f = try h.session()
        let refused = try h.pay(f, token: try h.token(for: f, amountMinor: 1), key: "e3")
        #expect(refused.code == "amount_mismatch")
        let failedId = try #require(try refused.json()["paymentId"] as? String)
        let failed = try Self.events(h, objectId: failedId)
        #expect(failed.map(\.0) == ["payment.failed"])
        #expect(failed.first?.1["failureCode"] as? String == "amount_mismatch")
        // Refunds: succeeded, and declined (amount ending 13) as refund.failed.
        let refund = try h.refund(paymentId, amount: "1.00", key: "r1").json()
        let refundId = try #require(refund["id"] as? String)
        let refunded = try Self.events(h, objectId: refundId)
        #expect(refunded.map(\.0) == ["refund.succeeded"])
        #expect(refunded.first?.1 == (refund as NSDictionary))
        let declinedRefund = try #require(try h.refund(paymentId, amount: "0.13", key: "r2").json()["id"] as? String)
        #expect(try Self.events(h, objectId: declinedRefund).map(\.0) == ["refund.failed"])
        // Every event is the merchant's; a replay adds none.
        _ = try h.pay(s, token: try h.token(for: s), key: "e1")
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM events WHERE merchant_id = $1", [h.merchantId]) == 5)
    }

    @Test func aRolledBackOutcomeLeavesNoEvent() throws {
        let subscriber = RefusingPaymentSubscriber()
        let h = try PaymentsHarness(prefix: "pay_events_rb", ledger: subscriber)
        defer { h.stop() }
        let s = try h.session()
        let r = try h.pay(s, token: try h.token(for: s), key: "rb1")
        // The subscriber threw: the outcome did not commit, the payment waits pending, and so does its event.
        #expect(r.status == 202)
        let paymentId = try #require(r.payment?["id"] as? String)
        #expect(try Self.events(h, objectId: paymentId).isEmpty)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM payments WHERE payment_id = $1 AND status = 'pending'",
                             [paymentId]) == 1)
        // Once the subscriber accepts, the resolver records the outcome with its event, once.
        subscriber.refusing.store(false, ordering: .relaxed)
        let end = Date().addingTimeInterval(20)
        while Date() < end, try Self.events(h, objectId: paymentId).isEmpty {
            _ = h.service.resolvePass()
            usleep(50_000)
        }
        #expect(try Self.events(h, objectId: paymentId).map(\.0) == ["payment.succeeded"])
    }
}
