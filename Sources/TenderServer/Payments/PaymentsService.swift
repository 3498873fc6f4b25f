import ApplePayToken
import Crypto
import Foundation
import HTTPServer
import Money
import Observability
import PaymentRequest
import Payments
import Postgres
import Synchronization
import Time

/// Named limits and timings of the payments feature.
public struct PaymentsSettings: Sendable {
    /// How long a request (or the resolver) owns an idempotency key; must outlast one processor call
    /// with its retries. A holder that died is taken over after this (docs/reliability-security.md I10).
    public var keyLockMilliseconds = 40_000
    /// Pause between resolver passes (`TENDER_PAYMENTS_RESOLVER_INTERVAL_MS`).
    public var resolverIntervalMilliseconds = 2_000
    /// Payments or refunds one resolver pass picks up.
    public var resolverBatchMax = 32
    /// Longest wait between two resolver attempts of one payment.
    public var resolverBackoffMaxMilliseconds = 300_000
    /// Failed recordings of one processor outcome (`TENDER_PAYMENTS_RECORD_ATTEMPTS_MAX`) after which the
    /// payment or refund is marked for an operator and never re-sent by the resolver again. Each
    /// failure backs off exponentially from `resolverIntervalMilliseconds`, so the default spans minutes.
    public var recordAttemptsMax = 8
    /// Default and largest page of `GET /v1/payments`.
    public var listLimitDefault = 20
    /// Largest accepted `limit`.
    public var listLimitMax = 100

    /// Defaults.
    public init() {}

    /// From the environment: `TENDER_PAYMENTS_KEY_LOCK_MS`, `TENDER_PAYMENTS_RESOLVER_INTERVAL_MS`,
    /// `TENDER_PAYMENTS_RECORD_ATTEMPTS_MAX`; by default
    /// the lock covers every processor attempt (`TENDER_PROCESSOR_TIMEOUT_MS` × 3) plus 10 s.
    public static func load(environment: [String: String],
                            processorTimeoutMilliseconds: Int) throws(ConfigurationError) -> PaymentsSettings {
        var s = PaymentsSettings()
        s.keyLockMilliseconds = try TenderConfiguration.integer(environment, "TENDER_PAYMENTS_KEY_LOCK_MS",
                                                                default: processorTimeoutMilliseconds * 3 + 10_000, range: 100...3_600_000)
        s.resolverIntervalMilliseconds = try TenderConfiguration.integer(environment, "TENDER_PAYMENTS_RESOLVER_INTERVAL_MS",
                                                                         default: s.resolverIntervalMilliseconds, range: 10...600_000)
        s.recordAttemptsMax = try TenderConfiguration.integer(environment, "TENDER_PAYMENTS_RECORD_ATTEMPTS_MAX",
                                                              default: s.recordAttemptsMax, range: 1...1_000)
        return s
    }
}

/// Exactly-once payments and refunds (openapi.yaml, issue "Process authorized tokens"): the shell
/// around the pure core in `Payments` (`PaymentAcceptance` decides refusals, `OutcomePhases` the phases).
///
/// A payment runs in committed phases (docs/reliability-security.md §1.3): (0) the body is decoded once
/// and the token verified and decrypted with no connection held; (1) one transaction claims the
/// Idempotency-Key, reads the session under its lock, applies the rules and inserts the payment
/// (`accepted`); (2) the processor is called outside any transaction with a key derived from the payment
/// id; (3) one transaction records the outcome, marks the session paid, writes the event with its
/// subscribers (the finance ledger) and stores the response. A retry of the key, or the resolver,
/// continues from the committed point.
public final class PaymentsService: Sendable {
    let pool: PostgresPool
    let merchants: MerchantStore
    let verifier: any PaymentTokenVerifying
    let processor: any PaymentProcessor
    let subscribers: [any PaymentEventSubscriber]
    let settings: PaymentsSettings
    let logger: Logger
    let crash: CrashHook
    let metrics: MetricsRegistry
    let clock: @Sendable () -> Date
    let resolver = Mutex<(service: ThreadService?, running: Bool)>((nil, false))
    /// Payments and refunds waiting for an operator, as counted by the last resolver pass.
    let needsOperatorCounts = Mutex<(payments: Int64, refunds: Int64)>((0, 0))

    /// Wires the service. `subscribers` receive every outcome inside its transaction; `clock` is "now".
    public init(pool: PostgresPool, verifier: any PaymentTokenVerifying, processor: any PaymentProcessor,
                subscribers: [any PaymentEventSubscriber] = [], settings: PaymentsSettings = PaymentsSettings(),
                logger: Logger, crash: CrashHook = .disarmed, metrics: MetricsRegistry = MetricsRegistry(),
                clock: @escaping @Sendable () -> Date = PaymentsService.systemClock) {
        self.pool = pool
        self.merchants = MerchantStore(pool: pool)
        self.verifier = verifier
        self.processor = processor
        self.subscribers = subscribers
        self.settings = settings
        self.logger = logger
        self.crash = crash
        self.metrics = metrics
        self.clock = clock
        metrics.describe("tender_payments_outcome_record_failures_total",
                         help: "Processor outcomes that could not be recorded, by kind (payment, refund).")
        metrics.describe("tender_payments_needs_operator_total", help: "Payments and refunds marked for an operator, by kind.")
        metrics.registerGauge("tender_payments_needs_operator") { [weak self] in
            let counts = self?.needsOperatorCounts.withLock { $0 } ?? (payments: 0, refunds: 0)
            return [("kind=\"payment\"", counts.payments), ("kind=\"refund\"", counts.refunds)]
        }
    }

    /// The wall clock.
    public static let systemClock: @Sendable () -> Date = { Clock.system.now() }

    // MARK: - Create a payment

