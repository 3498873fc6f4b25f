import FinanceStore
import Foundation
import HTTPServer
import Observability
import Postgres
import Synchronization
#if canImport(Glibc)
import Glibc
import Time
#endif

/// `tender finance-bench`: prints the finance feed's figures (issue 6 benchmark); never passes or fails.
enum FinanceBenchCommand {
    static let help = """
        usage: tender finance-bench [--database-url URL] [--transactions N] [--rate PER_SECOND] [--seconds S]
               tender finance-bench [--database-url URL] --record-seconds S [--clients N]
        The second form prints only the recording figure: one event per transaction from N clients (default 8).
        On a migrated database: records N payments through FinanceRecorder, then, for a second merchant,
        N payments, N fees and N bookings in batches (settlement-style, one transaction per batch); streams
        the first merchant's history over SSE from zero (catch-up changes/s), then records payments at a
        steady rate while one SSE client measures commit-to-event latency (p50/p99): once quiet, once
        while another merchant imports (400,000 lines in one open transaction, then settlement events in
        chunks of 1,000). Creates its merchants; needs wal_level = logical (the feed writer runs in-process).
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["database-url", "transactions", "rate", "seconds",
                                                                 "record-seconds", "clients"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(0)
        var overrides: [String: String] = ["TENDER_LISTEN": "127.0.0.1:0"]
        if let v = args.value("database-url") { overrides["TENDER_DATABASE_URL"] = v }
        let total = Int(args.value("transactions") ?? "100000") ?? 100_000
        let rate = Int(args.value("rate") ?? "200") ?? 200
        let seconds = Int(args.value("seconds") ?? "10") ?? 10
        var configuration = try TenderConfiguration.load(environment: environment, overrides: overrides)
        if let recordSeconds = args.value("record-seconds") {
            try recordBench(recordSeconds, clients: args.value("clients"), configuration: configuration, environment: environment)
            return .success
        }
        configuration.limits.databaseConnectionsMax = 8
        var pg = PostgresConfiguration(connectionString: configuration.resolvedDatabaseURL)
        pg.preparedStatements = configuration.limits.databasePreparedStatements
        pg.connectionsMax = 8
        pg.statementTimeoutMilliseconds = 120_000
        let pool = PostgresPool(configuration: pg); defer { pool.close() }
        let app = TenderApp(configuration: configuration, pool: pool,
                            migrations: try MigrationFile.load(directory: TenderCLI.migrationsDirectory(environment)),
                            logger: .silent)
        let merchantId = "merchant.finbench.\(UInt32.random(in: 0...UInt32.max))"
        try app.merchants.add(try Merchant.validated(merchantId: merchantId, displayName: "Bench", domains: ["bench.test"],
                                                     countryCode: "US", currencies: ["USD"]))
        let key = try app.merchants.createAPIKey(merchantId: merchantId).secret
        let account = FinanceStoreIdentity.identity(merchantId).id("account", LedgerAccounts.settlement("sim", "USD").key)
        let recorder = FinanceRecorder()

        try bulkLoad(total: total, recorder: recorder, pool: pool, merchantId: merchantId)
        try batchFigures(total: total, recorder: recorder, pool: pool, app: app)

        // The feed writer numbers everything recorded so far (it streamed along while the load ran).
        app.finance.startIngest()
        let feedStart = Clock.system.now()
        let changes = try countChanges(pool)
        while try countFed(pool) < changes {
            guard Clock.system.now().timeIntervalSince(feedStart) < 600 else { throw TenderError("bench_feed_stuck",
                "feed did not catch up") }
            usleep(20_000)
        }
        Console.out(String(format: "finance: feed writer caught up with %d changes %.2f s after the load",
                           changes, Clock.system.now().timeIntervalSince(feedStart)))

        let server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: app.router())
        try server.start()
        defer {
            server.shutdown(drainDeadlineMilliseconds: 2_000)
            app.finance.stop()
        }
        let path = "/v1/finance/transactions/history?accountID=\(account)"

        // Catch-up from zero over SSE.
        let client = try BenchSSEClient(port: server.boundPort, path: path, key: key)
        let catchUpStart = Clock.system.now()
        var received = 0
        while let event = client.next(timeoutSeconds: 30) {
            if event.name == "caught-up" { break }
            received += event.transactionCount
        }
        let catchUpSeconds = Clock.system.now().timeIntervalSince(catchUpStart)
        let catchUpRate = Double(received) / catchUpSeconds
        Console.out(String(format: "finance: SSE catch-up streamed %d changes in %.2f s = %.0f changes/s",
                           received, catchUpSeconds, catchUpRate))

        client.textEventBytesMax = Int.max
        let quiet = try liveLatency(client: client, merchantId: merchantId, prefix: "quiet", rate: rate, seconds: seconds,
                                    pool: pool, recorder: recorder, importer: nil)
        Console.out(String(format: "finance: live %d payments at %d/s, quiet: commit-to-SSE p50 %.1f ms, p99 %.1f ms (%d events seen)",
                           rate * seconds, rate, quiet.p50, quiet.p99, quiet.seen))
        let importer = "merchant.finbench.import.\(UInt32.random(in: 0...UInt32.max))"
        try app.merchants.add(try Merchant.validated(merchantId: importer, displayName: "Bench import", domains: ["bench.test"],
                                                     countryCode: "US", currencies: ["USD"]))
        let busy = try liveLatency(client: client, merchantId: merchantId, prefix: "busy", rate: rate, seconds: seconds,
                                   pool: pool, recorder: recorder, importer: importer)
        Console.out(String(format: "finance: live %d payments at %d/s during another merchant's import (%d lines in one "
                           + "transaction, then %d settlement events in chunks): p50 %.1f ms, p99 %.1f ms (%d events seen)",
                           rate * seconds, rate, busy.importLines, busy.importEvents, busy.p50, busy.p99, busy.seen))
        Console.out(String(format: "finance feed: SSE catch-up vs goal 50,000 changes/s: %.0f%%; live p99 during import vs goal "
                           + "100 ms: %.0f%% (%.1fx the quiet p99)", 100 * catchUpRate / 50_000, 100 * busy.p99 / 100,
                           quiet.p99 > 0 ? busy.p99 / quiet.p99 : .nan))
        return .success
    }

    /// Bulk load: 100 events per database transaction (one row updated thousands of times in one
    /// transaction walks an ever longer version chain, which would measure that, not the recorder).
    static func bulkLoad(total: Int, recorder: FinanceRecorder, pool: PostgresPool, merchantId: String) throws {
        let loadStart = Clock.system.now()
        var next = 0
        while next < total {
            let end = min(total, next + 100)
            try pool.transaction { conn in
                for i in next..<end {
                    try recorder.apply(.paymentSucceeded(paymentID: "pay_\(i)", money: EventMoney(
                        amountMinor: Int64(100 + i % 1_000), currencyCode: "USD", processor: "sim"),
                        at: FinanceTimestamp(secondsSinceEpoch: 1_767_225_600 + Int64(i))),
                        merchantId: merchantId, on: conn, now: Clock.system.now())
                }
            }
            next = end
        }
        let loadSeconds = Clock.system.now().timeIntervalSince(loadStart)
        Console.out(String(format: "finance: recorded %d payments in %.1f s (%.0f events/s through FinanceRecorder)",
                           total, loadSeconds, Double(total) / loadSeconds))
    }

    /// `--record-seconds`: one event per transaction from `clients` clients (FinanceRecordBench).
    static func recordBench(_ recordSeconds: String, clients clientsText: String?, configuration: TenderConfiguration,
                            environment: [String: String]) throws {
        guard let seconds = Double(recordSeconds), seconds > 0, let clients = Int(clientsText ?? "8"),
              (1...64).contains(clients) else {
            throw UsageError(message: "--record-seconds must be positive and --clients in 1...64")
        }
        try FinanceRecordBench.run(clients: clients, seconds: seconds, configuration: configuration,
                                   migrations: TenderCLI.migrationsDirectory(environment), now: Clock.system.now())
    }

    static func countChanges(_ pool: PostgresPool) throws -> Int {
        try pool.query("SELECT count(*)::int AS n FROM finance_change").first?.decode("n", as: Int.self) ?? 0
    }

    static func countFed(_ pool: PostgresPool) throws -> Int {
        try pool.query("SELECT count(*)::int AS n FROM finance_feed").first?.decode("n", as: Int.self) ?? 0
    }

    struct Latency {
        var p50 = Double.nan
        var p99 = Double.nan
        var seen = 0
        var importLines = 0
        var importEvents = 0
    }

    /// Payments at a steady `rate` for `seconds`; the SSE client notes when each one's event arrives.
    /// With `importer`, another merchant imports meanwhile, as a settlement import does: phase 1 writes
    /// its lines in one long transaction (held open for half the window, then committed: the decoder
    /// replays it all at its commit), phase 2 applies its effects in chunk transactions until the end.
    static func liveLatency(client: BenchSSEClient, merchantId: String, prefix: String, rate: Int, seconds: Int,
                            pool: PostgresPool, recorder: FinanceRecorder, importer: String?) throws -> Latency {
        let commits = Mutex<[String: UInt64]>([:])
        let writerDone = Atomic<Bool>(false)
        let importStats = Mutex<(lines: Int, events: Int)>((0, 0))
        let liveCount = rate * seconds
        var threads: [Thread] = []
        if let importer {
            let importDeadline = Clock.system.now().addingTimeInterval(Double(seconds))
            threads.append(Thread {
                let lines = 400_000
                do {
                    try pool.withConnection { conn in
                        try conn.simpleQuery("CREATE TABLE IF NOT EXISTS bench_import_lines (report int, line int, body text)")
                    }
                    try pool.transaction { conn in
                        try conn.simpleQuery("SET LOCAL statement_timeout = 0")
                        _ = try conn.query("""
                            INSERT INTO bench_import_lines
                            SELECT 1, g, 'settlement line ' || g || repeat('x', 100) FROM generate_series(1, $1::int) g
                            """, [lines])
                        importStats.withLock { $0.lines = lines }
                        while Clock.system.now() < importDeadline.addingTimeInterval(-Double(seconds) / 2) { usleep(50_000) }
                    }
                    var next = 0
                    while Clock.system.now() < importDeadline {
                        let events = (next..<(next + 1_000)).map { i in
                            BusinessEvent.paymentSucceeded(paymentID: "imp_\(i)", money: EventMoney(
                                amountMinor: Int64(100 + i % 1_000), currencyCode: "USD", processor: "sim"),
                                at: FinanceTimestamp(secondsSinceEpoch: 1_767_225_600 + Int64(i)))
                        }
                        _ = try pool.transaction { conn in
                            try recorder.apply(events, merchantId: importer, on: conn, now: Clock.system.now(), missingPostings: .fail)
                        }
                        next += events.count
                        importStats.withLock { $0.events = next }
                    }
                } catch {
                    Console.out("finance: bench import failed: \(error)")
                }
            })
        }
        threads.append(Thread {
            let interval = 1.0 / Double(max(rate, 1))
            let start = Clock.system.now()
            for i in 0..<liveCount {
                let due = start.addingTimeInterval(Double(i) * interval)
                let wait = due.timeIntervalSinceNow
                if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                let id = "\(prefix)_\(i)"
                do {
                    try pool.transaction { conn in
                        try recorder.apply(.paymentSucceeded(paymentID: id, money: EventMoney(
                            amountMinor: 1_000, currencyCode: "USD", processor: "sim"),
                            at: FinanceTimestamp(secondsSinceEpoch: Clock.system.unixSeconds())),
                            merchantId: merchantId, on: conn, now: Clock.system.now())
                    }
                    let committed = DispatchTime.now().uptimeNanoseconds
                    commits.withLock { $0["payment_succeeded \(id)"] = committed }
                } catch {
                    continue
                }
            }
            writerDone.store(true, ordering: .releasing)
        })
        threads.forEach { $0.start() }
        // First arrival per payment (a transaction's JSON names its payment more than once).
        var arrivals: [String: UInt64] = [:]
        while arrivals.count < liveCount {
            guard let event = client.next(timeoutSeconds: 10) else { break }
            let now = DispatchTime.now().uptimeNanoseconds
            for id in event.data.liveIDs(prefix: prefix) where arrivals[id] == nil { arrivals[id] = now }
        }
        while !writerDone.load(ordering: .acquiring) { usleep(10_000) }
        let committed = commits.withLock { $0 }
        var latencies: [Double] = []
        for (id, arrived) in arrivals {
            if let at = committed[id], arrived >= at { latencies.append(Double(arrived - at) / 1_000_000) }
            else if committed[id] != nil { latencies.append(0) }
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        let stats = importStats.withLock { $0 }
        return Latency(p50: percentile(0.5), p99: percentile(0.99), seen: latencies.count,
                       importLines: stats.lines, importEvents: stats.events)
    }
}

extension FinanceBenchCommand {
    /// Settlement-style figures on a merchant of their own (the first merchant's feed stays as it was):
    /// `total` payments, then a `fee` posting per payment, then a `paymentBooked` per payment, each in
    /// batches of `FinanceRecorder.batchEventsMaxDefault` events, one transaction per batch.
    static func batchFigures(total: Int, recorder: FinanceRecorder, pool: PostgresPool, app: TenderApp) throws {
        let merchantId = "merchant.finbench.\(UInt32.random(in: 0...UInt32.max))"
        try app.merchants.add(try Merchant.validated(merchantId: merchantId, displayName: "Bench batches",
                                                     domains: ["bench.test"], countryCode: "US", currencies: ["USD"]))
        let batch = FinanceRecorder.batchEventsMaxDefault
        let at = { (i: Int) in FinanceTimestamp(secondsSinceEpoch: 1_767_225_600 + Int64(i)) }
        let money = { (i: Int) in EventMoney(amountMinor: Int64(100 + i % 1_000), currencyCode: "USD", processor: "sim") }
        let kinds: [(label: String, event: (Int) -> BusinessEvent)] = [
            ("payments", { .paymentSucceeded(paymentID: "pay_\($0)", money: money($0), at: at($0)) }),
            ("fee postings", { .fee(feeID: "fee_\($0)", paymentID: "pay_\($0)", money: money($0 % 7 + 1), at: at($0)) }),
            ("paymentBooked transitions", { .paymentBooked(paymentID: "pay_\($0)", at: at($0 + 86_400)) }),
        ]
        for kind in kinds {
            let start = Clock.system.now()
            var slowest = 0.0
            for first in stride(from: 0, to: total, by: batch) {
                let events = (first..<min(total, first + batch)).map(kind.event)
                let batchStart = Clock.system.now()
                _ = try pool.transaction { conn in
                    try recorder.apply(events, merchantId: merchantId, on: conn, now: Clock.system.now(), missingPostings: .fail)
                }
                slowest = max(slowest, Clock.system.now().timeIntervalSince(batchStart))
            }
            let seconds = Clock.system.now().timeIntervalSince(start)
            Console.out("finance: batched \(total) \(kind.label) in " + String(
                format: "%.1f s (%.0f events/s, %d per batch, slowest batch %.2f s)",
                seconds, Double(total) / seconds, batch, slowest))
        }
    }
}

extension String {
    /// `payment_succeeded <prefix>_N` descriptions in an event's data.
    fileprivate func liveIDs(prefix: String) -> [String] {
        var ids: [String] = []
        for part in components(separatedBy: "\"payment_succeeded \(prefix)_").dropFirst() {
            if let end = part.firstIndex(of: "\"") { ids.append("payment_succeeded \(prefix)_" + part[..<end]) }
        }
        return ids
    }
}

/// A minimal blocking SSE reader for the benchmark (chunked body, LF-separated events).
final class BenchSSEClient {
    struct Event {
        var name = ""
        var data = ""
        /// `"transactionAmount"` occurrences, counted on the bytes (catch-up needs no String).
        var transactionCount = 0
    }

    private let fd: Int32
    private var raw: [UInt8] = []
    private var body: [UInt8] = []
    private var headersDone = false
    /// Where the search for the next blank line resumes in `body` (bytes before it hold none).
    private var scanFrom = 0
    /// Events larger than this are counted, not turned into Strings (catch-up pages); the live phases
    /// raise it, so that a burst delivered as one large event is still matched payment by payment.
    var textEventBytesMax = 16_384
    private static let transactionMarker = Array("\"transactionAmount\"".utf8)

    init(port: Int, path: String, key: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TenderError("bench_connect", "cannot connect to the bench server") }
        let head = Array(("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            + "Authorization: Bearer \(key)\r\n\r\n").utf8)
        _ = head.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }

    func next(timeoutSeconds: Double) -> Event? {
        let deadline = Clock.system.now().addingTimeInterval(timeoutSeconds)
        var chunk = [UInt8](repeating: 0, count: 262_144)
        while true {
            if let event = takeEvent() { return event }
            if Clock.system.now() > deadline { return nil }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { raw += chunk[0..<n]; dechunk() } else if n == 0 { return nil }
        }
    }

    private func dechunk() {
        if !headersDone {
            guard let end = Self.find([13, 10, 13, 10], in: raw, from: 0) else { return }
            raw.removeFirst(end + 4)
            headersDone = true
        }
        var offset = 0
        while let lineEnd = Self.find([13, 10], in: raw, from: offset) {
            guard let size = Int(String(decoding: raw[offset..<lineEnd], as: UTF8.self), radix: 16),
                  raw.count >= lineEnd + 2 + size + 2 else { break }
            body += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
            offset = lineEnd + 2 + size + 2
        }
        raw.removeFirst(offset)
    }

    private func takeEvent() -> Event? {
        while let end = Self.find([10, 10], in: body, from: scanFrom) {
            scanFrom = 0
            var event = Event()
            let block = body[0..<end]
            if block.count > textEventBytesMax {
                // Name from the head, transactions counted in place.
                let head = String(decoding: block.prefix(512), as: UTF8.self)
                for line in head.split(separator: "\n") where line.hasPrefix("event: ") {
                    event.name = String(line.dropFirst(7))
                }
                event.transactionCount = Self.count(Self.transactionMarker, in: block)
            } else {
                for line in String(decoding: block, as: UTF8.self).split(separator: "\n") {
                    if line.hasPrefix("event: ") { event.name = String(line.dropFirst(7)) }
                    if line.hasPrefix("data: ") { event.data += line.dropFirst(6) }
                }
                event.transactionCount = Self.count(Self.transactionMarker, in: block)
            }
            body.removeFirst(end + 2)
            if !event.name.isEmpty { return event }
        }
        scanFrom = max(0, body.count - 1)
        return nil
    }

    private static func count(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int {
        var total = 0
        var i = haystack.startIndex
        let last = haystack.endIndex - needle.count
        while i <= last {
            if haystack[i] == needle[0] && haystack[i..<(i + needle.count)].elementsEqual(needle) {
                total += 1
                i += needle.count
            } else {
                i += 1
            }
        }
        return total
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count + start else { return nil }
        var i = start
        while i <= haystack.count - needle.count {
            if haystack[i] == needle[0] && haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }
}
