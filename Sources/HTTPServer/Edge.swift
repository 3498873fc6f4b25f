internal import CMicroHTTPD
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Tender's front door. libmicrohttpd's own parser is lenient in ways that split one request into two
/// (whitespace before a colon, obs-fold, a NUL or bare CR in a value, a padded Transfer-Encoding), so
/// MHD never reads a client's bytes: the edge accepts every connection, runs `RequestFramer` over the
/// raw stream, and relays only canonical requests to MHD through a local socket pair. Responses flow
/// back untouched. The edge also owns what MHD lacks: header and body deadlines, early problem+json
/// refusals for every framing error, and a lingering close so a refusal reaches the client.
final class Edge: Sendable {
    struct Settings: Sendable {
        var loops: Int
        var framer: RequestFramer.Limits
        var headerTimeoutNanoseconds: UInt64
        var bodyTimeoutNanoseconds: UInt64
        /// How long a connection waits for earlier pipelined responses (or for a client's last bytes) before it is cut.
        var lingerNanoseconds: UInt64
        var connectionsMax: Int
        var connectionsPerAddressMax: Int
        var relayBytesMax: Int
        /// Bodiless GET routes with a literal path whose handlers run inline (`Router.add(_:_:inline:_:)`),
        /// by path: the edge answers them itself, without the relay through MHD, whenever nothing is in
        /// flight on the connection (so a response never overtakes an earlier one).
        var inlineRoutes: [String: HTTPHandler] = [:]
        /// Told of every request the edge answered itself, as ServerCore tells of the others.
        var onInlineComplete: (@Sendable (AccessLogEntry) -> Void)?
    }

    let settings: Settings
    let registry: EdgeRegistry
    private let listener: Int32
    private let loops: [EdgeLoop]
    /// The port really bound.
    let boundPort: Int

    /// Binds the listening socket; loops start with `start(daemon:)`.
    init(host: String, port: Int, settings: Settings, registry: EdgeRegistry) throws(HTTPServerError) {
        var bound: UInt16 = 0
        var error: Int32 = 0
        let fd = tender_edge_listen(host, UInt16(port), 1_024, &bound, &error)
        guard fd >= 0 else {
            throw HTTPServerError(code: "bind_failed", message: Self.bindFailure(host: host, port: port, errno: error))
        }
        tender_raise_file_limit()
        self.settings = settings
        self.registry = registry
        self.listener = fd
        self.boundPort = Int(bound)
        let counts = EdgeCounts()
        self.loops = (0..<settings.loops).map { _ in EdgeLoop(listener: fd, settings: settings, registry: registry,
                                                               counts: counts) }
    }

    /// Why listening failed, naming the address: the operator's first question.
    static func bindFailure(host: String, port: Int, errno: Int32) -> String {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        switch errno {
        case -1: return "\(host) is not a numeric IPv4 or IPv6 address."
        case EADDRINUSE: return "\(address) is already in use by another process."
        case EACCES: return "Not permitted to listen on \(address) (ports below 1024 need privileges)."
        case EADDRNOTAVAIL: return "\(host) is not an address of this machine."
        default: return "Could not listen on \(address) (errno \(errno))."
        }
    }

    /// Starts one thread per loop; false if a thread or epoll set could not be made.
    func start(daemon: OpaquePointer) -> Bool {
        let handle = DaemonHandle(pointer: daemon)
        for loop in loops {
            guard loop.start(daemon: handle) else {
                stop(flushDeadlineNanoseconds: monotonicNanoseconds())
                return false
            }
        }
        return true
    }

    /// Stops accepting, relays what MHD already wrote until the deadline, then closes every connection.
    func stop(flushDeadlineNanoseconds: UInt64) {
        for loop in loops { loop.requestStop(flushDeadlineNanoseconds: flushDeadlineNanoseconds) }
        for loop in loops { loop.waitStopped() }
        close(listener)
    }
}

