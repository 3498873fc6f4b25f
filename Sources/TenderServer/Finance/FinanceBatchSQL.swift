import Crypto
import FinanceStore
import HTTPServer
import Money
import Postgres

/// The statements of `FinanceRecorder.apply`, each with its row decoding: one read of the merchant and
/// the stored postings, one rewrite of the moved ones, one write of everything new, of the balances and of
/// the change log. Every column of a multi-row
/// write is one array parameter (`PGArray.text`) expanded by `unnest`, so the number of round trips
/// does not depend on the number of events.
enum FinanceBatchSQL {
    /// What the first round trip reads: the merchant's name (nil: no such merchant), the change-log epoch
    /// (nil: its row is missing) and the stored postings.
    struct OpeningRead {
        let merchantName: String?
        let epoch: Int?
        let stored: [String: FinanceBatchPlan.StoredPosting]
    }

    /// Round trip 1, one statement: the merchant's name and the change-log epoch, and the postings among
    /// `keys` that are already stored, with their legs, each locked `FOR UPDATE` (a status change reads,
    /// then rewrites it) in the order of `keys` (sorted here, so two batches lock shared postings in the
    /// same order), with its row id for the rewrite. With no keys it reads the merchant and the epoch only.
    ///
    /// Each key is looked up on its own, through the primary key (the LATERAL subqueries cannot be
    /// flattened into joins): planner statistics that still think a new merchant has no rows (the state
    /// after its first busy day) then cannot turn the lookup into a scan of all the merchant's rows per key.
    ///
    /// At most one key (a single event: a payment, a refund) goes as a plain text parameter, not a
    /// one-element array: a prepared statement's generic plan assumes an unnested array holds 100 keys, so
    /// the planner found each custom plan cheaper and planned the statement again on every execution
    /// (0.27 ms of planning for 0.05 ms of work). A NULL key matches no posting.
    static func openingRead(_ keys: [String], merchantId: String, on conn: PostgresConnection) throws -> OpeningRead {
        let result = keys.count <= 1
            ? try conn.query(openingReadOne, [merchantId, keys.first])
            : try conn.query(openingReadMany, [merchantId, PGArray.text(keys.sorted())])
        return try decodeOpeningRead(result)
    }

    /// The two fixed texts of the opening read (drawn from this file only: preparable).
    private static let openingReadOne = SQL(
        unsafeSQL: openingReadSQL(keySource: "(SELECT $2::text AS posting_key, 1::bigint AS ord) k"), preparable: true)
    private static let openingReadMany = SQL(
        unsafeSQL: openingReadSQL(keySource: "unnest($2::text[]) WITH ORDINALITY AS k(posting_key, ord)"), preparable: true)

    private static func openingReadSQL(keySource: String) -> String {
        """
            SELECT m.display_name AS merchant_name, (SELECT epoch FROM finance_epoch) AS epoch, s.*, e.side,
                   e.amount_minor, a.account_key, a.ledger_class, a.currency_code, a.exposed, a.display_name,
                   a.institution_name
              FROM merchants m
              LEFT JOIN LATERAL (
                   SELECT k.ord, f.ctid::text AS row_id, f.posting_key, f.transaction_type,
                          extract(epoch FROM f.transaction_date)::bigint AS transaction_date, f.status,
                          extract(epoch FROM f.posted_date)::bigint AS posted_date, f.description,
                          f.original_description, f.fingerprint
                     FROM \(keySource)
                    CROSS JOIN LATERAL (
                          SELECT f.ctid, f.* FROM finance_postings f
                           WHERE f.merchant_id = $1 AND f.posting_key = k.posting_key
                             FOR UPDATE) f
                   OFFSET 0) s ON true
              LEFT JOIN LATERAL (
                   SELECT x.leg, x.side, x.amount_minor, x.account_key FROM finance_entries x
                    WHERE x.merchant_id = $1 AND x.posting_key = s.posting_key
                    ORDER BY x.leg
                   OFFSET 0) e ON true
              LEFT JOIN finance_ledger_accounts a ON a.merchant_id = $1 AND a.account_key = e.account_key
             WHERE m.merchant_id = $1
             ORDER BY s.ord, e.leg
            """
    }

