import Crypto
import FinanceStore
import Foundation
import Observability
import Postgres
import Synchronization
import Time

/// The feed writer (docs/finance-feed.md): reads `finance_change` inserts from this database's logical
/// replication slot (pgoutput, publication `tender_finance_feed`) in commit order, numbers them in
/// `finance_feed`, and only then confirms the slot's position. History pages read positions, so no
/// merchant's feed waits for anybody else's open transaction.
///
/// Exactly once: positions and `finance_feed_cursor.applied_lsn` commit together, the slot is confirmed
/// only up to what is durable, a restart resumes from the slot, and a replayed transaction is skipped
/// by its LSN or, inside a chunked large transaction, by `finance_feed.change_seq` being unique.
/// Every Tender process runs one; PostgreSQL lets one at a time stream the slot, the others retry.
public final class FinanceFeedIngest: Sendable {
    /// Bounds and cadences.
    public struct Settings: Sendable {
        /// The slot's name; nil derives `tender_feed_<database>` (slots are cluster-wide, one per database).
        public var slotName: String?
        /// Where the replication session connects (pgbouncer does not pass replication connections);
        /// nil uses the pool's connection string. It must name the same database.
        public var replicationConnectionString: String?
        /// Most change rows per feed write (a larger source transaction is fed in several writes).
        public var chunkRowsMax = 5_000
        /// `logical_decoding_work_mem` of the slot's session, in kB: a transaction larger than this is
        /// streamed to the writer while it runs, so its commit does not make the server replay it all
        /// (and hold every later commit back meanwhile). PostgreSQL's default is 64 MB.
        public var decodingWorkMemoryKilobytes = 4_096
        /// Status updates to the server at least this often (well under wal_sender_timeout).
        public var statusIntervalMilliseconds = 1_000
        /// Pause after a failed or refused session (slot busy, database down) before the next attempt.
        public var retryIntervalMilliseconds = 1_000
        /// `/readyz` fails when the feed is this many seconds behind a commit, or has not streamed for as long.
        public var lagSecondsMax = 30
        /// `/readyz` fails when the slot holds more WAL than this behind the server's end of WAL.
        public var lagBytesMax: Int64 = 1 << 30
        /// The documented defaults.
        public init() {}
    }

    /// The publication migrations/0010 creates.
    public static let publication = "tender_finance_feed"
    /// The output plugin (built into PostgreSQL).
    public static let plugin = "pgoutput"

    /// What the writer is doing, for `/readyz` and metrics.
    public struct Status: Sendable {
        /// Holding the slot and streaming it.
        public var streaming = false
        /// End of the last source transaction fed durably.
        public var appliedLSN = LogSequenceNumber.zero
        /// Change rows given a position by this process.
        public var rowsFed: Int64 = 0
        /// Why the last session ended (stable text, no values), nil while streaming.
        public var lastError: String?
        /// Commit time (µs since 1970) of the oldest transaction received but not yet durable; 0 when none.
        public var oldestPendingCommitMicroseconds: Int64 = 0
        /// Monotonic time of the last moment this process was streaming (0: never).
        public var lastStreamingNanoseconds: UInt64 = 0
        /// Monotonic time of the last health read that found some process streaming the slot (0: never).
        /// A node that does not stream counts the feed as behind from here, not from its own start, so
        /// the death of the streaming node does not make every other node unready at once.
        public var lastSeenActiveNanoseconds: UInt64 = 0
    }

    private struct State {
        var running = false
        var started = false
        var status = Status()
    }

