import Foundation
import HTTPClient
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer

/// Webhook delivery's configuration and limits (CONTRACT §6; docs/webhooks.md lists them).
struct WebhookSettings: Sendable {
    /// `TENDER_WEBHOOK_TIMEOUT_MS`: the whole exchange with a receiver (connect, TLS, answer).
    var timeoutMilliseconds = 10_000
    /// `TENDER_WEBHOOK_RETRY_SCHEDULE_MS`.
    var schedule = WebhookRetrySchedule()
    /// `TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS=true`: http and internal addresses allowed (testing only).
    var allowInsecureTargetsForTesting = false
    /// `TENDER_WEBHOOK_WORKERS`: delivery threads on this node (0: this node does not deliver).
    var workers = 4
    /// `TENDER_WEBHOOK_CLAIM_BATCH`: deliveries one worker claims at a time.
    var claimBatch = 8
    /// `TENDER_WEBHOOK_POLL_MS`: how long an idle worker waits before looking again without a notification.
    var pollMilliseconds = 1_000
    /// `TENDER_WEBHOOK_FINANCE_CHECK_MS`: how often the finance doorbells are considered.
    var financeCheckMilliseconds = 60_000
    /// Response bytes read from a receiver (the body is not used; a larger one is an error).
    var responseBodyBytesMax = 65_536
    /// Endpoints one merchant may register.
    static let endpointsPerMerchantMax = 16
    /// Characters in an endpoint URL.
    static let urlBytesMax = 2_048
    /// Characters in an endpoint description.
    static let descriptionLengthMax = 500
    /// How long the previous secret keeps signing after a rotation.
    static let previousSecretSeconds: Double = 86_400
    /// Account ids one doorbell names (the receiver catches up with its history token anyway).
    static let doorbellAccountIDsMax = 100

    /// A claimed delivery's lease: every delivery of the batch may take the whole timeout, plus a margin.
    var leaseMilliseconds: Int { claimBatch * (timeoutMilliseconds + 1_000) + 5_000 }

    /// Reads the `TENDER_WEBHOOK_*` variables; a bad value names its variable.
    static func load(environment env: [String: String]) throws(ConfigurationError) -> WebhookSettings {
        var s = WebhookSettings()
        s.timeoutMilliseconds = try TenderConfiguration.integer(env, "TENDER_WEBHOOK_TIMEOUT_MS", default: 10_000,
                                                                range: 100...60_000)
        if let raw = env["TENDER_WEBHOOK_RETRY_SCHEDULE_MS"], !raw.isEmpty {
            guard let schedule = WebhookRetrySchedule.parse(raw) else {
                throw ConfigurationError(variable: "TENDER_WEBHOOK_RETRY_SCHEDULE_MS",
                                         reason: "expected 1-\(WebhookRetrySchedule.entriesMax) comma-separated milliseconds")
            }
            s.schedule = schedule
        }
        switch env["TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS"] ?? "" {
        case "", "false": s.allowInsecureTargetsForTesting = false
        case "true": s.allowInsecureTargetsForTesting = true
        default: throw ConfigurationError(variable: "TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS", reason: "expected true or false")
        }
        s.workers = try TenderConfiguration.integer(env, "TENDER_WEBHOOK_WORKERS", default: 4, range: 0...64)
        s.claimBatch = try TenderConfiguration.integer(env, "TENDER_WEBHOOK_CLAIM_BATCH", default: 8, range: 1...100)
        s.pollMilliseconds = try TenderConfiguration.integer(env, "TENDER_WEBHOOK_POLL_MS", default: 1_000, range: 10...60_000)
        s.financeCheckMilliseconds = try TenderConfiguration.integer(env, "TENDER_WEBHOOK_FINANCE_CHECK_MS",
                                                                     default: 60_000, range: 100...3_600_000)
        return s
    }

    /// libcurl options for one delivery: bounded, no redirects, and (unless relaxed) https only to public
    /// addresses, checked on the address actually connected to so DNS rebinding cannot slip past.
    func clientOptions() -> HTTPClientOptions {
        var options = HTTPClientOptions()
        options.totalTimeoutMilliseconds = timeoutMilliseconds
        options.connectTimeoutMilliseconds = min(timeoutMilliseconds, 5_000)
        options.responseBodyBytesMax = responseBodyBytesMax
        options.responseHeaderBytesMax = 16_384
        options.followRedirects = false
        if allowInsecureTargetsForTesting {
            options.allowPlainHTTPForTesting = true
        } else {
            options.connectAddressFilter = { MerchantValidationAddressPolicy.isPublic($0) }
        }
        return options
    }
}

/// The rules an endpoint URL must pass when it is registered or changed (CONTRACT §6). The address rule
/// is enforced again on every connect, since a name may resolve differently later.
enum WebhookTargetPolicy {
    /// Nil when `url` is acceptable; otherwise the problem to answer.
    static func problem(url: String, allowInsecure: Bool) -> HTTPProblem? {
        guard url.utf8.count <= WebhookSettings.urlBytesMax, url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty, components.fragment == nil else {
            return WebhookProblems.invalid("url_invalid", field: "url", "url must be an absolute URL of at most 2048 bytes.")
        }
        guard components.user == nil, components.password == nil else {
            return WebhookProblems.invalid("url_invalid", field: "url", "url must not carry credentials.")
        }
        if allowInsecure {
            guard scheme == "https" || scheme == "http" else {
                return WebhookProblems.invalid("url_not_https", field: "url", "url must be https.")
            }
            return nil
        }
        guard scheme == "https" else {
            return WebhookProblems.invalid("url_not_https", field: "url", "url must be https.")
        }
        if let address = literalAddress(host), !MerchantValidationAddressPolicy.isPublic(address) || isOtherNumericSpelling(host) {
            return WebhookProblems.invalid("url_address_not_allowed", field: "url",
                                           "url must not point at a loopback, private or link-local address.")
        }
        if host.lowercased() == "localhost" || host.lowercased().hasSuffix(".localhost") {
            return WebhookProblems.invalid("url_address_not_allowed", field: "url", "url must not point at localhost.")
        }
        return nil
    }

    /// The address of an IP-literal host (`10.0.0.1`, `[::1]`), nil for a name.
    static func literalAddress(_ host: String) -> HTTPConnectAddress? {
        var bare = host
        if bare.hasPrefix("[") && bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 {
            return HTTPConnectAddress(family: .ipv4, bytes: withUnsafeBytes(of: v4) { Array($0) }, port: 0)
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            return HTTPConnectAddress(family: .ipv6, bytes: withUnsafeBytes(of: v6) { Array($0) }, port: 0)
        }
        if isOtherNumericSpelling(host) { return HTTPConnectAddress(family: .ipv4, bytes: [0, 0, 0, 0], port: 0) }
        return nil
    }

    /// inet_pton takes only dotted quads; a host of digits, dots and hex (`2130706433`, `127.1`, `0x7f.1`)
    /// is an IPv4 address in another spelling to resolvers, so it is treated as a non-public literal.
    static func isOtherNumericSpelling(_ host: String) -> Bool {
        var v4 = in_addr()
        guard inet_pton(AF_INET, host, &v4) != 1, host.first?.isNumber == true else { return false }
        return host.allSatisfy { $0.isHexDigit || $0 == "." || $0 == "x" || $0 == "X" }
    }
}
