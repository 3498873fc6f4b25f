internal import CLibPQ
import Time
import Foundation
import Glibc

/// A write-ahead-log position (`pg_lsn`), e.g. `16/B374D848`.
public struct LogSequenceNumber: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The 64-bit position.
    public let value: UInt64

    /// Before every record: START_REPLICATION from here resumes at the slot's confirmed position.
    public static let zero = LogSequenceNumber(0)

    /// Creates a position from its 64-bit value.
    public init(_ value: UInt64) { self.value = value }

    /// Parses PostgreSQL's `X/Y` text form (hex halves); nil for anything else.
    public init?(parsing text: String) {
        let halves = text.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, (1...8).contains(halves[0].count), (1...8).contains(halves[1].count),
              let high = UInt64(halves[0], radix: 16), let low = UInt64(halves[1], radix: 16) else { return nil }
        value = high << 32 | low
    }

    /// `X/Y`, as PostgreSQL prints and parses it.
    public var description: String {
        String(value >> 32, radix: 16, uppercase: true) + "/" + String(value & 0xFFFF_FFFF, radix: 16, uppercase: true)
    }

    /// Log order.
    public static func < (lhs: LogSequenceNumber, rhs: LogSequenceNumber) -> Bool { lhs.value < rhs.value }
}

/// One message of a logical replication stream (the CopyBoth sub-protocol of START_REPLICATION).
public enum ReplicationMessage: Sendable {
    /// `w` XLogData: output-plugin bytes for the WAL range starting at `start`; `serverEnd` is the
    /// server's current end of WAL.
    case data(start: LogSequenceNumber, serverEnd: LogSequenceNumber, bytes: [UInt8])
    /// `k` primary keepalive; `replyRequested` asks for a status update at once (wal_sender_timeout).
    case keepalive(serverEnd: LogSequenceNumber, replyRequested: Bool)
}

/// A logical replication session (`replication=database`): creates slots and streams one.
///
/// Not Sendable: one thread owns it. The stream is read without blocking the thread for longer than
/// the timeout given to `next`, so the owner can stop it between calls.
public final class PostgresReplicationConnection {
    private let handle: OpaquePointer
    private var streaming = false

    /// Longest slot name PostgreSQL keeps (NAMEDATALEN - 1).
    public static let slotNameBytesMax = 63

    private init(handle: OpaquePointer) { self.handle = handle }

    deinit { PQfinish(handle) }

    /// Opens a replication session to the database of `configuration`.
    public static func open(_ configuration: PostgresConfiguration) throws(PostgresError) -> PostgresReplicationConnection {
        configuration.validate()
        switch ConnectSettings.make(configuration, replication: true) {
        case .failure(let error): throw error
        case .success(let settings):
            switch settings.connect() {
            case .success(let handle): return PostgresReplicationConnection(handle: handle)
            case .failure(let error): throw error
            }
        }
    }

