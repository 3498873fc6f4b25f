internal import CMicroHTTPD
import Synchronization

/// Why a stream stopped; a stable snake_case raw value for logs and metrics.
public enum HTTPStreamCloseReason: String, Sendable, Equatable {
    /// The producer called `close()`; buffered bytes are still delivered, then the chunked body ends.
    case closedByProducer = "closed_by_producer"
    /// The client went away (or MHD closed the connection on error or idle timeout).
    case clientGone = "client_gone"
    /// More than `bufferBytesMax` bytes were waiting: the buffer is dropped and the connection is cut.
    case bufferOverflow = "buffer_overflow"
    /// The server is shutting down; buffered bytes are still delivered, then the chunked body ends.
    case serverShutdown = "server_shutdown"
    /// The response never reached the connection (handler deadline passed, client gone, shutdown);
    /// the producer is not called.
    case notDelivered = "not_delivered"
}

/// The body of a streaming response: a producer that receives the stream once it is handed to the connection.
public struct HTTPStreamSource: Sendable {
    /// Called once, right after the response is handed over (on the worker thread, or the I/O thread for
    /// inline routes). It must return promptly: keep the stream and send from elsewhere; sending is
    /// thread-safe. Not called when the stream is refused (503) or could not be delivered.
    public let producer: @Sendable (HTTPStream) -> Void

    /// Creates a source.
    public init(producer: @escaping @Sendable (HTTPStream) -> Void) {
        self.producer = producer
    }
}

extension HTTPResponse {
    /// A streaming response sent with chunked encoding; the handler's worker is freed as soon as it returns.
    public static func stream(status: Int = 200, headers: HTTPHeaders = HTTPHeaders(),
                              producer: @escaping @Sendable (HTTPStream) -> Void) -> HTTPResponse {
        var response = HTTPResponse(status: status, headers: headers)
        response.stream = HTTPStreamSource(producer: producer)
        return response
    }

    /// A `text/event-stream` response (HTML Standard §9.2) with caching disabled; send `SSEEvent`s on the stream.
    public static func eventStream(headers: HTTPHeaders = HTTPHeaders(),
                                   producer: @escaping @Sendable (HTTPStream) -> Void) -> HTTPResponse {
        var headers = headers
        headers.replaceOrAdd("Content-Type", "text/event-stream; charset=utf-8")
        headers.replaceOrAdd("Cache-Control", "no-cache")
        return stream(status: 200, headers: headers, producer: producer)
    }
}

/// A thread-safe handle on one open streaming response. Bytes sent are buffered (at most `bufferBytesMax`)
/// and pulled by MHD's I/O thread; an idle stream holds no thread, its connection is suspended in MHD.
public final class HTTPStream: Sendable {
    private struct State {
        /// Bytes not yet pulled by MHD, from `readOffset` on.
        var pending: [UInt8] = []
        var readOffset = 0
        var closeReason: HTTPStreamCloseReason?
        /// True while the content reader has suspended the connection for lack of bytes.
        var suspendedInReader = false
        var callbacks: [@Sendable (HTTPStreamCloseReason) -> Void] = []
        var bytesDelivered = 0

        var buffered: Int { pending.count - readOffset }
    }

    private struct Connection: @unchecked Sendable {
        // Safe to share: the pointer is only given to MHD_suspend_connection (on the I/O thread, from the
        // content reader) and MHD_resume_connection (only while suspended, when MHD cannot free it),
        // both with `state` held so a resume always follows its suspend.
        let pointer: OpaquePointer
    }

    private let state = Mutex(State())
    private let connection: Connection
    private let onFinished: @Sendable (HTTPStream) -> Void

    /// Largest number of bytes waiting for the client; a send beyond it closes the stream (`bufferOverflow`),
    /// so a slow reader cannot grow memory. Set from `HTTPServerConfiguration.streamBufferBytesMax`.
    public let bufferBytesMax: Int

    init(connection: OpaquePointer, bufferBytesMax: Int, onFinished: @escaping @Sendable (HTTPStream) -> Void) {
        self.connection = Connection(pointer: connection)
        self.bufferBytesMax = bufferBytesMax
        self.onFinished = onFinished
    }

    /// Queues bytes for the client and wakes its connection; false once the stream is closed, or when the
    /// bytes would take the buffer past `bufferBytesMax` (the stream is then closed with `bufferOverflow`).
    public func send(_ bytes: [UInt8]) -> Bool {
        let (accepted, closed) = state.withLock { state -> (Bool, [@Sendable (HTTPStreamCloseReason) -> Void]?) in
            guard state.closeReason == nil else { return (false, nil) }
            guard bytes.count <= bufferBytesMax - state.buffered else {
                return (false, closeLocked(&state, reason: .bufferOverflow, resume: true))
            }
            state.pending.append(contentsOf: bytes)
            resumeLocked(&state)
            return (true, nil)
        }
        if let closed { notifyClosed(closed, reason: .bufferOverflow) }
        return accepted
    }

    /// Sends one rendered Server-Sent Event.
    public func send(_ event: SSEEvent) -> Bool {
        send(event.encoded)
    }

