import Foundation
import HTTPClient
import Observability
import Postgres
import Time

/// Wakes idle workers when a `tender_events` notification arrives (an event or a redelivery committed).
final class WebhookWakeup: @unchecked Sendable {
    // NSCondition is thread-safe; `generation` is only touched under it.
    private let condition = NSCondition()
    private var generation: UInt64 = 0

    func ring() {
        condition.lock()
        generation &+= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Waits up to `milliseconds` for a ring after `seen`; returns the generation now.
    func wait(after seen: UInt64, milliseconds: Int) -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        let until = Date(timeIntervalSinceNow: Double(milliseconds) / 1_000)
        while generation == seen {
            if !condition.wait(until: until) { break }
        }
        return generation
    }

    var current: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return generation
    }
}

/// Delivers webhooks (CONTRACT §6): worker threads claim due deliveries, sign and POST them and record every
/// attempt; one more thread listens for `tender_events` and rings the finance doorbells. Any number of nodes
/// may run it on one database: claims skip rows other workers hold, and a lease covers a crash mid-delivery.
final class WebhookSender: Service {
    let name = "webhooks"
    let pool: PostgresPool
    let settings: WebhookSettings
    let box: WebhookSecretBox
    let logger: Logger
    let now: @Sendable () -> Date
    private let wakeup = WebhookWakeup()
    private let threads: [ThreadService]

    init(pool: PostgresPool, settings: WebhookSettings, box: WebhookSecretBox, logger: Logger,
         now: @escaping @Sendable () -> Date = { Clock.system.now() }) {
        self.pool = pool
        self.settings = settings
        self.box = box
        self.logger = logger
        self.now = now
        var threads: [ThreadService] = []
        let wakeup = self.wakeup
        for index in 0..<settings.workers {
            let worker = WebhookWorker(pool: pool, settings: settings, box: box, logger: logger, now: now)
            threads.append(ThreadService(name: "webhooks-\(index)") { thread in
                WebhookSender.workerLoop(worker, wakeup: wakeup, thread: thread)
            })
        }
        threads.append(ThreadService(name: "webhooks-listen") { [pool, settings, logger, now] thread in
            WebhookSender.listenLoop(pool: pool, settings: settings, logger: logger, now: now, wakeup: wakeup, thread: thread)
        })
        self.threads = threads
    }

    func start() throws {
        if settings.allowInsecureTargetsForTesting {
            logger.warning("TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS is set: webhooks may go to http and internal addresses")
        }
        for thread in threads { try thread.start() }
    }

    func stop(deadline: ContinuousClock.Instant) -> Bool {
        var all = true
        for thread in threads {
            wakeup.ring()
            all = thread.stop(deadline: deadline) && all
        }
        return all
    }

    private static func workerLoop(_ worker: WebhookWorker, wakeup: WebhookWakeup, thread: ThreadService) {
        var seen = wakeup.current
        while !thread.isStopping {
            let worked: Int
            do {
                worked = try worker.runOnce(isStopping: { thread.isStopping })
            } catch {
                worker.logger.warning("webhook delivery pass failed", [("error", String(describing: type(of: error)))])
                _ = thread.pause(milliseconds: 500)
                continue
            }
            if worked == 0 { seen = wakeup.wait(after: seen, milliseconds: worker.settings.pollMilliseconds) }
        }
    }

    private static func listenLoop(pool: PostgresPool, settings: WebhookSettings, logger: Logger,
                                   now: @escaping @Sendable () -> Date, wakeup: WebhookWakeup, thread: ThreadService) {
        let listener = PostgresListener(configuration: pool.configuration, channels: ["tender_events"])
        defer { listener.close() }
        var nextFinanceCheck = ContinuousClock.now
        while !thread.isStopping {
            let (notifications, reconnected) = listener.wait(timeoutMilliseconds: 200)
            if !notifications.isEmpty || reconnected { wakeup.ring() }
            guard ContinuousClock.now >= nextFinanceCheck else { continue }
            nextFinanceCheck = ContinuousClock.now.advanced(by: .milliseconds(settings.financeCheckMilliseconds))
            do {
                if !(try WebhookDeliveryStore.ringFinanceDoorbells(now: now(), pool: pool)).isEmpty { wakeup.ring() }
            } catch {
                logger.warning("finance doorbell pass failed", [("error", String(describing: type(of: error)))])
            }
        }
    }
}

