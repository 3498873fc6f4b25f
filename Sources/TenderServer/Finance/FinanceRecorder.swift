import Crypto
import FinanceStore
import Foundation
import HTTPServer
import Postgres

/// Writes business events into the finance store inside the caller's database transaction
/// (issue 6 item 2: "in the same database transaction as the payment outcome").
///
/// Per event it writes the posting and its legs, the FinanceKit views (accounts created on first use,
/// transactions, balances), one `finance_entity` upsert and one `finance_change` row per changed entity
/// (ChangeFeedSQL), and a `pg_notify` on `tender_finance` that wakes monitoring streams once it commits.
/// Re-applying an event is a no-op; the same event id with other content is `event_conflict`.
public struct FinanceRecorder: Sendable {
    /// The LISTEN/NOTIFY channel; the payload is the merchant id.
    public static let notifyChannel = "tender_finance"

    /// Bounds on event fields.
    public let limits: FinanceLimits

    /// Creates a recorder.
    public init(limits: FinanceLimits = FinanceLimits()) {
        self.limits = limits
    }

    /// Applies `event` for `merchantId` on `conn`, which must be inside a transaction the caller commits.
    ///
    /// Throws `FinanceError` (`event_invalid`, `event_conflict`, `posting_not_found`,
    /// `status_transition_invalid`…) or `PostgresError`; the caller then rolls back its transaction.
    public func apply(_ event: BusinessEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        // The merchant's name and the change-log epoch in one round trip (this runs inside every payment's
        // outcome transaction, so each round trip here lengthens the payment too).
        guard let row = try conn.query("""
            SELECT m.display_name, (SELECT epoch FROM finance_epoch) AS epoch FROM merchants m WHERE m.merchant_id = $1
            """, [merchantId]).first else {
            throw FinanceError(.eventInvalid, field: "merchantId", detail: "unknown merchant")
        }
        let context = FinanceContext(identity: FinanceStoreIdentity.identity(merchantId),
                                     merchantName: try row.decode("display_name"), limits: limits)
        let effect = try FinanceMapping.effect(of: event, context: context)
        if case .none = effect { return }
        guard let storedEpoch: Int = try row.decodeIfPresent("epoch"), let epoch = UInt32(exactly: storedEpoch) else {
            throw FinanceError(.changeLogInvalid, detail: "finance_epoch row missing")
        }
        var write = FinanceWrite(conn: conn, context: context, merchantId: merchantId, epoch: epoch,
                                 asOf: FinanceTimestamp(secondsSinceEpoch: Int64(now.timeIntervalSince1970.rounded(.down))))
        switch effect {
        case .none:
            return
        case .insert(let postings):
            for posting in postings { try write.insert(posting) }
        case let .transition(key, status, at):
            try write.transition(postingKey: key, to: status, at: at)
        }
        guard write.changed else { return }
        try write.writeBalances()
        try write.flush()
    }
}

/// Id derivation shared by writer and reader: SHA-256 (FinanceIdentity's injected digest).
enum FinanceStoreIdentity {
    static func identity(_ merchantId: String) -> FinanceIdentity {
        FinanceIdentity(merchantID: merchantId, digest: { Digest.sha256($0) })
    }
}

/// The change-log epoch (migrations/0007 `finance_epoch`).
enum FinanceEpoch {
    static func current(on conn: PostgresConnection) throws -> UInt32 {
        guard let row = try conn.query(SQL(idempotent: "SELECT epoch FROM finance_epoch")).first,
              let epoch = UInt32(exactly: try row.decode("epoch", as: Int.self)) else {
            throw FinanceError(.changeLogInvalid, detail: "finance_epoch row missing")
        }
        return epoch
    }
}

/// A balance's (booked, available) contribution from one transaction (FinanceBalances' rules,
/// finance-store.md §5.7): booked counts booked transactions; available also subtracts authorized and
/// pending debits; rejected and memo count nowhere.
func balanceContribution(_ t: Transaction) -> (booked: Int64, available: Int64) {
    let amount = t.transactionAmount.amountMinor
    let signed = t.creditDebitIndicator == .credit ? amount : -amount
    switch t.status {
    case .booked: return (signed, signed)
    case .authorized, .pending: return (0, signed < 0 ? signed : 0)
    case .rejected, .memo: return (0, 0)
    }
}

