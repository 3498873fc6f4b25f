// The history page builder and the change-log read the PostgreSQL shell must run
// (finance-store.md §2.5, §5.3, §5.5; reliability-security.md §4).

/// The change-log algorithm, as the SQL the shell runs. Read it before writing the shell.
///
/// Writing (same database transaction as the domain change, transactional outbox):
/// ```sql
/// CREATE TABLE finance_change (
///   merchant_id text NOT NULL, scope_kind text NOT NULL, scope_id uuid,     -- HistoryScope
///   epoch int NOT NULL, xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
///   seq bigint GENERATED ALWAYS AS IDENTITY, op text NOT NULL CHECK (op IN ('insert','update','delete')),
///   entity_id uuid NOT NULL, payload jsonb, written_at timestamptz NOT NULL DEFAULT now());
/// CREATE INDEX ON finance_change (merchant_id, scope_kind, scope_id, epoch, xid, seq);
/// ```
/// One row per `FinanceChange` (and one `update` per affected balance) in the writer's transaction.
///
/// Reading one page (`ChangeFeedSQL.readPage`): a single statement, so the horizon and the rows come
/// from one snapshot (Marten #4977: two statements under READ COMMITTED can skip rows):
/// rows strictly after the token's `(xid, seq)` **and** `xid < pg_snapshot_xmin(pg_current_snapshot())`,
/// ordered by `(xid, seq)`, `LIMIT pageSize + 1`, returning the horizon alongside. Every transaction with
/// an xid below the horizon has finished (committed or rolled back), so a row that is not visible yet
/// always has `xid ≥ horizon` and will be read later: a late commit stalls the feed, never skips a row.
/// Sequence cursors (`seq > last`) do skip such rows, because sequences are taken at INSERT, not COMMIT.
/// The shell then calls `HistoryPageBuilder.build` with those rows and the horizon.
///
/// Retention (`changeLogRetentionSeconds`): delete a row only when it is older than the retention
/// **and** superseded by a later row for the same entity, or is a delete tombstone older than the
/// retention. The latest row of every live entity stays, so catch-up from the origin (no `since`) rebuilds
/// the full current state; a token older than the retention is refused (`expired`), never reset.
/// Operations: set `idle_in_transaction_session_timeout` and `statement_timeout` below
/// `writeTransactionMaxSeconds`, read on the primary, and alert on feed lag (a long transaction anywhere
/// in the cluster holds the horizon back).
public enum ChangeFeedSQL {
    /// One page: `$1` merchant, `$2` scope kind, `$3` scope id (NULL for accounts), `$4` epoch,
    /// `$5` xid (text, cast to xid8), `$6` seq, `$7` page size + 1. Returns the horizon in every row.
    public static let readPage = """
        SELECT c.xid::text, c.seq, c.op, c.entity_id, c.payload::text, h.horizon::text
          FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon) h
          JOIN finance_change c
            ON c.merchant_id = $1 AND c.scope_kind = $2 AND c.scope_id IS NOT DISTINCT FROM $3
           AND c.epoch = $4 AND (c.xid, c.seq) > ($5::xid8, $6) AND c.xid < h.horizon
         ORDER BY c.xid, c.seq
         LIMIT $7
        """
}

/// What happened to an entity in one change-log row.
public enum ChangeOperation: String, Sendable, CaseIterable {
    /// Created.
    case insert
    /// Changed (status change, balance recomputed).
    case update
    /// Removed from the scope (erasure, scope change, merge); `payload` is nil.
    case delete
}

/// One change-log row as the shell read it.
public struct ChangeLogRow<Payload: Sendable>: Sendable {
    /// `(epoch, xid, seq)` of the row.
    public let position: HistoryPosition
    /// Insert, update or delete.
    public let operation: ChangeOperation
    /// The entity's id.
    public let entityID: FinanceID
    /// The entity after the change; nil exactly for deletes.
    public let payload: Payload?

    /// Creates a row.
    public init(position: HistoryPosition, operation: ChangeOperation, entityID: FinanceID, payload: Payload?) {
        self.position = position
        self.operation = operation
        self.entityID = entityID
        self.payload = payload
    }
}

/// FinanceKit `Changes` plus `hasMore` (§5.3): each entity at most once, with its latest state.
public struct HistoryPage<Payload: Sendable>: Sendable {
    /// Entities new to the client.
    public let inserted: [Payload]
    /// Entities the client already had, in their latest state.
    public let updated: [Payload]
    /// Ids the client must drop.
    public let deleted: [FinanceID]
    /// Resumable on its own: it points after the last row of this page.
    public let newToken: String
    /// The position inside `newToken`.
    public let newPosition: HistoryPosition
    /// True when more rows are already below the horizon: fetch again at once.
    public let hasMore: Bool
}

