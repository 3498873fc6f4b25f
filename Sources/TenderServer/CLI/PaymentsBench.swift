import ApplePayToken
import Crypto
import Foundation
import HTTPServer
import Observability
import Payments
import Postgres
import Synchronization
import Time
#if canImport(Glibc)
import Glibc
#endif

/// `tender bench payments` (run by scripts/bench-payments.sh): end-to-end payments per second through
/// the HTTP API of an in-process server on an ephemeral port. Tokens are minted beforehand by a sandbox
/// authority that exists only in this process (its merchant key is never stored), the processor is the
/// simulator at zero latency, and every payment's outcome reaches the same subscribers as under `serve`
/// (the finance ledger). It creates its own merchant and sessions and refuses any database whose name
/// does not say it is a bench, test or sandbox database. It prints figures; it fails only if a payment fails.
enum PaymentsBench {
    static let help = """
        usage: tender bench payments --database-url URL [--seconds N] [--count-max N] [--clients N] [--without-subscribers]
        Posts payments from N clients (default 32, keep-alive connections, one Idempotency-Key each) to an
        in-process server with the configuration from the environment, for about --seconds (default
        BENCH_SECONDS, else 10) or until --count-max (default 20000) pre-minted sandbox tokens are used.
        The database (--database-url, else TENDER_DATABASE_URL; never the default) must be migrated and its
        name must contain "bench", "test" or "sandbox": the run adds a merchant, sessions and payments to it.
        Prints payments/s, p50/p99 latency, database round trips per payment and CPU per payment.
        --without-subscribers leaves out what serve adds to each outcome's transaction (the finance ledger,
        Wallet orders), to show their share.
        """

    /// What one run is asked to do.
    struct Options: Equatable {
        var databaseURL: String
        var seconds: Double
        var countMax: Int
        var clients: Int
        var subscribers = true
    }

    /// Parses and checks `argv` (after `bench payments`); refuses a database not explicitly given or not
    /// named as a bench/test/sandbox database.
    static func options(_ args: Arguments, environment: [String: String]) throws(UsageError) -> Options {
        try args.expectPositionals(0)
        guard let url = args.value("database-url") ?? environment["TENDER_DATABASE_URL"], !url.isEmpty else {
            throw UsageError(message: "needs --database-url (or TENDER_DATABASE_URL): a bench, test or sandbox database")
        }
        guard let name = databaseName(url), isBenchDatabaseName(name) else {
            throw UsageError(message: "refusing database '\(databaseName(url) ?? url)': its name must contain "
                             + "\"bench\", \"test\" or \"sandbox\" (the run writes merchants, sessions and payments)")
        }
        let secondsText = args.value("seconds") ?? environment["BENCH_SECONDS"] ?? "10"
        guard let seconds = Double(secondsText), seconds > 0, seconds <= 600 else {
            throw UsageError(message: "--seconds must be in 0...600")
        }
        guard let countMax = Int(args.value("count-max") ?? "20000"), (1...1_000_000).contains(countMax) else {
            throw UsageError(message: "--count-max must be in 1...1000000")
        }
        guard let clients = Int(args.value("clients") ?? "32"), (1...512).contains(clients) else {
            throw UsageError(message: "--clients must be in 1...512")
        }
        return Options(databaseURL: url, seconds: seconds, countMax: countMax, clients: clients,
                       subscribers: !args.flag("without-subscribers"))
    }

    /// The database name of a `postgresql://` URL or of a `dbname=` keyword string.
    static func databaseName(_ url: String) -> String? {
        if let scheme = url.range(of: "://") {
            let rest = url[scheme.upperBound...]
            guard let slash = rest.firstIndex(of: "/") else { return nil }
            let name = rest[rest.index(after: slash)...].prefix { $0 != "?" && $0 != "#" }
            return name.isEmpty ? nil : String(name).removingPercentEncoding
        }
        for pair in url.split(separator: " ") where pair.hasPrefix("dbname=") {
            return String(pair.dropFirst("dbname=".count))
        }
        return nil
    }

    static func isBenchDatabaseName(_ name: String) -> Bool {
        let lower = name.lowercased()
        return ["bench", "test", "sandbox"].contains { lower.contains($0) }
    }

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["database-url", "seconds", "count-max", "clients"], flags: ["without-subscribers"])
        if args.wantsHelp { Console.out(help); return .success }
        let options = try options(args, environment: environment)
        let rig = try PaymentsBenchRig(options: options, environment: environment)
        defer { rig.stop() }
        let count = min(options.countMax, max(options.clients * 4, Int(options.seconds * 1_500)))
        let mintStart = Clock.system.now()
        let jobs = try rig.mint(count)
        Console.out(String(format: "payments: %d sessions and sandbox tokens prepared in %.1f s (not timed)",
                           jobs.count, Clock.system.now().timeIntervalSince(mintStart)))
        let result = try rig.pay(jobs, clients: options.clients, seconds: options.seconds)
        if !options.subscribers { Console.out("payments: without serve's subscribers (no finance ledger, no Wallet orders)") }
        result.report(clients: options.clients, jobs: jobs.count)
        return result.failures == 0 ? .success : .failure
    }
}