/// One event's writes on one connection, gathered into a few multi-row statements.
private struct FinanceWrite {
    /// One `finance_entity` upsert and `finance_change` row, written by `flush()` in this order.
    struct PendingChange {
        let scopeKind: String
        let scopeID: FinanceID?
        let entityID: FinanceID
        let op: ChangeOperation
        let payload: String
    }

    let conn: PostgresConnection
    let context: FinanceContext
    let merchantId: String
    let epoch: UInt32
    let asOf: FinanceTimestamp
    /// Balance deltas per FinanceKit account, and whether the account is new in this event.
    var balanceDeltas: [FinanceID: (currency: String, booked: Int64, available: Int64, isNew: Bool)] = [:]
    /// FinanceKit accounts created by this event, inserted with their balances.
    var newAccounts: [FinanceAccountRow] = []
    /// Transactions created by this event, inserted by `flush()`.
    var newTransactions: [(transaction: Transaction, postingKey: String, payload: String)] = []
    var changes: [PendingChange] = []
    var changed = false

    struct FinanceAccountRow {
        let id: FinanceID
        let kind: String
        let currencyCode: String
        let displayName: String
        let payload: String
    }

    init(conn: PostgresConnection, context: FinanceContext, merchantId: String, epoch: UInt32, asOf: FinanceTimestamp) {
        self.conn = conn
        self.context = context
        self.merchantId = merchantId
        self.epoch = epoch
        self.asOf = asOf
    }

    /// Content of a posting that identifies its event (status and posted date excluded: they advance).
    static func fingerprint(_ p: Posting) -> [UInt8] {
        var text = "v1|\(p.key)|\(p.transactionType.rawValue)|\(p.transactionDate.secondsSinceEpoch)"
        text += "|\(p.transactionDescription.utf8.count):\(p.transactionDescription)"
        text += "|\(p.originalTransactionDescription.utf8.count):\(p.originalTransactionDescription)"
        for entry in p.entries {
            text += "|\(entry.account.key)|\(entry.account.currencyCode)|\(entry.side.rawValue)|\(entry.amountMinor)"
        }
        return Digest.sha256(text)
    }

    mutating func insert(_ posting: Posting) throws {
        let fingerprint = Self.fingerprint(posting)
        // The sub-select sees the snapshot before the INSERT: a stored fingerprint there means a replay.
        guard let outcome = try conn.query("""
            WITH ins AS (
                INSERT INTO finance_postings (merchant_id, posting_key, transaction_type, transaction_date, status,
                                              posted_date, description, original_description, fingerprint)
                VALUES ($1, $2, $3, $4::timestamptz, $5, $6::timestamptz, $7, $8, $9)
                ON CONFLICT (merchant_id, posting_key) DO NOTHING
                RETURNING 1)
            SELECT (SELECT count(*) FROM ins)::int AS inserted,
                   (SELECT fingerprint FROM finance_postings WHERE merchant_id = $1 AND posting_key = $2) AS existing
            """, [merchantId, posting.key, posting.transactionType.rawValue, posting.transactionDate.description,
                  posting.status.rawValue, posting.postedDate?.description, posting.transactionDescription,
                  posting.originalTransactionDescription, fingerprint]).first else {
            throw FinanceError(.changeLogInvalid, detail: "posting insert returned nothing")
        }
        if try outcome.decode("inserted", as: Int.self) == 0 {
            let stored: [UInt8] = try outcome.decodeIfPresent("existing") ?? []
            guard constantTimeEqual(stored, fingerprint) else {
                throw FinanceError(.eventConflict, detail: posting.key)
            }
            return  // replay: the posting (and everything derived from it) is already there
        }
        changed = true
        try insertAccountsAndEntries(posting)
        for transaction in posting.transactions(context: context) {
            let payload = try Self.json(transaction)
            newTransactions.append((transaction, posting.key, payload))
            changes.append(PendingChange(scopeKind: "transactions", scopeID: transaction.accountID,
                                         entityID: transaction.id, op: .insert, payload: payload))
            addDelta(transaction, sign: 1)
        }
    }

