import Crypto
import Foundation
import HTTPServer
import Money
import Observability
import Payments
import Postgres

/// Multi-phase use of an Idempotency-Key (docs/reliability-security.md §1.4 I3–I10) on the
/// `idempotency_keys` table: a claim holds `locked_until`; a finished key replays its stored response.
enum KeyClaim {
    /// What the key says about this request.
    enum State {
        /// New key, inserted and locked by this transaction.
        case fresh
        /// Finished: the stored response, replayed byte for byte.
        case replay(HTTPResponse)
        /// Unfinished and unlocked (its holder died or parked it): now locked by us, continue here.
        case resume(recoveryPoint: String, resourceId: String?)
    }

    /// Inserts or takes over the key inside the caller's transaction. Another request body → 422;
    /// a live holder → 409 with Retry-After (I5, I10).
    static func claim(conn: PostgresConnection, merchantId: String, key: String, fingerprint: [UInt8],
                      lockMilliseconds: Int) throws -> State {
        let inserted = try conn.query("""
            INSERT INTO idempotency_keys (merchant_id, idempotency_key, request_fingerprint, recovery_point, locked_until)
            VALUES ($1, $2, $3, 'started', now() + $4 * interval '1 millisecond')
            ON CONFLICT DO NOTHING RETURNING 1 AS fresh
            """, [merchantId, key, fingerprint, lockMilliseconds])
        if inserted.first != nil { return .fresh }
        return try existing(conn: conn, merchantId: merchantId, key: key, fingerprint: fingerprint, lockMilliseconds: lockMilliseconds)
    }

    /// The key as it stands when its insert found it already there (never `.fresh`): locked and read, then
    /// replayed, refused, or taken over.
    static func existing(conn: PostgresConnection, merchantId: String, key: String, fingerprint: [UInt8],
                         lockMilliseconds: Int) throws -> State {
        guard let row = try conn.query("""
            SELECT request_fingerprint, recovery_point, resource_id, response_status, response_body,
                   COALESCE(locked_until > now(), false) AS locked,
                   GREATEST(1, CEIL(EXTRACT(EPOCH FROM (locked_until - now()))))::bigint AS retry_after
            FROM idempotency_keys WHERE merchant_id = $1 AND idempotency_key = $2 FOR UPDATE
            """, [merchantId, key]).first else {
            throw Idempotency.inProgressProblem(retryAfterSeconds: 1)
        }
        let stored: [UInt8] = try row.decode("request_fingerprint")
        guard constantTimeEqual(stored, fingerprint) else { throw Idempotency.reusedProblem }
        if let status = try row.decodeIfPresent("response_status", as: Int.self),
           let body = try row.decodeIfPresent("response_body", as: [UInt8].self) {
            var headers = HTTPHeaders([("Content-Type", status >= 400 ? "application/problem+json" : "application/json"),
                                       ("Idempotent-Replayed", "true")])
            if status == 429 || status == 503 { headers.add("Retry-After", "1") }
            return .replay(HTTPResponse(status: status, headers: headers, body: body))
        }
        if try row.decode("locked", as: Bool.self) {
            let seconds = try row.decodeIfPresent("retry_after", as: Int64.self) ?? 1
            throw Idempotency.inProgressProblem(retryAfterSeconds: Int(min(seconds, 3_600)))
        }
        _ = try conn.execute("""
            UPDATE idempotency_keys SET locked_until = now() + $3 * interval '1 millisecond'
            WHERE merchant_id = $1 AND idempotency_key = $2
            """, [merchantId, key, lockMilliseconds])
        return .resume(recoveryPoint: try row.decode("recovery_point"), resourceId: try row.decodeIfPresent("resource_id"))
    }

    static let finishSQL: SQL = """
        UPDATE idempotency_keys SET response_status = $3, response_body = $4, finished_at = now(),
               recovery_point = 'outcome_recorded', locked_until = NULL
        WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
        """

    /// Stores the final response (once; a finished key is never rewritten).
    static func finish(conn: PostgresConnection, merchantId: String, key: String, response: HTTPResponse) throws {
        _ = try conn.execute(finishSQL, [merchantId, key, response.status, response.body])
    }

    /// `finish` as the transaction's last statement, sent with its COMMIT (`executeAndCommit`): nothing may
    /// run in the transaction after it. A lost answer is `transaction_commit_unknown` (the client's 503
    /// `transaction_outcome_unknown`); a retry of the key then replays what committed or resumes.
    static func finishAndCommit(conn: PostgresConnection, merchantId: String, key: String, response: HTTPResponse) throws {
        _ = try conn.executeAndCommit(finishSQL, [merchantId, key, response.status, response.body])
    }
}

/// A `payments` row (never card data: the encrypted token is read separately, only to re-send).
struct PaymentRecord: Sendable {
    let paymentId: String
    let merchantId: String
    let sessionId: String
    var status: PaymentStatus
    var recoveryPoint: RecoveryPoint
    let amountMinor: Int64
    let currencyCode: String
    let network: String?
    let last4: String?
    let expirationMonth: Int?
    let expirationYear: Int?
    var processorReference: String?
    var declineCode: String?
    let failureCode: String?
    let tokenErrorCode: String?
    let appleTransactionId: String?
    let processorKey: String
    let idempotencyKey: String?
    let createdAt: Date
    /// Set when the processor's outcome could not be recorded `recordAttemptsMax` times: the resolver
    /// leaves the payment to an operator.
    let needsOperatorAt: Date?

