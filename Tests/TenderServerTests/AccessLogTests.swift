import Foundation
import Synchronization
import Testing
import Time
@testable import Observability

/// The access log line and the request metrics are built on a fast path; they must say exactly what the
/// general path says.
@Suite struct AccessLogTests {
    static let texts = ["", "GET", "/v1/checkout-sessions/{id}", "unmatched", "a\"b", "back\\slash", "tab\there",
                        "line\nbreak", "cr\rhere", "\u{01}\u{1f}\u{7f}", "café", "日本語", "emoji 🙂", "\u{2028}",
                        "mixed \"\\\n\u{0}end", "0123456789abcdef-._"]

    @Test func quotingMatchesJSONQuoted() {
        var samples = Self.texts
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let scalars = (0..<Int.random(in: 0...12, using: &generator)).compactMap { _ -> Unicode.Scalar? in
                let pick = Int.random(in: 0..<4, using: &generator)
                let value: UInt32 = pick == 0 ? .random(in: 0..<0x20, using: &generator)
                    : pick == 1 ? .random(in: 0x20..<0x80, using: &generator)
                    : pick == 2 ? .random(in: 0x80..<0xD800, using: &generator) : .random(in: 0x10000..<0x10FFFF, using: &generator)
                return Unicode.Scalar(value)
            }
            samples.append(String(String.UnicodeScalarView(scalars)))
        }
        for text in samples {
            var out: [UInt8] = []
            appendJSONQuoted(text, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == jsonQuoted(text), "\(Array(text.unicodeScalars))")
        }
    }

    @Test func decimalsMatchStringOfInt() {
        var values: [Int64] = [0, 1, 9, 10, 99, 100, 12_345, -1, -10, -987_654_321, Int64.max, Int64.min]
        for _ in 0..<300 { values.append(Int64.random(in: Int64.min...Int64.max)) }
        for value in values {
            var out: [UInt8] = []
            AccessLine.appendDecimal(value, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == String(value))
        }
    }

    @Test func timeMatchesTheLogTime() {
        for millis: Int64 in [0, 1, 999, 1_000, 1_767_225_599_999, 1_767_225_600_000, 1_767_225_600_042, 4_102_444_800_007] {
            var out: [UInt8] = []
            LogTime.append(unixMilliseconds: millis, to: &out)
            let second = CivilCalendar.floorDivide(millis, 1000)
            let expected = String(RFC3339.format(unixSeconds: second).dropLast())
                + "." + String(format: "%03d", Int(millis - second * 1000)) + "Z"
            #expect(String(decoding: out, as: UTF8.self) == expected)
        }
    }

    /// The line without its time, which the two calls read a moment apart.
    static func withoutTime(_ line: String) -> String {
        guard let range = line.range(of: #"^\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","#, options: .regularExpression) else {
            return "no time: " + line
        }
        return String(line[range.upperBound...])
    }

    @Test func requestLineMatchesTheGeneralLine() {
        let lines = Mutex<[String]>([])
        let logger = Logger(format: .json, sink: { line in lines.withLock { $0.append(line) } })
        for (index, text) in Self.texts.enumerated() {
            let status = [200, 201, 404, 503, 0][index % 5]
            let duration: Int64 = [0, 7, 1_234_567, -3][index % 4]
            let requestID = Self.texts[(index + 3) % Self.texts.count]
            logger.request(method: text, route: Self.texts[(index + 1) % Self.texts.count], status: status,
                           durationMicroseconds: duration, requestID: requestID)
            logger.info("request", [("method", text), ("route", Self.texts[(index + 1) % Self.texts.count]),
                                    ("status", String(status)), ("duration_us", String(duration)), ("request_id", requestID)])
        }
        let written = lines.withLock { $0 }
        #expect(written.count == 2 * Self.texts.count)
        for pair in stride(from: 0, to: written.count - 1, by: 2) {
            #expect(!written[pair].hasSuffix("\n"))
            #expect(Self.withoutTime(written[pair]) == Self.withoutTime(written[pair + 1]))
        }
    }

    @Test func requestLineHonoursLevelAndTextFormat() {
        let lines = Mutex<[String]>([])
        let quiet = Logger(format: .json, minimumLevel: .warning, sink: { line in lines.withLock { $0.append(line) } })
        quiet.request(method: "GET", route: "/healthz", status: 200, durationMicroseconds: 5, requestID: "r1")
        #expect(lines.withLock { $0 }.isEmpty)
        let text = Logger(format: .text, sink: { line in lines.withLock { $0.append(line) } })
        text.request(method: "GET", route: "/healthz", status: 200, durationMicroseconds: 5, requestID: "r1")
        #expect(lines.withLock { $0 }.first?.hasSuffix(" INFO request method=GET route=/healthz status=200 duration_us=5 request_id=r1")
                == true)
    }

    @Test func cachedRequestLabelsRenderLikeRenderedOnes() {
        let fast = MetricsRegistry()
        let general = MetricsRegistry()
        let requests: [(String, String, Int, Int64)] = [
            ("GET", "/healthz", 200, 40), ("GET", "/healthz", 200, 700_000), ("POST", "/v1/checkout-sessions/{id}", 201, 3_000),
            ("GET", "/weird\"route\\with\nescapes", 404, 12), ("GET", "/healthz", 503, 26_000),
            ("POST", "/v1/checkout-sessions/{id}", 201, 1),
        ]
        for (method, route, status, micros) in requests {
            fast.recordRequest(counter: "tender_http_requests_total", histogram: "tender_http_request_duration_seconds",
                               method: method, route: route, status: status, microseconds: micros)
            general.recordRequest(
                counter: "tender_http_requests_total",
                counterLabels: MetricsRegistry.renderLabels([("method", method), ("route", route), ("status", String(status))]),
                histogram: "tender_http_request_duration_seconds",
                histogramLabels: MetricsRegistry.renderLabels([("route", route)]), microseconds: micros)
        }
        #expect(fast.render() == general.render())
        #expect(fast.render().contains(#"tender_http_requests_total{method="GET",route="/healthz",status="200"} 2"#))
    }
}
