import Crypto
import Foundation
import Postgres
import Testing
@testable import TenderServer

/// Fan-out, leases and the finance doorbell against a real PostgreSQL (the delivery HTTP side is covered
/// end to end by scripts/webhooks-test.sh).
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct WebhookStoreTests {
    let pool: PostgresPool
    let merchantId = "merchant.webhooks.test"
    let box = WebhookSecretBox(masterKey: { SecretBytes(Array(repeating: 9, count: 32)) })
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    init() throws {
        pool = try TestEnvironment.migratedPool("webhooks")
        try MerchantStore(pool: pool).add(try Merchant.validated(merchantId: merchantId, displayName: "Hooks",
                                                                  domains: ["hooks.test"], countryCode: "US", currencies: ["USD"]))
    }

    func endpoint(events: [String], frequency: FinanceFrequency? = nil) throws -> String {
        let id = WebhookEndpointStore.newEndpointId()
        let sealed = try box.seal(WebhookSecretBox.newSecret(), endpointId: id, merchantId: merchantId, version: 1)
        var changes = WebhookEndpointChanges()
        changes.url = "https://hooks.example.com/\(id)"
        changes.enabledEvents = events
        changes.financeFrequency = frequency
        _ = try pool.transaction {
            try WebhookEndpointStore.create(merchantId: merchantId, endpointId: id, changes: changes, sealed: sealed, on: $0, now: now)
        }
        return id
    }

    struct Object: Encodable { let id: String }

    func emit(_ type: EventType = .paymentSucceeded) throws -> String {
        try pool.transaction {
            try EventOutbox.append(type, objectId: "pay_1", object: Object(id: "pay_1"), merchantId: merchantId, on: $0, now: now)
        }
    }

    func deliveries(_ endpointId: String) throws -> Int64 {
        try pool.query("SELECT count(*)::bigint AS n FROM webhook_deliveries WHERE endpoint_id = $1", [endpointId])
            .first?.decode("n") ?? -1
    }

    @Test func fanOutCommitsWithTheEventOnlyForSubscribers() throws {
        let all = try endpoint(events: ["*"])
        let refunds = try endpoint(events: ["refund.failed"])
        _ = try emit()
        #expect(try deliveries(all) == 1 && deliveries(refunds) == 0)
        // A rolled-back change leaves neither its event nor a delivery.
        struct Rollback: Error {}
        #expect(throws: Rollback.self) {
            try pool.transaction { conn in
                _ = try EventOutbox.append(.refundFailed, objectId: "re_1", object: Object(id: "re_1"), merchantId: merchantId,
                                           on: conn, now: now)
                throw Rollback()
            }
        }
        #expect(try deliveries(refunds) == 0)
        _ = try emit(.refundFailed)
        #expect(try deliveries(all) == 2 && deliveries(refunds) == 1)
    }

    @Test func aLeaseHidesAClaimUntilItExpires() throws {
        let id = try endpoint(events: ["payment.succeeded"])
        let eventId = try emit()
        let lease = now.addingTimeInterval(60)
        let first = try pool.transaction { try WebhookDeliveryStore.claim(now: now, limit: 10, leaseUntil: lease, on: $0) }
        #expect(first.map(\.eventId) == [eventId] && first.first?.attempt == 1 && first.first?.endpointId == id)
        // Another worker (or node) sees nothing while the lease runs...
        #expect(try pool.transaction { try WebhookDeliveryStore.claim(now: now, limit: 10, leaseUntil: lease, on: $0) }.isEmpty)
        // ...and the delivery again once it has run out (the first worker died mid-delivery).
        let again = try pool.transaction {
            try WebhookDeliveryStore.claim(now: lease.addingTimeInterval(1), limit: 10, leaseUntil: lease.addingTimeInterval(61), on: $0)
        }
        #expect(again.first?.attempt == 2)
        // The dead worker's late result no longer moves the delivery; the live one's does.
        let ok = WebhookAttemptResult(httpStatus: 200, errorCode: nil, durationMilliseconds: 3, retryAfter: nil)
        let stale = try #require(first.first)
        try pool.transaction { try WebhookDeliveryStore.record(stale, result: ok, next: nil, now: now, on: $0) }
        #expect(try pool.query("SELECT state FROM webhook_deliveries").first?.decode("state", as: String.self) == "pending")
        try pool.transaction { try WebhookDeliveryStore.record(try #require(again.first), result: ok, next: nil, now: now, on: $0) }
        #expect(try pool.query("SELECT state FROM webhook_deliveries").first?.decode("state", as: String.self) == "delivered")
        #expect(try pool.query("SELECT count(*)::bigint AS n FROM webhook_delivery_attempts").first?.decode("n", as: Int64.self) == 2)
    }

    @Test func secretsAreSealedAndBoundToTheirEndpoint() throws {
        let id = try endpoint(events: ["*"])
        let sealed: [UInt8] = try #require(try pool.query("SELECT secret_sealed FROM webhook_endpoints").first?.decode("secret_sealed"))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("whsec_"))
        #expect(try box.key(sealed, endpointId: id, merchantId: merchantId, version: 1).count == WebhookSecret.keyBytes)
        #expect(throws: TenderError.self) { try box.key(sealed, endpointId: id, merchantId: merchantId, version: 2) }
        #expect(throws: TenderError.self) { try box.key(sealed, endpointId: "we_other", merchantId: merchantId, version: 1) }
    }

    func feed(_ positions: ClosedRange<Int64>, account: String) throws {
        for position in positions {
            _ = try pool.execute("""
                INSERT INTO finance_feed (position, change_seq, merchant_id, scope_kind, scope_id, epoch, xid, op, entity_id)
                VALUES ($1, $1, $2, 'transactions', $3::uuid, 1, '1'::xid8, 'insert', gen_random_uuid())
                """, [position, merchantId, account])
        }
    }

    struct Doorbell: Decodable {
        struct DataField: Decodable { struct Object: Decodable { let accountIDs: [String]; let changes: Int }; let object: Object }
        let type: String
        let data: DataField
    }

    func doorbell(_ eventId: String) throws -> Doorbell {
        let body: String = try #require(try pool.query("SELECT body FROM events WHERE event_id = $1", [eventId]).first?.decode("body"))
        return try JSONDecoder().decode(Doorbell.self, from: Data(body.utf8))
    }

    @Test func financeDoorbellRingsAtMostOncePerInterval() throws {
        let account = "7d3f4a52-2b0e-4c1a-9d6e-0a1b2c3d4e5f"
        try feed(1...2, account: account)  // before the endpoint: not announced
        let id = try endpoint(events: ["finance.changes_available"], frequency: .hourly)
        let silent = try endpoint(events: ["payment.succeeded"], frequency: .hourly)
        #expect(try WebhookDeliveryStore.ringFinanceDoorbells(now: now, pool: pool).isEmpty)
        try feed(3...5, account: account)
        let first = try WebhookDeliveryStore.ringFinanceDoorbells(now: now, pool: pool)
        #expect(first.count == 1)
        let bell = try doorbell(try #require(first.first))
        #expect(bell.type == "finance.changes_available" && bell.data.object.changes == 3 && bell.data.object.accountIDs == [account])
        #expect(try deliveries(id) == 1 && deliveries(silent) == 0)
        // More changes within the hour wait; after it, one doorbell covers them all.
        try feed(6...7, account: account)
        #expect(try WebhookDeliveryStore.ringFinanceDoorbells(now: now.addingTimeInterval(1_800), pool: pool).isEmpty)
        let second = try WebhookDeliveryStore.ringFinanceDoorbells(now: now.addingTimeInterval(3_600), pool: pool)
        #expect(try doorbell(try #require(second.first)).data.object.changes == 2)
        #expect(try deliveries(id) == 2)
        // Nothing new: no doorbell, however long after.
        #expect(try WebhookDeliveryStore.ringFinanceDoorbells(now: now.addingTimeInterval(90_000), pool: pool).isEmpty)
    }
}
