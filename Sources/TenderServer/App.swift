import Foundation
import HTTPServer
import Observability
import Postgres

/// Everything a request handler may use, created once at start.
public final class TenderApp: Sendable {
    public let configuration: TenderConfiguration
    public let pool: PostgresPool
    public let merchants: MerchantStore
    public let migrator: Migrator
    public let metrics: MetricsRegistry
    public let logger: Logger
    /// Apple Pay token verification and decryption with the merchants' stored keys.
    public let tokens: TokenService
    /// The finance store's token codec and monitoring hub (started on first subscriber).
    public let finance: FinanceFeature
    /// Payments and refunds (TenderServer/Payments).
    public let payments: PaymentsService
    /// Derives checkout client secrets from the master key (never stored).
    public let clientSecrets: ClientSecretKey
    /// Webhook delivery's settings (`TENDER_WEBHOOK_*`).
    let webhookSettings: WebhookSettings
    /// Apple's domain-association file, read once at start (nil when not configured or unreadable).
    let domainAssociation: HTTPResponse?
    /// Applies settlement effects left pending (large imports, stopped imports); `serve` runs it, imports wake it.
    let settlementEffects: SettlementEffectsService

    public init(configuration: TenderConfiguration, pool: PostgresPool, migrations: [MigrationFile], logger: Logger) {
        self.configuration = configuration
        self.pool = pool
        self.merchants = MerchantStore(pool: pool)
        self.migrator = Migrator(pool: pool, files: migrations)
        self.metrics = MetricsRegistry()
        metrics.describe("tender_http_requests_total", help: "HTTP requests by method, route and status.")
        metrics.describe("tender_http_request_duration_seconds", help: "HTTP request latency by route.")
        self.logger = logger
        self.tokens = TokenService(configuration: configuration, keyStore: KeyStore(
            pool: pool, masterKeyFile: configuration.masterKeyFile,
            onCreate: { logger.warning("created a new master key", [("path", $0)]) }))
        self.clientSecrets = ClientSecretKey(masterKeyFile: configuration.masterKeyFile, logger: logger)
        var feedSettings = FinanceFeedIngest.Settings()
        feedSettings.replicationConnectionString = configuration.financeFeedDatabaseURL
        feedSettings.lagSecondsMax = configuration.financeFeedLagSecondsMax
        self.finance = FinanceFeature(pool: pool, masterKeyFile: configuration.masterKeyFile, logger: logger,
                                      ingestSettings: feedSettings, clock: configuration.clock)
        self.payments = PaymentsService.live(configuration: configuration, pool: pool, logger: logger,
                                             verifier: tokens,
                                             subscribers: [FinancePaymentSink(processor: configuration.processor.rawValue),
                                                           WalletOrderSubscriber(configuration: configuration.wallet)],
                                             metrics: metrics)
        self.domainAssociation = DomainAssociation.response(file: configuration.domainAssociationFile, logger: logger)
        let clock = configuration.clock
        self.settlementEffects = SettlementEffectsService(
            store: SettlementReportStore(pool: pool, sink: FinanceSettlementSink(processor: configuration.processor.rawValue,
                                                                                 logger: logger),
                                         configuration: configuration.reconciliation),
            logger: logger, now: { clock.now() })
        var webhookSettings = WebhookSettings()
        do { webhookSettings = try WebhookSettings.load(environment: ProcessInfo.processInfo.environment) } catch {
            logger.error("webhook settings invalid; using defaults", [("variable", error.variable), ("reason", error.reason)])
        }
        self.webhookSettings = webhookSettings
    }

    /// The webhook sender of this process (a service of `serve`).
    func makeWebhookSender(now: @escaping @Sendable () -> Date) -> WebhookSender {
        WebhookSender(pool: pool, settings: webhookSettings, box: webhookSecretBox, logger: logger, now: now)
    }