extension HistoryPage: Encodable where Payload: Encodable {
    private enum CodingKeys: String, CodingKey { case inserted, updated, deleted, newToken, hasMore }

    /// `{"inserted":[…],"updated":[…],"deleted":[…],"newToken":"…","hasMore":…}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(inserted, forKey: .inserted)
        try c.encode(updated, forKey: .updated)
        try c.encode(deleted, forKey: .deleted)
        try c.encode(newToken, forKey: .newToken)
        try c.encode(hasMore, forKey: .hasMore)
    }
}

extension HistoryPage where Payload == [UInt8] {
    /// The JSON body when payloads are pre-encoded JSON objects (the `payload::text` column as bytes):
    /// the shell streams catch-up without decoding and re-encoding every entity.
    public func jsonBody() -> [UInt8] {
        func array(_ items: [[UInt8]]) -> [UInt8] {
            var out: [UInt8] = [UInt8(ascii: "[")]
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out += item
            }
            return out + [UInt8(ascii: "]")]
        }
        // Ids and base64url tokens contain no characters that need JSON escaping.
        return Array("{\"inserted\":".utf8) + array(inserted) + Array(",\"updated\":".utf8) + array(updated)
            + Array(",\"deleted\":".utf8) + array(deleted.map { Array("\"\($0)\"".utf8) })
            + Array(",\"newToken\":\"\(newToken)\",\"hasMore\":\(hasMore)}".utf8)
    }
}

/// Turns change-log rows into one history page (pure).
public enum HistoryPageBuilder {
    /// Builds a page from rows read after `position`, keeping only rows below `horizon` (the snapshot's
    /// `pg_snapshot_xmin`), at most `pageSize` of them.
    ///
    /// `rows` must be sorted by `(xid, seq)`, all after `position` and in its epoch (`change_log_invalid`
    /// otherwise); pass up to `pageSize + 1` rows so `hasMore` can be told. Dedup within the page (§5.3),
    /// by the entity's first and last row in the page:
    /// - first `insert`, last not `delete` → `inserted` with the latest payload;
    /// - first `insert`, last `delete` → omitted (the client never had it);
    /// - first `update`/`delete`, last not `delete` → `updated` with the latest payload;
    /// - first `update`/`delete`, last `delete` → `deleted`.
    /// Entities appear in the order of their first row.
    public static func build<Payload: Sendable>(
        rows: [ChangeLogRow<Payload>], after position: HistoryPosition, horizon: UInt64, pageSize: Int,
        scope: HistoryScope, codec: HistoryTokenCodec, now: FinanceTimestamp
    ) throws(FinanceError) -> HistoryPage<Payload> {
        precondition(pageSize >= 1, "page size is validated by the caller")
        var previous = position
        var eligible = 0
        for row in rows {
            guard row.position.epoch == position.epoch, row.position > previous else {
                throw FinanceError(.changeLogInvalid, detail: "rows not ascending after the token position")
            }
            guard (row.payload == nil) == (row.operation == .delete) else {
                throw FinanceError(.changeLogInvalid, detail: "payload must be absent exactly for deletes")
            }
            previous = row.position
            // Sorted by xid: the first row at or above the horizon ends what may be read now.
            if row.position.xid >= horizon { break }
            eligible += 1
        }
        let taken = rows.prefix(min(eligible, pageSize))

        var order: [FinanceID] = []
        var first: [FinanceID: ChangeOperation] = [:]
        var last: [FinanceID: ChangeLogRow<Payload>] = [:]
        for row in taken {
            if first[row.entityID] == nil {
                first[row.entityID] = row.operation
                order.append(row.entityID)
            }
            last[row.entityID] = row
        }
        var inserted: [Payload] = []
        var updated: [Payload] = []
        var deleted: [FinanceID] = []
        for id in order {
            guard let firstOperation = first[id], let latest = last[id] else { continue }
            switch (firstOperation == .insert, latest.payload) {
            case (true, let payload?): inserted.append(payload)
            case (true, nil): break
            case (false, let payload?): updated.append(payload)
            case (false, nil): deleted.append(id)
            }
        }
        let newPosition = taken.last?.position ?? position
        return HistoryPage(inserted: inserted, updated: updated, deleted: deleted,
                           newToken: codec.issue(scope: scope, position: newPosition, now: now),
                           newPosition: newPosition, hasMore: eligible > pageSize)
    }
}