    private let pool: PostgresPool
    private let logger: Logger
    /// The settings this writer runs with.
    public let settings: Settings
    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)
    private let resolvedSlot = Mutex<String?>(nil)
    /// Monotonic creation time: the feed counts as behind from here until some process streams.
    let createdNanoseconds = DispatchTime.now().uptimeNanoseconds

    private let clock: Clock

    /// Creates a writer; nothing runs until `start()`.
    public init(pool: PostgresPool, logger: Logger, settings: Settings = Settings(), clock: Clock = .system) {
        self.clock = clock
        if let name = settings.slotName {
            precondition(PostgresReplicationConnection.isValidSlotName(name), "slot names are [a-z0-9_]{1,63}")
        }
        precondition(settings.chunkRowsMax >= 1, "a feed write holds at least one row")
        precondition(settings.decodingWorkMemoryKilobytes >= 64, "logical_decoding_work_mem is at least 64 kB")
        self.pool = pool
        self.logger = logger
        self.settings = settings
    }

    /// A snapshot of the writer's status.
    public var status: Status { state.withLock { $0.status } }

    /// Starts the writer thread once; later calls do nothing.
    public func start() {
        let shouldStart = state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            state.running = true
            return true
        }
        guard shouldStart else { return }
        let thread = Thread { [self] in
            self.run()
            self.finished.signal()
        }
        thread.name = "tender-finance-ingest"
        thread.start()
    }

    /// Stops the thread (the slot keeps its position; the next start resumes from it), waiting for it up
    /// to `waitMilliseconds`; false when it had not finished by then.
    @discardableResult
    public func stop(waitMilliseconds: Int = 10_000) -> Bool {
        let wasRunning = state.withLock { state -> Bool in
            let was = state.running
            state.running = false
            return was
        }
        guard wasRunning else { return true }
        return finished.wait(timeout: .now() + .milliseconds(waitMilliseconds)) == .success
    }

    /// Stops the writer and drops its slot (a database that is going away; tests). Retries while the
    /// walsender of the closed stream is still exiting.
    public func stopAndDropSlot() {
        stop()
        guard let slot = try? slotName() else { return }
        for _ in 0..<50 {
            let dropped = try? pool.query("""
                SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                 WHERE slot_name = $1 AND NOT active
                """, [slot])
            let remaining = try? pool.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", [slot]).rows.count
            if dropped != nil && remaining == 0 { return }
            usleep(100_000)
        }
    }

    /// This database's slot name: the setting, or `tender_feed_` + the database name ([a-z0-9_],
    /// shortened with a hash when too long).
    public func slotName() throws -> String {
        if let name = settings.slotName { return name }
        if let name = resolvedSlot.withLock({ $0 }) { return name }
        let database = try pool.query(SQL(idempotent: "SELECT current_database() AS name")).first?.decode("name", as: String.self) ?? ""
        let name = Self.slotName(forDatabase: database)
        resolvedSlot.withLock { $0 = name }
        return name
    }

    /// `tender_feed_<database>`, valid as a slot name whatever the database is called.
    static func slotName(forDatabase database: String) -> String {
        let cleaned = String(decoding: database.lowercased().utf8.map { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F ? byte : 0x5F
        }, as: UTF8.self)
        let prefix = "tender_feed_"
        if prefix.utf8.count + cleaned.utf8.count <= PostgresReplicationConnection.slotNameBytesMax, cleaned == database {
            return prefix + cleaned
        }
        let hash = Digest.sha256(Array(database.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        return prefix + String(cleaned.prefix(PostgresReplicationConnection.slotNameBytesMax - prefix.count - 17)) + "_" + hash
    }

    // MARK: The writer thread

    private var running: Bool { state.withLock { $0.running } }

    private func run() {
        var lastReason = ""
        while running {
            var pause = settings.retryIntervalMilliseconds
            do {
                var replication = pool.configuration
                if let url = settings.replicationConnectionString { replication.connectionString = url }
                let connection = try PostgresReplicationConnection.open(replication)
                try session(connection)
            } catch {
                let reason = Self.reason(error)
                state.withLock {
                    $0.status.streaming = false
                    $0.status.lastError = reason
                    $0.status.oldestPendingCommitMicroseconds = 0
                }
                if reason != lastReason {
                    // "slot in use" is the normal state of every process but one.
                    if reason == "slot_in_use" {
                        logger.info("finance feed slot is streamed by another process", [("reason", reason)])
                    } else {
                        logger.warning("finance feed session ended", [("reason", reason)])
                    }
                    lastReason = reason
                }
                // A standby process asks less often: each attempt is a walsender started and refused.
                if reason == "slot_in_use" { pause *= 5 }
            }
            var waited = 0
            while running && waited < pause {
                usleep(50_000)
                waited += 50
            }
        }
        state.withLock { $0.status.streaming = false }
    }

    /// A stable, value-free reason for logs and `/readyz`.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? PostgresError else { return String(describing: type(of: error)) }
        switch error.sqlState {
        case "55006": return "slot_in_use"
        case "55000": return "logical_decoding_unavailable"
        case "42501": return "replication_permission_denied"
        case "42710": return "slot_created_concurrently"
        case "53400": return "replication_slots_exhausted"
        default: return error.code.rawValue + (error.sqlState.map { ":" + $0 } ?? "")
        }
    }

    /// Creates the slot when it is missing (or lost) with a backfill under its exported snapshot, then
    /// streams it until stopped or the session fails.
    private func session(_ connection: PostgresReplicationConnection) throws {
        let slot = try slotName()
        try ensureSlot(slot, on: connection)
        guard let cursor = try pool.query(SQL(idempotent: "SELECT applied_lsn::text AS lsn FROM finance_feed_cursor")).first,
              let applied = LogSequenceNumber(parsing: try cursor.decode("lsn")) else {
            throw TenderError("finance_feed_cursor_missing", "finance_feed_cursor has no row (run migrations)")
        }
        try connection.command(unsafeText: "SET logical_decoding_work_mem = '\(settings.decodingWorkMemoryKilobytes)kB'")
        try connection.startLogical(slot: slot, from: applied, options: [
            ("proto_version", "2"), ("publication_names", Self.publication), ("streaming", "on"),
        ])
        state.withLock {
            $0.status.streaming = true
            $0.status.lastError = nil
            $0.status.appliedLSN = applied
            $0.status.lastStreamingNanoseconds = DispatchTime.now().uptimeNanoseconds
        }
        logger.info("finance feed streaming", [("slot", slot), ("from", applied.description)])
        var stream = StreamState(applied: applied)
        var lastStatus = DispatchTime.now().uptimeNanoseconds
        let statusInterval = UInt64(settings.statusIntervalMilliseconds) * 1_000_000
        while running {
            // Wait only when nothing is waiting to be written: a burst is drained, then written at once.
            let message = try connection.next(timeoutMilliseconds: stream.hasReadyWork ? 0 : 100)
            switch message {
            case nil:
                if stream.hasReadyWork { try flush(&stream, connection) }
            case .keepalive(let serverEnd, let replyRequested):
                // Between transactions with everything durable, WAL up to the server's end holds
                // nothing more for us: confirm it, so the slot does not hold WAL other work wrote.
                if stream.open == nil && stream.streamed.isEmpty && !stream.hasReadyWork {
                    stream.confirmed = max(stream.confirmed, serverEnd)
                }
                if replyRequested { try connection.sendStatus(flushed: stream.confirmed) }
            case .data(_, _, let bytes):
                try handle(try PgOutputMessage.parse(bytes, inStream: stream.inStreamBlock), &stream, connection)
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if now - lastStatus >= statusInterval {
                try connection.sendStatus(flushed: stream.confirmed)
                lastStatus = now
            }
            state.withLock { $0.status.lastStreamingNanoseconds = now }
        }
    }

    /// One source transaction being received.
    struct OpenTransaction {
        let finalLSN: LogSequenceNumber
        let commitMicroseconds: Int64
        /// Already fed before (its commit is before the cursor): received and dropped.
        let skip: Bool
        var rows: [FeedRow] = []
    }

    /// The stream's progress inside one session.
    struct StreamState {
        /// End of the last source transaction durable in the feed.
        var applied: LogSequenceNumber
        /// What the server is told is durable (applied, or a keepalive's end when idle).
        var confirmed: LogSequenceNumber
        /// Column positions of `finance_change` by relation id (pgoutput's `R` message).
        var relations: [UInt32: FeedRow.Columns] = [:]
        var open: OpenTransaction?
        /// Rows of streamed, still running transactions by top-level xid, each tagged with the
        /// (sub)transaction that wrote it, so a rolled-back subtransaction's rows can be dropped.
        var streamed: [UInt32: [(xid: UInt32, row: FeedRow)]] = [:]
        /// Between `streamStart` and `streamStop`, and the block's top-level xid.
        var streamBlockXid: UInt32?
        var inStreamBlock: Bool { streamBlockXid != nil }
        /// Rows of committed source transactions, not yet written.
        var ready: [FeedRow] = []
        /// End LSN of the last committed source transaction in `ready`.
        var readyThrough: LogSequenceNumber?

        init(applied: LogSequenceNumber) {
            self.applied = applied
            self.confirmed = applied
        }

        var hasReadyWork: Bool { readyThrough != nil || !ready.isEmpty }
    }

    private func handle(_ message: PgOutputMessage, _ stream: inout StreamState,
                        _ connection: PostgresReplicationConnection) throws {
        switch message {
        case .relation(let id, _, let name, let columns):
            if name == "finance_change" { stream.relations[id] = try FeedRow.Columns(columns) }
        case .begin(let finalLSN, let commitMicroseconds, _):
            // The server resumes at the confirmed position, which may trail the cursor after a crash.
            stream.open = OpenTransaction(finalLSN: finalLSN, commitMicroseconds: commitMicroseconds,
                                          skip: finalLSN < stream.applied)
            if !(stream.open?.skip ?? true) {
                state.withLock { state in
                    if state.status.oldestPendingCommitMicroseconds == 0 {
                        state.status.oldestPendingCommitMicroseconds = commitMicroseconds + PgOutputMessage.postgresEpochOffsetMicroseconds
                    }
                }
            }
        case .streamStart(let xid, _):
            stream.streamBlockXid = xid
        case .streamStop:
            stream.streamBlockXid = nil
        case .streamAbort(let xid, let subxid):
            if xid == subxid {
                stream.streamed[xid] = nil
            } else {
                stream.streamed[xid]?.removeAll { $0.xid == subxid }
            }
        case .streamCommit(let xid, let commitLSN, let endLSN, _):
            let rows = stream.streamed.removeValue(forKey: xid) ?? []
            guard commitLSN >= stream.applied else { return }
            stream.ready += rows.map(\.row)
            stream.readyThrough = endLSN
            if stream.ready.count >= settings.chunkRowsMax { try flush(&stream, connection) }
        case .insert(let messageXid?, let relationID, let values):
            // Inside a stream block: kept until the transaction's stream commit.
            guard let top = stream.streamBlockXid, let columns = stream.relations[relationID] else { return }
            stream.streamed[top, default: []].append((messageXid, try FeedRow(values, columns)))
        case .insert(nil, let relationID, let values):
            guard var open = stream.open, !open.skip, let columns = stream.relations[relationID] else { return }
            open.rows.append(try FeedRow(values, columns))
            stream.open = open
            if open.rows.count + stream.ready.count >= settings.chunkRowsMax {
                // A large source transaction: write what is there; its end is recorded with its last part.
                stream.ready += open.rows
                stream.open?.rows = []
                try flush(&stream, connection)
            }
        case .commit(_, let endLSN, _):
            guard let open = stream.open else { return }
            stream.open = nil
            guard !open.skip else { return }
            stream.ready += open.rows
            stream.readyThrough = endLSN
            if stream.ready.count >= settings.chunkRowsMax { try flush(&stream, connection) }
        case .other:
            break
        }
    }

    /// Writes the ready rows (one transaction), then confirms the slot up to the last complete source
    /// transaction among them.
    private func flush(_ stream: inout StreamState, _ connection: PostgresReplicationConnection) throws {
        let rows = stream.ready
        let through = stream.readyThrough
        var start = 0
        repeat {
            // The end LSN goes with the last part only: a crash between parts replays the transaction,
            // and `change_seq` drops what was already fed.
            let end = min(rows.count, start + settings.chunkRowsMax)
            try write(Array(rows[start..<end]), through: end == rows.count ? through : nil)
            start = end
        } while start < rows.count
        stream.ready = []
        stream.readyThrough = nil
        if let through {
            stream.applied = max(stream.applied, through)
            stream.confirmed = max(stream.confirmed, stream.applied)
            try connection.sendStatus(flushed: stream.confirmed)
        }
        let pendingSince = stream.open.map { $0.skip ? 0 : $0.commitMicroseconds + PgOutputMessage.postgresEpochOffsetMicroseconds } ?? 0
        state.withLock {
            $0.status.appliedLSN = stream.applied
            $0.status.rowsFed += Int64(rows.count)
            $0.status.oldestPendingCommitMicroseconds = pendingSince
        }
    }

    /// One feed write: positions from the cursor (locked, so writers are serialised and positions grow
    /// in commit order), the rows, the cursor's new end, and a NOTIFY per merchant for monitoring.
    private func write(_ rows: [FeedRow], through: LogSequenceNumber?) throws {
        try pool.transaction { conn in
            guard let cursor = try conn.query("SELECT next_position FROM finance_feed_cursor FOR UPDATE").first else {
                throw TenderError("finance_feed_cursor_missing", "finance_feed_cursor has no row (run migrations)")
            }
            let next: Int64 = try cursor.decode("next_position")
            _ = try conn.query("""
                WITH input AS (
                    SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::uuid[], $6::int[], $7::text[],
                                         $8::text[], $9::uuid[])
                           WITH ORDINALITY AS r(change_seq, merchant_id, scope_kind, scope_id, epoch, xid, op, entity_id, ord)),
                fed AS (
                    INSERT INTO finance_feed (position, change_seq, merchant_id, scope_kind, scope_id, epoch, xid, op, entity_id)
                    SELECT $1 + ord - 1, change_seq, merchant_id, scope_kind, scope_id, epoch, xid::xid8, op, entity_id
                      FROM input ORDER BY ord
                    ON CONFLICT (change_seq) DO NOTHING
                    RETURNING merchant_id)
                SELECT pg_notify('tender_finance', m) FROM (SELECT DISTINCT merchant_id AS m FROM fed) AS d
                """, [next,
                      "{" + rows.map { String($0.changeSeq) }.joined(separator: ",") + "}",
                      PGArray.text(rows.map(\.merchantID)), PGArray.text(rows.map(\.scopeKind)),
                      PGArray.text(rows.map(\.scopeID)),
                      "{" + rows.map { String($0.epoch) }.joined(separator: ",") + "}",
                      PGArray.text(rows.map(\.xid)), PGArray.text(rows.map(\.op)), PGArray.text(rows.map(\.entityID))])
            _ = try conn.query("""
                UPDATE finance_feed_cursor SET next_position = $1,
                       applied_lsn = CASE WHEN $2::pg_lsn IS NULL THEN applied_lsn ELSE greatest(applied_lsn, $2::pg_lsn) END
                """, [next + Int64(rows.count), through?.description])
        }
    }

    /// Makes sure the slot exists and can stream: creates it (with a backfill) when absent, and
    /// re-creates it when PostgreSQL invalidated it (max_slot_wal_keep_size): the backfill then feeds
    /// every change the lost slot had not, because `change_seq` says which ones were fed.
    private func ensureSlot(_ slot: String, on connection: PostgresReplicationConnection) throws {
        let existing = try pool.query(SQL(idempotent: """
            SELECT coalesce(wal_status, '') AS wal_status, active FROM pg_replication_slots WHERE slot_name = $1
            """), [slot]).first
        if let existing {
            guard try existing.decode("wal_status", as: String.self) == "lost" else { return }
            logger.error("finance feed slot was invalidated (max_slot_wal_keep_size); re-creating it with a backfill",
                         [("slot", slot)])
            _ = try pool.query("SELECT pg_drop_replication_slot($1)", [slot])
        }
        let (point, snapshot) = try connection.createLogicalSlot(name: slot, plugin: Self.plugin)
        // Exported snapshot names are hex digits and dashes ("00000003-0000001B-1").
        guard !snapshot.isEmpty, snapshot.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) || $0 == 0x2D }) else {
            throw TenderError("finance_feed_snapshot_invalid", "unexpected exported snapshot name")
        }
        let fed = try pool.transaction(isolation: .repeatableRead) { conn -> Int in
            // The snapshot sees exactly the transactions committed before the slot's consistent point:
            // what the slot will not send. The name was checked above; it cannot be bound.
            try conn.simpleQuery(SQL(unsafeSQL: "SET TRANSACTION SNAPSHOT '\(snapshot)'"))
            try conn.simpleQuery("SET LOCAL statement_timeout = 0")
            _ = try conn.query("SELECT 1 FROM finance_feed_cursor FOR UPDATE")
            let inserted = try conn.execute("""
                INSERT INTO finance_feed (position, change_seq, merchant_id, scope_kind, scope_id, epoch, xid, op, entity_id)
                SELECT (SELECT next_position FROM finance_feed_cursor) - 1 + row_number() OVER (ORDER BY c.xid, c.seq),
                       c.seq, c.merchant_id, c.scope_kind, c.scope_id, c.epoch, c.xid, c.op, c.entity_id
                  FROM finance_change c
                 WHERE NOT EXISTS (SELECT 1 FROM finance_feed f WHERE f.change_seq = c.seq)
                 ORDER BY c.xid, c.seq
                """)
            _ = try conn.query("""
                UPDATE finance_feed_cursor
                   SET next_position = next_position + $1, applied_lsn = greatest(applied_lsn, $2::pg_lsn), slot_name = $3
                """, [inserted, point.description, slot])
            return inserted
        }
        logger.info("finance feed slot created", [("slot", slot), ("consistent_point", point.description),
                                                  ("backfilled", String(fed))])
    }
}

