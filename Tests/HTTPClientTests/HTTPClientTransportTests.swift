import Foundation
import HTTPClient
import Testing

/// Real sockets on 127.0.0.1 against the servers in TestServers (python3 + openssl certificates).
@Suite(.timeLimit(.minutes(2)))
struct HTTPClientTransportTests {
    let client = HTTPClient()

    // MARK: Round trips

    @Test func jsonPostRoundTripOverMutualTLS() throws {
        let servers = try TestServers.get()
        let payload: [String: String] = ["merchantIdentifier": "merchant.com.tender", "displayName": "Tender Shop",
                                         "initiative": "web", "initiativeContext": "shop.tender.test"]
        let body = try JSONSerialization.data(withJSONObject: payload)
        let request = HTTPClientRequest(
            method: "POST", url: servers.gatewayURL(port: servers.mutualTLSPort, path: "/paymentservices/paymentSession"),
            headers: [("Content-Type", "application/json"), ("Idempotency-Key", "attempt-1")], body: Array(body))
        let response = try client.send(request, options: servers.gatewayOptions(port: servers.mutualTLSPort))
        #expect(response.status == 200)
        #expect(response.headerValue("content-type") == "application/json")
        let echoed = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(echoed["method"] as? String == "POST")
        #expect(echoed["path"] as? String == "/paymentservices/paymentSession")
        #expect(echoed["contentType"] as? String == "application/json")
        #expect(echoed["idempotencyKey"] as? String == "attempt-1")
        #expect(echoed["expect"] is NSNull, "no Expect: 100-continue round trip")
        #expect(echoed["clientCommonName"] as? String == "merchant.tender.test")
        #expect(echoed["received"] as? [String: String] == payload)
    }

    @Test func plainHTTPWorksOnlyWithTheTestingSwitch() throws {
        let servers = try TestServers.get()
        let request = HTTPClientRequest(method: "GET", url: servers.plainURL("/echo"))
        let refused = httpError { () throws(HTTPClientError) in try client.send(request, options: HTTPClientOptions()) }
        #expect(refused?.code == .protocolNotAllowed)
        #expect(refused?.outcomeUnknown == false)
        let response = try client.send(request, options: servers.plainOptions())
        #expect(response.status == 200)
    }

    @Test func methodsWithoutAndWithBody() throws {
        let servers = try TestServers.get()
        let delete = try client.send(HTTPClientRequest(method: "DELETE", url: servers.plainURL("/echo")),
                                     options: servers.plainOptions())
        let deleted = try #require(try JSONSerialization.jsonObject(with: Data(delete.body)) as? [String: Any])
        #expect(deleted["method"] as? String == "DELETE")
        let put = try client.send(HTTPClientRequest(method: "PUT", url: servers.plainURL("/echo"),
                                                    body: Array(#"{"k":"v"}"#.utf8)),
                                  options: servers.plainOptions())
        let putEcho = try #require(try JSONSerialization.jsonObject(with: Data(put.body)) as? [String: Any])
        #expect(putEcho["method"] as? String == "PUT")
        #expect(putEcho["received"] as? [String: String] == ["k": "v"])
    }

    @Test func concurrentCallsFromManyThreads() throws {
        let servers = try TestServers.get()
        let options = try servers.gatewayOptions(port: servers.mutualTLSPort)
        let url = servers.gatewayURL(port: servers.mutualTLSPort, path: "/echo")
        let callCount = 16
        let results = LockedBox(Array(repeating: -1, count: callCount))
        DispatchQueue.concurrentPerform(iterations: callCount) { index in
            let request = HTTPClientRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")],
                                            body: Array(#"{"index":\#(index)}"#.utf8))
            guard let response = try? client.send(request, options: options),
                  let echoed = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
                  let received = echoed["received"] as? [String: Int], let value = received["index"]
            else { return }
            results.withLock { $0[index] = value }
        }
        #expect(results.withLock { $0 } == Array(0..<callCount))
    }

    // MARK: TLS

    @Test func mutualTLSWithoutClientIdentityFails() throws {
        let servers = try TestServers.get()
        let request = HTTPClientRequest(method: "POST", url: servers.gatewayURL(port: servers.mutualTLSPort, path: "/echo"),
                                        body: Array("{}".utf8))
        let options = try servers.gatewayOptions(port: servers.mutualTLSPort, identity: false)
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.outcomeUnknown == false)
    }

    @Test func clientIdentityWithWrongKeyFails() throws {
        let servers = try TestServers.get()
        var options = try servers.gatewayOptions(port: servers.mutualTLSPort)
        // The server's key does not match the client certificate.
        options.clientIdentity = TLSClientIdentity(certificatePEM: try servers.bytes("client.pem"),
                                                   privateKeyPEM: SecretPEM(try servers.bytes("server.key")))
        let request = HTTPClientRequest(method: "GET", url: servers.gatewayURL(port: servers.mutualTLSPort, path: "/echo"))
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .tlsFailed)
    }

    @Test func untrustedServerCertificateFails() throws {
        let servers = try TestServers.get()
        let request = HTTPClientRequest(method: "GET", url: servers.gatewayURL(port: servers.roguePort, path: "/echo"))
        let options = try servers.gatewayOptions(port: servers.roguePort)
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .tlsFailed)
        #expect(error?.outcomeUnknown == false)
        // The same server name and CA work on the trusted server, so the refusal is about the certificate.
        let trusted = try client.send(
            HTTPClientRequest(method: "GET", url: servers.gatewayURL(port: servers.tlsPort, path: "/echo")),
            options: servers.gatewayOptions(port: servers.tlsPort))
        #expect(trusted.status == 200)
    }

