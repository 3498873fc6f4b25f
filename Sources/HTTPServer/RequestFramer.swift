/// Tender's own HTTP/1.1 request framing, run on the raw bytes of a connection before libmicrohttpd sees
/// any of them (RFC 9112). It accepts only the unambiguous form of every request: a request head that two
/// parsers could read differently is refused, never "repaired". What it forwards is a canonical copy
/// (one space after each colon, no optional whitespace, no chunk extensions, no trailers), so MHD reads
/// exactly the message the framer read. Pure: bytes in, bytes out, no I/O and no clock.
struct RequestFramer {
    /// Limits the framer enforces; the edge fills them from `HTTPServerConfiguration`.
    struct Limits: Sendable {
        var headBytesMax: Int
        var requestTargetBytesMax: Int
        var headerFieldsMax: Int
        var bodyBytesMax: Int
        var chunkLineBytesMax = 1_024
    }

    /// Where the framer is between requests.
    enum Phase: Equatable {
        /// Waiting for the first byte of a request head.
        case idle
        /// Some of a request head has arrived.
        case head
        /// The head was forwarded; its body is arriving.
        case body
        /// A problem was found: nothing more is read.
        case failed
    }

    /// A refusal: the HTTP status, the stable code, and whether the request it concerns was already
    /// forwarded in part (its head went to MHD before its body turned out to be bad).
    struct Refusal: Error, Equatable {
        var status: Int
        var code: String
        var detail: String
        var requestWasForwarded: Bool
    }

    private enum BodyState {
        case none
        case length(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
    }

    let limits: Limits
    private(set) var phase: Phase = .idle
    /// Request heads forwarded so far on this connection.
    private(set) var requestsForwarded = 0
    private var pending: [UInt8] = []
    private var body: BodyState = .none
    private var bodyBytes = 0
    private var trailerBytes = 0
    private var trailerFields = 0

    init(limits: Limits) {
        self.limits = limits
    }

    /// A validated request head without a body, offered to the edge to answer itself.
    struct BodilessHead {
        var method: ArraySlice<UInt8>
        var target: ArraySlice<UInt8>
        var isHTTP11: Bool
        var fields: [(name: String, value: ArraySlice<UInt8>)]
    }

    /// Consumes `input`, appending what MHD may read to `output`. Throws the first refusal; after one,
    /// the connection must answer it and close.
    ///
    /// `answer`, when given, is offered each complete bodiless head that comes before anything this call
    /// forwards; a head it returns true for was answered by the caller: it is consumed, not forwarded and
    /// not counted in `requestsForwarded`. So an answered request never overtakes a forwarded one.
    mutating func consume(_ input: UnsafeRawBufferPointer, into output: inout [UInt8],
                          answer: ((BodilessHead) -> Bool)? = nil) throws(Refusal) {
        guard phase != .failed else { return }
        pending.append(contentsOf: input)
        do {
            try drain(into: &output, answer: answer)
        } catch {
            phase = .failed
            pending = []
            throw error
        }
    }