    /// Creates the posting's ledger accounts on first use and writes its legs, in one statement; an
    /// exposed account created here also becomes a FinanceKit account with a balance (issue 6 item 2:
    /// "created on first use").
    private mutating func insertAccountsAndEntries(_ posting: Posting) throws {
        var seen = Set<String>()
        let accounts = posting.entries.map(\.account).filter { seen.insert($0.key).inserted }
        let created = try conn.query("""
            WITH acc AS (
                INSERT INTO finance_ledger_accounts (merchant_id, account_key, ledger_class, currency_code, exposed,
                                                     account_id, display_name, institution_name)
                SELECT $1, a.* FROM unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::uuid[], $7::text[],
                                           $8::text[]) AS a
                ON CONFLICT (merchant_id, account_key) DO NOTHING
                RETURNING account_key),
            ent AS (
                INSERT INTO finance_entries (merchant_id, posting_key, leg, account_key, side, amount_minor, currency_code)
                SELECT $1, $9, (e.leg - 1)::smallint, e.account_key, e.side, e.amount_minor, e.currency_code
                  FROM unnest($10::text[], $11::text[], $12::bigint[], $13::text[])
                       WITH ORDINALITY AS e(account_key, side, amount_minor, currency_code, leg))
            SELECT account_key FROM acc
            """, [merchantId,
                  PGArray.text(accounts.map(\.key)),
                  PGArray.text(accounts.map(\.ledgerClass.rawValue)),
                  PGArray.text(accounts.map(\.currencyCode)),
                  PGArray.text(accounts.map { $0.exposed ? "t" : "f" }),
                  PGArray.text(accounts.map { context.identity.id("account", $0.key).description }),
                  PGArray.text(accounts.map(\.displayName)),
                  PGArray.text(accounts.map(\.institutionName)),
                  posting.key,
                  PGArray.text(posting.entries.map(\.account.key)),
                  PGArray.text(posting.entries.map(\.side.rawValue)),
                  PGArray.text(posting.entries.map { String($0.amountMinor) }),
                  PGArray.text(posting.entries.map(\.account.currencyCode))])
        let createdKeys = Set(try created.rows.map { try $0.decode("account_key", as: String.self) })
        for account in accounts where createdKeys.contains(account.key) {
            guard let view = account.financeAccount(identity: context.identity, openingDate: posting.transactionDate) else {
                continue
            }
            let payload = try Self.json(view)
            newAccounts.append(FinanceAccountRow(id: view.id, kind: view.kind.rawValue, currencyCode: view.currencyCode,
                                                 displayName: view.displayName, payload: payload))
            changes.append(PendingChange(scopeKind: "accounts", scopeID: nil, entityID: view.id, op: .insert,
                                         payload: payload))
            balanceDeltas[view.id] = (view.currencyCode, 0, 0, true)
        }
    }

    mutating func transition(postingKey: String, to status: TransactionStatus, at: FinanceTimestamp) throws {
        guard let row = try conn.query("""
            SELECT transaction_type, extract(epoch FROM transaction_date)::bigint AS transaction_date, status,
                   extract(epoch FROM posted_date)::bigint AS posted_date, description, original_description
              FROM finance_postings WHERE merchant_id = $1 AND posting_key = $2 FOR UPDATE
            """, [merchantId, postingKey]).first else {
            throw FinanceError(.postingNotFound, detail: postingKey)
        }
        let entryRows = try conn.query("""
            SELECT e.side, e.amount_minor, a.account_key, a.ledger_class, a.currency_code, a.exposed,
                   a.display_name, a.institution_name
              FROM finance_entries e
              JOIN finance_ledger_accounts a ON a.merchant_id = e.merchant_id AND a.account_key = e.account_key
             WHERE e.merchant_id = $1 AND e.posting_key = $2
             ORDER BY e.leg
            """, [merchantId, postingKey]).rows
        var entries: [LedgerEntry] = []
        for e in entryRows {
            guard let side = LedgerSide(rawValue: try e.decode("side")),
                  let ledgerClass = LedgerAccountClass(rawValue: try e.decode("ledger_class")) else {
                throw FinanceError(.changeLogInvalid, detail: "stored entry of \(postingKey)")
            }
            let account = LedgerAccount(key: try e.decode("account_key"), ledgerClass: ledgerClass,
                                        currencyCode: try e.decode("currency_code"), exposed: try e.decode("exposed"),
                                        displayName: try e.decode("display_name"),
                                        institutionName: try e.decode("institution_name"))
            entries.append(LedgerEntry(account: account, side: side, amountMinor: try e.decode("amount_minor")))
        }
        guard let type = TransactionType(rawValue: try row.decode("transaction_type")),
              let current = TransactionStatus(rawValue: try row.decode("status")) else {
            throw FinanceError(.changeLogInvalid, detail: "stored posting \(postingKey)")
        }
        let posted: Int64? = try row.decodeIfPresent("posted_date")
        let stored = try Posting(key: postingKey, entries: entries, transactionType: type,
                                 transactionDate: FinanceTimestamp(secondsSinceEpoch: try row.decode("transaction_date")),
                                 status: current, postedDate: posted.map(FinanceTimestamp.init(secondsSinceEpoch:)),
                                 transactionDescription: try row.decode("description"),
                                 originalTransactionDescription: try row.decode("original_description"))
        guard let next = try stored.transitioned(to: status, at: at) else { return }  // already there
        changed = true
        _ = try conn.execute("""
            UPDATE finance_postings SET status = $3, posted_date = $4::timestamptz, updated_at = now()
             WHERE merchant_id = $1 AND posting_key = $2
            """, [merchantId, postingKey, next.status.rawValue, next.postedDate?.description])
        let before = Dictionary(uniqueKeysWithValues: stored.transactions(context: context).map { ($0.id, $0) })
        for transaction in next.transactions(context: context) {
            let payload = try Self.json(transaction)
            _ = try conn.execute("""
                UPDATE finance_transaction SET status = $3, posted_date = $4::timestamptz, payload = $5::jsonb
                 WHERE merchant_id = $1 AND id = $2::uuid
                """, [merchantId, transaction.id.description, transaction.status.rawValue,
                      transaction.postedDate?.description, payload])
            changes.append(PendingChange(scopeKind: "transactions", scopeID: transaction.accountID,
                                         entityID: transaction.id, op: .update, payload: payload))
            if let old = before[transaction.id] { addDelta(old, sign: -1) }
            addDelta(transaction, sign: 1)
        }
    }

