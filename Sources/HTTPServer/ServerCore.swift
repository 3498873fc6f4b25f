internal import CMicroHTTPD
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The state MHD's callbacks reach through their `cls` pointer; owned by `HTTPServer`, which keeps it
/// alive until the daemon is stopped.
final class ServerCore: @unchecked Sendable {
    // Safe to share: configuration, router and callbacks are immutable; every mutable field below
    // `state` is only touched with `state` held.
    let configuration: HTTPServerConfiguration
    let router: Router
    let onRequestComplete: @Sendable (AccessLogEntry) -> Void
    let pool: WorkerPool
    let edgeRegistry = EdgeRegistry()

    let state = ConditionLock()
    private var inFlight = 0
    private var suspendedBoxes: [ObjectIdentifier: RequestBox] = [:]
    private var openStreams: [ObjectIdentifier: HTTPStream] = [:]
    private var draining = false
    private var forcedStop = false
    private var watchdogStop = false
    private var watchdogRunning = false

    init(configuration: HTTPServerConfiguration, router: Router,
         onRequestComplete: @escaping @Sendable (AccessLogEntry) -> Void) {
        self.configuration = configuration
        self.router = router
        self.onRequestComplete = onRequestComplete
        self.pool = WorkerPool(threads: configuration.workerThreads, queueMax: configuration.workerQueueMax)
    }

    // MARK: - Request lifecycle (MHD I/O threads)

