import Foundation

/// Where Wallet reaches Tender and how Tender reaches APNs (CONTRACT §7).
public struct WalletConfiguration: Sendable, Equatable {
    /// `TENDER_PUBLIC_BASE_URL` without a trailing `/` (default `http://{TENDER_LISTEN}`, for local runs).
    public var publicBaseURL = "http://127.0.0.1:8080"
    /// `TENDER_APNS_URL`: APNs' base URL.
    public var apnsURL = "https://api.push.apple.com"
    /// `TENDER_APNS_CA_FILE`: CAs trusted for APNs instead of the system store (tests).
    public var apnsCAFile: String?
    /// Attempts per push before it is dropped (APNs answers transient failures with 429/5xx).
    public var pushAttemptsMax = 8
    /// First retry delay; doubled per attempt up to `pushBackoffMaxMilliseconds`.
    public var pushBackoffMilliseconds = 1_000
    /// Longest retry delay.
    public var pushBackoffMaxMilliseconds = 600_000
    /// Per-request timeout of an APNs call.
    public var pushTimeoutMilliseconds = 10_000

    /// The defaults.
    public init() {}

    /// The order web service's base (`orderDetails.webServiceURL`, order.json `webServiceURL`).
    public var ordersWebServiceURL: String { publicBaseURL + "/wallet/orders/" }
    /// The PassKit web service's base (pass.json `webServiceURL`).
    public var passesWebServiceURL: String { publicBaseURL + "/wallet/passes/" }

    static func load(_ value: (String) -> String?, listenHost: String, listenPort: Int) throws(ConfigurationError) -> WalletConfiguration {
        var configuration = WalletConfiguration()
        configuration.publicBaseURL = "http://\(listenHost):\(listenPort)"
        if let base = value("TENDER_PUBLIC_BASE_URL") {
            guard let url = URL(string: base), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
                  url.query == nil, url.fragment == nil else {
                throw ConfigurationError(variable: "TENDER_PUBLIC_BASE_URL",
                                         reason: "an absolute http(s) URL such as https://pay.example.com")
            }
            configuration.publicBaseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        }
        if let apns = value("TENDER_APNS_URL") {
            guard let url = URL(string: apns), url.scheme == "https", url.host != nil else {
                throw ConfigurationError(variable: "TENDER_APNS_URL", reason: "an https URL such as https://api.push.apple.com")
            }
            configuration.apnsURL = apns.hasSuffix("/") ? String(apns.dropLast()) : apns
        }
        if let file = value("TENDER_APNS_CA_FILE") {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ConfigurationError(variable: "TENDER_APNS_CA_FILE", reason: "file not readable: \(file)")
            }
            configuration.apnsCAFile = file
        }
        return configuration
    }
}