    /// Payment result JSON (openapi.yaml).
    struct PaymentResult: Encodable {
        let payment: PaymentView
        let authorizationResult: AuthorizationResult
    }

    /// What phase 1 left for the rest of the request.
    enum Claim {
        /// A final response (replay, or a refusal recorded in phase 1).
        case respond(HTTPResponse)
        /// The payment is accepted; the processor comes next.
        case proceed(PaymentRecord, DecryptedPaymentToken)
        /// A retry found the payment accepted or pending: continue from there.
        case resume(paymentId: String)
        /// Phase 1 committed, but its payment insert conflicted (transactionId or session taken): the key is
        /// still held by this request, and the refusal is recorded next (`recordConflict`).
        case conflicted(Refusal, transactionId: String)
    }

    /// `POST /v1/checkout-sessions/{id}/payments`.
    func createPayment(_ request: HTTPRequest) throws -> HTTPResponse {
        // I2: the key's format is checked before anything touches the database.
        let key = try Idempotency.requiredKey(request)
        let sessionId = request.pathParameters["id"] ?? ""
        let caller = try SessionAuthorizer(merchants: merchants).caller(request)
        guard CheckoutSessionGate.isWellFormedId(sessionId) else { throw Self.sessionNotFound }
        // A merchant's key names the merchant whose processing key decrypts the token; a client secret names
        // none, so its session is read first (one round trip more for browsers paying with the secret).
        let merchantId: String
        switch caller {
        case .merchant(let merchant): merchantId = merchant.merchantId
        case .clientSecret: merchantId = try authorizeSession(caller, sessionId: sessionId).merchantId
        }
        let command = try PaymentCommand.decode(request.body)
        let fingerprint = Idempotency.fingerprint(request)
        // Verification (ECDSA, chain, ECDH, a key-store read on a cache miss) holds no connection.
        let verified = Result { () throws(TokenError) in
            try verifier.verifyAndDecrypt(tokenJSON: command.tokenJSON, merchantId: merchantId, now: clock())
        }
        let claim: Claim = try pool.transaction { conn in
            // One statement locks the session and claims the key under it (lock order: session, then key, as
            // the outcome and the resolver take them); the caller is authorized before anything is kept.
            guard let s = try conn.query(Self.claimSQL, [sessionId, key, fingerprint, settings.keyLockMilliseconds]).first,
                  try s.decode("merchant_id", as: String.self) == merchantId else { throw Self.sessionNotFound }
            try caller.authorize(merchantId: merchantId, clientSecretSHA256: try s.decode("client_secret_sha256"))
            let state: KeyClaim.State = try s.decode("fresh", as: Bool.self) ? .fresh
                : try KeyClaim.existing(conn: conn, merchantId: merchantId, key: key, fingerprint: fingerprint,
                                        lockMilliseconds: settings.keyLockMilliseconds)
            switch state {
            case .replay(let response): return .respond(response)
            case .resume(_, let resourceId?): return .resume(paymentId: resourceId)
            case .fresh, .resume(_, nil):
                return try accept(conn: conn, session: s, sessionId: sessionId, key: key, command: command, verified: verified,
                                  requestID: request.requestID)
            }
        }
        switch claim {
        case .respond(let response):
            return response
        case .conflicted(let refusal, let transactionId):
            return try recordConflict(refusal, transactionId: transactionId)
        case .proceed(let payment, let decrypted):
            crash.reach(.afterAccepted)
            return try complete(payment, decrypted: decrypted)
        case .resume(let paymentId):
            return try resume(paymentId: paymentId)
        }
    }

    static let sessionNotFound = PaymentProblems.notFound("session_not_found", "No such checkout session.")

    /// The session row and the caller's right to pay it: the merchant's API key, or the session's client secret.
    /// An unknown session is 404 for every caller here (openapi.yaml).
    func authorizeSession(_ caller: SessionCaller, sessionId: String) throws -> SessionAccess {
        guard let session = try CheckoutSessionGate.load(id: sessionId, pool: pool) else { throw Self.sessionNotFound }
        try caller.authorize(merchantId: session.merchantId, clientSecretSHA256: session.clientSecretSHA256)
        return SessionAccess(sessionId: sessionId, merchantId: session.merchantId)
    }

    /// Phase 1's first statement: the session as the rules read it, locked, and the Idempotency-Key claimed
    /// under that lock (`fresh`: inserted now, with its lock; else it existed and `KeyClaim.existing` reads it).
    /// The latest version says whether EMV was offered. No session row: nothing is inserted.
    static let claimSQL: SQL = """
        WITH s AS (
            SELECT merchant_id, status, currency_code, total_minor, application_data_sha256, client_secret_sha256,
                   (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms, (extract(epoch FROM now()) * 1000)::bigint AS now_ms,
                   COALESCE((SELECT v.checkout::jsonb #> '{paymentRequest,merchantCapabilities}' ? 'supportsEMV'
                             FROM checkout_session_versions v WHERE v.session_id = checkout_sessions.session_id
                             ORDER BY v.version DESC LIMIT 1), false) AS supports_emv
            FROM checkout_sessions WHERE session_id = $1 FOR UPDATE
        ), k AS (
            INSERT INTO idempotency_keys (merchant_id, idempotency_key, request_fingerprint, recovery_point, locked_until)
            SELECT s.merchant_id, $2::text, $3::bytea, 'started', now() + $4::bigint * interval '1 millisecond' FROM s
            ON CONFLICT DO NOTHING RETURNING 1
        )
        SELECT s.*, EXISTS (SELECT 1 FROM k) AS fresh FROM s
        """

