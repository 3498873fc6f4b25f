import FinanceStore
import Foundation
import Postgres

/// Reads of the finance store: FinanceKit queries and history pages, each one bound statement whose
/// text comes only from fixed fragments (the core's `sqlPlan`) or is static.
enum FinanceReader {
    /// Accounts matching `query`, as stored FinanceKit JSON objects.
    static func accounts(merchantId: String, query: AccountQuery, on conn: PostgresConnection) throws -> [[UInt8]] {
        let plan = query.sqlPlan(firstParameter: 2)
        // The text is assembled from AccountQuery's fixed fragments and placeholders only.
        let sql = SQL(unsafeSQL: """
            SELECT payload::text AS payload FROM finance_account
             WHERE merchant_id = $1 AND \(plan.whereSQL)
             ORDER BY \(plan.orderBySQL)
             LIMIT $\(plan.bindings.count + 2) OFFSET $\(plan.bindings.count + 3)
            """, idempotent: true)
        return try payloads(conn.query(sql, [merchantId] + plan.bindings.map(encodable) + [plan.limit, plan.offset]))
    }

    /// Transactions matching `query` (filters, sort with the `id` tie-breaker, limit, offset).
    static func transactions(merchantId: String, query: TransactionQuery, on conn: PostgresConnection) throws -> [[UInt8]] {
        let plan = query.sqlPlan(firstParameter: 2)
        // The text is assembled from TransactionQuery's fixed fragments and placeholders only.
        let sql = SQL(unsafeSQL: """
            SELECT payload::text AS payload FROM finance_transaction
             WHERE merchant_id = $1 AND \(plan.whereSQL)
             ORDER BY \(plan.orderBySQL)
             LIMIT $\(plan.bindings.count + 2) OFFSET $\(plan.bindings.count + 3)
            """, idempotent: true)
        return try payloads(conn.query(sql, [merchantId] + plan.bindings.map(encodable) + [plan.limit, plan.offset]))
    }

    /// Current balances, of one account or of all, ordered by account id.
    static func balances(merchantId: String, accountID: FinanceID?, limit: Int, on conn: PostgresConnection) throws -> [[UInt8]] {
        try payloads(conn.query(SQL(idempotent: """
            SELECT payload::text AS payload FROM finance_entity
             WHERE merchant_id = $1 AND scope_kind = 'account_balances'
               AND ($2::uuid IS NULL OR scope_id = $2::uuid)
             ORDER BY scope_id, entity_id
             LIMIT $3
            """), [merchantId, accountID?.description, limit]))
    }

    /// One page of the commit-ordered feed after `position` (one statement, one snapshot): the feed rows
    /// of the scope, each joined to its entity's current state (HistoryPageBuilder.build(feedRows:)).
    static func feedPage(scope: HistoryScope, after position: FeedPosition, pageSize: Int,
                         codec: HistoryTokenCodec, now: FinanceTimestamp,
                         on conn: PostgresConnection) throws -> FeedPage<[UInt8]> {
        // The page is cut first, then each row's entity is looked up by its primary key (a correlated
        // subquery, one index probe per row): a join lets a freshly filled, unanalysed feed table talk
        // the planner into scanning the merchant's whole entity set per row.
        let result = try conn.query(SQL(idempotent: """
            WITH page AS (
                SELECT f.position, f.op, f.entity_id, f.merchant_id, f.scope_kind, f.scope_id
                  FROM finance_feed f
                 WHERE f.merchant_id = $1 AND f.scope_kind = $2
                   AND f.scope_id = COALESCE($3::uuid, '00000000-0000-0000-0000-000000000000')
                   AND f.epoch = $4 AND f.position > $5
                 ORDER BY f.position
                 LIMIT $6)
            SELECT p.position, p.op, p.entity_id,
                   (SELECT e.payload::text FROM finance_entity e
                     WHERE e.merchant_id = p.merchant_id AND e.scope_kind = p.scope_kind
                       AND e.entity_id = p.entity_id AND e.scope_id = p.scope_id) AS payload
              FROM page p
             ORDER BY p.position
            """), [scope.merchantID, scope.resource.scopeKind, scope.accountID?.description, Int(position.epoch),
                   position.position, pageSize + 1])
        var rows: [FeedLogRow<[UInt8]>] = []
        rows.reserveCapacity(result.rows.count)
        for row in result.rows {
            guard let operation = ChangeOperation(rawValue: try row.decode(1, as: String.self)) else {
                throw FinanceError(.changeLogInvalid, detail: "feed row")
            }
            let payload: String? = try row.decodeIfPresent(3)
            rows.append(FeedLogRow(position: FeedPosition(epoch: position.epoch, position: try row.decode(0)),
                                   operation: operation, entityID: try FinanceID(parsing: try row.decode(2, as: String.self)),
                                   payload: payload.map { Array($0.utf8) }))
        }
        return try HistoryPageBuilder.build(feedRows: rows, after: position, pageSize: pageSize,
                                            scope: scope, codec: codec, now: now)
    }

