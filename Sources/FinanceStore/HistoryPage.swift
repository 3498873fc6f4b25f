// The history page builder and the change-log read the PostgreSQL shell must run
// (docs/finance-store.md §2.5, §5.3, §5.5; docs/reliability-security.md §4).

/// The change-log algorithm of the horizon reader, which issued v1 tokens. History is now served from the
/// commit-ordered feed (`HistoryPageBuilder.build(feedRows:)`, docs/finance-feed.md); this reader's rules
/// stay because they define what a v1 token was delivered, and the simulation tests check them.
///
/// Writing, in the same database transaction as the domain change (transactional outbox):
/// ```sql
/// CREATE TABLE finance_entity (            -- current FinanceKit JSON of every entity, per scope
///   merchant_id text, scope_kind text, scope_id uuid, entity_id uuid, payload jsonb NOT NULL,
///   PRIMARY KEY (merchant_id, scope_kind, entity_id));
/// CREATE TABLE finance_change (            -- one row per change: a notification, no payload
///   merchant_id text NOT NULL, scope_kind text NOT NULL, scope_id uuid,
///   epoch int NOT NULL, xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
///   seq bigint GENERATED ALWAYS AS IDENTITY, op text NOT NULL CHECK (op IN ('insert','update','delete')),
///   entity_id uuid NOT NULL, written_at timestamptz NOT NULL DEFAULT now());
/// CREATE INDEX ON finance_change (merchant_id, scope_kind, scope_id, epoch, xid, seq);
/// ```
/// Per `FinanceChange` (and per affected balance): upsert (or delete) the `finance_entity` row, then
/// insert a `finance_change` row.
///
/// Reading one page (`ChangeFeedSQL.readPage`), in a single statement so that the horizon, the change
/// rows and the entities' current state come from one snapshot (Marten #4977: two statements under
/// READ COMMITTED can skip rows): rows strictly after the token's `(xid, seq)` **and**
/// `xid < pg_snapshot_xmin(pg_current_snapshot())`, ordered by `(xid, seq)`, `LIMIT pageSize + 1`,
/// each joined to the entity's **current** payload (NULL when it is gone from the scope). Then
/// `HistoryPageBuilder.build`.
///
/// Why it never loses anything: every transaction with an xid below the horizon has finished, so a
/// row not yet visible always has `xid ≥ horizon` and is read later (a late commit stalls the feed,
/// never skips a row; a sequence cursor `seq > last` does skip it, because sequences are taken at
/// INSERT, not COMMIT). Why the payload is joined rather than logged: xid order is not commit order,
/// so two transactions changing one entity can log in the opposite order to the one they committed in;
/// serving the current state makes the last delivery for an entity always its latest committed state.
/// Re-deliveries of the same state are possible and harmless (clients upsert by id).
///
/// Retention (`changeLogRetentionSeconds`): delete a `finance_change` row only when it is older than the
/// retention and a later row exists for the same entity, or it is a delete older than the retention.
/// Each live entity keeps a row, so catch-up from the origin (no `since`) rebuilds the full current
/// state; a token older than the retention is refused (`expired`), never reset to "latest".
/// Operations: keep `idle_in_transaction_session_timeout` and `statement_timeout` below
/// `writeTransactionMaxSeconds`, read on the primary, alert on feed lag (a long transaction anywhere
/// in the cluster holds the horizon back).
public enum ChangeFeedSQL {
    /// One page: `$1` merchant, `$2` scope kind, `$3` scope id (NULL for accounts, stored as the nil
    /// UUID so that every condition is a plain equality the feed index serves), `$4` epoch,
    /// `$5` xid (text, cast to xid8), `$6` seq, `$7` page size + 1. Every row also carries the horizon.
    public static let readPage = """
        SELECT c.xid::text, c.seq, c.op, c.entity_id, e.payload::text, h.horizon::text
          FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon) h
          JOIN finance_change c
            ON c.merchant_id = $1 AND c.scope_kind = $2
           AND c.scope_id = COALESCE($3::uuid, '00000000-0000-0000-0000-000000000000')
           AND c.epoch = $4 AND (c.xid, c.seq) > ($5::xid8, $6) AND c.xid < h.horizon
          LEFT JOIN finance_entity e
            ON e.merchant_id = c.merchant_id AND e.scope_kind = c.scope_kind AND e.entity_id = c.entity_id
           AND e.scope_id = c.scope_id
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
    /// The entity's current state, read in the same snapshot; nil when it no longer exists in the scope.
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
    /// by the entity's first operation in the page and its current state (the last row's payload):
    /// - first `insert`, exists → `inserted`;
    /// - first `insert`, gone → omitted (the client never had it);
    /// - first `update`/`delete`, exists → `updated` (a delete then re-insert is an update to the client);
    /// - first `update`/`delete`, gone → `deleted`.
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
            previous = row.position
            // Sorted by xid: the first row at or above the horizon ends what may be read now.
            if row.position.xid >= horizon { break }
            eligible += 1
        }
        let taken = rows.prefix(min(eligible, pageSize))
        let (inserted, updated, deleted) = deduplicate(taken.map { ($0.entityID, $0.operation, $0.payload) })
        let newPosition = taken.last?.position ?? position
        return HistoryPage(inserted: inserted, updated: updated, deleted: deleted,
                           newToken: codec.issue(scope: scope, position: newPosition, now: now),
                           newPosition: newPosition, hasMore: eligible > pageSize)
    }

    /// A page of the commit-ordered feed (docs/finance-feed.md): no horizon, because a position is
    /// assigned only once its change committed and positions grow in commit order. Same dedup rules.
    ///
    /// `rows` must be ascending, after `position`, in its epoch (`change_log_invalid` otherwise); pass up
    /// to `pageSize + 1` rows so `hasMore` can be told.
    public static func build<Payload: Sendable>(
        feedRows rows: [FeedLogRow<Payload>], after position: FeedPosition, pageSize: Int,
        scope: HistoryScope, codec: HistoryTokenCodec, now: FinanceTimestamp
    ) throws(FinanceError) -> FeedPage<Payload> {
        precondition(pageSize >= 1, "page size is validated by the caller")
        var previous = position
        for row in rows {
            guard row.position.epoch == position.epoch, row.position > previous else {
                throw FinanceError(.changeLogInvalid, detail: "feed rows not ascending after the token position")
            }
            previous = row.position
        }
        let taken = rows.prefix(pageSize)
        let (inserted, updated, deleted) = deduplicate(taken.map { ($0.entityID, $0.operation, $0.payload) })
        let newPosition = taken.last?.position ?? position
        return FeedPage(inserted: inserted, updated: updated, deleted: deleted,
                        newToken: codec.issue(scope: scope, feedPosition: newPosition, now: now),
                        newPosition: newPosition, hasMore: rows.count > pageSize)
    }

    /// Each entity once, by its first operation in the page and its current state (the last row's payload).
    private static func deduplicate<Payload>(_ rows: [(FinanceID, ChangeOperation, Payload?)])
        -> (inserted: [Payload], updated: [Payload], deleted: [FinanceID]) {
        var order: [FinanceID] = []
        var first: [FinanceID: ChangeOperation] = [:]
        var last: [FinanceID: Payload?] = [:]
        for (id, operation, payload) in rows {
            if first[id] == nil {
                first[id] = operation
                order.append(id)
            }
            last[id] = payload
        }
        var inserted: [Payload] = []
        var updated: [Payload] = []
        var deleted: [FinanceID] = []
        for id in order {
            guard let firstOperation = first[id], let latest = last[id] else { continue }
            switch (firstOperation == .insert, latest) {
            case (true, let payload?): inserted.append(payload)
            case (true, nil): break
            case (false, let payload?): updated.append(payload)
            case (false, nil): deleted.append(id)
            }
        }
        return (inserted, updated, deleted)
    }
}

/// One `finance_feed` row as the shell read it.
public struct FeedLogRow<Payload: Sendable>: Sendable {
    /// `(epoch, position)` of the row.
    public let position: FeedPosition
    /// Insert, update or delete.
    public let operation: ChangeOperation
    /// The entity's id.
    public let entityID: FinanceID
    /// The entity's current state, read in the same snapshot; nil when it no longer exists in the scope.
    public let payload: Payload?

    /// Creates a row.
    public init(position: FeedPosition, operation: ChangeOperation, entityID: FinanceID, payload: Payload?) {
        self.position = position
        self.operation = operation
        self.entityID = entityID
        self.payload = payload
    }
}

/// A history page of the commit-ordered feed: FinanceKit `Changes` plus `hasMore`, as `HistoryPage`.
public struct FeedPage<Payload: Sendable>: Sendable {
    /// Entities new to the client.
    public let inserted: [Payload]
    /// Entities the client already had, in their latest state.
    public let updated: [Payload]
    /// Ids the client must drop.
    public let deleted: [FinanceID]
    /// Resumable on its own: it points after the last row of this page.
    public let newToken: String
    /// The position inside `newToken`.
    public let newPosition: FeedPosition
    /// True when more rows are already in the feed: fetch again at once.
    public let hasMore: Bool
}

extension FeedPage where Payload == [UInt8] {
    /// The JSON body from pre-encoded JSON objects (as `HistoryPage.jsonBody`).
    public func jsonBody() -> [UInt8] {
        HistoryPage(inserted: inserted, updated: updated, deleted: deleted, newToken: newToken,
                    newPosition: .origin(epoch: newPosition.epoch), hasMore: hasMore).jsonBody()
    }
}