/// One prepared payment: the session's path and the request body with its token.
struct PaymentsBenchJob: Sendable {
    let path: String
    let body: [UInt8]
}

/// The in-process server, its merchant and the sandbox authority of one `tender bench payments` run.
final class PaymentsBenchRig: @unchecked Sendable {
    let pool: PostgresPool
    let server: HTTPServer
    let service: PaymentsService
    let authority: SandboxAuthority
    let merchantKey: MerchantKey
    let merchantId: String
    let apiKey: String
    let connectionsMax: Int

    init(options: PaymentsBench.Options, environment: [String: String]) throws {
        let overrides = ["TENDER_LISTEN": "127.0.0.1:0", "TENDER_DATABASE_URL": options.databaseURL, "TENDER_PROCESSOR": "simulator"]
        let configuration = try TenderConfiguration.load(environment: environment, overrides: overrides)
        var pg = PostgresConfiguration(connectionString: configuration.resolvedDatabaseURL)
        pg.preparedStatements = configuration.limits.databasePreparedStatements
        pg.connectionsMax = configuration.limits.databaseConnectionsMax
        pg.waitQueueMax = configuration.limits.databaseWaitQueueMax
        pg.acquireTimeoutMilliseconds = configuration.limits.databaseAcquireTimeoutMilliseconds
        pg.statementTimeoutMilliseconds = configuration.limits.statementTimeoutMilliseconds
        connectionsMax = pg.connectionsMax
        pool = PostgresPool(configuration: pg)
        let app = TenderApp(configuration: configuration, pool: pool,
                            migrations: try MigrationFile.load(directory: TenderCLI.migrationsDirectory(environment)),
                            logger: .silent)
        let status = try app.migrator.status()
        guard status.pending.isEmpty else {
            throw MigrationError(code: .pending, detail: "\(status.pending.count) pending; run `tender migrate` first")
        }
        let now = Clock.system.now()
        authority = try SandboxAuthority.create(validFrom: now.addingTimeInterval(-86_400))
        merchantId = "merchant.bench.payments.\(hexEncoded(SecureRandom.bytes(6)))"
        merchantKey = try authority.makeMerchantKey(merchantIdentifier: merchantId, validFrom: now.addingTimeInterval(-86_400))
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [authority.root], merchantKeys: [merchantKey], tokenAgeMaxSeconds: 3_600)
        var settings = try PaymentsSettings.load(environment: environment,
                                                 processorTimeoutMilliseconds: configuration.processorTimeoutMilliseconds)
        settings.resolverIntervalMilliseconds = 60_000  // the resolver is not started: nothing runs beside the requests
        service = PaymentsService(pool: pool, verifier: DecryptorTokenVerifier(decryptor: decryptor),
                                  processor: SimulatorProcessor(pool: pool, rules: SimulatorRules()),
                                  subscribers: options.subscribers ? [FinancePaymentSink(processor: configuration.processor.rawValue),
                                                                      WalletOrderSubscriber(configuration: configuration.wallet)] : [],
                                  settings: settings, logger: .silent, clock: { Clock.system.now() })
        var router = Router()
        service.register(into: &router, guarded: app.guarded)
        server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: router)
        try server.start()
        try app.merchants.add(try Merchant.validated(merchantId: merchantId, displayName: "Bench", domains: ["bench.test"],
                                                     countryCode: "US", currencies: ["USD", "EUR"]))
        apiKey = try app.merchants.createAPIKey(merchantId: merchantId).secret
    }

    func stop() {
        server.shutdown(drainDeadlineMilliseconds: 2_000)
        pool.close()
    }

    /// Inserts `count` open sessions of this merchant and mints a token for each (two threads).
    func mint(_ count: Int) throws -> [PaymentsBenchJob] {
        let made = Mutex<[Int: PaymentsBenchJob]>([:])
        let failure = Mutex<(any Error)?>(nil)
        let threads = 2
        benchConcurrently(threads) { t in
            var i = t
            while i < count {
                do {
                    let job = try self.prepare()
                    made.withLock { $0[i] = job }
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                    return
                }
                i += threads
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return made.withLock { jobs in (0..<count).compactMap { jobs[$0] } }
    }

    private func prepare() throws -> PaymentsBenchJob {
        let id = "cs_" + hexEncoded(SecureRandom.bytes(12))
        let secret = "cs_secret_" + hexEncoded(SecureRandom.bytes(16))
        let appData = Array("{\"checkoutSessionId\":\"\(id)\"}".utf8)
        try pool.execute("""
            INSERT INTO checkout_sessions (session_id, merchant_id, status, version, currency_code, total_minor, expires_at,
                                           client_secret_sha256, application_data, application_data_sha256)
            VALUES ($1, $2, 'open', 1, 'EUR', $3, now() + interval '1 hour', $4, $5, $6)
            """, [id, merchantId, Int64(1_099), Digest.sha256(secret), Data(appData).base64EncodedString(),
                  hexEncoded(Digest.sha256(appData))])
        let token = try authority.mintToken(
            SandboxTokenRequest(amountMinor: 1_099, currencyCodeNumeric: "978", applicationData: appData,
                                signingTime: Clock.system.now()), for: merchantKey)
        return PaymentsBenchJob(path: "/v1/checkout-sessions/\(id)/payments",
                                body: Array("{\"token\":".utf8) + token + Array("}".utf8))
    }

    /// Posts `jobs` from `clients` keep-alive connections until they are used up or `seconds` have passed.
    func pay(_ jobs: [PaymentsBenchJob], clients: Int, seconds: Double) throws -> PaymentsBenchResult {
        let next = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        let firstFailure = Mutex<String?>(nil)
        let latencies = Mutex<[Double]>([])
        let clientCPU = Mutex<Double>(0)
        let port = server.boundPort
        let key = apiKey
        let backendsBefore = PaymentsBenchCPU.backendSeconds(pool)
        let roundTripsBefore = PostgresCounters.roundTrips
        let processBefore = PaymentsBenchCPU.processSeconds()
        let started = PaymentsBenchCPU.monotonicSeconds()
        let deadline = started + seconds
        benchConcurrently(clients) { _ in
            let cpu0 = PaymentsBenchCPU.threadSeconds()
            var mine: [Double] = []
            defer {
                let used = PaymentsBenchCPU.threadSeconds() - cpu0
                latencies.withLock { $0 += mine }
                clientCPU.withLock { $0 += used }
            }
            guard let client = try? BenchHTTPClient(port: port) else {
                failures.add(1, ordering: .relaxed)
                firstFailure.withLock { $0 = $0 ?? "cannot connect to 127.0.0.1:\(port)" }
                return
            }
            let auth = "Authorization: Bearer \(key)\r\nContent-Type: application/json\r\n"
            while PaymentsBenchCPU.monotonicSeconds() < deadline {
                let i = next.add(1, ordering: .relaxed).oldValue
                guard i < jobs.count else { return }
                let head = "POST \(jobs[i].path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(auth)Idempotency-Key: bench-\(i)\r\n"
                    + "Content-Length: \(jobs[i].body.count)\r\n\r\n"
                let t0 = PaymentsBenchCPU.monotonicSeconds()
                let response = try? client.request(Array(head.utf8) + jobs[i].body)
                mine.append(PaymentsBenchCPU.monotonicSeconds() - t0)
                if response?.status != 200 {
                    failures.add(1, ordering: .relaxed)
                    let text = response.map { "HTTP \($0.status): \(String(decoding: $0.body.prefix(300), as: UTF8.self))" }
                    firstFailure.withLock { $0 = $0 ?? (text ?? "no response") }
                }
            }
        }
        let elapsed = PaymentsBenchCPU.monotonicSeconds() - started
        let processCPU = PaymentsBenchCPU.processSeconds() - processBefore
        let roundTrips = PostgresCounters.roundTrips - roundTripsBefore
        let backendsAfter = PaymentsBenchCPU.backendSeconds(pool)
        let backendCPU = backendsAfter.flatMap { after in backendsBefore.map { PaymentsBenchCPU.delta(before: $0, after: after) } }
        return PaymentsBenchResult(latencies: latencies.withLock { $0.sorted() }, elapsed: elapsed,
                                   failures: failures.load(ordering: .relaxed), firstFailure: firstFailure.withLock { $0 },
                                   roundTrips: roundTrips, serverCPU: processCPU - clientCPU.withLock { $0 },
                                   clientCPU: clientCPU.withLock { $0 }, backendCPU: backendCPU)
    }
}

/// The figures of one run.
struct PaymentsBenchResult {
    let latencies: [Double]
    let elapsed: Double
    let failures: Int
    let firstFailure: String?
    let roundTrips: Int
    /// CPU seconds of this process minus its client threads (the server: HTTP, JSON, crypto, libpq).
    let serverCPU: Double
    let clientCPU: Double
    /// CPU seconds of this database's PostgreSQL backends over the run (nil when /proc does not show them).
    let backendCPU: Double?

    func percentile(_ p: Double) -> Double {
        latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] * 1_000
    }

    func report(clients: Int, jobs: Int) {
        let n = max(1, latencies.count)
        Console.out(String(format: "payments: %d in %.2f s = %.0f payments/s, p50 %.1f ms, p99 %.1f ms, failures %d "
                           + "(%d clients, simulator 0 ms)", latencies.count, elapsed, Double(latencies.count) / elapsed,
                           percentile(0.5), percentile(0.99), failures, clients))
        let backends = backendCPU.map { String(format: "%.0f µs", $0 * 1e6 / Double(n)) } ?? "n/a"
        Console.out(String(format: "payments: round trips per payment %.2f; CPU per payment: tender %.0f µs, ",
                           Double(roundTrips) / Double(n), serverCPU * 1e6 / Double(n))
                    + "its PostgreSQL backends \(backends), the bench's clients " + String(format: "%.0f µs", clientCPU * 1e6 / Double(n)))
        if latencies.count >= jobs { Console.out("payments: all \(jobs) prepared tokens used before the time was up") }
        if let firstFailure { Console.err("payments: first failure: \(firstFailure)") }
    }
}

