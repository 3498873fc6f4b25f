import FinanceStore
import Foundation
import Postgres
import Synchronization

/// `tender finance-bench --record-seconds S [--clients N]`: one payment event per database transaction
/// through FinanceRecorder, from N clients for S seconds (each client a merchant of its own, as pgbench's
/// clients mostly touch different branches), so that the figure compares with pgbench's TPC-B run with
/// as many clients: both are one short write transaction each (issue 15 item 4). Prints
/// `finance_record events_per_second X clients N`.
enum FinanceRecordBench {
    static func run(clients: Int, seconds: Double, configuration: TenderConfiguration, migrations: String,
                    now: Date) throws {
        var pg = PostgresConfiguration(connectionString: configuration.resolvedDatabaseURL)
        pg.preparedStatements = configuration.limits.databasePreparedStatements
        pg.connectionsMax = clients
        pg.statementTimeoutMilliseconds = 120_000
        let pool = PostgresPool(configuration: pg)
        defer { pool.close() }
        let app = TenderApp(configuration: configuration, pool: pool,
                            migrations: try MigrationFile.load(directory: migrations),
                            logger: .silent)
        let run = UInt32.random(in: 0...UInt32.max)
        var merchants: [String] = []
        for client in 0..<clients {
            let merchantId = "merchant.finrecord.\(run).\(client)"
            try app.merchants.add(try Merchant.validated(merchantId: merchantId, displayName: "Bench", domains: ["bench.test"],
                                                         countryCode: "US", currencies: ["USD"]))
            merchants.append(merchantId)
        }
        let recorder = FinanceRecorder()
        let recorded = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        let clock = ContinuousClock()
        // A warm-up event per merchant creates its accounts, so the timed part is steady-state payments.
        for merchantId in merchants {
            try pool.transaction { conn in
                try recorder.apply(event("warm", 0), merchantId: merchantId, on: conn, now: now)
            }
        }
        let start = clock.now
        let deadline = start.advanced(by: .milliseconds(Int64(seconds * 1_000)))
        var threads: [Thread] = []
        let done = Atomic<Int>(0)
        for merchantId in merchants {
            let thread = Thread {
                var i = 1
                while clock.now < deadline {
                    do {
                        try pool.transaction { conn in
                            try recorder.apply(event("pay", i), merchantId: merchantId, on: conn, now: now)
                        }
                        recorded.add(1, ordering: .relaxed)
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                    i += 1
                }
                done.add(1, ordering: .relaxed)
            }
            threads.append(thread)
            thread.start()
        }
        while done.load(ordering: .relaxed) < clients { usleep(10_000) }
        let elapsed = start.duration(to: clock.now).secondsValue
        let count = recorded.load(ordering: .relaxed)
        Console.out(String(format: "finance_record events_per_second %.1f clients %d (%d events in %.1f s, %d failures)",
                           Double(count) / elapsed, clients, count, elapsed, failures.load(ordering: .relaxed)))
    }

    private static func event(_ prefix: String, _ i: Int) -> BusinessEvent {
        .paymentSucceeded(paymentID: "\(prefix)_\(i)", money: EventMoney(amountMinor: Int64(100 + i % 1_000), currencyCode: "USD",
                                                                          processor: "sim"),
                          at: FinanceTimestamp(secondsSinceEpoch: 1_767_225_600 + Int64(i)))
    }
}
