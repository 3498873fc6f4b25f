import Foundation

/// Where "now" comes from: the only place Tender reads the wall clock. Code that needs the time takes
/// a `Clock` (or a `now` passed in by its caller), so tests can fix or advance it.
///
/// Usage: `let now = clock.now()`; in tests `Clock.fixed(date)` or `Clock { date }`.
public struct Clock: Sendable {
    private let read: @Sendable () -> Date

    /// A clock that reads `read` each time.
    public init(_ read: @escaping @Sendable () -> Date) {
        self.read = read
    }

    /// The system's wall clock.
    public static let system = Clock { Date() }

    /// A clock that always answers `date`.
    public static func fixed(_ date: Date) -> Clock {
        Clock { date }
    }

    /// The current instant.
    public func now() -> Date {
        read()
    }

    /// The current instant as whole Unix seconds (floor).
    public func unixSeconds() -> Int64 {
        UnixTime.seconds(now())
    }

    /// The current instant as Unix milliseconds (floor).
    public func unixMilliseconds() -> Int64 {
        UnixTime.milliseconds(now())
    }

    /// The current instant as Unix microseconds (floor).
    public func unixMicroseconds() -> Int64 {
        UnixTime.microseconds(now())
    }
}

/// Exact conversions between `Date` and integral Unix time (floor, so instants before 1970 round down).
public enum UnixTime {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    public static func seconds(_ date: Date) -> Int64 {
        Int64(date.timeIntervalSince1970.rounded(.down))
    }

    /// Milliseconds since the epoch.
    public static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000).rounded(.down))
    }

    /// Microseconds since the epoch.
    public static func microseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down))
    }

    /// The instant `seconds` after the epoch.
    public static func date(seconds: Int64) -> Date {
        Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The instant `milliseconds` after the epoch.
    public static func date(milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1_000)
    }
}
