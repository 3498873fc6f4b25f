import Foundation
import Postgres
import Reconciliation

/// Applies one reconciliation effect to the finance store, on the connection (and so inside the
/// transaction) that stores the report. Each effect reaches `apply` at most once per merchant: its
/// deterministic key is recorded in `settlement_effects` first (finance-store.md §4.5 point 5).
protocol SettlementEffectSink: Sendable {
    /// Applies `effect` for `merchantId`; throwing rolls back the whole import.
    func apply(_ effect: FinanceEffect, merchantId: String, on conn: PostgresConnection, now: Date) throws
}

/// The sink used until the finance store's PostgreSQL shell is wired in: effects are recorded in
/// `settlement_effects` (so they are still applied once when the real sink arrives) and nothing more.
struct NoFinanceEffectSink: SettlementEffectSink {
    func apply(_ effect: FinanceEffect, merchantId: String, on conn: PostgresConnection, now: Date) throws {}
}
