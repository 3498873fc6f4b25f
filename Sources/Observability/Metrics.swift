import Synchronization

/// An in-process metrics registry rendered in the Prometheus text exposition format (version 0.0.4).
///
/// Label sets are bounded by construction: callers label by route pattern (never raw paths) and status.
public final class MetricsRegistry: Sendable {
    /// Histogram bucket upper bounds in microseconds.
    public static let latencyBucketsMicroseconds: [Int64] = [
        500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000,
    ]
    /// The most distinct label sets a single metric may hold; more are folded into `other`.
    public static let labelSetsMax = 2_000

    private struct Histogram {
        var buckets: [Int64]
        var sumMicroseconds: Int64 = 0
        var count: Int64 = 0

        /// Counts one observation in every bucket from `first` on (cumulative buckets) and in the sum.
        mutating func record(_ microseconds: Int64, fromBucket first: Int?) {
            if let first {
                for i in first..<buckets.count { buckets[i] += 1 }
            }
            sumMicroseconds += microseconds
            count += 1
        }
    }

    private struct State {
        var counters: [String: [String: Int64]] = [:]
        var histograms: [String: [String: Histogram]] = [:]
        var help: [String: String] = [:]
        /// Rendered labels of HTTP request series, by method, route and status (`recordRequest(method:…)`).
        var requestLabels: [RequestLabelKey: (counter: String, histogram: String)] = [:]
    }

    private struct RequestLabelKey: Hashable {
        let method: String
        let route: String
        let status: Int
    }

    private let state = Mutex(State())
    private let gauges = Mutex([String: @Sendable () -> [(labels: String, value: Int64)]]())

    public init() {}

    /// Adds `by` to the counter `name` with the given labels (`key="value"` pairs).
    public func increment(_ name: String, labels: [(String, String)] = [], by amount: Int64 = 1, help: String = "") {
        let key = Self.render(labels)
        state.withLock { s in
            if s.help[name] == nil { s.help[name] = help }
            var series = s.counters[name, default: [:]]
            let slot = series[key] != nil || series.count < Self.labelSetsMax ? key : "other=\"true\""
            series[slot, default: 0] += amount
            s.counters[name] = series
        }
    }

    /// Records one observation in the latency histogram `name`.
    public func observe(_ name: String, microseconds: Int64, labels: [(String, String)] = [], help: String = "") {
        let key = Self.render(labels)
        state.withLock { s in
            if s.help[name] == nil { s.help[name] = help }
            var series = s.histograms[name, default: [:]]
            let slot = series[key] != nil || series.count < Self.labelSetsMax ? key : "other=\"true\""
            var h = series[slot] ?? Histogram(buckets: [Int64](repeating: 0, count: Self.latencyBucketsMicroseconds.count))
            for (i, bound) in Self.latencyBucketsMicroseconds.enumerated() where microseconds <= bound {
                h.buckets[i] += 1
            }
            h.sumMicroseconds += microseconds
            h.count += 1
            series[slot] = h
            s.histograms[name] = series
        }
    }

    /// Counts one request and records its latency under one lock acquisition (the per-request hot path).
    /// `counterLabels` and `histogramLabels` are pre-rendered with `MetricsRegistry.renderLabels`.
    public func recordRequest(counter: String, counterLabels: String, histogram: String, histogramLabels: String,
                              microseconds: Int64) {
        let first = Self.latencyBucketsMicroseconds.firstIndex(where: { microseconds <= $0 })
        let bucketCount = Self.latencyBucketsMicroseconds.count
        // Updated in place (no copy of a series or a histogram per request: this runs for every request).
        state.withLock { s in
            let slot = Self.admits(counterLabels, s.counters[counter]) ? counterLabels : "other=\"true\""
            s.counters[counter, default: [:]][slot, default: 0] += 1
            let hslot = Self.admits(histogramLabels, s.histograms[histogram]) ? histogramLabels : "other=\"true\""
            s.histograms[histogram, default: [:]][hslot, default: Histogram(buckets: [Int64](repeating: 0, count: bucketCount))]
                .record(microseconds, fromBucket: first)
        }
    }

