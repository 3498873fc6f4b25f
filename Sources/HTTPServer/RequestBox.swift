internal import CMicroHTTPD
import Synchronization

/// Per-request state, parked in MHD's `con_cls` slot from the first callback to the completion callback.
///
/// Ownership: MHD holds one retain (taken in the first callback, released in the completion callback)
/// and a queued worker job holds another, so the box outlives whichever of the two finishes last,
/// even when the client goes away while the job is queued or running.
final class RequestBox: @unchecked Sendable {
    // Safe to share: the fields below `outcome` are touched only on the MHD I/O thread that owns the
    // connection (MHD never calls one connection's callbacks from two threads at once); `outcome`
    // is the only state the worker and watchdog threads touch, and it is behind a Mutex.

    /// Result handoff between a worker (or the deadline watchdog) and the I/O thread.
    enum Outcome {
        /// Not handed off to a worker.
        case idle
        /// Suspended; waiting for the handler or the deadline.
        case pending(deadlineNanoseconds: UInt64)
        /// The response (and its stream, for a streaming response) to queue once MHD calls back after the resume.
        case ready(HTTPResponse, HTTPStream?)
        /// The response was taken, or the connection is gone: late results are dropped.
        case closed
    }

    let outcome = Mutex<Outcome>(.idle)
    /// The connection; used for MHD_resume_connection only while `outcome` is `.pending`,
    /// when MHD cannot free it (MHD never drops a suspended connection on its own).
    nonisolated(unsafe) let connection: OpaquePointer
    let startNanoseconds: UInt64
    let method: String
    let path: String
    let requestID: String
    let remoteAddress: String
    let headers: HTTPHeaders
    let query: [(String, String)]
    var body: [UInt8] = []
    /// A rejection found while reading (e.g. the body grew past the limit); sent with Connection: close.
    var rejection: HTTPProblem?
    var responseQueued = false
    var suspended = false
    var routePattern = "unmatched"
    var sentStatus = 0
    var sentBodyBytes = 0
    /// The streaming body queued on this connection, told when the connection ends.
    var stream: HTTPStream?

    init(connection: OpaquePointer, method: String, path: String, requestID: String, remoteAddress: String,
         headers: HTTPHeaders, query: [(String, String)]) {
        self.connection = connection
        self.startNanoseconds = monotonicNanoseconds()
        self.method = method
        self.path = path
        self.requestID = requestID
        self.remoteAddress = remoteAddress
        self.headers = headers
        self.query = query
    }

    /// Moves a pending box to `.ready` and resumes its connection; false if someone else got there first.
    /// The resume happens under the lock, so once another thread sees a non-pending state, the
    /// connection has already been resumed (shutdown relies on it before stopping the daemon).
    func complete(with response: HTTPResponse, stream: HTTPStream? = nil) -> Bool {
        outcome.withLock { state in
            guard case .pending = state else { return false }
            state = .ready(response, stream)
            MHD_resume_connection(connection)
            return true
        }
    }

    /// The deadline of a pending box.
    var pendingDeadline: UInt64? {
        outcome.withLock { state in
            if case .pending(let deadline) = state { return deadline }
            return nil
        }
    }
}

/// Collects MHD's key/value pairs for one value kind, in order.
final class PairCollector {
    var pairs: [(String, String)] = []

    /// MHD_KeyValueIterator: appends each pair; a valueless query argument (`?flag`) becomes "".
    static let iterator: MHD_KeyValueIterator = { context, _, key, value in
        guard let context, let key else { return MHD_Result.YES }
        let collector = Unmanaged<PairCollector>.fromOpaque(context).takeUnretainedValue()
        collector.pairs.append((String(cString: key), value.map { String(cString: $0) } ?? ""))
        return MHD_Result.YES
    }

    static func collect(_ connection: OpaquePointer, _ kind: MHD_ValueKind) -> [(String, String)] {
        let collector = PairCollector()
        withExtendedLifetime(collector) {
            _ = MHD_get_connection_values(connection, kind, iterator,
                                          Unmanaged.passUnretained(collector).toOpaque())
        }
        return collector.pairs
    }
}
