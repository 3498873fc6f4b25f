import Foundation
import Postgres
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// Shared helpers for the integration tests: a real PostgreSQL from `make test`, fresh databases,
/// a raw-socket HTTP client and the built `tender` binary.
enum TestEnvironment {
    /// `TENDER_TEST_DATABASE_URL`, set by `make test`.
    static var databaseURL: String? {
        let v = ProcessInfo.processInfo.environment["TENDER_TEST_DATABASE_URL"]
        return v?.isEmpty == false ? v : nil
    }

    static var hasDatabase: Bool { databaseURL != nil }

    /// The checkout root (Tests/TenderServerTests/Support.swift → ../../..).
    static let packageRoot: String = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static var migrationsDirectory: String { packageRoot + "/migrations" }

    /// The `tender` binary built next to the test bundle.
    static var tenderBinary: String {
        let bundle = Bundle.main.bundleURL
        let candidates = [bundle.appendingPathComponent("tender").path,
                          bundle.deletingLastPathComponent().appendingPathComponent("tender").path,
                          packageRoot + "/.build/debug/tender"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[2]
    }

    /// URL of database `name` on the same server as the test database.
    static func url(database name: String) -> String {
        guard let base = databaseURL, let slash = base.lastIndex(of: "/") else { return "" }
        let rest = base[base.index(after: slash)...]
        let query = rest.firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
        return String(base[...slash]) + name + query
    }

    /// Creates an empty database with a unique name and returns its URL.
    static func freshDatabase(_ prefix: String) throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = PostgresPool(configuration: PostgresConfiguration(connectionString: databaseURL ?? ""))
        defer { admin.close() }
        try admin.withConnection { conn in
            try conn.simpleQuery(SQL(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        return url(database: name)
    }

    /// A pool on a fresh, fully migrated database.
    static func migratedPool(_ prefix: String, connectionsMax: Int = 8) throws -> PostgresPool {
        var config = PostgresConfiguration(connectionString: try freshDatabase(prefix))
        config.connectionsMax = connectionsMax
        // TENDER_DB_PREPARED_STATEMENTS=off runs the suite's pools with unnamed statements (as behind pgbouncer).
        config.preparedStatements = ProcessInfo.processInfo.environment["TENDER_DB_PREPARED_STATEMENTS"] != "off"
        let pool = PostgresPool(configuration: config)
        try Migrator(pool: pool, files: try MigrationFile.load(directory: migrationsDirectory)).migrate()
        return pool
    }
}

extension PostgresPool {
    /// Drops this database's finance feed slots once their walsenders have gone (a `tender serve` the
    /// test ran, or an in-process feed writer already stopped): a test database keeps no slot behind,
    /// which would hold WAL and block dropping the database. `scripts/pg.sh prune` catches the rest.
    func dropFeedSlots() {
        for _ in 0..<50 {
            _ = try? query("""
                SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                 WHERE database = current_database() AND NOT active
                """)
            let remaining = (try? query("SELECT 1 FROM pg_replication_slots WHERE database = current_database()").rows.count) ?? 0
            if remaining == 0 { return }
            usleep(100_000)
        }
    }
}

/// The result of running the `tender` binary.
struct ProcessResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs `tender` with arguments and extra environment, waiting for it to exit.
func runTender(_ arguments: [String], environment extra: [String: String]) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: TestEnvironment.tenderBinary)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    // Each run gets its own data directory (master key, sandbox files) unless the test names one,
    // so tests never write into the checkout's .tender/ that `make run` uses.
    env["TENDER_DATA_DIR"] = FileManager.default.temporaryDirectory
        .appendingPathComponent("tender-cli-\(UUID().uuidString)").path
    for (k, v) in extra { env[k] = v }
    process.environment = env
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self))
}

/// A parsed HTTP/1.1 response.
struct RawResponse {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    func json() throws -> [String: Any] {
        guard let obj = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw TenderError("test_not_object", text)
        }
        return obj
    }
}

/// A blocking HTTP/1.1 client over one TCP connection (Content-Length bodies only), with timeouts.
final class RawHTTPClient {
    private let fd: Int32

    init(port: Int, timeoutSeconds: Int = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TenderError("test_socket", "socket failed") }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TenderError("test_connect", "connect failed")
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TenderError("test_send", "send failed") }
            sent += n
        }
    }

    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws -> RawResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try send(Array(head.utf8) + body)
        return try readResponse()
    }

    private var buffer: [UInt8] = []

    func readResponse() throws -> RawResponse {
        func fill() throws {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw TenderError("test_recv", "connection closed or timed out") }
            buffer += chunk[0..<n]
        }
        let separator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while headerEnd == nil {
            if buffer.count >= 4 {
                for i in 0...(buffer.count - 4) where Array(buffer[i..<i + 4]) == separator {
                    headerEnd = i
                    break
                }
            }
            if headerEnd == nil { try fill() }
        }
        guard let end = headerEnd else { throw TenderError("test_parse", "no header end") }
        let headText = String(decoding: buffer[0..<end], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw TenderError("test_parse", headText) }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        buffer.removeFirst(end + 4)
        let length = Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
        while buffer.count < length { try fill() }
        let body = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return RawResponse(status: status, headers: headers, body: body)
    }
}