    /// The full route table.
    public func router() -> Router {
        var router = Router()
        router.add("GET", "/healthz", inline: true) { _ in Self.healthy }
        router.add("GET", "/readyz") { [self] request in try self.readiness(request) }
        router.add("GET", "/metrics", inline: true) { [self] _ in
            .text(self.metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        router.add("GET", DomainAssociation.path, inline: true) { [domainAssociation] _ in
            guard let domainAssociation else { throw DomainAssociation.notConfigured }
            return domainAssociation
        }
        router.add("GET", "/v1/merchant", guarded(authenticated { _, merchant in
            .json(MerchantView(merchant))
        }))
        // Each feature registers its routes from its own file (TenderServer/<Feature>/…Routes.swift).
        registerCheckoutRoutes(into: &router)
        registerFinanceRoutes(into: &router)
        registerPaymentsRoutes(into: &router)
        registerMerchantValidationRoutes(into: &router)
        registerSettlementReportRoutes(into: &router)
        registerEventRoutes(into: &router)
        registerWebhookRoutes(into: &router)
        registerWebRoutes(into: &router)
        registerWalletOrderRoutes(into: &router)
        registerWalletPassRoutes(into: &router)
        return router
    }

    /// Maps infrastructure failures to problems a client can act on: an unreachable or saturated
    /// database is `503 database_unavailable` with `Retry-After`, a COMMIT whose answer was lost is
    /// `503 transaction_outcome_unknown` with `Retry-After`, never a 500 with internals.
    public func guarded(_ handler: @escaping HTTPHandler) -> HTTPHandler {
        { [logger] request in
            do {
                return try handler(request)
            } catch let error as PostgresError {
                let problem = Self.problem(for: error)
                if problem.status == 503 {
                    logger.warning("database unavailable", [("code", error.code.rawValue), ("sqlstate", error.sqlState ?? ""),
                                                            ("request_id", request.requestID)])
                } else {
                    logger.error("database error", [("code", error.code.rawValue), ("sqlstate", error.sqlState ?? ""),
                                                    ("request_id", request.requestID)])
                }
                throw problem
            }
        }
    }

    /// The client's view of a database failure. Everything transient is a 503 with `Retry-After`:
    /// a retry is safe because money-moving and idempotent routes re-read by their Idempotency-Key.
    /// A lost COMMIT answer has its own code: the change may or may not have committed, and only a
    /// retry with the same key tells (it replays, resumes or starts afresh, never doubles).
    static func problem(for error: PostgresError) -> HTTPProblem {
        let retryAfter = HTTPHeaders([("Retry-After", "1")])
        switch error.code {
        case .transactionCommitUnknown:
            return HTTPProblem(.transactionOutcomeUnknown,
                               detail: "The database connection was lost while committing; retry with the same Idempotency-Key.",
                               headers: retryAfter)
        case .connectionFailed, .poolTimeout, .poolExhausted, .poolClosed, .statementTimeout, .transactionBeginFailed,
             .transactionRollbackFailed:
            return databaseUnavailable
        case .queryFailed, .transactionCommitFailed:
            // 08 connection exception, 53 insufficient resources, 57P0x shutdown, 40001/40P01 retryable.
            if let state = error.sqlState, state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57P")
                || error.isSerializationFailure {
                return databaseUnavailable
            }
            return internalError
        case .decodeFailed, .statementAfterCommit:
            return internalError
        }
    }

    static let databaseUnavailable = HTTPProblem(.databaseUnavailable,
                                                 detail: "The database is temporarily unavailable; retry later.",
                                                 headers: HTTPHeaders([("Retry-After", "1")]))

    static let internalError = HTTPProblem(.internalError,
                                           detail: "The request could not be completed.")

    /// Wraps a merchant endpoint: `Authorization: Bearer <API key>` or 401 problem+json.
    public func authenticated(_ handler: @escaping @Sendable (HTTPRequest, Merchant) throws -> HTTPResponse) -> HTTPHandler {
        { [self] request in
            guard let bearer = Self.bearerToken(request) else {
                throw Problems.unauthorized
            }
            guard let merchant = try self.merchants.authenticate(bearer: bearer) else {
                throw Problems.unauthorized
            }
            return try handler(request, merchant)
        }
    }

    /// The bearer credential, or nil when the header is absent or not a bearer.
    static func bearerToken(_ request: HTTPRequest) -> String? {
        guard let header = request.headers["Authorization"] else { return nil }
        let utf8 = header.utf8
        guard utf8.count > 7, utf8.count <= 512 + 7 else { return nil }
        // "Bearer" (case-insensitive) then one or more spaces then the credential.
        let scheme = utf8.prefix(6)
        guard zip(scheme, "bearer".utf8).allSatisfy({ $0 | 0x20 == $1 }) else { return nil }
        let rest = utf8.dropFirst(6)
        guard rest.first == UInt8(ascii: " ") else { return nil }
        let token = rest.drop { $0 == UInt8(ascii: " ") }
        let trimmed = token.reversed().drop { $0 == UInt8(ascii: " ") }.count
        guard trimmed > 0 else { return nil }
        return String(decoding: token.prefix(trimmed), as: UTF8.self)
    }

    private func readiness(_ request: HTTPRequest) throws -> HTTPResponse {
        do {
            let status = try migrator.status()
            guard status.pending.isEmpty else {
                throw HTTPProblem(.migrationsPending,
                                  detail: "Database migrations are pending.")
            }
            // Behind a proxy that follows the primary (deploy/cluster/), the database address can reach
            // a standby for a moment during a failover: a node that cannot write is not ready.
            let recovery = try pool.query("SELECT pg_is_in_recovery() AS in_recovery").first
            if try recovery?.decode("in_recovery", as: Bool.self) ?? true {
                throw HTTPProblem(status: 503, code: "database_read_only", title: "Not ready",
                                  detail: "The database server is a read-only standby, not the primary.")
            }
        } catch let problem as HTTPProblem {
            throw problem
        } catch let error as MigrationError {
            logger.warning("readiness failed", [("code", error.code.rawValue)])
            throw HTTPProblem(status: 503, code: error.code.rawValue, title: "Not ready",
                              detail: "The database schema does not match this build.")
        } catch {
            logger.warning("readiness failed", [("error", String(describing: type(of: error)))])
            throw HTTPProblem(.databaseUnavailable,
                              detail: "The database is not reachable.")
        }
        // The finance feed (docs/finance-feed.md): a slot that is lost, idle or far behind is an alarm.
        let ingest = finance.ingest
        let health: FinanceFeedHealth
        do {
            health = try ingest.health()
        } catch {
            logger.warning("readiness failed", [("error", String(describing: type(of: error)))])
            throw HTTPProblem(.databaseUnavailable,
                              detail: "The database is not reachable.")
        }
        if let code = health.problem(ingest.settings) {
            logger.warning("finance feed not ready", [("code", code), ("lag_bytes", String(health.lagBytes)),
                                                     ("wal_status", health.walStatus)])
            throw HTTPProblem(status: 503, code: code, title: "Not ready",
                              detail: "The finance feed is behind or its replication slot is unusable.",
                              extra: ["lagBytes": .number(String(health.lagBytes)),
                                      "lagMilliseconds": .number(health.lagSeconds.isFinite
                                                                     ? String(Int64(health.lagSeconds * 1_000)) : "-1")])
        }
        return .json(["status": "ready"])
    }

    /// `/healthz` answers from a prebuilt response: it is probed often and must stay cheap.
    static let healthy = HTTPResponse.json(["status": "ok"])

    /// Access log line and metrics for one finished request (never bodies or auth headers); a small fixed
    /// cost per request: labels are rendered once per route and status, the line is built in one buffer.
    public func record(_ entry: AccessLogEntry) {
        metrics.recordRequest(counter: "tender_http_requests_total", histogram: "tender_http_request_duration_seconds",
                              method: entry.method, route: entry.routePattern, status: entry.status,
                              microseconds: entry.durationMicroseconds)
        logger.request(method: entry.method, route: entry.routePattern, status: entry.status,
                       durationMicroseconds: entry.durationMicroseconds, requestID: entry.requestID)
    }

    /// Publishes pool and server gauges.
    public func registerGauges(server: HTTPServer) {
        let pool = self.pool
        metrics.registerGauge("tender_db_pool_connections") {
            let s = pool.stats
            return [("state=\"in_use\"", Int64(s.inUse)), ("state=\"idle\"", Int64(s.idle)),
                    ("state=\"waiting\"", Int64(s.waiting)), ("state=\"max\"", Int64(s.connectionsMax))]
        }
        metrics.registerGauge("tender_http_worker_queue_depth") { [("", Int64(server.stats.queueDepth))] }
        let ingest = finance.ingest
        metrics.describe("tender_finance_feed_lag_bytes", help: "WAL behind the finance feed slot's confirmed position.")
        metrics.describe("tender_finance_feed_lag_milliseconds", help: "Age of the oldest commit not yet in the finance feed.")
        metrics.describe("tender_finance_feed_slot_safe_wal_bytes",
            help: "WAL the slot may still fall behind before it is lost (-1: unbounded).")
        metrics.describe("tender_finance_feed_streaming", help: "1 when this process streams the finance feed slot.")
        metrics.describe("tender_finance_feed_rows_fed", help: "Change rows this process numbered in the feed.")
        metrics.registerGauge("tender_finance_feed_lag_bytes") { [("", (try? ingest.health())?.lagBytes ?? -1)] }
        metrics.registerGauge("tender_finance_feed_lag_milliseconds") {
            guard let seconds = (try? ingest.health())?.lagSeconds, seconds.isFinite else { return [("", -1)] }
            return [("", Int64(seconds * 1_000))]
        }
        metrics.registerGauge("tender_finance_feed_slot_safe_wal_bytes") { [("", (try? ingest.health())?.safeWALBytes ?? -1)] }
        metrics.registerGauge("tender_finance_feed_streaming") { [("", ingest.status.streaming ? 1 : 0)] }
        metrics.registerGauge("tender_finance_feed_rows_fed") { [("", ingest.status.rowsFed)] }
        metrics.registerGauge("tender_http_in_flight") { [("", Int64(server.stats.inFlight))] }
        metrics.registerGauge("tender_http_workers_busy") { [("", Int64(server.stats.workersBusy))] }
    }
}

/// The merchant's own profile as `GET /v1/merchant` shows it.
struct MerchantView: Encodable {
    let merchantId: String
    let displayName: String
    let domains: [String]
    let countryCode: String
    let currencies: [String]
    let supportedNetworks: [String]
    let merchantCapabilities: [String]

    init(_ m: Merchant) {
        merchantId = m.merchantId
        displayName = m.displayName
        domains = m.domains
        countryCode = m.countryCode
        currencies = m.currencies
        supportedNetworks = m.supportedNetworks
        merchantCapabilities = m.merchantCapabilities
    }
}

/// Problems shared by many routes.
public enum Problems {
    public static let unauthorized = HTTPProblem(.unauthorized,
        detail: "A valid API key or client secret is required.",
        headers: HTTPHeaders([("WWW-Authenticate", "Bearer")]))
}

/// Apple's merchant domain verification: Apple fetches this path on every domain registered for Apple
/// Pay on the web and expects the exact file the developer portal handed out (README.md, Configuration).
enum DomainAssociation {
    static let path = "/.well-known/apple-developer-merchantid-domain-association"
    /// Apple's files are a few kilobytes; anything far larger is the wrong file.
    static let fileBytesMax = 65_536

    static let notConfigured = HTTPProblem(.domainAssociationNotConfigured,
                                           detail: "No Apple Pay domain-association file is configured.")

    /// The file's bytes as a response, or nil (logged) when unset, unreadable or too large.
    static func response(file: String?, logger: Logger) -> HTTPResponse? {
        guard let file else { return nil }
        guard let data = FileManager.default.contents(atPath: file), data.count <= fileBytesMax, !data.isEmpty else {
            logger.error("domain-association file unusable", [("path", file), ("bytes_max", String(fileBytesMax))])
            return nil
        }
        return HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")]), body: Array(data))
    }
}
