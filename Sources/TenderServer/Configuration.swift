import Foundation
import Observability
import Reconciliation
import Time

/// A configuration value that could not be used; names the variable (or flag) and never echoes secrets.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// Environment variable or flag at fault, e.g. `TENDER_LISTEN`.
    public let variable: String
    /// What is wrong with it.
    public let reason: String
    /// Stable machine code; `configuration_invalid` unless a case needs its own (tests assert it).
    public var code = "configuration_invalid"
    public var description: String {
        code == "configuration_invalid" ? "invalid \(variable): \(reason)" : "invalid \(variable) (\(code)): \(reason)"
    }
}

/// Which payment processor connector Tender uses.
public enum ProcessorKind: String, Sendable {
    /// The built-in deterministic processor.
    case simulator
    /// Tender's own protocol (docs/processor-protocol.md).
    case http
    /// Adyen's Checkout API (docs/processor-adyen.md).
    case adyen
}

/// Tender's configuration, parsed and validated once at start (README.md, Configuration).
public struct TenderConfiguration: Sendable {
    /// libpq connection string; nil means the local cluster started by `make run`.
    public var databaseURL: String?
    public var dataDirectory: String
    public var listenHost: String
    public var listenPort: Int
    public var masterKeyFile: String
    /// PEM files trusted instead of Apple Root CA – G3 (sandbox/testing only).
    public var appleRootsFiles: [String]?
    public var tokenAgeMaxSeconds: Int
    public var processor: ProcessorKind
    public var processorURL: String?
    public var processorTimeoutMilliseconds: Int
    public var applePayGatewayHosts: [String]
    public var applePayGatewayCAFile: String?
    public var logFormat: LogFormat
    public var limits: ServerLimits
    /// `TENDER_DOMAIN_ASSOCIATION_FILE`: Apple's merchant domain-association file, served at
    /// `/.well-known/apple-developer-merchantid-domain-association`; nil serves nothing there.
    public var domainAssociationFile: String?
    /// How Tender authenticates to the processor (`TENDER_PROCESSOR_TOKEN_FILE`, client certificate, CA).
    public var processorAuthentication = ProcessorAuthentication.none
    /// `TENDER_UNSAFE_PROCESSOR_PLAIN_HTTP_FOR_TESTING=true`: an `http://` processor URL is accepted (a loopback
    /// stand-in in tests). Without it such a URL stops the start: card data never crosses a network in clear.
    public var processorPlainHTTPForTesting = false
    /// The Adyen connector's settings when `TENDER_PROCESSOR=adyen`.
    public var adyen: AdyenSettings?
    /// Matching rules of settlement reports (`TENDER_RECON_AMOUNT_TOLERANCE_MINOR`,
    /// `TENDER_RECON_SETTLEMENT_LAG_SECONDS`): exact amounts and a 7-day lag unless set.
    public var reconciliation = ReconciliationConfiguration()
    /// `TENDER_DEMO=on`: serves the sample store under `/demo/` and its sandbox endpoints (token minting,
    /// the sandbox merchant validation). Off by default; refused in a production configuration.
    public var demoEnabled = false
    /// `TENDER_CONSOLE=off` stops serving the operator console under `/console/` (static files only:
    /// it holds no credential of its own and calls the API with the operator's key).
    public var consoleEnabled = true
    /// Where "now" comes from for every route and store (not read from the environment; tests fix it).
    public var clock = Clock.system
    /// Wallet orders and passes: `TENDER_PUBLIC_BASE_URL`, `TENDER_APNS_URL`, `TENDER_APNS_CA_FILE` (CONTRACT §7).
    public var wallet = WalletConfiguration()

    /// A sandbox configuration trusts roots other than Apple's (`TENDER_APPLE_ROOTS`); production never does.
    public var isSandbox: Bool { appleRootsFiles != nil }

    /// Largest accepted amount tolerance, in minor units of the line's currency: 10.00 in a
    /// two-decimal currency. Drift beyond that is a mismatch to look at, not rounding.
    public static let reconciliationAmountToleranceMinorMax = 1_000
    /// Longest accepted settlement lag: 90 days, past any processor's settlement schedule.
    public static let reconciliationSettlementLagSecondsMax = 90 * 86_400