/// MHD's daemon handle, shared by the loops; MHD_add_connection is thread-safe.
struct DaemonHandle: @unchecked Sendable {
    // Safe to share: only passed to MHD_add_connection, which MHD documents as callable from any thread,
    // and only while the daemon runs (the edge stops after MHD_stop_daemon has returned, and adds nothing then).
    let pointer: OpaquePointer
}

/// Connection counts shared by all loops, for the total and per-address limits.
final class EdgeCounts: Sendable {
    private let counts = Mutex<(total: Int, byAddress: [String: Int])>((0, [:]))

    /// Takes a slot for `address`; false when either limit is reached.
    func admit(_ address: String, totalMax: Int, perAddressMax: Int) -> Bool {
        counts.withLock { counts in
            let current = counts.byAddress[address, default: 0]
            guard counts.total < totalMax, current < perAddressMax else { return false }
            counts.total += 1
            counts.byAddress[address] = current + 1
            return true
        }
    }

    func release(_ address: String) {
        counts.withLock { counts in
            counts.total -= 1
            let current = counts.byAddress[address, default: 1] - 1
            counts.byAddress[address] = current > 0 ? current : nil
        }
    }
}

/// How many responses MHD has written in full on one connection, and whether its loop waits to hear of
/// the next one (only a pending refusal or a half-closed client does: the common case costs no wake-up).
final class EdgeCompletions: Sendable {
    let count = Atomic<Int>(0)
    let waiting = Atomic<Bool>(false)
}

/// Maps the MHD side of each socket pair to the loop and connection that own it, so MHD's completion
/// callback can tell the edge that a response has been written in full.
final class EdgeRegistry: Sendable {
    private struct Entry {
        let loop: EdgeLoop
        let id: UInt64
        let completions: EdgeCompletions
    }

    private let entries = Mutex<[Int32: Entry]>([:])

    /// Registered before MHD gets the descriptor. A descriptor number is reused only after MHD closed it,
    /// which is after its last completion, so overwriting a stale entry is safe.
    func register(mhdDescriptor: Int32, loop: EdgeLoop, id: UInt64, completions: EdgeCompletions) {
        entries.withLock { $0[mhdDescriptor] = Entry(loop: loop, id: id, completions: completions) }
    }

    func remove(mhdDescriptor: Int32, id: UInt64) {
        entries.withLock { entries in
            if entries[mhdDescriptor]?.id == id { entries[mhdDescriptor] = nil }
        }
    }

    /// Called on an MHD thread when a request on that descriptor completed.
    func completed(mhdDescriptor: Int32) {
        guard let entry = entries.withLock({ $0[mhdDescriptor] }) else { return }
        // Sequentially consistent with the loop's store of `waiting` and load of `count`: one of the two
        // sides always sees the other, so a waiting connection never misses its last completion.
        entry.completions.count.wrappingAdd(1, ordering: .sequentiallyConsistent)
        if entry.completions.waiting.load(ordering: .sequentiallyConsistent) { entry.loop.post(completionOf: entry.id) }
    }
}

/// One epoll loop on its own thread; owns the connections it accepted.
final class EdgeLoop: @unchecked Sendable {
    // Safe to share: `connections`, `nextID` and the descriptors' interest are touched only on the loop's
    // own thread; other threads reach the loop only through `mailbox` (a Mutex) and the eventfd.

    private static let listenerToken: UInt64 = 0
    private static let wakeToken: UInt64 = 1
    private static let readBytes = 65_536

