import ApplePayToken
import Foundation
import Payments
import Postgres
import Testing
@_spi(Testing) @testable import TenderServer

/// Issue 19 item 3: two nodes' resolvers (each a `PaymentsService` with its own pool and its own
/// simulator client, as two `tender serve` processes have) over the same pending payments resolve each
/// one once: one processor call per key after the lost one, one outcome, one event.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct ResolverTwoNodeTests {
    @Test func twoResolversResolveEachPendingPaymentOnce() throws {
        try Self.twoResolvers(prefix: "pay_two_resolvers", count: 16, keyless: false)
    }

    /// A pending payment without an Idempotency-Key (a row from before keys were required, or restored
    /// by hand): no key lease guards it, so the resolver's claim of the row itself must be won by one node.
    @Test func twoResolversResolveAPaymentWithoutAKeyOnce() throws {
        try Self.twoResolvers(prefix: "pay_two_keyless", count: 8, keyless: true)
    }

    private static func twoResolvers(prefix: String, count: Int, keyless: Bool) throws {
        // The simulator answers every call slowly, so both resolvers are inside a pass at the same time.
        var rules = SimulatorRules()
        rules.latencyMilliseconds = 40
        let h = try PaymentsHarness(prefix: prefix, rules: rules)
        defer { h.stop() }
        // Amounts ending in 08: the simulator charges, then loses the answer of the first call per key.
        var paymentIds: [String] = []
        for i in 0..<count {
            let s = try h.session(totalMinor: 1_008 + Int64(i) * 100)
            let response = try h.pay(s, token: try h.token(for: s), key: "\(prefix)-\(i)")
            try #require(response.status == 202, "\(response.text)")
            try #require(response.payment?["status"] as? String == "pending")
            paymentIds.append(try #require(response.payment?["id"] as? String))
        }
        for id in paymentIds { try #require(try h.simulatorCalls(paymentId: id) == 1) }
        if keyless {
            _ = try h.pool.execute("UPDATE payments SET idempotency_key = NULL WHERE payment_id = ANY($1::text[])",
                               [PGArray.text(paymentIds)])
        }

        // Node B: another pool on the same database, its own verifier, simulator client and subscriber.
        let poolB = PostgresPool(configuration: h.pool.configuration)
        defer { poolB.close() }
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [PaymentsHarness.authority.root], merchantKeys: h.merchantKeys,
                                               tokenAgeMaxSeconds: 300)
        let sinkB = RecordingSink()
        let nodeB = PaymentsService(pool: poolB, verifier: DecryptorTokenVerifier(decryptor: decryptor),
                                    processor: SimulatorProcessor(pool: poolB, rules: rules), subscribers: [sinkB],
                                    settings: PaymentsHarness.fastSettings, logger: .silent)
        // Both resolvers as `serve` runs them, started together.
        h.service.startResolver()
        nodeB.startResolver()
        let deadline = Date().addingTimeInterval(20)
        var pending: Int64 = -1
        while Date() < deadline {
            pending = try h.scalar("SELECT count(*)::bigint AS n FROM payments WHERE status = 'pending'")
            if pending == 0 { break }
            usleep(50_000)
        }
        h.service.stopResolver()
        nodeB.stopResolver()
        #expect(pending == 0)

        let resolvedByA = h.sink.count, resolvedByB = sinkB.count
        print("measure two resolvers (keyless \(keyless)): node A resolved \(resolvedByA), node B resolved \(resolvedByB)"
              + " of \(paymentIds.count)")
        // Each payment's outcome was recorded by exactly one node, once.
        #expect(resolvedByA + resolvedByB == paymentIds.count)
        let recorded = (h.sink.events + sinkB.events).compactMap { event -> String? in
            if case .paymentSucceeded(let succeeded) = event { return succeeded.paymentId }
            return nil
        }
        #expect(recorded.sorted() == paymentIds.sorted())
        for id in paymentIds {
            #expect(try h.get("/v1/payments/\(id)").json()["status"] as? String == "succeeded", "\(id)")
            // The lost call and one re-send with the same key: never a third, never a second charge.
            #expect(try h.simulatorCalls(paymentId: id) == 2, "\(id)")
            #expect(try h.simulatorCharges(paymentId: id) == 1, "\(id)")
            #expect(try h.scalar("SELECT count(*)::bigint AS n FROM events WHERE object_id = $1 AND event_type = 'payment.succeeded'",
                                 [id]) == 1, "\(id)")
        }
    }
}
