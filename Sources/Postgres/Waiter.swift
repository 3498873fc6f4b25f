import Glibc

/// Nanoseconds on CLOCK_MONOTONIC (immune to wall-clock changes).
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// A one-shot wake-up for one queued thread: a pthread mutex + condition variable on CLOCK_MONOTONIC.
/// The pool decides under its own Mutex whom to wake, so FIFO order is the queue's order.
final class Waiter: @unchecked Sendable {
    // @unchecked: `signaled` is only touched with `mutex` held; the pthread objects live at stable
    // heap addresses for the object's lifetime.
    let id: UInt64
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var signaled = false

    init(id: UInt64) {
        self.id = id
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
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

    /// Wakes the waiting thread (or makes its next wait return at once).
    func signal() {
        pthread_mutex_lock(mutex)
        signaled = true
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Blocks until signalled or until the monotonic deadline; returns whether it was signalled.
    @discardableResult
    func wait(untilNanoseconds deadline: UInt64) -> Bool {
        var limit = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !signaled {
            if pthread_cond_timedwait(condition, mutex, &limit) == ETIMEDOUT { break }
        }
        return signaled
    }
}