    /// The feed position that resumes a v1 token exactly, or `history_token_invalid` (`not_in_feed`).
    ///
    /// A v1 token at `(xid, seq)` was delivered exactly the scope's change rows at or before it in
    /// `(xid, seq)` order (they were below the horizon when it was issued). The feed resumes it at the
    /// highest position among those rows when they are exactly the feed's rows up to that position; the
    /// feed's backfill numbers pre-feed rows in `(xid, seq)` order, so every token issued before the
    /// change maps. A token whose rows are interleaved with later commits (a v1 reader still running
    /// beside the feed) cannot be resumed without loss or repetition: 410, catch up again without `since`.
    static func feedPosition(resuming legacy: HistoryPosition, scope: HistoryScope,
                             on conn: PostgresConnection) throws -> FeedPosition {
        let row = try conn.query(SQL(idempotent: """
            WITH s AS (
                SELECT position, (xid, change_seq) <= ($5::xid8, $6::bigint) AS delivered FROM finance_feed
                 WHERE merchant_id = $1 AND scope_kind = $2
                   AND scope_id = COALESCE($3::uuid, '00000000-0000-0000-0000-000000000000') AND epoch = $4),
            d AS (SELECT coalesce(max(position), 0) AS last, count(*) AS n FROM s WHERE delivered)
            SELECT d.last, d.n, (SELECT count(*) FROM s WHERE s.position <= d.last) AS upto FROM d
            """), [scope.merchantID, scope.resource.scopeKind, scope.accountID?.description, Int(legacy.epoch),
                   String(legacy.xid), legacy.seq]).first
        guard let row else { throw FinanceError(.changeLogInvalid, detail: "legacy mapping") }
        let last: Int64 = try row.decode(0)
        guard try row.decode(1, as: Int64.self) == row.decode(2, as: Int64.self) else {
            throw FinanceError.tokenInvalid(.notInFeed)
        }
        return FeedPosition(epoch: legacy.epoch, position: last)
    }

    /// Where `token` (either version, or none: the origin) resumes in the feed of `scope`.
    static func resume(_ token: String?, scope: HistoryScope, codec: HistoryTokenCodec, now: FinanceTimestamp,
                       on conn: PostgresConnection) throws -> FeedPosition {
        let epoch = try FinanceEpoch.current(on: conn)
        guard let token else { return .origin(epoch: epoch) }
        switch try codec.resume(token, scope: scope, currentEpoch: epoch, now: now) {
        case .feed(let position): return position
        case .changeLog(let legacy): return try feedPosition(resuming: legacy, scope: scope, on: conn)
        }
    }

    /// `{"<name>":[…]}` from pre-encoded JSON objects.
    static func listBody(_ name: String, _ items: [[UInt8]]) -> [UInt8] {
        var out = Array("{\"\(name)\":[".utf8)
        for (index, item) in items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += item
        }
        return out + Array("]}".utf8)
    }

    private static func payloads(_ result: PostgresResult) throws -> [[UInt8]] {
        try result.rows.map { Array(try $0.decode("payload", as: String.self).utf8) }
    }

    /// A plan binding as a text parameter (arrays in PostgreSQL's array literal form, elements quoted).
    static func encodable(_ binding: SQLBinding) -> any PostgresEncodable {
        func quoted(_ text: String) -> String {
            "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        switch binding {
        case .uuid(let id): return id.description
        case .text(let text): return text
        case .textArray(let items): return "{" + items.map(quoted).joined(separator: ",") + "}"
        case .int16Array(let items): return "{" + items.map { String($0) }.joined(separator: ",") + "}"
        case .timestamp(let time): return time.description
        }
    }
}
