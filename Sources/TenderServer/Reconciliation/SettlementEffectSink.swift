import Foundation
import Postgres
import Reconciliation

/// One change the store asks the finance store for, in the transaction that records it in
/// `settlement_effects` (docs/finance-store.md §4.5 point 5).
enum SettlementEffectAction: Sendable {
    /// Book `effect`; `version` > 0 when it replaces an earlier booking of the same key (its postings
    /// then get ids of their own, the earlier ones being reversed first).
    case book(FinanceEffect, version: Int)
    /// Take back the postings with these keys (a correction or a line its batch's new revision no
    /// longer has); `seed` makes the reversal ids, `postedDate` nil means today.
    case reverse(postingKeys: [String], seed: String, postedDate: SettlementDate?)
    /// A later report confirms that a payout arrived: one of the payout's postings (the sink books the
    /// bank deposit among them and ignores the others).
    case confirmPayout(postingKey: String)
}

/// Applies reconciliation effects to the finance store, on the connection (and so inside the
/// transaction) that marks their item chunk applied. Each effect reaches `apply` at most once per
/// merchant and version: its deterministic key is recorded in `settlement_effects` first.
protocol SettlementEffectSink: Sendable {
    /// Applies `effects` (in line order) for `merchantId`; throwing rolls back the chunk's transaction.
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws
    /// Applies `actions` in order; throwing rolls back the chunk's transaction.
    func apply(_ actions: [SettlementEffectAction], merchantId: String, on conn: PostgresConnection, now: Date) throws
    /// The finance-store postings that booking `effect` at `version` creates (what a reversal takes back).
    func postingKeys(of effect: FinanceEffect, version: Int, merchantId: String) -> [String]
}

extension SettlementEffectSink {
    /// A sink that only books (tests of the report alone): the bookings go to `apply(_:merchantId:on:now:)`.
    func apply(_ actions: [SettlementEffectAction], merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let effects = actions.compactMap { action -> FinanceEffect? in
            if case .book(let effect, _) = action { return effect }
            return nil
        }
        if !effects.isEmpty { try apply(effects, merchantId: merchantId, on: conn, now: now) }
    }

    /// Such a sink creates no postings.
    func postingKeys(of effect: FinanceEffect, version: Int, merchantId: String) -> [String] { [] }
}

/// A sink that applies nothing: effects are still recorded in `settlement_effects` (tests of the
/// report alone use it).
struct NoFinanceEffectSink: SettlementEffectSink {
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {}
}
