import Crypto
import FinanceStore
import Foundation
import Postgres

/// Writes business events into the finance store inside the caller's database transaction
/// (issue 6 item 2: "in the same database transaction as the payment outcome").
///
/// Per event it writes the posting and its legs, the FinanceKit views (accounts created on first use,
/// transactions, balance shards), one `finance_entity_stored` upsert per changed account or transaction (a
/// balance's JSON is built from its shards when read, migrations/0022) and one `finance_change` row per
/// changed entity (ChangeFeedSQL); the feed writer numbers those rows in commit order and wakes monitoring streams.
/// Re-applying an event is a no-op; the same event id with other content is `event_conflict`.
///
/// One event and a list of events take the same path (`apply(_:merchantId:on:now:missingPostings:)`):
/// a fixed number of statements whatever the number of events, listed there.
public struct FinanceRecorder: Sendable {
    /// The LISTEN/NOTIFY channel the feed writer notifies once a merchant's changes are fed; the
    /// payload is the merchant id.
    public static let notifyChannel = "tender_finance"
    /// Default for `batchEventsMax`: 5,000 events keep every array parameter of the write statement
    /// a few megabytes and one batch's transaction well inside the statement timeout.
    public static let batchEventsMaxDefault = 5_000

    /// Bounds on event fields.
    public let limits: FinanceLimits
    /// Most events in one call of the list form; a longer list is refused (`event_invalid`, field
    /// `events`) before anything is read, so the caller splits it.
    public let batchEventsMax: Int

    /// Creates a recorder.
    public init(limits: FinanceLimits = FinanceLimits(), batchEventsMax: Int = FinanceRecorder.batchEventsMaxDefault) {
        precondition(batchEventsMax >= 1, "a batch holds at least one event")
        self.limits = limits
        self.batchEventsMax = batchEventsMax
    }

    /// Applies `event` for `merchantId` on `conn`, which must be inside a transaction the caller commits.
    ///
    /// Throws `FinanceError` (`event_invalid`, `event_conflict`, `posting_not_found`,
    /// `status_transition_invalid`…) or `PostgresError`; the caller then rolls back its transaction.
    public func apply(_ event: BusinessEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        _ = try apply([event], merchantId: merchantId, on: conn, now: now, missingPostings: .fail)
    }

    /// Applies `events` in order for `merchantId` on `conn` (inside the caller's transaction), leaving
    /// exactly the rows that applying them one by one would leave, in at most three round trips:
    /// 1. the merchant's name and the change-log epoch, with the stored postings the events name, locked
    ///    `FOR UPDATE` in key order, with their legs (one statement);
    /// 2. the status changes of stored postings and their transactions (only when there are some);
    /// 3. ledger accounts, new postings with their legs and transactions, FinanceKit accounts, the
    ///    balances (in account-id order, the lock order of every writer), the stored JSON of every changed
    ///    account and transaction, and one `finance_change` row per changed entity (balances included).
    /// Round trips 2 and 3 are skipped when nothing changes (every event a replay); a payment (one new
    /// posting) takes two.
    ///
    /// The change log gets one row per changed entity per call: a transaction created and moved by the
    /// same call is one `insert` with its final state, one moved twice is one `update`, and each touched
    /// account's balance is one row (the batch's net change). Every event is checked before anything is
    /// written, and every error is thrown: `event_invalid` (also for more than `batchEventsMax` events),
    /// `event_conflict`, `posting_not_found` (only under `.fail`), `status_transition_invalid`,
    /// `amount_overflow`, or `PostgresError` (a concurrent insert of the same posting is a unique
    /// violation); the caller then rolls back its transaction.
    ///
    /// Lock order: a call locks its stored postings (key order), creates ledger accounts (key order),
    /// then locks balance rows (account-id order). A transaction that applies several batches keeps the
    /// locks of the earlier ones, so the order holds within one call only: should two such transactions
    /// of one merchant wait on each other, PostgreSQL aborts one (SQLSTATE 40P01) and its caller retries.
    public func apply(_ events: [BusinessEvent], merchantId: String, on conn: PostgresConnection, now: Date,
                      missingPostings: MissingPostingPolicy) throws -> FinanceBatchOutcome {
        guard events.count <= batchEventsMax else {
            throw FinanceError(.eventInvalid, field: "events", detail: "more than \(batchEventsMax) events in one batch")
        }
        guard !events.isEmpty else { return FinanceBatchOutcome() }
        // An event's ledger effect, and so the posting keys it names, depend on the context's limits only
        // (FinanceMapping.effect), not on the merchant's name: the keys are known before the first read,
        // which then reads the merchant and the stored postings in one statement.
        let identity = FinanceStoreIdentity.identity(merchantId)
        var effects: [LedgerEffect] = []
        effects.reserveCapacity(events.count)
        let unnamed = FinanceContext(identity: identity, merchantName: "", limits: limits)
        for event in events { effects.append(try FinanceMapping.effect(of: event, context: unnamed)) }
        let keys = FinanceBatchPlan.postingKeys(of: effects)
        // Round trip 1. This runs inside every payment's outcome transaction, so each round trip here
        // lengthens the payment too.
        let opening = try FinanceBatchSQL.openingRead(keys, merchantId: merchantId, on: conn)
        guard let merchantName = opening.merchantName else {
            throw FinanceError(.eventInvalid, field: "merchantId", detail: "unknown merchant")
        }
        if keys.isEmpty { return FinanceBatchOutcome(withoutEffect: events.count) }
        guard let storedEpoch = opening.epoch, let epoch = UInt32(exactly: storedEpoch) else {
            throw FinanceError(.changeLogInvalid, detail: "finance_epoch row missing")
        }
        let context = FinanceContext(identity: identity, merchantName: merchantName, limits: limits)

        var plan = FinanceBatchPlan(context: context, stored: opening.stored)
        for effect in effects { try plan.apply(effect, missingPostings: missingPostings) }
        guard plan.hasChanges else { return plan.outcome }
        let asOf = FinanceTimestamp(secondsSinceEpoch: Int64(now.timeIntervalSince1970.rounded(.down)))
        try FinanceBatchSQL.write(plan, merchantId: merchantId, epoch: epoch, asOf: asOf, on: conn)
        return plan.outcome
    }
}

