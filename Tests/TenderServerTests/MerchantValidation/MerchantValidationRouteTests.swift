import Foundation
import HTTPClient
import HTTPServer
import Observability
import Postgres
import Testing
@testable import TenderServer

/// Merchant validation end to end: Tender → local mutual-TLS gateway (docs/apple-pay-rules.md, rules 40–46;
/// docs/reliability-security.md, reviewer's test 16).
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"), .serialized)
struct MerchantValidationRouteTests {
    typealias S = MerchantValidationServer

    @Test func successReturnsApplesBodyByteForByteAndSendsExactlyFourFields() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "ok")
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let before = try gateway.snapshot().requests.count

        let response = try s.validate(session.id, bearer: key, body: S.body())
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.header("Cache-Control") == "no-store")

        let seen = try gateway.snapshot().requests
        #expect(seen.count == before + 1)
        let request = try #require(seen.last)
        #expect(request.mode == "ok")
        #expect(request.method == "POST")
        #expect(request.path == "/paymentservices/paymentSession")
        #expect(request.contentType == "application/json")
        #expect(request.clientSubject.contains("userId=merchant.com.tender.shop"))
        let sent = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(Set(sent.keys) == ["merchantIdentifier", "displayName", "initiative", "initiativeContext"])
        #expect(sent["merchantIdentifier"] as? String == S.merchantId)
        #expect(sent["displayName"] as? String == "Tender Shop")
        #expect(sent["initiative"] as? String == "web")
        #expect(sent["initiativeContext"] as? String == "shop.tender.test")
        // Compact, no extra members or whitespace.
        #expect(request.body.count == Array((#"{"displayName":"Tender Shop","initiative":"web","#
            + #""initiativeContext":"shop.tender.test","merchantIdentifier":"merchant.com.tender.shop"}"#).utf8).count)

        // The gateway's answer (see SESSION in the script) has odd spacing, a newline and a \u escape;
        // any re-encoding would change these bytes.
        let expected = #"{"epochTimestamp":1700000000000, "expiresAt" : 1700003600000,"# + "\n"
            + #" "merchantSessionIdentifier":"SSH1A2B\u00e9C3","nonce":"5e1f0a2b","merchantIdentifier":"AB12CD","#
            + #""domainName":"shop.tender.test","displayName":"Tender Shop","signature":"MIAGCSqGSIb3DQEHAqCAMIAC","#
            + #""operationalAnalyticsIdentifier":"Tender Shop:AB12CD","retries":0, "pspId":"AB12CD"}"#
        #expect(response.body == Array(expected.utf8))
        #expect(s.app.metrics.render().contains(#"tender_merchant_validation_total{outcome="succeeded"} 1"#))
    }

    @Test func clientSecretAuthorizesAndEveryCallIsAFreshRequest() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "ok")
        defer { s.stop() }
        _ = try s.merchant()
        let session = try s.session()
        let before = try gateway.snapshot()
        let first = try s.validate(session.id, bearer: session.clientSecret, body: S.body())
        let second = try s.validate(session.id, bearer: session.clientSecret, body: S.body())
        #expect(first.status == 200)
        #expect(second.status == 200)
        let after = try gateway.snapshot()
        // Rule 46: no cached session; two calls are two requests on two connections.
        #expect(after.requests.count == before.requests.count + 2)
        #expect((after.accepts["ok"] ?? 0) == (before.accepts["ok"] ?? 0) + 2)
    }

    @Test func initiativeContextMustBeARegisteredDomain() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "ok")
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let chosen = try s.validate(session.id, bearer: key, body: S.body(initiativeContext: "WWW.shop.tender.test"))
        #expect(chosen.status == 200)
        let sent = try #require(try gateway.snapshot().requests.last)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(sent.body)) as? [String: Any])
        #expect(object["initiativeContext"] as? String == "www.shop.tender.test")

        let attempts = s.service.connectAttemptCount
        let foreign = try s.validate(session.id, bearer: key, body: S.body(initiativeContext: "evil.test"))
        #expect(foreign.status == 400)
        #expect(try foreign.json()["code"] as? String == "initiative_context_invalid")
        #expect(s.service.connectAttemptCount == attempts)
    }

    @Test func merchantWithoutIdentityIs409WithoutConnecting() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "ok", identityFiles: nil)
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let accepts = try gateway.totalAccepts()
        let response = try s.validate(session.id, bearer: key, body: S.body())
        #expect(response.status == 409)
        #expect(try response.json()["code"] as? String == "merchant_identity_missing")
        #expect(s.service.connectAttemptCount == 0)
        #expect(try gateway.totalAccepts() == accepts)
    }

    @Test(arguments: ["refuse417", "error500"])
    func gatewayErrorIs502AndApplesMessageIsLoggedNotForwarded(mode: String) throws {
        let s = try S(mode: mode)
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let response = try s.validate(session.id, bearer: key, body: S.body())
        #expect(response.status == 502)
        #expect(response.header("Content-Type")?.hasPrefix("application/problem+json") == true)
        #expect(try response.json()["code"] as? String == "merchant_validation_failed")
        #expect(!response.text.contains("statusMessage"))
        #expect(!response.text.contains("Payment Services Exception"))
        #expect(!response.text.contains("Internal Error"))
        let expectedCode = mode == "refuse417" ? "417" : "500"
        #expect(s.log.text.contains(#""apple_status_code":"\#(expectedCode)""#))
        if mode == "refuse417" {
            #expect(s.log.text.contains("not registered for domain=shop.tender.test"))
        }
    }

    @Test func redirectIsNotFollowed() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "redirect")
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let before = try gateway.snapshot()
        let response = try s.validate(session.id, bearer: key, body: S.body())
        #expect(response.status == 502)
        #expect(try response.json()["code"] as? String == "merchant_validation_failed")
        let after = try gateway.snapshot()
        // The Location points at the "ok" gateway: following it would add a request there.
        #expect(after.requests.filter { $0.mode == "ok" }.count == before.requests.filter { $0.mode == "ok" }.count)
        #expect(after.requests.filter { $0.mode == "redirect" }.count
                == before.requests.filter { $0.mode == "redirect" }.count + 1)
        #expect(s.log.text.contains(#""http_status":"302""#))
    }

    @Test func silentGatewayIs504WithinTheHardTimeout() throws {
        let s = try S(mode: "silent", totalTimeoutMilliseconds: 1_500)
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let started = Date()
        let response = try s.validate(session.id, bearer: key, body: S.body())
        let elapsed = Date().timeIntervalSince(started)
        #expect(response.status == 504)
        #expect(try response.json()["code"] as? String == "merchant_validation_timeout")
        #expect(elapsed >= 1.4)
        #expect(elapsed < 4.0)
    }

    @Test func identityTheGatewayDoesNotTrustIsTLSFailure() throws {
        let s = try S(mode: "ok", identityFiles: ("rogue-identity.pem", "rogue-identity.key"))
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let response = try s.validate(session.id, bearer: key, body: S.body())
        #expect(response.status == 502)
        #expect(try response.json()["code"] as? String == "merchant_validation_tls_failed")
    }

    @Test func nonObjectAnswerIsRefused() throws {
        let s = try S(mode: "notobject")
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let response = try s.validate(session.id, bearer: key, body: S.body())
        #expect(response.status == 502)
        #expect(try response.json()["code"] as? String == "merchant_validation_invalid_response")
    }

    /// Reviewer's test 16: every URL below is refused with no outbound connection (connect hook = 0,
    /// gateway accepts unchanged). The allow-list holds only the fake gateway's host.
    static let ssrfCases: [(name: String, url: String, reason: String)] = [
        ("plain http", "http://apple-pay-gateway.test/paymentservices/paymentSession", "scheme_not_https"),
        ("other host", "https://apple-pay-gateway.apple.com/paymentservices/paymentSession", "host_not_allowed"),
        ("suffix trick", "https://apple-pay-gateway.test.evil.test/paymentservices/paymentSession", "host_not_allowed"),
        ("prefix trick", "https://evilapple-pay-gateway.test/paymentservices/paymentSession", "host_not_allowed"),
        ("trailing dot", "https://apple-pay-gateway.test./paymentservices/paymentSession", "host_not_allowed"),
        ("userinfo to loopback", "https://apple-pay-gateway.test@127.0.0.1/paymentservices/paymentSession", "userinfo_present"),
        ("userinfo", "https://user:pw@apple-pay-gateway.test/paymentservices/paymentSession", "userinfo_present"),
        ("port 8443", "https://apple-pay-gateway.test:8443/paymentservices/paymentSession", "port_not_allowed"),
        ("IPv4 literal", "https://127.0.0.1/paymentservices/paymentSession", "ip_literal"),
        ("IPv4 decimal", "https://2130706433/paymentservices/paymentSession", "ip_literal"),
        ("metadata IP", "https://169.254.169.254/paymentservices/paymentSession", "ip_literal"),
        ("IPv6 literal", "https://[::1]/paymentservices/paymentSession", "ip_literal"),
        ("bad path", "https://apple-pay-gateway.test/admin", "path_not_allowed"),
        ("path traversal", "https://apple-pay-gateway.test/paymentservices/../admin", "path_not_allowed"),
        ("query", "https://apple-pay-gateway.test/paymentservices/paymentSession?next=x", "query_present"),
        ("fragment", "https://apple-pay-gateway.test/paymentservices/paymentSession#x", "fragment_present"),
        ("backslash", "https://apple-pay-gateway.test\\\\@127.0.0.1/paymentservices/paymentSession", "malformed"),
        ("relative", "/paymentservices/paymentSession", "not_absolute"),
    ]

    @Test func ssrfURLsAreRefusedWithoutAnyConnection() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "ok")
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let accepts = try gateway.totalAccepts()
        for (name, url, reason) in Self.ssrfCases {
            let response = try s.validate(session.id, bearer: key, body: S.body(url: url))
            #expect(response.status == 400, "\(name)")
            let problem = try response.json()
            #expect(problem["code"] as? String == "validation_url_invalid", "\(name)")
            #expect(problem["reason"] as? String == reason, "\(name)")
        }
        #expect(s.service.connectAttemptCount == 0)
        #expect(try gateway.totalAccepts() == accepts)
        // The measure can move: a valid URL connects exactly once through the same hook.
        let ok = try s.validate(session.id, bearer: key, body: S.body())
        #expect(ok.status == 200)
        #expect(s.service.connectAttemptCount == 1)
        #expect(try gateway.totalAccepts() == accepts + 1)
        let metrics = s.app.metrics.render()
        #expect(metrics.contains(#"tender_merchant_validation_total{outcome="validation_url_invalid"} \#(Self.ssrfCases.count)"#))
        #expect(metrics.contains(#"tender_merchant_validation_total{outcome="succeeded"} 1"#))
    }

    @Test func sessionAccessRules() throws {
        let gateway = try FakeAppleGateway.get()
        let s = try S(mode: "ok")
        defer { s.stop() }
        let key = try s.merchant()
        let otherKey = try s.merchant("merchant.com.tender.other", domains: ["other.tender.test"])
        let open = try s.session()
        let accepts = try gateway.totalAccepts()

        let foreign = try s.validate(open.id, bearer: otherKey, body: S.body())
        #expect(foreign.status == 404)
        #expect(try foreign.json()["code"] as? String == "session_not_found")

        let unknown = try s.validate("cs_" + String(repeating: "a", count: 24), bearer: key, body: S.body())
        #expect(unknown.status == 404)

        let wrongSecret = try s.validate(open.id, bearer: open.clientSecret + "0", body: S.body())
        #expect(wrongSecret.status == 401)
        #expect(try wrongSecret.json()["code"] as? String == "unauthorized")

        let otherSession = try s.session()
        let crossedSecret = try s.validate(open.id, bearer: otherSession.clientSecret, body: S.body())
        #expect(crossedSecret.status == 401)

        let missing = try s.validate(open.id, bearer: nil, body: S.body())
        #expect(missing.status == 401)

        let expired = try s.session(expiresIn: -1)
        let expiredResponse = try s.validate(expired.id, bearer: expired.clientSecret, body: S.body())
        #expect(expiredResponse.status == 410)
        #expect(try expiredResponse.json()["code"] as? String == "session_expired")

        let expiredByStatus = try s.session(status: "expired")
        #expect(try s.validate(expiredByStatus.id, bearer: key, body: S.body()).status == 410)

        let paid = try s.session(status: "paid")
        let paidResponse = try s.validate(paid.id, bearer: key, body: S.body())
        #expect(paidResponse.status == 409)
        #expect(try paidResponse.json()["code"] as? String == "session_not_open")

        #expect(s.service.connectAttemptCount == 0)
        #expect(try gateway.totalAccepts() == accepts)
    }

    @Test func bodyIsStrict() throws {
        let s = try S(mode: "ok")
        defer { s.stop() }
        let key = try s.merchant()
        let session = try s.session()
        let unknown = try s.validate(session.id, bearer: key,
                                     body: #"{"validationURL":"https://apple-pay-gateway.test/paymentservices/paymentSession""#
                                         + #","displayName":"x"}"#)
        #expect(unknown.status == 400)
        let problem = try unknown.json()
        #expect(problem["code"] as? String == "unknown_field")
        let errors = try #require(problem["errors"] as? [[String: Any]])
        #expect(errors.first?["field"] as? String == "displayName")

        let missing = try s.validate(session.id, bearer: key, body: "{}")
        #expect(missing.status == 400)
        #expect(try missing.json()["code"] as? String == "malformed_json")

        let wrongType = try s.validate(session.id, bearer: key, body: #"{"validationURL":42}"#)
        #expect(wrongType.status == 400)
        #expect(try wrongType.json()["code"] as? String == "malformed_json")

        let longContext = String(repeating: "a", count: MerchantValidationRequest.initiativeContextBytesMax + 1)
        let tooLong = try s.validate(session.id, bearer: key, body: S.body(initiativeContext: longContext))
        #expect(tooLong.status == 400)
        #expect(try tooLong.json()["code"] as? String == "initiative_context_invalid")

        // null is not "absent": openapi.yaml allows a string or nothing.
        let nullContext = try s.validate(session.id, bearer: key, body:
            #"{"validationURL":"https://apple-pay-gateway.test/paymentservices/paymentSession","initiativeContext":null}"#)
        #expect(nullContext.status == 400)
        #expect(try nullContext.json()["code"] as? String == "initiative_context_invalid")
        #expect(s.service.connectAttemptCount == 0)
    }

    @Test func routeIsWiredIntoTheAppRouter() throws {
        let configuration = try TenderConfiguration.load(environment: ["TENDER_LISTEN": "127.0.0.1:0"])
        // Never connected: routing needs no database.
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: "postgresql://127.0.0.1:1/none"))
        defer { pool.close() }
        let app = TenderApp(configuration: configuration, pool: pool, migrations: [], logger: .silent)
        guard case .found(_, let pattern, let parameters, _) = app.router()
            .match(method: "POST", path: "/v1/checkout-sessions/cs_abc/merchant-validation") else {
            Issue.record("merchant-validation route not registered")
            return
        }
        #expect(pattern == "/v1/checkout-sessions/{id}/merchant-validation")
        #expect(parameters["id"] == "cs_abc")
    }
}
