import Glibc
import Synchronization

/// Moves a non-Sendable connection between threads; the pool guarantees a single owner at a time.
struct ConnectionBox: @unchecked Sendable {
    let connection: PostgresConnection
}

/// A bounded, lazily-filled pool of blocking connections with a FIFO wait queue.
///
/// Acquisition order: an idle connection (validated without a round trip), else a new connection
/// while fewer than `connectionsMax` exist, else a place in the wait queue (at most `waitQueueMax`,
/// beyond that `pool_exhausted`) until a connection is handed over or `acquireTimeoutMilliseconds`
/// passes (`pool_timeout`). Released connections go straight to the oldest waiter.
public final class PostgresPool: Sendable {
    private enum Grant: Sendable {
        case connection(ConnectionBox)
        case openSlot
        case closed
    }

    private struct State: ~Copyable {
        var idle: [ConnectionBox] = []
        var total = 0
        var inUse = 0
        var waiters: [Waiter] = []
        var grants: [UInt64: Grant] = [:]
        var nextWaiterID: UInt64 = 0
        var closed = false
    }

    private enum Decision {
        case reuse(ConnectionBox)
        case open
        case wait(Waiter)
        case fail(PostgresError)
    }

    /// Longest wait honoured (one day), so a huge configured timeout cannot overflow the deadline.
    static let timeoutMillisecondsMax = 86_400_000

    /// The configuration the pool was made with (a `PostgresListener` for the same database reuses it).
    public let configuration: PostgresConfiguration
    private let settings: Result<ConnectSettings, PostgresError>
    private let state = Mutex(State())
    #if DEBUG
    let heldConnections = HeldConnections()
    #endif

    /// Creates the pool without connecting; connections open on demand.
    public init(configuration: PostgresConfiguration) {
        configuration.validate()
        self.configuration = configuration
        self.settings = ConnectSettings.make(configuration)
    }

    deinit {
        close()
    }

    /// Counters at this instant.
    public var stats: PoolStats {
        state.withLock { state in
            PoolStats(inUse: state.inUse, idle: state.idle.count, waiting: state.waiters.count,
                      connectionsMax: configuration.connectionsMax)
        }
    }

    /// Lends a connection to `body` and takes it back afterwards. Body errors are rethrown unchanged;
    /// pool errors are `PostgresError`. A connection left broken or mid-transaction is rolled back or
    /// discarded on return.
    ///
    /// A thread must not ask for a second connection of this pool while it holds one: with as many
    /// workers as connections, a burst of such requests leaves every worker waiting for the acquire
    /// timeout. Debug builds trap on it (`HeldConnections`).
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        #if DEBUG
        heldConnections.enter(allowNested: configuration.allowNestedAcquisitionForTesting)
        defer { heldConnections.leave() }
        #endif
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    /// BEGIN … body … COMMIT. The body's own error is rethrown after ROLLBACK (it wins over a rollback
    /// failure); `transaction_commit_failed` when PostgreSQL refused the commit (e.g. 40001);
    /// `transaction_commit_unknown` when its answer was lost: re-read by idempotency key, never
    /// blindly retry (STYLE.md, Database).
    public func transaction<T>(isolation: TransactionIsolation = .readCommitted,
                               _ body: (PostgresConnection) throws -> T) throws -> T {
        try withConnection { connection in
            try connection.begin(isolation: isolation,
                                 statementTimeoutMilliseconds: configuration.statementTimeoutMilliseconds)
            let value: T
            do {
                value = try body(connection)
            } catch {
                connection.rollbackQuietly()
                throw error
            }
            try connection.commit()
            return value
        }
    }

    /// Runs one statement on a pooled connection.
    public func query(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        try withConnection { connection in try connection.query(sql, parameters) }
    }

