import Foundation
import Synchronization

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

    public init(format: LogFormat = .json, minimumLevel: LogLevel = .info, sink: Sink? = nil) {
        self.format = format
        self.minimumLevel = minimumLevel
        self.sink = sink ?? Logger.standardError
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
        let time = RFC3339.cachedNow()
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

/// RFC 3339 UTC timestamps with millisecond precision, formatted without locale-dependent APIs.
public enum RFC3339 {
    private static let secondCache = Mutex((second: Int64.min, text: ""))

    /// The current time, formatting the `YYYY-MM-DDTHH:MM:SS` part once per second.
    public static func cachedNow() -> String {
        let millisTotal = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let second = millisTotal >= 0 ? millisTotal / 1000 : (millisTotal - 999) / 1000
        let millis = millisTotal - second * 1000
        let prefix: String = secondCache.withLock { cache in
            if cache.second != second {
                let full = string(fromUnixMilliseconds: second * 1000)
                cache = (second, String(full.dropLast(5)))
            }
            return cache.text
        }
        let m = String(millis)
        return prefix + "." + String(repeating: "0", count: 3 - m.count) + m + "Z"
    }

    public static func string(from date: Date) -> String {
        let millisTotal = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        return string(fromUnixMilliseconds: millisTotal)
    }

    /// Formats milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    public static func string(fromUnixMilliseconds millisTotal: Int64) -> String {
        var days = millisTotal >= 0 ? millisTotal / 86_400_000 : (millisTotal - 86_399_999) / 86_400_000
        let millisOfDay = millisTotal - days * 86_400_000
        let hour = millisOfDay / 3_600_000
        let minute = (millisOfDay / 60_000) % 60
        let second = (millisOfDay / 1000) % 60
        let millis = millisOfDay % 1000
        // Civil-from-days (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        var year = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        if month <= 2 { year += 1 }
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(millis, 3))Z"
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
