import HTTPClient
import Testing

/// Always returns the same word: 1 gives the lowest draw, UInt64.max the highest (0 would make the
/// standard library's rejection sampling loop forever).
struct ConstantGenerator: RandomNumberGenerator {
    let word: UInt64
    mutating func next() -> UInt64 { word }
}

/// SplitMix64, so property tests are reproducible.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

struct RetryPolicyTests {
    let policy = RetryPolicy(attemptsMax: 6, baseDelayMilliseconds: 100, maxDelayMilliseconds: 1_000)

    @Test func ceilingDoublesThenCaps() {
        // 100 · 2^(n−1), capped at 1 000.
        let ceilings = (1...8).map { policy.delayCeilingMilliseconds(afterAttempt: $0) }
        #expect(ceilings == [100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000])
    }

    @Test func ceilingNeverOverflows() {
        let wide = RetryPolicy(attemptsMax: 10, baseDelayMilliseconds: 1, maxDelayMilliseconds: Int.max)
        #expect(wide.delayCeilingMilliseconds(afterAttempt: 10) == 512)
        #expect(wide.delayCeilingMilliseconds(afterAttempt: 200) == Int.max)
    }

    @Test func jitterSpansTheUpperHalfOfTheCeiling() {
        var lowest = ConstantGenerator(word: 1)
        var highest = ConstantGenerator(word: .max)
        let low = (1...6).map { policy.delayMilliseconds(afterAttempt: $0, using: &lowest) }
        let high = (1...6).map { policy.delayMilliseconds(afterAttempt: $0, using: &highest) }
        #expect(low == [50, 100, 200, 400, 500, 500])
        #expect(high == [100, 200, 400, 800, 1_000, 1_000])
    }

    @Test func jitteredDelaysStayInBoundsAndSpread() {
        var generator = SplitMix(state: 42)
        for attempt in 1...6 {
            let ceiling = min(1_000, 100 << (attempt - 1))
            let draws = (0..<500).map { _ in policy.delayMilliseconds(afterAttempt: attempt, using: &generator) }
            #expect(draws.allSatisfy { $0 >= ceiling / 2 && $0 <= ceiling })
            #expect(Set(draws).count > 10, "jitter must spread retries")
        }
    }

    @Test(arguments: [
        (HTTPClientError.Code.timeout, RetryClass.transient),
        (.connectionFailed, .transient),
        (.tlsFailed, .permanent),
        (.responseTooLarge, .permanent),
        (.invalidURL, .permanent),
        (.protocolNotAllowed, .permanent),
        (.invalidRequest, .permanent),
        (.addressNotAllowed, .permanent),
        (.validationURLInvalid, .permanent),
        (.other, .permanent),
    ])
    func classifiesTransportErrors(code: HTTPClientError.Code, expected: RetryClass) {
        #expect(RetryPolicy.classify(HTTPClientError(code: code, message: "x")) == expected)
    }

    @Test(arguments: [
        (200, RetryClass.permanent), (201, .permanent), (302, .permanent), (400, .permanent), (402, .permanent),
        (404, .permanent), (409, .permanent), (422, .permanent), (408, .transient), (429, .transient),
        (500, .transient), (502, .transient), (503, .transient), (504, .transient), (599, .transient),
    ])
    func classifiesStatusCodes(status: Int, expected: RetryClass) {
        #expect(RetryPolicy.classify(status: status) == expected)
    }

    @Test func runRetriesTransientOutcomesWithTheBackoff() {
        var generator = ConstantGenerator(word: .max)
        var sleeps: [Int] = []
        var attempts: [Int] = []
        let result = policy.run(using: &generator, sleep: { sleeps.append($0) }) { (number: Int) throws(HTTPClientError) in
            attempts.append(number)
            switch number {
            case 1: throw HTTPClientError(code: .timeout, message: "t", outcomeUnknown: true)
            case 2: return HTTPClientResponse(status: 502, headers: [], body: [])
            case 3: throw HTTPClientError(code: .connectionFailed, message: "c")
            default: return HTTPClientResponse(status: 200, headers: [], body: Array("ok".utf8))
            }
        }
        #expect(attempts == [1, 2, 3, 4])
        #expect(sleeps == [100, 200, 400])
        #expect((try? result.get())?.status == 200)
    }