/// One `finance_change` insert as decoded from the stream, in the text forms the feed write binds.
struct FeedRow: Sendable {
    let changeSeq: Int64
    let merchantID: String
    let scopeKind: String
    let scopeID: String
    let epoch: Int
    let xid: String
    let op: String
    let entityID: String

    /// Where each needed column sits in the relation (the `R` message), so a reordered table still decodes.
    struct Columns: Sendable {
        let seq, merchantID, scopeKind, scopeID, epoch, xid, op, entityID: Int

        init(_ names: [String]) throws {
            func index(_ name: String) throws -> Int {
                guard let index = names.firstIndex(of: name) else {
                    throw TenderError("finance_feed_relation_invalid", "finance_change has no column \(name)")
                }
                return index
            }
            seq = try index("seq")
            merchantID = try index("merchant_id")
            scopeKind = try index("scope_kind")
            scopeID = try index("scope_id")
            epoch = try index("epoch")
            xid = try index("xid")
            op = try index("op")
            entityID = try index("entity_id")
        }
    }

    init(_ values: [String?], _ columns: Columns) throws {
        func value(_ index: Int) throws -> String {
            guard index < values.count, let value = values[index] else {
                throw TenderError("finance_feed_row_invalid", "finance_change insert without a required value")
            }
            return value
        }
        guard let seq = Int64(try value(columns.seq)), let epoch = Int(try value(columns.epoch)) else {
            throw TenderError("finance_feed_row_invalid", "finance_change insert with a non-numeric seq or epoch")
        }
        changeSeq = seq
        self.epoch = epoch
        merchantID = try value(columns.merchantID)
        scopeKind = try value(columns.scopeKind)
        scopeID = try value(columns.scopeID)
        xid = try value(columns.xid)
        op = try value(columns.op)
        entityID = try value(columns.entityID)
    }
}

