import FinanceStore
import Foundation
import HTTPServer
import Observability
import Postgres
import Synchronization
import Time

/// Serves every finance monitoring stream (SSE) from one thread (issue 6 item 5: no worker per idle
/// subscriber). It LISTENs on `tender_finance`, which the feed writer (FinanceFeedIngest) notifies once
/// new positions are durable, but re-reads every subscriber at least every `pollIntervalMilliseconds`
/// as well, because correctness must not depend on NOTIFY: what a subscriber receives always comes from
/// the commit-ordered feed (`finance_feed`, FinanceReader.feedPage).
public final class FinanceFeedHub: Sendable {
    /// Bounds and cadences of the hub.
    public struct Settings: Sendable {
        /// Rows per SSE `changes` event; keeps one event well under the stream buffer.
        public var pageSize = 200
        /// Longest silence before a `: ping` comment (docs/finance-store.md §5.3: every 15 s).
        public var heartbeatMilliseconds = 15_000
        /// Fallback re-read of every subscriber, NOTIFY or not.
        public var pollIntervalMilliseconds = 1_000
        /// Pages one subscriber may take per turn, so one catch-up cannot starve live subscribers.
        public var pagesPerTurnMax = 8
        /// Most simultaneous subscribers; more are refused with 503.
        public var subscribersMax = 1_000
        /// The documented defaults.
        public init() {}
    }

    private struct Subscriber {
        let stream: HTTPStream
        let scope: HistoryScope
        var position: FeedPosition
        var due = true
        var caughtUp = false
        /// An event read but not yet sent for lack of buffer room.
        var pending: [UInt8]?
        var lastSentNanoseconds: UInt64
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        var running = false
        var started = false
    }

    private let pool: PostgresPool
    private let codec: HistoryTokenCodec
    private let logger: Logger
    private let settings: Settings
    private let state = Mutex(State())
    private let listener: Mutex<PostgresListener?> = Mutex(nil)
    private let finished = DispatchSemaphore(value: 0)

    private let clock: Clock

    /// Creates a hub; its thread starts with the first subscriber (or `start()`).
    public init(pool: PostgresPool, codec: HistoryTokenCodec, logger: Logger, settings: Settings = Settings(),
                clock: Clock = .system) {
        self.clock = clock
        self.pool = pool
        self.codec = codec
        self.logger = logger
        self.settings = settings
    }

