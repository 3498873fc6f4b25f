import Foundation
import HTTPServer
import Payments
import Postgres

/// A payment or refund whose processor outcome is being recorded: the one place where the two tables'
/// shared steps (unknown-outcome backoff, resolver claim, unrecordable-outcome hold) pick their SQL.
enum OutcomeSubject {
    case payment(String)
    case refund(String)

    /// The metrics label and log field prefix.
    var kind: String {
        switch self {
        case .payment: "payment"
        case .refund: "refund"
        }
    }

    var id: String {
        switch self {
        case .payment(let id), .refund(let id): id
        }
    }
}

extension ProcessorOutcome {
    /// The `unrecorded_outcome` column's value.
    var recordedKind: String {
        switch self {
        case .approved: "approved"
        case .declined: "declined"
        case .unknown: "unknown"
        case .accepted: "accepted"
        }
    }
}

extension PaymentsService {
    /// Records `outcome` (phase 3). When the database is reachable but the outcome will not go in (the
    /// ledger refuses it, e.g. a balance that would overflow Int64, or a processor value breaks a column
    /// limit), re-sending the same call can never help: the failure is counted in a transaction of its
    /// own, the next resolver attempt backs off exponentially, and after `recordAttemptsMax` failures the
    /// row is marked for an operator and left alone (issue: no endless loop of processor calls). The
    /// client gets the pending state (202), as for an unknown outcome. Database trouble (503 classes)
    /// propagates: nothing can be counted then, and the claim already deferred the next attempt.
    func recordingOrHolding(_ subject: OutcomeSubject, outcome: ProcessorOutcome, merchantId: String,
                            idempotencyKey: String?, pending: PaymentRecord? = nil) throws -> HTTPResponse {
        do {
            switch subject {
            case .payment(let id): return try recordOutcome(paymentId: id, outcome: outcome, pending: pending)
            case .refund(let id): return try recordRefundOutcome(refundId: id, outcome: outcome)
            }
        } catch let error as PostgresError where TenderApp.problem(for: error).status == 503 {
            throw error
        } catch {
            let failure = String(describing: type(of: error)) + ((error as? PostgresError).map { " " + $0.code.rawValue } ?? "")
            try holdUnrecordedOutcome(subject, outcome: outcome, merchantId: merchantId, idempotencyKey: idempotencyKey,
                                      failure: failure)
            return try heldResponse(subject)
        }
    }

    /// Counts one failed recording, backs off or marks the row for an operator, and releases the key.
    func holdUnrecordedOutcome(_ subject: OutcomeSubject, outcome: ProcessorOutcome, merchantId: String,
                               idempotencyKey: String?, failure: String) throws {
        let parameters: [any PostgresEncodable] = [subject.id, outcome.recordedKind, settings.recordAttemptsMax,
                                                   settings.resolverBackoffMaxMilliseconds, settings.resolverIntervalMilliseconds]
        let row = try pool.transaction { conn -> PostgresRow? in
            let row = try conn.query({
                switch subject {
                case .payment: Self.holdPaymentSQL
                case .refund: Self.holdRefundSQL
                }
            }(), parameters).first
            try KeyClaim.park(conn: conn, merchantId: merchantId, key: idempotencyKey)
            return row
        }
        guard let row else { return }  // no longer pending: another holder recorded it meanwhile
        let failures: Int = try row.decode("record_failures")
        let marked: Bool = try row.decode("marked")
        metrics.increment("tender_payments_outcome_record_failures_total", labels: [("kind", subject.kind)])
        logger.error("processor outcome could not be recorded", [
            ("\(subject.kind)_id", subject.id), ("outcome", outcome.recordedKind), ("failures", String(failures)),
            ("limit", String(settings.recordAttemptsMax)), ("error", failure),
        ])
        if marked {
            metrics.increment("tender_payments_needs_operator_total", labels: [("kind", subject.kind)])
            logger.error("marked for an operator: the resolver stops re-sending it", [
                ("\(subject.kind)_id", subject.id), ("outcome", outcome.recordedKind), ("failures", String(failures)),
            ])
            try? refreshNeedsOperatorCounts()
        }
    }