    private static func decodeOpeningRead(_ result: PostgresResult) throws -> OpeningRead {
        guard let first = result.rows.first else { return OpeningRead(merchantName: nil, epoch: nil, stored: [:]) }
        var stored: [String: FinanceBatchPlan.StoredPosting] = [:]
        var index = 0
        // A merchant without stored postings among the keys is one row without a posting.
        let rows = try first.decodeIfPresent("posting_key", as: String.self) == nil ? [] : result.rows
        while index < rows.count {
            let head = rows[index]
            let key: String = try head.decode("posting_key")
            var entries: [LedgerEntry] = []
            while index < rows.count, try rows[index].decode("posting_key", as: String.self) == key {
                let e = rows[index]
                index += 1
                guard let sideText: String = try e.decodeIfPresent("side") else { continue }  // no legs: refused below
                guard let side = LedgerSide(rawValue: sideText),
                      let ledgerClass = LedgerAccountClass(rawValue: try e.decode("ledger_class")) else {
                    throw FinanceError(.changeLogInvalid, detail: "stored entry of \(key)")
                }
                let account = LedgerAccount(key: try e.decode("account_key"), ledgerClass: ledgerClass,
                                            currencyCode: try e.decode("currency_code"), exposed: try e.decode("exposed"),
                                            displayName: try e.decode("display_name"),
                                            institutionName: try e.decode("institution_name"))
                entries.append(LedgerEntry(account: account, side: side, amountMinor: try e.decode("amount_minor")))
            }
            guard let type = TransactionType(rawValue: try head.decode("transaction_type")),
                  let status = TransactionStatus(rawValue: try head.decode("status")) else {
                throw FinanceError(.changeLogInvalid, detail: "stored posting \(key)")
            }
            let posted: Int64? = try head.decodeIfPresent("posted_date")
            let posting = try Posting(key: key, entries: entries, transactionType: type,
                                      transactionDate: FinanceTimestamp(secondsSinceEpoch: try head.decode("transaction_date")),
                                      status: status, postedDate: posted.map(FinanceTimestamp.init(secondsSinceEpoch:)),
                                      transactionDescription: try head.decode("description"),
                                      originalTransactionDescription: try head.decode("original_description"))
            stored[key] = FinanceBatchPlan.StoredPosting(rowID: try head.decode("row_id"),
                                                         fingerprint: try head.decode("fingerprint"), posting: posting)
        }
        return OpeningRead(merchantName: try first.decodeIfPresent("merchant_name"), epoch: try first.decodeIfPresent("epoch"),
                           stored: stored)
    }

    /// Round trips 2 and 3: writes `plan` and logs every changed entity.
    static func write(_ plan: FinanceBatchPlan, merchantId: String, epoch: UInt32, asOf: FinanceTimestamp,
                      on conn: PostgresConnection) throws {
        // Each changed transaction is encoded once: the same JSON goes to its row and to its entity.
        let transactions = try plan.changedTransactions.map { item in
            TransactionRow(transaction: item.transaction, postingKey: item.postingKey, isNew: item.isNew,
                           payload: try json(item.transaction))
        }
        let accountViews = try plan.accountViews.map { (view: $0, payload: try json($0)) }
        let moved = plan.movedPostings
        if !moved.isEmpty {
            try writeMoves(moved, transactions: transactions.filter { !$0.isNew }, merchantId: merchantId, on: conn)
        }
        // The change log is written by the same statement (`insertsStatement`): the created accounts' rows
        // (only the statement knows which it created), every changed transaction's, and every touched
        // balance's (an insert when its account was created, else an update). A balance's JSON is not
        // stored: `finance_entity` builds it from the shards' sum when read (migrations/0022).
        let changes = transactions.map { row in
            Change(scopeKind: "transactions", scopeID: row.transaction.accountID, entityID: row.transaction.id,
                   op: row.isNew ? .insert : .update, payload: row.payload)
        }
        let written = try writeInserts(plan, transactions: transactions.filter(\.isNew), accountViews: accountViews,
                                       changes: changes, epoch: epoch, asOf: asOf, merchantId: merchantId, on: conn)
        for (accountID, _) in plan.balanceChanges where !written.balances.contains(accountID) {
            throw FinanceError(.changeLogInvalid, detail: "balance row missing")
        }
    }

