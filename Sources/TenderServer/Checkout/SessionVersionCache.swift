import PaymentRequest
import Synchronization

/// What an update needs from a session's latest version, decoded.
struct CachedSessionVersion: Sendable {
    let event: String
    let inputSHA256: [UInt8]?
    /// The update JSON returned for the event that produced this version (sorted keys).
    let responseJSON: String?
    let checkout: PricedCheckout
    /// The JSON of `checkout.inputs`, the same for every version of a session: written once, then carried.
    let inputsJSON: [UInt8]
    /// Who may update the session: fixed when it is created, so any version's copy is the session's.
    let access: SessionAccessFacts
}

/// A session's owner and client-secret digest (never change after creation).
struct SessionAccessFacts: Sendable {
    let merchantId: String
    let clientSecretSHA256: [UInt8]
}

/// Values keyed by (session id, version). A stored version is never rewritten (rule 39: each event
/// appends the next one), so an entry can never be stale; for checkout updates the cache saves the
/// version read and its JSON decoding. Entries are added after their transaction committed, never from
/// inside it. Bounded by `entriesMax`: the oldest entry leaves first.
final class SessionVersionCache<Value: Sendable>: Sendable {
    struct Key: Hashable, Sendable {
        let sessionId: String
        let version: Int
    }

    struct State: Sendable {
        var entries: [Key: Value] = [:]
        /// Insertion order, as a ring: `order[next]` is the oldest once the ring is full.
        var order: [Key?]
        var next = 0
        /// The highest version held per session.
        var latest: [String: Int] = [:]
    }

    /// Most entries held.
    let entriesMax: Int
    let state: Mutex<State>

    /// A cache holding at most `entriesMax` versions (at least one).
    init(entriesMax: Int = sessionVersionCacheEntriesMaxDefault) {
        self.entriesMax = max(1, entriesMax)
        state = Mutex(State(order: Array(repeating: nil, count: max(1, entriesMax))))
    }

    /// The cached version, if any.
    func entry(sessionId: String, version: Int) -> Value? {
        state.withLock { $0.entries[Key(sessionId: sessionId, version: version)] }
    }

    /// The highest version of the session held, with its value: the version this process last saw
    /// committed, which another node may have passed since (the caller checks it against the row).
    func latest(sessionId: String) -> (version: Int, value: Value)? {
        state.withLock { s in
            guard let version = s.latest[sessionId], let value = s.entries[Key(sessionId: sessionId, version: version)]
            else { return nil }
            return (version, value)
        }
    }

    /// Remembers a committed version, evicting the oldest entry when full.
    func insert(sessionId: String, version: Int, _ entry: Value) {
        let key = Key(sessionId: sessionId, version: version)
        state.withLock { s in
            guard s.entries[key] == nil else { return }
            if let oldest = s.order[s.next] {
                s.entries[oldest] = nil
                if s.latest[oldest.sessionId] == oldest.version { s.latest[oldest.sessionId] = nil }
            }
            s.order[s.next] = key
            s.next = (s.next + 1) % s.order.count
            s.entries[key] = entry
            if s.latest[sessionId].map({ $0 < version }) ?? true { s.latest[sessionId] = version }
        }
    }

    /// Entries held now.
    var count: Int { state.withLock { $0.entries.count } }
}

/// Default bound of a `SessionVersionCache`: room for one version of each of this many busy sessions.
let sessionVersionCacheEntriesMaxDefault = 4_096
