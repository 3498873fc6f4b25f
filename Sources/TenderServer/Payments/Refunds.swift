import Foundation
import HTTPServer
import Money
import Observability
import Payments
import Postgres

/// A `refunds` row.
struct RefundRecord: Sendable {
    let refundId: String
    let paymentId: String
    let merchantId: String
    let status: RefundStatus
    let amountMinor: Int64
    let currencyCode: String
    let processorReference: String?
    let declineCode: String?
    let processorKey: String
    let idempotencyKey: String?
    let createdAt: Date
    /// When the processor accepted the refund for asynchronous processing (`ProcessorOutcome.accepted`).
    let processorAcceptedAt: Date?
    /// Set when the outcome could not be recorded `recordAttemptsMax` times (see `PaymentRecord`).
    let needsOperatorAt: Date?

    init(row: PostgresRow) throws {
        refundId = try row.decode("refund_id")
        paymentId = try row.decode("payment_id")
        merchantId = try row.decode("merchant_id")
        status = try row.decodeEnum("status")
        amountMinor = try row.decode("amount_minor")
        currencyCode = try row.decode("currency_code")
        processorReference = try row.decodeIfPresent("processor_reference")
        declineCode = try row.decodeIfPresent("decline_code")
        processorKey = try row.decode("processor_key")
        idempotencyKey = try row.decodeIfPresent("idempotency_key")
        createdAt = try row.decode("created_at")
        processorAcceptedAt = try row.decodeIfPresent("processor_accepted_at")
        needsOperatorAt = try row.decodeIfPresent("needs_operator_at")
    }

    static func load(_ id: String, on conn: PostgresConnection, forUpdate: Bool = false) throws -> RefundRecord? {
        let sql: SQL = forUpdate ? """
            SELECT refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference, decline_code,
                   processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
            FROM refunds WHERE refund_id = $1 FOR UPDATE
            """ : """
            SELECT refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference, decline_code,
                   processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
            FROM refunds WHERE refund_id = $1
            """
        return try conn.query(sql, [id]).first.map(RefundRecord.init(row:))
    }

    /// One page of a payment's refunds, newest first, after the refund `$2` (if any); `$3` rows at most.
    static let listSQL: SQL = """
        SELECT refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference, decline_code,
               processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
        FROM refunds
        WHERE payment_id = $1
          AND ($2::text IS NULL OR (created_at, refund_id) <
               (SELECT created_at, refund_id FROM refunds WHERE refund_id = $2 AND payment_id = $1))
        ORDER BY created_at DESC, refund_id DESC
        LIMIT $3
        """
}

/// A refund as the API shows it.
struct RefundView: Encodable {
    let id: String
    let paymentId: String
    let status: RefundStatus
    let amountMinor: Int64
    let amount: String?
    let currencyCode: String
    let processorReference: String?
    let declineCode: String?
    let createdAt: String
    /// True when Tender could not record the processor's answer and stopped retrying (see `PaymentView`).
    let needsOperator: Bool

    init(_ r: RefundRecord) {
        id = r.refundId
        paymentId = r.paymentId
        status = r.status
        amountMinor = r.amountMinor
        amount = (try? Currency(code: r.currencyCode))?.formatAmount(r.amountMinor)
        currencyCode = r.currencyCode
        processorReference = r.processorReference
        declineCode = r.declineCode
        createdAt = RFC3339.string(from: r.createdAt)
        needsOperator = r.needsOperatorAt != nil
    }
}