    /// A changed FinanceKit transaction in its final state, with its JSON.
    struct TransactionRow {
        let transaction: Transaction
        let postingKey: String
        /// Created by the batch (INSERT); otherwise rewritten (UPDATE).
        let isNew: Bool
        let payload: String
    }

    /// One changed transaction's `finance_change` row and `finance_entity_stored` upsert; the plan yields
    /// each entity once.
    struct Change {
        let scopeKind: String
        let scopeID: FinanceID
        let entityID: FinanceID
        let op: ChangeOperation
        let payload: String
    }

    /// Round trip 2 (only when the batch moves postings stored before it), one statement: rewrites their
    /// status and their transactions to the final state.
    ///
    /// Rewrites go by row id (`ctid`), never through a join the planner may turn into a scan of the
    /// merchant's rows when its statistics are stale: a posting by the id round trip 1 read under lock;
    /// a transaction by a per-row lookup (LATERAL, not flattened) that names a column of every index of
    /// `finance_transaction` besides `merchant_id`, so that any index the planner picks finds the one row.
    private static func writeMoves(_ moved: [(rowID: String, posting: Posting)], transactions: [TransactionRow],
                                   merchantId: String, on conn: PostgresConnection) throws {
        guard let counts = try conn.query("""
            WITH moved_postings AS (
                UPDATE finance_postings f SET status = m.status, posted_date = m.posted_date, updated_at = now()
                  FROM unnest($2::tid[], $3::text[], $4::text[], $5::timestamptz[])
                       AS m(row_id, posting_key, status, posted_date)
                 WHERE f.ctid = m.row_id AND f.merchant_id = $1 AND f.posting_key = m.posting_key
                RETURNING 1),
            moved_transactions AS (
                UPDATE finance_transaction f SET status = m.status, posted_date = m.posted_date, payload = m.payload
                  FROM unnest($6::uuid[], $7::uuid[], $8::text[], $9::timestamptz[], $10::text[], $11::timestamptz[],
                              $12::jsonb[])
                       AS m(id, account_id, posting_key, transaction_date, status, posted_date, payload)
                 CROSS JOIN LATERAL (
                       SELECT t.ctid AS row_id FROM finance_transaction t
                        WHERE t.merchant_id = $1 AND t.id = m.id AND t.account_id = m.account_id
                          AND t.posting_key = m.posting_key AND t.transaction_date = m.transaction_date
                       OFFSET 0) x
                 WHERE f.ctid = x.row_id
                RETURNING 1)
            SELECT (SELECT count(*) FROM moved_postings)::int AS postings,
                   (SELECT count(*) FROM moved_transactions)::int AS transactions
            """, [merchantId,
                  PGArray.text(moved.map(\.rowID)),
                  PGArray.text(moved.map(\.posting.key)),
                  PGArray.text(moved.map(\.posting.status.rawValue)),
                  PGArray.text(moved.map { $0.posting.postedDate?.description }),
                  PGArray.text(transactions.map(\.transaction.id.description)),
                  PGArray.text(transactions.map(\.transaction.accountID.description)),
                  PGArray.text(transactions.map(\.postingKey)),
                  PGArray.text(transactions.map(\.transaction.transactionDate.description)),
                  PGArray.text(transactions.map(\.transaction.status.rawValue)),
                  PGArray.text(transactions.map { $0.transaction.postedDate?.description }),
                  PGArray.text(transactions.map(\.payload))]).first else {
            throw FinanceError(.changeLogInvalid, detail: "move returned nothing")
        }
        // Every row was read under lock in round trip 1 (or belongs to a posting that was): all must be there.
        guard try counts.decode("postings", as: Int.self) == moved.count,
              try counts.decode("transactions", as: Int.self) == transactions.count else {
            throw FinanceError(.changeLogInvalid, detail: "a moved posting or transaction was not rewritten")
        }
    }

