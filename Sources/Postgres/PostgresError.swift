/// The one error type of the Postgres module: a stable machine `code` plus safe context.
///
/// `message` never contains parameter values: server messages are only copied for SQLSTATE classes
/// whose primary text names objects, not data (see `PostgresError.safeServerMessage`).
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// Stable machine codes; raw values are part of Tender's log and metrics vocabulary.
    public enum Code: String, Sendable {
        case connectionFailed = "connection_failed"
        case poolTimeout = "pool_timeout"
        case poolExhausted = "pool_exhausted"
        case poolClosed = "pool_closed"
        case queryFailed = "query_failed"
        case decodeFailed = "decode_failed"
        case transactionBeginFailed = "transaction_begin_failed"
        case transactionCommitFailed = "transaction_commit_failed"
        case transactionCommitUnknown = "transaction_commit_unknown"
        case transactionRollbackFailed = "transaction_rollback_failed"
        /// A statement sent after `executeAndCommit` ended the transaction (a programming error).
        case statementAfterCommit = "statement_after_commit"
        case statementTimeout = "statement_timeout"
    }

    /// What went wrong, as a stable code.
    public var code: Code
    /// The server's SQLSTATE (e.g. "23505"), when PostgreSQL answered with an error.
    public var sqlState: String?
    /// The violated constraint's name (PG_DIAG_CONSTRAINT_NAME), e.g. for unique violations.
    public var constraint: String?
    /// The column involved: the decoded column for decode errors, PG_DIAG_COLUMN_NAME otherwise.
    public var column: String?
    /// A human-readable explanation, safe for logs: never includes parameter values.
    public var message: String

    /// Creates an error; `message` must not contain parameter values or row data.
    public init(code: Code, message: String, sqlState: String? = nil, constraint: String? = nil,
                column: String? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.constraint = constraint
        self.column = column
    }

    /// True for SQLSTATE 23505 (unique_violation).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// True for serialization failures and deadlocks (40001 / 40P01): the transaction may be retried.
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// `postgres <code> [sqlstate ...]: message`.
    public var description: String {
        var text = "postgres \(code.rawValue)"
        if let sqlState { text += " [sqlstate \(sqlState)]" }
        if let constraint { text += " [constraint \(constraint)]" }
        if let column { text += " [column \(column)]" }
        return text + ": " + message
    }
}

extension PostgresError {
    /// SQLSTATE classes whose primary message names objects (relations, constraints, settings) but
    /// not input data. Class 22 (data exception, e.g. `invalid input syntax for type integer: "…"`)
    /// and user-raised P0 messages may echo values, so they are reduced to their SQLSTATE.
    static let messageSafeClasses: Set<Substring> = ["08", "23", "25", "28", "3D", "3F", "40", "42",
                                                     "53", "54", "55", "57", "58"]

    /// Returns the server's primary message when its class is known not to echo values.
    static func safeServerMessage(sqlState: String?, primary: String?) -> String {
        guard let sqlState else { return primary ?? "no error message" }
        if let primary, messageSafeClasses.contains(sqlState.prefix(2)) { return primary }
        return "server error (details withheld: may contain data)"
    }
}