    private mutating func drain(into output: inout [UInt8], answer: ((BodilessHead) -> Bool)?) throws(Refusal) {
        var offset = 0
        let outputStart = output.count
        defer { if offset > 0 { pending.removeFirst(offset) } }
        while offset < pending.count {
            switch body {
            case .none:
                let offer = output.count == outputStart ? answer : nil
                guard let used = try head(from: offset, into: &output, answer: offer) else { return }
                offset += used
            case .length(let remaining):
                let take = min(remaining, pending.count - offset)
                output.append(contentsOf: pending[offset..<(offset + take)])
                offset += take
                if take == remaining { endRequest() } else { body = .length(remaining: remaining - take) }
            case .chunkSize:
                guard let line = try line(from: offset, max: limits.chunkLineBytesMax, forwarded: true) else { return }
                let size = try Self.chunkSize(pending[offset..<line.end])
                offset = line.next
                guard size <= limits.bodyBytesMax - bodyBytes else {
                    throw Self.bodyTooLarge(limits.bodyBytesMax, forwarded: true)
                }
                bodyBytes += size
                if size == 0 {
                    output.append(contentsOf: Self.lastChunk)
                    body = .trailers
                } else {
                    output.append(contentsOf: Array(String(size, radix: 16).utf8) + Self.crlf)
                    body = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                let take = min(remaining, pending.count - offset)
                output.append(contentsOf: pending[offset..<(offset + take)])
                offset += take
                body = take == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - take)
            case .chunkDataEnd:
                guard pending.count - offset >= 2 else {
                    if pending[offset] != 0x0D { throw Self.badChunk }
                    return
                }
                guard pending[offset] == 0x0D, pending[offset + 1] == 0x0A else { throw Self.badChunk }
                offset += 2
                output.append(contentsOf: Self.crlf)
                body = .chunkSize
            case .trailers:
                // RFC 9112 §7.1.2: trailer fields are validated like header fields and not forwarded.
                let room = limits.headBytesMax - trailerBytes
                guard let line = try line(from: offset, max: room, forwarded: true) else { return }
                trailerBytes += line.next - offset
                if line.end == offset {
                    offset = line.next
                    output.append(contentsOf: Self.crlf)
                    endRequest()
                    continue
                }
                trailerFields += 1
                guard trailerFields <= limits.headerFieldsMax else {
                    throw Refusal(status: 431, code: "header_fields_too_large", detail: "The request has too many trailer fields.",
                                  requestWasForwarded: true)
                }
                _ = try Self.field(pending[offset..<line.end], forwarded: true)
                offset = line.next
            }
        }
    }

    private mutating func endRequest() {
        body = .none
        phase = .idle
        bodyBytes = 0
        trailerBytes = 0
        trailerFields = 0
    }

    // MARK: - Head

    /// Parses one complete head at `offset` and forwards its canonical form; nil while incomplete.
    /// Returns the bytes used.
    private mutating func head(from start: Int, into output: inout [UInt8],
                               answer: ((BodilessHead) -> Bool)?) throws(Refusal) -> Int? {
        var offset = start
        // RFC 9112 §2.2: empty lines before the request line are ignored.
        while pending.count - offset >= 2, pending[offset] == 0x0D, pending[offset + 1] == 0x0A { offset += 2 }
        if offset == pending.count || (pending.count - offset == 1 && pending[offset] == 0x0D) {
            return offset > start ? offset - start : nil
        }
        phase = .head
        var lines: [Range<Int>] = []
        var cursor = offset
        while true {
            let room = limits.headBytesMax - (cursor - offset)
            guard room > 0 else { throw Self.headTooLarge }
            let lineMax = lines.isEmpty ? min(room, limits.requestTargetBytesMax + Self.requestLineOverheadBytesMax) : room
            guard let line = try line(from: cursor, max: lineMax, forwarded: false, requestLine: lines.isEmpty) else {
                return nil
            }
            if line.end == cursor {
                cursor = line.next
                break
            }
            lines.append(cursor..<line.end)
            guard lines.count <= limits.headerFieldsMax + 1 else {
                throw Refusal(status: 431, code: "header_fields_too_large", detail: "The request has too many header fields.",
                              requestWasForwarded: false)
            }
            cursor = line.next
        }
        let head = try Self.parseHead(lines.map { pending[$0] }, limits: limits)
        if let answer, let bodiless = head.bodiless, answer(bodiless) {
            endRequest()
            return cursor - start
        }
        output.append(contentsOf: head.canonical)
        requestsForwarded += 1
        switch head.framing {
        case .none:
            endRequest()
        case .length(0):
            endRequest()
        case .length(let count):
            phase = .body
            body = .length(remaining: count)
        case .chunked:
            phase = .body
            body = .chunkSize
        }
        return cursor - start
    }

    /// Longest request line beyond the target: a method, two spaces and "HTTP/1.1".
    static let requestLineOverheadBytesMax = 32

