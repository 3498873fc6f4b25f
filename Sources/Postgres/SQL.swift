/// Static SQL text; values always go as `$1…` parameters, never interpolated.
///
/// A string literal becomes `SQL` directly; dynamic text needs `init(unsafeSQL:)`, which looks unsafe
/// on purpose (STYLE.md "Unsafe paths look unsafe").
public struct SQL: Sendable, ExpressibleByStringLiteral {
    /// The statement text sent to PostgreSQL.
    public let text: String
    /// Whether running the statement twice has the same effect as once. Only such statements are
    /// retried after a stale pooled connection fails at first use (see `PostgresConnection`).
    public let isIdempotent: Bool

    /// Static SQL from a literal; not retried on a stale connection.
    public init(stringLiteral value: StaticString) {
        self.text = value.description
        self.isIdempotent = false
    }

    /// Static SQL from a literal that is safe to run twice (reads, upserts with identical effect).
    public init(idempotent value: StaticString) {
        self.text = value.description
        self.isIdempotent = true
    }

    /// SQL assembled at run time. The caller vouches that no external input reaches the text.
    public init(unsafeSQL text: String, idempotent: Bool = false) {
        self.text = text
        self.isIdempotent = idempotent
    }
}