    /// A payment insert that found the transactionId or the session taken, after phase 1 committed with
    /// the key still held by this request: the refusal (a `failed` payment, its event, the finished key) in a
    /// transaction of its own. Should it not commit, the key's lock runs out and a retry resumes at the
    /// accept, which conflicts again and records it then.
    func recordConflict(_ refusal: Refusal, transactionId: String) throws -> HTTPResponse {
        let claim = try pool.transaction { conn in
            let seen = try conn.query("SELECT 1 AS seen FROM payments WHERE apple_transaction_id = $1", [transactionId]).first != nil
            return try refusal.on(conn).record(PaymentAcceptance.refusalAfterConflict(transactionIdSeen: seen))
        }
        guard case .respond(let response) = claim else { throw PaymentProblems.internalError }
        return response
    }

    /// Phase 1 for a fresh key: the session under its lock, the rules (`PaymentAcceptance`) over it and
    /// the verified token, then the payment row claiming the transactionId. A refusal is recorded as a
    /// `failed` payment (with its event) and the key finished with its problem, all in this transaction.
    func accept(conn: PostgresConnection, session s: PostgresRow, sessionId: String, key: String, command: PaymentCommand,
                verified: Result<DecryptedPaymentToken, TokenError>, requestID: String) throws -> Claim {
        let merchantId: String = try s.decode("merchant_id")
        let currencyCode: String = try s.decode("currency_code")
        let totalMinor: Int64 = try s.decode("total_minor")
        guard let status = CheckoutSessionStatus(rawValue: try s.decode("status")) else {
            throw PostgresError(code: .decodeFailed, message: "unknown session status", column: "status")
        }
        let snapshot = PaymentSessionSnapshot(
            session: CheckoutSessionState(status: status, expiresAtMilliseconds: try s.decode("expires_ms")),
            totalMinor: totalMinor, currencyNumericCode: try Currency(code: currencyCode).numericCodeString,
            applicationDataSHA256Hex: try s.decode("application_data_sha256"), supportsEMV: try s.decode("supports_emv"))
        let token: TokenVerification = switch verified {
        case .success(let decrypted): .verified(VerifiedTokenFacts(decrypted))
        case .failure(let error): .rejected(tokenErrorCode: error.code.rawValue)
        }
        let refusal = Refusal(conn: conn, service: self, merchantId: merchantId, sessionId: sessionId, key: key,
                              amountMinor: totalMinor, currencyCode: currencyCode, requestID: requestID)
        var appleErrors: [ApplePayError] = []
        if let refused = try PaymentAcceptance.firstRefusal(session: snapshot, nowMilliseconds: try s.decode("now_ms"), token: token,
                                                            contact: {
            guard let contact = command.shippingContact else { return .notGiven }
            appleErrors = try shippingContactErrors(conn: conn, sessionId: sessionId, contact: contact, totalMinor: totalMinor)
            return appleErrors.isEmpty ? .serviceable : .notServiceable
        }) {
            return try refusal.record(refused, appleErrors: appleErrors)
        }
        guard case .success(let decrypted) = verified, case .verified(let facts) = token,
              case .success(let network) = facts.network else { throw PaymentProblems.internalError }
        let expiry = try? CardMask.expiration(yymmdd: decrypted.paymentData.applicationExpirationDate)
        let paymentId = Self.newId(prefix: "pay_")
        let transactionId = decrypted.token.transactionIdHex.lowercased()
        // Apple step 5: the transactionId claim is a unique constraint, decided atomically with the insert.
        // One statement inserts the payment, points the key at it, returns the row (no re-read) and commits
        // phase 1 in the same round trip. No row back: it conflicted, and the refusal gets its own transaction.
        guard let payment = try conn.queryAndCommit(Self.acceptSQL, [
            paymentId, merchantId, sessionId, totalMinor, currencyCode, network, decrypted.paymentData.panLastFour,
            expiry?.month, expiry?.year, transactionId, ProcessorKey.authorization(paymentId: paymentId), key,
            command.tokenJSON, settings.keyLockMilliseconds,
        ]).first.map(PaymentRecord.init(row:)) else {
            return .conflicted(refusal, transactionId: transactionId)
        }
        return .proceed(payment, decrypted)
    }

    /// Rule 53: the full shipping contact Apple hands over at authorization is re-validated against the
    /// session's latest version; it must be serviceable and must not change the total the token carries.
    /// Returns the sheet's errors (empty when it is fine).
    func shippingContactErrors(conn: PostgresConnection, sessionId: String, contact: ApplePayPaymentContact,
                               totalMinor: Int64) throws -> [ApplePayError] {
        guard let row = try conn.query("""
            SELECT checkout::text AS checkout FROM checkout_session_versions
            WHERE session_id = $1 ORDER BY version DESC LIMIT 1
            """, [sessionId]).first else { return [] }
        let text: String = try row.decode("checkout")
        let checkout = try JSONCoding.decoder.decode(PricedCheckout.self, from: Data(text.utf8))
        let now = Timestamp(unixSeconds: Int64(clock().timeIntervalSince1970))
        let recalculated = try checkout.updatingShippingContact(contact, now: now)
        let errors = recalculated.update.errors ?? []
        if !errors.isEmpty { return errors }
        if recalculated.checkout.totalMinor != totalMinor {
            return [ApplePayError(code: .shippingContactInvalid, contactField: .postalAddress,
                                  message: "The total changed for this address; please review the order.")]
        }
        return []
    }

    /// Phase 1's insert: the payment (`accepted`), the key's move to `accepted` with its resource id, and
    /// the new row, in one round trip. No row back means the insert conflicted (transactionId or session).
    static let acceptSQL = SQL(unsafeSQL: """
        WITH inserted AS (
            INSERT INTO payments (payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code,
                                  network, last4, expiration_month, expiration_year, apple_transaction_id, processor_key,
                                  idempotency_key, encrypted_token, next_resolve_at)
            VALUES ($1, $2, $3, 'pending', 'accepted', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                    now() + $14 * interval '1 millisecond')
            ON CONFLICT DO NOTHING
            RETURNING \(PaymentRecord.columns)
        ), claimed AS (
            UPDATE idempotency_keys SET recovery_point = 'accepted', resource_id = $1
            WHERE merchant_id = $2 AND idempotency_key = $12 AND EXISTS (SELECT 1 FROM inserted)
        )
        SELECT * FROM inserted
        """, preparable: true)