    /// Number of open subscriptions.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Starts the hub thread once; later calls do nothing.
    public func start() {
        let shouldStart = state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            state.running = true
            return true
        }
        guard shouldStart else { return }
        let newListener = PostgresListener(configuration: pool.configuration, channels: [FinanceRecorder.notifyChannel])
        listener.withLock { $0 = newListener }
        let thread = Thread { [self] in
            self.run(newListener)
            self.finished.signal()
        }
        thread.name = "tender-finance-feed"
        thread.start()
    }

    /// Stops the thread and closes every open stream (their clients reconnect with Last-Event-ID).
    public func stop() {
        let (wasRunning, streams) = state.withLock { state -> (Bool, [HTTPStream]) in
            let wasRunning = state.running
            state.running = false
            let streams = state.subscribers.values.map(\.stream)
            state.subscribers = [:]
            return (wasRunning, streams)
        }
        listener.withLock { $0?.close() }
        if wasRunning { _ = finished.wait(timeout: .now() + 5) }
        streams.forEach { $0.close() }
    }

    /// Adds a stream that resumes after `position`; false when the hub is full or stopped.
    public func subscribe(_ stream: HTTPStream, scope: HistoryScope, position: FeedPosition) -> Bool {
        start()
        let id = state.withLock { state -> Int? in
            guard state.running, state.subscribers.count < settings.subscribersMax else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = Subscriber(stream: stream, scope: scope, position: position,
                                               lastSentNanoseconds: Self.nowNanoseconds())
            return id
        }
        guard let id else { return false }
        stream.onClose { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return true
    }

    // MARK: The hub thread

    private func run(_ listener: PostgresListener) {
        var lastFullScan = Self.nowNanoseconds()
        while state.withLock({ $0.running }) {
            let busy = state.withLock { state -> Bool in
                state.subscribers.values.contains { $0.due || $0.pending != nil }
            }
            let timeout = busy ? 1 : 50
            let (notifications, reconnected) = listener.wait(timeoutMilliseconds: timeout)
            let woken = Set(notifications.map(\.payload))
            let now = Self.nowNanoseconds()
            let fullScan = reconnected || now - lastFullScan >= UInt64(settings.pollIntervalMilliseconds) * 1_000_000
            if fullScan { lastFullScan = now }
            let due = state.withLock { state -> [(Int, Subscriber)] in
                for (id, subscriber) in state.subscribers {
                    if fullScan || woken.contains(subscriber.scope.merchantID) {
                        state.subscribers[id]?.due = true
                    }
                }
                return state.subscribers.filter { $0.value.due || $0.value.pending != nil }.map { ($0.key, $0.value) }
            }
            for (id, subscriber) in due {
                let updated = serveTurn(subscriber)
                state.withLock { state in
                    if state.subscribers[id] != nil { state.subscribers[id] = updated }
                }
            }
            heartbeat()
        }
    }

    /// Sends what `subscriber` has not seen yet: up to `pagesPerTurnMax` pages, as the buffer allows.
    private func serveTurn(_ original: Subscriber) -> Subscriber {
        var subscriber = original
        let stream = subscriber.stream
        if let pending = subscriber.pending {
            guard pending.count <= stream.bufferBytesMax - stream.bufferedBytes else { return subscriber }
            _ = stream.send(pending)
            subscriber.pending = nil
            subscriber.lastSentNanoseconds = Self.nowNanoseconds()
        }
        guard subscriber.due else { return subscriber }
        do {
            for _ in 0..<settings.pagesPerTurnMax {
                let now = FinanceTimestamp(secondsSinceEpoch: clock.unixSeconds())
                let page = try pool.withConnection { conn in
                    try FinanceReader.feedPage(scope: subscriber.scope, after: subscriber.position,
                                               pageSize: settings.pageSize, codec: codec, now: now, on: conn)
                }
                if page.newPosition != subscriber.position {
                    let event = try Self.changesFrame(token: page.newToken, body: page.jsonBody())
                    subscriber.position = page.newPosition
                    if event.count <= stream.bufferBytesMax - stream.bufferedBytes {
                        _ = stream.send(event)
                        subscriber.lastSentNanoseconds = Self.nowNanoseconds()
                    } else {
                        subscriber.pending = event
                    }
                }
                if !page.hasMore {
                    subscriber.due = false
                    if !subscriber.caughtUp {
                        subscriber.caughtUp = true
                        let caughtUp = try SSEEvent(id: page.newToken, event: "caught-up",
                                                    data: "{\"newToken\":\"\(page.newToken)\"}").encoded
                        if subscriber.pending == nil {
                            _ = stream.send(caughtUp)
                        } else {
                            subscriber.pending? += caughtUp
                        }
                    }
                    break
                }
                if subscriber.pending != nil { break }
            }
        } catch let error as FinanceError {
            // The change log itself is unusable for this scope: tell the client, then end (§5.3).
            logger.error("finance feed failed", [("code", error.code.rawValue)])
            if let event = try? SSEEvent(event: "error", data: "{\"code\":\"\(error.code.rawValue)\"}") {
                _ = stream.send(event)
            }
            stream.close()
        } catch {
            // Database trouble: keep the subscriber, the next full scan retries.
            logger.warning("finance feed read failed", [("error", String(describing: type(of: error)))])
            subscriber.due = false
        }
        return subscriber
    }

    /// A `changes` event built straight from the page's bytes. The body is one JSON line (jsonb text
    /// and the page builder never emit a raw line break), so it is a single `data:` field; anything else
    /// goes through `SSEEvent`, which splits lines (§9.2.5).
    static func changesFrame(token: String, body: [UInt8]) throws -> [UInt8] {
        let tokenSafe = !token.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 })
        guard tokenSafe, !body.contains(where: { $0 == 0x0D || $0 == 0x0A }) else {
            return try SSEEvent(id: token, event: "changes", data: String(decoding: body, as: UTF8.self)).encoded
        }
        var out: [UInt8] = []
        out.reserveCapacity(body.count + token.utf8.count + 32)
        out += "id: ".utf8
        out += token.utf8
        out += "\nevent: changes\ndata: ".utf8
        out += body
        out += [0x0A, 0x0A]
        return out
    }

    private func heartbeat() {
        let now = Self.nowNanoseconds()
        let interval = UInt64(settings.heartbeatMilliseconds) * 1_000_000
        let quiet = state.withLock { state -> [HTTPStream] in
            var streams: [HTTPStream] = []
            for (id, subscriber) in state.subscribers where now > subscriber.lastSentNanoseconds
                && now - subscriber.lastSentNanoseconds >= interval {
                state.subscribers[id]?.lastSentNanoseconds = now
                streams.append(subscriber.stream)
            }
            return streams
        }
        for stream in quiet { _ = stream.send(SSEEvent.comment("ping")) }
    }

    private static func nowNanoseconds() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds
    }
}
