import Foundation
import HTTPServer
import Testing
@testable import TenderServer

/// A server with `TENDER_DEMO=on`: a sandbox written to a fresh data directory, trusted as the root,
/// and the sandbox merchant bootstrapped as `tender sandbox bootstrap` does.
final class DemoServer {
    let server: RunningServer
    let dataDirectory: String

    init(prefix: String) throws {
        dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("tender-demo-\(UUID().uuidString)").path
        _ = try SandboxCommands.writeSandbox(directory: dataDirectory + "/sandbox",
                                             merchantId: SandboxCommands.sandboxMerchantId, now: Date())
        server = try RunningServer(prefix: prefix, environment: [
            "TENDER_DEMO": "on", "TENDER_DATA_DIR": dataDirectory,
            "TENDER_APPLE_ROOTS": dataDirectory + "/sandbox/root.pem",
        ])
        let merchant = try Merchant.validated(merchantId: SandboxCommands.sandboxMerchantId, displayName: "Tender Sandbox",
                                              domains: ["localhost"], countryCode: "US", currencies: ["USD"])
        try server.app.merchants.add(merchant)
        try SandboxCommands.bootstrapSandboxKeys(configuration: server.app.configuration, pool: server.pool)
        try SandboxCommands.bootstrapDemoCoupon(pool: server.pool)
    }