    /// Phase 3 for an approval: the session locked (CTE `locked`, before the payment row: the lock
    /// order of `lockSession`), the pending payment becomes `succeeded` and its session `paid`, returning the
    /// updated payment. The `status = 'pending'` condition is re-checked under the row lock, so an outcome
    /// already recorded by another holder returns no row (and is then read as it is).
    static let approvedSQL = outcomeSQL(approvedAssignments, marksSessionPaid: true, eventParametersFrom: nil)

    /// Phase 3 for a decline, like `approvedSQL` (the session locked first; it stays open).
    static let declinedSQL = outcomeSQL(declinedAssignments, marksSessionPaid: false, eventParametersFrom: nil)

    private static let approvedAssignments = "status = 'succeeded', processor_reference = $2"
    private static let declinedAssignments = "status = 'declined', decline_code = $2, processor_reference = $3"

    /// The one shape of phase 3's conditional outcome write, from a fixed set of texts (so preparable): lock the
    /// session, move the pending payment with `assignments`, optionally mark the session paid, and with
    /// `eventParametersFrom: n` also write the outbox event from parameters $n…$n+3 (id, type, time, body).
    private static func outcomeSQL(_ assignments: String, marksSessionPaid: Bool, eventParametersFrom first: Int?) -> SQL {
        var text = """
            WITH locked AS (
                SELECT 1 FROM checkout_sessions
                WHERE session_id = (SELECT session_id FROM payments WHERE payment_id = $1) FOR UPDATE
            ), updated AS (
                UPDATE payments SET \(assignments), recovery_point = 'outcome_recorded',
                       encrypted_token = NULL, next_resolve_at = NULL, updated_at = now()
                WHERE payment_id = $1 AND status = 'pending' AND EXISTS (SELECT 1 FROM locked)
                RETURNING \(PaymentRecord.columns)
            )
            """
        if marksSessionPaid {
            text += """
                , paid AS (
                    UPDATE checkout_sessions SET status = 'paid', updated_at = now()
                    WHERE session_id = (SELECT session_id FROM updated) AND status = 'open'
                )
                """
        }
        if let first {
            text += """
                , event AS (
                    INSERT INTO events (event_id, merchant_id, event_type, object_id, created_at, body)
                    SELECT $\(first)::text, merchant_id, $\(first + 1)::text, payment_id, $\(first + 2)::timestamptz,
                           $\(first + 3)::text FROM updated
                )
                """
        }
        return SQL(unsafeSQL: text + "\nSELECT * FROM updated", preparable: true)
    }

    /// Phases 2 and 3: the processor call, then the outcome.
    func complete(_ payment: PaymentRecord, decrypted: DecryptedPaymentToken) throws -> HTTPResponse {
        let outcome = authorize(payment, decrypted: decrypted)
        crash.reach(.afterProcessorCall)
        let response = try recordingOrHolding(.payment(payment.paymentId), outcome: outcome, merchantId: payment.merchantId,
                                              idempotencyKey: payment.idempotencyKey, pending: payment)
        crash.reach(.afterOutcome)
        return response
    }

    /// Sends the authorization; the card data is wiped as soon as the call returns.
    func authorize(_ payment: PaymentRecord, decrypted: DecryptedPaymentToken) -> ProcessorOutcome {
        let sensitive = decrypted.paymentData.unsafeRevealSensitive()
        let card = SensitiveCardData(dpan: sensitive.applicationPrimaryAccountNumber,
                                     cryptogram: sensitive.onlinePaymentCryptogram ?? sensitive.emvData ?? "")
        defer { card.wipe() }
        let request = AuthorizationRequest(
            merchantId: payment.merchantId, paymentId: payment.paymentId, amountMinor: payment.amountMinor,
            currencyCode: payment.currencyCode, network: payment.network ?? "unknown",
            expirationMonth: payment.expirationMonth ?? 0, expirationYear: payment.expirationYear ?? 0,
            eci: decrypted.paymentData.eciIndicator, paymentDataType: decrypted.paymentData.paymentDataType.rawValue,
            transactionId: payment.appleTransactionId ?? "", processorKey: payment.processorKey, card: card)
        return processor.authorize(request)
    }

    /// A retry of a key whose payment was accepted or left pending: the next step from the stored state.
    func resume(paymentId: String) throws -> HTTPResponse {
        guard let payment = try pool.withConnection({ try PaymentRecord.load(paymentId, on: $0) }) else {
            throw PaymentProblems.internalError
        }
        switch OutcomePhases.resume(status: payment.status, needsOperator: payment.needsOperatorAt != nil) {
        case .respondFinal:
            return try recordOutcome(paymentId: paymentId, outcome: nil)
        case .awaitOperator:
            // Waiting for an operator: a retry of the key shows the state and calls nobody.
            try pool.withConnection { try KeyClaim.unlock(conn: $0, merchantId: payment.merchantId, key: payment.idempotencyKey) }
            return Self.paymentResponse(payment)
        case .callProcessor:
            return try complete(payment, decrypted: try redecrypt(payment))
        }
    }

    /// The stored (still encrypted) token decrypted again, checked for freshness at the time it was
    /// accepted, so a resumed attempt sends exactly what the first one would have. Runs with no
    /// connection held (the token's bytes are read first).
    func redecrypt(_ payment: PaymentRecord) throws -> DecryptedPaymentToken {
        guard let token = try pool.query("SELECT encrypted_token FROM payments WHERE payment_id = $1", [payment.paymentId])
            .first?.decodeIfPresent("encrypted_token", as: [UInt8].self) else {
            throw PaymentProblems.internalError
        }
        do {
            return try verifier.verifyAndDecrypt(tokenJSON: token, merchantId: payment.merchantId, now: payment.createdAt)
        } catch {
            logger.error("stored token no longer decrypts", [("payment_id", payment.paymentId), ("code", error.code.rawValue)])
            throw PaymentProblems.internalError
        }
    }