    private let listener: Int32
    private let settings: Edge.Settings
    private let registry: EdgeRegistry
    private let counts: EdgeCounts
    private let epoll: Int32
    private let wake: Int32
    private let mailbox = Mutex<(completions: [UInt64], stopAt: UInt64?)>(([], nil))
    private let stopped = ConditionLock()
    private var running = false
    private var connections: [UInt64: EdgeConnection] = [:]
    private var nextID: UInt64 = 1
    private var daemon: DaemonHandle?
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: EdgeLoop.readBytes, alignment: 16)

    init(listener: Int32, settings: Edge.Settings, registry: EdgeRegistry, counts: EdgeCounts) {
        self.listener = listener
        self.settings = settings
        self.registry = registry
        self.counts = counts
        self.epoll = tender_epoll_create()
        self.wake = tender_eventfd()
    }

    deinit {
        readBuffer.deallocate()
        if epoll >= 0 { close(epoll) }
        if wake >= 0 { close(wake) }
    }

    func start(daemon: DaemonHandle) -> Bool {
        guard epoll >= 0, wake >= 0 else { return false }
        self.daemon = daemon
        // EPOLLEXCLUSIVE: one loop wakes per new connection.
        guard tender_epoll_ctl(epoll, 1, listener, tender_epoll_in | tender_epoll_exclusive, Self.listenerToken) == 0,
              tender_epoll_ctl(epoll, 1, wake, tender_epoll_in, Self.wakeToken) == 0 else { return false }
        stopped.withLock { running = true }
        let started = startDetachedThread { [self] in run() }
        if !started { stopped.withLock { running = false } }
        return started
    }

    func post(completionOf id: UInt64) {
        let wasEmpty = mailbox.withLock { box in
            box.completions.append(id)
            return box.completions.count == 1
        }
        if wasEmpty { tender_eventfd_signal(wake) }
    }

    func requestStop(flushDeadlineNanoseconds: UInt64) {
        mailbox.withLock { $0.stopAt = flushDeadlineNanoseconds }
        tender_eventfd_signal(wake)
    }

    func waitStopped() {
        stopped.withLock {
            while running { stopped.wait() }
        }
    }

    // MARK: - The loop

    private func run() {
        let capacity = 256
        var datas = [UInt64](repeating: 0, count: capacity)
        var masks = [UInt32](repeating: 0, count: capacity)
        var stopAt: UInt64?
        var nextSweep = monotonicNanoseconds() + Self.sweepNanoseconds
        while true {
            let timeout = connections.isEmpty && stopAt == nil ? 1_000 : 50
            let count = tender_epoll_wait(epoll, &datas, &masks, Int32(capacity), Int32(timeout))
            let (completions, stopRequest) = mailbox.withLock { box -> ([UInt64], UInt64?) in
                let taken = box.completions
                box.completions.removeAll(keepingCapacity: true)
                return (taken, box.stopAt)
            }
            if stopAt == nil, let stopRequest {
                stopAt = stopRequest
                _ = tender_epoll_ctl(epoll, 2, listener, 0, 0)
                for connection in connections.values { connection.serverStopping() }
            }
            for id in completions { connections[id]?.requestCompleted() }
            for index in 0..<max(0, Int(count)) {
                let token = datas[index]
                switch token {
                case Self.listenerToken:
                    if stopAt == nil { acceptAll() }
                case Self.wakeToken:
                    tender_eventfd_clear(wake)
                default:
                    connections[token >> 1]?.handle(inner: token & 1 == 1, mask: masks[index])
                }
            }
            let now = monotonicNanoseconds()
            if now >= nextSweep {
                nextSweep = now + Self.sweepNanoseconds
                for connection in connections.values { connection.checkDeadlines(now: now) }
            }
            reap()
            if let stopAt, connections.values.allSatisfy({ !$0.hasOutput }) || now >= stopAt {
                break
            }
        }
        for connection in connections.values { connection.closeAll() }
        reap()
        stopped.withLock {
            running = false
            stopped.broadcast()
        }
    }

    /// Deadlines are checked this often; precision is not the point, bounding the wait is.
    private static let sweepNanoseconds: UInt64 = 100_000_000

    private func reap() {
        var dead: [UInt64] = []
        for (id, connection) in connections where connection.isClosed { dead.append(id) }
        for id in dead {
            guard let connection = connections.removeValue(forKey: id) else { continue }
            registry.remove(mhdDescriptor: connection.mhdDescriptor, id: id)
            counts.release(connection.address)
        }
    }

    private func acceptAll() {
        var peer = sockaddr_storage()
        var length = socklen_t(0)
        for _ in 0..<64 {
            let client = tender_edge_accept(listener, &peer, &length)
            guard client >= 0 else {
                let code = tender_errno()
                // Out of descriptors (EMFILE/ENFILE) or memory: the listener stays readable, so pause briefly
                // instead of spinning; waiting connections stay in the backlog.
                if tender_errno_would_block(code) == 0 && code != EINTR && code != ECONNABORTED { usleep(10_000) }
                return
            }
            var text = [CChar](repeating: 0, count: 64)
            let address = tender_edge_peer_text(&peer, &text, socklen_t(text.count)) == 0
                ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown"
            guard counts.admit(address, totalMax: settings.connectionsMax, perAddressMax: settings.connectionsPerAddressMax) else {
                EdgeConnection.refuseAtOnce(client, status: 503, code: "too_many_connections",
                                            detail: "The server has too many connections from this address or in total; retry later.")
                continue
            }
            var pair: [Int32] = [-1, -1]
            guard tender_edge_socketpair(&pair, Int32(settings.relayBytesMax)) == 0, let daemon else {
                counts.release(address)
                EdgeConnection.refuseAtOnce(client, status: 503, code: "server_busy", detail: "The server is at capacity; retry later.")
                continue
            }
            let id = nextID
            nextID += 1
            let connection = EdgeConnection(id: id, client: client, inner: pair[0], mhdDescriptor: pair[1],
                                            address: address, settings: settings, epoll: epoll, readBuffer: readBuffer)
            registry.register(mhdDescriptor: pair[1], loop: self, id: id, completions: connection.completions)
            // MHD owns pair[1] from here on, and closes it itself if it refuses the connection.
            guard tender_mhd_add_connection(daemon.pointer, pair[1], &peer, length) == 0 else {
                registry.remove(mhdDescriptor: pair[1], id: id)
                counts.release(address)
                close(pair[0])
                EdgeConnection.refuseAtOnce(client, status: 503, code: "server_busy", detail: "The server is at capacity; retry later.")
                continue
            }
            connections[id] = connection
            connection.register()
        }
    }
}

