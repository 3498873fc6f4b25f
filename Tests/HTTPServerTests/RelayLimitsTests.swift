import Foundation
import Testing
@testable import HTTPServer

/// MHD's per-connection memory is sized from the edge's head limit (not twice it): a request whose head
/// is at every edge limit at once still reaches its handler through the relay, on a fresh connection and
/// again after MHD has reset that connection's memory for the next request.
@Suite struct RelayLimitsTests {
    /// A relayed request (POST, so never answered inline) with `fields` header fields and a head of exactly `bytes`.
    static func requestAtLimit(bytes: Int, fields: Int, body: String) -> String {
        let query = (0..<24).map { "k\($0)=v\($0)" }.joined(separator: "&")
        let start = "POST /echo?\(query) HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.utf8.count)\r\n"
        let padded = fields - 3
        var lines = (0..<padded).map { "X-F\($0): v\r\n" }
        let fixed = start.utf8.count + lines.reduce(0) { $0 + $1.utf8.count } + "X-Last: \r\n".utf8.count + 2
        lines.append("X-Last: \(String(repeating: "p", count: bytes - fixed))\r\n")
        let head = start + lines.joined() + "\r\n"
        precondition(head.utf8.count == bytes)
        return head + body
    }

    @Test func headAtEveryLimitIsServedThroughTheRelayTwiceOnOneConnection() throws {
        let defaults = HTTPServerConfiguration()
        let test = try TestServer()
        defer { test.server.shutdown(drainDeadlineMilliseconds: 2_000) }
        let client = try test.client()
        let request = Self.requestAtLimit(bytes: defaults.headerBytesMax, fields: defaults.headerFieldsMax, body: "hello")
        for _ in 0..<2 {
            let response = try client.roundTrip(request)
            #expect(response.status == 200)
            #expect(response.text == "hello")
        }
        #expect(try client.roundTrip("GET /v1/items/a HTTP/1.1\r\nHost: t\r\n\r\n").status == 200)
    }

    /// The edge's own accounting decides where its limit falls (CRLFs, canonical spacing); whatever it
    /// accepts MHD must serve, and the first size past it is the edge's 431 problem, never MHD's own answer.
    @Test func everyHeadTheEdgeAcceptsIsServedAndTheFirstPastItIsTheEdges431() throws {
        let defaults = HTTPServerConfiguration()
        let test = try TestServer()
        defer { test.server.shutdown(drainDeadlineMilliseconds: 2_000) }
        func accepted(_ bytes: Int) throws -> Bool {
            let response = try test.client().roundTrip(Self.requestAtLimit(bytes: bytes, fields: defaults.headerFieldsMax,
                                                                           body: "hello"))
            if response.status == 200 {
                #expect(response.text == "hello")
                return true
            }
            #expect(response.status == 431)
            #expect(response.json?["code"] as? String == "header_fields_too_large")
            return false
        }
        var low = defaults.headerBytesMax
        var high = defaults.headerBytesMax + 4 * defaults.headerFieldsMax + 64
        #expect(try accepted(low))
        #expect(try !accepted(high))
        while high - low > 1 {
            let middle = (low + high) / 2
            if try accepted(middle) { low = middle } else { high = middle }
        }
        let client = try test.client()
        for _ in 0..<2 {
            #expect(try client.roundTrip(Self.requestAtLimit(bytes: low, fields: defaults.headerFieldsMax, body: "hello")).text
                    == "hello")
        }
    }

    @Test func smallerHeadLimitStillServesItsLargestHead() throws {
        let test = try TestServer { $0.headerBytesMax = 4_096; $0.headerFieldsMax = 40 }
        defer { test.server.shutdown(drainDeadlineMilliseconds: 2_000) }
        let client = try test.client()
        for _ in 0..<3 {
            let response = try client.roundTrip(Self.requestAtLimit(bytes: 4_096, fields: 40, body: "abc"))
            #expect(response.status == 200)
            #expect(response.text == "abc")
        }
    }
}

/// The router's ranking (one bit per segment) picks what the segment-by-segment comparison picked.
@Suite struct RouterRankTests {
    static let patterns = ["/v1/items/{id}", "/v1/items/special", "/v1/{kind}/special", "/v1/{kind}/{id}", "/v1/items",
                           "/v1/{kind}", "/{a}/{b}/{c}", "/v1/items/{id}/refunds", "/v1/{kind}/{id}/refunds",
                           "/{a}/items/{id}/refunds", "/", "/v1/items/"]

