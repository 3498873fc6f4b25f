// HTTPClient: the libcurl wrapper (outbound HTTPS: processors, Apple merchant validation).
// The only module that imports CCurl; no curl handle, C string or C enum crosses its public API.
internal import CCurl

/// One outbound HTTP request.
public struct HTTPClientRequest: Sendable {
    /// Upper-case method token (`GET`, `POST`, ...).
    public var method: String
    /// Absolute URL; its scheme must be allowed by `HTTPClientOptions`.
    public var url: String
    /// Header fields in order; names are tokens, values carry no CR, LF or NUL.
    public var headers: [(String, String)]
    /// Request body; may hold card data, so it is lent to libcurl, never copied or logged.
    public var body: [UInt8]

    /// Builds a request.
    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// Remote address handed to `HTTPClientOptions.connectAddressFilter` before each connect.
public struct HTTPConnectAddress: Sendable, Equatable, CustomStringConvertible {
    /// Address family.
    public enum Family: String, Sendable { case ipv4, ipv6 }
    /// Address family.
    public var family: Family
    /// Network-order address bytes (4 or 16).
    public var bytes: [UInt8]
    /// TCP port.
    public var port: Int

    /// Builds an address (4 bytes for IPv4, 16 for IPv6).
    public init(family: Family, bytes: [UInt8], port: Int) {
        self.family = family
        self.bytes = bytes
        self.port = port
    }

    /// Dotted quad or colon-separated hex groups, then the port.
    public var description: String {
        switch family {
        case .ipv4:
            return bytes.map(String.init).joined(separator: ".") + ":\(port)"
        case .ipv6:
            var groups: [String] = []
            var index = 0
            while index + 1 < bytes.count {
                groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
                index += 2
            }
            return "[" + groups.joined(separator: ":") + "]:\(port)"
        }
    }
}

/// Per-call settings; the defaults are the production-safe ones (docs/processor-protocol.md, docs/apple-pay-rules.md, rule 44).
public struct HTTPClientOptions: Sendable {
    /// Deadline for TCP connect plus TLS handshake.
    public var connectTimeoutMilliseconds = 3_000
    /// Deadline for the whole exchange (rule 44: hard timeout ≤ 10 s for Apple).
    public var totalTimeoutMilliseconds = 10_000
    /// Response body limit; the transfer is aborted with `response_too_large` past it.
    public var responseBodyBytesMax = 1_048_576
    /// Limit on the response header block (all header lines together).
    public var responseHeaderBytesMax = 65_536
    /// Follow 3xx responses; never true for Apple (rule 44) or processors.
    public var followRedirects = false
    /// Redirect hops allowed when `followRedirects` is on.
    public var redirectsMax = 3
    /// PEM CA bundle trusted instead of the system store; nil = system store.
    public var caFile: String? = nil
    /// Client certificate and key for mutual TLS, passed from memory.
    public var clientIdentity: TLSClientIdentity? = nil
    /// Refuse anything below TLS 1.2 (rule 43). Turning it off only lets libcurl's own floor apply.
    public var minimumTLSVersion12 = true
    /// Permit `http://` URLs; only tests talk plain HTTP.
    public var allowPlainHTTPForTesting = false
    /// `CURLOPT_RESOLVE` entries (`host:port:address`), letting tests point a real host name at 127.0.0.1.
    public var resolveOverride: [String]? = nil
    /// Called with each resolved address before connecting; returning false refuses it (SSRF defence, tests).
    public var connectAddressFilter: (@Sendable (HTTPConnectAddress) -> Bool)? = nil

    /// Speak HTTP/2 (negotiated by ALPN over TLS), as APNs requires; HTTP/1.1 otherwise.
    public var http2 = false

    /// Production defaults.
    public init() {}