/// What a batch did with its events; the four counts add up to the number of events.
public struct FinanceBatchOutcome: Equatable, Sendable {
    /// Events that changed the ledger.
    public var applied = 0
    /// Events already applied (their posting exists with the same content, or already has the status).
    public var replayed = 0
    /// Status changes skipped under `MissingPostingPolicy.skip` because their posting does not exist.
    public var missingPostings = 0
    /// Events without a ledger effect (declined and failed payments).
    public var withoutEffect = 0

    /// Creates an outcome.
    public init(applied: Int = 0, replayed: Int = 0, missingPostings: Int = 0, withoutEffect: Int = 0) {
        self.applied = applied
        self.replayed = replayed
        self.missingPostings = missingPostings
        self.withoutEffect = withoutEffect
    }
}

/// What a batch does with a status change whose posting does not exist.
public enum MissingPostingPolicy: Sendable {
    /// Throw `posting_not_found` (the single-event behaviour).
    case fail
    /// Count it in `FinanceBatchOutcome.missingPostings` and go on (a settled payment recorded before the
    /// finance store existed has no posting to book).
    case skip
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
/// docs/finance-store.md §5.7): booked counts booked transactions; available also subtracts authorized and
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

/// PostgreSQL array literals for binding a whole column of a multi-row statement as one text parameter.
enum PGArray {
    /// `{"a","b",NULL}`: every element quoted (backslash and quote escaped), nil as NULL. Built on UTF-8
    /// bytes (a batch's payload column is megabytes; no byte of a multi-byte sequence is `"` or `\`):
    /// an element with nothing to escape, nearly all of them, is copied in one piece.
    static func text(_ items: [String?]) -> String {
        var out = start(items.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, item) in items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            guard var item else { out += "NULL".utf8; continue }
            append(&item, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Non-optional convenience.
    static func text(_ items: [String]) -> String {
        var out = start(items.reduce(2) { $0 + $1.utf8.count + 3 })
        for (index, item) in items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            var item = item
            append(&item, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    private static func start(_ capacity: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        out.append(UInt8(ascii: "{"))
        return out
    }

    /// One quoted element.
    private static func append(_ item: inout String, to out: inout [UInt8]) {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        out.append(quote)
        item.withUTF8 { bytes in
            guard bytes.contains(where: { $0 == quote || $0 == backslash }) else {
                out.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                if byte == quote || byte == backslash { out.append(backslash) }
                out.append(byte)
            }
        }
        out.append(quote)
    }
}
