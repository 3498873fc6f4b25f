internal import CLibPQ
import Foundation
import Glibc

/// libpq keyword/value pairs derived once from a configuration.
struct ConnectSettings: Sendable {
    let keywords: [String]
    let values: [String]
    /// Statements a connection keeps prepared; 0 runs every statement unnamed (`PQexecParams`).
    var preparedStatementsMax = 0

    /// How long sent data may stay unacknowledged before the kernel ends the connection.
    static let tcpUserTimeoutMilliseconds = 10_000

    /// Parses the connection string with libpq and layers Tender's settings on top. libpq's parse
    /// message is dropped because it can quote the connection string, which may hold a password.
    /// `replication: true` opens a logical replication session (`replication=database`, a walsender
    /// that also runs SQL) without a statement timeout, which would end a stream that is idle by design.
    static func make(_ configuration: PostgresConfiguration, replication: Bool = false) -> Result<ConnectSettings, PostgresError> {
        guard !configuration.connectionString.utf8.contains(0) else {
            return .failure(PostgresError(code: .connectionFailed, message: "connection string contains a NUL byte"))
        }
        var parseError: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(configuration.connectionString, &parseError) else {
            if let parseError { PQfreemem(parseError) }
            return .failure(PostgresError(code: .connectionFailed, message: "connection string could not be parsed"))
        }
        defer { PQconninfoFree(options) }
        var present: [String: String] = [:]
        var index = 0
        while let keyword = options[index].keyword {
            if let value = options[index].val { present[String(cString: keyword)] = String(cString: value) }
            index += 1
        }
        // expand_dbname=1: the first `dbname` is expanded as the whole connection string; the pairs
        // after it override what it set.
        var keywords = ["dbname"]
        var values = [configuration.connectionString]
        func add(_ keyword: String, _ value: String) {
            keywords.append(keyword)
            values.append(value)
        }
        add("connect_timeout", String(configuration.connectTimeoutSeconds))
        add("application_name", configuration.applicationName)
        add("client_encoding", "UTF8")
        // Session defaults at startup, so no SET is needed after connecting (pgbouncer-safe).
        var startupOptions = present["options"].map { [$0] } ?? []
        startupOptions.append("-c statement_timeout=\(replication ? 0 : configuration.statementTimeoutMilliseconds)")
        if replication { add("replication", "database") }
        add("options", startupOptions.joined(separator: " "))
        // TCP keepalives bound how long a query blocks on a silently dead peer, unless the
        // connection string chose its own.
        if present["keepalives"] == nil {
            add("keepalives", "1")
            add("keepalives_idle", "10")
            add("keepalives_interval", "5")
            add("keepalives_count", "3")
        }
        // Keepalives watch idle connections only: a query sent to a peer that stops acknowledging (a
        // network partition, a host gone without a reset) would block in TCP retransmission for the
        // kernel's limit (about 15 minutes), and after the network heals wait for the next, backed-off
        // retransmission. tcp_user_timeout ends such a connection after 10 s without an acknowledgement,
        // unless the connection string chose its own.
        if present["tcp_user_timeout"] == nil {
            add("tcp_user_timeout", String(Self.tcpUserTimeoutMilliseconds))
        }
        let prepared = configuration.preparedStatements && !replication ? configuration.preparedStatementsMax : 0
        return .success(ConnectSettings(keywords: keywords, values: values, preparedStatementsMax: prepared))
    }

    /// Opens a blocking connection; the caller owns the returned handle.
    func connect() -> Result<OpaquePointer, PostgresError> {
        let keywordCopies = keywords.map { strdup($0) }
        let valueCopies = values.map { strdup($0) }
        defer {
            keywordCopies.forEach { free($0) }
            valueCopies.forEach { free($0) }
        }
        let keywordPointers: [UnsafePointer<CChar>?] = keywordCopies.map { $0.map { UnsafePointer($0) } } + [nil]
        let valuePointers: [UnsafePointer<CChar>?] = valueCopies.map { $0.map { UnsafePointer($0) } } + [nil]
        guard let handle = PQconnectdbParams(keywordPointers, valuePointers, 1) else {
            return .failure(PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection"))
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = libpqMessage(handle)
            PQfinish(handle)
            return .failure(PostgresError(code: .connectionFailed, message: message))
        }
        tender_pq_silence_notices(handle)
        return .success(handle)
    }
}

/// libpq's connection-level message (host, port, reason), trimmed; it carries no statement data.
func libpqMessage(_ handle: OpaquePointer) -> String {
    guard let raw = PQerrorMessage(handle) else { return "unknown libpq error" }
    let text = String(cString: raw).trimmingCharacters(in: .whitespacesAndNewlines)
    return text.isEmpty ? "unknown libpq error" : text.replacingOccurrences(of: "\n", with: " ")
}
