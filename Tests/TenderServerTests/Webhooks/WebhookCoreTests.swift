import Foundation
import HTTPClient
import Testing
@testable import TenderServer

/// The pure webhook core: Standard Webhooks signing against vectors computed independently, the retry
/// schedule with jitter and Retry-After (time passed in), and the target rules.
struct WebhookCoreTests {
    /// Vectors computed independently of Tender with the Standard Webhooks reference library for Python
    /// (`standardwebhooks` 1.1.0 from PyPI, `Webhook(secret).sign(msg_id, timestamp, body)`); the first is
    /// also the Standard Webhooks specification's own example.
    @Test func signatureMatchesTheReferenceLibrary() throws {
        let specKey = try #require(WebhookSecret.key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        #expect(WebhookSignature.header(keys: [specKey], messageId: "msg_p5jXN8AQM9LWM0D4loKWxJek",
                                        timestampSeconds: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8))
                == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        let key = try #require(WebhookSecret.key("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
        #expect(key == Array(0..<32))
        let body = #"{"id":"evt_0123456789abcdefghijklmn","type":"payment.succeeded","createdAt":"2026-12-01T00:00:00Z","#
            + #""data":{"object":{"id":"pay_1"}}}"#
        let one = WebhookSignature.header(keys: [key], messageId: "evt_0123456789abcdefghijklmn",
                                          timestampSeconds: 1_764_547_200, body: Array(body.utf8))
        #expect(one == "v1,5J+m9MhymbITSYIdl8zMILS10l/Ogg034mjVAFO/wjo=")
        // During a rotation: current first, then the previous one, space-separated.
        let two = WebhookSignature.header(keys: [specKey, key], messageId: "evt_0123456789abcdefghijklmn",
                                          timestampSeconds: 1_764_547_200, body: Array(body.utf8))
        #expect(two.split(separator: " ").count == 2 && two.hasSuffix(" " + one))
    }

    @Test func secretsAreWhsecAndBase64OfTheStandardsLength() {
        let text = WebhookSecret.text(random: Array(repeating: 7, count: 32))
        #expect(text.hasPrefix("whsec_") && WebhookSecret.key(text) == Array(repeating: 7, count: 32))
        #expect(WebhookSecret.key("whsec_" + Data(Array(repeating: 1, count: 23)).base64EncodedString()) == nil)
        #expect(WebhookSecret.key("whsec_" + Data(Array(repeating: 1, count: 65)).base64EncodedString()) == nil)
        #expect(WebhookSecret.key("sk_" + Data(Array(repeating: 1, count: 32)).base64EncodedString()) == nil)
        #expect(WebhookSecret.key("whsec_!!!") == nil)
        #expect(WebhookSecretBox.newSecret() != WebhookSecretBox.newSecret())
    }

    @Test func scheduleWithJitterAndExhaustion() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let schedule = WebhookRetrySchedule(delaysMilliseconds: [1_000, 60_000])
        // random 0.5 = no jitter; 0 and 1 = the ±10 % edges.
        #expect(schedule.nextAttempt(afterFailures: 1, now: now, random: 0.5, retryAfter: nil) == now.addingTimeInterval(1))
        #expect(schedule.nextAttempt(afterFailures: 1, now: now, random: 0, retryAfter: nil) == now.addingTimeInterval(0.9))
        #expect(schedule.nextAttempt(afterFailures: 2, now: now, random: 1, retryAfter: nil) == now.addingTimeInterval(66))
        #expect(schedule.nextAttempt(afterFailures: 3, now: now, random: 0.5, retryAfter: nil) == nil)
        // Retry-After is a lower bound, capped at a day.
        #expect(schedule.nextAttempt(afterFailures: 1, now: now, random: 0.5, retryAfter: now.addingTimeInterval(30))
                == now.addingTimeInterval(30))
        #expect(schedule.nextAttempt(afterFailures: 2, now: now, random: 0.5, retryAfter: now.addingTimeInterval(5))
                == now.addingTimeInterval(60))
        #expect(schedule.nextAttempt(afterFailures: 1, now: now, random: 0.5, retryAfter: now.addingTimeInterval(999_999))
                == now.addingTimeInterval(86_400))
        #expect(WebhookRetrySchedule().delaysMilliseconds.count == 9)
    }

    @Test func scheduleParsing() {
        #expect(WebhookRetrySchedule.parse("5000,300000")?.delaysMilliseconds == [5_000, 300_000])
        #expect(WebhookRetrySchedule.parse(" 1 , 2 ")?.delaysMilliseconds == [1, 2])
        for bad in ["", "1,,2", "0", "-1", "1.5", "abc", "604800001", Array(repeating: "1", count: 33).joined(separator: ",")] {
            #expect(WebhookRetrySchedule.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func retryAfterForms() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(WebhookRetrySchedule.retryAfter("120", now: now) == now.addingTimeInterval(120))
        #expect(WebhookRetrySchedule.retryAfter("Wed, 21 Oct 2015 07:30:00 GMT", now: now) == now.addingTimeInterval(120))
        #expect(WebhookRetrySchedule.retryAfter(nil, now: now) == nil)
        #expect(WebhookRetrySchedule.retryAfter("soon", now: now) == nil)
        #expect(WebhookRetrySchedule.retryAfter("9999999999", now: now) == nil)
    }

    @Test func outcomes() {
        #expect(WebhookAttemptOutcome.of(status: 200) == .delivered)
        #expect(WebhookAttemptOutcome.of(status: 204) == .delivered)
        #expect(WebhookAttemptOutcome.of(status: 410) == .gone)
        for status in [nil, 100, 301, 400, 404, 429, 500, 503] as [Int?] {
            #expect(WebhookAttemptOutcome.of(status: status) == .retry)
        }
    }

    @Test func financeFrequencyIntervals() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(FinanceFrequency.hourly.allows(now: now, last: nil))
        #expect(!FinanceFrequency.hourly.allows(now: now, last: now.addingTimeInterval(-3_599)))
        #expect(FinanceFrequency.hourly.allows(now: now, last: now.addingTimeInterval(-3_600)))
        #expect(!FinanceFrequency.daily.allows(now: now, last: now.addingTimeInterval(-80_000)))
        #expect(!FinanceFrequency.weekly.allows(now: now, last: now.addingTimeInterval(-86_400 * 6)))
    }

    /// One row per rule: the code a registered URL gets.
    @Test(arguments: [
        ("https://hooks.example.com/tender", nil),
        ("http://hooks.example.com/tender", "url_not_https"),
        ("ftp://hooks.example.com/", "url_not_https"),
        ("https://127.0.0.1/x", "url_address_not_allowed"),
        ("https://10.0.0.1/x", "url_address_not_allowed"),
        ("https://192.168.1.1/x", "url_address_not_allowed"),
        ("https://169.254.169.254/latest/meta-data/", "url_address_not_allowed"),
        ("https://[::1]/x", "url_address_not_allowed"),
        ("https://[fe80::1]/x", "url_address_not_allowed"),
        ("https://[::ffff:127.0.0.1]/x", "url_address_not_allowed"),
        ("https://2130706433/x", "url_address_not_allowed"),
        ("https://0x7f.1/x", "url_address_not_allowed"),
        ("https://localhost/x", "url_address_not_allowed"),
        ("https://a.localhost/x", "url_address_not_allowed"),
        ("https://u:p@hooks.example.com/", "url_invalid"),
        ("https:///nohost", "url_invalid"),
        ("https://hooks.example.com/a b", "url_invalid"),
        ("https://hooks.example.com/#frag", "url_invalid"),
        ("https://8.8.8.8/x", nil),
    ] as [(String, String?)])
    func targetRules(url: String, code: String?) {
        #expect(WebhookTargetPolicy.problem(url: url, allowInsecure: false)?.code == code)
    }

    @Test func insecureSwitchAllowsHTTPAndInternalAddresses() {
        #expect(WebhookTargetPolicy.problem(url: "http://127.0.0.1:9/x", allowInsecure: true) == nil)
        #expect(WebhookTargetPolicy.problem(url: "ftp://127.0.0.1/x", allowInsecure: true)?.code == "url_not_https")
        var settings = WebhookSettings()
        #expect(settings.clientOptions().connectAddressFilter != nil && !settings.clientOptions().allowPlainHTTPForTesting)
        #expect(settings.clientOptions().followRedirects == false)
        settings.allowInsecureTargetsForTesting = true
        #expect(settings.clientOptions().connectAddressFilter == nil && settings.clientOptions().allowPlainHTTPForTesting)
    }

    @Test func settingsFromTheEnvironment() throws {
        let s = try WebhookSettings.load(environment: ["TENDER_WEBHOOK_TIMEOUT_MS": "2500",
                                                       "TENDER_WEBHOOK_RETRY_SCHEDULE_MS": "10,20",
                                                       "TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS": "true"])
        #expect(s.timeoutMilliseconds == 2_500 && s.schedule.delaysMilliseconds == [10, 20] && s.allowInsecureTargetsForTesting)
        #expect(try WebhookSettings.load(environment: [:]).timeoutMilliseconds == 10_000)
        for (name, value) in [("TENDER_WEBHOOK_TIMEOUT_MS", "0"), ("TENDER_WEBHOOK_RETRY_SCHEDULE_MS", "x"),
                              ("TENDER_WEBHOOK_ALLOW_INSECURE_TARGETS", "yes"), ("TENDER_WEBHOOK_WORKERS", "65")] {
            #expect(throws: ConfigurationError.self) { try WebhookSettings.load(environment: [name: value]) }
        }
    }
}
