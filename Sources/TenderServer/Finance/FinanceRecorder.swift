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
        guard let row = try conn.query("SELECT display_name FROM merchants WHERE merchant_id = $1", [merchantId]).first else {
            throw FinanceError(.eventInvalid, field: "merchantId", detail: "unknown merchant")
        }
        let context = FinanceContext(identity: FinanceStoreIdentity.identity(merchantId),
                                     merchantName: try row.decode("display_name"), limits: limits)
        let effect = try FinanceMapping.effect(of: event, context: context)
        if case .none = effect { return }
        var write = FinanceWrite(conn: conn, context: context, merchantId: merchantId,
                                 epoch: try FinanceEpoch.current(on: conn),
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
        _ = try conn.query("SELECT pg_notify('tender_finance', $1)", [merchantId])
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

/// One event's writes on one connection.
private struct FinanceWrite {
    let conn: PostgresConnection
    let context: FinanceContext
    let merchantId: String
    let epoch: UInt32
    let asOf: FinanceTimestamp
    /// Balance deltas per FinanceKit account, and whether the account is new in this event.
    var balanceDeltas: [FinanceID: (currency: String, booked: Int64, available: Int64, isNew: Bool)] = [:]
    var changed = false

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
        let inserted = try conn.query("""
            INSERT INTO finance_postings (merchant_id, posting_key, transaction_type, transaction_date, status,
                                          posted_date, description, original_description, fingerprint)
            VALUES ($1, $2, $3, $4::timestamptz, $5, $6::timestamptz, $7, $8, $9)
            ON CONFLICT (merchant_id, posting_key) DO NOTHING
            RETURNING 1
            """, [merchantId, posting.key, posting.transactionType.rawValue, posting.transactionDate.description,
                  posting.status.rawValue, posting.postedDate?.description, posting.transactionDescription,
                  posting.originalTransactionDescription, fingerprint])
        if inserted.rows.isEmpty {
            let existing = try conn.query(
                "SELECT fingerprint FROM finance_postings WHERE merchant_id = $1 AND posting_key = $2",
                [merchantId, posting.key]).first
            let stored: [UInt8] = try existing?.decode("fingerprint") ?? []
            guard constantTimeEqual(stored, fingerprint) else {
                throw FinanceError(.eventConflict, detail: posting.key)
            }
            return  // replay: the posting (and everything derived from it) is already there
        }
        changed = true
        for (leg, entry) in posting.entries.enumerated() {
            try ensureAccount(entry.account, openingDate: posting.transactionDate)
            _ = try conn.execute("""
                INSERT INTO finance_entries (merchant_id, posting_key, leg, account_key, side, amount_minor, currency_code)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                """, [merchantId, posting.key, leg, entry.account.key, entry.side.rawValue, entry.amountMinor,
                      entry.account.currencyCode])
        }
        for transaction in posting.transactions(context: context) {
            let payload = try Self.json(transaction)
            _ = try conn.execute("""
                INSERT INTO finance_transaction (merchant_id, id, account_id, posting_key, status, transaction_type,
                    credit_debit_indicator, merchant_category_code, transaction_date, posted_date, amount_minor,
                    currency_code, payload)
                VALUES ($1, $2::uuid, $3::uuid, $4, $5, $6, $7, $8::smallint, $9::timestamptz, $10::timestamptz, $11, $12, $13::jsonb)
                """, [merchantId, transaction.id.description, transaction.accountID.description, posting.key,
                      transaction.status.rawValue, transaction.transactionType.rawValue,
                      transaction.creditDebitIndicator.rawValue, transaction.merchantCategoryCode.map { Int($0) },
                      transaction.transactionDate.description, transaction.postedDate?.description,
                      transaction.transactionAmount.amountMinor, transaction.transactionAmount.currencyCode, payload])
            try logChange(scopeKind: "transactions", scopeID: transaction.accountID, entityID: transaction.id,
                          op: .insert, payload: payload)
            addDelta(transaction, sign: 1)
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
            try logChange(scopeKind: "transactions", scopeID: transaction.accountID, entityID: transaction.id,
                          op: .update, payload: payload)
            if let old = before[transaction.id] { addDelta(old, sign: -1) }
            addDelta(transaction, sign: 1)
        }
    }

    /// Creates the ledger account on first use; an exposed one also becomes a FinanceKit account with a
    /// zero balance (issue 6 item 2: "created on first use").
    private mutating func ensureAccount(_ account: LedgerAccount, openingDate: FinanceTimestamp) throws {
        let accountID = context.identity.id("account", account.key)
        let created = try conn.query("""
            INSERT INTO finance_ledger_accounts (merchant_id, account_key, ledger_class, currency_code, exposed,
                                                 account_id, display_name, institution_name)
            VALUES ($1, $2, $3, $4, $5, $6::uuid, $7, $8)
            ON CONFLICT (merchant_id, account_key) DO NOTHING
            RETURNING 1
            """, [merchantId, account.key, account.ledgerClass.rawValue, account.currencyCode, account.exposed,
                  accountID.description, account.displayName, account.institutionName])
        guard !created.rows.isEmpty,
              let view = account.financeAccount(identity: context.identity, openingDate: openingDate) else { return }
        let payload = try Self.json(view)
        _ = try conn.execute("""
            INSERT INTO finance_account (merchant_id, id, kind, currency_code, display_name, payload)
            VALUES ($1, $2::uuid, $3, $4, $5, $6::jsonb)
            """, [merchantId, view.id.description, view.kind.rawValue, view.currencyCode, view.displayName, payload])
        _ = try conn.execute("""
            INSERT INTO finance_balance (merchant_id, account_id, currency_code, booked_minor, available_minor)
            VALUES ($1, $2::uuid, $3, 0, 0)
            """, [merchantId, view.id.description, view.currencyCode])
        try logChange(scopeKind: "accounts", scopeID: nil, entityID: view.id, op: .insert, payload: payload)
        balanceDeltas[view.id] = (view.currencyCode, 0, 0, true)
    }

    private mutating func addDelta(_ t: Transaction, sign: Int64) {
        let (booked, available) = balanceContribution(t)
        var entry = balanceDeltas[t.accountID] ?? (t.transactionAmount.currencyCode, 0, 0, false)
        entry.booked += sign * booked
        entry.available += sign * available
        balanceDeltas[t.accountID] = entry
    }

    /// Applies the balance deltas in account-id order (a fixed lock order, so writers cannot deadlock)
    /// and logs each balance as inserted (new account) or updated.
    func writeBalances() throws {
        for (accountID, delta) in balanceDeltas.sorted(by: { $0.key < $1.key }) {
            guard let row = try conn.query("""
                UPDATE finance_balance SET booked_minor = booked_minor + $3, available_minor = available_minor + $4
                 WHERE merchant_id = $1 AND account_id = $2::uuid
                RETURNING booked_minor, available_minor
                """, [merchantId, accountID.description, delta.booked, delta.available]).first else {
                throw FinanceError(.changeLogInvalid, detail: "balance row missing")
            }
            let balance = try Self.accountBalance(accountID: accountID, currency: delta.currency,
                                                  booked: try row.decode("booked_minor"),
                                                  available: try row.decode("available_minor"),
                                                  asOf: asOf, identity: context.identity)
            try logChange(scopeKind: "account_balances", scopeID: accountID, entityID: balance.id,
                          op: delta.isNew ? .insert : .update, payload: try Self.json(balance))
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

    /// Upserts the entity's current state and appends its change row, in one statement.
    private func logChange(scopeKind: String, scopeID: FinanceID?, entityID: FinanceID, op: ChangeOperation,
                           payload: String) throws {
        _ = try conn.execute("""
            WITH entity AS (
                INSERT INTO finance_entity (merchant_id, scope_kind, scope_id, entity_id, payload)
                VALUES ($1, $2, COALESCE($3::uuid, '00000000-0000-0000-0000-000000000000'), $4::uuid, $5::jsonb)
                ON CONFLICT (merchant_id, scope_kind, entity_id)
                DO UPDATE SET payload = EXCLUDED.payload, scope_id = EXCLUDED.scope_id
                RETURNING 1)
            INSERT INTO finance_change (merchant_id, scope_kind, scope_id, epoch, op, entity_id)
            SELECT $1, $2, COALESCE($3::uuid, '00000000-0000-0000-0000-000000000000'), $6, $7, $4::uuid FROM entity
            """, [merchantId, scopeKind, scopeID?.description, entityID.description, payload, Int(epoch), op.rawValue])
    }

    static func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONCoding.encoder.encode(value), as: UTF8.self)
    }
}