    /// Apple's published merchant-validation hosts (Apple Pay on the web, "Setting up your server").
    public static let defaultGatewayHosts = [
        "apple-pay-gateway.apple.com",
        "cn-apple-pay-gateway.apple.com",
        "apple-pay-gateway-nc-pod1.apple.com", "apple-pay-gateway-nc-pod2.apple.com",
        "apple-pay-gateway-nc-pod3.apple.com", "apple-pay-gateway-nc-pod4.apple.com",
        "apple-pay-gateway-nc-pod5.apple.com",
        "apple-pay-gateway-pr-pod1.apple.com", "apple-pay-gateway-pr-pod2.apple.com",
        "apple-pay-gateway-pr-pod3.apple.com", "apple-pay-gateway-pr-pod4.apple.com",
        "apple-pay-gateway-pr-pod5.apple.com",
        "cn-apple-pay-gateway-sh-pod1.apple.com", "cn-apple-pay-gateway-sh-pod2.apple.com",
        "cn-apple-pay-gateway-sh-pod3.apple.com",
        "cn-apple-pay-gateway-tj-pod1.apple.com", "cn-apple-pay-gateway-tj-pod2.apple.com",
        "cn-apple-pay-gateway-tj-pod3.apple.com",
        "apple-pay-gateway-cert.apple.com", "cn-apple-pay-gateway-cert.apple.com",
    ]