    /// True for a name PostgreSQL accepts as a slot name: 1...63 of `[a-z0-9_]`.
    public static func isValidSlotName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= slotNameBytesMax
            && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }

    /// `CREATE_REPLICATION_SLOT … LOGICAL plugin (SNAPSHOT 'export')`: the slot's consistent point and
    /// the name of a snapshot that sees exactly the transactions committed before it. The snapshot
    /// stays importable (`SET TRANSACTION SNAPSHOT`) until this session runs its next command.
    public func createLogicalSlot(name: String, plugin: String) throws(PostgresError)
        -> (consistentPoint: LogSequenceNumber, snapshotName: String) {
        precondition(Self.isValidSlotName(name) && Self.isValidSlotName(plugin), "slot and plugin names are [a-z0-9_]{1,63}")
        let rows = try command(unsafeText: "CREATE_REPLICATION_SLOT \(name) LOGICAL \(plugin) (SNAPSHOT 'export')")
        guard let row = rows.first, row.count >= 3, let point = row[1].flatMap(LogSequenceNumber.init(parsing:)),
              let snapshot = row[2] else {
            throw PostgresError(code: .queryFailed, message: "CREATE_REPLICATION_SLOT returned no consistent point")
        }
        return (point, snapshot)
    }

    /// `START_REPLICATION SLOT name LOGICAL lsn (options)`: the server sends every transaction that
    /// commits after `lsn` (or after the slot's confirmed position, whichever is later), in commit order.
    /// Option names and values are static configuration (identifiers and quoted literals).
    public func startLogical(slot: String, from lsn: LogSequenceNumber, options: [(String, String)]) throws(PostgresError) {
        precondition(Self.isValidSlotName(slot), "slot names are [a-z0-9_]{1,63}")
        precondition(options.allSatisfy { Self.isValidSlotName($0.0) && !$0.1.contains("'") && !$0.1.utf8.contains(0) },
                     "replication options are identifiers with quote-free values")
        let list = options.map { "\($0.0) '\($0.1)'" }.joined(separator: ", ")
        let text = "START_REPLICATION SLOT \(slot) LOGICAL \(lsn)" + (list.isEmpty ? "" : " (\(list))")
        guard let result = PQexec(handle, text) else {
            throw PostgresError(code: .connectionFailed, message: "no result: " + libpqMessage(handle))
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COPY_BOTH else {
            throw PostgresConnection.serverError(result, handle: handle)
        }
        guard PQsetnonblocking(handle, 1) == 0 else {
            throw PostgresError(code: .connectionFailed, message: "cannot make the stream non-blocking")
        }
        streaming = true
    }

    /// The next stream message, or nil when none arrived within the timeout.
    /// Throws `connection_failed` when the stream ended (the server closed it or the session broke).
    public func next(timeoutMilliseconds: Int) throws(PostgresError) -> ReplicationMessage? {
        precondition(streaming, "startLogical first")
        let deadline = monotonicNanoseconds() + UInt64(max(0, timeoutMilliseconds)) * 1_000_000
        var consumedSinceEmpty = false
        while true {
            var buffer: UnsafeMutablePointer<CChar>? = nil
            let count = PQgetCopyData(handle, &buffer, 1)
            if count > 0, let buffer {
                defer { PQfreemem(buffer) }
                consumedSinceEmpty = false
                let bytes = UnsafeRawBufferPointer(start: buffer, count: Int(count))
                if let message = Self.parse(bytes) { return message }
                continue
            }
            if count == -1 {
                // The server ended COPY; its final result says why.
                var reason = "replication stream ended"
                while let result = PQgetResult(handle) {
                    if PQresultStatus(result) == PGRES_FATAL_ERROR {
                        reason = PostgresConnection.serverError(result, handle: handle).message
                    }
                    PQclear(result)
                }
                streaming = false
                throw PostgresError(code: .connectionFailed, message: reason)
            }
            if count < -1 {
                streaming = false
                throw PostgresError(code: .connectionFailed, message: "replication stream failed: " + libpqMessage(handle))
            }
            // Bytes may sit in the socket that libpq has not read yet: read them before giving up.
            if !consumedSinceEmpty {
                consumedSinceEmpty = true
                guard PQconsumeInput(handle) != 0 else {
                    streaming = false
                    throw PostgresError(code: .connectionFailed, message: "replication stream lost: " + libpqMessage(handle))
                }
                continue
            }
            consumedSinceEmpty = false
            let now = monotonicNanoseconds()
            guard now < deadline else { return nil }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min((deadline - now) / 1_000_000 + 1, 60_000)))
            if ready < 0 && errno != EINTR {
                throw PostgresError(code: .connectionFailed, message: "poll failed on the replication stream")
            }
            if ready > 0 && PQconsumeInput(handle) == 0 {
                streaming = false
                throw PostgresError(code: .connectionFailed, message: "replication stream lost: " + libpqMessage(handle))
            }
        }
    }

    /// A standby status update: everything up to `flushed` is durable on our side, so the server may
    /// advance the slot's confirmed position (and recycle WAL) up to it.
    public func sendStatus(flushed: LogSequenceNumber, replyRequested: Bool = false) throws(PostgresError) {
        precondition(streaming, "startLogical first")
        var message: [UInt8] = [UInt8(ascii: "r")]
        for value in [flushed.value, flushed.value, flushed.value, Self.postgresEpochMicroseconds()] {
            for shift in stride(from: 56, through: 0, by: -8) { message.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
        }
        message.append(replyRequested ? 1 : 0)
        let sent = message.withUnsafeBufferPointer { pointer in
            pointer.withMemoryRebound(to: CChar.self) { PQputCopyData(handle, $0.baseAddress, Int32($0.count)) }
        }
        guard sent == 1 else {
            throw PostgresError(code: .connectionFailed, message: "status update not sent: " + libpqMessage(handle))
        }
        // Non-blocking: flush until libpq's buffer is empty (a status message is a few dozen bytes).
        var flushes = 0
        while PQflush(handle) == 1 {
            flushes += 1
            guard flushes < 1_000 else {
                throw PostgresError(code: .connectionFailed, message: "status update stuck in the send buffer")
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLOUT), revents: 0)
            _ = poll(&descriptor, 1, 10)
        }
    }

    /// Runs one replication command or SQL statement (not while streaming) and returns its rows as text.
    /// Nothing is bound: the text must be static or built from validated identifiers only.
    @discardableResult
    public func command(unsafeText text: String) throws(PostgresError) -> [[String?]] {
        precondition(!streaming, "no commands while streaming")
        guard let result = PQexec(handle, text) else {
            throw PostgresError(code: .connectionFailed, message: "no result: " + libpqMessage(handle))
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            var rows: [[String?]] = []
            for row in 0..<PQntuples(result) {
                rows.append((0..<PQnfields(result)).map { column in
                    PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                })
            }
            return rows
        default:
            throw PostgresConnection.serverError(result, handle: handle)
        }
    }

    /// Microseconds since 2000-01-01 UTC, the protocol's clock.
    private static func postgresEpochMicroseconds() -> UInt64 {
        UInt64(max(0, Clock.system.unixMicroseconds() - 946_684_800_000_000))
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) -> ReplicationMessage? {
        func u64(_ offset: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<(offset + 8) { value = value << 8 | UInt64(bytes[index]) }
            return value
        }
        guard let kind = bytes.first else { return nil }
        switch kind {
        case UInt8(ascii: "w") where bytes.count >= 25:
            return .data(start: LogSequenceNumber(u64(1)), serverEnd: LogSequenceNumber(u64(9)),
                         bytes: Array(bytes[25...]))
        case UInt8(ascii: "k") where bytes.count >= 18:
            return .keepalive(serverEnd: LogSequenceNumber(u64(1)), replyRequested: bytes[17] != 0)
        default:
            return nil
        }
    }
}