/// The feed's health as `/readyz` and metrics show it: this process's writer plus the slot as
/// PostgreSQL sees it (so a standby process reports the lag of whichever process streams).
public struct FinanceFeedHealth: Sendable {
    /// The slot exists.
    public var slotExists = false
    /// Some process streams the slot right now.
    public var slotActive = false
    /// pg_replication_slots.wal_status: reserved, extended, unreserved (past max_wal_size, about to be
    /// lost), lost (invalidated past max_slot_wal_keep_size).
    public var walStatus = ""
    /// WAL between the server's end and the slot's confirmed position.
    public var lagBytes: Int64 = 0
    /// Bytes the slot may still fall behind before PostgreSQL invalidates it (-1: unbounded).
    public var safeWALBytes: Int64 = -1
    /// Age of the oldest commit received but not yet fed, or time since this process last streamed
    /// when it holds the slot no more and nobody else does.
    public var lagSeconds: Double = 0
    /// This process streams the slot.
    public var streamingHere = false

    /// The `/readyz` problem code when the feed is not healthy, nil when it is.
    public func problem(_ settings: FinanceFeedIngest.Settings) -> String? {
        if walStatus == "lost" || walStatus == "unreserved" { return "finance_feed_slot_lost" }
        if !slotActive && lagSeconds > Double(settings.lagSecondsMax) { return "finance_feed_not_streaming" }
        if lagBytes > settings.lagBytesMax || lagSeconds > Double(settings.lagSecondsMax) { return "finance_feed_lagging" }
        return nil
    }
}