    /// `writeInserts`' one statement: accounts, postings, legs, finance accounts, balances, transactions.
    private static let insertsStatement: SQL = """
            WITH acc AS (
                INSERT INTO finance_ledger_accounts (merchant_id, account_key, ledger_class, currency_code, exposed,
                                                     account_id, display_name, institution_name)
                SELECT $1, a.* FROM unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::uuid[], $7::text[],
                                           $8::text[]) AS a
                ON CONFLICT (merchant_id, account_key) DO NOTHING
                RETURNING account_id),
            new_postings AS (
                INSERT INTO finance_postings (merchant_id, posting_key, transaction_type, transaction_date, status,
                                              posted_date, description, original_description, fingerprint)
                SELECT $1, p.posting_key, p.transaction_type, p.transaction_date, p.status, p.posted_date,
                       p.description, p.original_description, decode(p.fingerprint, 'hex')
                  FROM unnest($9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::timestamptz[], $14::text[],
                              $15::text[], $16::text[])
                       AS p(posting_key, transaction_type, transaction_date, status, posted_date, description,
                            original_description, fingerprint)
                RETURNING 1),
            legs AS (
                INSERT INTO finance_entries (merchant_id, posting_key, leg, account_key, side, amount_minor, currency_code)
                SELECT $1, e.* FROM unnest($17::text[], $18::smallint[], $19::text[], $20::text[], $21::bigint[],
                                           $22::text[]) AS e
                RETURNING 1),
            fa AS (
                INSERT INTO finance_account (merchant_id, id, kind, currency_code, display_name, payload)
                SELECT $1, v.* FROM unnest($23::uuid[], $24::text[], $25::text[], $26::text[], $27::jsonb[])
                       AS v(id, kind, currency_code, display_name, payload)
                 WHERE v.id IN (SELECT account_id FROM acc)
                RETURNING 1),
            bal AS (
                INSERT INTO finance_balance_shard AS s (merchant_id, account_id, shard, balance_id, currency_code,
                                                        minor_digits, booked_minor, available_minor, as_of_seconds)
                SELECT $1, b.account_id, (pg_current_xact_id()::text::bigint % 64)::smallint, b.balance_id,
                       b.currency_code, b.digits, b.booked, b.available, $46
                  FROM unnest($28::uuid[], $29::text[], $30::bigint[], $31::bigint[], $44::uuid[], $45::smallint[])
                       WITH ORDINALITY AS b(account_id, currency_code, booked, available, balance_id, digits, ord)
                 ORDER BY b.ord
                ON CONFLICT (merchant_id, account_id, shard) DO UPDATE
                   SET booked_minor = s.booked_minor + EXCLUDED.booked_minor,
                       available_minor = s.available_minor + EXCLUDED.available_minor,
                       as_of_seconds = greatest(s.as_of_seconds, EXCLUDED.as_of_seconds)
                RETURNING account_id),
            new_transactions AS (
                INSERT INTO finance_transaction (merchant_id, id, account_id, posting_key, status, transaction_type,
                    credit_debit_indicator, merchant_category_code, transaction_date, posted_date, amount_minor,
                    currency_code, payload)
                SELECT $1, t.* FROM unnest($32::uuid[], $33::uuid[], $34::text[], $35::text[], $36::text[], $37::text[],
                                           $38::smallint[], $39::timestamptz[], $40::timestamptz[], $41::bigint[],
                                           $42::text[], $43::jsonb[]) AS t
                RETURNING 1),
            changes AS (
                SELECT 0 AS grp, v.ord, 'accounts'::text AS scope_kind, '00000000-0000-0000-0000-000000000000'::uuid AS scope_id,
                       v.id AS entity_id, 'insert'::text AS op, v.payload
                  FROM unnest($23::uuid[], $27::jsonb[]) WITH ORDINALITY AS v(id, payload, ord)
                 WHERE v.id IN (SELECT account_id FROM acc)
                UNION ALL
                SELECT 1, c.ord, c.scope_kind, c.scope_id, c.entity_id, c.op, c.payload
                  FROM unnest($47::text[], $48::uuid[], $49::uuid[], $50::text[], $51::jsonb[])
                       WITH ORDINALITY AS c(scope_kind, scope_id, entity_id, op, payload, ord)
                UNION ALL
                SELECT 2, b.ord, 'account_balances', b.account_id, b.balance_id,
                       CASE WHEN b.account_id IN (SELECT account_id FROM acc) THEN 'insert' ELSE 'update' END, NULL::jsonb
                  FROM unnest($28::uuid[], $44::uuid[]) WITH ORDINALITY AS b(account_id, balance_id, ord)),
            ent AS (
                INSERT INTO finance_entity_stored (merchant_id, scope_kind, scope_id, entity_id, payload)
                SELECT $1, scope_kind, scope_id, entity_id, payload FROM changes WHERE payload IS NOT NULL ORDER BY grp, ord
                ON CONFLICT (merchant_id, scope_kind, entity_id)
                DO UPDATE SET payload = EXCLUDED.payload, scope_id = EXCLUDED.scope_id
                RETURNING 1),
            chg AS (
                INSERT INTO finance_change (merchant_id, scope_kind, scope_id, epoch, op, entity_id)
                SELECT $1, scope_kind, scope_id, $52, op, entity_id FROM changes ORDER BY grp, ord
                RETURNING 1)
            SELECT 'account' AS kind, account_id::text AS account_id, NULL::bigint AS booked_minor,
                   NULL::bigint AS available_minor
              FROM acc
            UNION ALL
            SELECT 'balance', account_id::text, NULL, NULL FROM bal
        """