    /// Finds the CRLF ending the line at `start`; nil while it has not arrived. Refuses a bare CR, a
    /// bare LF, NUL, or a line longer than `max`.
    private func line(from start: Int, max: Int, forwarded: Bool, requestLine: Bool = false) throws(Refusal) -> (end: Int, next: Int)? {
        var index = start
        while index < pending.count {
            let byte = pending[index]
            if byte == 0x0A {
                // RFC 9112 §2.2: a bare LF is not a line ending Tender accepts (it is how requests get split twice).
                throw Refusal(status: 400, code: "invalid_line_ending", detail: "Lines must end with CRLF.",
                              requestWasForwarded: forwarded)
            }
            if byte == 0x0D {
                guard index + 1 < pending.count else { return nil }
                guard pending[index + 1] == 0x0A else {
                    // RFC 9112 §2.2: a bare CR must be refused (or replaced); Tender refuses.
                    throw Refusal(status: 400, code: "invalid_line_ending", detail: "A CR must be followed by LF.",
                                  requestWasForwarded: forwarded)
                }
                return (index, index + 2)
            }
            if index - start >= max {
                if requestLine {
                    throw Refusal(status: 414, code: "uri_too_long", detail: "The request target is too long.",
                                  requestWasForwarded: false)
                }
                if forwarded {
                    throw Refusal(status: 400, code: "invalid_chunk", detail: "A chunk line is too long.",
                                  requestWasForwarded: true)
                }
                throw Self.headTooLarge
            }
            index += 1
        }
        return nil
    }

    /// What follows a head.
    enum Framing: Equatable {
        case none
        case length(Int)
        case chunked
    }

    /// A validated head: how its body is framed, and the canonical bytes MHD reads.
    struct Head {
        var framing: Framing
        var canonical: [UInt8]
        /// The parts of a head without a body (no Content-Length above 0, not chunked).
        var bodiless: BodilessHead?
    }

