import HTTPClient
import Testing

/// docs/apple-pay-rules.md, rule 40 and docs/reliability-security.md test 16 (merchant-validation SSRF).
struct MerchantValidationURLTests {
    static let hosts = MerchantValidationURL.appleGatewayHostsProduction + MerchantValidationURL.appleGatewayHostsSandbox

    @Test(arguments: [
        ("https://apple-pay-gateway.apple.com/paymentservices/paymentSession",
         "https://apple-pay-gateway.apple.com/paymentservices/paymentSession"),
        ("https://apple-pay-gateway.apple.com/paymentservices/startSession",
         "https://apple-pay-gateway.apple.com/paymentservices/startSession"),
        ("https://cn-apple-pay-gateway.apple.com/paymentservices/paymentSession",
         "https://cn-apple-pay-gateway.apple.com/paymentservices/paymentSession"),
        ("https://apple-pay-gateway-nc-pod5.apple.com/paymentservices/startSession",
         "https://apple-pay-gateway-nc-pod5.apple.com/paymentservices/startSession"),
        ("https://apple-pay-gateway-cert.apple.com/paymentservices/paymentSession",
         "https://apple-pay-gateway-cert.apple.com/paymentservices/paymentSession"),
        // Scheme and host are case-insensitive; the explicit default port is dropped when rebuilding.
        ("HTTPS://Apple-Pay-Gateway.APPLE.com:443/paymentservices/paymentSession",
         "https://apple-pay-gateway.apple.com/paymentservices/paymentSession"),
    ])
    func acceptsAllowListedGatewayURLs(input: String, rebuilt: String) throws {
        let checked = try MerchantValidationURL.check(input, allowedHosts: Self.hosts).get()
        #expect(checked.url == rebuilt)
        #expect(checked.path.hasPrefix("/paymentservices/"))
    }

    /// One row per rule, named after what it breaks.
    @Test(arguments: [
        ("scheme http", "http://apple-pay-gateway.apple.com/paymentservices/paymentSession", "scheme_not_https"),
        ("scheme ftp", "ftp://apple-pay-gateway.apple.com/paymentservices/paymentSession", "scheme_not_https"),
        ("no scheme", "apple-pay-gateway.apple.com/paymentservices/paymentSession", "not_absolute"),
        ("relative path", "/paymentservices/paymentSession", "not_absolute"),
        ("scheme-relative", "//apple-pay-gateway.apple.com/paymentservices/paymentSession", "not_absolute"),
        ("no slashes", "https:apple-pay-gateway.apple.com/paymentservices/paymentSession", "not_absolute"),
        ("empty", "", "not_absolute"),
        ("wrong host", "https://evil.test/paymentservices/paymentSession", "host_not_allowed"),
        ("suffix trick", "https://apple-pay-gateway.apple.com.evil.test/paymentservices/paymentSession",
         "host_not_allowed"),
        ("prefix trick", "https://evil-apple-pay-gateway.apple.com/paymentservices/paymentSession",
         "host_not_allowed"),
        ("subdomain", "https://x.apple-pay-gateway.apple.com/paymentservices/paymentSession", "host_not_allowed"),
        ("parent domain", "https://apple.com/paymentservices/paymentSession", "host_not_allowed"),
        ("trailing dot", "https://apple-pay-gateway.apple.com./paymentservices/paymentSession", "host_not_allowed"),
        ("unlisted pod", "https://apple-pay-gateway-nc-pod9.apple.com/paymentservices/paymentSession",
         "host_not_allowed"),
        ("userinfo to IP", "https://apple-pay-gateway.apple.com@127.0.0.1/paymentservices/paymentSession",
         "userinfo_present"),
        ("userinfo before host", "https://user:pass@apple-pay-gateway.apple.com/paymentservices/paymentSession",
         "userinfo_present"),
        ("empty userinfo", "https://@apple-pay-gateway.apple.com/paymentservices/paymentSession", "userinfo_present"),
        ("port 8443", "https://apple-pay-gateway.apple.com:8443/paymentservices/paymentSession", "port_not_allowed"),
        ("port 0443", "https://apple-pay-gateway.apple.com:0443/paymentservices/paymentSession", "port_not_allowed"),
        ("empty port", "https://apple-pay-gateway.apple.com:/paymentservices/paymentSession", "port_not_allowed"),
        ("port 80", "https://apple-pay-gateway.apple.com:80/paymentservices/paymentSession", "port_not_allowed"),
        ("IPv4 dotted", "https://127.0.0.1/paymentservices/paymentSession", "ip_literal"),
        ("IPv4 decimal", "https://2130706433/paymentservices/paymentSession", "ip_literal"),
        ("IPv4 hex", "https://0x7f000001/paymentservices/paymentSession", "ip_literal"),
        ("IPv4 octal parts", "https://0177.0.0.01/paymentservices/paymentSession", "ip_literal"),
        ("IPv4 short", "https://127.1/paymentservices/paymentSession", "ip_literal"),
        ("IPv4 trailing dot", "https://17.32.139.128./paymentservices/paymentSession", "ip_literal"),
        ("IPv4 metadata", "https://169.254.169.254:443/paymentservices/paymentSession", "ip_literal"),
        ("IPv6", "https://[::1]/paymentservices/paymentSession", "ip_literal"),
        ("IPv6 mapped", "https://[::ffff:127.0.0.1]:443/paymentservices/paymentSession", "ip_literal"),
        ("IPv6 unbracketed", "https://::1/paymentservices/paymentSession", "malformed"),
        ("bad path", "https://apple-pay-gateway.apple.com/paymentservices/other", "path_not_allowed"),
        ("short path", "https://apple-pay-gateway.apple.com/paymentSession", "path_not_allowed"),
        ("no path", "https://apple-pay-gateway.apple.com", "path_not_allowed"),
        ("root path", "https://apple-pay-gateway.apple.com/", "path_not_allowed"),
        ("path case", "https://apple-pay-gateway.apple.com/PaymentServices/paymentSession", "path_not_allowed"),
        ("dot segments", "https://apple-pay-gateway.apple.com/x/../paymentservices/paymentSession",
         "path_not_allowed"),
        ("encoded path", "https://apple-pay-gateway.apple.com/paymentservices%2FpaymentSession", "path_not_allowed"),
        ("trailing slash", "https://apple-pay-gateway.apple.com/paymentservices/paymentSession/", "path_not_allowed"),
        ("query", "https://apple-pay-gateway.apple.com/paymentservices/paymentSession?next=http://evil.test",
         "query_present"),
        ("empty query", "https://apple-pay-gateway.apple.com/paymentservices/paymentSession?", "query_present"),
        ("fragment", "https://apple-pay-gateway.apple.com/paymentservices/paymentSession#x", "fragment_present"),
        ("backslash", "https://apple-pay-gateway.apple.com\\@evil.test/paymentservices/paymentSession",
         "malformed"),
        ("space", "https://apple-pay-gateway.apple.com /paymentservices/paymentSession", "malformed"),
        ("newline", "https://apple-pay-gateway.apple.com/paymentservices/paymentSession\n", "malformed"),
        ("non-ASCII host", "https://apple-pay-gateway.аpple.com/paymentservices/paymentSession", "malformed"),
        ("percent host", "https://apple-pay-gateway%2Eapple.com/paymentservices/paymentSession", "malformed"),
        ("empty host", "https:///paymentservices/paymentSession", "malformed"),
    ])
    func refusesEachRuleBreak(name: String, input: String, reason: String) {
        let result = MerchantValidationURL.check(input, allowedHosts: Self.hosts)
        guard case .failure(let error) = result else {
            Issue.record("\(name): accepted \(input)")
            return
        }
        #expect(error.code == .validationURLInvalid, "\(name)")
        #expect(error.validationURLReason?.rawValue == reason, "\(name)")
        #expect(error.outcomeUnknown == false)
    }