    /// The `CURLOPT_PROTOCOLS_STR` value these options imply.
    var allowedProtocols: String { allowPlainHTTPForTesting ? "http,https" : "https" }
}

/// A complete response; any status (including 3xx and 5xx) is a response, not an error.
public struct HTTPClientResponse: Sendable {
    /// HTTP status code.
    public var status: Int
    /// Header fields of the final response, in order, names as sent.
    public var headers: [(String, String)]
    /// Body bytes (at most `responseBodyBytesMax`).
    public var body: [UInt8]

    /// Builds a response.
    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// First value of `name`, compared case-insensitively.
    public func headerValue(_ name: String) -> String? {
        let wanted = asciiLowercased(name)
        return headers.first { asciiLowercased($0.0) == wanted }?.1
    }
}

/// libcurl initialised once per process; Swift runs a global's initialiser exactly once, thread-safely.
private let curlGlobalInitCode: CURLcode = tender_curl_global_init()

/// A blocking HTTP client; each `send` uses its own libcurl easy handle, so any thread may call it at once.
public final class HTTPClient: Sendable {
    /// Initialises libcurl for the process on first use.
    public init() {
        _ = curlGlobalInitCode
    }

    /// Performs `request` and blocks until the response is complete or an error (with its `code`) ends it.
    /// With `cache`, the request goes over the cache's kept connections (keep-alive); without, over a fresh one.
    public func send(_ request: HTTPClientRequest, options: HTTPClientOptions = HTTPClientOptions(),
                     cache: HTTPConnectionCache? = nil)
        throws(HTTPClientError) -> HTTPClientResponse
    {
        guard curlGlobalInitCode == CURLE_OK else {
            throw HTTPClientError(code: .other, message: "libcurl global initialisation failed",
                                  curlCode: Int(curlGlobalInitCode.rawValue))
        }
        try Self.validate(request, options: options)
        let transfer = try Transfer(options: options, cache: cache)
        return try transfer.perform(request)
    }

    /// Rejects requests libcurl would send malformed or that could inject header lines.
    static func validate(_ request: HTTPClientRequest, options: HTTPClientOptions) throws(HTTPClientError) {
        guard !request.method.isEmpty, request.method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            throw HTTPClientError(code: .invalidRequest, message: "method must be an upper-case token")
        }
        guard request.url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw HTTPClientError(code: .invalidURL, message: "URL contains spaces, control or non-ASCII bytes")
        }
        for (name, value) in request.headers {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw HTTPClientError(code: .invalidRequest, message: "header name is not a token")
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                throw HTTPClientError(code: .invalidRequest, message: "header \(name) contains CR, LF or NUL")
            }
        }
        guard options.connectTimeoutMilliseconds > 0, options.totalTimeoutMilliseconds > 0,
              options.responseBodyBytesMax >= 0, options.responseHeaderBytesMax > 0, options.redirectsMax >= 0
        else {
            throw HTTPClientError(code: .invalidRequest, message: "timeouts and limits must be positive")
        }
        for entry in options.resolveOverride ?? [] {
            guard entry.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw HTTPClientError(code: .invalidRequest, message: "resolve override has invalid bytes")
            }
        }
    }
}

/// A libcurl easy handle kept across requests so that connections to the same origin are reused
/// (keep-alive). Use it from one thread at a time (one per worker thread); a reused connection was
/// checked by `connectAddressFilter` when it was opened.
public final class HTTPConnectionCache: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    /// A cache with no connection yet.
    public init() throws(HTTPClientError) {
        _ = curlGlobalInitCode
        guard let handle = curl_easy_init() else { throw HTTPClientError(code: .other, message: "curl_easy_init failed") }
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }
}

/// RFC 9110 §5.6.2 tchar.
func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
         UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
         UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        return true
    default: return false
    }
}

/// Lower-cases ASCII letters only, so results never depend on locale or Unicode tables.
func asciiLowercased(_ text: String) -> String {
    String(decoding: text.utf8.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 + 0x20 : $0 }, as: UTF8.self)
}