    /// Parses the environment; `overrides` (from command-line flags) win over the environment.
    public static func load(environment: [String: String],
                            overrides: [String: String] = [:]) throws(ConfigurationError) -> TenderConfiguration {
        var env = environment
        for (k, v) in overrides { env[k] = v }
        func value(_ name: String) -> String? {
            guard let v = env[name], !v.isEmpty else { return nil }
            return v
        }
        let dataDirectory = value("TENDER_DATA_DIR") ?? "./.tender"
        let (host, port) = try parseListen(value("TENDER_LISTEN") ?? "127.0.0.1:8080")
        let (processor, processorURL, plainHTTP) = try processorSelection(value)
        let logFormat: LogFormat
        if let raw = value("TENDER_LOG_FORMAT") {
            guard let f = LogFormat(rawValue: raw) else {
                throw ConfigurationError(variable: "TENDER_LOG_FORMAT", reason: "expected json or text")
            }
            logFormat = f
        } else {
            logFormat = .json
        }
        var hosts = defaultGatewayHosts
        if let raw = value("TENDER_APPLE_PAY_GATEWAY_HOSTS") {
            hosts = raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !hosts.isEmpty, hosts.allSatisfy(isHostName) else {
                throw ConfigurationError(variable: "TENDER_APPLE_PAY_GATEWAY_HOSTS", reason: "expected comma-separated host names")
            }
        }
        var roots: [String]?
        if let raw = value("TENDER_APPLE_ROOTS") {
            let files = raw.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !files.isEmpty else {
                throw ConfigurationError(variable: "TENDER_APPLE_ROOTS", reason: "expected comma-separated PEM file paths")
            }
            for f in files where !FileManager.default.isReadableFile(atPath: f) {
                throw ConfigurationError(variable: "TENDER_APPLE_ROOTS", reason: "file not readable: \(f)")
            }
            roots = files
        }
        if let ca = value("TENDER_APPLE_PAY_GATEWAY_CA_FILE"), !FileManager.default.isReadableFile(atPath: ca) {
            throw ConfigurationError(variable: "TENDER_APPLE_PAY_GATEWAY_CA_FILE", reason: "file not readable")
        }
        let limits = try loadServerLimits(env)

        var configuration = TenderConfiguration(
            databaseURL: value("TENDER_DATABASE_URL"),
            dataDirectory: dataDirectory,
            listenHost: host,
            listenPort: port,
            masterKeyFile: value("TENDER_MASTER_KEY_FILE") ?? dataDirectory + "/master.key",
            appleRootsFiles: roots,
            tokenAgeMaxSeconds: try integer(env, "TENDER_TOKEN_MAX_AGE_SECONDS", default: 300, range: 1...86_400),
            processor: processor,
            processorURL: processorURL,
            processorTimeoutMilliseconds: try integer(env, "TENDER_PROCESSOR_TIMEOUT_MS", default: 10_000, range: 1...120_000),
            applePayGatewayHosts: hosts,
            applePayGatewayCAFile: value("TENDER_APPLE_PAY_GATEWAY_CA_FILE"),
            logFormat: logFormat,
            limits: limits)
        try configuration.loadProcessorCredentials(value, plainHTTPForTesting: plainHTTP)
        if let file = value("TENDER_DOMAIN_ASSOCIATION_FILE") {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ConfigurationError(variable: "TENDER_DOMAIN_ASSOCIATION_FILE", reason: "file not readable: \(file)")
            }
            configuration.domainAssociationFile = file
        }
        configuration.localClusterPort = try integer(env, "TENDER_PG_PORT", default: 54_329, range: 1...65_535)
        configuration.financeFeedDatabaseURL = value("TENDER_FINANCE_FEED_DATABASE_URL")
        configuration.financeFeedLagSecondsMax = try integer(env, "TENDER_FINANCE_FEED_LAG_MAX_SECONDS",
                                                             default: FinanceFeedIngest.Settings().lagSecondsMax, range: 1...86_400)
        configuration.reconciliation = try loadReconciliation(env)
        configuration.demoEnabled = try onOff(env, "TENDER_DEMO", default: false)
        configuration.consoleEnabled = try onOff(env, "TENDER_CONSOLE", default: true)
        configuration.wallet = try WalletConfiguration.load(value, listenHost: configuration.listenHost,
                                                            listenPort: configuration.listenPort)
        // The demo mints tokens with the sandbox's own keys: it must never run where only Apple's root is trusted.
        if configuration.demoEnabled && !configuration.isSandbox {
            throw ConfigurationError(variable: "TENDER_DEMO",
                                     reason: "on needs a sandbox configuration (TENDER_APPLE_ROOTS set); refused in production")
        }
        return configuration
    }

    /// The HTTP server's and the pool's limits (`TENDER_HTTP_*`, `TENDER_DB_*`, `TENDER_SHUTDOWN_DRAIN_MS`).
    static func loadServerLimits(_ env: [String: String]) throws(ConfigurationError) -> ServerLimits {
        var limits = ServerLimits()
        limits.databaseConnectionsMax = try integer(env, "TENDER_DB_POOL_SIZE", default: limits.databaseConnectionsMax, range: 1...500)
        limits.statementTimeoutMilliseconds = try integer(env, "TENDER_DB_STATEMENT_TIMEOUT_MS",
            default: limits.statementTimeoutMilliseconds, range: 10...600_000)
        limits.databasePreparedStatements = try onOff(env, "TENDER_DB_PREPARED_STATEMENTS", default: true,
                                                      code: preparedStatementsInvalidCode)
        limits.bodyBytesMax = try integer(env, "TENDER_HTTP_BODY_BYTES_MAX", default: limits.bodyBytesMax, range: 1_024...64 * 1_048_576)
        limits.connectionsMax = try integer(env, "TENDER_HTTP_CONNECTIONS_MAX", default: limits.connectionsMax, range: 1...100_000)
        limits.connectionsPerIPMax = try integer(env, "TENDER_HTTP_CONNECTIONS_PER_IP_MAX", default: limits.connectionsPerIPMax,
            range: 1...100_000)
        limits.idleTimeoutSeconds = try integer(env, "TENDER_HTTP_IDLE_TIMEOUT_SECONDS", default: limits.idleTimeoutSeconds,
            range: 1...3_600)
        limits.handlerDeadlineMilliseconds = try integer(env, "TENDER_HTTP_HANDLER_DEADLINE_MS",
            default: limits.handlerDeadlineMilliseconds, range: 100...120_000)
        limits.drainDeadlineMilliseconds = try integer(env, "TENDER_SHUTDOWN_DRAIN_MS", default: limits.drainDeadlineMilliseconds,
            range: 0...600_000)
        limits.ioThreads = try integer(env, "TENDER_HTTP_IO_THREADS", default: limits.ioThreads, range: 1...64)
        limits.edgeThreads = try integer(env, "TENDER_HTTP_EDGE_THREADS", default: limits.edgeThreads, range: 1...64)
        limits.headerTimeoutMilliseconds = try integer(env, "TENDER_HTTP_HEADER_TIMEOUT_MS", default: limits.headerTimeoutMilliseconds,
            range: 100...600_000)
        limits.bodyTimeoutMilliseconds = try integer(env, "TENDER_HTTP_BODY_TIMEOUT_MS", default: limits.bodyTimeoutMilliseconds,
            range: 100...3_600_000)
        return limits
    }

    /// Matching rules of settlement reports (`TENDER_RECON_*`).
    static func loadReconciliation(_ env: [String: String]) throws(ConfigurationError) -> ReconciliationConfiguration {
        let reconciliationDefaults = ReconciliationConfiguration()
        let toleranceMinor = try integer(env, "TENDER_RECON_AMOUNT_TOLERANCE_MINOR",
                                         default: Int(reconciliationDefaults.amountToleranceMinor),
                                         range: 0...reconciliationAmountToleranceMinorMax)
        let lagSeconds = try integer(env, "TENDER_RECON_SETTLEMENT_LAG_SECONDS",
                                     default: Int(reconciliationDefaults.settlementLagSeconds),
                                     range: 0...reconciliationSettlementLagSecondsMax)
        return ReconciliationConfiguration(amountToleranceMinor: Int64(toleranceMinor), settlementLagSeconds: Int64(lagSeconds))
    }

    /// The finance feed writer's replication session (docs/finance-feed.md): a URL that reaches
    /// PostgreSQL directly when `TENDER_DATABASE_URL` goes through pgbouncer; nil uses that one.
    public var financeFeedDatabaseURL: String?
    /// `/readyz` fails when the finance feed is this many seconds behind (`TENDER_FINANCE_FEED_LAG_MAX_SECONDS`).
    public var financeFeedLagSecondsMax = FinanceFeedIngest.Settings().lagSecondsMax

    /// Port of the local cluster that `scripts/pg.sh` runs under `$TENDER_DATA_DIR/pg`.
    public var localClusterPort = 54_329

    /// The database URL to use: the configured one, or the local cluster's (started by `make run`).
    public var resolvedDatabaseURL: String {
        databaseURL ?? "postgresql://tender@127.0.0.1:\(localClusterPort)/tender"
    }

    static func parseListen(_ raw: String) throws(ConfigurationError) -> (String, Int) {
        guard let colon = raw.lastIndex(of: ":") else {
            throw ConfigurationError(variable: "TENDER_LISTEN", reason: "expected host:port")
        }
        var host = String(raw[raw.startIndex..<colon])
        let portText = raw[raw.index(after: colon)...]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { host = "127.0.0.1" }
        guard let port = Int(portText), (0...65_535).contains(port), portText.allSatisfy(\.isASCII) else {
            throw ConfigurationError(variable: "TENDER_LISTEN", reason: "port must be 0...65535")
        }
        return (host, port)
    }

    static func integer(_ env: [String: String], _ name: String, default fallback: Int,
        range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let raw = env[name], !raw.isEmpty else { return fallback }
        guard raw.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int(raw), range.contains(v) else {
            throw ConfigurationError(variable: name, reason: "expected an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    static func onOff(_ env: [String: String], _ name: String, default fallback: Bool,
                      code: String = "configuration_invalid") throws(ConfigurationError) -> Bool {
        switch env[name] ?? "" {
        case "": return fallback
        case "on": return true
        case "off": return false
        default: throw ConfigurationError(variable: name, reason: "expected on or off", code: code)
        }
    }

    /// The code a `TENDER_DB_PREPARED_STATEMENTS` other than `on` or `off` carries.
    public static let preparedStatementsInvalidCode = "database_prepared_statements_invalid"

    static func isHostName(_ host: String) -> Bool {
        !host.isEmpty && host.count <= 253 && host.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }
}

/// Named limits for the server process, with documented defaults (each overridable by environment).
public struct ServerLimits: Sendable {
    /// `TENDER_DB_POOL_SIZE`: PostgreSQL connections; the HTTP worker pool is sized to match.
    public var databaseConnectionsMax = 16
    /// Waiters for a pooled connection beyond which requests fail fast.
    public var databaseWaitQueueMax = 1_024
    /// How long a request waits for a pooled connection.
    public var databaseAcquireTimeoutMilliseconds = 3_000
    /// `TENDER_DB_STATEMENT_TIMEOUT_MS`: PostgreSQL `statement_timeout` on every connection.
    public var statementTimeoutMilliseconds = 5_000
    /// `TENDER_DB_PREPARED_STATEMENTS` (`on`/`off`): each statement prepared once per connection. `off`
    /// behind pgbouncer in transaction mode, where a session's prepared statements do not follow the client.
    public var databasePreparedStatements = true
    /// `TENDER_HTTP_BODY_BYTES_MAX`: request bodies above this get an early 413.
    public var bodyBytesMax = 1_048_576
    /// Request head bytes (request line and header fields); above this the edge answers 431.
    public var headerBytesMax = 32_768
    /// `TENDER_HTTP_HEADER_TIMEOUT_MS`: a request head must arrive within this from its first byte (else 408).
    public var headerTimeoutMilliseconds = 10_000
    /// `TENDER_HTTP_BODY_TIMEOUT_MS`: a request body must arrive within this from the end of its head (else 408).
    public var bodyTimeoutMilliseconds = 60_000
    /// `TENDER_HTTP_EDGE_THREADS`: epoll loops that accept connections and frame requests before libmicrohttpd.
    public var edgeThreads = 2
    /// `TENDER_HTTP_CONNECTIONS_MAX`.
    public var connectionsMax = 1_000
    /// `TENDER_HTTP_CONNECTIONS_PER_IP_MAX`.
    public var connectionsPerIPMax = 256
    /// `TENDER_HTTP_IDLE_TIMEOUT_SECONDS`.
    public var idleTimeoutSeconds = 30
    /// `TENDER_HTTP_HANDLER_DEADLINE_MS`: a handler still running then gets the client a 503.
    public var handlerDeadlineMilliseconds = 15_000
    /// Requests queued for a worker beyond which the server answers 503 + Retry-After.
    public var workerQueueMax = 512
    /// `TENDER_SHUTDOWN_DRAIN_MS`: how long SIGTERM waits for in-flight requests.
    public var drainDeadlineMilliseconds = 10_000
    /// `TENDER_HTTP_IO_THREADS`: libmicrohttpd's internal epoll threads.
    public var ioThreads = 2

    public init() {}
}

extension TenderConfiguration {
    /// The unsafe switch for plain-HTTP processors; its name says it is for tests.
    public static let plainHTTPProcessorVariable = "TENDER_UNSAFE_PROCESSOR_PLAIN_HTTP_FOR_TESTING"
    /// The code a refused `http://` processor URL carries.
    public static let plainHTTPRefusedCode = "processor_plain_http_refused"

    /// `TENDER_PROCESSOR`, `TENDER_PROCESSOR_URL` and the plain-HTTP switch.
    static func processorSelection(_ value: (String) -> String?) throws(ConfigurationError)
        -> (kind: ProcessorKind, url: String?, plainHTTPForTesting: Bool) {
        var processor = ProcessorKind.simulator
        if let raw = value("TENDER_PROCESSOR") {
            guard let p = ProcessorKind(rawValue: raw) else {
                throw ConfigurationError(variable: "TENDER_PROCESSOR", reason: "expected simulator, http or adyen")
            }
            processor = p
        }
        let plainHTTP = try processorPlainHTTPSwitch(value)
        let processorURL = value("TENDER_PROCESSOR_URL")
        if let url = processorURL {
            try checkProcessorURL(url, variable: "TENDER_PROCESSOR_URL", plainHTTPForTesting: plainHTTP)
        }
        if processor == .http && processorURL == nil {
            throw ConfigurationError(variable: "TENDER_PROCESSOR_URL", reason: "required when TENDER_PROCESSOR=http")
        }
        return (processor, processorURL, plainHTTP)
    }

    /// The files that authenticate Tender to its processor, and Adyen's settings when it is the processor.
    mutating func loadProcessorCredentials(_ value: (String) -> String?, plainHTTPForTesting: Bool) throws(ConfigurationError) {
        processorAuthentication = try ProcessorAuthentication.load(value)
        processorPlainHTTPForTesting = plainHTTPForTesting
        guard processor == .adyen else { return }
        adyen = try AdyenSettings.load(value, plainHTTPForTesting: plainHTTPForTesting)
        if processorAuthentication.bearerSecret != nil {
            throw ConfigurationError(variable: "TENDER_PROCESSOR_TOKEN_FILE",
                                     reason: "is for TENDER_PROCESSOR=http; Adyen takes its key from TENDER_ADYEN_API_KEY_FILE")
        }
    }

    /// `true` or `false` (unset is false); anything else stops the start.
    static func processorPlainHTTPSwitch(_ value: (String) -> String?) throws(ConfigurationError) -> Bool {
        guard let raw = value(plainHTTPProcessorVariable) else { return false }
        guard raw == "true" || raw == "false" else {
            throw ConfigurationError(variable: plainHTTPProcessorVariable, reason: "expected true or false")
        }
        return raw == "true"
    }

    /// An absolute https URL with a host; `http` only with the unsafe switch (the card data would travel in clear).
    static func checkProcessorURL(_ url: String, variable: String, plainHTTPForTesting: Bool) throws(ConfigurationError) {
        guard let parsed = URLComponents(string: url), let scheme = parsed.scheme,
              scheme == "http" || scheme == "https", parsed.host?.isEmpty == false,
              parsed.query == nil, parsed.fragment == nil, parsed.user == nil else {
            throw ConfigurationError(variable: variable, reason: "expected an absolute http(s) URL without query, fragment or user")
        }
        if scheme == "http" && !plainHTTPForTesting {
            throw ConfigurationError(variable: variable,
                                     reason: "plain http sends card data in clear; use https (\(plainHTTPProcessorVariable)=true "
                                         + "allows it for a local stand-in in tests only)",
                                     code: plainHTTPRefusedCode)
        }
    }
}