    /// First callback: builds the box (the edge has already checked the framing of every request MHD reads).
    func begin(connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?) -> RequestBox {
        let headers = HTTPHeaders(PairCollector.collect(connection, MHD_ValueKind.HEADER_KIND))
        let query = PairCollector.collect(connection, MHD_ValueKind.GET_ARGUMENT_KIND)
        var address = [CChar](repeating: 0, count: 64)
        let remote = tender_mhd_client_address(connection, &address, socklen_t(address.count)) == 0
            ? String(decoding: address.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown"
        let box = RequestBox(connection: connection, method: method.map { String(cString: $0) } ?? "",
                             path: url.map { String(cString: $0) } ?? "/",
                             requestID: Self.requestID(from: headers), remoteAddress: remote,
                             headers: headers, query: query)
        state.withLock { inFlight += 1 }
        return box
    }

    /// Later callbacks: body chunks, then the final call (and the call after a resume).
    func laterCallback(_ box: RequestBox, data: UnsafePointer<CChar>?, size: UnsafeMutablePointer<Int>) -> MHD_Result {
        let count = size.pointee
        if count > 0 {
            size.pointee = 0
            if box.responseQueued || box.rejection != nil { return MHD_Result.YES }  // discard what follows a rejection
            guard box.body.count + count <= configuration.bodyBytesMax else {
                let problem = Self.bodyTooLarge(configuration.bodyBytesMax)
                box.rejection = problem
                // Try to answer at once; if MHD refuses mid-body, the rest is discarded and the final call answers.
                _ = queue(.problem(problem, requestID: box.requestID), for: box, close: true)
                return MHD_Result.YES
            }
            if let data {
                box.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count))
            }
            return MHD_Result.YES
        }
        if box.responseQueued { return MHD_Result.YES }
        if let rejection = box.rejection {
            return queue(.problem(rejection, requestID: box.requestID), for: box, close: true) ? MHD_Result.YES : MHD_Result.NO
        }
        if box.suspended {
            let ready: (HTTPResponse, HTTPStream?)? = box.outcome.withLock { state in
                guard case .ready(let response, let stream) = state else { return nil }
                state = .closed
                return (response, stream)
            }
            // A call without a ready response should not happen after a resume; wait for the next one.
            guard let (response, stream) = ready else { return MHD_Result.YES }
            return queue(response, stream: stream, for: box, close: false) ? MHD_Result.YES : MHD_Result.NO
        }
        return dispatch(box)
    }

    /// Completion callback: the last time MHD mentions this request.
    func completed(_ box: RequestBox) {
        let unclaimed: HTTPStream? = box.outcome.withLock { state in
            // The connection is going away: nothing may resume it any more.
            switch state {
            case .pending:
                state = .closed
                return nil
            case .ready(_, let stream):
                // Resumed but never called back (e.g. the daemon stopped): its stream never reached the wire.
                state = .closed
                return stream
            case .idle, .closed:
                return nil
            }
        }
        unclaimed?.connectionEnded()
        if let stream = box.stream {
            stream.connectionEnded()
            box.sentBodyBytes = stream.bytesDelivered
        }
        let elapsed = (monotonicNanoseconds() &- box.startNanoseconds) / 1_000
        onRequestComplete(AccessLogEntry(method: box.method, routePattern: box.routePattern, status: box.sentStatus,
                                         durationMicroseconds: Int64(clamping: elapsed), requestID: box.requestID,
                                         remoteAddress: box.remoteAddress, bodyBytes: box.sentBodyBytes))
        state.withLock {
            inFlight -= 1
            // Only a draining shutdown waits for in-flight requests; waking nobody saves a syscall per request.
            if draining { state.broadcast() }
        }
    }

    private func dispatch(_ box: RequestBox) -> MHD_Result {
        // Once shutdown has begun, new requests are refused so that only in-flight work drains.
        if state.withLock({ draining }) {
            let refusal = HTTPResponse.problem(Self.shuttingDown(retryAfter: configuration.retryAfterSeconds),
                                               requestID: box.requestID)
            return queue(refusal, for: box, close: true) ? MHD_Result.YES : MHD_Result.NO
        }
        let response: HTTPResponse
        switch router.match(method: box.method, path: box.path) {
        case .notFound:
            response = .problem(HTTPProblem(.routeNotFound,
                                            detail: "No route matches this path."), requestID: box.requestID)
        case .methodNotAllowed(let allowed):
            response = .problem(HTTPProblem(.methodNotAllowed,
                                            detail: "This path does not support this method.",
                                            headers: HTTPHeaders([("Allow", allowed.joined(separator: ", "))])),
                                requestID: box.requestID)
        case .found(let handler, let pattern, let parameters, let inline):
            box.routePattern = pattern
            var request = HTTPRequest(method: box.method, path: box.path, query: box.query, headers: box.headers,
                                      body: box.body, remoteAddress: box.remoteAddress, requestID: box.requestID)
            request.pathParameters = parameters
            request.routePattern = pattern
            box.body = []
            if inline {
                let result = Self.run(handler, request)
                guard let source = result.stream else {
                    response = result
                    break
                }
                let stream = makeStream(for: box)
                if let refusal = admit(stream, requestID: box.requestID) {
                    response = refusal
                    break
                }
                guard queue(result, stream: stream, for: box, close: false) else {
                    stream.close(reason: .notDelivered)
                    return MHD_Result.NO
                }
                source.producer(stream)
                return MHD_Result.YES
            } else {
                handOff(box, handler: handler, request: request)
                return MHD_Result.YES
            }
        }
        return queue(response, for: box, close: false) ? MHD_Result.YES : MHD_Result.NO
    }

    /// Suspends the connection and queues the handler for a worker; the worker (or the deadline
    /// watchdog, or shutdown) resumes it with the response.
    private func handOff(_ box: RequestBox, handler: @escaping HTTPHandler, request: HTTPRequest) {
        let deadline = monotonicNanoseconds() + UInt64(max(configuration.handlerDeadlineMilliseconds, 1)) * 1_000_000
        box.outcome.withLock { $0 = .pending(deadlineNanoseconds: deadline) }
        box.suspended = true
        // Suspend before anyone can resume: resume must follow suspend (MHD suspend/resume contract).
        MHD_suspend_connection(box.connection)
        let registered = state.withLock { () -> Bool in
            guard !forcedStop else { return false }
            suspendedBoxes[ObjectIdentifier(box)] = box
            return true
        }
        guard registered else {
            _ = box.complete(with: .problem(Self.shuttingDown(retryAfter: configuration.retryAfterSeconds),
                                            requestID: box.requestID))
            return
        }
        let accepted = pool.submit { [self] in
            let response = Self.run(handler, request)
            guard let source = response.stream else {
                // A late result (deadline passed, shutdown, client gone) finds the box no longer pending and is dropped.
                finish(box, with: response)
                return
            }
            let stream = makeStream(for: box)
            if let refusal = admit(stream, requestID: box.requestID) {
                finish(box, with: refusal)
                return
            }
            guard finish(box, with: response, stream: stream) else {
                stream.close(reason: .notDelivered)
                return
            }
            // The worker only starts the producer; the stream itself holds no thread from here on.
            source.producer(stream)
        }
        if !accepted {
            finish(box, with: .problem(HTTPProblem(.serverBusy,
                                                   detail: "The server is at capacity; retry later.",
                                                   headers: retryAfterHeaders), requestID: box.requestID))
        }
    }

    @discardableResult
    private func finish(_ box: RequestBox, with response: HTTPResponse, stream: HTTPStream? = nil) -> Bool {
        guard box.complete(with: response, stream: stream) else { return false }
        state.withLock { _ = suspendedBoxes.removeValue(forKey: ObjectIdentifier(box)) }
        return true
    }

    // MARK: - Streams

    private func makeStream(for box: RequestBox) -> HTTPStream {
        HTTPStream(connection: box.connection, bufferBytesMax: configuration.streamBufferBytesMax) { [weak self] stream in
            self?.streamClosed(stream)
        }
    }

    /// Registers a stream, or returns the 503 to send instead (too many streams, or shutting down).
    private func admit(_ stream: HTTPStream, requestID: String) -> HTTPResponse? {
        let problem: HTTPProblem? = state.withLock {
            if draining || forcedStop { return Self.shuttingDown(retryAfter: configuration.retryAfterSeconds) }
            guard openStreams.count < configuration.streamsMax else {
                return HTTPProblem(.tooManyStreams,
                                   detail: "The server has too many open streams; retry later.",
                                   headers: retryAfterHeaders)
            }
            openStreams[ObjectIdentifier(stream)] = stream
            return nil
        }
        return problem.map { .problem($0, requestID: requestID) }
    }

    private func streamClosed(_ stream: HTTPStream) {
        state.withLock { _ = openStreams.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    /// Ends every open stream (shutdown); their buffered bytes still go out before the last chunk.
    func closeAllStreams() {
        let streams = state.withLock { Array(openStreams.values) }
        for stream in streams { stream.close(reason: .serverShutdown) }
    }

    /// Runs a handler, mapping errors to problems; never lets an internal error's text reach the client.
    static func run(_ handler: HTTPHandler, _ request: HTTPRequest) -> HTTPResponse {
        do {
            return try handler(request)
        } catch let problem as HTTPProblem {
            return .problem(problem, requestID: request.requestID)
        } catch {
            return .problem(.internalError, requestID: request.requestID)
        }
    }

    /// Queues a response on the I/O thread, adding X-Request-Id and, when asked or draining, Connection: close.
    private func queue(_ response: HTTPResponse, stream: HTTPStream? = nil, for box: RequestBox, close: Bool) -> Bool {
        var response = response
        var stream = stream
        if !(100...599).contains(response.status) {
            response = .problem(.internalError, requestID: box.requestID)
            stream?.close(reason: .notDelivered)
            stream = nil
        }
        var headers = response.headers
        headers.replaceOrAdd("X-Request-Id", box.requestID)
        if close || state.withLock({ draining }) {
            headers.replaceOrAdd("Connection", "close")
        }
        let created: OpaquePointer?
        if let stream {
            // Told when the connection ends, even if queuing fails below.
            box.stream = stream
            // Unknown size on HTTP/1.1 makes MHD use chunked encoding (RFC 9112 §7.1); MHD holds a retain on
            // the stream until its free callback.
            let context = Unmanaged.passRetained(stream).toOpaque()
            created = MHD_create_response_from_callback(UInt64.max, Self.streamBlockBytes, StreamCallbacks.read,
                                                        context, StreamCallbacks.free)
            if created == nil { Unmanaged<HTTPStream>.fromOpaque(context).release() }
        } else {
            created = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                                MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
            }
        }
        guard let mhdResponse = created else { return false }
        defer { MHD_destroy_response(mhdResponse) }
        for (name, value) in headers where Self.isSafeHeader(name: name, value: value) {
            _ = MHD_add_response_header(mhdResponse, name, value)
        }
        guard MHD_queue_response(box.connection, UInt32(response.status), mhdResponse) == MHD_Result.YES else {
            return false
        }
        box.responseQueued = true
        box.sentStatus = response.status
        box.sentBodyBytes = stream == nil ? response.body.count : 0
        return true
    }

    /// MHD's preferred block size for streamed bodies (advisory; SSE events are small).
    static let streamBlockBytes = 4_096

    // MARK: - Problems

    /// The edge (RequestFramer) already refused any body over the limit; this bound only keeps MHD's side honest.
    static func bodyTooLarge(_ limit: Int) -> HTTPProblem {
        HTTPProblem(.bodyTooLarge,
                    detail: "The request body exceeds \(limit) bytes.")
    }

    static func shuttingDown(retryAfter: Int) -> HTTPProblem {
        HTTPProblem(.serverShuttingDown,
                    detail: "The server is shutting down; retry later.",
                    headers: HTTPHeaders([("Retry-After", String(retryAfter))]))
    }

    var retryAfterHeaders: HTTPHeaders { HTTPHeaders([("Retry-After", String(configuration.retryAfterSeconds))]) }

    /// RFC 9110 §5.1 token for names; no CR, LF or NUL in values (header injection). MHD sets the framing headers itself.
    static func isSafeHeader(name: String, value: String) -> Bool {
        guard !name.isEmpty, !HTTPHeaders.sameName(name, "Content-Length"),
              !HTTPHeaders.sameName(name, "Transfer-Encoding") else { return false }
        guard name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A)
                || ($0 >= 0x61 && $0 <= 0x7A) || tokenPunctuation.contains($0) }) else { return false }
        return !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    private static let tokenPunctuation = Array("!#$%&'*+-.^_`|~".utf8)

    // MARK: - Request ids

    /// Longest accepted client request id.
    static let requestIDLengthMax = 64

    /// The client's X-Request-Id when it is 1...64 chars of [A-Za-z0-9._-], else a fresh random id.
    static func requestID(from headers: HTTPHeaders) -> String {
        if let given = headers["X-Request-Id"], !given.isEmpty, given.utf8.count <= requestIDLengthMax,
           given.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
               || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }) {
            return given
        }
        // Unique, not secret: a per-process random prefix and a counter (no syscall per request).
        return requestIDPrefix + Self.hex(requestCounter.add(1, ordering: .relaxed).newValue)
    }

    private static let requestIDPrefix: String = {
        var generator = SystemRandomNumberGenerator()
        return hex(generator.next() as UInt64)
    }()
    private static let requestCounter = Atomic<UInt64>(0)

    private static func hex(_ value: UInt64) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }

    // MARK: - Deadlines, draining, stats

    /// Starts the thread that answers 503 for handlers past their deadline.
    func startWatchdog() -> Bool {
        state.withLock { watchdogRunning = true }
        let started = startDetachedThread { [self] in watchdog() }
        if !started { state.withLock { watchdogRunning = false } }
        return started
    }

    private func watchdog() {
        // Checks a few times per deadline, at most every 100 ms: precision is not the point, bounding the wait is.
        let tick = UInt64(min(100, max(5, configuration.handlerDeadlineMilliseconds / 4))) * 1_000_000
        state.lock()
        while !watchdogStop {
            state.wait(untilNanoseconds: monotonicNanoseconds() + tick)
            if watchdogStop { break }
            let boxes = Array(suspendedBoxes.values)
            state.unlock()
            let now = monotonicNanoseconds()
            for box in boxes {
                guard let deadline = box.pendingDeadline, deadline <= now else { continue }
                finish(box, with: .problem(HTTPProblem(.handlerDeadlineExceeded,
                                                       detail: "The request took too long; retry later.",
                                                       headers: retryAfterHeaders), requestID: box.requestID))
            }
            state.lock()
        }
        watchdogRunning = false
        state.broadcast()
        state.unlock()
    }

    /// Marks the server as draining: responses from now on carry Connection: close.
    func beginDraining() {
        state.withLock { draining = true }
    }

    /// Waits until no request is in flight or the deadline passes; true if drained.
    func waitForDrain(untilNanoseconds deadline: UInt64) -> Bool {
        state.withLock {
            while inFlight > 0 {
                if !state.wait(untilNanoseconds: deadline), monotonicNanoseconds() >= deadline { break }
            }
            return inFlight == 0
        }
    }

    /// Resumes every still-suspended connection with a 503 (MHD must not be stopped with suspended
    /// connections) and stops the watchdog; later hand-offs are refused.
    func forceResumeAll() {
        let boxes = state.withLock { () -> [RequestBox] in
            forcedStop = true
            watchdogStop = true
            state.broadcast()
            return Array(suspendedBoxes.values)
        }
        for box in boxes {
            finish(box, with: .problem(Self.shuttingDown(retryAfter: configuration.retryAfterSeconds),
                                       requestID: box.requestID))
        }
        state.withLock {
            while watchdogRunning { state.wait() }
        }
    }

    var stats: HTTPServerStats {
        let inFlight = state.withLock { self.inFlight }
        let streams = state.withLock { openStreams.count }
        return HTTPServerStats(inFlight: inFlight, queueDepth: pool.queueDepth, workersBusy: pool.busyCount,
                               workerThreads: pool.threadCount, openStreams: streams)
    }
}

extension String {
    /// Drops leading and trailing spaces and tabs (RFC 9110 §5.5 optional whitespace).
    func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