extension PaymentsService {
    /// `POST /v1/payments/{id}/refunds` with `{"amount":"5.00"}`: partial refunds allowed; the sum of
    /// pending and succeeded refunds never exceeds the captured amount, because each new refund is
    /// reserved while the payment row is locked (`FOR UPDATE`), so concurrent refunds queue there.
    func createRefund(_ request: HTTPRequest) throws -> HTTPResponse {
        let key = try Idempotency.requiredKey(request)
        let merchant = try authenticate(request)
        let paymentId = request.pathParameters["id"] ?? ""
        guard PrefixedIdentifier.payment.isValid(paymentId) else {
            throw PaymentProblems.notFound("payment_not_found", "No such payment.")
        }
        let command = try RefundCommand.decode(request.body)
        let fingerprint = Idempotency.fingerprint(request)
        enum Step { case respond(HTTPResponse), call(RefundRecord, processorReference: String) }
        let step: Step = try pool.transaction { conn in
            switch try KeyClaim.claim(conn: conn, merchantId: merchant.merchantId, key: key, fingerprint: fingerprint,
                                      lockMilliseconds: settings.keyLockMilliseconds) {
            case .replay(let response):
                return .respond(response)
            case .resume(_, let refundId?):
                guard let refund = try RefundRecord.load(refundId, on: conn),
                      let payment = try PaymentRecord.load(refund.paymentId, on: conn) else { throw PaymentProblems.internalError }
                return .call(refund, processorReference: payment.processorReference ?? "")
            case .fresh, .resume(_, nil):
                let (refund, reference) = try reserveRefund(paymentId: paymentId, amountText: command.amount,
                                                            merchantId: merchant.merchantId, key: key, on: conn)
                return .call(refund, processorReference: reference)
            }
        }
        switch step {
        case .respond(let response):
            return response
        case .call(let refund, let reference):
            crash.reach(.afterAccepted)
            return try sendRefund(refund, processorReference: reference)
        }
    }

    /// Phase 1 of a refund: checks the payment and the amount and reserves the refund (`pending`).
    /// Everything here throws before anything is stored: a refused refund leaves no key (I7).
    func reserveRefund(paymentId: String, amountText: String, merchantId: String, key: String,
                       on conn: PostgresConnection) throws -> (RefundRecord, String) {
        guard let payment = try PaymentRecord.load(paymentId, on: conn, forUpdate: true), payment.merchantId == merchantId else {
            throw PaymentProblems.notFound("payment_not_found", "No such payment.")
        }
        guard payment.status == .succeeded, let reference = payment.processorReference else {
            throw HTTPProblem(status: 409, code: "payment_not_refundable", title: "Not refundable",
                              detail: "Only succeeded payments can be refunded.")
        }
        let currency = try Currency(code: payment.currencyCode)
        let amountMinor: Int64
        // Bounded like every accepted amount: no refund sum can overflow the finance balances.
        do { amountMinor = try currency.parseAcceptedAmount(amountText) } catch {
            throw HTTPProblem(status: 400, code: error.code == .amountTooLarge ? "amount_too_large" : "amount_invalid",
                              title: "Invalid amount",
                              detail: "amount must be a decimal string with exactly the currency's minor digits.",
                              errors: [.init(field: "amount", code: error.code.rawValue, message: "Invalid amount.")])
        }
        let refunded: Int64 = try conn.query("""
            SELECT COALESCE(SUM(amount_minor), 0)::bigint AS refunded FROM refunds
            WHERE payment_id = $1 AND status IN ('pending', 'succeeded')
            """, [paymentId]).first?.decode("refunded") ?? 0
        guard RefundRules.fits(capturedMinor: payment.amountMinor, alreadyRefundedMinor: refunded, amountMinor: amountMinor) else {
            throw HTTPProblem(status: amountMinor <= 0 ? 400 : 422,
                              code: amountMinor <= 0 ? "amount_invalid" : "refund_exceeds_payment",
                              title: "Refund refused",
                              detail: amountMinor <= 0 ? "amount must be positive." : "The refunds would exceed the captured amount.")
        }
        let refundId = Self.newId(prefix: "re_")
        guard let refund = try conn.query("""
            WITH inserted AS (
                INSERT INTO refunds (refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_key,
                                     idempotency_key, next_resolve_at)
                VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, now() + $8 * interval '1 millisecond')
                RETURNING refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference,
                          decline_code, processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
            ), claimed AS (
                UPDATE idempotency_keys SET recovery_point = 'accepted', resource_id = $1
                WHERE merchant_id = $3 AND idempotency_key = $7
            )
            SELECT * FROM inserted
            """, [refundId, paymentId, merchantId, amountMinor, payment.currencyCode, ProcessorKey.refund(refundId: refundId), key,
                  settings.keyLockMilliseconds]).first.map(RefundRecord.init(row:)) else { throw PaymentProblems.internalError }
        return (refund, reference)
    }

