import Glibc
import Synchronization

/// One NOTIFY received on a LISTENed channel.
public struct PostgresNotification: Sendable, Equatable {
    /// The channel name.
    public let channel: String
    /// The payload ('' when NOTIFY had none).
    public let payload: String
}

/// A dedicated connection (outside the pool: LISTEN does not work through pgbouncer transaction
/// pooling, §7.4) that LISTENs on fixed channels, reconnecting and re-LISTENing after failures.
///
/// NOTIFYs sent while disconnected are lost, so `wait` reports every (re)connection with
/// `reconnected: true` and callers re-scan their tables. If the database was reachable in `init`,
/// LISTEN is active when `init` returns and no flag is reported for that first connection.
/// Concurrent `wait` calls are serialised.
public final class PostgresListener: Sendable {
    private struct State: ~Copyable {
        var connection: ConnectionBox?
        var lastAttemptNanoseconds: UInt64 = 0
    }

    /// Longest channel name PostgreSQL keeps (NAMEDATALEN - 1); longer names are silently truncated
    /// by the server, so they are refused here.
    public static let channelNameBytesMax = 63
    /// Most notifications returned by one `wait`; the rest stay queued for the next call.
    public static let notificationsPerWaitMax = 1_000
    /// Least time between reconnection attempts, so a down database is not hammered.
    public static let reconnectIntervalMilliseconds = 500

    private let settings: Result<ConnectSettings, PostgresError>
    private let channels: [String]
    private let state: Mutex<State>
    private let closed = Atomic<Bool>(false)
    /// Self-pipe: `close()` writes to `wakeWriteDescriptor` to wake a `wait` blocked in poll(2).
    private let wakeDescriptor: Int32
    private let wakeWriteDescriptor: Int32

    /// Connects and LISTENs right away when possible; otherwise `wait` keeps trying.
    /// Channel names are static configuration: an empty or over-long name is a programming error.
    public init(configuration: PostgresConfiguration, channels: [String]) {
        configuration.validate()
        for channel in channels {
            precondition(!channel.isEmpty && channel.utf8.count <= Self.channelNameBytesMax && !channel.utf8.contains(0),
                         "LISTEN channel names must be 1...\(Self.channelNameBytesMax) bytes without NUL")
        }
        self.channels = channels
        self.settings = ConnectSettings.make(configuration)
        var pipeDescriptors: [Int32] = [-1, -1]
        if pipe(&pipeDescriptors) == 0 {
            for descriptor in pipeDescriptors {
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
                _ = fcntl(descriptor, F_SETFL, O_NONBLOCK)
            }
        } else {
            pipeDescriptors = [-1, -1]
        }
        self.wakeDescriptor = pipeDescriptors[0]
        self.wakeWriteDescriptor = pipeDescriptors[1]
        var initial = State()
        initial.connection = Self.connect(settings, channels)
        initial.lastAttemptNanoseconds = monotonicNanoseconds()
        self.state = Mutex(initial)
    }

    deinit {
        if wakeDescriptor >= 0 { Glibc.close(wakeDescriptor) }
        if wakeWriteDescriptor >= 0 { Glibc.close(wakeWriteDescriptor) }
    }

    /// Waits up to the timeout and returns the notifications received (possibly none). After a
    /// reconnection it returns no notifications and `reconnected: true`, so the caller re-scans.
    public func wait(timeoutMilliseconds: Int) -> (notifications: [PostgresNotification], reconnected: Bool) {
        let deadline = monotonicNanoseconds() + UInt64(min(max(0, timeoutMilliseconds), PostgresPool.timeoutMillisecondsMax)) * 1_000_000
        return state.withLock { state in
            if closed.load(ordering: .acquiring) { return ([], false) }
            if state.connection == nil {
                return reconnect(&state, deadline: deadline)
            }
            guard let box = state.connection else { return ([], false) }
            // Notifications may already sit in libpq's buffer from an earlier read.
            var (alive, notifications) = box.connection.consumeNotifications(limit: Self.notificationsPerWaitMax)
            if !alive {
                state.connection = nil
                return reconnect(&state, deadline: deadline)
            }
            if !notifications.isEmpty { return (notifications, false) }
            let (socketReadable, woken) = pollReadable(box.connection.socket, deadline: deadline)
            if woken || !socketReadable { return ([], false) }
            (alive, notifications) = box.connection.consumeNotifications(limit: Self.notificationsPerWaitMax)
            if !alive {
                state.connection = nil
                return reconnect(&state, deadline: deadline)
            }
            return (notifications, false)
        }
    }

    /// Closes the connection; later `wait` calls return at once with nothing.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var one: UInt8 = 1
        _ = write(wakeWriteDescriptor, &one, 1)
        state.withLock { state in state.connection = nil }
    }

    // MARK: Private

    /// One reconnection attempt (rate-limited); without success, sleeps until the deadline.
    private func reconnect(_ state: inout State, deadline: UInt64) -> ([PostgresNotification], Bool) {
        let now = monotonicNanoseconds()
        let interval = UInt64(Self.reconnectIntervalMilliseconds) * 1_000_000
        if now >= state.lastAttemptNanoseconds + interval {
            state.lastAttemptNanoseconds = now
            if let box = Self.connect(settings, channels) {
                state.connection = box
                return ([], true)
            }
        }
        let wakeAt = min(deadline, max(monotonicNanoseconds(), state.lastAttemptNanoseconds + interval))
        _ = pollReadable(-1, deadline: wakeAt)
        return ([], false)
    }

    private static func connect(_ settings: Result<ConnectSettings, PostgresError>,
                                _ channels: [String]) -> ConnectionBox? {
        guard case .success(let settings) = settings,
              let connection = try? PostgresConnection.open(settings) else { return nil }
        for channel in channels {
            guard (try? connection.listen(channel: channel)) != nil else { return nil }
        }
        return ConnectionBox(connection: connection)
    }

    /// Polls `socket` (ignored when negative) and the wake eventfd until the deadline.
    private func pollReadable(_ socket: Int32, deadline: UInt64) -> (readable: Bool, woken: Bool) {
        var descriptors = [pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
        while true {
            let now = monotonicNanoseconds()
            let remaining = deadline > now ? Int32(min((deadline - now) / 1_000_000, UInt64(Int32.max))) : 0
            let count = poll(&descriptors, socket >= 0 ? 2 : 1, remaining)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return (false, false) }
            let woken = descriptors[0].revents != 0
            let readable = socket >= 0 && descriptors[1].revents != 0
            return (readable, woken)
        }
    }
}