    /// Phase 3: commits `outcome` (nil: the payment is already final) and returns the client's response.
    /// An answer (`OutcomePhases.transition`) makes the payment final, marks the session paid on success,
    /// writes the event with its subscribers, in the same transaction; an unknown outcome leaves the
    /// payment pending and the key resumable (released, not finished).
    func recordOutcome(paymentId: String, outcome answer: ProcessorOutcome?, pending: PaymentRecord? = nil) throws -> HTTPResponse {
        // An authorization has no later channel that would settle an accepted one: it stays pending and is
        // re-sent with its key like an unknown one (no connector answers an authorization that way today).
        var outcome = answer
        if case .accepted? = answer { outcome = .unknown(reason: "processor_accepted") }
        if let pending, outcome?.isAnswer == true, let outcome {
            do {
                return try pool.transaction { conn in try recordKnownOutcome(outcome, of: pending, on: conn) }
            } catch OutcomeForecast.missed {
                // The row was not as phase 1 left it (another holder moved it): rolled back, recorded as read.
            }
        }
        return try pool.transaction { conn in
            // A known answer is written with one conditional update that locks the session first and returns the
            // row; only when it finds the payment no longer pending (or the answer is unknown) is the row read and
            // locked instead (the session locked before it either way: `lockSession`).
            var recorded: PaymentRecord?
            switch outcome {
            case .approved(let reference, _)?:
                recorded = try conn.query(Self.approvedSQL, [paymentId, reference]).first.map(PaymentRecord.init(row:))
            case .declined(let code, let reference)?:
                recorded = try conn.query(Self.declinedSQL, [paymentId, code, reference]).first.map(PaymentRecord.init(row:))
            case .unknown?, .accepted?, nil:
                try Self.lockSession(ofPayment: paymentId, on: conn)
            }
            if let payment = recorded {
                try publishOutcome(of: payment, on: conn)
            } else {
                guard let payment = try PaymentRecord.load(paymentId, on: conn, forUpdate: true) else {
                    throw PaymentProblems.internalError
                }
                if let outcome, case .retryLater(let reason)? = OutcomePhases.transition(from: payment.status, on: outcome) {
                    logger.warning("processor outcome unknown", [("payment_id", paymentId), ("reason", reason)])
                    try recordUnknown(.payment(paymentId), merchantId: payment.merchantId, idempotencyKey: payment.idempotencyKey,
                                      on: conn)
                    return Self.paymentResponse(payment)
                }
                recorded = payment
            }
            guard let payment = recorded else { throw PaymentProblems.internalError }
            let orderDetails = payment.status == .succeeded ? try WalletOrders.details(forPayment: paymentId, on: conn) : nil
            let response = Self.paymentResponse(payment, orderDetails: orderDetails)
            if let key = payment.idempotencyKey, payment.status.isFinal {
                try KeyClaim.finishAndCommit(conn: conn, merchantId: payment.merchantId, key: key, response: response)
            }
            return response
        }
    }

    /// Phase 3 for an answer, when the pending row is known as phase 1 returned it: the payment's new state
    /// is worked out beforehand, so one statement locks the session, records the outcome and writes the outbox
    /// event (its body the payment as GET will show it); then the subscribers, and the key's response with the
    /// COMMIT. When the updated row differs from the forecast (no row: another holder recorded it; or a field
    /// moved meanwhile) it throws `OutcomeForecast.missed`, so the transaction rolls back and the caller
    /// records the outcome as read instead. An unknown answer is never forecast.
    func recordKnownOutcome(_ outcome: ProcessorOutcome, of pending: PaymentRecord, on conn: PostgresConnection) throws -> HTTPResponse {
        let forecast: PaymentRecord
        let sql: SQL
        let parameters: [any PostgresEncodable]
        switch outcome {
        case .approved(let reference, _):
            forecast = pending.recorded(.succeeded, processorReference: reference, declineCode: nil)
            sql = Self.approvedWithEventSQL
            parameters = [pending.paymentId, reference]
        case .declined(let code, let reference):
            forecast = pending.recorded(.declined, processorReference: reference, declineCode: code)
            sql = Self.declinedWithEventSQL
            parameters = [pending.paymentId, code, reference]
        case .unknown, .accepted:
            preconditionFailure("only an answer is forecast")
        }
        let now = clock()
        let view = PaymentView(forecast, amountRefundedMinor: 0)
        guard let event = PaymentEvent.payment(forecast.status, Self.facts(forecast)),
              let type = EventType(rawValue: event.typeName) else { throw OutcomeForecast.missed }
        let row = try EventOutbox.Row(type, objectId: event.objectId, object: view, now: now)
        guard let payment = try conn.query(sql, parameters + [row.eventId, row.type.rawValue, row.createdAt, row.body])
                .first.map(PaymentRecord.init(row:)),
              PaymentView(payment, amountRefundedMinor: 0) == view else { throw OutcomeForecast.missed }
        EventOutbox.wakeDelivery(merchantId: payment.merchantId, on: conn)
        // The payment was pending until this statement, so its Wallet order, if any, is the one a subscriber
        // made just now: it says so, and the order is not read back.
        var orderDetails: WalletOrderDetails?
        for subscriber in subscribers {
            if let made = try subscriber.recordReportingOrder(event, merchantId: payment.merchantId, on: conn, now: now) {
                orderDetails = made
            }
        }
        let response = Self.paymentResponse(payment, orderDetails: orderDetails)
        if let key = payment.idempotencyKey {
            try KeyClaim.finishAndCommit(conn: conn, merchantId: payment.merchantId, key: key, response: response)
        }
        return response
    }