    /// The pending state as the client sees it (202).
    func heldResponse(_ subject: OutcomeSubject) throws -> HTTPResponse {
        switch subject {
        case .payment(let id):
            guard let payment = try pool.withConnection({ try PaymentRecord.load(id, on: $0) }) else {
                throw PaymentProblems.internalError
            }
            return Self.paymentResponse(payment)
        case .refund(let id):
            guard let refund = try pool.withConnection({ try RefundRecord.load(id, on: $0) }) else {
                throw PaymentProblems.internalError
            }
            return .json(RefundView(refund), status: refund.status.isFinal ? 200 : 202)
        }
    }

    /// Updates the `tender_payments_needs_operator` gauge.
    func refreshNeedsOperatorCounts() throws {
        guard let row = try pool.query("""
            SELECT (SELECT count(*) FROM payments WHERE needs_operator_at IS NOT NULL)::bigint AS payments,
                   (SELECT count(*) FROM refunds WHERE needs_operator_at IS NOT NULL)::bigint AS refunds
            """).first else { return }
        let counts = (payments: try row.decode("payments", as: Int64.self), refunds: try row.decode("refunds", as: Int64.self))
        needsOperatorCounts.withLock { $0 = counts }
    }

    /// One failed recording of a pending payment: $2 outcome kind, $3 attempts limit, $4 backoff cap,
    /// $5 backoff base (ms). The SET expressions read the old `record_failures`.
    static let holdPaymentSQL: SQL = """
        UPDATE payments SET record_failures = record_failures + 1, unrecorded_outcome = $2,
               recovery_point = 'processor_called',
               needs_operator_at = CASE WHEN record_failures + 1 >= $3 THEN now() END,
               next_resolve_at = CASE WHEN record_failures + 1 >= $3 THEN NULL
                   ELSE now() + least($4::bigint, $5::bigint * (2 ^ least(record_failures, 16))::bigint) * interval '1 millisecond'
               END,
               updated_at = now()
        WHERE payment_id = $1 AND status = 'pending' AND needs_operator_at IS NULL
        RETURNING record_failures, needs_operator_at IS NOT NULL AS marked
        """

    /// Like `holdPaymentSQL`, for a pending refund.
    static let holdRefundSQL: SQL = """
        UPDATE refunds SET record_failures = record_failures + 1, unrecorded_outcome = $2,
               needs_operator_at = CASE WHEN record_failures + 1 >= $3 THEN now() END,
               next_resolve_at = CASE WHEN record_failures + 1 >= $3 THEN NULL
                   ELSE now() + least($4::bigint, $5::bigint * (2 ^ least(record_failures, 16))::bigint) * interval '1 millisecond'
               END,
               updated_at = now()
        WHERE refund_id = $1 AND status = 'pending' AND needs_operator_at IS NULL
        RETURNING record_failures, needs_operator_at IS NOT NULL AS marked
        """
}

extension KeyClaim {
    /// Unlocks an unfinished key at `processor_called` (an unknown or unrecordable outcome): a retry of the
    /// key, or the resolver, re-sends with the same processor key.
    static func park(conn: PostgresConnection, merchantId: String, key: String?) throws {
        guard let key else { return }
        _ = try conn.execute("""
            UPDATE idempotency_keys SET recovery_point = 'processor_called', locked_until = NULL
            WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
            """, [merchantId, key])
    }

    /// Unlocks an unfinished key (a retry that found its payment or refund waiting for an operator held
    /// it), so the resolver can take the row once an operator releases it.
    static func unlock(conn: PostgresConnection, merchantId: String, key: String?) throws {
        guard let key else { return }
        _ = try conn.execute("""
            UPDATE idempotency_keys SET locked_until = NULL
            WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
            """, [merchantId, key])
    }

