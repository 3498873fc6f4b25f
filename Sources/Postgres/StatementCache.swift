import Glibc
import Synchronization

/// One connection's prepared statements: SQL text → server-side name, least recently used evicted.
///
/// The cache only mirrors what the session holds: an entry is added after PostgreSQL accepted the
/// `Parse` (a failed prepare leaves nothing behind), and names dropped by eviction or invalidation wait
/// in `pendingDeallocations` until the session is outside a transaction, where a `DEALLOCATE` can
/// neither abort the caller's work nor be refused because an earlier error aborted it.
struct StatementCache {
    private struct Entry {
        let name: String
        var lastUse: UInt64
    }

    /// Most entries kept; 0 disables the cache.
    let capacity: Int
    private var entries: [String: Entry] = [:]
    private var clock: UInt64 = 0
    private var nextName: UInt64 = 0
    /// Server-side names no longer in the cache and not yet deallocated.
    private(set) var pendingDeallocations: [String] = []

    init(capacity: Int) {
        self.capacity = capacity
    }

    var isEnabled: Bool { capacity > 0 }
    var count: Int { entries.count }

    /// The prepared name for `text`, marking it used; nil when it is not prepared on this session.
    /// One hash of the text per call (statements run to kilobytes; three lookups cost 9% of a finance event).
    mutating func name(for text: String) -> String? {
        guard let index = entries.index(forKey: text) else { return nil }
        clock += 1
        entries.values[index].lastUse = clock
        return entries.values[index].name
    }

    /// A fresh server-side name for the next prepare (never reused within a session).
    mutating func freshName() -> String {
        nextName += 1
        return "tender_\(nextName)"
    }

    /// Records a successful prepare; evicts the least recently used entry when full.
    mutating func insert(_ text: String, name: String) {
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries.removeValue(forKey: oldest.key)
            pendingDeallocations.append(oldest.value.name)
        }
        clock += 1
        entries[text] = Entry(name: name, lastUse: clock)
    }

    /// Drops `text`'s entry (its plan went stale); the name is deallocated later when `deallocate` is
    /// true (false: the server no longer has it).
    mutating func invalidate(_ text: String, deallocate: Bool) {
        guard let entry = entries.removeValue(forKey: text) else { return }
        if deallocate { pendingDeallocations.append(entry.name) }
    }

    /// Takes the pending names for one `DEALLOCATE` round trip.
    mutating func takePendingDeallocations() -> [String] {
        defer { pendingDeallocations = [] }
        return pendingDeallocations
    }

    /// Forgets everything: the session was reset (a reconnect has no prepared statements).
    mutating func clear() {
        entries = [:]
        pendingDeallocations = []
    }
}

/// Process-wide counts of what the Postgres module sent, for benchmarks and tests that count round trips.
public enum PostgresCounters {
    private static let roundTripCount = Atomic<Int>(0)
    private static let prepareCount = Atomic<Int>(0)

    /// Client-server round trips so far (each statement, prepare, BEGIN, COMMIT, ROLLBACK, DEALLOCATE).
    public static var roundTrips: Int { roundTripCount.load(ordering: .relaxed) }
    /// Statements prepared so far (each also counted in `roundTrips`).
    public static var prepares: Int { prepareCount.load(ordering: .relaxed) }

    /// Round trips sent by the calling thread so far: a test of one request's round trips, run on its own
    /// thread, counts exactly its own whatever else the process does meanwhile.
    public static var roundTripsOnThisThread: Int { Int(bitPattern: pthread_getspecific(threadKey)) }

    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key for the round-trip counter")
        return key
    }()

    static func countRoundTrip() {
        roundTripCount.add(1, ordering: .relaxed)
        pthread_setspecific(threadKey, UnsafeRawPointer(bitPattern: roundTripsOnThisThread + 1))
    }
    static func countPrepare() { prepareCount.add(1, ordering: .relaxed) }
}
