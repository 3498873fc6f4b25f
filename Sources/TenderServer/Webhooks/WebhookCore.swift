import Crypto
import Foundation

// The pure part of webhook delivery: signing, secrets, the retry schedule and the outcome of an attempt.
// No I/O; time and randomness come in as parameters.

/// Standard Webhooks 1.0 signing (https://www.standardwebhooks.com, "Signature scheme").
enum WebhookSignature {
    /// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` per key, space-separated (one per active
    /// secret, current first), so a receiver holding either secret verifies during a rotation.
    static func header(keys: [[UInt8]], messageId: String, timestampSeconds: Int64, body: [UInt8]) -> String {
        precondition(!keys.isEmpty, "a delivery is signed by at least one secret")
        let signed = Array("\(messageId).\(timestampSeconds).".utf8) + body
        return keys.map { key in
            "v1," + Data(Digest.hmacSHA256(key: key, message: signed)).base64EncodedString()
        }.joined(separator: " ")
    }
}

/// Endpoint secrets: `whsec_` + base64 of random bytes (Standard Webhooks: 24-64 bytes).
enum WebhookSecret {
    static let prefix = "whsec_"
    /// Random bytes in a new secret (within the standard's 24-64).
    static let keyBytes = 32

    /// A new secret's text (shown to the merchant once) from `random` (`keyBytes` long).
    static func text(random: [UInt8]) -> String {
        precondition((24...64).contains(random.count), "Standard Webhooks secrets are 24-64 bytes")
        return prefix + Data(random).base64EncodedString()
    }

    /// The HMAC key: the base64-decoded part after `whsec_`; nil when the text is not a secret.
    static func key(_ text: String) -> [UInt8]? {
        guard text.hasPrefix(prefix), let data = Data(base64Encoded: String(text.dropFirst(prefix.count))),
              (24...64).contains(data.count) else { return nil }
        return Array(data)
    }
}

/// When to try again after a failed attempt (CONTRACT §6: `TENDER_WEBHOOK_RETRY_SCHEDULE_MS`, jitter,
/// `Retry-After`).
struct WebhookRetrySchedule: Sendable, Equatable {
    /// Delay before retry n+1 after the n-th failure (milliseconds); exhausted after the last.
    let delaysMilliseconds: [Int]
    /// Each delay is stretched or shrunk by up to this fraction, so endpoints recovering from an outage
    /// are not hit by every retry at once.
    let jitterFraction: Double

    static let defaultDelaysMilliseconds = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000,
                                            50_400_000, 72_000_000, 86_400_000]
    /// Longest wait a `Retry-After` may ask for; a larger one is cut to this.
    static let retryAfterMaxMilliseconds = 86_400_000
    /// Entries allowed in a configured schedule.
    static let entriesMax = 32

    init(delaysMilliseconds: [Int] = Self.defaultDelaysMilliseconds, jitterFraction: Double = 0.1) {
        precondition((0...0.5).contains(jitterFraction), "jitter is a fraction of at most a half")
        self.delaysMilliseconds = delaysMilliseconds
        self.jitterFraction = jitterFraction
    }

    /// Parses `5000,300000,…`: 1-`entriesMax` integers, each 1 ms to 7 days; nil when malformed.
    static func parse(_ text: String) -> WebhookRetrySchedule? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard (1...entriesMax).contains(parts.count) else { return nil }
        var delays: [Int] = []
        for part in parts {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, trimmed.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(trimmed),
                  (1...604_800_000).contains(value) else { return nil }
            delays.append(value)
        }
        return WebhookRetrySchedule(delaysMilliseconds: delays)
    }

    /// The time of the next attempt after failure number `failures` (1 = the first attempt failed), or nil
    /// when the schedule is exhausted. `random` in 0..<1 picks the jitter; `retryAfter` (already parsed)
    /// is honoured as a lower bound.
    func nextAttempt(afterFailures failures: Int, now: Date, random: Double, retryAfter: Date?) -> Date? {
        precondition(failures >= 1, "asked for a retry before any failure")
        guard failures <= delaysMilliseconds.count else { return nil }
        let base = Double(delaysMilliseconds[failures - 1])
        let factor = 1 - jitterFraction + 2 * jitterFraction * min(max(random, 0), 1)
        var next = now.addingTimeInterval(base * factor / 1_000)
        if let retryAfter {
            let capped = min(retryAfter, now.addingTimeInterval(Double(Self.retryAfterMaxMilliseconds) / 1_000))
            next = max(next, capped)
        }
        return next
    }

    /// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an IMF-fixdate; nil when absent or malformed.
    static func retryAfter(_ value: String?, now: Date) -> Date? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.allSatisfy({ $0.isASCII && $0.isNumber }) {
            guard value.count <= 9, let seconds = Int(value) else { return nil }
            return now.addingTimeInterval(Double(seconds))
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: value)
    }
}

/// What one attempt's answer means for the delivery (CONTRACT §6).
enum WebhookAttemptOutcome: String, Sendable, Equatable {
    /// Any 2xx: delivered.
    case delivered
    /// `410 Gone`: the receiver asked to stop; the endpoint is disabled.
    case gone
    /// Anything else (another status, a timeout, a refused address): retried on the schedule.
    case retry

    /// The outcome of an HTTP status (nil = no response).
    static func of(status: Int?) -> WebhookAttemptOutcome {
        guard let status else { return .retry }
        if (200...299).contains(status) { return .delivered }
        return status == 410 ? .gone : .retry
    }
}

/// How often a finance doorbell may ring for one endpoint (FinanceKit's background delivery frequencies).
enum FinanceFrequency: String, Sendable, CaseIterable {
    case hourly, daily, weekly

    var intervalSeconds: Double {
        switch self {
        case .hourly: 3_600
        case .daily: 86_400
        case .weekly: 604_800
        }
    }

    /// True when a doorbell may ring at `now` after the last one at `last` (nil = never rang).
    func allows(now: Date, last: Date?) -> Bool {
        guard let last else { return true }
        return now.timeIntervalSince(last) >= intervalSeconds
    }
}