    /// The previous matcher: ranks as [Bool], the first route of the highest rank wins.
    static func reference(_ method: String, _ path: String, routes: [(String, String)]) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        var best: (String, [Bool])?
        var allowed: Set<String> = []
        for (routeMethod, pattern) in routes {
            let segments = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
            guard segments.count == parts.count else { continue }
            var rank: [Bool] = []
            var matches = true
            for (segment, part) in zip(segments, parts) {
                if segment.hasPrefix("{"), segment.hasSuffix("}"), segment.count > 2 {
                    if part.isEmpty { matches = false }
                    rank.append(false)
                } else {
                    if segment != part { matches = false }
                    rank.append(true)
                }
            }
            guard matches else { continue }
            guard routeMethod == method else { allowed.insert(routeMethod); continue }
            if let current = best {
                var higher = false
                for (x, y) in zip(rank, current.1) where x != y { higher = x; break }
                if !higher { continue }
            }
            best = (pattern, rank)
        }
        if let best { return "found \(best.0)" }
        return allowed.isEmpty ? "notFound" : "methodNotAllowed \(allowed.sorted())"
    }

    @Test func rankedMatchEqualsTheSegmentBySegmentMatch() {
        var routes: [(String, String)] = []
        var router = Router()
        for (index, pattern) in Self.patterns.enumerated() {
            for method in index % 3 == 0 ? ["GET", "POST"] : ["GET"] {
                routes.append((method, pattern))
                router.add(method, pattern) { _ in HTTPResponse(status: 200) }
            }
        }
        let words = ["v1", "items", "special", "refunds", "x", ""]
        var paths: [String] = []
        for a in words { for b in words { paths.append("/\(a)/\(b)"); for c in words { paths.append("/\(a)/\(b)/\(c)") } } }
        for a in words { paths.append("/\(a)"); for b in words { for c in words { paths.append("/\(a)/\(b)/\(c)/refunds") } } }
        for method in ["GET", "POST", "DELETE"] {
            for path in paths {
                let got: String
                switch router.match(method: method, path: path) {
                case .found(_, let pattern, _, _): got = "found \(pattern)"
                case .methodNotAllowed(let allowed): got = "methodNotAllowed \(allowed)"
                case .notFound: got = "notFound"
                }
                #expect(got == Self.reference(method, path, routes: routes), "\(method) \(path)")
            }
        }
        let long = "/" + (0..<70).map { "s\($0)" }.joined(separator: "/")
        var longRouter = Router()
        longRouter.add("GET", long) { _ in HTTPResponse(status: 200) }
        guard case .found(_, let pattern, _, _) = longRouter.match(method: "GET", path: long) else {
            Issue.record("a 70-segment literal route must match")
            return
        }
        #expect(pattern == long)
    }

    @Test func parametersAreCapturedForTheWinner() {
        var router = Router()
        router.add("GET", "/v1/{kind}/{id}") { _ in HTTPResponse(status: 200) }
        router.add("GET", "/v1/items/{id}") { _ in HTTPResponse(status: 200) }
        guard case .found(_, let pattern, let parameters, _) = router.match(method: "GET", path: "/v1/items/p1") else {
            Issue.record("must match")
            return
        }
        #expect(pattern == "/v1/items/{id}")
        #expect(parameters == ["id": "p1"])
    }
}

/// Header names compare case-insensitively without allocating, exactly as `lowercased()` compared them.
@Suite struct HeaderNameTests {
    @Test func sameNameMatchesLowercasedComparison() {
        let names = ["Content-Type", "content-type", "CONTENT-TYPE", "Content-Typf", "X-Request-Id", "x-request-id",
                     "Authorization", "authorizatioN", "A", "a", "[", "{", "@", "`", "Ab-", "aB_", "K", "k", "\u{212A}",
                     "Stra\u{DF}e", "STRASSE", "strasse", "\u{C9}t\u{E9}", "\u{E9}T\u{C9}", "\u{130}", "i", "", "0-9", "0-9 "]
        for a in names {
            for b in names {
                let expected = a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
                #expect(HTTPHeaders.sameName(a, b) == expected, "\(a) vs \(b)")
            }
        }
        var headers = HTTPHeaders([("content-type", "a"), ("X-Other", "b"), ("CONTENT-TYPE", "c")])
        #expect(headers["Content-Type"] == "a")
        #expect(headers.values(for: "content-TYPE") == ["a", "c"])
        headers.replaceOrAdd("Content-Type", "d")
        #expect(Array(headers).map { "\($0.0)=\($0.1)" } == ["Content-Type=d", "X-Other=b"])
    }

    @Test func unsafeHeadersAreStillDropped() {
        #expect(!ServerCore.isSafeHeader(name: "content-length", value: "1"))
        #expect(!ServerCore.isSafeHeader(name: "Transfer-ENCODING", value: "chunked"))
        #expect(!ServerCore.isSafeHeader(name: "", value: "x"))
        #expect(!ServerCore.isSafeHeader(name: "X-Bad Name", value: "x"))
        #expect(!ServerCore.isSafeHeader(name: "X-Ok", value: "a\r\nb"))
        #expect(ServerCore.isSafeHeader(name: "X-Ok!#$%&'*+-.^_`|~", value: "v"))
    }
}