    private mutating func addDelta(_ t: Transaction, sign: Int64) {
        let (booked, available) = balanceContribution(t)
        var entry = balanceDeltas[t.accountID] ?? (t.transactionAmount.currencyCode, 0, 0, false)
        entry.booked += sign * booked
        entry.available += sign * available
        balanceDeltas[t.accountID] = entry
    }

    /// Inserts the new FinanceKit accounts, then applies the balance deltas in account-id order (a fixed
    /// lock order, so writers cannot deadlock), in one statement; logs each balance as inserted (new
    /// account) or updated.
    mutating func writeBalances() throws {
        let sorted = balanceDeltas.sorted(by: { $0.key < $1.key })
        guard !sorted.isEmpty || !newAccounts.isEmpty else { return }
        let result = try conn.query("""
            WITH fa AS (
                INSERT INTO finance_account (merchant_id, id, kind, currency_code, display_name, payload)
                SELECT $1, a.* FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::jsonb[]) AS a
                RETURNING 1)
            INSERT INTO finance_balance (merchant_id, account_id, currency_code, booked_minor, available_minor)
            SELECT $1, b.account_id, b.currency_code, b.booked, b.available
              FROM unnest($7::uuid[], $8::text[], $9::bigint[], $10::bigint[], $11::boolean[])
                   WITH ORDINALITY AS b(account_id, currency_code, booked, available, is_new, ord)
             WHERE b.is_new OR EXISTS (SELECT 1 FROM finance_balance x WHERE x.merchant_id = $1 AND x.account_id = b.account_id)
             ORDER BY b.ord
            ON CONFLICT (merchant_id, account_id) DO UPDATE
               SET booked_minor = finance_balance.booked_minor + EXCLUDED.booked_minor,
                   available_minor = finance_balance.available_minor + EXCLUDED.available_minor
            RETURNING account_id::text AS account_id, booked_minor, available_minor
            """, [merchantId,
                  PGArray.text(newAccounts.map(\.id.description)),
                  PGArray.text(newAccounts.map(\.kind)),
                  PGArray.text(newAccounts.map(\.currencyCode)),
                  PGArray.text(newAccounts.map(\.displayName)),
                  PGArray.text(newAccounts.map(\.payload)),
                  PGArray.text(sorted.map(\.key.description)),
                  PGArray.text(sorted.map(\.value.currency)),
                  PGArray.text(sorted.map { String($0.value.booked) }),
                  PGArray.text(sorted.map { String($0.value.available) }),
                  PGArray.text(sorted.map { $0.value.isNew ? "t" : "f" })])
        var stored: [String: (booked: Int64, available: Int64)] = [:]
        for row in result.rows {
            stored[try row.decode("account_id")] = (try row.decode("booked_minor"), try row.decode("available_minor"))
        }
        for (accountID, delta) in sorted {
            guard let values = stored[accountID.description] else {
                throw FinanceError(.changeLogInvalid, detail: "balance row missing")
            }
            let balance = try Self.accountBalance(accountID: accountID, currency: delta.currency,
                                                  booked: values.booked, available: values.available,
                                                  asOf: asOf, identity: context.identity)
            changes.append(PendingChange(scopeKind: "account_balances", scopeID: accountID, entityID: balance.id,
                                         op: delta.isNew ? .insert : .update, payload: try Self.json(balance)))
        }
    }