    func stop() {
        server.stop()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

func jsonBody(_ object: Any) throws -> [UInt8] {
    [UInt8](try JSONSerialization.data(withJSONObject: object))
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct DemoRouteTests {
    @Test func pagesAndAssetsWithTheirHeaders() throws {
        let demo = try DemoServer(prefix: "web_pages")
        defer { demo.stop() }
        let client = try RawHTTPClient(port: demo.server.port)
        let pages = ["/tender.js": "text/javascript", "/tender-sheet.css": "text/css", "/demo/": "text/html",
                     "/demo/demo.js": "text/javascript", "/console/": "text/html", "/console/console.js": "text/javascript"]
        for (path, type) in pages.sorted(by: { $0.key < $1.key }) {
            let response = try client.request("GET", path)
            #expect(response.status == 200, "\(path)")
            #expect(response.header("Content-Type")?.hasPrefix(type) == true, "\(path)")
            #expect(response.header("Content-Security-Policy") == WebSecurityHeaders.contentSecurityPolicy, "\(path)")
            #expect(response.header("X-Content-Type-Options") == "nosniff", "\(path)")
            let etag = try #require(response.header("ETag"))
            let cached = try client.request("GET", path, headers: [("If-None-Match", etag)])
            #expect(cached.status == 304, "\(path)")
        }
        #expect(try client.request("GET", "/tender.js").header("Access-Control-Allow-Origin") == "*")
        let redirect = try client.request("GET", "/demo")
        #expect(redirect.status == 308)
        #expect(redirect.header("Location") == "/demo/")
        // Only the embedded paths exist: nothing maps to the file system.
        for path in ["/demo/../tender.js", "/demo/%2e%2e/Package.swift", "/console/../../etc/passwd", "/demo/index.html",
                     "/demo/demo.js.map", "/web/tender.js"] {
            let response = try client.request("GET", path)
            #expect(response.status == 404 || response.status == 400, "\(path) answered \(response.status)")
        }
    }

    @Test func demoAbsentByDefaultConsoleSwitchable() throws {
        let plain = try RunningServer(prefix: "web_off")
        defer { plain.stop() }
        let client = try RawHTTPClient(port: plain.port)
        #expect(try client.request("GET", "/demo/").status == 404)
        #expect(try client.request("GET", "/demo/api/catalog").status == 404)
        #expect(try client.request("POST", "/demo/api/sandbox-token", body: Array("{}".utf8)).status == 404)
        #expect(try client.request("POST", "/demo/api/checkout-sessions", body: Array("{}".utf8)).status == 404)
        #expect(try client.request("GET", "/tender.js").status == 200)
        #expect(try client.request("GET", "/console/").status == 200)
        let noConsole = try RunningServer(prefix: "web_noconsole", environment: ["TENDER_CONSOLE": "off"])
        defer { noConsole.stop() }
        #expect(try RawHTTPClient(port: noConsole.port).request("GET", "/console/").status == 404)
    }

    /// The demo's whole server side: a session from SKUs, a sandbox token for it, the payment through
    /// the real payments endpoint.
    @Test func sessionTokenAndPayment() throws {
        let demo = try DemoServer(prefix: "web_demo_pay")
        defer { demo.stop() }
        let client = try RawHTTPClient(port: demo.server.port)
        let created = try client.request("POST", "/demo/api/checkout-sessions",
                                         body: try jsonBody(["items": [["sku": "tee", "quantity": 2]]]))
        #expect(created.status == 201)
        #expect(created.header("X-Content-Type-Options") == "nosniff")
        let session = try created.json()
        // 2 × 25.00 + standard shipping 4.99.
        #expect(session["totalMinor"] as? Int == 5_499)
        #expect(session["apiVersion"] as? Int == DemoCatalog.apiVersion)
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)

        let coupon = try client.request("POST", "/v1/checkout-sessions/\(id)/coupon-code",
                                        headers: [("Authorization", "Bearer \(secret)")],
                                        body: try jsonBody(["couponCode": DemoCatalog.couponCode]))
        #expect(coupon.status == 200)
        #expect((try coupon.json()["errors"] as? [Any])?.isEmpty == true, "the bootstrapped coupon is not accepted")

        let token = try client.request("POST", "/demo/api/sandbox-token", headers: [("Authorization", "Bearer \(secret)")],
                                       body: try jsonBody(["sessionId": id]))
        #expect(token.status == 200)
        let tokenObject = try JSONSerialization.jsonObject(with: Data(token.body))
        let paid = try client.request("POST", "/v1/checkout-sessions/\(id)/payments",
                                      headers: [("Authorization", "Bearer \(secret)"), ("Idempotency-Key", "demo-1")],
                                      body: try jsonBody(["token": tokenObject]))
        #expect(paid.status == 200, "\(paid.text)")
        let payment = try #require(try paid.json()["payment"] as? [String: Any])
        #expect(payment["status"] as? String == "succeeded")
        // 10 % off the 50.00 of goods (the coupon's percentage, worked out by hand), shipping unchanged.
        #expect(payment["amountMinor"] as? Int == 5_499 - 500)
    }

    @Test func sandboxTokenRefusals() throws {
        let demo = try DemoServer(prefix: "web_demo_refuse")
        defer { demo.stop() }
        let client = try RawHTTPClient(port: demo.server.port)
        let first = try client.request("POST", "/demo/api/checkout-sessions", body: try jsonBody(["items": [["sku": "mug",
            "quantity": 1]]])).json()
        let second = try client.request("POST", "/demo/api/checkout-sessions", body: try jsonBody(["items": [["sku": "mug",
            "quantity": 1]]])).json()
        let id = try #require(first["id"] as? String)
        let otherSecret = try #require(second["clientSecret"] as? String)
        let secret = try #require(first["clientSecret"] as? String)

        let anonymous = try client.request("POST", "/demo/api/sandbox-token", body: try jsonBody(["sessionId": id]))
        #expect(anonymous.status == 401)
        #expect(try anonymous.json()["code"] as? String == "unauthorized")
        let foreign = try client.request("POST", "/demo/api/sandbox-token", headers: [("Authorization", "Bearer \(otherSecret)")],
                                         body: try jsonBody(["sessionId": id]))
        #expect(foreign.status == 401)
        let extra = try client.request("POST", "/demo/api/sandbox-token", headers: [("Authorization", "Bearer \(secret)")],
                                       body: try jsonBody(["sessionId": id, "amount": "0.01"]))
        #expect(extra.status == 400)
        #expect(try extra.json()["code"] as? String == "unknown_field")

        // Another merchant's session: its own key pays it, the sandbox mints nothing for it.
        let (_, key) = try demo.server.merchantWithKey()
        let cart = try jsonBody(["currencyCode": "USD", "lineItems": [["label": "Thing", "amount": "1.00"]]])
        let theirs = try client.request("POST", "/v1/checkout-sessions", headers: [("Authorization", "Bearer \(key)")], body: cart).json()
        let theirId = try #require(theirs["id"] as? String)
        let theirSecret = try #require(theirs["clientSecret"] as? String)
        let refused = try client.request("POST", "/demo/api/sandbox-token", headers: [("Authorization", "Bearer \(theirSecret)")],
                                         body: try jsonBody(["sessionId": theirId]))
        #expect(refused.status == 403)
        #expect(try refused.json()["code"] as? String == "not_sandbox_merchant")
        // Nor does the sandbox answer merchant validation for it.
        let validation = try client.request("POST", "/v1/checkout-sessions/\(theirId)/merchant-validation",
                                            headers: [("Authorization", "Bearer \(theirSecret)")],
                                            body: try jsonBody(["validationURL": DemoSandbox.validationURL]))
        #expect(validation.status >= 400, "the sandbox validated another merchant")
    }

    @Test func demoOrderValidation() throws {
        let demo = try DemoServer(prefix: "web_demo_order")
        defer { demo.stop() }
        let client = try RawHTTPClient(port: demo.server.port)
        let unknown = try client.request("POST", "/demo/api/checkout-sessions", body: try jsonBody(["items": [["sku": "lamp",
            "quantity": 1]]]))
        #expect(unknown.status == 422)
        #expect(try unknown.json()["code"] as? String == "unknown_sku")
        #expect(unknown.header("X-Content-Type-Options") == "nosniff")
        #expect(unknown.header("Content-Type")?.hasPrefix("application/problem+json") == true)
        // A page cannot send a price: the store's catalog sets it.
        let priced = try client.request("POST", "/demo/api/checkout-sessions",
                                        body: try jsonBody(["items": [["sku": "mug", "quantity": 1, "amount": "0.01"]]]))
        #expect(priced.status == 400)
        #expect(try priced.json()["code"] as? String == "unknown_field")

        let catalog = try client.request("GET", "/demo/api/catalog")
        #expect(catalog.status == 200)
        let products = try #require(try catalog.json()["products"] as? [[String: Any]])
        #expect(products.map { $0["sku"] as? String } == ["mug", "tee", "stickers"])
        #expect(products.first?["amount"] as? String == "12.00")

        let session = try client.request("POST", "/demo/api/checkout-sessions", body: try jsonBody(["items": [["sku": "mug",
            "quantity": 1]]])).json()
        let id = try #require(session["id"] as? String)
        let secret = try #require(session["clientSecret"] as? String)
        let validated = try client.request("POST", "/v1/checkout-sessions/\(id)/merchant-validation",
                                           headers: [("Authorization", "Bearer \(secret)")],
                                           body: try jsonBody(["validationURL": DemoSandbox.validationURL]))
        #expect(validated.status == 200)
        #expect((try validated.json()["merchantSessionIdentifier"] as? String)?.hasPrefix("SSH") == true)
    }
}