    /// The resolver's take-over of an unfinished key: only when no request holds it. The key's lock is
    /// the one owner token shared by requests and the resolver.
    static func takeOver(conn: PostgresConnection, merchantId: String, key: String, lockMilliseconds: Int) throws -> Bool {
        try conn.execute("""
            UPDATE idempotency_keys SET locked_until = now() + $3 * interval '1 millisecond'
            WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
              AND (locked_until IS NULL OR locked_until <= now())
            """, [merchantId, key, lockMilliseconds]) == 1
    }
}

extension PaymentsService {
    /// Pending payments, then pending refunds, whose next attempt is due (at most `resolverBatchMax` each).
    func dueSubjects() throws -> [OutcomeSubject] {
        let payments = try pool.query("""
            SELECT payment_id AS id FROM payments WHERE status = 'pending' AND next_resolve_at <= now()
            ORDER BY next_resolve_at LIMIT $1
            """, [settings.resolverBatchMax]).rows.map { OutcomeSubject.payment(try $0.decode("id")) }
        let refunds = try pool.query("""
            SELECT refund_id AS id FROM refunds WHERE status = 'pending' AND next_resolve_at <= now()
            ORDER BY next_resolve_at LIMIT $1
            """, [settings.resolverBatchMax]).rows.map { OutcomeSubject.refund(try $0.decode("id")) }
        return payments + refunds
    }

    /// The resolver's claim of a pending row (inside its locking transaction): the row only while it is
    /// still due (a conditional update only one node wins: another node's resolver that listed it too finds
    /// it deferred, with or without a key), its next attempt deferred by the key lock's length; then the
    /// key, when there is one, unless a request holds it.
    func claimForResolver(_ subject: OutcomeSubject, merchantId: String, idempotencyKey: String?,
                          on conn: PostgresConnection) throws -> Bool {
        let sql: SQL = switch subject {
        case .payment: """
            UPDATE payments SET next_resolve_at = now() + $2 * interval '1 millisecond'
             WHERE payment_id = $1 AND next_resolve_at <= now()
            """
        case .refund: """
            UPDATE refunds SET next_resolve_at = now() + $2 * interval '1 millisecond'
             WHERE refund_id = $1 AND next_resolve_at <= now()
            """
        }
        guard try conn.execute(sql, [subject.id, settings.keyLockMilliseconds]) == 1 else { return false }
        guard let idempotencyKey else { return true }
        return try KeyClaim.takeOver(conn: conn, merchantId: merchantId, key: idempotencyKey,
                                     lockMilliseconds: settings.keyLockMilliseconds)
    }

    /// An unknown outcome (`OutcomePhases` `.retryLater`): one more attempt counted, the next one backed
    /// off exponentially from `resolverIntervalMilliseconds` up to `resolverBackoffMaxMilliseconds`, the
    /// key parked at `processor_called`.
    func recordUnknown(_ subject: OutcomeSubject, merchantId: String, idempotencyKey: String?, on conn: PostgresConnection) throws {
        let sql: SQL = switch subject {
        case .payment: Self.paymentUnknownSQL
        case .refund: Self.refundUnknownSQL
        }
        _ = try conn.execute(sql, [subject.id, settings.resolverBackoffMaxMilliseconds, settings.resolverIntervalMilliseconds])
        try KeyClaim.park(conn: conn, merchantId: merchantId, key: idempotencyKey)
    }

    static let paymentUnknownSQL: SQL = """
        UPDATE payments SET recovery_point = 'processor_called', resolve_attempts = resolve_attempts + 1,
               next_resolve_at = now() + least($2::bigint, $3::bigint * (2 ^ least(resolve_attempts, 16))::bigint)
                                 * interval '1 millisecond',
               updated_at = now()
        WHERE payment_id = $1
        """

    static let refundUnknownSQL: SQL = """
        UPDATE refunds SET resolve_attempts = resolve_attempts + 1,
               next_resolve_at = now() + least($2::bigint, $3::bigint * (2 ^ least(resolve_attempts, 16))::bigint)
                                 * interval '1 millisecond',
               updated_at = now()
        WHERE refund_id = $1
        """
}