    /// The next step for a reserved refund (`OutcomePhases.resume`): the processor call and its outcome.
    func sendRefund(_ refund: RefundRecord, processorReference: String) throws -> HTTPResponse {
        // Accepted by the processor (asynchronous refunds): nothing to send, the stored state is the answer.
        if refund.processorAcceptedAt != nil {
            return try recordRefundOutcome(refundId: refund.refundId, outcome: nil)
        }
        switch OutcomePhases.resume(status: refund.status, needsOperator: refund.needsOperatorAt != nil) {
        case .respondFinal:
            return try recordRefundOutcome(refundId: refund.refundId, outcome: nil)
        case .awaitOperator:
            // Waiting for an operator: a retry of the key shows the state and calls nobody.
            try pool.withConnection { try KeyClaim.unlock(conn: $0, merchantId: refund.merchantId, key: refund.idempotencyKey) }
            return .json(RefundView(refund), status: 202)
        case .callProcessor:
            let outcome = callRefund(refund, processorReference: processorReference)
            crash.reach(.afterProcessorCall)
            let response = try recordingOrHolding(.refund(refund.refundId), outcome: outcome, merchantId: refund.merchantId,
                                                  idempotencyKey: refund.idempotencyKey)
            crash.reach(.afterOutcome)
            return response
        }
    }

    /// Phase 2 of a refund.
    func callRefund(_ refund: RefundRecord, processorReference: String) -> ProcessorOutcome {
        processor.refund(RefundRequest(refundId: refund.refundId, paymentId: refund.paymentId, processorReference: processorReference,
                                       amountMinor: refund.amountMinor, currencyCode: refund.currencyCode,
                                       processorKey: refund.processorKey))
    }

    /// Commits a refund outcome (event and subscribers on an answer); unknown keeps it pending and the key resumable.
    func recordRefundOutcome(refundId: String, outcome: ProcessorOutcome?) throws -> HTTPResponse {
        try pool.transaction { conn in
            guard var refund = try RefundRecord.load(refundId, on: conn, forUpdate: true) else { throw PaymentProblems.internalError }
            // Accepted by the processor (asynchronous refunds): its reference is kept, the refund stays pending and
            // is never re-sent; the key's answer is stored, since repeating the call cannot change it.
            var accepted = refund.processorAcceptedAt != nil
            if !accepted, let outcome, let transition = OutcomePhases.transition(from: refund.status, on: outcome) {
                switch (transition, outcome) {
                case (.record, .accepted(let reference)):
                    logger.info("processor accepted refund for asynchronous processing",
                                [("refund_id", refundId), ("processor_reference", reference)])
                    refund = try Self.updateRefund(refundId, Self.refundAcceptedSQL, [refundId, reference], on: conn)
                    accepted = true
                case (.retryLater(let reason), _):
                    logger.warning("processor refund outcome unknown", [("refund_id", refundId), ("reason", reason)])
                    try recordUnknown(.refund(refundId), merchantId: refund.merchantId, idempotencyKey: refund.idempotencyKey, on: conn)
                    return .json(RefundView(refund), status: 202)
                case (.record, .approved(let reference, _)):
                    refund = try Self.updateRefund(refundId, Self.refundApprovedSQL, [refundId, reference], on: conn)
                case (.record, .declined(let code, let reference)):
                    refund = try Self.updateRefund(refundId, Self.refundDeclinedSQL, [refundId, code, reference], on: conn)
                case (.record, .unknown):
                    throw PaymentProblems.internalError
                }
                let facts = RefundOutcomeFacts(refundId: refund.refundId, paymentId: refund.paymentId, amountMinor: refund.amountMinor,
                                               currencyCode: refund.currencyCode, processorReference: refund.processorReference)
                if let event = PaymentEvent.refund(refund.status, facts) {
                    try publish(event, object: RefundView(refund), merchantId: refund.merchantId, on: conn)
                }
            }
            let response = HTTPResponse.json(RefundView(refund), status: refund.status.isFinal ? 200 : 202)
            if let key = refund.idempotencyKey, refund.status.isFinal || accepted {
                try KeyClaim.finish(conn: conn, merchantId: refund.merchantId, key: key, response: response)
            }
            return response
        }
    }