    /// Validates a request line and its fields (RFC 9112 §3, §5, §6; RFC 9110 §5, §10.1.1).
    static func parseHead(_ lines: [ArraySlice<UInt8>], limits: Limits) throws(Refusal) -> Head {
        guard let requestLine = lines.first else { throw malformedRequestLine }
        let parts = requestLine.split(separator: 0x20, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { throw malformedRequestLine }
        let target = parts[1]
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw malformedRequestLine }
        guard target.count <= limits.requestTargetBytesMax else {
            throw Refusal(status: 414, code: "uri_too_long", detail: "The request target is too long.", requestWasForwarded: false)
        }
        let version = parts[2]
        let versionBytes = Array(version)
        guard versionBytes.count == 8, versionBytes.starts(with: Array("HTTP/".utf8)),
              isDigit(versionBytes[5]), versionBytes[6] == 0x2E, isDigit(versionBytes[7]) else {
            throw malformedRequestLine
        }
        guard versionBytes[5] == 0x31, versionBytes[7] == 0x30 || versionBytes[7] == 0x31 else {
            throw Refusal(status: 505, code: "http_version_not_supported", detail: "Only HTTP/1.1 and HTTP/1.0 are supported.",
                          requestWasForwarded: false)
        }
        let isHTTP11 = versionBytes[7] == 0x31

        var fields: [(name: String, value: ArraySlice<UInt8>)] = []
        fields.reserveCapacity(lines.count - 1)
        var hosts = 0
        var lengths: [ArraySlice<UInt8>] = []
        var codings: [ArraySlice<UInt8>] = []
        var expectations: [ArraySlice<UInt8>] = []
        for line in lines.dropFirst() {
            let field = try Self.field(line, forwarded: false)
            switch field.name.lowercased() {
            case "host": hosts += 1
            case "content-length": lengths.append(field.value)
            case "transfer-encoding": codings.append(field.value)
            case "expect": expectations.append(field.value)
            default: break
            }
            fields.append(field)
        }
        // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is answered 400.
        if isHTTP11 && hosts != 1 || hosts > 1 {
            throw Refusal(status: 400, code: hosts == 0 ? "missing_host" : "multiple_host",
                          detail: "An HTTP/1.1 request must carry exactly one Host header.", requestWasForwarded: false)
        }
        if let host = fields.first(where: { $0.name.lowercased() == "host" }),
           !host.value.allSatisfy({ isTokenByte($0) || $0 == 0x3A || $0 == 0x5B || $0 == 0x5D || $0 == 0x40 }) {
            throw Refusal(status: 400, code: "invalid_host", detail: "The Host header is not a host[:port].",
                          requestWasForwarded: false)
        }
        // RFC 9112 §6.1, §6.3: Content-Length with Transfer-Encoding, or more than one Content-Length, is a smuggling vector.
        if !lengths.isEmpty && !codings.isEmpty || lengths.count > 1 {
            throw Refusal(status: 400, code: "request_smuggling_rejected",
                          detail: "The request has conflicting Content-Length or Transfer-Encoding headers.",
                          requestWasForwarded: false)
        }
        var framing = Framing.none
        if !codings.isEmpty {
            // RFC 9112 §6.1: a transfer coding in HTTP/1.0 is faulty framing; only one plain "chunked" is supported.
            guard isHTTP11, codings.count == 1, asciiLowercased(codings[0]) == Array("chunked".utf8) else {
                throw Refusal(status: 400, code: "unsupported_transfer_encoding",
                              detail: "Only Transfer-Encoding: chunked is supported.", requestWasForwarded: false)
            }
            framing = .chunked
        }
        if let length = lengths.first {
            guard !length.isEmpty, length.allSatisfy(isDigit) else {
                throw Refusal(status: 400, code: "invalid_content_length",
                              detail: "The Content-Length header is not a decimal number.", requestWasForwarded: false)
            }
            let digits = length.drop { $0 == 0x30 }
            var value = 0
            if digits.count > 18 { throw bodyTooLarge(limits.bodyBytesMax, forwarded: false) }
            for digit in digits { value = value * 10 + Int(digit - 0x30) }
            guard value <= limits.bodyBytesMax else { throw bodyTooLarge(limits.bodyBytesMax, forwarded: false) }
            framing = .length(value)
        }
        // RFC 9110 §10.1.1: an expectation other than 100-continue is answered 417.
        if !expectations.isEmpty {
            guard expectations.count == 1, asciiLowercased(expectations[0]) == Array("100-continue".utf8) else {
                throw Refusal(status: 417, code: "expectation_failed",
                              detail: "Only Expect: 100-continue is supported.", requestWasForwarded: false)
            }
        }

        var canonical: [UInt8] = []
        canonical.reserveCapacity(requestLine.count + lines.reduce(0) { $0 + $1.count } + 2 * lines.count + 2)
        canonical.append(contentsOf: requestLine)
        canonical.append(contentsOf: crlf)
        for field in fields {
            canonical.append(contentsOf: field.name.utf8)
            canonical.append(0x3A)
            canonical.append(0x20)
            canonical.append(contentsOf: field.value)
            canonical.append(contentsOf: crlf)
        }
        canonical.append(contentsOf: crlf)
        let bodiless = framing == .none || framing == .length(0)
            ? BodilessHead(method: parts[0], target: target, isHTTP11: isHTTP11, fields: fields) : nil
        return Head(framing: framing, canonical: canonical, bodiless: bodiless)
    }

