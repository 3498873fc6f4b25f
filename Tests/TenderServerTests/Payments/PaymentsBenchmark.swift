import Foundation
import Payments
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// `make bench` (scripts/bench-payments.sh) runs this with TENDER_BENCH_PAYMENTS=1: end-to-end payments
/// through the HTTP API (sandbox tokens minted beforehand, simulator at zero latency, 32 clients on
/// keep-alive connections). It prints figures; it asserts only that every payment succeeded.
@Suite(.enabled(if: TestEnvironment.hasDatabase && ProcessInfo.processInfo.environment["TENDER_BENCH_PAYMENTS"] != nil,
                "set TENDER_BENCH_PAYMENTS=1 (make bench)"))
struct PaymentsBenchmark {
    @Test func paymentsPerSecond() throws {
        let env = ProcessInfo.processInfo.environment
        let total = Int(env["TENDER_BENCH_PAYMENTS_COUNT"] ?? "") ?? 3_000
        let clients = 32
        var settings = PaymentsHarness.fastSettings
        settings.resolverIntervalMilliseconds = 60_000  // no background passes inside the counted round trips
        let h = try PaymentsHarness(prefix: "pay_bench", settings: settings, connectionsMax: 16)
        defer { h.stop() }
        var work: [(SessionFixture, [UInt8])] = []
        for _ in 0..<total {
            let s = try h.session(totalMinor: 1_099)
            work.append((s, try h.token(for: s)))
        }
        let jobs = work
        let latencies = Mutex<[Double]>([])
        let failures = Atomic<Int>(0)
        let roundTripsBefore = PostgresCounters.roundTrips
        let preparesBefore = PostgresCounters.prepares
        let started = Date()
        _ = concurrently(clients) { c -> Int in
            guard let client = try? RawHTTPClient(port: h.port) else { return 0 }
            var mine: [Double] = []
            var i = c
            while i < jobs.count {
                let t0 = Date()
                let r = try? h.pay(jobs[i].0, token: jobs[i].1, key: "bench-\(i)", client: client)
                mine.append(Date().timeIntervalSince(t0))
                if r?.status != 200 { failures.add(1, ordering: .relaxed) }
                i += clients
            }
            latencies.withLock { $0 += mine }
            return mine.count
        }
        let elapsed = Date().timeIntervalSince(started)
        let roundTrips = Double(PostgresCounters.roundTrips - roundTripsBefore) / Double(max(1, jobs.count))
        let prepares = PostgresCounters.prepares - preparesBefore
        let sorted = latencies.withLock { $0.sorted() }
        func pct(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1_000 }
        print(String(format: "payments: %d in %.2f s = %.0f payments/s, p50 %.1f ms, p99 %.1f ms, failures %d (32 clients, simulator 0 ms)",
                     sorted.count, elapsed, Double(sorted.count) / elapsed, pct(0.5), pct(0.99), failures.load(ordering: .relaxed)))
        print(String(format: "payments: %.2f database round trips per payment (%d statements prepared in all)", roundTrips, prepares))
        #expect(failures.load(ordering: .relaxed) == 0)
    }
}
