import Foundation
import Synchronization
import Time

/// Log output format (`TENDER_LOG_FORMAT`).
public enum LogFormat: String, Sendable {
    case json, text
}

/// Log severity.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warning, error

    private var rank: Int {
        switch self {
        case .debug: 0
        case .info: 1
        case .warning: 2
        case .error: 3
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// A structured logger writing one line per event to stderr (or a custom sink).
///
/// Fields are plain strings chosen by the caller; callers never pass request bodies, auth headers,
/// PANs, cryptograms or keys. `LogValue.masked` exists for the few places that must mention a card.
public struct Logger: Sendable {
    public typealias Sink = @Sendable (String) -> Void

    public let format: LogFormat
    public let minimumLevel: LogLevel
    private let sink: Sink
    /// True for the process's stderr (no custom sink): lines may then be built straight into its buffer.
    private let writesStandardError: Bool

    public init(format: LogFormat = .json, minimumLevel: LogLevel = .info, sink: Sink? = nil) {
        self.format = format
        self.minimumLevel = minimumLevel
        self.sink = sink ?? Logger.standardError
        self.writesStandardError = sink == nil
    }

    private static let standardError: Sink = { line in
        StandardErrorBuffer.shared.append(line)
    }

    /// Writes any buffered log lines now (at shutdown, before exit).
    public static func flush() {
        StandardErrorBuffer.shared.flush()
    }

    /// A logger that drops everything (tests, benchmarks).
    public static let silent = Logger(sink: { _ in })

    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard level >= minimumLevel else { return }
        let time = LogTime.cachedNow()
        switch format {
        case .json:
            var line = "{\"time\":\""
            line.reserveCapacity(64 + message.utf8.count + fields.count * 32)
            line.append(time)
            line.append("\",\"level\":\"")
            line.append(level.rawValue)
            line.append("\",\"msg\":")
            line.append(jsonQuoted(message))
            for (key, value) in fields {
                line.append(",")
                line.append(jsonQuoted(key))
                line.append(":")
                line.append(jsonQuoted(value))
            }
            line.append("}")
            sink(line)
        case .text:
            var line = "\(time) \(level.rawValue.uppercased()) \(message)"
            for (key, value) in fields { line += " \(key)=\(value)" }
            sink(line)
        }
    }

    /// The access log line of one finished request: the same line as `info("request", [method, route,
    /// status, duration_us, request_id])`, built byte by byte into one buffer (stderr's own, under its
    /// lock), with no intermediate strings: it runs once per request.
    public func request(method: String, route: String, status: Int, durationMicroseconds: Int64, requestID: String) {
        guard LogLevel.info >= minimumLevel else { return }
        guard format == .json else {
            log(.info, "request", [("method", method), ("route", route), ("status", String(status)),
                                   ("duration_us", String(durationMicroseconds)), ("request_id", requestID)])
            return
        }
        let millis = Clock.system.unixMilliseconds()
        let build = { (out: inout [UInt8]) in
            out.append(contentsOf: AccessLine.timeKey)
            LogTime.append(unixMilliseconds: millis, to: &out)
            out.append(contentsOf: AccessLine.methodKey)
            appendJSONQuoted(method, to: &out)
            out.append(contentsOf: AccessLine.routeKey)
            appendJSONQuoted(route, to: &out)
            out.append(contentsOf: AccessLine.statusKey)
            AccessLine.appendDecimal(Int64(status), to: &out)
            out.append(contentsOf: AccessLine.durationKey)
            AccessLine.appendDecimal(durationMicroseconds, to: &out)
            out.append(contentsOf: AccessLine.requestIDKey)
            appendJSONQuoted(requestID, to: &out)
            out.append(contentsOf: AccessLine.end)
        }
        if writesStandardError {
            StandardErrorBuffer.shared.append { buffer in
                build(&buffer)
                buffer.append(0x0A)
            }
        } else {
            var line: [UInt8] = []
            line.reserveCapacity(192)
            build(&line)
            sink(String(decoding: line, as: UTF8.self))
        }
    }

    public func debug(_ message: String, _ fields: [(String, String)] = []) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, String)] = []) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [(String, String)] = []) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [(String, String)] = []) { log(.error, message, fields) }
}

/// Escapes `text` as a JSON string literal.
public func jsonQuoted(_ text: String) -> String {
    // Fast path: printable ASCII without quotes or backslashes needs no escaping.
    if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
        return "\"" + text + "\""
    }
    var out = "\""
    out.reserveCapacity(text.utf8.count + 2)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                out += String(format: "\\u%04x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    out += "\""
    return out
}

/// Appends `text` as a JSON string literal, byte for byte what `jsonQuoted` returns.
func appendJSONQuoted(_ text: String, to out: inout [UInt8]) {
    out.append(0x22)
    for byte in text.utf8 {
        switch byte {
        case 0x22: out.append(0x5C); out.append(0x22)
        case 0x5C: out.append(0x5C); out.append(0x5C)
        case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
        case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
        case 0..<0x20:
            out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
            out.append(AccessLine.hexDigits[Int(byte >> 4)])
            out.append(AccessLine.hexDigits[Int(byte & 0x0F)])
        default: out.append(byte)
        }
    }
    out.append(0x22)
}