/// One delivery worker's steps; also driven directly by tests.
struct WebhookWorker: Sendable {
    let pool: PostgresPool
    let settings: WebhookSettings
    let box: WebhookSecretBox
    let logger: Logger
    let now: @Sendable () -> Date
    let client = HTTPClient()
    /// This worker's kept connections (a worker is one thread): bursts to one receiver reuse them.
    let connections: HTTPConnectionCache? = try? HTTPConnectionCache()

    /// Claims one batch, delivers it and records the attempts in one transaction; returns how many deliveries
    /// were claimed. A crash before that commit leaves the batch to its lease: redelivered, never lost.
    func runOnce(isStopping: () -> Bool = { false }) throws -> Int {
        let start = now()
        let claimed = try pool.transaction { conn in
            // A claim lost with the database only leaves the delivery due: no need to wait for the flush.
            _ = try conn.execute("SET LOCAL synchronous_commit = off")
            return try WebhookDeliveryStore.claim(now: start, limit: settings.claimBatch,
                                                  leaseUntil: start.addingTimeInterval(Double(settings.leaseMilliseconds) / 1_000),
                                                  on: conn)
        }
        var done: [(ClaimedDelivery, WebhookAttemptResult, Date?, Date)] = []
        var released: [ClaimedDelivery] = []
        for delivery in claimed {
            if isStopping() {
                released.append(delivery)
                continue
            }
            let result = attempt(delivery)
            let finished = now()
            let retryAfter = WebhookRetrySchedule.retryAfter(result.retryAfter, now: finished)
            let next = settings.schedule.nextAttempt(afterFailures: delivery.failures + 1, now: finished,
                                                     random: Double.random(in: 0..<1), retryAfter: retryAfter)
            done.append((delivery, result, next, finished))
        }
        guard !claimed.isEmpty else { return 0 }
        let releasedAt = now()
        try pool.transaction { conn in
            try WebhookDeliveryStore.recordBatch(done, on: conn)
            for delivery in released { try WebhookDeliveryStore.release(delivery, now: releasedAt, on: conn) }
        }
        return claimed.count
    }

    /// Signs and POSTs one delivery (Standard Webhooks 1.0); never throws: every failure is a result.
    func attempt(_ delivery: ClaimedDelivery) -> WebhookAttemptResult {
        let clock = ContinuousClock()
        let started = clock.now
        func elapsed() -> Int {
            let (seconds, attos) = started.duration(to: clock.now).components
            return Int(seconds) * 1_000 + Int(attos / 1_000_000_000_000_000)
        }
        let sendTime = now()
        var keys: [[UInt8]]
        do {
            keys = [try box.key(delivery.secretSealed, endpointId: delivery.endpointId, merchantId: delivery.merchantId,
                                version: delivery.secretVersion)]
            if let previous = delivery.previousSecretSealed, let expires = delivery.previousSecretExpiresAt, expires > sendTime {
                keys.append(try box.key(previous, endpointId: delivery.endpointId, merchantId: delivery.merchantId,
                                        version: delivery.secretVersion - 1))
            }
        } catch {
            logger.error("webhook secret unusable", [("endpoint_id", delivery.endpointId)])
            return WebhookAttemptResult(httpStatus: nil, errorCode: "secret_unavailable", durationMilliseconds: 0, retryAfter: nil)
        }
        let body = Array(delivery.body.utf8)
        let timestamp = Int64(sendTime.timeIntervalSince1970.rounded(.down))
        let request = HTTPClientRequest(method: "POST", url: delivery.url, headers: [
            ("Content-Type", "application/json"),
            ("User-Agent", "Tender-Webhooks/1"),
            ("webhook-id", delivery.eventId),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", WebhookSignature.header(keys: keys, messageId: delivery.eventId, timestampSeconds: timestamp,
                                                          body: body)),
        ], body: body)
        do {
            let response = try client.send(request, options: settings.clientOptions(), cache: connections)
            let redirect = (300...399).contains(response.status)
            return WebhookAttemptResult(httpStatus: response.status, errorCode: redirect ? "redirect_not_followed" : nil,
                                        durationMilliseconds: elapsed(), retryAfter: response.headerValue("Retry-After"))
        } catch {
            return WebhookAttemptResult(httpStatus: nil, errorCode: error.code.rawValue, durationMilliseconds: elapsed(),
                                        retryAfter: nil)
        }
    }
}