    /// `approvedSQL` that also writes the outbox event ($3 id, $4 type, $5 time, $6 body) for the updated row.
    static let approvedWithEventSQL = outcomeSQL(approvedAssignments, marksSessionPaid: true, eventParametersFrom: 3)

    /// `declinedSQL` that also writes the outbox event ($4 id, $5 type, $6 time, $7 body) for the updated row.
    static let declinedWithEventSQL = outcomeSQL(declinedAssignments, marksSessionPaid: false, eventParametersFrom: 4)

    /// The facts of a payment's outcome event.
    static func facts(_ payment: PaymentRecord) -> PaymentOutcomeFacts {
        PaymentOutcomeFacts(paymentId: payment.paymentId, sessionId: payment.sessionId, amountMinor: payment.amountMinor,
                            currencyCode: payment.currencyCode, processorReference: payment.processorReference)
    }

    /// The event of a payment that just became final, to the outbox and the subscribers.
    func publishOutcome(of payment: PaymentRecord, on conn: PostgresConnection) throws {
        guard let event = PaymentEvent.payment(payment.status, Self.facts(payment)) else { return }
        // A payment result is written once, when the outcome is known: nothing is refunded yet.
        try publish(event, object: PaymentView(payment, amountRefundedMinor: 0), merchantId: payment.merchantId, on: conn)
    }

    /// Writes `event` to the outbox with `object` (the resource exactly as its GET returns it) and hands
    /// it to every subscriber, inside the caller's transaction.
    func publish<Object: Encodable>(_ event: PaymentEvent, object: Object, merchantId: String, on conn: PostgresConnection) throws {
        try Self.publish(event, object: object, merchantId: merchantId, subscribers: subscribers, now: clock(), on: conn)
    }

    /// `publish` for callers without a service (operator commands): the same outbox row and subscribers.
    static func publish<Object: Encodable>(_ event: PaymentEvent, object: Object, merchantId: String,
                                           subscribers: [any PaymentEventSubscriber], now: Date,
                                           on conn: PostgresConnection) throws {
        guard let type = EventType(rawValue: event.typeName) else {
            preconditionFailure("payment event \(event.typeName) has no EventType")
        }
        try EventOutbox.append(type, objectId: event.objectId, object: object, merchantId: merchantId, on: conn, now: now)
        for subscriber in subscribers {
            try subscriber.record(event, merchantId: merchantId, on: conn, now: now)
        }
    }

    /// Locks are always taken session first, then payment: phase 1 holds the session while its insert
    /// may wait on a payment row that phase 3 is updating, so phase 3 must not hold that row while
    /// waiting for the session (a deadlock otherwise).
    static func lockSession(ofPayment paymentId: String, on conn: PostgresConnection) throws {
        _ = try conn.query("""
            SELECT 1 AS locked FROM checkout_sessions
            WHERE session_id = (SELECT session_id FROM payments WHERE payment_id = $1) FOR UPDATE
            """, [paymentId])
    }

    /// The payment result: 200 when the processor answered, 202 while the answer is unknown.
    static func paymentResponse(_ payment: PaymentRecord, orderDetails: WalletOrderDetails? = nil) -> HTTPResponse {
        let succeeded = payment.status == .succeeded
        // A payment result is written once, when the outcome is known: nothing is refunded yet.
        return .json(PaymentResult(payment: PaymentView(payment, amountRefundedMinor: 0),
                                   authorizationResult: AuthorizationResult(status: succeeded ? 0 : 1, errors: [],
                                                                            orderDetails: succeeded ? orderDetails : nil)),
                     status: payment.status.isFinal ? 200 : 202)
    }

    /// A fresh id of `prefix` (`PrefixedIdentifier`) from the CSPRNG.
    static func newId(prefix: String) -> String {
        PrefixedIdentifier(prefix: prefix).mint(randomBytes: SecureRandom.bytes)
    }

    // MARK: - Reading

    /// `GET /v1/payments/{id}`.
    func getPayment(_ request: HTTPRequest) throws -> HTTPResponse {
        let merchant = try authenticate(request)
        let id = request.pathParameters["id"] ?? ""
        guard PaymentIdentifier.isValid(id, prefix: "pay_"),
              let found = try pool.withConnection({ conn -> (PaymentRecord, [String: Int64])? in
                  guard let p = try PaymentRecord.load(id, on: conn), p.merchantId == merchant.merchantId else { return nil }
                  return (p, try Self.refundedMinor(paymentIds: [p.paymentId], on: conn))
              }) else {
            throw PaymentProblems.notFound("payment_not_found", "No such payment.")
        }
        let (payment, refunded) = found
        return .json(PaymentView(payment, amountRefundedMinor: refunded[payment.paymentId] ?? 0))
    }

    /// Succeeded refund totals of `paymentIds` (absent = none), in one statement.
    static func refundedMinor(paymentIds: [String], on conn: PostgresConnection) throws -> [String: Int64] {
        guard !paymentIds.isEmpty else { return [:] }
        var totals: [String: Int64] = [:]
        for row in try conn.query("""
            SELECT payment_id, sum(amount_minor)::bigint AS refunded_minor FROM refunds
            WHERE payment_id = ANY (string_to_array($1, ',')) AND status = 'succeeded' GROUP BY payment_id
            """, [paymentIds.joined(separator: ",")]).rows {
            totals[try row.decode("payment_id")] = try row.decode("refunded_minor")
        }
        return totals
    }

