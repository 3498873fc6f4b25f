import Foundation
import Testing
@testable import TenderServer

/// The attack found against Tender: a checkout-session POST whose body is a complete coupon POST, with a
/// Content-Length that libmicrohttpd did not recognise. It must answer one 400, close, and create nothing.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct SmugglingDemonstrationTests {
    @Test(arguments: ["Content-Length : ", "Content-Length\t: "])
    func aCouponHiddenInACheckoutBodyIsNeverCreated(header: String) throws {
        let f = try CheckoutFixture("edge_smuggle")
        defer { f.stop() }
        let coupon = Array(#"{"code":"SMUGGLED","percentOff":"90"}"#.utf8)
        let hidden = Array(("POST /v1/coupons HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(f.key)\r\n"
                            + "Content-Type: application/json\r\nContent-Length: \(coupon.count)\r\n\r\n").utf8) + coupon
        let outer = Array(("POST /v1/checkout-sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(f.key)\r\n"
                           + "Content-Type: application/json\r\n\(header)\(hidden.count)\r\n\r\n").utf8) + hidden
        let client = try f.client()
        try client.send(outer)
        let response = try client.readResponse()
        #expect(response.status == 400)
        #expect(try response.json()["code"] as? String == "malformed_header")
        #expect(response.header("Connection")?.lowercased() == "close")
        // Nothing follows the one answer: the connection is closed.
        #expect(throws: (any Error).self) { _ = try client.readResponse() }
        // A normal request on a new connection is served, and no coupon exists.
        let list = try f.call("GET", "/v1/coupons")
        #expect(list.status == 200)
        #expect(objects(try list.json()["coupons"]).isEmpty)
        let stored: Int64 = try f.query("SELECT count(*) AS n FROM coupons WHERE merchant_id = $1", [f.merchant.merchantId])
            .rows[0].decode("n")
        #expect(stored == 0)
    }
}
