import Foundation
import Observability

/// Applies the settlement effects an interrupted import left pending (SettlementReportStore, phase 2):
/// a pass at start, then one every `intervalMilliseconds`. Each chunk is its own transaction under the
/// merchant's import lock, so this and an import's own phase 2 never apply one twice; `stop` is honoured
/// between chunks and what is left stays pending for the next pass, import or start.
final class SettlementEffectsService: Service {
    /// Pause between passes.
    static let intervalMilliseconds = 60_000

    let name = "settlement-effects"
    private let loop: ThreadService

    init(store: SettlementReportStore, logger: Logger, now: @escaping @Sendable () -> Date,
         intervalMilliseconds: Int = SettlementEffectsService.intervalMilliseconds) {
        loop = ThreadService(name: "settlement-effects") { loop in
            repeat {
                Self.pass(store: store, logger: logger, now: now(), shouldStop: { loop.isStopping })
            } while loop.pause(milliseconds: intervalMilliseconds)
        }
    }

    /// True once the loop's thread has returned (after `stop`).
    var isFinished: Bool { loop.isFinished }
    /// The kernel id of the loop's thread, once started (tests of the lifecycle).
    var osThreadID: Int32 { loop.osThreadID }

    func start() throws { try loop.start() }

    /// A large import stored its report with effects pending: run a pass now rather than at the next interval.
    func wake() { loop.wake() }

    func stop(deadline: ContinuousClock.Instant) -> Bool { loop.stop(deadline: deadline) }

    /// Every merchant with pending effects, in merchant order, until done or asked to stop.
    static func pass(store: SettlementReportStore, logger: Logger, now: Date, shouldStop: () -> Bool) {
        do {
            for merchantId in try store.merchantsWithPendingEffects() {
                guard !shouldStop() else { return }
                let applied = try store.applyPendingEffects(merchantId: merchantId, now: now, shouldStop: shouldStop)
                logger.info("settlement effects resumed", [("merchant_id", merchantId), ("applied", String(applied))])
            }
        } catch {
            logger.warning("settlement effects not resumed; the next pass or import retries", [("error", "\(error)")])
        }
    }
}