/// Bytes waiting to be written, consumed from the front without shifting on every write.
struct ByteQueue {
    private var storage: [UInt8] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }

    mutating func append(_ bytes: UnsafeRawBufferPointer) { storage.append(contentsOf: bytes) }
    mutating func append(_ bytes: [UInt8]) { storage.append(contentsOf: bytes) }

    /// Writes as much as `fd` takes; returns false on an error other than "would block".
    mutating func write(to fd: Int32) -> Bool {
        while head < storage.count {
            let written = storage.withUnsafeBytes { bytes in
                Glibc.write(fd, bytes.baseAddress! + head, bytes.count - head)
            }
            if written > 0 {
                head += written
                continue
            }
            let code = tender_errno()
            if written < 0 && code == EINTR { continue }
            if written < 0 && tender_errno_would_block(code) != 0 { break }
            return false
        }
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= 262_144)
            head = 0
        } else if head > 65_536 && head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return true
    }
}

/// One client connection and its socket pair to MHD; touched only on its loop's thread.
final class EdgeConnection {
    let id: UInt64
    let address: String
    let mhdDescriptor: Int32
    private let client: Int32
    private let inner: Int32
    private let settings: Edge.Settings
    private let epoll: Int32
    private let readBuffer: UnsafeMutableRawBufferPointer
    private var framer: RequestFramer
    private var toInner = ByteQueue()
    private var toClient = ByteQueue()
    private var clientOpen = true
    private var innerOpen = true
    /// New request bytes are taken from the client.
    private var readingClient = true
    /// The client's write side is shut after a refusal; its input is read and dropped until EOF or the deadline.
    private var lingering = false
    /// Close both sides once `toClient` is written out.
    private var closeWhenFlushed = false
    /// Responses MHD has written in full (counted on MHD's threads).
    let completions = EdgeCompletions()
    private var completedRequests: Int { completions.count.load(ordering: .sequentiallyConsistent) }
    private var pendingRefusal: (bytes: [UInt8], awaitCompletions: Int)?
    private var halfClosedAwait: Int?
    /// The client sent its FIN.
    private var clientSentEOF = false
    private var waitDeadline: UInt64?
    private var phaseStart: UInt64 = 0
    private var lastPhase = RequestFramer.Phase.idle
    private var lastForwarded = 0
    private var clientMask: UInt32 = 0
    private var innerMask: UInt32 = 0