extension FinanceFeedIngest {
    /// Refuses to serve without logical decoding, naming the setting (docs/finance-feed.md, "Operator's
    /// PostgreSQL"): without it the feed cannot exist, and silently reading below the horizon instead
    /// would bring back what the feed removes (every merchant waiting on every open transaction).
    public static func checkPrerequisites(_ pool: PostgresPool) throws {
        guard let row = try pool.query(SQL(idempotent: """
            SELECT current_setting('wal_level') AS wal_level,
                   current_setting('max_replication_slots')::int AS slots,
                   current_setting('max_wal_senders')::int AS senders,
                   (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user) AS may_replicate,
                   EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'tender_finance_feed') AS published
            """)).first else { return }
        let walLevel: String = try row.decode("wal_level")
        guard walLevel == "logical" else {
            throw TenderError("finance_feed_unavailable",
                              "wal_level is '\(walLevel)'; the finance feed needs wal_level = logical"
                                  + " (restart PostgreSQL after setting it)")
        }
        guard try row.decode("slots", as: Int.self) > 0, try row.decode("senders", as: Int.self) > 0 else {
            throw TenderError("finance_feed_unavailable",
                "max_replication_slots and max_wal_senders must be at least 1 (one per Tender database)")
        }
        guard try row.decodeIfPresent("may_replicate", as: Bool.self) == true else {
            throw TenderError("finance_feed_unavailable", "the database role needs the REPLICATION attribute (ALTER ROLE … REPLICATION)")
        }
        guard try row.decode("published", as: Bool.self) else {
            throw TenderError("finance_feed_unavailable", "publication tender_finance_feed is missing (run `tender migrate`)")
        }
    }

