internal import CCurl

#if canImport(Glibc)
import Glibc
#endif

/// Mutable state the libcurl callbacks write into; lives on the calling thread for one transfer.
final class ResponseCollector {
    let bodyBytesMax: Int
    let headerBytesMax: Int
    let addressFilter: (@Sendable (HTTPConnectAddress) -> Bool)?
    var headers: [(String, String)] = []
    var headerBytes = 0
    var body: [UInt8] = []
    var bodyTooLarge = false
    var headersTooLarge = false
    var addressesRefused = 0

    init(options: HTTPClientOptions) {
        bodyBytesMax = options.responseBodyBytesMax
        headerBytesMax = options.responseHeaderBytesMax
        addressFilter = options.connectAddressFilter
    }

    /// One raw header line from libcurl (status line, field line, or the blank end line).
    func receiveHeaderLine(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        headerBytes += bytes.count
        guard headerBytes <= headerBytesMax else {
            headersTooLarge = true
            return false
        }
        var line = Array(bytes)
        while let last = line.last, last == 0x0A || last == 0x0D { line.removeLast() }
        if line.isEmpty { return true }
        if line.starts(with: Array("HTTP/".utf8)) {
            // A new status line starts a new header block (1xx interim responses, or redirects if followed).
            headers.removeAll()
            return true
        }
        if let first = line.first, first == 0x20 || first == 0x09 {
            // Obsolete line folding (RFC 9112 §5.2): the line continues the previous value.
            if let previous = headers.popLast() {
                headers.append((previous.0, previous.1 + " " + trimmed(line)))
            }
            return true
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return true }
        let name = String(decoding: line[..<colon], as: UTF8.self)
        let value = trimmed(Array(line[(colon + 1)...]))
        headers.append((name, value))
        return true
    }

    private func trimmed(_ bytes: [UInt8]) -> String {
        var slice = bytes[...]
        while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
        return String(decoding: slice, as: UTF8.self)
    }
}

/// Owns one libcurl easy handle and everything it points at; all of it is freed in `deinit`.
final class Transfer {
    private let handle: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let emptyBody: UnsafeMutablePointer<CChar>
    private var lists: [UnsafeMutablePointer<curl_slist>] = []
    private let options: HTTPClientOptions
    /// The kept handle this transfer borrows (nil: the transfer owns its handle).
    private let cache: HTTPConnectionCache?
    let collector: ResponseCollector

    init(options: HTTPClientOptions, cache: HTTPConnectionCache? = nil) throws(HTTPClientError) {
        if let cache {
            // Reset drops every option (so nothing points at a previous transfer's buffers) but keeps live
            // connections, which is the point of the cache.
            curl_easy_reset(cache.handle)
            self.handle = cache.handle
        } else {
            guard let handle = curl_easy_init() else {
                throw HTTPClientError(code: .other, message: "curl_easy_init failed")
            }
            self.handle = handle
        }
        self.cache = cache
        self.options = options
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        emptyBody = .allocate(capacity: 1)
        emptyBody.initialize(to: 0)
        collector = ResponseCollector(options: options)
        try configure()
    }

    deinit {
        if cache == nil { curl_easy_cleanup(handle) } else { curl_easy_reset(handle) }
        for list in lists { curl_slist_free_all(list) }
        errorBuffer.deallocate()
        emptyBody.deallocate()
    }

    private func check(_ code: CURLcode, _ what: String) throws(HTTPClientError) {
        guard code == CURLE_OK else {
            throw HTTPClientError(code: .other, message: "setting \(what) failed: \(Self.text(of: code))",
                                  curlCode: Int(code.rawValue))
        }
    }

    private func set(_ option: CURLoption, _ value: Int, _ what: String) throws(HTTPClientError) {
        try check(tender_curl_setopt_long(handle, option, value), what)
    }

    private func set(_ option: CURLoption, _ value: String?, _ what: String) throws(HTTPClientError) {
        // libcurl copies string options (except POSTFIELDS), so a temporary C string is enough.
        try check(tender_curl_setopt_string(handle, option, value), what)
    }

