import FinanceStore
import Foundation
import HTTPServer
import Observability
import Postgres
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// A real server on a fresh database with its own master key file, for the finance tests.
final class FinanceTestServer: Sendable {
    let app: TenderApp
    let server: HTTPServer
    let pool: PostgresPool
    let keyDirectory: String
    var port: Int { server.boundPort }

    /// `startIngest: false` leaves the feed writer off until `startFeed()` (a database that had history
    /// before the feed existed).
    init(prefix: String, connectionsMax: Int = 12, startIngest: Bool = true) throws {
        pool = try TestEnvironment.migratedPool(prefix, connectionsMax: connectionsMax)
        keyDirectory = NSTemporaryDirectory() + "tender-finance-\(UUID().uuidString)"
        var configuration = try TenderConfiguration.load(environment: ["TENDER_LISTEN": "127.0.0.1:0"])
        configuration.limits.databaseConnectionsMax = 8
        configuration.masterKeyFile = keyDirectory + "/master.key"
        app = TenderApp(configuration: configuration, pool: pool,
                        migrations: try MigrationFile.load(directory: TestEnvironment.migrationsDirectory), logger: .silent)
        server = HTTPServer(configuration: ServeCommand.httpConfiguration(configuration), router: app.router())
        try server.start()
        if startIngest { try startFeed() }
    }

    /// Starts the feed writer and waits until it streams its slot (created on first start), so a test's
    /// commits are decoded by the slot rather than found by its creation's backfill. Creating a slot
    /// waits for every transaction then running on the cluster, other tests' too: hence the long bound.
    func startFeed() throws {
        app.finance.startIngest()
        let deadline = Date().addingTimeInterval(90)
        while !app.finance.ingest.status.streaming {
            guard Date() < deadline else {
                throw TenderError("feed_not_streaming", app.finance.ingest.status.lastError ?? "no session")
            }
            usleep(10_000)
        }
    }

    func stop() {
        server.shutdown(drainDeadlineMilliseconds: 2_000)
        app.finance.stop()
        // A test database keeps no slot behind: it would hold WAL and block dropping the database.
        app.finance.ingest.stopAndDropSlot()
        pool.close()
        try? FileManager.default.removeItem(atPath: keyDirectory)
    }

    /// Registers a merchant and returns its id and API key.
    func merchant(_ name: String = "Finance Shop") throws -> (id: String, key: String) {
        let id = "merchant.fin.\(UUID().uuidString.prefix(8).lowercased())"
        try app.merchants.add(try Merchant.validated(merchantId: id, displayName: name, domains: ["shop.test"],
                                                     countryCode: "US", currencies: ["USD"]))
        return (id, try app.merchants.createAPIKey(merchantId: id).secret)
    }

    /// Applies events in one committed transaction, as the payments code does.
    func record(_ events: [BusinessEvent], merchant: String) throws {
        try pool.transaction { conn in
            for event in events { try FinanceRecorder().apply(event, merchantId: merchant, on: conn, now: Date()) }
        }
    }

    func get(_ path: String, key: String, headers: [(String, String)] = []) throws -> RawResponse {
        try RawHTTPClient(port: port).request("GET", path, headers: [("Authorization", "Bearer \(key)")] + headers)
    }

    /// The settlement account id of `merchant` for processor and currency (FinanceKit id).
    static func settlementAccountID(merchant: String, processor: String = "sim", currency: String = "USD") -> FinanceID {
        FinanceStoreIdentity.identity(merchant).id("account", LedgerAccounts.settlement(processor, currency).key)
    }
}

/// Event helpers.
enum Events {
    static let t0: Int64 = 1_767_225_600  // 2026-01-01T00:00:00Z

    static func money(_ minor: Int64, _ currency: String = "USD", processor: String = "sim") -> EventMoney {
        EventMoney(amountMinor: minor, currencyCode: currency, processor: processor)
    }

    static func at(_ offset: Int64) -> FinanceTimestamp { FinanceTimestamp(secondsSinceEpoch: t0 + offset) }

    static func paid(_ id: String, _ minor: Int64, processor: String = "sim", offset: Int64 = 0) -> BusinessEvent {
        .paymentSucceeded(paymentID: id, money: money(minor, processor: processor), at: at(offset))
    }
}

/// One decoded history page.
struct DecodedPage<T: Decodable>: Decodable {
    let inserted: [T]
    let updated: [T]
    let deleted: [String]
    let newToken: String
    let hasMore: Bool
}

func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8]) throws -> T {
    try JSONDecoder().decode(T.self, from: Data(body))
}

/// The list bodies of the query endpoints.
struct TransactionList: Decodable { let transactions: [Transaction] }
struct AccountList: Decodable { let accounts: [Account] }
struct BalanceList: Decodable { let accountBalances: [AccountBalance] }

/// A Server-Sent Events client over a raw socket: sends the request, de-chunks the body and parses events.
final class SSETestClient {
    struct Event {
        var id: String?
        var event: String?
        var data: String
    }

    private let fd: Int32
    private var raw: [UInt8] = []
    private var body: [UInt8] = []
    private var headersDone = false
    private(set) var status = 0

    init(port: Int, path: String, key: String, lastEventID: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TenderError("test_connect", "connect failed") }
        var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer \(key)\r\n"
        if let lastEventID { head += "Last-Event-ID: \(lastEventID)\r\n" }
        head += "\r\n"
        let bytes = Array(head.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }

    /// Comments seen so far (heartbeats).
    private(set) var comments: [String] = []

    /// The next event, or nil when none arrives before the deadline.
    func next(timeoutSeconds: Double = 5) -> Event? {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while true {
            if let event = takeEvent() { return event }
            if Date() > deadline { return nil }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { raw += chunk[0..<n]; dechunk() } else if n == 0 { return takeEvent() }
        }
    }

    private func dechunk() {
        if !headersDone {
            guard let end = find([13, 10, 13, 10], in: raw) else { return }
            let head = String(decoding: raw[0..<end], as: UTF8.self)
            status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            raw.removeFirst(end + 4)
            headersDone = true
        }
        while let lineEnd = find([13, 10], in: raw) {
            let sizeText = String(decoding: raw[0..<lineEnd], as: UTF8.self)
            guard let size = Int(sizeText, radix: 16), raw.count >= lineEnd + 2 + size + 2 else { return }
            body += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
            raw.removeFirst(lineEnd + 2 + size + 2)
        }
    }

    private func takeEvent() -> Event? {
        while let end = find([10, 10], in: body) {
            let block = String(decoding: body[0..<end], as: UTF8.self)
            body.removeFirst(end + 2)
            var event = Event(data: "")
            var dataLines: [String] = []
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix(": ") { comments.append(String(line.dropFirst(2))); continue }
                if line.hasPrefix("id: ") { event.id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.event = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { dataLines.append(String(line.dropFirst(6))) }
            }
            if dataLines.isEmpty && event.id == nil { continue }
            event.data = dataLines.joined(separator: "\n")
            return event
        }
        return nil
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) {
            return i
        }
        return nil
    }
}
