/// Limits and sizes of the HTTP server; every limit is named and has a documented default.
public struct HTTPServerConfiguration: Sendable {
    /// Address to bind (an IPv4 or IPv6 literal).
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free port (read it back from `HTTPServer.boundPort`).
    public var port: Int = 8080
    /// MHD I/O threads (epoll thread pool); they parse requests and run only inline handlers.
    public var ioThreads: Int = 2
    /// Dedicated threads running handlers; Tender sizes this to the database pool.
    public var workerThreads: Int = 10
    /// Requests waiting for a worker; beyond it the client gets 503 `server_busy` with Retry-After.
    public var workerQueueMax: Int = 256
    /// Largest request body; larger ones get an early 413 `body_too_large` (by Content-Length before reading, or while streaming chunked).
    public var bodyBytesMax: Int = 1_048_576
    /// Largest request head (request line and header fields); beyond it the edge answers 431.
    public var headerBytesMax: Int = 32_768
    /// Longest request target (path and query); beyond it the edge answers 414.
    public var requestTargetBytesMax: Int = 8_192
    /// Most header fields in one request (and trailer fields after a chunked body); beyond it 431.
    public var headerFieldsMax: Int = 100
    /// Time from a request head's first byte to its last; past it the edge answers 408 and closes.
    /// Bounds slow-header (slowloris) connections, which otherwise count against `connectionsPerIPMax`.
    public var headerTimeoutMilliseconds: Int = 10_000
    /// Time from the end of a request head to the end of its body; past it 408 and close.
    public var bodyTimeoutMilliseconds: Int = 60_000
    /// Edge threads: each runs one epoll loop that accepts connections and frames their requests.
    public var edgeThreads: Int = 2
    /// Concurrent connections in total.
    public var connectionsMax: Int = 1_000
    /// Concurrent connections from one peer address.
    public var connectionsPerIPMax: Int = 256
    /// Seconds of inactivity before MHD closes a connection.
    public var idleTimeoutSeconds: Int = 30
    /// Past it the client gets 503 `handler_deadline_exceeded` and the handler's late result is dropped.
    public var handlerDeadlineMilliseconds: Int = 15_000
    /// Value of Retry-After on 503 answers.
    public var retryAfterSeconds: Int = 1
    /// Open streaming responses (e.g. SSE subscribers); beyond it the client gets 503 `too_many_streams`.
    /// Keep it below `connectionsMax` so streams cannot take every connection from the API.
    public var streamsMax: Int = 500
    /// Bytes one stream may hold waiting for a slow client; past it the stream is closed (`buffer_overflow`).
    public var streamBufferBytesMax: Int = 262_144

    /// The defaults above.
    public init() {}
}

/// The server's error type.
public struct HTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable snake_case code: `bind_failed`, `invalid_configuration`, `thread_start_failed`, `already_started`
    /// or `invalid_sse_field`.
    public var code: String
    /// Generic explanation.
    public var message: String

    /// Creates an error.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    /// "code: message".
    public var description: String { "\(code): \(message)" }
}

/// One finished request, for the access log and metrics.
public struct AccessLogEntry: Sendable {
    /// Request method.
    public var method: String
    /// Matched route pattern, or "unmatched" (never the raw path, which may hold ids).
    public var routePattern: String
    /// Response status sent.
    public var status: Int
    /// From the first byte of the request headers being parsed to the response being sent.
    public var durationMicroseconds: Int64
    /// The request id echoed in `X-Request-Id`.
    public var requestID: String
    /// Numeric peer address.
    public var remoteAddress: String
    /// Response body bytes (for a stream, the bytes handed to the connection).
    public var bodyBytes: Int
}

/// A snapshot of the server's load.
public struct HTTPServerStats: Sendable {
    /// Requests received and not yet completed.
    public var inFlight: Int
    /// Requests waiting for a worker.
    public var queueDepth: Int
    /// Workers running a handler.
    public var workersBusy: Int
    /// Configured worker threads.
    public var workerThreads: Int
    /// Streaming responses open now (each holds a connection but no thread).
    public var openStreams: Int
}