    /// Ends the stream once the buffered bytes are delivered (the chunked body's last chunk follows).
    public func close() {
        close(reason: .closedByProducer)
    }

    /// False once closed for any reason.
    public var isOpen: Bool { state.withLock { $0.closeReason == nil } }

    /// Why the stream closed; nil while open.
    public var closeReason: HTTPStreamCloseReason? { state.withLock { $0.closeReason } }

    /// Bytes sent and not yet pulled by the server; a producer catching up can pace itself on it.
    public var bufferedBytes: Int { state.withLock { $0.buffered } }

    /// Bytes handed to MHD for the client so far.
    public var bytesDelivered: Int { state.withLock { $0.bytesDelivered } }

    /// Registers a callback fired exactly once when the stream closes (at once if it is already closed).
    /// It runs on whichever thread closed the stream (possibly an I/O thread): keep it short and non-blocking.
    public func onClose(_ callback: @escaping @Sendable (HTTPStreamCloseReason) -> Void) {
        let reason: HTTPStreamCloseReason? = state.withLock { state in
            if state.closeReason == nil { state.callbacks.append(callback) }
            return state.closeReason
        }
        if let reason { callback(reason) }
    }

    // MARK: - Server side

    /// Closes with a reason; the first close wins and fires the callbacks.
    func close(reason: HTTPStreamCloseReason) {
        let closed = state.withLock { closeLocked(&$0, reason: reason, resume: true) }
        if let closed { notifyClosed(closed, reason: reason) }
    }

    /// The connection is gone (MHD's completion callback): nothing may resume it any more.
    func connectionEnded() {
        let closed = state.withLock { closeLocked(&$0, reason: .clientGone, resume: false) }
        if let closed { notifyClosed(closed, reason: .clientGone) }
    }

    /// MHD_ContentReaderCallback body, on the I/O thread: copies buffered bytes; when there are none, either
    /// ends the body or suspends the connection until the next send. MHD's documentation: returning 0 from a
    /// content reader under internal polling busy-waits unless the connection is suspended first.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        state.withLock { state in
            let available = state.buffered
            if available > 0 && max > 0 {
                let count = min(available, max)
                let offset = state.readOffset
                state.pending.withUnsafeBytes { bytes in
                    guard let base = bytes.baseAddress else { return }
                    UnsafeMutableRawPointer(buffer).copyMemory(from: base + offset, byteCount: count)
                }
                state.readOffset += count
                state.bytesDelivered += count
                if state.readOffset == state.pending.count {
                    state.pending.removeAll(keepingCapacity: state.pending.capacity <= 65_536)
                    state.readOffset = 0
                } else if state.readOffset >= 65_536 {
                    state.pending.removeFirst(state.readOffset)
                    state.readOffset = 0
                }
                return count
            }
            if let reason = state.closeReason {
                // An overflow cuts the connection, so the client cannot mistake a truncated stream for a
                // complete one; a normal close ends the chunked body (RFC 9112 §7.1 last-chunk).
                return reason == .bufferOverflow || reason == .clientGone ? Self.endWithError : Self.endOfStream
            }
            guard max > 0 else { return 0 }
            state.suspendedInReader = true
            MHD_suspend_connection(connection.pointer)
            return 0
        }
    }

    /// MHD_CONTENT_READER_END_OF_STREAM.
    static let endOfStream = -1
    /// MHD_CONTENT_READER_END_WITH_ERROR.
    static let endWithError = -2

    private func resumeLocked(_ state: inout State) {
        guard state.suspendedInReader else { return }
        state.suspendedInReader = false
        MHD_resume_connection(connection.pointer)
    }

    /// Marks the stream closed; returns the callbacks to fire (outside the lock), or nil if it was already closed.
    private func closeLocked(_ state: inout State, reason: HTTPStreamCloseReason,
                             resume: Bool) -> [@Sendable (HTTPStreamCloseReason) -> Void]? {
        guard state.closeReason == nil else { return nil }
        state.closeReason = reason
        if reason == .bufferOverflow || reason == .clientGone || reason == .notDelivered {
            state.pending = []
            state.readOffset = 0
        }
        if resume {
            resumeLocked(&state)
        } else {
            state.suspendedInReader = false
        }
        let callbacks = state.callbacks
        state.callbacks = []
        return callbacks
    }

    private func notifyClosed(_ callbacks: [@Sendable (HTTPStreamCloseReason) -> Void], reason: HTTPStreamCloseReason) {
        onFinished(self)
        for callback in callbacks { callback(reason) }
    }
}

/// MHD's content-reader callbacks for streaming responses; static members so they carry no actor isolation.
enum StreamCallbacks {
    /// MHD_ContentReaderCallback: `cls` is the stream, retained for MHD until `free`.
    static let read: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer else { return HTTPStream.endWithError }
        return Unmanaged<HTTPStream>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
    }

    /// MHD_ContentReaderFreeCallback: MHD is done with the response; drops its retain on the stream.
    static let free: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        Unmanaged<HTTPStream>.fromOpaque(cls).release()
    }
}
