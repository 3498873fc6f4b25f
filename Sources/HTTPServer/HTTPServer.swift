internal import CMicroHTTPD
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Tender's HTTP/1.1 server: libmicrohttpd parses on an epoll I/O thread pool; handlers run on a bounded
/// pool of dedicated worker threads. Framing, body size, queue and deadline limits come from the configuration.
/// A handler may return `HTTPResponse.stream`/`eventStream`: its worker is freed at once and the idle stream's
/// connection stays suspended in MHD until the next `HTTPStream.send`, so subscribers hold no thread.
public final class HTTPServer: Sendable {
    private struct Daemon: @unchecked Sendable {
        // Safe to share: the pointer is only passed to MHD calls that MHD documents as thread-safe
        // (quiesce, info, stop), and stop happens once, after which the handle is dropped.
        let pointer: OpaquePointer
    }

    private enum Phase: Sendable {
        case idle
        case running(Daemon, Edge)
        case stopped
    }

    private let core: ServerCore
    private let phase = Mutex<Phase>(.idle)
    private let port = Atomic<Int>(0)

    /// Creates a server; nothing listens until `start()`.
    public init(configuration: HTTPServerConfiguration, router: Router,
                onRequestComplete: @escaping @Sendable (AccessLogEntry) -> Void = { _ in }) {
        core = ServerCore(configuration: configuration, router: router, onRequestComplete: onRequestComplete)
    }

    deinit {
        shutdown(drainDeadlineMilliseconds: 0)
    }

    /// Binds and starts serving; throws `HTTPServerError` (`invalid_configuration`, `bind_failed`,
    /// `thread_start_failed`, `already_started`). A server starts at most once.
    public func start() throws {
        let configuration = core.configuration
        try Self.validate(configuration)
        try phase.withLock { phase in
            guard case .idle = phase else {
                throw HTTPServerError(code: "already_started", message: "The server was already started.")
            }
            guard core.pool.start(), core.startWatchdog() else {
                core.forceResumeAll()
                _ = core.pool.stop(untilNanoseconds: monotonicNanoseconds() + 1_000_000_000)
                phase = .stopped
                throw HTTPServerError(code: "thread_start_failed", message: "Could not start the server threads.")
            }
            let edge: Edge
            do {
                var settings = Self.edgeSettings(configuration)
                settings.inlineRoutes = core.router.inlineLiteralRoutes(method: "GET")
                settings.onInlineComplete = core.onRequestComplete
                edge = try Edge(host: configuration.host, port: configuration.port, settings: settings,
                                registry: core.edgeRegistry)
            } catch {
                core.forceResumeAll()
                _ = core.pool.stop(untilNanoseconds: monotonicNanoseconds() + 1_000_000_000)
                phase = .stopped
                throw error
            }
            // MHD's pool holds the canonical head the edge forwards (at most `headerBytesMax`: the edge refuses
            // larger ones with its own 431, and never forwards trailer fields), MHD's record of each header
            // field and query argument, and the response headers. MHD 0.9.75 zeroes the whole pool before
            // every request on a connection (MHD_pool_reset), so it is sized to what a head at every edge
            // limit needs (RelayLimitsTests) rather than with room to spare: zeroing costs per byte.
            let limits = tender_mhd_limits(
                thread_pool_size: UInt32(configuration.ioThreads),
                connection_limit: UInt32(configuration.connectionsMax + 16),
                per_ip_connection_limit: UInt32(configuration.connectionsPerIPMax + 16),
                connection_timeout_seconds: UInt32(configuration.idleTimeoutSeconds),
                connection_memory_limit_bytes: Self.poolBytes(configuration))
            let context = Unmanaged.passUnretained(core).toOpaque()
            guard let daemon = tender_mhd_start_unbound(limits, MHDCallbacks.access, context, MHDCallbacks.completed,
                                                        context) else {
                edge.stop(flushDeadlineNanoseconds: monotonicNanoseconds())
                core.forceResumeAll()
                _ = core.pool.stop(untilNanoseconds: monotonicNanoseconds() + 1_000_000_000)
                phase = .stopped
                throw HTTPServerError(code: "thread_start_failed", message: "Could not start the HTTP daemon.")
            }
            guard edge.start(daemon: daemon) else {
                core.forceResumeAll()
                _ = core.pool.stop(untilNanoseconds: monotonicNanoseconds() + 1_000_000_000)
                MHD_stop_daemon(daemon)
                phase = .stopped
                throw HTTPServerError(code: "thread_start_failed", message: "Could not start the edge threads.")
            }
            port.store(edge.boundPort, ordering: .releasing)
            phase = .running(Daemon(pointer: daemon), edge)
        }
    }

