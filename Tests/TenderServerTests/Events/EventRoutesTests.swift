import Foundation
import Postgres
import Testing
@testable import TenderServer

/// `GET /v1/events` and `GET /v1/events/{id}` (CONTRACT §6): merchant-scoped, newest first, paged like
/// the payments list, bodies verbatim.
@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct EventRoutesTests {
    struct Resource: Encodable { let id: String; let n: Int }

    /// Appends events of `types` for `merchantId`, oldest first; returns their ids in that order.
    static func append(_ s: RunningServer, merchantId: String, _ types: [EventType]) throws -> [String] {
        try types.enumerated().map { index, type in
            try s.pool.transaction { conn in
                try EventOutbox.append(type, objectId: "obj_\(index)", object: Resource(id: "obj_\(index)", n: index),
                                       merchantId: merchantId, on: conn, now: Date(timeIntervalSince1970: 1_790_000_000 + Double(index)))
            }
        }
    }

    static func get(_ s: RunningServer, _ key: String, _ path: String) throws -> RawResponse {
        try RawHTTPClient(port: s.port).request("GET", path, headers: [("Authorization", "Bearer \(key)")])
    }

    static func ids(_ response: RawResponse) -> [String] {
        (jsonObject(response.body)["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    @Test func pagesNewestFirstWithHasMoreAndFiltersByType() throws {
        let s = try RunningServer(prefix: "ev_list")
        defer { s.stop() }
        let (merchant, key) = try s.merchantWithKey()
        let (other, _) = try s.merchantWithKey()
        let ids = try Self.append(s, merchantId: merchant.merchantId,
                                  [.paymentSucceeded, .checkoutSessionExpired, .paymentSucceeded, .refundSucceeded, .paymentSucceeded])
        _ = try Self.append(s, merchantId: other.merchantId, [.paymentSucceeded])
        let newest = Array(ids.reversed())

        let first = try Self.get(s, key, "/v1/events?limit=2")
        #expect(first.status == 200)
        #expect(first.header("Content-Type") == "application/json")
        #expect(Self.ids(first) == Array(newest[0..<2]))
        #expect(jsonObject(first.body)["hasMore"] as? Bool == true)
        let second = try Self.get(s, key, "/v1/events?limit=2&startingAfter=\(newest[1])")
        #expect(Self.ids(second) == Array(newest[2..<4]))
        #expect(jsonObject(second.body)["hasMore"] as? Bool == true)
        let last = try Self.get(s, key, "/v1/events?limit=2&startingAfter=\(newest[3])")
        #expect(Self.ids(last) == [newest[4]])
        #expect(jsonObject(last.body)["hasMore"] as? Bool == false)
        let all = try Self.get(s, key, "/v1/events")
        #expect(Self.ids(all) == newest)
        #expect(jsonObject(all.body)["hasMore"] as? Bool == false)

        // The body is the stored event bytes verbatim, in the list and alone.
        let stored = try StoredEvent.all(s.pool).filter { ids.contains($0.eventId) }.reversed().map(\.body)
        #expect(all.text == #"{"data":["# + stored.joined(separator: ",") + #"],"hasMore":false}"#)
        let one = try Self.get(s, key, "/v1/events/\(ids[1])")
        #expect(one.status == 200)
        #expect(one.text == stored[3])
        #expect(jsonObject(one.body)["type"] as? String == "checkout_session.expired")

        let payments = try Self.get(s, key, "/v1/events?type=payment.succeeded")
        #expect(Self.ids(payments) == [ids[4], ids[2], ids[0]])
        let paged = try Self.get(s, key, "/v1/events?type=payment.succeeded&limit=1&startingAfter=\(ids[4])")
        #expect(Self.ids(paged) == [ids[2]])
        #expect(jsonObject(paged.body)["hasMore"] as? Bool == true)
        let none = try Self.get(s, key, "/v1/events?type=settlement_report.completed")
        #expect(none.text == #"{"data":[],"hasMore":false}"#)
    }

    @Test func badParametersAreInvalidQueryNamingTheField() throws {
        let s = try RunningServer(prefix: "ev_bad")
        defer { s.stop() }
        let (merchant, key) = try s.merchantWithKey()
        let (other, _) = try s.merchantWithKey()
        _ = try Self.append(s, merchantId: merchant.merchantId, [.paymentSucceeded])
        let foreign = try Self.append(s, merchantId: other.merchantId, [.paymentSucceeded])[0]
        let cases: [(String, String)] = [
            ("limit=0", "limit"), ("limit=101", "limit"), ("limit=abc", "limit"), ("limit=", "limit"),
            ("type=payment.unknown", "type"), ("type=", "type"),
            ("startingAfter=evt_nope", "startingAfter"), ("startingAfter=\(foreign)", "startingAfter"),
            ("startingAfter=evt_\(String(repeating: "a", count: 24))", "startingAfter"),
        ]
        for (query, field) in cases {
            let r = try Self.get(s, key, "/v1/events?\(query)")
            #expect(r.status == 400, "\(query)")
            #expect(r.header("Content-Type") == "application/problem+json")
            let problem = jsonObject(r.body)
            #expect(problem["code"] as? String == "invalid_query", "\(query)")
            #expect((problem["errors"] as? [[String: Any]])?.first?["field"] as? String == field, "\(query)")
        }
        #expect(try Self.get(s, key, "/v1/events?limit=1").status == 200)
        #expect(try Self.get(s, key, "/v1/events?limit=100").status == 200)
    }

    @Test func anotherMerchantsEventIsNotFoundAndAKeyIsNeeded() throws {
        let s = try RunningServer(prefix: "ev_scope")
        defer { s.stop() }
        let (_, key) = try s.merchantWithKey()
        let (other, otherKey) = try s.merchantWithKey()
        let foreign = try Self.append(s, merchantId: other.merchantId, [.refundFailed])[0]
        for path in ["/v1/events/\(foreign)", "/v1/events/evt_\(String(repeating: "0", count: 24))", "/v1/events/nope"] {
            let r = try Self.get(s, key, path)
            #expect(r.status == 404, "\(path)")
            #expect(jsonObject(r.body)["code"] as? String == "event_not_found")
        }
        #expect(try Self.get(s, otherKey, "/v1/events/\(foreign)").status == 200)
        #expect(Self.ids(try Self.get(s, key, "/v1/events")).isEmpty)
        let anonymous = try RawHTTPClient(port: s.port).request("GET", "/v1/events")
        #expect(anonymous.status == 401)
        #expect(jsonObject(anonymous.body)["code"] as? String == "unauthorized")
    }
}