    /// Runs one statement on a pooled connection and returns the affected row count.
    @discardableResult
    public func execute(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws -> Int {
        try withConnection { connection in try connection.execute(sql, parameters) }
    }

    /// Closes idle connections and refuses new acquisitions (`pool_closed`); queued threads fail at
    /// once; connections in use are closed when returned.
    public func close() {
        let (idle, waiters) = state.withLock { state -> ([ConnectionBox], [Waiter]) in
            state.closed = true
            let idle = state.idle
            state.idle = []
            state.total -= idle.count
            let waiters = state.waiters
            state.waiters = []
            for waiter in waiters { state.grants[waiter.id] = .closed }
            return (idle, waiters)
        }
        waiters.forEach { $0.signal() }
        _ = idle  // dropped here, outside the lock: deinit runs PQfinish
    }

    // MARK: Acquire and release

    private func acquire() throws(PostgresError) -> PostgresConnection {
        let settings = try self.settings.get()
        let decision = state.withLock { state -> Decision in
            if state.closed { return .fail(PostgresError(code: .poolClosed, message: "pool is closed")) }
            if let box = state.idle.popLast() {
                state.inUse += 1
                return .reuse(box)
            }
            if state.total < configuration.connectionsMax {
                state.total += 1
                state.inUse += 1
                return .open
            }
            if state.waiters.count >= configuration.waitQueueMax {
                return .fail(PostgresError(code: .poolExhausted,
                                           message: "wait queue full (waitQueueMax \(configuration.waitQueueMax))"))
            }
            let waiter = Waiter(id: state.nextWaiterID)
            state.nextWaiterID += 1
            state.waiters.append(waiter)
            return .wait(waiter)
        }
        switch decision {
        case .reuse(let box):
            return try checkOut(box, settings: settings)
        case .open:
            return try openOnSlot(settings)
        case .fail(let error):
            throw error
        case .wait(let waiter):
            let deadline = monotonicNanoseconds() + UInt64(min(configuration.acquireTimeoutMilliseconds, Self.timeoutMillisecondsMax)) * 1_000_000
            waiter.wait(untilNanoseconds: deadline)
            let grant = state.withLock { state -> Grant? in
                if let grant = state.grants.removeValue(forKey: waiter.id) { return grant }
                state.waiters.removeAll { $0 === waiter }
                return nil
            }
            switch grant {
            case .connection(let box)?: return try checkOut(box, settings: settings)
            case .openSlot?: return try openOnSlot(settings)
            case .closed?: throw PostgresError(code: .poolClosed, message: "pool closed while waiting")
            case nil:
                throw PostgresError(code: .poolTimeout,
                                    message: "no connection within \(configuration.acquireTimeoutMilliseconds) ms "
                                        + "(connectionsMax \(configuration.connectionsMax))")
            }
        }
    }

    /// Validates an idle connection; a stale one is replaced on the same slot.
    private func checkOut(_ box: ConnectionBox, settings: ConnectSettings) throws(PostgresError) -> PostgresConnection {
        if box.connection.looksUsableAfterIdle() {
            box.connection.beginCheckout(reused: true)
            return box.connection
        }
        return try openOnSlot(settings)
    }

    /// Opens a connection on a slot already counted in `total`; on failure gives the slot back.
    private func openOnSlot(_ settings: ConnectSettings) throws(PostgresError) -> PostgresConnection {
        do {
            let connection = try PostgresConnection.open(settings)
            connection.beginCheckout(reused: false)
            return connection
        } catch {
            let next = state.withLock { state -> Waiter? in
                state.inUse -= 1
                state.total -= 1
                return handSlotToNextWaiter(&state)
            }
            next?.signal()
            throw error
        }
    }

    private func handSlotToNextWaiter(_ state: inout State) -> Waiter? {
        guard !state.closed, !state.waiters.isEmpty else { return nil }
        let waiter = state.waiters.removeFirst()
        state.total += 1
        state.inUse += 1
        state.grants[waiter.id] = .openSlot
        return waiter
    }

    private func release(_ connection: PostgresConnection) {
        let reusable = connection.resetForReuse()
        let box = ConnectionBox(connection: connection)
        let (next, discarded) = state.withLock { state -> (Waiter?, ConnectionBox?) in
            state.inUse -= 1
            if !reusable || state.closed {
                state.total -= 1
                return (handSlotToNextWaiter(&state), box)
            }
            if !state.waiters.isEmpty {
                let waiter = state.waiters.removeFirst()
                state.inUse += 1
                state.grants[waiter.id] = .connection(box)
                return (waiter, nil)
            }
            state.idle.append(box)
            return (nil, nil)
        }
        next?.signal()
        _ = discarded
    }
}

#if DEBUG
/// Debug builds: how many connections of one pool each thread holds (a thread-local count per pool,
/// keyed by the thread's id), so a nested acquisition on the same thread traps where it happens.
final class HeldConnections: Sendable {
    private let counts = Mutex<[UInt: Int]>([:])

    /// Counts one more connection for the current thread; asserts it held none.
    func enter(allowNested: Bool) {
        let thread = UInt(pthread_self())
        let held = counts.withLock { counts -> Int in
            defer { counts[thread, default: 0] += 1 }
            return counts[thread, default: 0]
        }
        assert(held == 0 || allowNested, "a thread asked the pool for a second connection while holding one (nested acquisition)")
    }

    /// Connections the current thread holds.
    var heldByCurrentThread: Int { counts.withLock { $0[UInt(pthread_self()), default: 0] } }

    /// Counts one connection fewer for the current thread.
    func leave() {
        let thread = UInt(pthread_self())
        counts.withLock { counts in
            let left = counts[thread, default: 1] - 1
            counts[thread] = left > 0 ? left : nil
        }
    }
}
#endif
