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

    private static let stderrLock = Mutex(())

    private static let standardError: Sink = { line in
        stderrLock.withLock { _ in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }

    /// A logger that drops everything (tests, benchmarks).
    public static let silent = Logger(sink: { _ in })

    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard level >= minimumLevel else { return }
        let time = RFC3339.string(from: Date())
        switch format {
        case .json:
            var line = "{\"time\":\(jsonQuoted(time)),\"level\":\(jsonQuoted(level.rawValue)),\"msg\":\(jsonQuoted(message))"
            for (key, value) in fields {
                line += ",\(jsonQuoted(key)):\(jsonQuoted(value))"
            }
            line += "}"
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