    /// The port really bound (differs from the configuration when it asked for 0); 0 before start.
    public var boundPort: Int { port.load(ordering: .acquiring) }

    /// A snapshot of the load.
    public var stats: HTTPServerStats { core.stats }

    /// Refuses new requests (503 + Connection: close), ends open streams, waits for in-flight requests up to the deadline, answers
    /// any request still waiting on a handler with 503, then stops the daemon and the worker threads.
    /// Returns true if everything drained in time. Safe to call more than once.
    @discardableResult
    public func shutdown(drainDeadlineMilliseconds: Int) -> Bool {
        let running: (Daemon, Edge)? = phase.withLock { phase in
            switch phase {
            case .running(let daemon, let edge):
                phase = .stopped
                return (daemon, edge)
            case .idle:
                phase = .stopped
                return nil
            case .stopped:
                return nil
            }
        }
        guard let (daemon, edge) = running else { return true }
        let deadline = monotonicNanoseconds() + UInt64(max(drainDeadlineMilliseconds, 0)) * 1_000_000
        // New requests are refused from here on (503 server_shutting_down + Connection: close). The
        // listening socket is not quiesced: MHD 0.9.75's MHD_quiesce_daemon removes the listener from
        // each worker's epoll set while the workers may do the same, and the losing thread hits
        // MHD_PANIC ("Failed to remove listen FD from epoll set"), aborting the process. The socket
        // closes with MHD_stop_daemon below.
        core.beginDraining()
        // Open streams would never drain on their own: end them (buffered bytes first) so their requests
        // complete; draining refuses new ones, and MHD must not be stopped with a stream's connection suspended.
        core.closeAllStreams()
        let drained = core.waitForDrain(untilNanoseconds: deadline)
        core.forceResumeAll()
        // Give running handlers until the deadline (at least a moment) to return before the threads are abandoned.
        let workersStopped = core.pool.stop(untilNanoseconds: max(deadline, monotonicNanoseconds() + 100_000_000))
        MHD_stop_daemon(daemon.pointer)
        // What MHD wrote before it stopped (the 503s above) is still relayed, briefly, then every connection closes.
        edge.stop(flushDeadlineNanoseconds: monotonicNanoseconds() + 500_000_000)
        return drained && workersStopped
    }

    /// MHD's per-connection pool: the longest head, MHD's record of each field (about 64 bytes each, for
    /// `headerFieldsMax` fields) and 8 KiB for the query's arguments and the response headers it writes.
    static func poolBytes(_ configuration: HTTPServerConfiguration) -> Int {
        configuration.headerBytesMax + configuration.headerFieldsMax * 64 + 8_192
    }

    static func edgeSettings(_ configuration: HTTPServerConfiguration) -> Edge.Settings {
        Edge.Settings(
            loops: configuration.edgeThreads,
            framer: RequestFramer.Limits(headBytesMax: configuration.headerBytesMax,
                                         requestTargetBytesMax: configuration.requestTargetBytesMax,
                                         headerFieldsMax: configuration.headerFieldsMax,
                                         bodyBytesMax: configuration.bodyBytesMax),
            headerTimeoutNanoseconds: UInt64(configuration.headerTimeoutMilliseconds) * 1_000_000,
            bodyTimeoutNanoseconds: UInt64(configuration.bodyTimeoutMilliseconds) * 1_000_000,
            lingerNanoseconds: UInt64(configuration.handlerDeadlineMilliseconds) * 1_000_000 + 5_000_000_000,
            connectionsMax: configuration.connectionsMax,
            connectionsPerAddressMax: configuration.connectionsPerIPMax,
            relayBytesMax: 65_536)
    }