    init(id: UInt64, client: Int32, inner: Int32, mhdDescriptor: Int32, address: String, settings: Edge.Settings,
         epoll: Int32, readBuffer: UnsafeMutableRawBufferPointer) {
        self.id = id
        self.client = client
        self.inner = inner
        self.mhdDescriptor = mhdDescriptor
        self.address = address
        self.settings = settings
        self.epoll = epoll
        self.readBuffer = readBuffer
        self.framer = RequestFramer(limits: settings.framer)
    }

    var isClosed: Bool { !clientOpen && !innerOpen }
    /// Bytes may still be owed to the client: some wait to be written, or MHD may still write more.
    var hasOutput: Bool { clientOpen && (!toClient.isEmpty || innerOpen) }

    func register() {
        clientMask = tender_epoll_in
        innerMask = tender_epoll_in
        if tender_epoll_ctl(epoll, 1, client, clientMask, id << 1) != 0
            || tender_epoll_ctl(epoll, 1, inner, innerMask, id << 1 | 1) != 0 {
            closeAll()
        }
    }

    // MARK: - Events

    func handle(inner isInner: Bool, mask: UInt32) {
        if isInner {
            if mask & (tender_epoll_in | tender_epoll_err) != 0 { readInner(relayCap: true) }
            if mask & tender_epoll_out != 0 { flushInner() }
        } else {
            if mask & tender_epoll_in != 0 { readClient() }
            if mask & tender_epoll_err != 0 && clientOpen {
                // The peer reset or closed both ways: nothing more can reach it.
                closeAll()
            }
            if mask & tender_epoll_out != 0 { flushClient() }
        }
        updateInterest()
    }

    /// MHD finished a response on this connection while it waited for one (its bytes are already in the pair).
    func requestCompleted() {
        checkProgress()
        updateInterest()
    }

    /// The server is stopping: no new request is taken; what MHD wrote is still relayed.
    func serverStopping() {
        readingClient = false
        readInner(relayCap: false)
        updateInterest()
    }

    func checkDeadlines(now: UInt64) {
        if let deadline = waitDeadline, now >= deadline {
            closeAll()
            return
        }
        guard readingClient, pendingRefusal == nil, !lingering else { return }
        switch framer.phase {
        case .head where now - phaseStart > settings.headerTimeoutNanoseconds:
            refuse(RequestFramer.Refusal(status: 408, code: "request_header_timeout",
                                         detail: "The request head did not arrive in time.", requestWasForwarded: false))
        case .body where now - phaseStart > settings.bodyTimeoutNanoseconds:
            refuse(RequestFramer.Refusal(status: 408, code: "request_body_timeout",
                                         detail: "The request body did not arrive in time.", requestWasForwarded: true))
        default:
            break
        }
        updateInterest()
    }

    // MARK: - Client side

