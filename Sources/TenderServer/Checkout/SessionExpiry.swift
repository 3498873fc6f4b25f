import Foundation
import Observability
import Postgres

/// Open checkout sessions past their `expiresAt` become `expired`, each with its
/// `checkout_session.expired` event in the same transaction (docs/events.md). Two paths make that
/// change: an update that finds its session overdue, and the sweeper below for sessions nobody touches.
enum SessionExpiry {
    /// Marks the locked, open, overdue session `sessionId` expired and appends its event, whose object is
    /// the session as `GET` now shows it. Returns false (and writes nothing) when it was not open.
    @discardableResult
    static func expire(_ sessionId: String, on conn: PostgresConnection, now: Date) throws -> Bool {
        let changed = try conn.execute("""
            UPDATE checkout_sessions SET status = 'expired', updated_at = now()
            WHERE session_id = $1 AND status = 'open'
            """, [sessionId])
        guard changed == 1, let snapshot = try CheckoutStore.snapshot(sessionId, on: conn) else { return false }
        try EventOutbox.append(.checkoutSessionExpired, objectId: sessionId, object: try TenderApp.sessionView(snapshot),
                               merchantId: snapshot.merchantId, on: conn, now: now)
        return true
    }

    /// One bounded batch in one transaction: up to `batchMax` open sessions whose expiry has passed (by
    /// PostgreSQL's clock, as every other expiry check), oldest expiry first, locked `FOR UPDATE SKIP
    /// LOCKED` so a session an update or a payment holds is left to it (or to the next batch), and
    /// several nodes sweep without waiting on each other. Returns how many were expired.
    static func sweepBatch(pool: PostgresPool, batchMax: Int, now: Date) throws -> Int {
        try pool.transaction { conn in
            let ids: [String] = try conn.query("""
                SELECT session_id FROM checkout_sessions
                 WHERE status = 'open' AND expires_at <= now()
                 ORDER BY expires_at
                 LIMIT $1
                   FOR UPDATE SKIP LOCKED
                """, [batchMax]).rows.map { try $0.decode("session_id") }
            var expired = 0
            for id in ids where try expire(id, on: conn, now: now) { expired += 1 }
            return expired
        }
    }
}

/// The expiry sweeper service: a batch, then the next at once while batches come back full, else a
/// pause of `intervalMilliseconds`; `stop` is honoured between batches.
final class SessionExpirySweeper: Service {
    /// Named limits and timings.
    struct Settings: Sendable {
        /// Pause between sweeps once nothing is overdue (`TENDER_SESSION_SWEEP_INTERVAL_MS`).
        var intervalMilliseconds = 5_000
        /// Sessions expired per transaction (`TENDER_SESSION_SWEEP_BATCH_MAX`).
        var batchMax = 100

        /// From the environment, each bounded; a bad value stops `serve` with the variable's name.
        static func load(environment: [String: String]) throws(ConfigurationError) -> Settings {
            var s = Settings()
            s.intervalMilliseconds = try TenderConfiguration.integer(environment, "TENDER_SESSION_SWEEP_INTERVAL_MS",
                                                                     default: s.intervalMilliseconds, range: 10...3_600_000)
            s.batchMax = try TenderConfiguration.integer(environment, "TENDER_SESSION_SWEEP_BATCH_MAX",
                                                         default: s.batchMax, range: 1...10_000)
            return s
        }
    }

    let name = "checkout-expiry"
    private let loop: ThreadService

    init(pool: PostgresPool, settings: Settings, logger: Logger, now: @escaping @Sendable () -> Date) {
        precondition(settings.batchMax >= 1 && settings.intervalMilliseconds >= 1, "the sweeper makes progress")
        loop = ThreadService(name: "checkout-expiry") { loop in
            var pause = 0
            while loop.pause(milliseconds: pause) {
                do {
                    let expired = try SessionExpiry.sweepBatch(pool: pool, batchMax: settings.batchMax, now: now())
                    if expired > 0 { logger.info("checkout sessions expired", [("count", String(expired))]) }
                    pause = expired == settings.batchMax ? 0 : settings.intervalMilliseconds
                } catch {
                    logger.warning("checkout expiry sweep failed; retrying", [("error", String(describing: type(of: error)))])
                    pause = settings.intervalMilliseconds
                }
            }
        }
    }

    func start() throws { try loop.start() }

    func stop(deadline: ContinuousClock.Instant) -> Bool { loop.stop(deadline: deadline) }
}
