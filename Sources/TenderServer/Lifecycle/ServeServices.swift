import Foundation
import HTTPServer
import Observability

/// The long-running work of `tender serve`, in start order (docs/lifecycle.md). `ServiceGroup` starts
/// them in this order and stops them in reverse: the HTTP server starts last and stops first (no request
/// is left to need what stops after it), the log flusher starts first and stops last (every other
/// service's last lines are written).
///
/// This list is the one place a new background feature is added: a webhook sender or a push sender
/// goes where the comment below says, between the workers and the HTTP server.
extension TenderApp {
    func serveServices(server: HTTPServer, sessionExpiry: SessionExpirySweeper.Settings,
                       now: @escaping @Sendable () -> Date) -> [any Service] {
        var services: [any Service] = [
            LogFlushService(),
            CallbackService(name: "finance-ingest", start: { [finance] in finance.startIngest() },
                            stop: { [finance] deadline in finance.ingest.stop(waitMilliseconds: deadline.millisecondsLeft) }),
            // The monitoring hub starts with its first subscriber; the service owns its end.
            CallbackService(name: "finance-hub", start: {}, stop: { [finance] _ in finance.stopHub(); return true }),
            settlementEffects,
            SessionExpirySweeper(pool: pool, settings: sessionExpiry, logger: logger, now: now),
        ]
        services.append(payments.resolverService)
        services.append(makeWebhookSender(now: now))
        services.append(walletPushService.service(now: now))
        // A new background feature (a `Service`) is appended here, before the HTTP server.
        services.append(HTTPServerService(server: server, drainDeadlineMilliseconds: configuration.limits.drainDeadlineMilliseconds,
                                          logger: logger))
        return services
    }
}

/// The HTTP server as a service: `start` binds and serves; `stop` stops accepting and drains in-flight
/// requests for `TENDER_SHUTDOWN_DRAIN_MS` (or what is left of the group's deadline, if less).
final class HTTPServerService: Service {
    let name = "http"
    let server: HTTPServer
    private let drainDeadlineMilliseconds: Int
    private let logger: Logger

    init(server: HTTPServer, drainDeadlineMilliseconds: Int, logger: Logger) {
        self.server = server
        self.drainDeadlineMilliseconds = drainDeadlineMilliseconds
        self.logger = logger
    }

    func start() throws { try server.start() }

    func stop(deadline: ContinuousClock.Instant) -> Bool {
        let drained = server.shutdown(drainDeadlineMilliseconds: min(drainDeadlineMilliseconds, deadline.millisecondsLeft))
        logger.info("http drained", [("drained", drained ? "true" : "false")])
        return true
    }
}