    static func updateRefund(_ refundId: String, _ sql: SQL, _ parameters: [any PostgresEncodable],
                             on conn: PostgresConnection) throws -> RefundRecord {
        guard let row = try conn.query(sql, parameters).first else { throw PaymentProblems.internalError }
        return try RefundRecord(row: row)
    }

    static let refundAcceptedSQL: SQL = """
        UPDATE refunds SET processor_reference = $2, processor_accepted_at = now(), next_resolve_at = NULL, updated_at = now()
        WHERE refund_id = $1
        RETURNING refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference, decline_code,
                  processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
        """

    static let refundApprovedSQL: SQL = """
        UPDATE refunds SET status = 'succeeded', processor_reference = $2, next_resolve_at = NULL, updated_at = now()
        WHERE refund_id = $1
        RETURNING refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference, decline_code,
                  processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
        """

    static let refundDeclinedSQL: SQL = """
        UPDATE refunds SET status = 'declined', decline_code = $2, processor_reference = $3, next_resolve_at = NULL,
               updated_at = now()
        WHERE refund_id = $1
        RETURNING refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_reference, decline_code,
                  processor_key, idempotency_key, created_at, processor_accepted_at, needs_operator_at
        """

    /// Resolver step for one pending refund (same ownership rule as payments: the key's lock).
    func resolveRefund(_ refundId: String) throws {
        let claimed: (RefundRecord, String)? = try pool.transaction { conn in
            guard let refund = try RefundRecord.load(refundId, on: conn, forUpdate: true),
                  OutcomePhases.resume(status: refund.status, needsOperator: refund.needsOperatorAt != nil) == .callProcessor,
                  let payment = try PaymentRecord.load(refund.paymentId, on: conn),
                  try claimForResolver(.refund(refundId), merchantId: refund.merchantId, idempotencyKey: refund.idempotencyKey,
                                       on: conn) else { return nil }
            return (refund, payment.processorReference ?? "")
        }
        guard let (refund, reference) = claimed else { return }
        _ = try recordingOrHolding(.refund(refundId), outcome: callRefund(refund, processorReference: reference),
                                   merchantId: refund.merchantId, idempotencyKey: refund.idempotencyKey)
    }
}

/// What the processor later said about a refund it had accepted (Adyen's REFUND notification, its Customer Area).
enum RefundConfirmation: Sendable, Equatable {
    /// The money went back to the shopper.
    case succeeded
    /// The processor failed the refund, with a code for it.
    case declined(code: String)
}

extension PaymentsService {
    /// Settles a refund the processor accepted (`ProcessorOutcome.accepted`) with its later answer: the event and
    /// its subscribers (the ledger on success) in the same transaction, as for a synchronous answer. Nil when
    /// `refundId` is not a pending accepted refund (nothing changes then).
    static func settleAcceptedRefund(_ refundId: String, as confirmation: RefundConfirmation, pool: PostgresPool,
                                     subscribers: [any PaymentEventSubscriber]) throws -> RefundRecord? {
        try pool.transaction { conn -> RefundRecord? in
            guard let pending = try RefundRecord.load(refundId, on: conn, forUpdate: true), pending.status == .pending,
                  pending.processorAcceptedAt != nil, let reference = pending.processorReference else { return nil }
            let now: Date = try conn.query("SELECT now() AS now").first?.decode("now") ?? pending.createdAt
            let refund: RefundRecord
            switch confirmation {
            case .succeeded:
                refund = try updateRefund(refundId, refundApprovedSQL, [refundId, reference], on: conn)
            case .declined(let code):
                refund = try updateRefund(refundId, refundDeclinedSQL, [refundId, code, reference], on: conn)
            }
            let facts = RefundOutcomeFacts(refundId: refund.refundId, paymentId: refund.paymentId, amountMinor: refund.amountMinor,
                                           currencyCode: refund.currencyCode, processorReference: refund.processorReference)
            if let event = PaymentEvent.refund(refund.status, facts) {
                try publish(event, object: RefundView(refund), merchantId: refund.merchantId, subscribers: subscribers,
                            now: now, on: conn)
            }
            return refund
        }
    }
}
