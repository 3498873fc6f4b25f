internal import CLibPQ
import Foundation
import Glibc

/// One PostgreSQL session. Not Sendable: a connection is owned by one thread at a time, and the
/// pool hands it from thread to thread only while nobody else holds it.
///
/// Retry rule (the only automatic retry in this module): a statement is re-sent once, on a freshly
/// reset connection, only when all of these hold —
/// 1. the connection came from the pool's idle list (a brand-new connection is never retried),
/// 2. it is the first statement of this checkout,
/// 3. the session was not inside a transaction when it was sent,
/// 4. the statement is marked idempotent (`SQL(idempotent:)`) or is the pool's own `BEGIN`, and
/// 5. libpq reports the connection as broken (CONNECTION_BAD) after the attempt.
/// A statement in a transaction or one not marked idempotent is never retried: it may have run.
///
/// Prepared statements (`PostgresConfiguration.preparedStatements`): a preparable statement (every SQL
/// literal) is prepared on its first use on this session and run by name afterwards, so PostgreSQL parses
/// and plans it once per connection. A failed prepare caches nothing; a reconnect empties the cache; a
/// cached statement whose plan went stale (0A000, "cached plan must not change result type", after a
/// migration) or that the session lost (26000) is dropped and, outside a transaction, prepared again
/// and re-sent once (it failed before doing anything). Inside a transaction the error aborts it as any
/// other would, and the next use prepares afresh.
///
/// With the cache on (a direct session, not pgbouncer), a transaction's BEGIN is not sent on its own:
/// it goes in one pipeline with the transaction's first statement (and that statement's prepare), one
/// round trip for all. No COMMIT is in that pipeline, so it is re-sent on a reset connection under the
/// retry rule above even when the statement is not idempotent: the server rolled the transaction back.
public final class PostgresConnection {
    private var handle: OpaquePointer
    private var reusedFromIdle = false
    private var statementsThisCheckout = 0
    /// Set when the session is in a state the pool must not reuse.
    private(set) var isBroken = false
    private var statements: StatementCache
    /// Whether the last `sendPrepared` ran an already-prepared statement (not one it just prepared).
    private var lastSendUsedCache = false
    /// A transaction's BEGIN commands waiting for its first statement, which carries them in one pipeline.
    private var pendingBegin: [String]?
    /// Set by `sendPipeline` when a BEGIN command (not the statement) failed.
    private var pipelineBeginFailed = false
    /// What became of the COMMIT that `sendPipeline` sent after its statement (`executeAndCommit`).
    private var pipelineCommit: PipelineCommit = .notSent
    /// Set once `executeAndCommit` committed the open transaction: `commit()` then has nothing to send.
    private var committedInPipeline = false
    /// Notifications to send once the open transaction commits (`notifyAfterCommit`), in order, no repeats.
    private var notificationsAfterCommit: [PostgresNotification] = []
    /// Most notifications one transaction queues; more are dropped (they are wake-ups, and one suffices).
    static let notificationsAfterCommitMax = 16

    /// Highest parameter count the protocol allows (Bind message uses an Int16 count).
    public static let parametersMax = 65_535

    init(handle: OpaquePointer, preparedStatementsMax: Int = 0) {
        self.handle = handle
        self.statements = StatementCache(capacity: preparedStatementsMax)
    }

    /// Statements prepared on this session now (tests of the cache bound).
    var preparedStatementCount: Int { statements.count }

    deinit {
        PQfinish(handle)
    }

    /// Opens a connection outside any pool (the pool and the listener use this too).
    static func open(_ settings: ConnectSettings) throws(PostgresError) -> PostgresConnection {
        switch settings.connect() {
        case .success(let handle): return PostgresConnection(handle: handle, preparedStatementsMax: settings.preparedStatementsMax)
        case .failure(let error): throw error
        }
    }

    // MARK: Public statements