    /// Counts one HTTP request (`method`, `route`, `status` labels) and records its latency (`route` label),
    /// like `recordRequest(counter:counterLabels:histogram:histogramLabels:microseconds:)`, with the labels
    /// rendered once per method, route and status and kept (at most `labelSetsMax` of them).
    public func recordRequest(counter: String, histogram: String, method: String, route: String, status: Int,
                              microseconds: Int64) {
        let key = RequestLabelKey(method: method, route: route, status: status)
        let first = Self.latencyBucketsMicroseconds.firstIndex(where: { microseconds <= $0 })
        let bucketCount = Self.latencyBucketsMicroseconds.count
        state.withLock { s in
            let labels: (counter: String, histogram: String)
            if let cached = s.requestLabels[key] {
                labels = cached
            } else {
                labels = (Self.render([("method", method), ("route", route), ("status", String(status))]),
                          Self.render([("route", route)]))
                if s.requestLabels.count < Self.labelSetsMax { s.requestLabels[key] = labels }
            }
            let slot = Self.admits(labels.counter, s.counters[counter]) ? labels.counter : "other=\"true\""
            s.counters[counter, default: [:]][slot, default: 0] += 1
            let hslot = Self.admits(labels.histogram, s.histograms[histogram]) ? labels.histogram : "other=\"true\""
            s.histograms[histogram, default: [:]][hslot, default: Histogram(buckets: [Int64](repeating: 0, count: bucketCount))]
                .record(microseconds, fromBucket: first)
        }
    }

    /// Whether `labels` has a series in `series` or may get one (at most `labelSetsMax` per metric).
    private static func admits<Value>(_ labels: String, _ series: [String: Value]?) -> Bool {
        guard let series else { return true }
        return series[labels] != nil || series.count < labelSetsMax
    }

    /// Sets the HELP text of a metric.
    public func describe(_ name: String, help: String) {
        state.withLock { $0.help[name] = help }
    }

    /// Renders label pairs as `key="value",…` with values escaped.
    public static func renderLabels(_ labels: [(String, String)]) -> String { render(labels) }

    /// Registers a gauge whose values are read at render time.
    public func registerGauge(_ name: String, read: @escaping @Sendable () -> [(labels: String, value: Int64)]) {
        gauges.withLock { $0[name] = read }
    }

    /// The whole registry in Prometheus text format.
    public func render() -> String {
        var out = ""
        let snapshot = state.withLock { $0 }
        for name in snapshot.counters.keys.sorted() {
            if let help = snapshot.help[name], !help.isEmpty { out += "# HELP \(name) \(help)\n" }
            out += "# TYPE \(name) counter\n"
            for (labels, value) in snapshot.counters[name, default: [:]].sorted(by: { $0.key < $1.key }) {
                out += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(labels)} \(value)\n"
            }
        }
        for name in snapshot.histograms.keys.sorted() {
            if let help = snapshot.help[name], !help.isEmpty { out += "# HELP \(name) \(help)\n" }
            out += "# TYPE \(name) histogram\n"
            for (labels, h) in snapshot.histograms[name, default: [:]].sorted(by: { $0.key < $1.key }) {
                let prefix = labels.isEmpty ? "" : labels + ","
                for (i, bound) in Self.latencyBucketsMicroseconds.enumerated() {
                    out += "\(name)_bucket{\(prefix)le=\"\(Self.seconds(bound))\"} \(h.buckets[i])\n"
                }
                out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(h.count)\n"
                let brace = labels.isEmpty ? "" : "{\(labels)}"
                out += "\(name)_sum\(brace) \(Self.seconds(h.sumMicroseconds))\n"
                out += "\(name)_count\(brace) \(h.count)\n"
            }
        }
        let gaugeReaders = gauges.withLock { $0 }
        for name in gaugeReaders.keys.sorted() {
            out += "# TYPE \(name) gauge\n"
            for sample in gaugeReaders[name]?() ?? [] {
                out += sample.labels.isEmpty ? "\(name) \(sample.value)\n" : "\(name){\(sample.labels)} \(sample.value)\n"
            }
        }
        return out
    }

    /// Renders microseconds as a decimal number of seconds without floating point.
    static func seconds(_ micros: Int64) -> String {
        let whole = micros / 1_000_000
        var frac = String(micros % 1_000_000)
        frac = String(repeating: "0", count: 6 - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return frac.isEmpty ? "\(whole)" : "\(whole).\(frac)"
    }

    static func render(_ labels: [(String, String)]) -> String {
        labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",")
    }

    static func escape(_ value: String) -> String {
        // Fast path: label values are almost always plain (route patterns, status codes).
        if !value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) {
            return value
        }
        return value.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