    @Test func systemTrustStoreDoesNotTrustTheTestCA() throws {
        let servers = try TestServers.get()
        var options = try servers.gatewayOptions(port: servers.tlsPort)
        options.caFile = nil
        let request = HTTPClientRequest(method: "GET", url: servers.gatewayURL(port: servers.tlsPort, path: "/echo"))
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .tlsFailed)
    }

    @Test func hostNameMismatchFails() throws {
        let servers = try TestServers.get()
        var options = try servers.gatewayOptions(port: servers.tlsPort)
        options.resolveOverride = ["other-gateway.test:\(servers.tlsPort):127.0.0.1"]
        let request = HTTPClientRequest(method: "GET", url: "https://other-gateway.test:\(servers.tlsPort)/echo")
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .tlsFailed)
    }

    @Test func tls11OnlyServerIsRefused() throws {
        let servers = try TestServers.get()
        // The script only reports this port after a local TLS 1.1 handshake with it succeeded.
        let port = try #require(servers.tls11Port, "this OpenSSL build cannot serve TLS 1.1")
        let request = HTTPClientRequest(method: "GET", url: servers.gatewayURL(port: port, path: "/echo"))
        let options = try servers.gatewayOptions(port: port, identity: false)
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .tlsFailed)
        #expect(error?.outcomeUnknown == false)
    }

    // MARK: Redirects, timeouts, refusals, limits

    @Test func redirectIsReturnedNotFollowed() throws {
        let servers = try TestServers.get()
        let request = HTTPClientRequest(method: "GET", url: servers.plainURL("/redirect"))
        let response = try client.send(request, options: servers.plainOptions())
        #expect(response.status == 302)
        #expect(response.headerValue("Location") == "/echo")
        // The redirect target is real: following it (never done for Apple or processors) lands on 200.
        var following = servers.plainOptions()
        following.followRedirects = true
        #expect(try client.send(request, options: following).status == 200)
    }

    @Test func totalTimeoutAfterTheRequestWasSent() throws {
        let servers = try TestServers.get()
        var options = servers.plainOptions()
        options.totalTimeoutMilliseconds = 500
        let request = HTTPClientRequest(method: "POST", url: servers.plainURL("/sleep/8000"), body: Array("{}".utf8))
        let started = ContinuousClock.now
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        let elapsed = ContinuousClock.now - started
        #expect(error?.code == .timeout)
        #expect(error?.outcomeUnknown == true)
        #expect(elapsed >= .milliseconds(450))
        #expect(elapsed < .seconds(4))
    }

    @Test func timeoutDuringTLSHandshakeMeansNothingWasSent() throws {
        let servers = try TestServers.get()
        var options = try servers.gatewayOptions(port: servers.silentPort)
        options.connectTimeoutMilliseconds = 400
        let request = HTTPClientRequest(method: "POST", url: servers.gatewayURL(port: servers.silentPort, path: "/echo"),
                                        body: Array("{}".utf8))
        let started = ContinuousClock.now
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        let elapsed = ContinuousClock.now - started
        #expect(error?.code == .timeout)
        #expect(error?.outcomeUnknown == false)
        #expect(elapsed < .seconds(4))
    }

    @Test func connectionRefused() throws {
        let servers = try TestServers.get()
        let request = HTTPClientRequest(method: "POST", url: "http://127.0.0.1:\(servers.closedPort)/echo",
                                        body: Array("{}".utf8))
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: servers.plainOptions()) }
        #expect(error?.code == .connectionFailed)
        #expect(error?.outcomeUnknown == false)
    }

    @Test(arguments: ["bytes", "chunked"])
    func responseBodyLimitAtAndPastTheBoundary(route: String) throws {
        let servers = try TestServers.get()
        var options = servers.plainOptions()
        options.responseBodyBytesMax = 10_000
        let atLimit = try client.send(HTTPClientRequest(method: "GET", url: servers.plainURL("/\(route)/10000")),
                                      options: options)
        #expect(atLimit.status == 200)
        #expect(atLimit.body.count == 10_000)
        let past = httpError { () throws(HTTPClientError) in
            try client.send(HTTPClientRequest(method: "GET", url: servers.plainURL("/\(route)/10001")), options: options)
        }
        #expect(past?.code == .responseTooLarge)
        #expect(past?.outcomeUnknown == true)
    }

    @Test func responseHeaderLimit() throws {
        let servers = try TestServers.get()
        var options = servers.plainOptions()
        options.responseHeaderBytesMax = 4_096
        // Each filler line is "X-Filler-N: " plus 100 bytes: 10 fit in 4 KiB, 60 do not.
        let fits = try client.send(HTTPClientRequest(method: "GET", url: servers.plainURL("/headers/10")),
                                   options: options)
        #expect(fits.headers.filter { $0.0.hasPrefix("X-Filler-") }.count == 10)
        let error = httpError { () throws(HTTPClientError) in
            try client.send(HTTPClientRequest(method: "GET", url: servers.plainURL("/headers/60")), options: options)
        }
        #expect(error?.code == .responseTooLarge)
    }

    @Test func serverErrorsAreResponsesNotErrors() throws {
        let servers = try TestServers.get()
        let response = try client.send(HTTPClientRequest(method: "POST", url: servers.plainURL("/status/503"),
                                                         body: Array("{}".utf8)),
                                       options: servers.plainOptions())
        #expect(response.status == 503)
        #expect(response.headerValue("retry-after") == "1")
    }

    // MARK: Connect hook and request validation

    @Test func connectHookSeesTheAddressAndCanRefuseIt() throws {
        let servers = try TestServers.get()
        let seen = LockedBox<[HTTPConnectAddress]>([])
        var options = servers.plainOptions()
        options.connectAddressFilter = { address in
            seen.withLock { $0.append(address) }
            return true
        }
        let request = HTTPClientRequest(method: "GET", url: servers.plainURL("/echo"))
        #expect(try client.send(request, options: options).status == 200)
        #expect(seen.withLock { $0 } == [HTTPConnectAddress(family: .ipv4, bytes: [127, 0, 0, 1], port: servers.httpPort)])

        options.connectAddressFilter = { address in address.bytes.first != 127 }
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: options) }
        #expect(error?.code == .addressNotAllowed)
        #expect(error?.outcomeUnknown == false)
    }

    @Test(arguments: [
        ("X-Injected", "a\r\nX-Evil: 1"),
        ("X Bad Name", "value"),
        ("", "value"),
        ("X-Nul", "a\u{0}b"),
    ])
    func headerInjectionIsRefusedBeforeSending(name: String, value: String) throws {
        let servers = try TestServers.get()
        let request = HTTPClientRequest(method: "GET", url: servers.plainURL("/echo"), headers: [(name, value)])
        let error = httpError { () throws(HTTPClientError) in try client.send(request, options: servers.plainOptions()) }
        #expect(error?.code == .invalidRequest)
    }

    @Test func malformedURLAndMethod() throws {
        let badURL = httpError { () throws(HTTPClientError) in
            try client.send(HTTPClientRequest(method: "GET", url: "https://exa mple.test/"))
        }
        #expect(badURL?.code == .invalidURL)
        let noScheme = httpError { () throws(HTTPClientError) in
            try client.send(HTTPClientRequest(method: "GET", url: "https://[::1/"))
        }
        #expect(noScheme?.code == .invalidURL)
        let badMethod = httpError { () throws(HTTPClientError) in
            try client.send(HTTPClientRequest(method: "get\r\n", url: "https://example.test/"))
        }
        #expect(badMethod?.code == .invalidRequest)
    }
}
