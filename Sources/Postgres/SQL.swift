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
    /// Whether the connection may prepare the text once and re-run it by name (its statement cache):
    /// true for literals, which are a fixed set; run-time text opts in (`init(unsafeSQL:preparable:)`).
    public let isPreparable: Bool

    /// Static SQL from a literal; not retried on a stale connection.
    public init(stringLiteral value: StaticString) {
        self.text = value.description
        self.isIdempotent = false
        self.isPreparable = true
    }

    /// Static SQL from a literal that is safe to run twice (reads, upserts with identical effect).
    public init(idempotent value: StaticString) {
        self.text = value.description
        self.isIdempotent = true
        self.isPreparable = true
    }

    /// SQL assembled at run time. The caller vouches that no external input reaches the text.
    /// `preparable: true` lets the statement cache keep it: only for text drawn from a small fixed set
    /// (one-off text would only cost a Parse round trip and a cache slot).
    public init(unsafeSQL text: String, idempotent: Bool = false, preparable: Bool = false) {
        self.text = text
        self.isIdempotent = idempotent
        self.isPreparable = preparable
    }
}
