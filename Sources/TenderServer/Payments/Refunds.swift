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
    let status: String
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
        status = try row.decode("status")
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
    let status: String
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
        guard PaymentIdentifier.isValid(paymentId, prefix: "pay_") else {
            throw PaymentProblems.notFound("payment_not_found", "No such payment.")
        }
        let amountText = try Self.refundAmountText(request.body)
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
                // Everything here throws before anything is stored: a refused refund leaves no key (I7).
                guard let payment = try PaymentRecord.load(paymentId, on: conn, forUpdate: true),
                      payment.merchantId == merchant.merchantId else {
                    throw PaymentProblems.notFound("payment_not_found", "No such payment.")
                }
                guard payment.status == .succeeded, let reference = payment.processorReference else {
                    throw HTTPProblem(status: 409, code: "payment_not_refundable", title: "Not refundable",
                                      detail: "Only succeeded payments can be refunded.")
                }
                let currency = try Currency(code: payment.currencyCode)
                let amountMinor: Int64
                // Bounded like every accepted amount: no refund sum can overflow the finance balances.
                do { amountMinor = try currency.parseAcceptedAmount(amountText) } catch let error as MoneyError {
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
                                      detail: amountMinor <= 0 ? "amount must be positive."
                                          : "The refunds would exceed the captured amount.")
                }
                let refundId = Self.newId(prefix: "re_")
                _ = try conn.execute("""
                    INSERT INTO refunds (refund_id, payment_id, merchant_id, status, amount_minor, currency_code, processor_key,
                                         idempotency_key, next_resolve_at)
                    VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, now() + $8 * interval '1 millisecond')
                    """, [refundId, paymentId, merchant.merchantId, amountMinor, payment.currencyCode,
                          ProcessorKey.refund(refundId: refundId), key, settings.keyLockMilliseconds])
                _ = try conn.execute("""
                    UPDATE idempotency_keys SET recovery_point = 'accepted', resource_id = $3
                    WHERE merchant_id = $1 AND idempotency_key = $2
                    """, [merchant.merchantId, key, refundId])
                guard let refund = try RefundRecord.load(refundId, on: conn) else { throw PaymentProblems.internalError }
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

    /// The body must be exactly `{"amount": "<decimal>"}` (unknown fields refused, openapi.yaml).
    static func refundAmountText(_ body: [UInt8]) throws(HTTPProblem) -> String {
        guard body.count <= 4_096 else { throw PaymentProblems.malformedJSON }
        try JSONCoding.checkBody(body)
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw PaymentProblems.malformedJSON
        }
        for field in object.keys.sorted() where field != "amount" {
            throw HTTPProblem(status: 400, code: "unknown_field", title: "Unknown field",
                              detail: "The request contains a field this endpoint does not accept.",
                              errors: [.init(field: field, code: "unknown_field", message: "This field is not accepted.")])
        }
        guard let amount = object["amount"] as? String else {
            throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "amount is required.",
                              errors: [.init(field: "amount", code: "required", message: "amount must be a decimal string.")])
        }
        return amount
    }

    /// Calls the processor for a reserved refund, then records the outcome.
    func sendRefund(_ refund: RefundRecord, processorReference: String) throws -> HTTPResponse {
        // Settled, or accepted by the processor: nothing to send, the stored state is the answer.
        if refund.status != "pending" || refund.processorAcceptedAt != nil {
            return try recordRefundOutcome(refundId: refund.refundId, outcome: nil)
        }
        // Waiting for an operator: a retry of the key shows the state and calls nobody.
        if refund.needsOperatorAt != nil {
            try releaseKey(merchantId: refund.merchantId, idempotencyKey: refund.idempotencyKey)
            return .json(RefundView(refund), status: 202)
        }
        let outcome = processor.refund(RefundRequest(refundId: refund.refundId, paymentId: refund.paymentId,
                                                     processorReference: processorReference, amountMinor: refund.amountMinor,
                                                     currencyCode: refund.currencyCode, processorKey: refund.processorKey))
        crash.reach(.afterProcessorCall)
        let response = try recordingOrHolding(.refund(refund.refundId), outcome: outcome, merchantId: refund.merchantId,
                                              idempotencyKey: refund.idempotencyKey)
        crash.reach(.afterOutcome)
        return response
    }

    /// Commits a refund outcome (ledger sink on success); unknown keeps it pending and the key resumable.
    func recordRefundOutcome(refundId: String, outcome: ProcessorOutcome?) throws -> HTTPResponse {
        try pool.transaction { conn in
            guard var refund = try RefundRecord.load(refundId, on: conn, forUpdate: true) else { throw PaymentProblems.internalError }
            // Accepted by the processor (asynchronous refunds): its reference is kept, the refund stays pending and
            // is never re-sent; the key's answer is stored, since repeating the call cannot change it.
            var accepted = refund.status == "pending" && refund.processorAcceptedAt != nil
            if refund.status == "pending", !accepted, let outcome {
                switch outcome {
                case .accepted(let reference):
                    logger.info("processor accepted refund for asynchronous processing",
                                [("refund_id", refundId), ("processor_reference", reference)])
                    _ = try conn.execute("""
                        UPDATE refunds SET processor_reference = $2, processor_accepted_at = now(), next_resolve_at = NULL,
                               updated_at = now()
                        WHERE refund_id = $1
                        """, [refundId, reference])
                    accepted = true
                case .approved(let reference, _):
                    _ = try conn.execute("""
                        UPDATE refunds SET status = 'succeeded', processor_reference = $2, next_resolve_at = NULL, updated_at = now()
                        WHERE refund_id = $1
                        """, [refundId, reference])
                    try sink.record(.refundSucceeded(refundId: refundId, paymentId: refund.paymentId, amountMinor: refund.amountMinor,
                                                     currencyCode: refund.currencyCode, processorReference: reference),
                                    merchantId: refund.merchantId, on: conn, now: Date())
                case .declined(let code, let reference):
                    _ = try conn.execute("""
                        UPDATE refunds SET status = 'declined', decline_code = $2, processor_reference = $3, next_resolve_at = NULL,
                               updated_at = now()
                        WHERE refund_id = $1
                        """, [refundId, code, reference])
                case .unknown(let reason):
                    logger.warning("processor refund outcome unknown", [("refund_id", refundId), ("reason", reason)])
                    _ = try conn.execute("""
                        UPDATE refunds SET resolve_attempts = resolve_attempts + 1,
                               next_resolve_at = now() + least($2::bigint, $3::bigint * (2 ^ least(resolve_attempts, 16))::bigint)
                                                 * interval '1 millisecond',
                               updated_at = now()
                        WHERE refund_id = $1
                        """, [refundId, settings.resolverBackoffMaxMilliseconds, settings.resolverIntervalMilliseconds])
                    if let key = refund.idempotencyKey {
                        _ = try conn.execute("""
                            UPDATE idempotency_keys SET recovery_point = 'processor_called', locked_until = NULL
                            WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
                            """, [refund.merchantId, key])
                    }
                    return .json(RefundView(refund), status: 202)
                }
                guard let updated = try RefundRecord.load(refundId, on: conn) else { throw PaymentProblems.internalError }
                refund = updated
            }
            let response = HTTPResponse.json(RefundView(refund), status: refund.status == "pending" ? 202 : 200)
            if let key = refund.idempotencyKey, refund.status != "pending" || accepted {
                try KeyClaim.finish(conn: conn, merchantId: refund.merchantId, key: key, response: response)
            }
            return response
        }
    }

    /// Resolver step for one pending refund (same ownership rule as payments: the key's lock).
    func resolveRefund(_ refundId: String) throws {
        let claimed: (RefundRecord, String)? = try pool.transaction { conn in
            guard let refund = try RefundRecord.load(refundId, on: conn, forUpdate: true), refund.status == "pending",
                  refund.needsOperatorAt == nil,
                  let payment = try PaymentRecord.load(refund.paymentId, on: conn) else { return nil }
            if let key = refund.idempotencyKey {
                let taken = try conn.execute("""
                    UPDATE idempotency_keys SET locked_until = now() + $3 * interval '1 millisecond'
                    WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
                      AND (locked_until IS NULL OR locked_until <= now())
                    """, [refund.merchantId, key, settings.keyLockMilliseconds])
                guard taken == 1 else { return nil }
            }
            _ = try conn.execute("UPDATE refunds SET next_resolve_at = now() + $2 * interval '1 millisecond' WHERE refund_id = $1",
                                 [refundId, settings.keyLockMilliseconds])
            return (refund, payment.processorReference ?? "")
        }
        guard let (refund, reference) = claimed else { return }
        let outcome = processor.refund(RefundRequest(refundId: refund.refundId, paymentId: refund.paymentId,
                                                     processorReference: reference, amountMinor: refund.amountMinor,
                                                     currencyCode: refund.currencyCode, processorKey: refund.processorKey))
        _ = try recordingOrHolding(.refund(refundId), outcome: outcome, merchantId: refund.merchantId,
                                   idempotencyKey: refund.idempotencyKey)
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
    /// Settles a refund the processor accepted (`ProcessorOutcome.accepted`) with its later answer: a success reaches
    /// the ledger through `sink` in the same transaction, as a synchronous one does. Nil when `refundId` is not a
    /// pending accepted refund (nothing changes then).
    static func settleAcceptedRefund(_ refundId: String, as confirmation: RefundConfirmation, pool: PostgresPool,
                                     sink: any PaymentOutcomeSink) throws -> RefundRecord? {
        try pool.transaction { conn -> RefundRecord? in
            guard let refund = try RefundRecord.load(refundId, on: conn, forUpdate: true), refund.status == "pending",
                  refund.processorAcceptedAt != nil, let reference = refund.processorReference else { return nil }
            let now: Date = try conn.query("SELECT now() AS now").first?.decode("now") ?? refund.createdAt
            switch confirmation {
            case .succeeded:
                _ = try conn.execute("UPDATE refunds SET status = 'succeeded', updated_at = now() WHERE refund_id = $1", [refundId])
                try sink.record(.refundSucceeded(refundId: refundId, paymentId: refund.paymentId, amountMinor: refund.amountMinor,
                                                 currencyCode: refund.currencyCode, processorReference: reference),
                                merchantId: refund.merchantId, on: conn, now: now)
            case .declined(let code):
                _ = try conn.execute("""
                    UPDATE refunds SET status = 'declined', decline_code = $2, updated_at = now() WHERE refund_id = $1
                    """, [refundId, code])
            }
            return try RefundRecord.load(refundId, on: conn)
        }
    }
}