    /// Round trip 3, one statement: creates the ledger accounts on first use (a FinanceKit account and
    /// balance only for the exposed ones this statement creates: a concurrent first use keeps its own,
    /// issue 6 item 2 "created on first use"), inserts the new postings in their final state with their
    /// legs and transactions, and adds the balance deltas in account-id order (a fixed lock order, so
    /// writers cannot deadlock), each to the shard row its transaction id chooses (one of 64 per account,
    /// migrations/0022: concurrent writers of one account almost never wait on each other, and the shard's
    /// row lock keeps each sum exact), then stores the JSON of every changed account and transaction and
    /// appends the change log (`write`). Returns the accounts created and the accounts whose balance it wrote.
    private static func writeInserts(
        _ plan: FinanceBatchPlan, transactions: [TransactionRow], accountViews: [(view: Account, payload: String)],
        changes: [Change], epoch: UInt32, asOf: FinanceTimestamp, merchantId: String, on conn: PostgresConnection
    ) throws -> (createdAccounts: Set<FinanceID>, balances: Set<FinanceID>) {
        let identity = plan.context.identity
        // Key order: two batches creating the same accounts wait on each other's keys in one order.
        let accounts = plan.ledgerAccounts.sorted { $0.key < $1.key }
        let newPostings = plan.newPostings
        let legs = newPostings.flatMap { posting in
            posting.entries.enumerated().map { (postingKey: posting.key, leg: $0.offset, entry: $0.element) }
        }
        let balances = plan.balanceChanges
        let result = try conn.query(Self.insertsStatement, [merchantId,
                  PGArray.text(accounts.map(\.key)),
                  PGArray.text(accounts.map(\.ledgerClass.rawValue)),
                  PGArray.text(accounts.map(\.currencyCode)),
                  PGArray.text(accounts.map { $0.exposed ? "t" : "f" }),
                  PGArray.text(accounts.map { identity.id("account", $0.key).description }),
                  PGArray.text(accounts.map(\.displayName)),
                  PGArray.text(accounts.map(\.institutionName)),
                  PGArray.text(newPostings.map(\.key)),
                  PGArray.text(newPostings.map(\.transactionType.rawValue)),
                  PGArray.text(newPostings.map(\.transactionDate.description)),
                  PGArray.text(newPostings.map(\.status.rawValue)),
                  PGArray.text(newPostings.map { $0.postedDate?.description }),
                  PGArray.text(newPostings.map(\.transactionDescription)),
                  PGArray.text(newPostings.map(\.originalTransactionDescription)),
                  PGArray.text(newPostings.map { hexEncoded(plan.fingerprint(of: $0.key)) }),
                  PGArray.text(legs.map(\.postingKey)),
                  PGArray.text(legs.map { String($0.leg) }),
                  PGArray.text(legs.map(\.entry.account.key)),
                  PGArray.text(legs.map(\.entry.side.rawValue)),
                  PGArray.text(legs.map { String($0.entry.amountMinor) }),
                  PGArray.text(legs.map(\.entry.account.currencyCode)),
                  PGArray.text(accountViews.map(\.view.id.description)),
                  PGArray.text(accountViews.map(\.view.kind.rawValue)),
                  PGArray.text(accountViews.map(\.view.currencyCode)),
                  PGArray.text(accountViews.map(\.view.displayName)),
                  PGArray.text(accountViews.map(\.payload)),
                  PGArray.text(balances.map(\.accountID.description)),
                  PGArray.text(balances.map(\.delta.currencyCode)),
                  PGArray.text(balances.map { String($0.delta.bookedMinor) }),
                  PGArray.text(balances.map { String($0.delta.availableMinor) }),
                  PGArray.text(transactions.map(\.transaction.id.description)),
                  PGArray.text(transactions.map(\.transaction.accountID.description)),
                  PGArray.text(transactions.map(\.postingKey)),
                  PGArray.text(transactions.map(\.transaction.status.rawValue)),
                  PGArray.text(transactions.map(\.transaction.transactionType.rawValue)),
                  PGArray.text(transactions.map(\.transaction.creditDebitIndicator.rawValue)),
                  PGArray.text(transactions.map { $0.transaction.merchantCategoryCode.map { String($0) } }),
                  PGArray.text(transactions.map(\.transaction.transactionDate.description)),
                  PGArray.text(transactions.map { $0.transaction.postedDate?.description }),
                  PGArray.text(transactions.map { String($0.transaction.transactionAmount.amountMinor) }),
                  PGArray.text(transactions.map(\.transaction.transactionAmount.currencyCode)),
                  PGArray.text(transactions.map(\.payload)),
                  PGArray.text(balances.map { FinanceBalances.balanceID(of: $0.accountID, identity: identity).description }),
                  PGArray.text(try balances.map { String(try minorDigits($0.delta.currencyCode)) }),
                  asOf.secondsSinceEpoch,
                  PGArray.text(changes.map(\.scopeKind)),
                  PGArray.text(changes.map(\.scopeID.description)),
                  PGArray.text(changes.map(\.entityID.description)),
                  PGArray.text(changes.map(\.op.rawValue)),
                  PGArray.text(changes.map(\.payload)),
                  Int(epoch)])
        var created = Set<FinanceID>()
        var stored = Set<FinanceID>()
        for row in result.rows {
            let id = try FinanceID(parsing: try row.decode("account_id"))
            if try row.decode("kind", as: String.self) == "account" {
                created.insert(id)
            } else {
                stored.insert(id)
            }
        }
        return (created, stored)
    }

