/// Whether repeating a failed call can help (STYLE.md: outcomes are classified, retries follow the class).
public enum RetryClass: String, Sendable {
    /// Timeouts, connection failures, 408, 429, 5xx: try again with the same idempotency key.
    case transient
    /// Everything else: repeating cannot change the answer.
    case permanent
}

/// What to do after an attempt.
public enum RetryDecision: Sendable, Equatable {
    /// Wait this long, then send the same request again (same `Idempotency-Key`, docs/processor-protocol.md).
    case retry(afterMilliseconds: Int)
    /// Keep this outcome.
    case stop
}

/// Bounded exponential backoff with jitter for processor calls; pure, with the random source injected.
public struct RetryPolicy: Sendable, Equatable {
    /// Total attempts including the first.
    public let attemptsMax: Int
    /// Backoff ceiling after the first failure; it doubles per further failure.
    public let baseDelayMilliseconds: Int
    /// No computed wait, nor an honoured `Retry-After`, goes past this.
    public let maxDelayMilliseconds: Int

    /// Upper bound on `attemptsMax`, so a misconfiguration cannot make a retry storm.
    public static let attemptsLimit = 10

    /// Builds a policy; values outside their ranges are a programming error.
    public init(attemptsMax: Int = 3, baseDelayMilliseconds: Int = 100, maxDelayMilliseconds: Int = 2_000) {
        precondition((1...Self.attemptsLimit).contains(attemptsMax), "attemptsMax must be 1...\(Self.attemptsLimit)")
        precondition(baseDelayMilliseconds > 0, "baseDelayMilliseconds must be positive")
        precondition(maxDelayMilliseconds >= baseDelayMilliseconds, "maxDelayMilliseconds must be ≥ the base")
        self.attemptsMax = attemptsMax
        self.baseDelayMilliseconds = baseDelayMilliseconds
        self.maxDelayMilliseconds = maxDelayMilliseconds
    }

    /// `min(max, base · 2^(attempt − 1))` for the failure of attempt `attempt` (1-based), without overflow.
    public func delayCeilingMilliseconds(afterAttempt attempt: Int) -> Int {
        precondition(attempt >= 1, "attempts are numbered from 1")
        var ceiling = baseDelayMilliseconds
        var doublings = attempt - 1
        while doublings > 0, ceiling < maxDelayMilliseconds {
            ceiling = ceiling > maxDelayMilliseconds / 2 ? maxDelayMilliseconds : ceiling * 2
            doublings -= 1
        }
        return min(ceiling, maxDelayMilliseconds)
    }

    /// "Equal jitter": half the ceiling fixed plus a uniform draw over the other half, so retries spread out
    /// yet never fire immediately.
    public func delayMilliseconds<Generator: RandomNumberGenerator>(afterAttempt attempt: Int,
                                                                   using generator: inout Generator) -> Int {
        let ceiling = delayCeilingMilliseconds(afterAttempt: attempt)
        let fixed = ceiling / 2
        return fixed + Int.random(in: 0...(ceiling - fixed), using: &generator)
    }

    /// Classifies a transport error. TLS, size, URL and protocol errors are configuration or peer faults.
    public static func classify(_ error: HTTPClientError) -> RetryClass {
        switch error.code {
        case .timeout, .connectionFailed: return .transient
        case .tlsFailed, .responseTooLarge, .invalidURL, .protocolNotAllowed, .invalidRequest, .addressNotAllowed,
             .validationURLInvalid, .other:
            return .permanent
        }
    }

    /// Classifies a status code: 408, 429 and 5xx are transient (docs/processor-protocol.md), the rest final.
    public static func classify(status: Int) -> RetryClass {
        if status == 408 || status == 429 || (500...599).contains(status) { return .transient }
        return .permanent
    }

    /// `Retry-After` in delta-seconds (RFC 9110 §10.2.3), capped; HTTP-dates are ignored in favour of backoff.
    public func retryAfterMilliseconds(_ response: HTTPClientResponse) -> Int? {
        guard let value = response.headerValue("Retry-After"), !value.isEmpty, value.utf8.count <= 9,
              value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int(value)
        else { return nil }
        return min(seconds * 1_000, maxDelayMilliseconds)
    }

    /// Decides after attempt `attempt` (1-based) ended with `outcome`.
    public func decision<Generator: RandomNumberGenerator>(
        afterAttempt attempt: Int, outcome: Result<HTTPClientResponse, HTTPClientError>,
        using generator: inout Generator
    ) -> RetryDecision {
        guard attempt < attemptsMax else { return .stop }
        switch outcome {
        case .failure(let error):
            guard Self.classify(error) == .transient else { return .stop }
            return .retry(afterMilliseconds: delayMilliseconds(afterAttempt: attempt, using: &generator))
        case .success(let response):
            guard Self.classify(status: response.status) == .transient else { return .stop }
            let backoff = delayMilliseconds(afterAttempt: attempt, using: &generator)
            return .retry(afterMilliseconds: max(backoff, retryAfterMilliseconds(response) ?? 0))
        }
    }

    /// Runs `attempt` until it succeeds, fails permanently, or `attemptsMax` is reached, sleeping through
    /// the injected `sleep`; returns the last outcome (a final 5xx is returned as a response).
    public func run<Generator: RandomNumberGenerator>(
        using generator: inout Generator, sleep: (Int) -> Void,
        _ attempt: (Int) throws(HTTPClientError) -> HTTPClientResponse
    ) -> Result<HTTPClientResponse, HTTPClientError> {
        var number = 1
        while true {
            let outcome: Result<HTTPClientResponse, HTTPClientError>
            do { outcome = .success(try attempt(number)) } catch { outcome = .failure(error) }
            switch decision(afterAttempt: number, outcome: outcome, using: &generator) {
            case .stop: return outcome
            case .retry(let milliseconds):
                sleep(milliseconds)
                number += 1
            }
        }
    }
}
