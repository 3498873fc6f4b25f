import Foundation
import Observability
import Synchronization

/// Applies the finance-store effects of large settlement imports in the background (issue 15 item 5): the
/// import answers once its report is stored (`effectsPending: true`), and this worker then applies the
/// effects chunk by chunk with the store's exactly-once machinery (each chunk's transaction clears its own
/// pending flag). Being stopped or killed mid-chunk loses nothing: that chunk rolls back, and the next
/// start of `tender serve` (`resumeSettlementEffects`), the merchant's next import or a replay of the same
/// bytes finishes it.
final class SettlementEffectsWorker: Sendable {
    private let store: SettlementReportStore
    private let logger: Logger
    private let state = Mutex<(queued: [String], running: Bool)>(([], false))
    private let signal = NSCondition()

    init(store: SettlementReportStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Queues `merchantId`'s pending effects; starts the worker thread on first use.
    func wake(merchantId: String) {
        let start = state.withLock { state -> Bool in
            if !state.queued.contains(merchantId) { state.queued.append(merchantId) }
            defer { state.running = true }
            return !state.running
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "tender-settlement-effects"
            thread.start()
        } else {
            signal.lock()
            signal.signal()
            signal.unlock()
        }
    }

    private func run() {
        while true {
            guard let merchantId = state.withLock({ $0.queued.isEmpty ? nil : $0.queued.removeFirst() }) else {
                signal.lock()
                _ = signal.wait(until: Date(timeIntervalSinceNow: 1))
                signal.unlock()
                continue
            }
            do {
                let started = ContinuousClock.now
                let applied = try store.applyPendingEffects(merchantId: merchantId, now: Date())
                logger.info("settlement effects applied", [
                    ("merchant_id", merchantId), ("applied", String(applied)),
                    ("effects_ms", String(Int64(started.duration(to: .now).secondsValue * 1_000))),
                ])
            } catch {
                // The chunk rolled back; the merchant's next import, a replay or the next start retries.
                logger.warning("settlement effects stopped; they resume with the next import or start",
                               [("merchant_id", merchantId), ("error", "\(error)")])
            }
        }
    }
}