    /// Runs one statement with `$1…` parameters (unnamed prepared statement, text results).
    public func query(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws(PostgresError) -> PostgresResult {
        let texts = try parameterTexts(parameters)
        let result = try runStatement(sql, texts)
        defer { PQclear(result) }
        return Self.makeResult(result)
    }

    /// Runs one statement and hands each row to `body` in turn, its values read in place from the
    /// result (no `PostgresRow`s, no Strings for columns the caller does not ask for): for reads of a
    /// million rows going straight into the caller's own structures. Returns the number of rows.
    /// A `PostgresRawRow` is only valid inside `body`.
    @discardableResult
    public func forEachRow(_ sql: SQL, _ parameters: [any PostgresEncodable] = [],
                           _ body: (PostgresRawRow) throws -> Void) throws -> Int {
        let texts = try parameterTexts(parameters)
        let result = try runStatement(sql, texts)
        defer { PQclear(result) }
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        for row in 0..<rowCount {
            try body(PostgresRawRow(result: result, row: Int32(row), columnCount: columnCount))
        }
        return rowCount
    }

    /// Runs one statement and returns the affected row count.
    @discardableResult
    public func execute(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws(PostgresError) -> Int {
        try query(sql, parameters).affectedRows
    }

    /// Runs a multi-statement script without parameters (migrations); stops at the first error.
    public func simpleQuery(_ sql: SQL) throws(PostgresError) {
        try flushBegin()
        let result = try run(retryable: sql.isIdempotent) { handle in
            PostgresCounters.countRoundTrip()
            return PQexec(handle, sql.text)
        }
        PQclear(result)
    }

    // MARK: Pool and transaction support

    /// Called by the pool when a caller takes the connection.
    func beginCheckout(reused: Bool) {
        reusedFromIdle = reused
        statementsThisCheckout = 0
        pendingBegin = nil
        notificationsAfterCommit.removeAll()
    }

    /// Cheap checkout validation: the session must be idle, and its socket must have nothing to read.
    /// An idle session receives nothing unless the server is going away (e.g. FATAL 57P01 on
    /// shutdown, then EOF), so readable data means "discard", without a round trip.
    func looksUsableAfterIdle() -> Bool {
        guard !isBroken, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) == PQTRANS_IDLE else {
            return false
        }
        let socket = PQsocket(handle)
        guard socket >= 0 else { return false }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Brings the session back to idle before it returns to the pool; false means discard it.
    func resetForReuse() -> Bool {
        pendingBegin = nil  // a transaction that sent nothing left nothing to end
        notificationsAfterCommit.removeAll()
        if isBroken || PQstatus(handle) != CONNECTION_OK { return false }
        switch PQtransactionStatus(handle) {
        case PQTRANS_IDLE:
            break
        case PQTRANS_INTRANS, PQTRANS_INERROR:
            // A body left a transaction open (its own BEGIN, or an error between BEGIN and COMMIT).
            rollbackQuietly()
            guard !isBroken && PQtransactionStatus(handle) == PQTRANS_IDLE else { return false }
        default:
            return false
        }
        return deallocatePending()
    }

    /// Deallocates the statements the cache let go of, outside any transaction; false means discard.
    /// A refusal (a name the session no longer has) only leaves a name unused: the session stays idle.
    private func deallocatePending() -> Bool {
        guard !statements.pendingDeallocations.isEmpty else { return true }
        let text = statements.takePendingDeallocations().map { "DEALLOCATE " + $0 }.joined(separator: "; ")
        PostgresCounters.countRoundTrip()
        let result = PQexec(handle, text)
        defer { PQclear(result) }
        let ok = result != nil && PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
        if !ok { isBroken = true }
        return ok
    }

    /// BEGIN with isolation, plus SET LOCAL statement_timeout so the limit also holds behind
    /// pgbouncer transaction pooling, where startup options do not reach the server (§7.4).
    /// With the statement cache on, only noted here and sent with the first statement (`sendPipeline`).
    func begin(isolation: TransactionIsolation, statementTimeoutMilliseconds: Int) throws(PostgresError) {
        committedInPipeline = false
        let commands = ["BEGIN ISOLATION LEVEL \(isolation.sql)", "SET LOCAL statement_timeout = \(statementTimeoutMilliseconds)"]
        if statements.isEnabled && !isBroken && pendingBegin == nil && PQtransactionStatus(handle) == PQTRANS_IDLE {
            pendingBegin = commands
            return
        }
        try sendBegin(commands)
    }

    /// Sends a deferred BEGIN on its own, before a command that cannot share its pipeline.
    private func flushBegin() throws(PostgresError) {
        guard let commands = pendingBegin else { return }
        pendingBegin = nil
        try sendBegin(commands)
    }

    private func sendBegin(_ commands: [String]) throws(PostgresError) {
        let text = commands.joined(separator: "; ")
        do {
            let result = try run(retryable: true) { handle in
                PostgresCounters.countRoundTrip()
                return PQexec(handle, text)
            }
            PQclear(result)
        } catch {
            var failure = error
            failure.message = "BEGIN failed (\(error.code.rawValue)): " + error.message
            failure.code = .transactionBeginFailed
            if PQtransactionStatus(handle) != PQTRANS_IDLE { rollbackQuietly() }
            throw failure
        }
    }

    /// COMMIT; distinguishes "PostgreSQL said no" from "nobody knows" (STYLE.md, Database).
    func commit() throws(PostgresError) {
        if committedInPipeline {
            committedInPipeline = false
            sendNotificationsAfterCommit()
            return
        }
        if pendingBegin != nil {
            pendingBegin = nil  // the transaction never reached the server: nothing to commit
            notificationsAfterCommit.removeAll()
            return
        }
        try commitStatement()
        sendNotificationsAfterCommit()
    }

    /// Runs the transaction's last statement with its COMMIT in one pipeline (with the BEGIN too when it is
    /// also the first): one round trip fewer per transaction, and the row locks it holds are released as
    /// soon as the statement ends. Returns the affected row count. Nothing may run on the connection in
    /// this transaction afterwards (`statement_after_commit`); the pool's own COMMIT then sends nothing.
    ///
    /// Errors keep `commit()`'s meaning: the statement's own error leaves the transaction aborted for the
    /// caller's ROLLBACK, as any statement's would; `transaction_commit_failed` when PostgreSQL refused the
    /// COMMIT; `transaction_commit_unknown` when the session was lost after the pipeline was sent (the
    /// transaction may have committed: re-read, never blindly retry). Never re-sent on a reset connection.
    /// Without the statement cache (pgbouncer in transaction mode) the statement runs on its own and the
    /// COMMIT follows as before.
    @discardableResult
    public func executeAndCommit(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws(PostgresError) -> Int {
        let result = try runAndCommit(sql, try parameterTexts(parameters))
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// `executeAndCommit` for a last statement whose rows the caller needs (an `INSERT … RETURNING`): the
    /// statement, its COMMIT (and a deferred BEGIN) in one round trip, with the same error meanings. The rows
    /// are returned only once the COMMIT succeeded; nothing may run in this transaction afterwards.
    public func queryAndCommit(_ sql: SQL, _ parameters: [any PostgresEncodable] = []) throws(PostgresError) -> PostgresResult {
        let result = try runAndCommit(sql, try parameterTexts(parameters))
        defer { PQclear(result) }
        return Self.makeResult(result)
    }

    private func runAndCommit(_ sql: SQL, _ texts: [String?]) throws(PostgresError) -> OpaquePointer {
        if committedInPipeline { throw Self.statementAfterCommit }
        let inTransaction = pendingBegin != nil || PQtransactionStatus(handle) == PQTRANS_INTRANS
        guard statements.isEnabled && inTransaction && !isBroken else { return try runStatement(sql, texts) }
        let begin = pendingBegin ?? []
        pendingBegin = nil
        pipelineBeginFailed = false
        pipelineCommit = .notSent
        let result: OpaquePointer
        do {
            result = try run(retryable: false) { handle in sendPipeline(handle, begin, sql, texts, commit: true) }
        } catch {
            if isBroken {
                throw PostgresError(code: .transactionCommitUnknown,
                                    message: "connection lost with COMMIT in the pipeline; outcome unknown: " + error.message)
            }
            if pipelineBeginFailed {
                var failure = error
                failure.message = "BEGIN failed (\(error.code.rawValue)): " + error.message
                failure.code = .transactionBeginFailed
                if PQtransactionStatus(handle) != PQTRANS_IDLE { rollbackQuietly() }
                throw failure
            }
            if error.sqlState == "0A000" && lastSendUsedCache { statements.invalidate(sql.text, deallocate: true) }
            if error.sqlState == "26000" && lastSendUsedCache { statements.clear() }
            throw error
        }
        notificationsAfterCommit.removeAll()  // sent with the COMMIT; a transaction that did not commit owes none
        switch pipelineCommit {
        case .committed:
            committedInPipeline = true
            return result
        case .refused(let error):
            PQclear(result)
            if PQtransactionStatus(handle) != PQTRANS_IDLE { rollbackQuietly() }
            throw error
        case .notSent, .unknown:
            PQclear(result)
            isBroken = true
            throw PostgresError(code: .transactionCommitUnknown, message: "no answer to the pipelined COMMIT; outcome unknown")
        }
    }

    private static let statementAfterCommit = PostgresError(
        code: .statementAfterCommit, message: "a statement after executeAndCommit in the same transaction")

    /// Queues `pg_notify(channel, payload)` for after the open transaction commits; dropped if it rolls back.
    ///
    /// A NOTIFY inside a transaction makes its COMMIT take PostgreSQL's one cluster-wide notify-queue lock and
    /// hold it through the WAL flush, so every notifying commit waits for the one before it: no group commit.
    /// Sent after COMMIT, in a transaction of its own with `synchronous_commit = off` (it changes no data),
    /// the lock is held for microseconds. For wake-ups only: a notification lost with a crash in between must
    /// cost latency, never correctness (its listeners also poll).
    /// Outside a transaction it is sent at once.
    public func notifyAfterCommit(channel: String, payload: String) {
        let notification = PostgresNotification(channel: channel, payload: payload)
        guard notificationsAfterCommit.count < Self.notificationsAfterCommitMax,
              !notificationsAfterCommit.contains(notification) else { return }
        notificationsAfterCommit.append(notification)
        if pendingBegin == nil && PQtransactionStatus(handle) == PQTRANS_IDLE { sendNotificationsAfterCommit() }
    }

    /// One round trip for all queued notifications; a failure only loses the wake-ups (or the session).
    private func sendNotificationsAfterCommit() {
        guard !notificationsAfterCommit.isEmpty else { return }
        let queued = notificationsAfterCommit
        notificationsAfterCommit.removeAll()
        guard !isBroken, PQtransactionStatus(handle) == PQTRANS_IDLE else { return }
        let calls = queued.compactMap { notification -> String? in
            guard let channel = literal(notification.channel), let payload = literal(notification.payload) else { return nil }
            return "SELECT pg_notify(\(channel), \(payload))"
        }
        let text = (["BEGIN", "SET LOCAL synchronous_commit = off"] + calls + ["COMMIT"]).joined(separator: "; ")
        PostgresCounters.countRoundTrip()
        let result = PQexec(handle, text)
        PQclear(result)
        if PQstatus(handle) != CONNECTION_OK {
            isBroken = true
        } else if PQtransactionStatus(handle) != PQTRANS_IDLE {
            rollbackQuietly()
        }
    }

    /// A string literal for the notification script, quoted by libpq for this session's settings; nil when
    /// libpq cannot (then the wake-up is dropped).
    private func literal(_ text: String) -> String? {
        guard let escaped = PQescapeLiteral(handle, text, text.utf8.count) else { return nil }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    private func commitStatement() throws(PostgresError) {
        statementsThisCheckout += 1
        PostgresCounters.countRoundTrip()
        let result = PQexec(handle, "COMMIT")
        defer { PQclear(result) }
        if PQstatus(handle) != CONNECTION_OK || result == nil {
            isBroken = true
            throw PostgresError(code: .transactionCommitUnknown,
                                message: "connection lost during COMMIT; outcome unknown: " + libpqMessage(handle))
        }
        let status = PQresultStatus(result)
        if status == PGRES_COMMAND_OK {
            // COMMIT of an aborted transaction answers with the tag ROLLBACK.
            if let tag = PQcmdStatus(result), String(cString: tag) == "ROLLBACK" {
                throw PostgresError(code: .transactionCommitFailed,
                                    message: "transaction was aborted by an earlier error and rolled back")
            }
            return
        }
        var error = Self.serverError(result, handle: handle)
        error.code = .transactionCommitFailed
        error.message = "COMMIT failed: " + error.message
        if PQtransactionStatus(handle) != PQTRANS_IDLE { rollbackQuietly() }
        throw error
    }

    /// ROLLBACK whose failure only marks the connection broken (the caller's error wins).
    @discardableResult
    func rollbackQuietly() -> Bool {
        if committedInPipeline {
            // The body failed after its last statement committed the transaction: nothing is left to undo.
            committedInPipeline = false
            sendNotificationsAfterCommit()
            return !isBroken
        }
        notificationsAfterCommit.removeAll()
        if pendingBegin != nil {
            pendingBegin = nil
            return !isBroken
        }
        statementsThisCheckout += 1
        PostgresCounters.countRoundTrip()
        let result = PQexec(handle, "ROLLBACK")
        defer { PQclear(result) }
        let ok = result != nil && PQresultStatus(result) == PGRES_COMMAND_OK && PQstatus(handle) == CONNECTION_OK
        if !ok { isBroken = true }
        return ok
    }

    // MARK: Listener support

    /// LISTEN on one channel, quoting the name with PQescapeIdentifier.
    func listen(channel: String) throws(PostgresError) {
        let bytes = Array(channel.utf8)
        guard let escaped = PQescapeIdentifier(handle, channel, bytes.count) else {
            throw PostgresError(code: .queryFailed, message: "channel name could not be quoted: " + libpqMessage(handle))
        }
        let text = "LISTEN " + String(cString: escaped)
        PQfreemem(escaped)
        try flushBegin()
        let result = try run(retryable: false) { handle in
            PostgresCounters.countRoundTrip()
            return PQexec(handle, text)
        }
        PQclear(result)
    }

    /// The socket libpq reads from, for poll(2).
    var socket: Int32 { PQsocket(handle) }

    /// Reads whatever arrived and returns queued notifications (at most `limit`); false = connection lost.
    func consumeNotifications(limit: Int) -> (alive: Bool, notifications: [PostgresNotification]) {
        let consumed = PQconsumeInput(handle) == 1
        var notifications: [PostgresNotification] = []
        while notifications.count < limit, let notify = PQnotifies(handle) {
            let channel = notify.pointee.relname.map { String(cString: $0) } ?? ""
            let payload = notify.pointee.extra.map { String(cString: $0) } ?? ""
            notifications.append(PostgresNotification(channel: channel, payload: payload))
            PQfreemem(notify)
        }
        let alive = consumed && PQstatus(handle) == CONNECTION_OK
        if !alive { isBroken = true }
        return (alive, notifications)
    }

    // MARK: Execution core

    private func parameterTexts(_ parameters: [any PostgresEncodable]) throws(PostgresError) -> [String?] {
        guard parameters.count <= Self.parametersMax else {
            throw PostgresError(code: .queryFailed,
                                message: "\(parameters.count) parameters exceed the protocol limit \(Self.parametersMax)")
        }
        var texts: [String?] = []
        texts.reserveCapacity(parameters.count)
        for (index, parameter) in parameters.enumerated() {
            let text = parameter.postgresText
            // A NUL would silently truncate the C string; PostgreSQL text cannot hold one anyway.
            if let text, Self.containsNul(text) {
                throw PostgresError(code: .queryFailed, message: "parameter $\(index + 1) contains a NUL byte")
            }
            texts.append(text)
        }
        return texts
    }

    /// memchr over the contiguous UTF-8 of a native string (parameters can be chunks of megabytes).
    private static func containsNul(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(base, 0, bytes.count) != nil
        } ?? text.utf8.contains(0)
    }

    /// Runs one statement: by name from the statement cache when it is on and the text preparable,
    /// else unnamed. A cached statement refused as stale (0A000) or unknown (26000) is dropped from the
    /// cache and, when the session was outside a transaction, prepared again and re-sent once.
    private func runStatement(_ sql: SQL, _ texts: [String?]) throws(PostgresError) -> OpaquePointer {
        if committedInPipeline { throw Self.statementAfterCommit }
        if let begin = pendingBegin {
            pendingBegin = nil
            return try runWithBegin(begin, sql, texts)
        }
        guard statements.isEnabled && sql.isPreparable else {
            return try run(retryable: sql.isIdempotent) { handle in Self.execParams(handle, sql.text, texts) }
        }
        let outsideTransaction = PQtransactionStatus(handle) == PQTRANS_IDLE
        do {
            return try run(retryable: sql.isIdempotent) { handle in sendPrepared(handle, sql.text, texts) }
        } catch {
            let stale = error.sqlState == "0A000" || error.sqlState == "26000"
            guard stale && lastSendUsedCache && !isBroken else { throw error }
            if error.sqlState == "0A000" {
                statements.invalidate(sql.text, deallocate: true)
            } else {
                statements.clear()  // the session lost its statements (DISCARD ALL, DEALLOCATE ALL): all of them, likely
            }
            guard outsideTransaction && PQtransactionStatus(handle) == PQTRANS_IDLE else { throw error }
            return try run(retryable: false) { handle in sendPrepared(handle, sql.text, texts) }
        }
    }

    /// The transaction's BEGIN and its first statement in one pipeline (`sendPipeline`). A failed BEGIN
    /// is `transaction_begin_failed`, as when it is sent on its own.
    private func runWithBegin(_ begin: [String], _ sql: SQL, _ texts: [String?]) throws(PostgresError) -> OpaquePointer {
        pipelineBeginFailed = false
        do {
            // Retryable whatever the statement: no COMMIT is in the pipeline, so a lost session rolled it back.
            return try run(retryable: true) { handle in sendPipeline(handle, begin, sql, texts) }
        } catch {
            if pipelineBeginFailed {
                var failure = error
                failure.message = "BEGIN failed (\(error.code.rawValue)): " + error.message
                failure.code = .transactionBeginFailed
                if !isBroken && PQtransactionStatus(handle) != PQTRANS_IDLE { rollbackQuietly() }
                throw failure
            }
            if error.sqlState == "0A000" && lastSendUsedCache { statements.invalidate(sql.text, deallocate: true) }
            if error.sqlState == "26000" && lastSendUsedCache { statements.clear() }
            throw error
        }
    }

    /// Sends `begin`'s commands, the statement's prepare when this session lacks it, the statement and a
    /// Sync as one pipeline, then reads every result. Returns the first failed result (a BEGIN command's
    /// sets `pipelineBeginFailed`), else the statement's; nil when the pipeline itself broke down.
    /// With `commit`, a COMMIT follows the statement in the same pipeline; what became of it is left in
    /// `pipelineCommit`.
    private func sendPipeline(_ handle: OpaquePointer, _ begin: [String], _ sql: SQL, _ parameters: [String?],
                              commit: Bool = false) -> OpaquePointer? {
        PostgresCounters.countRoundTrip()
        guard PQpipelineStatus(handle) == PQ_PIPELINE_OFF || PQexitPipelineMode(handle) == 1,
              PQenterPipelineMode(handle) == 1 else { return nil }
        var sent = true
        for command in begin { sent = sent && PQsendQueryParams(handle, command, 0, nil, nil, nil, nil, 0) == 1 }
        var name: String? = nil
        var preparing: String? = nil
        lastSendUsedCache = false
        if statements.isEnabled && sql.isPreparable {
            name = statements.name(for: sql.text)
            lastSendUsedCache = name != nil
            if name == nil {
                let fresh = statements.freshName()
                PostgresCounters.countPrepare()
                sent = sent && PQsendPrepare(handle, fresh, sql.text, 0, nil) == 1
                (name, preparing) = (fresh, fresh)
            }
        }
        sent = sent && Self.withParameterPointers(parameters) { pointers -> Int32 in
            if let name { return PQsendQueryPrepared(handle, name, Int32(parameters.count), pointers, nil, nil, 0) }
            return PQsendQueryParams(handle, sql.text, Int32(parameters.count), nil, pointers, nil, nil, 0)
        } == 1
        if commit { sent = sent && PQsendQueryParams(handle, "COMMIT", 0, nil, nil, nil, nil, 0) == 1 }
        sent = sent && PQpipelineSync(handle) == 1
        // The wake-ups queued by `notifyAfterCommit` follow the COMMIT in the same round trip, in a transaction
        // of their own after a Sync of their own, so their fate never touches the COMMIT's.
        let wakeUps = commit ? notificationsAfterCommit : []
        if !wakeUps.isEmpty { sent = sent && sendWakeUps(handle, wakeUps) }
        guard sent else {
            if PQstatus(handle) == CONNECTION_OK { isBroken = true }
            return nil
        }
        var failure: OpaquePointer? = nil
        for _ in begin {
            let result = Self.takeResult(handle)
            if failure == nil && PQresultStatus(result) != PGRES_COMMAND_OK {
                failure = result
                pipelineBeginFailed = true
            } else {
                PQclear(result)
            }
        }
        if let preparing {
            let result = Self.takeResult(handle)
            if PQresultStatus(result) == PGRES_COMMAND_OK && failure == nil {
                statements.insert(sql.text, name: preparing)
                PQclear(result)
            } else if failure == nil {
                failure = result
            } else {
                PQclear(result)
            }
        }
        let statement = Self.takeResult(handle)
        if failure != nil { PQclear(statement) }
        if commit {
            let committed = Self.takeResult(handle)
            let statementOK = failure == nil && statement.map(Self.isSuccess) == true
            pipelineCommit = statementOK ? Self.commitOutcome(committed, handle: handle) : .notSent
            PQclear(committed)
        }
        var synced = Self.awaitSync(handle)
        if !wakeUps.isEmpty && synced { synced = takeWakeUpResults(handle, count: wakeUps.count) }
        synced = synced && PQexitPipelineMode(handle) == 1
        if !synced && PQstatus(handle) == CONNECTION_OK { isBroken = true }
        return failure ?? statement
    }

    /// Sends the wake-ups' own transaction (`sendNotificationsAfterCommit`'s script as pipelined commands).
    private func sendWakeUps(_ handle: OpaquePointer, _ wakeUps: [PostgresNotification]) -> Bool {
        var sent = PQsendQueryParams(handle, "BEGIN", 0, nil, nil, nil, nil, 0) == 1
            && PQsendQueryParams(handle, "SET LOCAL synchronous_commit = off", 0, nil, nil, nil, nil, 0) == 1
        for wakeUp in wakeUps {
            sent = sent && Self.withParameterPointers([wakeUp.channel, wakeUp.payload]) { pointers in
                PQsendQueryParams(handle, "SELECT pg_notify($1, $2)", 2, nil, pointers, nil, nil, 0)
            } == 1
        }
        return sent && PQsendQueryParams(handle, "COMMIT", 0, nil, nil, nil, nil, 0) == 1 && PQpipelineSync(handle) == 1
    }

    /// Reads the wake-ups' results and their Sync. A refused wake-up only loses it: its transaction, left
    /// aborted, is rolled back here, unless the main transaction did not commit (its caller rolls back then).
    private func takeWakeUpResults(_ handle: OpaquePointer, count: Int) -> Bool {
        for _ in 0..<(count + 3) { PQclear(Self.takeResult(handle)) }
        guard Self.awaitSync(handle) else { return false }
        if case .committed = pipelineCommit, PQtransactionStatus(handle) == PQTRANS_INERROR {
            guard PQexitPipelineMode(handle) == 1 else { return false }
            PostgresCounters.countRoundTrip()
            let result = PQexec(handle, "ROLLBACK")
            PQclear(result)
            return PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
        }
        return true
    }

    private static func isSuccess(_ result: OpaquePointer) -> Bool {
        let status = PQresultStatus(result)
        return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK
    }

    /// A pipelined COMMIT's result: nil is no answer; COMMIT of an aborted transaction answers ROLLBACK.
    private static func commitOutcome(_ result: OpaquePointer?, handle: OpaquePointer) -> PipelineCommit {
        guard let result else { return .unknown }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            var error = serverError(result, handle: handle)
            error.code = .transactionCommitFailed
            error.message = "COMMIT failed: " + error.message
            return .refused(error)
        }
        if let tag = PQcmdStatus(result), String(cString: tag) == "ROLLBACK" {
            return .refused(PostgresError(code: .transactionCommitFailed,
                                          message: "transaction was aborted by an earlier error and rolled back"))
        }
        return .committed
    }

    /// One pipelined command's result, reading on to the NULL that ends it.
    private static func takeResult(_ handle: OpaquePointer) -> OpaquePointer? {
        let result = PQgetResult(handle)
        guard result != nil else { return nil }
        while let extra = PQgetResult(handle) {
            if PQresultStatus(extra) == PGRES_PIPELINE_SYNC {
                PQclear(extra)
                break
            }
            PQclear(extra)
        }
        return result
    }

    /// Reads up to the pipeline's Sync; false when it never came (the session is lost or confused).
    private static func awaitSync(_ handle: OpaquePointer) -> Bool {
        for _ in 0..<8 {
            guard let result = PQgetResult(handle) else {
                if PQstatus(handle) != CONNECTION_OK { return false }
                continue
            }
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { return true }
        }
        return false
    }

    /// Prepares `text` unless this session has it, then runs it by name. A refused prepare returns its
    /// error result (the caller's `run` reports it) and leaves the cache as it was.
    private func sendPrepared(_ handle: OpaquePointer, _ text: String, _ parameters: [String?]) -> OpaquePointer? {
        if let name = statements.name(for: text) {
            lastSendUsedCache = true
            return Self.execPrepared(handle, name, parameters)
        }
        lastSendUsedCache = false
        let name = statements.freshName()
        PostgresCounters.countRoundTrip()
        PostgresCounters.countPrepare()
        // nParams 0 with no types: the server infers every parameter's type, as for PQexecParams.
        guard let prepared = PQprepare(handle, name, text, 0, nil) else { return nil }
        guard PQresultStatus(prepared) == PGRES_COMMAND_OK, PQstatus(handle) == CONNECTION_OK else { return prepared }
        PQclear(prepared)
        statements.insert(text, name: name)
        return Self.execPrepared(handle, name, parameters)
    }

    /// Calls `body` with C strings of the parameters (NULL for SQL NULL), valid during the call.
    private static func withParameterPointers<R>(_ parameters: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { copies.forEach { free($0) } }
        return body(copies.map { $0.map { UnsafePointer($0) } })
    }

    private static func execParams(_ handle: OpaquePointer, _ text: String, _ parameters: [String?]) -> OpaquePointer? {
        PostgresCounters.countRoundTrip()
        // paramTypes nil: the server infers types; resultFormat 0: text. Unnamed statement, so no
        // session state survives the call (pgbouncer transaction mode, §7.4).
        return withParameterPointers(parameters) { pointers in
            PQexecParams(handle, text, Int32(parameters.count), nil, pointers, nil, nil, 0)
        }
    }

    private static func execPrepared(_ handle: OpaquePointer, _ name: String, _ parameters: [String?]) -> OpaquePointer? {
        PostgresCounters.countRoundTrip()
        return withParameterPointers(parameters) { pointers in
            PQexecPrepared(handle, name, Int32(parameters.count), pointers, nil, nil, 0)
        }
    }

    /// Sends a statement (once, or twice under the retry rule above) and returns a successful result.
    private func run(retryable: Bool, _ send: (OpaquePointer) -> OpaquePointer?) throws(PostgresError) -> OpaquePointer {
        if isBroken {
            throw PostgresError(code: .connectionFailed, message: "connection is broken; it will be discarded")
        }
        let mayRetry = retryable && reusedFromIdle && statementsThisCheckout == 0
            && PQtransactionStatus(handle) == PQTRANS_IDLE
        statementsThisCheckout += 1
        var result = send(handle)
        if PQstatus(handle) != CONNECTION_OK && mayRetry {
            PQclear(result)
            PQreset(handle)
            statements.clear()
            reusedFromIdle = false
            guard PQstatus(handle) == CONNECTION_OK else {
                isBroken = true
                throw PostgresError(code: .connectionFailed, message: "reconnect failed: " + libpqMessage(handle))
            }
            result = send(handle)
        }
        if PQstatus(handle) != CONNECTION_OK {
            PQclear(result)
            isBroken = true
            throw PostgresError(code: .connectionFailed, message: "connection lost: " + libpqMessage(handle))
        }
        guard let result else {
            isBroken = true
            throw PostgresError(code: .connectionFailed, message: "no result: " + libpqMessage(handle))
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return result
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            let error = Self.serverError(result, handle: handle)
            PQclear(result)
            throw error
        default:
            // COPY and other streaming modes are not supported; the session is now mid-protocol.
            PQclear(result)
            isBroken = true
            throw PostgresError(code: .queryFailed, message: "unsupported result mode (COPY is not supported)")
        }
    }

    private static func field(_ result: OpaquePointer?, _ code: Character) -> String? {
        guard let ascii = code.asciiValue, let value = PQresultErrorField(result, Int32(ascii)) else { return nil }
        return String(cString: value)
    }

    /// Maps an error result to PostgresError, keeping only value-free fields (never DETAIL).
    static func serverError(_ result: OpaquePointer?, handle: OpaquePointer) -> PostgresError {
        let sqlState = field(result, "C")
        let code: PostgresError.Code = sqlState == "57014" ? .statementTimeout : .queryFailed
        var message = PostgresError.safeServerMessage(sqlState: sqlState, primary: field(result, "M"))
        if sqlState == nil, let raw = PQresultErrorMessage(result) {
            // Client-side errors (no SQLSTATE) come from libpq itself and hold no statement data.
            let text = String(cString: raw).trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty { message = text }
        }
        if let table = field(result, "t") { message += " (table \(table))" }
        return PostgresError(code: code, message: message, sqlState: sqlState,
                             constraint: field(result, "n"), column: field(result, "c"))
    }

    private static func makeResult(_ result: OpaquePointer) -> PostgresResult {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var names: [String] = []
        names.reserveCapacity(columnCount)
        for column in 0..<columnCount {
            names.append(PQfname(result, Int32(column)).map { String(cString: $0) } ?? "?column?")
        }
        let columns = PostgresColumns(names: names)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [String?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else {
                    values.append(PQgetvalue(result, Int32(row), Int32(column)).map { String(cString: $0) } ?? "")
                }
            }
            rows.append(PostgresRow(columns: columns, values: values))
        }
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
        return PostgresResult(rows: rows, affectedRows: affected)
    }
}

/// Transaction isolation levels (PostgreSQL docs 13.2).
public enum TransactionIsolation: Sendable {
    /// READ COMMITTED, PostgreSQL's default.
    case readCommitted
    /// REPEATABLE READ (snapshot isolation).
    case repeatableRead
    /// SERIALIZABLE (SSI); expect 40001 failures and retry the whole transaction.
    case serializable

    var sql: String {
        switch self {
        case .readCommitted: "READ COMMITTED"
        case .repeatableRead: "REPEATABLE READ"
        case .serializable: "SERIALIZABLE"
        }
    }
}

/// One row of a result being walked by `PostgresConnection.forEachRow`; valid only inside its body.
public struct PostgresRawRow {
    fileprivate let result: OpaquePointer
    fileprivate let row: Int32
    fileprivate let columnCount: Int

    private func checked(_ column: Int) throws(PostgresError) -> Int32 {
        guard column >= 0 && column < columnCount else {
            throw PostgresError(code: .decodeFailed, message: "no column at position \(column) (result has \(columnCount))",
                                column: String(column))
        }
        return Int32(column)
    }

    /// The column's text, nil for SQL NULL.
    public func string(_ column: Int) throws(PostgresError) -> String? {
        let index = try checked(column)
        guard PQgetisnull(result, row, index) == 0, let value = PQgetvalue(result, row, index) else { return nil }
        return String(cString: value)
    }

    /// A non-NULL text column.
    public func requiredString(_ column: Int) throws(PostgresError) -> String {
        guard let value = try string(column) else {
            throw PostgresError(code: .decodeFailed, message: "column \(column) is NULL, expected String", column: String(column))
        }
        return value
    }

    /// A non-NULL integer column (int2/int4/int8 text), parsed in place.
    public func int64(_ column: Int) throws(PostgresError) -> Int64 {
        let index = try checked(column)
        guard PQgetisnull(result, row, index) == 0, let value = PQgetvalue(result, row, index) else {
            throw PostgresError(code: .decodeFailed, message: "column \(column) is NULL, expected Int64", column: String(column))
        }
        let length = Int(PQgetlength(result, row, index))
        return try value.withMemoryRebound(to: UInt8.self, capacity: length) { (bytes) throws(PostgresError) -> Int64 in
            var position = 0
            var negative = false
            if length > 0 && bytes[0] == UInt8(ascii: "-") {
                negative = true
                position = 1
            }
            guard position < length else {
                throw PostgresError(code: .decodeFailed, message: "column \(column) is not an integer", column: String(column))
            }
            var number: Int64 = 0
            while position < length {
                let byte = bytes[position]
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else {
                    throw PostgresError(code: .decodeFailed, message: "column \(column) is not an integer", column: String(column))
                }
                let (shifted, overflowA) = number.multipliedReportingOverflow(by: 10)
                // Accumulated negatively for a negative number, so that Int64.min fits.
                let digit = Int64(byte - UInt8(ascii: "0"))
                let (next, overflowB) = negative ? shifted.subtractingReportingOverflow(digit)
                                                 : shifted.addingReportingOverflow(digit)
                if overflowA || overflowB {
                    throw PostgresError(code: .decodeFailed, message: "column \(column) overflows Int64", column: String(column))
                }
                number = next
                position += 1
            }
            return number
        }
    }

    /// A non-NULL boolean column (`t`/`f`).
    public func bool(_ column: Int) throws(PostgresError) -> Bool {
        let index = try checked(column)
        guard PQgetisnull(result, row, index) == 0, let value = PQgetvalue(result, row, index) else {
            throw PostgresError(code: .decodeFailed, message: "column \(column) is NULL, expected Bool", column: String(column))
        }
        switch value.pointee {
        case CChar(UInt8(ascii: "t")): return true
        case CChar(UInt8(ascii: "f")): return false
        default: throw PostgresError(code: .decodeFailed, message: "column \(column) is not a boolean", column: String(column))
        }
    }
}

/// What became of a COMMIT sent in a pipeline after the transaction's last statement.
private enum PipelineCommit {
    /// Not sent, or skipped because an earlier command in the pipeline failed.
    case notSent
    case committed
    case refused(PostgresError)
    /// Sent, and no answer came.
    case unknown
}