    private static func validate(_ configuration: HTTPServerConfiguration) throws {
        let checks: [(Bool, String)] = [
            ((0...65_535).contains(configuration.port), "port"),
            ((1...256).contains(configuration.ioThreads), "ioThreads"),
            ((1...4_096).contains(configuration.workerThreads), "workerThreads"),
            (configuration.workerQueueMax >= 0 && configuration.workerQueueMax <= 1_000_000, "workerQueueMax"),
            (configuration.bodyBytesMax >= 0 && configuration.bodyBytesMax <= 1 << 30, "bodyBytesMax"),
            ((1_024...(1 << 24)).contains(configuration.headerBytesMax), "headerBytesMax"),
            ((64...(1 << 20)).contains(configuration.requestTargetBytesMax), "requestTargetBytesMax"),
            ((1...10_000).contains(configuration.headerFieldsMax), "headerFieldsMax"),
            ((1...3_600_000).contains(configuration.headerTimeoutMilliseconds), "headerTimeoutMilliseconds"),
            ((1...3_600_000).contains(configuration.bodyTimeoutMilliseconds), "bodyTimeoutMilliseconds"),
            ((1...64).contains(configuration.edgeThreads), "edgeThreads"),
            ((1...1_000_000).contains(configuration.connectionsMax), "connectionsMax"),
            ((1...1_000_000).contains(configuration.connectionsPerIPMax), "connectionsPerIPMax"),
            ((1...86_400).contains(configuration.idleTimeoutSeconds), "idleTimeoutSeconds"),
            (configuration.handlerDeadlineMilliseconds >= 1, "handlerDeadlineMilliseconds"),
            (configuration.retryAfterSeconds >= 0, "retryAfterSeconds"),
            ((0...1_000_000).contains(configuration.streamsMax), "streamsMax"),
            ((1...(1 << 30)).contains(configuration.streamBufferBytesMax), "streamBufferBytesMax"),
        ]
        if let failed = checks.first(where: { !$0.0 }) {
            throw HTTPServerError(code: "invalid_configuration", message: "\(failed.1) is out of range.")
        }
    }
}

/// MHD's C callbacks. They are static members in a non-main file so they carry no actor isolation
/// (MHD calls them from its own threads).
enum MHDCallbacks {
    /// MHD_AccessHandlerCallback: called once when headers are parsed, once per body chunk, once when
    /// the request is complete, and again after each resume.
    static let access: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadDataSize, slot in
        guard let cls, let connection, let uploadDataSize, let slot else { return MHD_Result.NO }
        let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
        if let raw = slot.pointee {
            let box = Unmanaged<RequestBox>.fromOpaque(raw).takeUnretainedValue()
            return core.laterCallback(box, data: uploadData, size: uploadDataSize)
        }
        let box = core.begin(connection: connection, url: url, method: method)
        // MHD's retain: released in `completed`.
        slot.pointee = Unmanaged.passRetained(box).toOpaque()
        return MHD_Result.YES
    }

    /// MHD_RequestCompletedCallback: releases MHD's retain on the box and reports the access log entry.
    static let completed: MHD_RequestCompletedCallback = { cls, connection, slot, _ in
        guard let cls else { return }
        let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
        if let slot, let raw = slot.pointee {
            slot.pointee = nil
            let box = Unmanaged<RequestBox>.fromOpaque(raw).takeRetainedValue()
            core.completed(box)
        }
        // Tells the edge the response is written in full (it orders refusals and half-closes after it).
        if let connection { core.edgeRegistry.completed(mhdDescriptor: tender_mhd_connection_fd(connection)) }
    }
}