    @Test func runStopsAtPermanentOutcomes() {
        var generator = ConstantGenerator(word: 1)
        var sleeps: [Int] = []
        var attempts = 0
        let declined = policy.run(using: &generator, sleep: { sleeps.append($0) }) { (_: Int) throws(HTTPClientError) in
            attempts += 1
            return HTTPClientResponse(status: 402, headers: [], body: [])
        }
        #expect(attempts == 1)
        #expect(sleeps.isEmpty)
        #expect((try? declined.get())?.status == 402)

        attempts = 0
        let tls = policy.run(using: &generator, sleep: { sleeps.append($0) }) { (_: Int) throws(HTTPClientError) in
            attempts += 1
            throw HTTPClientError(code: .tlsFailed, message: "bad certificate")
        }
        #expect(attempts == 1)
        guard case .failure(let error) = tls else {
            Issue.record("TLS failure turned into success")
            return
        }
        #expect(error.code == .tlsFailed)
    }

    @Test func runGivesUpAfterAttemptsMax() {
        let three = RetryPolicy(attemptsMax: 3, baseDelayMilliseconds: 10, maxDelayMilliseconds: 100)
        var generator = ConstantGenerator(word: 1)
        var sleeps: [Int] = []
        var attempts = 0
        let result = three.run(using: &generator, sleep: { sleeps.append($0) }) { (_: Int) throws(HTTPClientError) in
            attempts += 1
            throw HTTPClientError(code: .timeout, message: "t", outcomeUnknown: true)
        }
        #expect(attempts == 3)
        #expect(sleeps == [5, 10])
        guard case .failure(let error) = result else {
            Issue.record("timeouts turned into success")
            return
        }
        #expect(error.code == .timeout)
        #expect(error.outcomeUnknown)
    }

    @Test func retryAfterIsHonouredAndCapped() {
        var generator = ConstantGenerator(word: 1)
        func decision(_ retryAfter: String) -> RetryDecision {
            policy.decision(afterAttempt: 1,
                            outcome: .success(HTTPClientResponse(status: 429, headers: [("Retry-After", retryAfter)],
                                                                 body: [])),
                            using: &generator)
        }
        #expect(decision("0") == .retry(afterMilliseconds: 50))
        #expect(decision("1") == .retry(afterMilliseconds: 1_000))  // 1 s, at the 1 000 ms cap
        #expect(decision("3600") == .retry(afterMilliseconds: 1_000))
        #expect(decision("Wed, 21 Oct 2015 07:28:00 GMT") == .retry(afterMilliseconds: 50))
        #expect(decision("-5") == .retry(afterMilliseconds: 50))
    }
}

struct SecretPEMTests {
    @Test func neverPrintsTheKey() {
        let key = Array("-----BEGIN PRIVATE KEY-----\nSECRETSECRET\n-----END PRIVATE KEY-----\n".utf8)
        let secret = SecretPEM(key)
        let identity = TLSClientIdentity(certificatePEM: Array("CERT".utf8), privateKeyPEM: secret)
        var dumped = ""
        dump(identity, to: &dumped)
        for text in [secret.description, secret.debugDescription, String(describing: identity),
                     String(reflecting: identity), dumped] {
            #expect(!text.contains("SECRET"), "\(text)")
        }
        #expect(secret.count == key.count)
        #expect(secret.withUnsafeBytes { Array($0) } == key)
    }

    @Test func zeroingSourceClearsTheCallersCopy() {
        var source = Array("-----BEGIN PRIVATE KEY-----\nKEY\n".utf8)
        let original = source
        let secret = SecretPEM(zeroingSource: &source)
        #expect(source == Array(repeating: 0, count: original.count))
        #expect(secret.withUnsafeBytes { Array($0) } == original)
    }
}