    private func makeList(_ lines: [String]) -> UnsafeMutablePointer<curl_slist>? {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for line in lines {
            guard let extended = curl_slist_append(list, line) else { continue }
            list = extended
        }
        if let list { lists.append(list) }
        return list
    }

    private func configure() throws(HTTPClientError) {
        // Signals cannot be used for timeouts in a multi-threaded process (libcurl docs, CURLOPT_NOSIGNAL).
        try set(CURLOPT_NOSIGNAL, 1, "NOSIGNAL")
        try check(tender_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer), "ERRORBUFFER")
        // An empty proxy disables the http(s)_proxy environment variables: outbound hosts are allow-listed.
        try set(CURLOPT_PROXY, "", "PROXY")
        try set(CURLOPT_PROTOCOLS_STR, options.allowedProtocols, "PROTOCOLS_STR")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, options.allowedProtocols, "REDIR_PROTOCOLS_STR")
        // Rule 44: no redirects followed for Apple; processors get the same default.
        if options.http2 {
            try set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_0), "HTTP_VERSION")
        }
        try set(CURLOPT_FOLLOWLOCATION, options.followRedirects ? 1 : 0, "FOLLOWLOCATION")
        try set(CURLOPT_MAXREDIRS, options.redirectsMax, "MAXREDIRS")
        try set(CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds, "CONNECTTIMEOUT_MS")
        try set(CURLOPT_TIMEOUT_MS, options.totalTimeoutMilliseconds, "TIMEOUT_MS")
        try set(CURLOPT_SSL_VERIFYPEER, 1, "SSL_VERIFYPEER")
        try set(CURLOPT_SSL_VERIFYHOST, 2, "SSL_VERIFYHOST")
        if options.minimumTLSVersion12 {
            // Rule 43 / §4.3: TLS ≥ 1.2.
            try set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2), "SSLVERSION")
        }
        if let caFile = options.caFile {
            // Trust the given bundle instead of the system store, not in addition to it.
            try set(CURLOPT_CAINFO, caFile, "CAINFO")
            try set(CURLOPT_CAPATH, nil, "CAPATH")
        }
        if options.responseBodyBytesMax > 0 {
            // Refuses early when Content-Length already exceeds the limit; the write callback covers the rest.
            try check(tender_curl_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE,
                                             curl_off_t(options.responseBodyBytesMax)), "MAXFILESIZE_LARGE")
        }
        if let entries = options.resolveOverride, !entries.isEmpty {
            try check(tender_curl_setopt_slist(handle, CURLOPT_RESOLVE, makeList(entries)), "RESOLVE")
        }
        if let identity = options.clientIdentity {
            let code = identity.certificatePEM.withUnsafeBytes { certificate in
                // The certificate is public, so libcurl may keep its own copy.
                tender_curl_setopt_blob(handle, CURLOPT_SSLCERT_BLOB, certificate.baseAddress, certificate.count, 1)
            }
            try check(code, "SSLCERT_BLOB")
            try set(CURLOPT_SSLCERTTYPE, "PEM", "SSLCERTTYPE")
            try set(CURLOPT_SSLKEYTYPE, "PEM", "SSLKEYTYPE")
        }
        let context = Unmanaged.passUnretained(collector).toOpaque()
        try check(tender_curl_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            guard let context else { return 0 }
            let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            guard length > 0, let data else { return length }
            guard collector.body.count + length <= collector.bodyBytesMax else {
                collector.bodyTooLarge = true
                return 0  // anything but `length` makes libcurl abort with CURLE_WRITE_ERROR
            }
            data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
                collector.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: length))
            }
            return length
        }, "WRITEFUNCTION")
        try check(tender_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context), "WRITEDATA")
        try check(tender_curl_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            guard let context else { return 0 }
            let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            guard length > 0, let data else { return length }
            let accepted = data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
                collector.receiveHeaderLine(UnsafeBufferPointer(start: bytes, count: length))
            }
            return accepted ? length : 0
        }, "HEADERFUNCTION")
        try check(tender_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context), "HEADERDATA")
        if options.connectAddressFilter != nil {
            try check(tender_curl_setopt_opensocket_callback(handle) { context, purpose, address in
                guard let context, let address else { return CURL_SOCKET_BAD }
                let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
                guard let filter = collector.addressFilter, let remote = connectAddress(address) else {
                    collector.addressesRefused += 1
                    return CURL_SOCKET_BAD
                }
                guard filter(remote) else {
                    collector.addressesRefused += 1
                    return CURL_SOCKET_BAD
                }
                return socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
            }, "OPENSOCKETFUNCTION")
            try check(tender_curl_setopt_pointer(handle, CURLOPT_OPENSOCKETDATA, context), "OPENSOCKETDATA")
        }
    }

    /// Runs the request; the body and private key are lent to libcurl only for the duration of the call.
    func perform(_ request: HTTPClientRequest) throws(HTTPClientError) -> HTTPClientResponse {
        try set(CURLOPT_URL, request.url, "URL")
        var headerLines = request.headers.map { name, value in
            // libcurl drops "Name:" lines; "Name;" is its spelling for an empty value.
            value.isEmpty ? "\(name);" : "\(name): \(value)"
        }
        // No "Expect: 100-continue" round trip: it adds a second of latency on servers that ignore it.
        headerLines.append("Expect:")
        try check(tender_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, makeList(headerLines)), "HTTPHEADER")

        let method = request.method
        let sendsBody = !request.body.isEmpty || method == "POST" || method == "PUT" || method == "PATCH"
        switch method {
        case "POST":
            try set(CURLOPT_POST, 1, "POST")
        case "GET" where !sendsBody:
            try set(CURLOPT_HTTPGET, 1, "HTTPGET")
        case "HEAD":
            guard !sendsBody else {
                throw HTTPClientError(code: .invalidRequest, message: "HEAD cannot carry a body")
            }
            try set(CURLOPT_NOBODY, 1, "NOBODY")
        default:
            try set(CURLOPT_CUSTOMREQUEST, method, "CUSTOMREQUEST")
        }

        let handle = self.handle
        let emptyBody = self.emptyBody
        let identity = options.clientIdentity
        let code: CURLcode = request.body.withUnsafeBytes { body in
            if sendsBody {
                // POSTFIELDS is not copied: libcurl reads the caller's bytes in place during perform.
                let sizeCode = tender_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                guard sizeCode == CURLE_OK else { return sizeCode }
                let fieldsCode = tender_curl_setopt_pointer(
                    handle, CURLOPT_POSTFIELDS, body.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(emptyBody))
                guard fieldsCode == CURLE_OK else { return fieldsCode }
            }
            guard let identity else { return curl_easy_perform(handle) }
            return identity.privateKeyPEM.withUnsafeBytes { key in
                // NOCOPY: the key stays only in SecretPEM's zeroed-on-release buffer (and OpenSSL's own object).
                let keyCode = tender_curl_setopt_blob(handle, CURLOPT_SSLKEY_BLOB, key.baseAddress, key.count, 0)
                guard keyCode == CURLE_OK else { return keyCode }
                return curl_easy_perform(handle)
            }
        }
        guard code == CURLE_OK else { throw mapError(code) }
        var status = 0
        _ = tender_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return HTTPClientResponse(status: status, headers: collector.headers, body: collector.body)
    }

    /// True once libcurl got as far as sending the request, so the server may have acted on it.
    private var requestMayHaveBeenSent: Bool {
        var pretransferMicroseconds: curl_off_t = 0
        var requestBytes = 0
        _ = tender_curl_getinfo_off(handle, CURLINFO_PRETRANSFER_TIME_T, &pretransferMicroseconds)
        _ = tender_curl_getinfo_long(handle, CURLINFO_REQUEST_SIZE, &requestBytes)
        return pretransferMicroseconds > 0 || requestBytes > 0
    }

    static func text(of code: CURLcode) -> String {
        guard let text = curl_easy_strerror(code) else { return "curl error \(code.rawValue)" }
        return String(cString: text)
    }

    /// Turns a libcurl result into our error, deciding whether the server may have seen the request.
    private func mapError(_ code: CURLcode) -> HTTPClientError {
        let detail = String(cString: errorBuffer)
        let message = detail.isEmpty ? Self.text(of: code) : detail
        let curlCode = Int(code.rawValue)
        let sent = requestMayHaveBeenSent
        func error(_ kind: HTTPClientError.Code, unknown: Bool) -> HTTPClientError {
            HTTPClientError(code: kind, message: message, outcomeUnknown: unknown, curlCode: curlCode)
        }
        if collector.bodyTooLarge || code == CURLE_FILESIZE_EXCEEDED {
            // The server has already answered: whatever it did, it did.
            return HTTPClientError(code: .responseTooLarge,
                                   message: "response body exceeds \(options.responseBodyBytesMax) bytes",
                                   outcomeUnknown: true, curlCode: curlCode)
        }
        if collector.headersTooLarge {
            return HTTPClientError(code: .responseTooLarge,
                                   message: "response headers exceed \(options.responseHeaderBytesMax) bytes",
                                   outcomeUnknown: true, curlCode: curlCode)
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return error(.timeout, unknown: sent)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return error(.connectionFailed, unknown: false)
        case CURLE_COULDNT_CONNECT:
            if collector.addressesRefused > 0 {
                return HTTPClientError(code: .addressNotAllowed,
                                       message: "connect hook refused \(collector.addressesRefused) address(es)",
                                       outcomeUnknown: false, curlCode: curlCode)
            }
            return error(.connectionFailed, unknown: false)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return error(.protocolNotAllowed, unknown: false)
        case CURLE_URL_MALFORMAT:
            return error(.invalidURL, unknown: false)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_CLIENTCERT, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            return error(.tlsFailed, unknown: false)
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR:
            // With TLS 1.3 the client finishes its handshake first; a server refusing the client certificate
            // answers the request with an alert, which libcurl reports as a read or write error.
            if Self.isHandshakeAlert(message) { return error(.tlsFailed, unknown: false) }
            return error(.connectionFailed, unknown: sent)
        case CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3,
             CURLE_WEIRD_SERVER_REPLY:
            return error(.connectionFailed, unknown: sent)
        default:
            return error(.other, unknown: sent)
        }
    }

    /// TLS alerts that mean "the handshake was refused", as OpenSSL words them.
    static func isHandshakeAlert(_ message: String) -> Bool {
        let text = asciiLowercased(message)
        guard text.contains("alert") else { return false }
        return ["certificate", "unknown ca", "handshake failure", "protocol version", "access denied",
                "insufficient security"].contains { text.contains($0) }
    }
}

/// Reads the address libcurl is about to connect to.
private func connectAddress(_ address: UnsafeMutablePointer<curl_sockaddr>) -> HTTPConnectAddress? {
    guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr) else { return nil }
    let raw = UnsafeRawPointer(address).advanced(by: offset)
    switch address.pointee.family {
    case AF_INET:
        let ipv4 = raw.loadUnaligned(as: sockaddr_in.self)
        let bytes = withUnsafeBytes(of: ipv4.sin_addr) { Array($0) }
        return HTTPConnectAddress(family: .ipv4, bytes: bytes, port: Int(UInt16(bigEndian: ipv4.sin_port)))
    case AF_INET6:
        guard Int(address.pointee.addrlen) >= MemoryLayout<sockaddr_in6>.size else { return nil }
        let ipv6 = raw.loadUnaligned(as: sockaddr_in6.self)
        let bytes = withUnsafeBytes(of: ipv6.sin6_addr) { Array($0) }
        return HTTPConnectAddress(family: .ipv6, bytes: bytes, port: Int(UInt16(bigEndian: ipv6.sin6_port)))
    default:
        return nil
    }
}
