import Foundation
import Postgres
import Testing
@testable import TenderServer

/// Updates on a version this process committed go the one-round-trip way (`updateFromCachedVersion`);
/// whenever the row no longer matches, the locked way answers, exactly as it would have alone.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CachedUpdateTests {
    private func count(_ f: CheckoutFixture, _ path: String) -> Int {
        let line = f.server.app.metrics.render().split(separator: "\n")
            .first { $0.hasPrefix("tender_checkout_updates_total{path=\"\(path)\"}") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? 0
    }

    private let express: [String: Any] = ["shippingMethod": ["identifier": "express"]]
    private let standard: [String: Any] = ["shippingMethod": ["identifier": "standard"]]

    @Test func laterUpdatesGoTheCachedWayAndAnswerAsTheLockedWayDoes() throws {
        let f = try CheckoutFixture("co_cached")
        defer { f.stop() }
        let a = try #require(try f.createSession(usdCart())["id"] as? String)
        let b = try #require(try f.createSession(usdCart())["id"] as? String)
        let first = try f.call("POST", "/v1/checkout-sessions/\(a)/shipping-method", express)
        #expect(first.status == 200)
        #expect((count(f, "locked"), count(f, "cached")) == (1, 0))
        let cached = try f.call("POST", "/v1/checkout-sessions/\(a)/shipping-method", standard)
        #expect(cached.status == 200)
        #expect(cached.header("Checkout-Session-Version") == "3")
        #expect((count(f, "locked"), count(f, "cached")) == (1, 1))
        #expect(object(try cached.json()["newTotal"])["amount"] as? String == "19.98")
        #expect(try f.versions(a) == [1, 2, 3])
        let row = try #require(try f.query("SELECT version, total_minor FROM checkout_sessions WHERE session_id = $1", [a]).first)
        #expect(try row.decode("version", as: Int.self) == 3)
        #expect(try row.decode("total_minor", as: Int64.self) == 1998)

        // Session b reaches the same state, then "another node" stores an identical version 3 behind this
        // process: the cached way finds the row moved on, writes nothing, and the locked way answers.
        _ = try f.call("POST", "/v1/checkout-sessions/\(b)/shipping-method", express)
        _ = try f.query("""
            WITH v AS (INSERT INTO checkout_session_versions (session_id, version, event, total_minor, checkout, input_sha256, response)
                       SELECT session_id, 3, event, total_minor, checkout, input_sha256, response
                         FROM checkout_session_versions WHERE session_id = $1 AND version = 2)
            UPDATE checkout_sessions SET version = 3 WHERE session_id = $1
            """, [b])
        let locked = try f.call("POST", "/v1/checkout-sessions/\(b)/shipping-method", standard)
        #expect(locked.status == 200)
        #expect(locked.header("Checkout-Session-Version") == "4")
        #expect((count(f, "locked"), count(f, "cached")) == (3, 1))
        #expect(locked.body == cached.body, "the same state gives the same answer either way")
        #expect(try f.versions(b) == [1, 2, 3, 4])
        // A repeat of the latest event and body answers from the stored version, adding none.
        let repeated = try f.call("POST", "/v1/checkout-sessions/\(a)/shipping-method", standard)
        #expect(repeated.body == cached.body)
        #expect(repeated.header("Checkout-Session-Version") == "3")
        #expect(try f.versions(a) == [1, 2, 3])
    }

    @Test func theCachedWayRefusesWhatTheRowNoLongerAccepts() throws {
        let f = try CheckoutFixture("co_cached_refuse")
        defer { f.stop() }
        var ids: [String] = []
        for _ in 0..<2 {
            let id = try #require(try f.createSession(usdCart())["id"] as? String)
            #expect(try f.call("POST", "/v1/checkout-sessions/\(id)/shipping-method", express).status == 200)
            ids.append(id)
        }
        let (paid, expired) = (ids[0], ids[1])
        _ = try f.query("UPDATE checkout_sessions SET status = 'paid' WHERE session_id = $1", [paid])
        let conflict = try f.call("POST", "/v1/checkout-sessions/\(paid)/shipping-method", standard)
        #expect(conflict.status == 409)
        #expect(try conflict.json()["code"] as? String == "session_not_open")
        _ = try f.query("UPDATE checkout_sessions SET expires_at = now() - interval '1 second' WHERE session_id = $1", [expired])
        let gone = try f.call("POST", "/v1/checkout-sessions/\(expired)/shipping-method", standard)
        #expect(gone.status == 410)
        #expect(try gone.json()["code"] as? String == "session_expired")
        let status: String = try #require(try f.query("SELECT status FROM checkout_sessions WHERE session_id = $1",
                                                      [expired]).first).decode("status")
        #expect(status == "expired")
        #expect(try f.versions(paid) == [1, 2])
        #expect(try f.versions(expired) == [1, 2])
        #expect(count(f, "cached") == 0)
    }

    @Test func theCachedWayChecksTheCallerAndTheBody() throws {
        let f = try CheckoutFixture("co_cached_auth")
        defer { f.stop() }
        let session = try f.createSession(usdCart())
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)
        let path = "/v1/checkout-sessions/\(id)/shipping-method"
        #expect(try f.call("POST", path, express, bearer: secret).status == 200)
        #expect(try f.call("POST", path, standard, bearer: secret + "x").status == 401)
        #expect(try f.call("POST", path, standard, bearer: try f.otherMerchantKey()).status == 404)
        // A recalculation refusal is answered by the locked way, as before (rule 32).
        let unknown = try f.call("POST", path, ["shippingMethod": ["identifier": "teleport"]], bearer: secret)
        #expect(unknown.status == 422)
        #expect(try unknown.json()["code"] as? String == "shipping_method_unknown")
        #expect(try f.versions(id) == [1, 2])
        #expect(count(f, "cached") == 0)
        #expect(try f.call("POST", path, standard, bearer: secret).status == 200)
        #expect(count(f, "cached") == 1)
        #expect(try f.versions(id) == [1, 2, 3])
    }
}