    /// The columns `init(row:)` reads, in the order statements return them.
    static let columns = """
        payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code, network, last4, \
        expiration_month, expiration_year, processor_reference, decline_code, failure_code, token_error_code, \
        apple_transaction_id, processor_key, idempotency_key, created_at, needs_operator_at
        """

    init(row: PostgresRow) throws {
        paymentId = try row.decode("payment_id")
        merchantId = try row.decode("merchant_id")
        sessionId = try row.decode("session_id")
        status = try row.decodeEnum("status")
        recoveryPoint = try row.decodeEnum("recovery_point")
        amountMinor = try row.decode("amount_minor")
        currencyCode = try row.decode("currency_code")
        network = try row.decodeIfPresent("network")
        last4 = try row.decodeIfPresent("last4")
        expirationMonth = try row.decodeIfPresent("expiration_month")
        expirationYear = try row.decodeIfPresent("expiration_year")
        processorReference = try row.decodeIfPresent("processor_reference")
        declineCode = try row.decodeIfPresent("decline_code")
        failureCode = try row.decodeIfPresent("failure_code")
        tokenErrorCode = try row.decodeIfPresent("token_error_code")
        appleTransactionId = try row.decodeIfPresent("apple_transaction_id")
        processorKey = try row.decode("processor_key")
        idempotencyKey = try row.decodeIfPresent("idempotency_key")
        createdAt = try row.decode("created_at")
        needsOperatorAt = try row.decodeIfPresent("needs_operator_at")
    }

    /// This pending row as phase 3's update of `status` will leave it (what `RETURNING` then shows).
    func recorded(_ status: PaymentStatus, processorReference: String?, declineCode: String?) -> PaymentRecord {
        var row = self
        row.status = status
        row.recoveryPoint = .outcomeRecorded
        row.processorReference = processorReference
        row.declineCode = declineCode
        return row
    }

    static let loadSQL = SQL(unsafeSQL: "SELECT \(columns) FROM payments WHERE payment_id = $1", preparable: true)
    static let loadForUpdateSQL = SQL(unsafeSQL: "SELECT \(columns) FROM payments WHERE payment_id = $1 FOR UPDATE", preparable: true)
    static let loadForUpdateSkipLockedSQL = SQL(unsafeSQL: "SELECT \(columns) FROM payments WHERE payment_id = $1 FOR UPDATE SKIP LOCKED",
                                                preparable: true)

    static func load(_ id: String, on conn: PostgresConnection, forUpdate: Bool = false,
                     skipLocked: Bool = false) throws -> PaymentRecord? {
        let sql = switch (forUpdate, skipLocked) {
        case (false, _): loadSQL
        case (true, false): loadForUpdateSQL
        case (true, true): loadForUpdateSkipLockedSQL
        }
        return try conn.query(sql, [id]).first.map(PaymentRecord.init(row:))
    }

    static let listSQL = SQL(unsafeSQL: """
        SELECT \(PaymentRecord.columns) FROM payments
        WHERE merchant_id = $1
          AND ($2::text IS NULL OR session_id = $2)
          AND ($3::text IS NULL OR status = $3)
          AND ($4::text IS NULL OR (created_at, payment_id) <
               (SELECT created_at, payment_id FROM payments WHERE payment_id = $4 AND merchant_id = $1))
        ORDER BY created_at DESC, payment_id DESC
        LIMIT $5
        """, preparable: true)
}

/// A payment as the API shows it (openapi.yaml): at most the last four digits.
struct PaymentView: Encodable, Equatable {
    let id: String
    let status: PaymentStatus
    let amountMinor: Int64
    let amount: String?
    let currencyCode: String
    let network: String?
    let last4: String?
    let expirationMonth: Int?
    let expirationYear: Int?
    let checkoutSessionId: String
    let processorReference: String?
    let declineCode: String?
    let failureCode: String?
    let tokenErrorCode: String?
    /// Sum of the payment's succeeded refunds (pending and declined ones excluded).
    let amountRefundedMinor: Int64
    let amountRefunded: String?
    let createdAt: String
    /// True when Tender could not record the processor's outcome and stopped retrying: an operator must
    /// settle it (the status stays `pending` until then).
    let needsOperator: Bool

    /// `amountRefundedMinor` comes from `PaymentsService.refundedMinor` (0 for a payment just made).
    init(_ p: PaymentRecord, amountRefundedMinor: Int64) {
        id = p.paymentId
        status = p.status
        amountMinor = p.amountMinor
        amount = (try? Currency(code: p.currencyCode))?.formatAmount(p.amountMinor)
        currencyCode = p.currencyCode
        network = p.network
        last4 = p.last4
        expirationMonth = p.expirationMonth
        expirationYear = p.expirationYear
        checkoutSessionId = p.sessionId
        processorReference = p.processorReference
        declineCode = p.declineCode
        failureCode = p.failureCode
        tokenErrorCode = p.tokenErrorCode
        self.amountRefundedMinor = amountRefundedMinor
        amountRefunded = (try? Currency(code: p.currencyCode))?.formatAmount(amountRefundedMinor)
        createdAt = RFC3339.string(from: p.createdAt)
        needsOperator = p.needsOperatorAt != nil
    }
}

extension PostgresRow {
    /// A text column read as one of `T`'s raw values; any other value is `decode_failed`.
    func decodeEnum<T: RawRepresentable>(_ column: String, as type: T.Type = T.self) throws -> T where T.RawValue == String {
        let text: String = try decode(column)
        guard let value = T(rawValue: text) else {
            throw PostgresError(code: .decodeFailed, message: "unknown \(column) value", column: column)
        }
        return value
    }
}
