/// Connection and pool settings. Every limit is named here with its documented default.
public struct PostgresConfiguration: Sendable {
    /// libpq URI (`postgresql://…`) or `key=value` connection string.
    public var connectionString: String
    /// Most connections the pool opens at once.
    public var connectionsMax: Int = 10
    /// Most threads queued for a connection; one more fails at once with `pool_exhausted`.
    public var waitQueueMax: Int = 1_000
    /// How long a queued thread waits before failing with `pool_timeout`.
    public var acquireTimeoutMilliseconds: Int = 5_000
    /// libpq `connect_timeout`.
    public var connectTimeoutSeconds: Int = 5
    /// `statement_timeout` for every connection (startup `options`), and `SET LOCAL` in transactions
    /// so it also holds behind pgbouncer in transaction mode (reliability-security §7.4). 0 disables.
    public var statementTimeoutMilliseconds: Int = 5_000
    /// Prepares each statement once per connection and re-runs it by name (`PQprepare`, then
    /// `PQexecPrepared`): PostgreSQL parses and plans it once instead of on every execution. Off behind
    /// pgbouncer in transaction mode, where a session's prepared statements do not follow the client.
    public var preparedStatements = true
    /// Most statements one connection keeps prepared; the least recently used is deallocated beyond it.
    public var preparedStatementsMax = 256
    /// `application_name` reported to the server (pg_stat_activity).
    public var applicationName: String = "tender"
    /// Lets one thread hold two connections of the pool at once without the debug-build trap (tests of
    /// the pool's own timeout and queue limits only; see `PostgresPool.withConnection`).
    public var allowNestedAcquisitionForTesting = false

    /// Defaults for everything but the connection string.
    public init(connectionString: String) {
        self.connectionString = connectionString
    }

    /// Traps on settings that cannot work; the server's configuration loader validates input first.
    func validate() {
        precondition(connectionsMax >= 1, "connectionsMax must be at least 1")
        precondition(waitQueueMax >= 0, "waitQueueMax must not be negative")
        precondition(acquireTimeoutMilliseconds >= 0, "acquireTimeoutMilliseconds must not be negative")
        precondition(connectTimeoutSeconds >= 0, "connectTimeoutSeconds must not be negative")
        precondition(statementTimeoutMilliseconds >= 0, "statementTimeoutMilliseconds must not be negative")
        precondition(preparedStatementsMax >= 1, "preparedStatementsMax must be at least 1")
    }
}

/// Pool counters at one instant.
public struct PoolStats: Sendable {
    /// Connections checked out (or being opened for a caller).
    public var inUse: Int
    /// Open connections waiting in the pool.
    public var idle: Int
    /// Threads queued for a connection.
    public var waiting: Int
    /// The configured maximum.
    public var connectionsMax: Int
}
