import Foundation
import Synchronization

/// Long-running work with an owner (the HTTP server, the payment resolver, the feed hub, the settlement
/// effects applier, the logger flusher, webhook and push senders). `tender serve` holds them in one
/// `ServiceGroup`: started in order, stopped in reverse, nothing detached.
public protocol Service: AnyObject, Sendable {
    /// A short stable name for logs (`http`, `resolver`, `webhooks`…).
    var name: String { get }
    /// Starts the work (threads, listeners) and returns; throwing means nothing of it is left running.
    func start() throws
    /// Asks the work to finish and waits until it has, or until `deadline` passes; returns true when it
    /// finished in time. Called once, after a successful `start`.
    func stop(deadline: ContinuousClock.Instant) -> Bool
}

/// The services of one process, in start order.
public final class ServiceGroup: Sendable {
    private let started = Mutex<[any Service]>([])
    private let logger: Logger

    /// An empty group logging to `logger`.
    public init(logger: Logger) { self.logger = logger }

    /// Starts `service` after those already started. When it throws, nothing is added (and the caller
    /// usually stops the group and exits).
    public func start(_ service: any Service) throws {
        do {
            try service.start()
        } catch {
            logger.error("service did not start", [("service", service.name), ("error", "\(error)")])
            throw error
        }
        started.withLock { $0.append(service) }
        logger.info("service started", [("service", service.name)])
    }

    /// Starts `services` in order. When one throws, those already started are stopped in reverse within
    /// `timeoutMilliseconds`, and the error is rethrown: a failed start leaves nothing running.
    public func start(_ services: [any Service], stoppingWithinMilliseconds timeoutMilliseconds: Int) throws {
        do {
            for service in services { try start(service) }
        } catch {
            stopAll(timeoutMilliseconds: timeoutMilliseconds)
            throw error
        }
    }

    /// The names of the running services, in start order.
    public var names: [String] { started.withLock { $0.map(\.name) } }

    /// Stops every started service in reverse order, each within what is left of `timeoutMilliseconds`.
    /// Returns the names of those that did not finish in time.
    @discardableResult
    public func stopAll(timeoutMilliseconds: Int) -> [String] {
        let services = started.withLock { list -> [any Service] in
            defer { list.removeAll() }
            return list
        }
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(timeoutMilliseconds))
        var late: [String] = []
        for service in services.reversed() {
            logger.info("service stopping", [("service", service.name)])
            if service.stop(deadline: deadline) {
                logger.info("service stopped", [("service", service.name)])
            } else {
                late.append(service.name)
                logger.warning("service did not stop in time", [("service", service.name)])
            }
        }
        return late
    }
}

/// A service made of one background loop on its own thread: `body` runs until `isStopping` says so
/// (it should check between bounded units of work), and `stop` waits for it to return.
public final class ThreadService: Service {
    public let name: String
    private let body: @Sendable (ThreadService) -> Void
    private let stopping = Atomic<Bool>(false)
    private let woken = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)
    private let finishedCondition = NSCondition()
    private let threadID = Atomic<Int32>(0)

    /// A service named `name` whose thread runs `body` once.
    public init(name: String, body: @escaping @Sendable (ThreadService) -> Void) {
        self.name = name
        self.body = body
    }

    /// True once `stop` was called: the loop should return soon.
    public var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// The kernel's id of the loop's thread (`/proc/self/task/<id>`) once it has started, else 0.
    public var osThreadID: Int32 { threadID.load(ordering: .acquiring) }

    /// True once the loop's thread has returned.
    public var isFinished: Bool { finished.withLock { $0 } }

    /// Ends the current or next `pause` early (new work arrived), within one 50 ms slice.
    public func wake() { woken.store(true, ordering: .releasing) }

    /// Sleeps up to `milliseconds`, waking early when the service is asked to stop or is woken. Returns
    /// false when stopping (the loop should return).
    public func pause(milliseconds: Int) -> Bool {
        let until = ContinuousClock.now.advanced(by: .milliseconds(milliseconds))
        while !isStopping {
            if woken.exchange(false, ordering: .acquiringAndReleasing) { return true }
            let left = ContinuousClock.now.duration(to: until)
            if left <= .zero { return true }
            let slice = min(left, .milliseconds(50))
            let (seconds, attos) = slice.components
            usleep(UInt32(seconds * 1_000_000 + attos / 1_000_000_000_000))
        }
        return false
    }

    public func start() throws {
        let thread = Thread { [self] in
            Self.nameCurrentThread("tender-\(name)")
            threadID.store(Self.currentOSThreadID(), ordering: .releasing)
            body(self)
            finishedCondition.lock()
            finished.withLock { $0 = true }
            finishedCondition.broadcast()
            finishedCondition.unlock()
        }
        thread.name = "tender-\(name)"
        thread.start()
    }

    /// The calling thread's kernel id, from `/proc/thread-self` (`<pid>/task/<tid>`); 0 if unreadable.
    static func currentOSThreadID() -> Int32 {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return link.split(separator: "/").last.flatMap { Int32($0) } ?? 0
    }

    /// Names the calling OS thread (`ps -T`, /proc/<pid>/task/*/comm show whose thread it is; Linux keeps
    /// 15 bytes). Foundation's `Thread.name` does not reach the OS thread on Linux.
    static func nameCurrentThread(_ name: String) {
        guard let file = FileHandle(forWritingAtPath: "/proc/thread-self/comm") else { return }
        defer { try? file.close() }
        try? file.write(contentsOf: Array(name.utf8.prefix(15)))
    }

    public func stop(deadline: ContinuousClock.Instant) -> Bool {
        stopping.store(true, ordering: .releasing)
        finishedCondition.lock()
        defer { finishedCondition.unlock() }
        while !finished.withLock({ $0 }) {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { return false }
            let (seconds, attos) = left.components
            let wake = Date(timeIntervalSinceNow: Double(seconds) + Double(attos) / 1e18)
            _ = finishedCondition.wait(until: wake)
        }
        return true
    }
}

/// A service made of two calls on something that owns its own threads (an adapter for work that
/// predates `Service`): `start` starts it, `stop` asks it to finish and returns whether it did in time.
public final class CallbackService: Service {
    public let name: String
    private let onStart: @Sendable () throws -> Void
    private let onStop: @Sendable (ContinuousClock.Instant) -> Bool

    /// A service named `name` that runs `start` and `stop`.
    public init(name: String, start: @escaping @Sendable () throws -> Void,
                stop: @escaping @Sendable (ContinuousClock.Instant) -> Bool) {
        self.name = name
        onStart = start
        onStop = stop
    }

    public func start() throws { try onStart() }

    public func stop(deadline: ContinuousClock.Instant) -> Bool { onStop(deadline) }
}

extension ContinuousClock.Instant {
    /// Whole milliseconds from now until this instant (0 when it has passed).
    public var millisecondsLeft: Int {
        let left = ContinuousClock.now.duration(to: self)
        guard left > .zero else { return 0 }
        let (seconds, attos) = left.components
        return Int(seconds) * 1_000 + Int(attos / 1_000_000_000_000_000)
    }
}
