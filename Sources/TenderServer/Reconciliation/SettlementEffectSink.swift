import Foundation
import Postgres
import Reconciliation

/// Applies reconciliation effects to the finance store, on the connection (and so inside the
/// transaction) that marks their item chunk applied. Each effect reaches `apply` at most once per
/// merchant: its deterministic key is recorded in `settlement_effects` first (docs/finance-store.md §4.5
/// point 5).
protocol SettlementEffectSink: Sendable {
    /// Applies `effects` (in line order) for `merchantId`; throwing rolls back the chunk's transaction.
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws
}

/// A sink that applies nothing: effects are still recorded in `settlement_effects` (tests of the
/// report alone use it).
struct NoFinanceEffectSink: SettlementEffectSink {
    func apply(_ effects: [FinanceEffect], merchantId: String, on conn: PostgresConnection, now: Date) throws {}
}