    /// `GET /v1/payments/{id}/refunds?limit=&startingAfter=`: the payment's refunds, newest first.
    func listRefunds(_ request: HTTPRequest) throws -> HTTPResponse {
        let merchant = try authenticate(request)
        let id = request.pathParameters["id"] ?? ""
        let limit = try pageLimit(request)
        let after = request.queryValue("startingAfter")
        let rows: [RefundRecord] = try pool.withConnection { conn in
            guard PaymentIdentifier.isValid(id, prefix: "pay_"),
                  let payment = try PaymentRecord.load(id, on: conn), payment.merchantId == merchant.merchantId else {
                throw PaymentProblems.notFound("payment_not_found", "No such payment.")
            }
            if let after {
                guard PaymentIdentifier.isValid(after, prefix: "re_"),
                      try conn.query("SELECT 1 AS found FROM refunds WHERE refund_id = $1 AND payment_id = $2",
                                     [after, id]).first != nil else {
                    throw PaymentProblems.invalidQuery("startingAfter", "startingAfter is not a refund of this payment.")
                }
            }
            return try conn.query(RefundRecord.listSQL, [id, after, limit + 1]).rows.map(RefundRecord.init(row:))
        }
        return .json(ListPage(data: rows.prefix(limit).map(RefundView.init), hasMore: rows.count > limit))
    }

    /// `limit` of a list request: `listLimitDefault` when absent, 400 `invalid_query` outside 1...`listLimitMax`.
    func pageLimit(_ request: HTTPRequest) throws -> Int {
        guard let raw = request.queryValue("limit") else { return settings.listLimitDefault }
        guard let value = Int(raw), (1...settings.listLimitMax).contains(value) else {
            throw PaymentProblems.invalidQuery("limit", "limit must be 1-\(settings.listLimitMax).")
        }
        return value
    }

    /// `GET /v1/payments?checkoutSessionId=&status=&limit=&startingAfter=`, newest first.
    func listPayments(_ request: HTTPRequest) throws -> HTTPResponse {
        let merchant = try authenticate(request)
        let limit = try pageLimit(request)
        let status = request.queryValue("status")
        if let status, PaymentStatus(rawValue: status) == nil {
            throw PaymentProblems.invalidQuery("status", "status must be succeeded, declined, pending or failed.")
        }
        let sessionId = request.queryValue("checkoutSessionId")
        if let sessionId, !PaymentIdentifier.isValid(sessionId, prefix: "cs_") {
            throw PaymentProblems.invalidQuery("checkoutSessionId", "checkoutSessionId is not a session id.")
        }
        let after = request.queryValue("startingAfter")
        let (rows, refunded): ([PaymentRecord], [String: Int64]) = try pool.withConnection { conn in
            if let after {
                guard PaymentIdentifier.isValid(after, prefix: "pay_"),
                      try conn.query("SELECT 1 AS found FROM payments WHERE payment_id = $1 AND merchant_id = $2",
                                     [after, merchant.merchantId]).first != nil else {
                    throw PaymentProblems.invalidQuery("startingAfter", "startingAfter is not one of your payments.")
                }
            }
            let rows = try conn.query(PaymentRecord.listSQL, [merchant.merchantId, sessionId, status, after, limit + 1])
                .rows.map(PaymentRecord.init(row:))
            return (rows, try Self.refundedMinor(paymentIds: rows.prefix(limit).map(\.paymentId), on: conn))
        }
        return .json(ListPage(data: rows.prefix(limit).map { PaymentView($0, amountRefundedMinor: refunded[$0.paymentId] ?? 0) },
                          hasMore: rows.count > limit))
    }

    /// The merchant behind an API key, or 401.
    func authenticate(_ request: HTTPRequest) throws -> Merchant {
        guard let bearer = TenderApp.bearerToken(request), let merchant = try merchants.authenticate(bearer: bearer) else {
            throw Problems.unauthorized
        }
        return merchant
    }

    // MARK: - Routes and resolver

    /// Registers the payment and refund routes, each wrapped by `guarded`.
    public func register(into router: inout Router, guarded: (@escaping HTTPHandler) -> HTTPHandler) {
        router.add("POST", "/v1/checkout-sessions/{id}/payments", guarded { [self] in try createPayment($0) })
        router.add("GET", "/v1/payments/{id}", guarded { [self] in try getPayment($0) })
        router.add("GET", "/v1/payments", guarded { [self] in try listPayments($0) })
        router.add("POST", "/v1/payments/{id}/refunds", guarded { [self] in try createRefund($0) })
        router.add("GET", "/v1/payments/{id}/refunds", guarded { [self] in try listRefunds($0) })
    }

    /// The resolver as a `Service` (`resolver`): one thread running `resolvePass` every
    /// `resolverIntervalMilliseconds` until stopped; `stop` waits for the pass in progress. `serve` adds
    /// it to its `ServiceGroup`; the same object every call.
    public var resolverService: ThreadService {
        resolver.withLock { state in
            if let service = state.service { return service }
            let interval = settings.resolverIntervalMilliseconds
            let service = ThreadService(name: "resolver") { [weak self] service in
                while !service.isStopping {
                    guard let self else { return }
                    _ = self.resolvePass()
                    guard service.pause(milliseconds: interval) else { return }
                }
            }
            state.service = service
            return service
        }
    }

    /// Starts the resolver service (idempotent; for callers without a `ServiceGroup`).
    public func startResolver() {
        let service = resolverService
        let start = resolver.withLock { state -> Bool in
            defer { state.running = true }
            return !state.running
        }
        if start { try? service.start() }
    }

    /// Stops the resolver service started by `startResolver` and waits (up to 30 s) for its current pass.
    public func stopResolver() {
        let running = resolver.withLock { state -> ThreadService? in
            defer { state = (nil, false) }
            return state.running ? state.service : nil
        }
        _ = running?.stop(deadline: ContinuousClock.now.advanced(by: .seconds(30)))
    }