    /// The feed's health now (one read of pg_replication_slots).
    public func health() throws -> FinanceFeedHealth {
        let slot = try slotName()
        let status = self.status
        var health = FinanceFeedHealth()
        health.streamingHere = status.streaming
        if let row = try pool.query(SQL(idempotent: """
            SELECT active, coalesce(wal_status, '') AS wal_status, coalesce(safe_wal_size, -1) AS safe_wal,
                   coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint AS lag
              FROM pg_replication_slots WHERE slot_name = $1
            """), [slot]).first {
            health.slotExists = true
            health.slotActive = try row.decode("active")
            health.walStatus = try row.decode("wal_status")
            health.safeWALBytes = try row.decode("safe_wal")
            health.lagBytes = try row.decode("lag")
        }
        if health.slotActive {
            let seen = DispatchTime.now().uptimeNanoseconds
            state.withLock { $0.status.lastSeenActiveNanoseconds = seen }
        }
        let nowMicroseconds = clock.unixMicroseconds()
        if status.oldestPendingCommitMicroseconds > 0 {
            health.lagSeconds = max(0, Double(nowMicroseconds - status.oldestPendingCommitMicroseconds) / 1_000_000)
        } else if !health.slotActive {
            // Nobody streams: the feed is as far behind as the time since this process last did.
            let last = max(status.lastStreamingNanoseconds, status.lastSeenActiveNanoseconds, createdNanoseconds)
            let now = DispatchTime.now().uptimeNanoseconds
            health.lagSeconds = Double(now - min(now, last)) / 1_000_000_000
        }
        return health
    }
}
