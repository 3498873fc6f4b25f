import Foundation
import HTTPServer
import Observability
import Postgres

enum ServeCommand {
    static let help = """
        usage: tender serve [--listen HOST:PORT] [--database-url URL] [--log-format json|text]
        Serves the HTTP API. Refuses to start with pending migrations (run `tender migrate`).
        SIGTERM or SIGINT: stop accepting, drain in-flight requests (TENDER_SHUTDOWN_DRAIN_MS), stop every
        service in reverse start order (docs/lifecycle.md), exit 0.
        Flags override the environment (TENDER_LISTEN, TENDER_DATABASE_URL, TENDER_LOG_FORMAT).
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["listen", "database-url", "log-format"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(0)
        var overrides: [String: String] = [:]
        if let v = args.value("listen") { overrides["TENDER_LISTEN"] = v }
        if let v = args.value("database-url") { overrides["TENDER_DATABASE_URL"] = v }
        if let v = args.value("log-format") { overrides["TENDER_LOG_FORMAT"] = v }
        let configuration = try TenderConfiguration.load(environment: environment, overrides: overrides)
        let logger = Logger(format: configuration.logFormat)
        // Feature settings read from the environment are validated here too, so a bad value stops the
        // process with the variable's name instead of silently falling back to a default.
        _ = try PaymentsSettings.load(environment: environment,
                                      processorTimeoutMilliseconds: configuration.processorTimeoutMilliseconds)
        _ = try TenderConfiguration.integer(environment, "TENDER_SIMULATOR_LATENCY_MS", default: 0, range: 0...60_000)
        let sessionExpiry = try SessionExpirySweeper.Settings.load(environment: environment)
        _ = try WebhookSettings.load(environment: environment)

        // Block the termination signals in every thread before any is started; the main thread
        // takes them synchronously with sigwait below.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        var pg = PostgresConfiguration(connectionString: configuration.resolvedDatabaseURL)
        pg.preparedStatements = configuration.limits.databasePreparedStatements
        pg.connectionsMax = configuration.limits.databaseConnectionsMax
        pg.waitQueueMax = configuration.limits.databaseWaitQueueMax
        pg.acquireTimeoutMilliseconds = configuration.limits.databaseAcquireTimeoutMilliseconds
        pg.statementTimeoutMilliseconds = configuration.limits.statementTimeoutMilliseconds
        let pool = PostgresPool(configuration: pg)
        let migrations = try MigrationFile.load(directory: TenderCLI.migrationsDirectory(environment))
        let app = TenderApp(configuration: configuration, pool: pool, migrations: migrations, logger: logger)
        let status = try app.migrator.status()
        guard status.pending.isEmpty else {
            throw MigrationError(code: .pending, detail: "\(status.pending.count) pending; run `tender migrate` first")
        }
        try app.tokens.prepare()
        try FinanceFeedIngest.checkPrerequisites(pool)
        if configuration.appleRootsFiles != nil {
            logger.warning("TENDER_APPLE_ROOTS is set: tokens are trusted from roots other than Apple Root CA - G3")
        }

        let server = HTTPServer(configuration: httpConfiguration(configuration), router: app.router(),
                                onRequestComplete: { app.record($0) })
        app.registerGauges(server: server)
        // Every long-running part of the process, started in order and stopped in reverse (docs/lifecycle.md).
        let group = ServiceGroup(logger: logger)
        let stopMilliseconds = configuration.limits.drainDeadlineMilliseconds + servicesStopMilliseconds
        let services = app.serveServices(server: server, sessionExpiry: sessionExpiry,
                                         now: { [clock = app.clock] in clock.now() })
        do {
            try group.start(services, stoppingWithinMilliseconds: stopMilliseconds)
        } catch let error as HTTPServerError where error.code == "bind_failed" {
            pool.close()
            // Name the address and the way out, not just the failure.
            let suggested = "\(configuration.listenHost):\(configuration.listenPort == 8080 ? 8081 : 0)"
            throw TenderError("bind_failed", "\(error.message) Stop whatever listens there, or choose another address: "
                              + "TENDER_LISTEN=\(suggested) or --listen HOST:PORT (port 0 picks a free one).")
        } catch {
            pool.close()
            throw error
        }
        logger.info("listening", [("host", configuration.listenHost), ("port", String(server.boundPort))])

        var received: Int32 = 0
        sigwait(&signals, &received)
        logger.info("shutting down", [("signal", received == SIGTERM ? "SIGTERM" : "SIGINT"),
                                      ("deadline_ms", String(stopMilliseconds))])
        let late = group.stopAll(timeoutMilliseconds: stopMilliseconds)
        pool.close()
        logger.info("stopped", [("late", late.joined(separator: ","))])
        return .success
    }

    /// Time the services after the HTTP server get to stop, on top of the drain deadline.
    static let servicesStopMilliseconds = 10_000

    /// The HTTP server's limits, with the worker pool sized to the database pool.
    static func httpConfiguration(_ c: TenderConfiguration) -> HTTPServerConfiguration {
        var h = HTTPServerConfiguration()
        h.host = c.listenHost
        h.port = c.listenPort
        h.ioThreads = c.limits.ioThreads
        h.workerThreads = c.limits.databaseConnectionsMax
        h.workerQueueMax = c.limits.workerQueueMax
        h.bodyBytesMax = c.limits.bodyBytesMax
        h.headerBytesMax = c.limits.headerBytesMax
        h.connectionsMax = c.limits.connectionsMax
        h.connectionsPerIPMax = c.limits.connectionsPerIPMax
        h.idleTimeoutSeconds = c.limits.idleTimeoutSeconds
        h.handlerDeadlineMilliseconds = c.limits.handlerDeadlineMilliseconds
        h.headerTimeoutMilliseconds = c.limits.headerTimeoutMilliseconds
        h.bodyTimeoutMilliseconds = c.limits.bodyTimeoutMilliseconds
        h.edgeThreads = c.limits.edgeThreads
        return h
    }
}