    private func readClient() {
        for _ in 0..<4 {
            guard clientOpen else { return }
            let count = read(client, readBuffer.baseAddress, readBuffer.count)
            if count > 0 {
                if lingering || !readingClient { continue }
                let input = UnsafeRawBufferPointer(rebasing: readBuffer[0..<count])
                // Inline routes are answered here only while every forwarded request has been answered.
                let mayAnswer = !settings.inlineRoutes.isEmpty && innerOpen && toInner.isEmpty && pendingRefusal == nil
                    && completedRequests >= framer.requestsForwarded
                do {
                    if mayAnswer {
                        try framer.consume(input, into: &forwarded, answer: { self.answerInline($0) })
                    } else {
                        try framer.consume(input, into: &forwarded)
                    }
                } catch {
                    takeForwarded()
                    refuse(error)
                    return
                }
                takeForwarded()
                notePhase()
                if toInner.count > settings.relayBytesMax { return }
                continue
            }
            if count == 0 {
                clientEnded()
                return
            }
            let code = tender_errno()
            if code == EINTR { continue }
            if tender_errno_would_block(code) != 0 { return }
            closeAll()
            return
        }
    }

    /// Answers a bodiless GET of an inline route, unless its request asks something of the connection
    /// (Connection, Upgrade, Expect) or names its own request id, or its handler streams: those go to MHD.
    /// Called by the framer for heads that precede anything forwarded, while MHD owes no response here.
    private func answerInline(_ head: RequestFramer.BodilessHead) -> Bool {
        guard head.isHTTP11, head.method.elementsEqual(Self.getMethod),
              let handler = settings.inlineRoutes[String(decoding: head.target, as: UTF8.self)] else { return false }
        var fields: [(String, String)] = []
        fields.reserveCapacity(head.fields.count)
        for field in head.fields {
            if Self.connectionFields.contains(where: { field.name.utf8.count == $0.count && Self.asciiEqualsLowercase(field.name, $0) }) {
                return false
            }
            fields.append((field.name, String(decoding: field.value, as: UTF8.self)))
        }
        // Every earlier response is complete in the pair: take it all before this one.
        readInner(relayCap: false)
        guard innerOpen, clientOpen else { return false }
        let started = monotonicNanoseconds()
        let path = String(decoding: head.target, as: UTF8.self)
        let requestID = ServerCore.requestID(from: HTTPHeaders())
        var request = HTTPRequest(method: "GET", path: path, headers: HTTPHeaders(fields), remoteAddress: address,
                                  requestID: requestID)
        request.routePattern = path
        let response = ServerCore.run(handler, request)
        guard response.stream == nil, (100...599).contains(response.status) else { return false }
        toClient.append(InlineResponse.wire(response, requestID: requestID))
        let elapsed = (monotonicNanoseconds() &- started) / 1_000
        settings.onInlineComplete?(AccessLogEntry(method: "GET", routePattern: path, status: response.status,
                                                  durationMicroseconds: Int64(clamping: elapsed), requestID: requestID,
                                                  remoteAddress: address, bodyBytes: response.body.count))
        return true
    }

    private static let getMethod = Array("GET".utf8)
    /// Request fields that make a request MHD's to answer (lowercase).
    private static let connectionFields: [[UInt8]] = ["connection", "upgrade", "expect", "x-request-id"].map { Array($0.utf8) }

    private static func asciiEqualsLowercase(_ name: String, _ lower: [UInt8]) -> Bool {
        var index = 0
        for byte in name.utf8 {
            let folded = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            guard folded == lower[index] else { return false }
            index += 1
        }
        return true
    }

    /// Scratch for the framer's output before it joins `toInner`.
    private var forwarded: [UInt8] = []

    private func takeForwarded() {
        guard !forwarded.isEmpty else { return }
        forwarded.withUnsafeBytes { toInner.append($0) }
        forwarded.removeAll(keepingCapacity: true)
        flushInner()
    }

    private func notePhase() {
        if framer.phase != lastPhase || framer.requestsForwarded != lastForwarded {
            phaseStart = monotonicNanoseconds()
            lastPhase = framer.phase
            lastForwarded = framer.requestsForwarded
        }
    }