    /// One field line: a token name, a colon with nothing before it, and a value of visible characters,
    /// spaces and tabs, with its optional whitespace removed (RFC 9110 §5.1, §5.5; RFC 9112 §5.1, §5.2).
    static func field(_ line: ArraySlice<UInt8>, forwarded: Bool) throws(Refusal) -> (name: String, value: ArraySlice<UInt8>) {
        guard let first = line.first else { throw malformedHeader(forwarded) }
        if first == 0x20 || first == 0x09 {
            // RFC 9112 §5.2: obs-fold is refused with 400.
            throw Refusal(status: 400, code: "obsolete_line_folding", detail: "Header lines must not be folded.",
                          requestWasForwarded: forwarded)
        }
        guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else { throw malformedHeader(forwarded) }
        let name = line[line.startIndex..<colon]
        guard name.allSatisfy(isTokenByte) else {
            // RFC 9112 §5.1: whitespace between the name and the colon MUST be answered 400.
            throw malformedHeader(forwarded)
        }
        var value = line[(colon + 1)...]
        while let byte = value.first, byte == 0x20 || byte == 0x09 { value = value.dropFirst() }
        while let byte = value.last, byte == 0x20 || byte == 0x09 { value = value.dropLast() }
        guard value.allSatisfy({ $0 == 0x09 || $0 >= 0x20 && $0 != 0x7F }) else {
            throw Refusal(status: 400, code: "invalid_header_value",
                          detail: "A header value holds a control character.", requestWasForwarded: forwarded)
        }
        return (String(decoding: name, as: UTF8.self), value)
    }

    /// A chunk-size line: hex digits, then optional extensions (RFC 9112 §7.1.1), which are validated and dropped.
    static func chunkSize(_ line: ArraySlice<UInt8>) throws(Refusal) -> Int {
        let digits = line.prefix { isHexDigit($0) }
        guard !digits.isEmpty else { throw badChunk }
        let significant = digits.drop { $0 == 0x30 }
        guard significant.count <= 15 else { throw bodyTooLarge(Int.max, forwarded: true) }
        var size = 0
        for digit in significant { size = size * 16 + hexValue(digit) }
        let rest = line[digits.endIndex...]
        if !rest.isEmpty {
            // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ); Tender takes the no-whitespace form.
            guard rest.first == 0x3B else { throw badChunk }
            for extensionPart in rest.dropFirst().split(separator: 0x3B, omittingEmptySubsequences: false) {
                let pieces = extensionPart.split(separator: 0x3D, maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = pieces.first, !name.isEmpty, name.allSatisfy(isTokenByte) else { throw badChunk }
                if pieces.count == 2 {
                    let value = pieces[1]
                    let quoted = value.count >= 2 && value.first == 0x22 && value.last == 0x22
                        && value.dropFirst().dropLast().allSatisfy { $0 != 0x22 && $0 != 0x5C && ($0 == 0x09 || $0 >= 0x20 && $0 != 0x7F) }
                    guard quoted || !value.isEmpty && value.allSatisfy(isTokenByte) else { throw badChunk }
                }
            }
        }
        return size
    }

    // MARK: - Bytes

    static let crlf: [UInt8] = [0x0D, 0x0A]
    static let lastChunk: [UInt8] = Array("0\r\n".utf8)

    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    static func hexValue(_ byte: UInt8) -> Int {
        isDigit(byte) ? Int(byte - 0x30) : Int((byte | 0x20) - 0x61 + 10)
    }

    /// RFC 9110 §5.6.2 tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: return true
        default: return false
        }
    }

    static func asciiLowercased(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }

    static let malformedRequestLine = Refusal(status: 400, code: "malformed_request_line",
                                              detail: "The request line is not METHOD SP target SP HTTP/x.y.",
                                              requestWasForwarded: false)
    static let headTooLarge = Refusal(status: 431, code: "header_fields_too_large",
                                      detail: "The request head is too large.", requestWasForwarded: false)
    static let badChunk = Refusal(status: 400, code: "invalid_chunk", detail: "The chunked body is malformed.",
                                  requestWasForwarded: true)

    static func malformedHeader(_ forwarded: Bool) -> Refusal {
        Refusal(status: 400, code: "malformed_header",
                detail: "A header line is not name \":\" value (no whitespace before the colon).",
                requestWasForwarded: forwarded)
    }

    static func bodyTooLarge(_ limit: Int, forwarded: Bool) -> Refusal {
        Refusal(status: 413, code: "body_too_large", detail: "The request body exceeds \(limit) bytes.",
                requestWasForwarded: forwarded)
    }
}