    /// The currency's minor digits, stored with each balance shard so that reads can format its amounts.
    static func minorDigits(_ currencyCode: String) throws -> Int {
        do { return try Currency(code: currencyCode).minorUnits } catch {
            throw FinanceError(.currencyUnknown, field: "currencyCode", detail: String(currencyCode.prefix(8)))
        }
    }

    static func accountBalance(accountID: FinanceID, currency: String, booked: Int64, available: Int64,
                               asOf: FinanceTimestamp, identity: FinanceIdentity) throws -> AccountBalance {
        func side(_ sum: Int64) throws -> Balance {
            guard sum != Int64.min else { throw FinanceError(.amountOverflow, detail: "balance") }
            return Balance(amount: try CurrencyAmount(amountMinor: Int64(sum.magnitude), currencyCode: currency),
                           asOfDate: asOf, creditDebitIndicator: sum >= 0 ? .credit : .debit)
        }
        return AccountBalance(id: FinanceBalances.balanceID(of: accountID, identity: identity), accountID: accountID,
                              currentBalance: .availableAndBooked(available: try side(available), booked: try side(booked)))
    }

    /// The sorted-keys JSON of a FinanceKit value: `JSONBytesEncoder` writes `JSONCoding.encoder`'s exact
    /// bytes without Foundation's boxing (Foundation's encoder was about a quarter of a settlement
    /// chunk's instructions in Tender).
    static func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONBytesEncoder.bytes(value), as: UTF8.self)
    }
}
