import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One parsed HTTP response as read from the wire.
struct WireResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

enum RawClientError: Error {
    case connectFailed(Int32)
    case sendFailed
    case closedBeforeResponse
    case timedOut
    case badResponse
}

/// A blocking TCP client on 127.0.0.1 that sends raw bytes, so tests can send malformed requests.
/// Every read and write has a generous timeout, so a server bug shows up as a failure, not a hang.
final class RawClient {
    /// The socket; -1 once closed, so it is closed exactly once (a double close could hit an fd the server reused).
    private(set) var fd: Int32 = -1
    private var buffer: [UInt8] = []

    /// `receiveBufferBytes` shrinks the kernel receive buffer (set before connect so the window honours it).
    init(port: Int, timeoutSeconds: Int = 10, receiveBufferBytes: Int32? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawClientError.connectFailed(errno) }
        if var size = receiveBufferBytes {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw RawClientError.connectFailed(code)
        }
        self.fd = fd
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw RawClientError.sendFailed }
            offset += sent
        }
    }

    /// Reads more bytes; false on EOF or error, throws on timeout.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw RawClientError.timedOut }
        return false
    }

    /// Closes the socket now (a client going away).
    func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Reads a response's status line and headers only; the body stays buffered for `readChunk`.
    func readHead() throws -> WireResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        while buffer.firstRange(of: separator) == nil {
            guard try fill() else { throw RawClientError.closedBeforeResponse }
        }
        guard let end = buffer.firstRange(of: separator)?.lowerBound else { throw RawClientError.badResponse }
        let (status, headers) = try Self.parseHead(buffer[0..<end])
        buffer.removeFirst(end + 4)
        return WireResponse(status: status, headers: headers, body: [])
    }

    /// Reads one chunk of a chunked body (RFC 9112 §7.1); nil for the last chunk (its trailer section is consumed).
    func readChunk() throws -> [UInt8]? {
        let line = try readLine()
        let sizeText = line.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
        guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
            throw RawClientError.badResponse
        }
        if size == 0 {
            while try !readLine().isEmpty {}
            return nil
        }
        while buffer.count < size + 2 {
            guard try fill() else { throw RawClientError.closedBeforeResponse }
        }
        guard buffer[size] == 13, buffer[size + 1] == 10 else { throw RawClientError.badResponse }
        let chunk = Array(buffer[0..<size])
        buffer.removeFirst(size + 2)
        return chunk
    }

    /// Reads chunks until the text read so far ends with `count` SSE events (blank-line terminated);
    /// nil when the body ends first.
    func readEvents(_ count: Int) throws -> String? {
        var text = ""
        while text.components(separatedBy: "\n\n").count - 1 < count {
            guard let chunk = try readChunk() else { return nil }
            text += String(decoding: chunk, as: UTF8.self)
        }
        return text
    }

    private func readLine() throws -> String {
        let crlf: [UInt8] = [13, 10]
        while buffer.firstRange(of: crlf) == nil {
            guard try fill() else { throw RawClientError.closedBeforeResponse }
        }
        guard let end = buffer.firstRange(of: crlf)?.lowerBound else { throw RawClientError.badResponse }
        let line = String(decoding: buffer[0..<end], as: UTF8.self)
        buffer.removeFirst(end + 2)
        return line
    }

    private static func parseHead(_ bytes: ArraySlice<UInt8>) throws -> (Int, [(String, String)]) {
        let head = String(decoding: bytes, as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw RawClientError.badResponse }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return (status, headers)
    }

    /// Reads one response framed by Content-Length (what the server always sends).
    func readResponse() throws -> WireResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while headerEnd == nil {
            if let range = buffer.firstRange(of: separator) { headerEnd = range.lowerBound; break }
            guard try fill() else { throw RawClientError.closedBeforeResponse }
        }
        guard let end = headerEnd else { throw RawClientError.badResponse }
        let head = String(decoding: buffer[0..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw RawClientError.badResponse }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        let bodyStart = end + 4
        while buffer.count < bodyStart + length {
            guard try fill() else { throw RawClientError.closedBeforeResponse }
        }
        let body = Array(buffer[bodyStart..<(bodyStart + length)])
        buffer.removeFirst(bodyStart + length)
        return WireResponse(status: status, headers: headers, body: body)
    }

    /// True when the server closes the connection (EOF or reset) before the timeout; bytes read meanwhile are discarded.
    func waitForClose() -> Bool {
        buffer.removeAll()
        while true {
            do {
                guard try fill() else { return true }
                buffer.removeAll()
            } catch {
                return false
            }
        }
    }

    /// Every byte that arrives until the server closes; nil if it stays open past the timeout.
    func bytesUntilClose() -> [UInt8]? {
        while true {
            do {
                guard try fill() else {
                    defer { buffer.removeAll() }
                    return buffer
                }
            } catch {
                return nil
            }
        }
    }

    /// Half-closes: no more bytes from this client, responses still arrive.
    func finishSending() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Sends one request and reads its response.
    func roundTrip(_ request: String) throws -> WireResponse {
        try send(request)
        return try readResponse()
    }
}

/// Polls a condition until it holds or a generous timeout passes.
func eventually(timeoutSeconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(timeoutSeconds)
    while Date() < end {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}