    /// One resolver pass: pending payments and refunds whose time has come, each re-sent with its own key.
    /// Returns how many were attempted.
    @discardableResult
    public func resolvePass() -> Int {
        var attempted = 0
        do {
            for subject in try dueSubjects() {
                attempted += 1
                do {
                    switch subject {
                    case .payment(let id): try resolvePayment(id)
                    case .refund(let id): try resolveRefund(id)
                    }
                } catch {
                    logger.warning("resolver: \(subject.kind) not resolved",
                                   [("\(subject.kind)_id", subject.id), ("error", String(describing: type(of: error)))])
                }
            }
            try refreshNeedsOperatorCounts()
        } catch {
            logger.warning("resolver pass failed", [("error", String(describing: type(of: error)))])
        }
        return attempted
    }

    /// Takes over one pending payment (unless a request holds its key) and re-sends it with the same key.
    func resolvePayment(_ paymentId: String) throws {
        let claimed: PaymentRecord? = try pool.transaction { conn in
            try Self.lockSession(ofPayment: paymentId, on: conn)
            guard let payment = try PaymentRecord.load(paymentId, on: conn, forUpdate: true, skipLocked: true),
                  OutcomePhases.resume(status: payment.status, needsOperator: payment.needsOperatorAt != nil) == .callProcessor,
                  try claimForResolver(.payment(paymentId), merchantId: payment.merchantId,
                                       idempotencyKey: payment.idempotencyKey, on: conn) else { return nil }
            return payment
        }
        guard let payment = claimed else { return }
        let outcome = authorize(payment, decrypted: try redecrypt(payment))
        _ = try recordingOrHolding(.payment(paymentId), outcome: outcome, merchantId: payment.merchantId,
                                   idempotencyKey: payment.idempotencyKey)
    }
}

extension ProcessorOutcome {
    /// Approved or declined: the processor decided.
    var isAnswer: Bool {
        switch self {
        case .approved, .declined: true
        case .unknown, .accepted: false
        }
    }
}

/// A forecast of phase 3's row that the database did not confirm (`recordKnownOutcome`).
enum OutcomeForecast: Error {
    case missed
}

/// One page of a list (`{"data":[…],"hasMore":bool}`).
struct ListPage<Item: Encodable>: Encodable {
    let data: [Item]
    let hasMore: Bool
}

/// The session a payment request is for, once the caller is allowed to pay it.
struct SessionAccess {
    let sessionId: String
    let merchantId: String
}

extension VerifiedTokenFacts {
    /// The facts the rules need from a decrypted token (the DPAN is read for its scheme only).
    init(_ decrypted: DecryptedPaymentToken) {
        self.init(applicationDataHex: decrypted.token.applicationDataHex,
                  currencyCodeNumeric: decrypted.paymentData.currencyCodeNumeric,
                  transactionAmountMinor: decrypted.paymentData.transactionAmountMinor,
                  isEMV: decrypted.paymentData.paymentDataType == .emv, claimedNetwork: decrypted.token.paymentMethod?.network,
                  dpan: decrypted.paymentData.unsafeRevealSensitive().applicationPrimaryAccountNumber)
    }
}

/// Records a refused payment (`failed`, with its reason and its `payment.failed` event) and finishes
/// the key with the problem.
struct Refusal {
    var conn: PostgresConnection
    let service: PaymentsService
    let merchantId: String
    let sessionId: String
    let key: String
    let amountMinor: Int64
    let currencyCode: String
    let requestID: String

    static let insertSQL = SQL(unsafeSQL: """
        INSERT INTO payments (payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code,
                              failure_code, token_error_code, processor_key, idempotency_key)
        VALUES ($1, $2, $3, 'failed', 'outcome_recorded', $4, $5, $6, $7, $8, $9)
        RETURNING \(PaymentRecord.columns)
        """, preparable: true)

    /// The same refusal on another connection (the conflict's own transaction).
    func on(_ other: PostgresConnection) -> Refusal {
        var copy = self
        copy.conn = other
        return copy
    }

    func record(_ refusal: PaymentRefusal, appleErrors: [ApplePayError] = []) throws -> PaymentsService.Claim {
        let paymentId = PaymentsService.newId(prefix: "pay_")
        guard let payment = try conn.query(Self.insertSQL, [
            paymentId, merchantId, sessionId, amountMinor, currencyCode, refusal.failure.rawValue, refusal.tokenErrorCode,
            ProcessorKey.authorization(paymentId: paymentId), key,
        ]).first.map(PaymentRecord.init(row:)) else { throw PaymentProblems.internalError }
        service.logger.info("payment refused", [("payment_id", paymentId), ("code", refusal.code),
                                                ("token_error", refusal.tokenErrorCode ?? "")])
        try service.publishOutcome(of: payment, on: conn)
        let response = try PaymentRefusalProblem.response(refusal, paymentId: paymentId, appleErrors: appleErrors,
                                                          requestID: requestID)
        _ = try conn.execute("UPDATE idempotency_keys SET resource_id = $3 WHERE merchant_id = $1 AND idempotency_key = $2",
                             [merchantId, key, paymentId])
        try KeyClaim.finish(conn: conn, merchantId: merchantId, key: key, response: response)
        return .respond(response)
    }
}

/// Problems of the payments routes.
enum PaymentProblems {
    static func notFound(_ code: String, _ detail: String) -> HTTPProblem {
        HTTPProblem(status: 404, code: code, title: "Not found", detail: detail)
    }

    static func invalidQuery(_ field: String, _ detail: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: "invalid_query", title: "Invalid query", detail: detail,
                    errors: [.init(field: field, code: "invalid_value", message: detail)])
    }

    static let malformedJSON = HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON",
                                           detail: "The request body is not valid JSON for this endpoint.")

    static let internalError = HTTPProblem(status: 500, code: "internal_error", title: "Internal error",
                                           detail: "The request could not be completed.")
}
