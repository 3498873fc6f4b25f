#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex + monotonic condition variable; Synchronization.Mutex has no condition to wait on.
final class ConditionLock: @unchecked Sendable {
    // Safe to share: the pthread objects are heap-allocated once, never moved, and only used through pthread calls.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func signal() { pthread_cond_signal(condition) }
    func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (lock held) until signalled.
    func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits (lock held) until signalled or the monotonic deadline passes; false on timeout.
    @discardableResult
    func wait(untilNanoseconds deadline: UInt64) -> Bool {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &time) == 0
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// Monotonic clock in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Starts a detached pthread running `body` (handlers must block freely, so never Swift's cooperative pool).
func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Start: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Start(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { raw in
        guard let raw else { return nil }
        Unmanaged<Start>.fromOpaque(raw).takeRetainedValue().body()
        return nil
    }, context)
    if result != 0 {
        Unmanaged<Start>.fromOpaque(context).release()
        return false
    }
    return true
}

/// A bounded FIFO of jobs run by a fixed set of dedicated threads.
final class WorkerPool: @unchecked Sendable {
    // Safe to share: every mutable field is only touched with `lock` held.
    private let lock = ConditionLock()
    private var jobs: [(@Sendable () -> Void)?] = []
    private var head = 0
    private var busy = 0
    private var live = 0
    private var stopping = false
    private let queueMax: Int
    let threadCount: Int

    init(threads: Int, queueMax: Int) {
        self.threadCount = threads
        self.queueMax = queueMax
    }

    /// Starts the threads; false if the system refused one.
    func start() -> Bool {
        for _ in 0..<threadCount {
            lock.withLock { live += 1 }
            guard startDetachedThread({ [self] in run() }) else {
                lock.withLock { live -= 1 }
                return false
            }
        }
        return true
    }

    /// Queues a job; false when the queue is full or the pool is stopping.
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        lock.withLock {
            guard !stopping, jobs.count - head < queueMax else { return false }
            jobs.append(job)
            lock.signal()
            return true
        }
    }

    var queueDepth: Int { lock.withLock { jobs.count - head } }
    var busyCount: Int { lock.withLock { busy } }

    /// Drops queued jobs, lets running ones finish, and waits for the threads to exit until the deadline.
    @discardableResult
    func stop(untilNanoseconds deadline: UInt64) -> Bool {
        lock.withLock {
            stopping = true
            jobs.removeAll()
            head = 0
            lock.broadcast()
            while live > 0 {
                if !lock.wait(untilNanoseconds: deadline), monotonicNanoseconds() >= deadline { break }
            }
            return live == 0
        }
    }

    private func run() {
        lock.lock()
        while true {
            while !stopping && head == jobs.count { lock.wait() }
            if stopping { break }
            let job = jobs[head]
            jobs[head] = nil
            head += 1
            if head == jobs.count || head > 1024 {
                jobs.removeFirst(head)
                head = 0
            }
            busy += 1
            lock.unlock()
            job?()
            lock.lock()
            busy -= 1
        }
        live -= 1
        lock.broadcast()
        lock.unlock()
    }
}