    @Test func lengthLimitAtAndPastTheBoundary() {
        let prefix = "https://apple-pay-gateway.apple.com/paymentservices/paymentSession"
        // Valid except for the length, so only the limit can refuse the longer one; both are padded with a query.
        let atLimit = prefix + "?" + String(repeating: "a", count: MerchantValidationURL.urlBytesMax - prefix.utf8.count - 1)
        #expect(atLimit.utf8.count == MerchantValidationURL.urlBytesMax)
        let pastLimit = atLimit + "a"
        guard case .failure(let atError) = MerchantValidationURL.check(atLimit, allowedHosts: Self.hosts),
              case .failure(let pastError) = MerchantValidationURL.check(pastLimit, allowedHosts: Self.hosts)
        else {
            Issue.record("queries must be refused")
            return
        }
        #expect(atError.validationURLReason == .queryPresent)
        #expect(pastError.validationURLReason == .tooLong)
    }

    @Test func allowListIsTheOnlySourceOfHosts() throws {
        let url = "https://apple-pay-gateway.test/paymentservices/paymentSession"
        guard case .failure(let error) = MerchantValidationURL.check(url, allowedHosts: Self.hosts) else {
            Issue.record("test host accepted with Apple's list")
            return
        }
        #expect(error.validationURLReason == .hostNotAllowed)
        // Configured lists (TENDER_APPLE_PAY_GATEWAY_HOSTS) compare case-insensitively too.
        let checked = try MerchantValidationURL.check(url, allowedHosts: ["Apple-Pay-Gateway.TEST"]).get()
        #expect(checked.host == "apple-pay-gateway.test")
        guard case .failure = MerchantValidationURL.check(url, allowedHosts: []) else {
            Issue.record("empty allow-list accepted a host")
            return
        }
    }

    @Test func checkedURLReachesTheLocalGatewayOverMutualTLS() throws {
        let servers = try TestServers.get()
        // The real flow: check the browser's URL against the configured hosts, then call the rebuilt URL.
        let checked = try MerchantValidationURL.check(
            "https://\(TestServers.gatewayHost)/paymentservices/paymentSession",
            allowedHosts: [TestServers.gatewayHost]).get()
        var options = try servers.gatewayOptions(port: servers.mutualTLSPort)
        // The checked URL has no port (443); the test maps that name and port to the local gateway's port.
        options.resolveOverride = nil
        let url = checked.url.replacingOccurrences(of: TestServers.gatewayHost,
                                                   with: "\(TestServers.gatewayHost):\(servers.mutualTLSPort)")
        options.resolveOverride = ["\(TestServers.gatewayHost):\(servers.mutualTLSPort):127.0.0.1"]
        let response = try HTTPClient().send(
            HTTPClientRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")],
                              body: Array(#"{"initiative":"web"}"#.utf8)),
            options: options)
        #expect(response.status == 200)
    }
}
