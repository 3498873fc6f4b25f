import ApplePayToken
import Crypto
import Foundation
import HTTPServer
import Observability
import Payments
import Postgres

extension PaymentsService {
    /// The service `tender serve` runs: processor from `TENDER_PROCESSOR`, simulator latency from
    /// `TENDER_SIMULATOR_LATENCY_MS`, timings from `PaymentsSettings.load`, the crash hook from its
    /// unsafe variable. `verifier` is the token service (merchant keys from the key store); `subscribers`
    /// receive every outcome in its transaction (the finance ledger under `serve`). The resolver is
    /// `resolverService`, for serve's `ServiceGroup`.
    public static func live(configuration: TenderConfiguration, pool: PostgresPool, logger: Logger,
                            verifier: any PaymentTokenVerifying, subscribers: [any PaymentEventSubscriber] = [],
                            environment: [String: String] = ProcessInfo.processInfo.environment,
                            metrics: MetricsRegistry = MetricsRegistry()) -> PaymentsService {
        var settings = PaymentsSettings()
        do {
            settings = try PaymentsSettings.load(environment: environment,
                                                 processorTimeoutMilliseconds: configuration.processorTimeoutMilliseconds)
        } catch {
            logger.error("payments settings invalid; using defaults", [("variable", error.variable), ("reason", error.reason)])
        }
        let processor: any PaymentProcessor
        switch configuration.processor {
        case .http:
            processor = HTTPProcessor(baseURL: configuration.processorURL ?? "",
                                      timeoutMilliseconds: configuration.processorTimeoutMilliseconds,
                                      authentication: configuration.processorAuthentication,
                                      allowPlainHTTPForTesting: configuration.processorPlainHTTPForTesting)
            if !configuration.processorAuthentication.authenticates {
                logger.warning("TENDER_PROCESSOR=http without TENDER_PROCESSOR_TOKEN_FILE or a client certificate: "
                               + "the processor cannot tell Tender's calls from anyone else's")
            }
        case .adyen:
            guard let adyen = configuration.adyen else { preconditionFailure("TENDER_PROCESSOR=adyen loads AdyenSettings") }
            processor = AdyenProcessor(settings: adyen, timeoutMilliseconds: configuration.processorTimeoutMilliseconds,
                                       authentication: configuration.processorAuthentication)
            logger.info("processor: Adyen Checkout API", [("url", adyen.baseURL), ("merchant_account", adyen.merchantAccount)])
        case .simulator:
            var rules = SimulatorRules()
            rules.latencyMilliseconds = (try? TenderConfiguration.integer(environment, "TENDER_SIMULATOR_LATENCY_MS",
                                                                          default: 0, range: 0...60_000)) ?? 0
            processor = SimulatorProcessor(pool: pool, rules: rules)
        }
        if configuration.processorPlainHTTPForTesting {
            logger.warning("\(TenderConfiguration.plainHTTPProcessorVariable)=true: a plain-http processor URL is allowed; "
                           + "card data may cross the network in clear (tests only)")
        }
        let crash = CrashHook(environment: environment)
        if let point = crash.point {
            logger.warning("\(CrashHook.variable) is set: the process kills itself", [("point", point.rawValue)])
        }
        return PaymentsService(pool: pool, verifier: verifier,
                               processor: processor, subscribers: subscribers, settings: settings, logger: logger, crash: crash,
                               metrics: metrics)
    }
}

extension TenderApp {
    /// Registers `POST /v1/checkout-sessions/{id}/payments`, `GET /v1/payments[/{id}]` and refunds.
    func registerPaymentsRoutes(into router: inout Router) {
        payments.register(into: &router, guarded: guarded)
    }
}