/// CPU clocks for the bench.
enum PaymentsBenchCPU {
    static func monotonicSeconds() -> Double { seconds(CLOCK_MONOTONIC) }
    static func threadSeconds() -> Double { seconds(CLOCK_THREAD_CPUTIME_ID) }
    static func processSeconds() -> Double { seconds(CLOCK_PROCESS_CPUTIME_ID) }

    private static func seconds(_ clock: clockid_t) -> Double {
        var t = timespec()
        clock_gettime(clock, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// User + system CPU seconds per backend pid of this database (read from /proc: same host only).
    static func backendSeconds(_ pool: PostgresPool) -> [Int64: Double]? {
        guard let rows = try? pool.query("""
            SELECT pid::bigint AS pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'
            """).rows else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var out: [Int64: Double] = [:]
        for row in rows {
            guard let pid = try? row.decode("pid", as: Int64.self),
                  let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            out[pid] = (user + system) / ticks
        }
        return out.isEmpty ? nil : out
    }

    /// CPU used between two readings (backends that appeared count from zero).
    static func delta(before: [Int64: Double], after: [Int64: Double]) -> Double {
        after.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }
    }
}

/// Runs `body` on `count` threads at once and waits for all of them.
func benchConcurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        Thread.detachNewThread {
            body(i)
            group.leave()
        }
    }
    group.wait()
}