/// The fixed parts of the access log line (`Logger.request`), made once.
enum AccessLine {
    static let timeKey = Array("{\"time\":\"".utf8)
    static let methodKey = Array("\",\"level\":\"info\",\"msg\":\"request\",\"method\":".utf8)
    static let routeKey = Array(",\"route\":".utf8)
    static let statusKey = Array(",\"status\":\"".utf8)
    static let durationKey = Array("\",\"duration_us\":\"".utf8)
    static let requestIDKey = Array("\",\"request_id\":".utf8)
    static let end = Array("}".utf8)
    static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `value` in decimal, as `String(value)` spells it.
    static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for index in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[index]) }
        }
    }
}

/// Tender's RFC 3339 formatter and parser live in `Time`; the name stays reachable through Observability.
public typealias RFC3339 = Time.RFC3339

/// The log line's time: the `YYYY-MM-DDTHH:MM:SS` part is formatted once per second.
enum LogTime {
    private static let secondCache = Mutex((second: Int64.min, text: ""))
    private static let secondBytes = Mutex((second: Int64.min, bytes: [UInt8]()))

    /// Appends the time of `unixMilliseconds` as `cachedNow` spells it (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
    static func append(unixMilliseconds millisTotal: Int64, to out: inout [UInt8]) {
        let second = CivilCalendar.floorDivide(millisTotal, 1000)
        let millis = Int(millisTotal - second * 1000)
        secondBytes.withLock { cache in
            if cache.second != second {
                cache = (second, Array(RFC3339.format(unixSeconds: second).dropLast().utf8))
            }
            out.append(contentsOf: cache.bytes)
        }
        out.append(UInt8(ascii: "."))
        out.append(UInt8(ascii: "0") + UInt8(millis / 100))
        out.append(UInt8(ascii: "0") + UInt8(millis / 10 % 10))
        out.append(UInt8(ascii: "0") + UInt8(millis % 10))
        out.append(UInt8(ascii: "Z"))
    }

    /// The clock's current time with milliseconds.
    static func cachedNow(_ clock: Clock = .system) -> String {
        let millisTotal = clock.unixMilliseconds()
        let second = CivilCalendar.floorDivide(millisTotal, 1000)
        let millis = millisTotal - second * 1000
        let prefix: String = secondCache.withLock { cache in
            if cache.second != second {
                cache = (second, String(RFC3339.format(unixSeconds: second).dropLast()))
            }
            return cache.text
        }
        let m = String(millis)
        return prefix + "." + String(repeating: "0", count: 3 - m.count) + m + "Z"
    }
}

/// Log lines are appended to a buffer and written to stderr in batches while a `LogFlushService` runs:
/// at most every 50 ms by its thread, at once when 64 KiB are waiting, and on `Logger.flush()`. One
/// write(2) per batch instead of one per request keeps the access log off the hot path. Without a
/// running flusher (tools, tests, before `serve` starts it and after it stops) each line is written at once.
final class StandardErrorBuffer: Sendable {
    static let shared = StandardErrorBuffer()
    /// Bytes buffered before a writer flushes inline.
    static let bufferBytesMax = 65_536
    /// How long a line may wait in the buffer.
    static let flushIntervalMilliseconds = 50

    private let pending = Mutex([UInt8]())
    private let writeLock = Mutex(())
    /// True while a flusher thread runs; otherwise lines are written as they come.
    let batching = Atomic<Bool>(false)

    private init() {}

    func append(_ line: String) {
        let full = pending.withLock { buffer -> Bool in
            buffer.append(contentsOf: line.utf8)
            buffer.append(0x0a)
            return buffer.count >= Self.bufferBytesMax
        }
        if full || !batching.load(ordering: .acquiring) { flush() }
    }

    /// Appends one line built in place (`build` adds its bytes and the newline) under the buffer's lock.
    func append(building build: (inout [UInt8]) -> Void) {
        let full = pending.withLock { buffer -> Bool in
            build(&buffer)
            return buffer.count >= Self.bufferBytesMax
        }
        if full || !batching.load(ordering: .acquiring) { flush() }
    }

    func flush() {
        // One writer at a time keeps batches in order.
        writeLock.withLock { _ in
            let batch = pending.withLock { buffer -> [UInt8] in
                let out = buffer
                buffer.removeAll(keepingCapacity: true)
                return out
            }
            guard !batch.isEmpty else { return }
            batch.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(2, raw.baseAddress.map { $0 + offset }, raw.count - offset)
                    if n <= 0 { break }
                    offset += n
                }
            }
        }
    }
}

/// The log flusher as a service: while it runs, stderr lines are batched and written every 50 ms; `stop`
/// ends its thread, writes what is left and goes back to writing each line at once. `tender serve`
/// starts it first and stops it last, so every other service's last lines are written.
public final class LogFlushService: Service {
    public let name = "log-flush"
    private let loop: ThreadService

    /// A flusher for the process's stderr buffer.
    public init() {
        loop = ThreadService(name: "log-flush") { loop in
            while loop.pause(milliseconds: StandardErrorBuffer.flushIntervalMilliseconds) {
                StandardErrorBuffer.shared.flush()
            }
        }
    }

    public func start() throws {
        try loop.start()
        StandardErrorBuffer.shared.batching.store(true, ordering: .releasing)
    }

    public func stop(deadline: ContinuousClock.Instant) -> Bool {
        StandardErrorBuffer.shared.batching.store(false, ordering: .releasing)
        let finished = loop.stop(deadline: deadline)
        StandardErrorBuffer.shared.flush()
        return finished
    }
}
