import CMicroHTTPD
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
        case running(Daemon)
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
            let limits = tender_mhd_limits(
                thread_pool_size: UInt32(configuration.ioThreads),
                connection_limit: UInt32(configuration.connectionsMax),
                per_ip_connection_limit: UInt32(configuration.connectionsPerIPMax),
                connection_timeout_seconds: UInt32(configuration.idleTimeoutSeconds),
                connection_memory_limit_bytes: configuration.headerBytesMax)
            var error: Int32 = 0
            let context = Unmanaged.passUnretained(core).toOpaque()
            guard let daemon = tender_mhd_start(configuration.host, UInt16(configuration.port), limits,
                                                MHDCallbacks.access, context, MHDCallbacks.completed, context,
                                                &error) else {
                core.forceResumeAll()
                _ = core.pool.stop(untilNanoseconds: monotonicNanoseconds() + 1_000_000_000)
                phase = .stopped
                throw HTTPServerError(code: "bind_failed",
                                      message: "Could not listen on \(configuration.host):\(configuration.port).")
            }
            port.store(Int(tender_mhd_bound_port(daemon)), ordering: .releasing)
            phase = .running(Daemon(pointer: daemon))
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
        let daemon: Daemon? = phase.withLock { phase in
            switch phase {
            case .running(let daemon):
                phase = .stopped
                return daemon
            case .idle:
                phase = .stopped
                return nil
            case .stopped:
                return nil
            }
        }
        guard let daemon else { return true }
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
        return drained && workersStopped
    }

    private static func validate(_ configuration: HTTPServerConfiguration) throws {
        let checks: [(Bool, String)] = [
            ((0...65_535).contains(configuration.port), "port"),
            ((1...256).contains(configuration.ioThreads), "ioThreads"),
            ((1...4_096).contains(configuration.workerThreads), "workerThreads"),
            (configuration.workerQueueMax >= 0 && configuration.workerQueueMax <= 1_000_000, "workerQueueMax"),
            (configuration.bodyBytesMax >= 0 && configuration.bodyBytesMax <= 1 << 30, "bodyBytesMax"),
            ((1_024...(1 << 24)).contains(configuration.headerBytesMax), "headerBytesMax"),
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
        return core.firstCallback(box)
    }

    /// MHD_RequestCompletedCallback: releases MHD's retain on the box and reports the access log entry.
    static let completed: MHD_RequestCompletedCallback = { cls, _, slot, _ in
        guard let cls, let slot, let raw = slot.pointee else { return }
        slot.pointee = nil
        let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
        let box = Unmanaged<RequestBox>.fromOpaque(raw).takeRetainedValue()
        core.completed(box)
    }
}