/// A keep-alive HTTP/1.1 client on loopback for the bench: sends a prepared request, reads one response
/// (Content-Length bodies only, as Tender's API answers).
final class BenchHTTPClient {
    struct Response {
        let status: Int
        let body: [UInt8]
    }

    private let fd: Int32
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 65_536)

    init(port: Int, timeoutSeconds: Int = 30) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TenderError("bench_socket", "socket failed") }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TenderError("bench_connect", "cannot connect to the bench server")
        }
    }

    deinit { close(fd) }

    func request(_ bytes: [UInt8]) throws -> Response {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TenderError("bench_send", "send failed") }
            sent += n
        }
        return try readResponse()
    }

    private func fill() throws {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw TenderError("bench_recv", "connection closed or timed out") }
        buffer += chunk[0..<n]
    }

    private func readResponse() throws -> Response {
        var headerEnd: Int?
        var from = 0
        while headerEnd == nil {
            var i = from
            while i + 3 < buffer.count {
                if buffer[i] == 13, buffer[i + 1] == 10, buffer[i + 2] == 13, buffer[i + 3] == 10 { headerEnd = i; break }
                i += 1
            }
            if headerEnd == nil {
                from = max(0, buffer.count - 3)
                try fill()
            }
        }
        guard let end = headerEnd else { throw TenderError("bench_parse", "no header end") }
        let head = String(decoding: buffer[0..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let statusLine = lines.first?.split(separator: " ") ?? []
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw TenderError("bench_parse", head) }
        var length = 0
        for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        buffer.removeFirst(end + 4)
        while buffer.count < length { try fill() }
        let body = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return Response(status: status, body: body)
    }
}