    private func clientEnded() {
        readingClient = false
        clientSentEOF = true
        if lingering {
            closeAll()
            return
        }
        guard pendingRefusal == nil else { return }
        // A half-closed client still gets every response to the requests it finished (RFC 9112 §9.6).
        halfClosedAwait = framer.requestsForwarded - (framer.phase == .body ? 1 : 0)
        waitDeadline = monotonicNanoseconds() + settings.lingerNanoseconds
        completions.waiting.store(true, ordering: .sequentiallyConsistent)
        checkProgress()
    }

    private func flushClient() {
        guard clientOpen else { return }
        guard toClient.write(to: client) else {
            closeAll()
            return
        }
        if toClient.isEmpty && closeWhenFlushed { beginLinger() }
    }

    /// Shuts the client's write side and drops its input until EOF, so the last response is not lost to a
    /// reset caused by unread bytes (a lingering close).
    private func beginLinger() {
        guard !lingering else { return }
        closeInner()
        if clientSentEOF {
            closeAll()
            return
        }
        lingering = true
        readingClient = false
        shutdown(client, Int32(SHUT_WR))
        waitDeadline = monotonicNanoseconds() + min(settings.lingerNanoseconds, 2_000_000_000)
    }

    // MARK: - MHD side

    private func readInner(relayCap: Bool) {
        while innerOpen {
            if relayCap && toClient.count > settings.relayBytesMax { break }
            let count = read(inner, readBuffer.baseAddress, readBuffer.count)
            if count > 0 {
                toClient.append(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
                continue
            }
            if count < 0 {
                let code = tender_errno()
                if code == EINTR { continue }
                if tender_errno_would_block(code) != 0 { break }
            }
            // MHD closed its side (a Connection: close response, its idle timeout, or shutdown).
            closeInner()
            pendingRefusal = nil
            readingClient = false
            closeWhenFlushed = true
        }
        flushClient()
    }

    private func flushInner() {
        guard innerOpen, !toInner.isEmpty else { return }
        if !toInner.write(to: inner) {
            closeInner()
            closeWhenFlushed = true
            readingClient = false
            flushClient()
        }
    }

    private func closeInner() {
        guard innerOpen else { return }
        innerOpen = false
        _ = tender_epoll_ctl(epoll, 2, inner, 0, 0)
        close(inner)
    }

    func closeAll() {
        closeInner()
        if clientOpen {
            clientOpen = false
            _ = tender_epoll_ctl(epoll, 2, client, 0, 0)
            close(client)
        }
    }

    // MARK: - Refusals

    private func refuse(_ refusal: RequestFramer.Refusal) {
        readingClient = false
        let awaitCompletions = framer.requestsForwarded - (refusal.requestWasForwarded ? 1 : 0)
        pendingRefusal = (Self.response(status: refusal.status, code: refusal.code, detail: refusal.detail), awaitCompletions)
        waitDeadline = monotonicNanoseconds() + settings.lingerNanoseconds
        completions.waiting.store(true, ordering: .sequentiallyConsistent)
        checkProgress()
    }

    /// Emits a waiting refusal, or ends a half-closed connection, once every earlier response is out.
    private func checkProgress() {
        if let refusal = pendingRefusal, completedRequests >= refusal.awaitCompletions {
            // Every earlier response is already in the pair: take it all before the refusal.
            readInner(relayCap: false)
            toClient.append(refusal.bytes)
            pendingRefusal = nil
            closeInner()
            closeWhenFlushed = true
            flushClient()
        } else if let awaited = halfClosedAwait, completedRequests >= awaited {
            readInner(relayCap: false)
            closeInner()
            closeWhenFlushed = true
            flushClient()
        }
    }

    private func updateInterest() {
        if clientOpen {
            var wanted: UInt32 = 0
            if lingering || readingClient && toInner.count <= settings.relayBytesMax { wanted |= tender_epoll_in }
            if !toClient.isEmpty { wanted |= tender_epoll_out }
            if wanted != clientMask {
                clientMask = wanted
                _ = tender_epoll_ctl(epoll, 3, client, wanted, id << 1)
            }
        }
        if innerOpen {
            var wanted: UInt32 = 0
            if toClient.count <= settings.relayBytesMax { wanted |= tender_epoll_in }
            if !toInner.isEmpty { wanted |= tender_epoll_out }
            if wanted != innerMask {
                innerMask = wanted
                _ = tender_epoll_ctl(epoll, 3, inner, wanted, id << 1 | 1)
            }
        }
    }

    // MARK: - Wire

    /// A complete problem+json response that closes the connection.
    static func response(status: Int, code: String, detail: String) -> [UInt8] {
        let requestID = ServerCore.requestID(from: HTTPHeaders())
        let problem = HTTPProblem(status: status, code: code, title: title(status), detail: detail)
        let body = problem.jsonBody(requestID: requestID)
        let head = "HTTP/1.1 \(status) \(title(status))\r\nContent-Type: application/problem+json\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\nX-Request-Id: \(requestID)\r\n\r\n"
        return Array(head.utf8) + body
    }

    static func title(_ status: Int) -> String {
        switch status {
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 417: return "Expectation Failed"
        case 431: return "Request Header Fields Too Large"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Bad Request"
        }
    }

    /// Answers a connection the edge will not serve, without reading it, and closes it.
    static func refuseAtOnce(_ fd: Int32, status: Int, code: String, detail: String) {
        var queue = ByteQueue()
        queue.append(response(status: status, code: code, detail: detail))
        _ = queue.write(to: fd)
        shutdown(fd, Int32(SHUT_WR))
        close(fd)
    }
}

/// The bytes of a response the edge answers itself, in MHD's form: status line with MHD's reason phrase,
/// the response's headers (those ServerCore would pass), X-Request-Id, Content-Length and Date.
enum InlineResponse {
    static func wire(_ response: HTTPResponse, requestID: String) -> [UInt8] {
        var headers = response.headers
        headers.replaceOrAdd("X-Request-Id", requestID)
        var out: [UInt8] = []
        out.reserveCapacity(192 + response.body.count)
        out += "HTTP/1.1 ".utf8
        out += String(response.status).utf8
        out.append(0x20)
        if let phrase = MHD_get_reason_phrase_for(UInt32(response.status)) {
            out += UnsafeRawBufferPointer(start: phrase, count: strlen(phrase))
        }
        out += crlf
        for (name, value) in headers where ServerCore.isSafeHeader(name: name, value: value) {
            out += name.utf8
            out += ": ".utf8
            out += value.utf8
            out += crlf
        }
        out += "Content-Length: ".utf8
        out += String(response.body.count).utf8
        out += crlf
        out += "Date: ".utf8
        out += HTTPDate.current()
        out += crlf
        out += crlf
        out += response.body
        return out
    }

    private static let crlf: [UInt8] = [0x0D, 0x0A]
}

/// The IMF-fixdate of the current second (RFC 9110 §5.6.7), made once per second.
enum HTTPDate {
    private static let cache = Mutex<(second: Int, text: [UInt8])>((-1, []))

    static func current() -> [UInt8] {
        let now = time(nil)
        if let cached = cache.withLock({ $0.second == now ? $0.text : nil }) { return cached }
        var parts = tm()
        var seconds = now
        gmtime_r(&seconds, &parts)
        // English names whatever the locale (strftime's %a and %b follow it).
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
        let text = "\(days[Int(parts.tm_wday) % 7]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon) % 12]) "
            + "\(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
        let bytes = Array(text.utf8)
        cache.withLock { $0 = (now, bytes) }
        return bytes
    }

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
