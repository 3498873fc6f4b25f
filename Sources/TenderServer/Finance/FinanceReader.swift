import FinanceStore
import Foundation
import Postgres

/// Reads of the finance store: FinanceKit queries and history pages, each one bound statement whose
/// text comes only from fixed fragments (the core's `sqlPlan` and `ChangeFeedSQL`).
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

    /// One history page after `position` (ChangeFeedSQL.readPage, one statement, one snapshot).
    static func historyPage(scope: HistoryScope, after position: HistoryPosition, pageSize: Int,
                            codec: HistoryTokenCodec, now: FinanceTimestamp,
                            on conn: PostgresConnection) throws -> HistoryPage<[UInt8]> {
        // ChangeFeedSQL.readPage is a fixed string of the core, with placeholders only.
        let result = try conn.query(SQL(unsafeSQL: ChangeFeedSQL.readPage, idempotent: true), [
            scope.merchantID, scope.resource.scopeKind, scope.accountID?.description, Int(position.epoch),
            String(position.xid), position.seq, pageSize + 1,
        ])
        var rows: [ChangeLogRow<[UInt8]>] = []
        rows.reserveCapacity(result.rows.count)
        var horizon: UInt64 = 0
        for row in result.rows {
            guard let xid = UInt64(try row.decode(0, as: String.self)),
                  let rowHorizon = UInt64(try row.decode(5, as: String.self)),
                  let operation = ChangeOperation(rawValue: try row.decode(2, as: String.self)) else {
                throw FinanceError(.changeLogInvalid, detail: "change row")
            }
            horizon = rowHorizon
            let payload: String? = try row.decodeIfPresent(4)
            rows.append(ChangeLogRow(position: HistoryPosition(epoch: position.epoch, xid: xid, seq: try row.decode(1)),
                                     operation: operation,
                                     entityID: try FinanceID(parsing: try row.decode(3, as: String.self)),
                                     payload: payload.map { Array($0.utf8) }))
        }
        return try HistoryPageBuilder.build(rows: rows, after: position, horizon: horizon, pageSize: pageSize,
                                            scope: scope, codec: codec, now: now)
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