    /// Inserts the new transactions, upserts every changed entity and appends its change row (ChangeFeedSQL),
    /// and queues the `pg_notify` that wakes monitoring streams once the caller commits: one statement.
    func flush() throws {
        let nilUUID = "00000000-0000-0000-0000-000000000000"
        let txs = newTransactions
        _ = try conn.query("""
            WITH ft AS (
                INSERT INTO finance_transaction (merchant_id, id, account_id, posting_key, status, transaction_type,
                    credit_debit_indicator, merchant_category_code, transaction_date, posted_date, amount_minor,
                    currency_code, payload)
                SELECT $1, t.* FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                                           $8::smallint[], $9::timestamptz[], $10::timestamptz[], $11::bigint[],
                                           $12::text[], $13::jsonb[]) AS t
                RETURNING 1),
            input AS (
                SELECT * FROM unnest($14::text[], $15::uuid[], $16::uuid[], $17::text[], $18::jsonb[])
                       WITH ORDINALITY AS c(scope_kind, scope_id, entity_id, op, payload, ord)),
            ent AS (
                INSERT INTO finance_entity (merchant_id, scope_kind, scope_id, entity_id, payload)
                SELECT $1, scope_kind, scope_id, entity_id, payload FROM input ORDER BY ord
                ON CONFLICT (merchant_id, scope_kind, entity_id)
                DO UPDATE SET payload = EXCLUDED.payload, scope_id = EXCLUDED.scope_id
                RETURNING 1),
            chg AS (
                INSERT INTO finance_change (merchant_id, scope_kind, scope_id, epoch, op, entity_id)
                SELECT $1, scope_kind, scope_id, $19, op, entity_id FROM input ORDER BY ord
                RETURNING 1)
            SELECT pg_notify('tender_finance', $1)
              FROM (SELECT (SELECT count(*) FROM ft) + (SELECT count(*) FROM ent) + (SELECT count(*) FROM chg)) AS n
            """, [merchantId,
                  PGArray.text(txs.map(\.transaction.id.description)),
                  PGArray.text(txs.map(\.transaction.accountID.description)),
                  PGArray.text(txs.map(\.postingKey)),
                  PGArray.text(txs.map(\.transaction.status.rawValue)),
                  PGArray.text(txs.map(\.transaction.transactionType.rawValue)),
                  PGArray.text(txs.map(\.transaction.creditDebitIndicator.rawValue)),
                  PGArray.text(txs.map { $0.transaction.merchantCategoryCode.map { String($0) } }),
                  PGArray.text(txs.map(\.transaction.transactionDate.description)),
                  PGArray.text(txs.map { $0.transaction.postedDate?.description }),
                  PGArray.text(txs.map { String($0.transaction.transactionAmount.amountMinor) }),
                  PGArray.text(txs.map(\.transaction.transactionAmount.currencyCode)),
                  PGArray.text(txs.map(\.payload)),
                  PGArray.text(changes.map(\.scopeKind)),
                  PGArray.text(changes.map { $0.scopeID?.description ?? nilUUID }),
                  PGArray.text(changes.map(\.entityID.description)),
                  PGArray.text(changes.map(\.op.rawValue)),
                  PGArray.text(changes.map(\.payload)),
                  Int(epoch)])
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

    static func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONCoding.encoder.encode(value), as: UTF8.self)
    }
}

/// PostgreSQL array literals for binding a whole column of a multi-row statement as one text parameter.
enum PGArray {
    /// `{"a","b",NULL}`: every element quoted (backslash and quote escaped), nil as NULL.
    static func text(_ items: [String?]) -> String {
        var out = "{"
        for (index, item) in items.enumerated() {
            if index > 0 { out += "," }
            guard let item else { out += "NULL"; continue }
            out += "\""
            for ch in item.unicodeScalars {
                if ch == "\\" || ch == "\"" { out += "\\" }
                out.unicodeScalars.append(ch)
            }
            out += "\""
        }
        return out + "}"
    }

    /// Non-optional convenience.
    static func text(_ items: [String]) -> String {
        text(items.map { Optional($0) })
    }
}
