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
    public static func load(environment: [String: String], processorTimeoutMilliseconds: Int) throws(ConfigurationError) -> PaymentsSettings {
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

/// Exactly-once payments and refunds (openapi.yaml, issue "Process authorized tokens").
///
/// A payment runs in committed phases (docs/reliability-security.md §1.3): (1) one transaction claims the
/// Idempotency-Key, checks the session, verifies and binds the token and inserts the payment
/// (`accepted`); (2) the processor is called outside any transaction with a key derived from the payment
/// id; (3) one transaction records the outcome, marks the session paid, feeds the ledger sink and stores
/// the response. A retry of the key, or the resolver, continues from the committed point.
public final class PaymentsService: Sendable {
    let pool: PostgresPool
    let merchants: MerchantStore
    let verifier: any PaymentTokenVerifying
    let processor: any PaymentProcessor
    let sink: any PaymentOutcomeSink
    let settings: PaymentsSettings
    let logger: Logger
    let crash: CrashHook
    let metrics: MetricsRegistry
    let resolver = Mutex<ResolverLoop?>(nil)
    /// Payments and refunds waiting for an operator, as counted by the last resolver pass.
    let needsOperatorCounts = Mutex<(payments: Int64, refunds: Int64)>((0, 0))

    /// Wires the service.
    public init(pool: PostgresPool, verifier: any PaymentTokenVerifying, processor: any PaymentProcessor,
                sink: any PaymentOutcomeSink = NoopPaymentOutcomeSink(), settings: PaymentsSettings = PaymentsSettings(),
                logger: Logger, crash: CrashHook = .disarmed, metrics: MetricsRegistry = MetricsRegistry()) {
        self.pool = pool
        self.merchants = MerchantStore(pool: pool)
        self.verifier = verifier
        self.processor = processor
        self.sink = sink
        self.settings = settings
        self.logger = logger
        self.crash = crash
        self.metrics = metrics
        metrics.describe("tender_payments_outcome_record_failures_total",
                         help: "Processor outcomes that could not be recorded, by kind (payment, refund).")
        metrics.describe("tender_payments_needs_operator_total", help: "Payments and refunds marked for an operator, by kind.")
        metrics.registerGauge("tender_payments_needs_operator") { [weak self] in
            let counts = self?.needsOperatorCounts.withLock { $0 } ?? (payments: 0, refunds: 0)
            return [("kind=\"payment\"", counts.payments), ("kind=\"refund\"", counts.refunds)]
        }
    }

    // MARK: - Create a payment

    /// Payment result JSON (openapi.yaml).
    struct PaymentResult: Encodable {
        let payment: PaymentView
        let authorizationResult: AuthorizationResult
    }

    /// Apple Pay JS `ApplePayPaymentAuthorizationResult` (status 0 success, 1 failure).
    struct AuthorizationResult: Encodable {
        let status: Int
        let errors: [String]
        /// The Wallet order of a succeeded payment (CONTRACT §7); absent otherwise.
        var orderDetails: WalletOrderDetails? = nil
    }

    /// What phase 1 left for the rest of the request.
    enum Claim {
        /// A final response (replay, or a refusal recorded in phase 1).
        case respond(HTTPResponse)
        /// The payment is accepted; the processor comes next.
        case proceed(PaymentRecord, DecryptedPaymentToken)
        /// A retry found the payment accepted or pending: continue from there.
        case resume(paymentId: String)
    }

    /// `POST /v1/checkout-sessions/{id}/payments`.
    func createPayment(_ request: HTTPRequest) throws -> HTTPResponse {
        // I2: the key's format is checked before anything touches the database.
        let key = try Idempotency.requiredKey(request)
        let sessionId = request.pathParameters["id"] ?? ""
        let session = try authorizeSession(request, sessionId: sessionId)
        let tokenJSON = try Self.tokenJSON(fromBody: request.body)
        let shippingContact = try Self.shippingContact(fromBody: request.body)
        let fingerprint = Idempotency.fingerprint(request)

        let claim: Claim = try pool.transaction { conn in
            switch try KeyClaim.claim(conn: conn, merchantId: session.merchantId, key: key, fingerprint: fingerprint,
                                      lockMilliseconds: settings.keyLockMilliseconds) {
            case .replay(let response): return .respond(response)
            case .resume(_, let resourceId?): return .resume(paymentId: resourceId)
            case .fresh, .resume(_, nil):
                return try accept(conn: conn, sessionId: sessionId, key: key, tokenJSON: tokenJSON,
                                  shippingContact: shippingContact, requestID: request.requestID)
            }
        }
        switch claim {
        case .respond(let response):
            return response
        case .proceed(let payment, let decrypted):
            crash.reach(.afterAccepted)
            return try complete(payment, decrypted: decrypted, requestID: request.requestID)
        case .resume(let paymentId):
            return try resume(paymentId: paymentId, requestID: request.requestID)
        }
    }

    /// The session row and the caller's right to pay it: the merchant's API key, or the session's client secret.
    func authorizeSession(_ request: HTTPRequest, sessionId: String) throws -> SessionAccess {
        guard let bearer = TenderApp.bearerToken(request) else { throw Problems.unauthorized }
        guard PaymentIdentifier.isValid(sessionId, prefix: "cs_"),
              let row = try pool.query("SELECT merchant_id, client_secret_sha256 FROM checkout_sessions WHERE session_id = $1",
                                       [sessionId]).first else {
            throw PaymentProblems.notFound("session_not_found", "No such checkout session.")
        }
        let access = SessionAccess(sessionId: sessionId, merchantId: try row.decode("merchant_id"))
        if APIKeyFormat.parse(bearer) != nil {
            guard let merchant = try merchants.authenticate(bearer: bearer) else { throw Problems.unauthorized }
            // Another merchant's key learns nothing about this session.
            guard merchant.merchantId == access.merchantId else {
                throw PaymentProblems.notFound("session_not_found", "No such checkout session.")
            }
            return access
        }
        let stored: [UInt8] = try row.decode("client_secret_sha256")
        guard constantTimeEqual(stored, Digest.sha256(bearer)) else { throw Problems.unauthorized }
        return access
    }

    /// Request shape: `{"token": {…}, "shippingContact": {…}, "billingContact": {…}}`; Tender's own
    /// object refuses unknown members, Apple's token is taken as sent (openapi.yaml).
    static func tokenJSON(fromBody body: [UInt8]) throws(HTTPProblem) -> [UInt8] {
        // The JSON edge first: duplicate members, NUL and depth are refused before any parser sees the body.
        try JSONCoding.checkBody(body)
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw PaymentProblems.malformedJSON
        }
        for field in object.keys.sorted() where !["token", "shippingContact", "billingContact"].contains(field) {
            throw HTTPProblem(status: 400, code: "unknown_field", title: "Unknown field",
                              detail: "The request contains a field this endpoint does not accept.",
                              errors: [.init(field: field, code: "unknown_field", message: "This field is not accepted.")])
        }
        guard let token = object["token"] as? [String: Any] else {
            throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "token is required.",
                              errors: [.init(field: "token", code: "required", message: "An Apple Pay token object is required.")])
        }
        for field in ["shippingContact", "billingContact"] where object[field] != nil && !(object[field] is [String: Any]) {
            throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "\(field) must be an object.",
                              errors: [.init(field: field, code: "invalid_type", message: "This field must be an object.")])
        }
        guard let bytes = try? JSONSerialization.data(withJSONObject: token, options: [.sortedKeys]) else {
            throw PaymentProblems.malformedJSON
        }
        return Array(bytes)
    }

    /// The body's `shippingContact` (Apple's object, new fields tolerated), or nil when absent.
    static func shippingContact(fromBody body: [UInt8]) throws(HTTPProblem) -> ApplePayPaymentContact? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let contact = object["shippingContact"] as? [String: Any],
              let bytes = try? JSONSerialization.data(withJSONObject: contact) else { return nil }
        guard let decoded = try? JSONCoding.decoder.decode(ApplePayPaymentContact.self, from: bytes) else {
            throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON",
                              detail: "shippingContact is not an ApplePayPaymentContact.",
                              errors: [.init(field: "shippingContact", code: "invalid_value", message: "Not a payment contact.")])
        }
        return decoded
    }

    /// Rule 53: the full shipping contact Apple hands over at authorization is re-validated against the
    /// session's latest version; it must be serviceable and must not change the total the token carries.
    func shippingContactProblem(conn: PostgresConnection, sessionId: String, contact: ApplePayPaymentContact,
                                totalMinor: Int64) throws -> [ApplePayError]? {
        guard let row = try conn.query("""
            SELECT checkout::text AS checkout FROM checkout_session_versions
            WHERE session_id = $1 ORDER BY version DESC LIMIT 1
            """, [sessionId]).first else { return nil }
        let text: String = try row.decode("checkout")
        let checkout = try JSONCoding.decoder.decode(PricedCheckout.self, from: Data(text.utf8))
        let recalculated = try checkout.updatingShippingContact(contact, now: Timestamp(unixSeconds: Int64(Date().timeIntervalSince1970)))
        let errors = recalculated.update.errors ?? []
        if !errors.isEmpty { return errors }
        if recalculated.checkout.totalMinor != totalMinor {
            return [ApplePayError(code: .shippingContactInvalid, contactField: .postalAddress,
                                  message: "The total changed for this address; please review the order.")]
        }
        return nil
    }

    /// Phase 1 for a fresh key: session checks, token verification and binding (Apple steps 1–6), then
    /// the payment row claiming the transactionId. A refusal is recorded as a `failed` payment and the
    /// key finished with its problem, all in this transaction.
    func accept(conn: PostgresConnection, sessionId: String, key: String, tokenJSON: [UInt8],
                shippingContact: ApplePayPaymentContact? = nil, requestID: String) throws -> Claim {
        guard let s = try conn.query("""
            SELECT merchant_id, status, currency_code, total_minor, application_data_sha256, expires_at <= now() AS expired,
                   COALESCE((SELECT v.checkout #> '{paymentRequest,merchantCapabilities}' ? 'supportsEMV'
                             FROM checkout_session_versions v WHERE v.session_id = checkout_sessions.session_id
                             ORDER BY v.version DESC LIMIT 1), false) AS supports_emv
            FROM checkout_sessions WHERE session_id = $1 FOR UPDATE
            """, [sessionId]).first else {
            throw PaymentProblems.notFound("session_not_found", "No such checkout session.")
        }
        let merchantId: String = try s.decode("merchant_id")
        let currencyCode: String = try s.decode("currency_code")
        let totalMinor: Int64 = try s.decode("total_minor")
        let status: String = try s.decode("status")
        let refusal = Refusal(conn: conn, service: self, merchantId: merchantId, sessionId: sessionId, key: key,
                              amountMinor: totalMinor, currencyCode: currencyCode, requestID: requestID)
        // Rule 31/58: only an open, unexpired session can be paid.
        if status == "paid" {
            return try refusal.record(.sessionNotPayable, status: 409, code: "session_already_paid", "The checkout session is already paid.")
        }
        if status != "open" {
            return try refusal.record(.sessionNotPayable, status: 409, code: "session_not_open", "The checkout session is not open.")
        }
        if try s.decode("expired", as: Bool.self) {
            return try refusal.record(.sessionNotPayable, status: 410, code: "session_expired", "The checkout session has expired.")
        }
        let decrypted: DecryptedPaymentToken
        do {
            decrypted = try verifier.verifyAndDecrypt(tokenJSON: tokenJSON, merchantId: merchantId, now: Date())
        } catch {
            return try refusal.record(.tokenRejected, status: 422, code: "token_rejected",
                                      "The payment token could not be verified.", tokenError: error.code.rawValue)
        }
        // Apple step 6: the token must be for this session (applicationData), currency and amount.
        let expectedHash: String = try s.decode("application_data_sha256")
        guard decrypted.token.applicationDataHex?.lowercased() == expectedHash else {
            return try refusal.record(.applicationDataMismatch, status: 422, code: "application_data_mismatch",
                                      "The payment token was not issued for this checkout session.")
        }
        let currency = try Currency(code: currencyCode)
        guard decrypted.paymentData.currencyCodeNumeric == currency.numericCodeString else {
            return try refusal.record(.currencyMismatch, status: 422, code: "currency_mismatch",
                                      "The payment token's currency differs from the checkout session's.")
        }
        guard decrypted.paymentData.transactionAmountMinor == totalMinor else {
            return try refusal.record(.amountMismatch, status: 422, code: "amount_mismatch",
                                      "The payment token's amount differs from the checkout session's total.")
        }
        if let shippingContact,
           let errors = try shippingContactProblem(conn: conn, sessionId: sessionId, contact: shippingContact, totalMinor: totalMinor) {
            return try refusal.record(.shippingContactInvalid, status: 422, code: "shipping_contact_invalid",
                                      "The shipping contact cannot be served at this total.", appleErrors: errors)
        }
        // Rule 55: EMV payment data only when the request asked for it (merchantCapabilities supportsEMV).
        if decrypted.paymentData.paymentDataType.rawValue == "EMV", try !s.decode("supports_emv", as: Bool.self) {
            return try refusal.record(.emvNotRequested, status: 422, code: "emv_not_requested",
                                      "The payment token carries EMV data, which this checkout session did not request.")
        }
        let expiry = try? CardMask.expiration(yymmdd: decrypted.paymentData.applicationExpirationDate)
        // The network comes from the signed DPAN's BIN; the unsigned paymentMethod may only agree with it.
        let network: String
        switch PaymentNetwork.resolve(claimed: decrypted.token.paymentMethod?.network,
                                      dpan: decrypted.paymentData.unsafeRevealSensitive().applicationPrimaryAccountNumber) {
        case .success(let derived):
            network = derived
        case .failure(let failure):
            return try refusal.record(failure, status: 422, code: failure.rawValue,
                                      "The payment method's network differs from the card's.")
        }
        let paymentId = Self.newId(prefix: "pay_")
        // Apple step 5: the transactionId claim is a unique constraint, decided atomically with the insert.
        // One statement inserts the payment, points the key at it and returns the row (no re-read).
        guard let payment = try conn.query(Self.acceptSQL, [
            paymentId, merchantId, sessionId, totalMinor, currencyCode, network, decrypted.paymentData.panLastFour,
            expiry?.month, expiry?.year, decrypted.token.transactionIdHex.lowercased(),
            ProcessorKey.authorization(paymentId: paymentId), key, tokenJSON, settings.keyLockMilliseconds,
        ]).first.map(PaymentRecord.init(row:)) else {
            if try conn.query("SELECT 1 AS seen FROM payments WHERE apple_transaction_id = $1",
                              [decrypted.token.transactionIdHex.lowercased()]).first != nil {
                return try refusal.record(.tokenReplayed, status: 409, code: "token_replayed",
                                          "This payment token was already used.")
            }
            return try refusal.record(.sessionPaymentInProgress, status: 409, code: "session_payment_in_progress",
                                      "Another payment of this checkout session is in progress or succeeded.")
        }
        return .proceed(payment, decrypted)
    }

    /// Phase 1's insert: the payment (`accepted`), the key's move to `accepted` with its resource id, and
    /// the new row, in one round trip. No row back means the insert conflicted (transactionId or session).
    static let acceptSQL: SQL = """
        WITH inserted AS (
            INSERT INTO payments (payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code,
                                  network, last4, expiration_month, expiration_year, apple_transaction_id, processor_key,
                                  idempotency_key, encrypted_token, next_resolve_at)
            VALUES ($1, $2, $3, 'pending', 'accepted', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                    now() + $14 * interval '1 millisecond')
            ON CONFLICT DO NOTHING
            RETURNING payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code, network, last4,
                      expiration_month, expiration_year, processor_reference, decline_code, failure_code, token_error_code,
                      apple_transaction_id, processor_key, idempotency_key, created_at, needs_operator_at
        ), claimed AS (
            UPDATE idempotency_keys SET recovery_point = 'accepted', resource_id = $1
            WHERE merchant_id = $2 AND idempotency_key = $12 AND EXISTS (SELECT 1 FROM inserted)
        )
        SELECT * FROM inserted
        """

    /// Phase 3 for an approval: the pending payment becomes `succeeded` and its session `paid`, returning the
    /// updated payment. The `status = 'pending'` condition is re-checked under the row lock, so an outcome
    /// already recorded by another holder returns no row (and is then read as it is).
    static let approvedSQL: SQL = """
        WITH updated AS (
            UPDATE payments SET status = 'succeeded', processor_reference = $2, recovery_point = 'outcome_recorded',
                   encrypted_token = NULL, next_resolve_at = NULL, updated_at = now()
            WHERE payment_id = $1 AND status = 'pending'
            RETURNING payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code, network, last4,
                      expiration_month, expiration_year, processor_reference, decline_code, failure_code, token_error_code,
                      apple_transaction_id, processor_key, idempotency_key, created_at, needs_operator_at
        ), paid AS (
            UPDATE checkout_sessions SET status = 'paid', updated_at = now()
            WHERE session_id = (SELECT session_id FROM updated) AND status = 'open'
        )
        SELECT * FROM updated
        """

    /// Phase 3 for a decline, like `approvedSQL` (the session stays open).
    static let declinedSQL: SQL = """
        UPDATE payments SET status = 'declined', decline_code = $2, processor_reference = $3,
               recovery_point = 'outcome_recorded', encrypted_token = NULL, next_resolve_at = NULL, updated_at = now()
        WHERE payment_id = $1 AND status = 'pending'
        RETURNING payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code, network, last4,
                  expiration_month, expiration_year, processor_reference, decline_code, failure_code, token_error_code,
                  apple_transaction_id, processor_key, idempotency_key, created_at, needs_operator_at
        """

    /// Phases 2 and 3: the processor call, then the outcome.
    func complete(_ payment: PaymentRecord, decrypted: DecryptedPaymentToken, requestID: String) throws -> HTTPResponse {
        let outcome = authorize(payment, decrypted: decrypted)
        crash.reach(.afterProcessorCall)
        let response = try recordingOrHolding(.payment(payment.paymentId), outcome: outcome, merchantId: payment.merchantId,
                                              idempotencyKey: payment.idempotencyKey)
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

    /// A retry of a key whose payment was accepted or left pending: finish from the stored state.
    func resume(paymentId: String, requestID: String) throws -> HTTPResponse {
        guard let payment = try pool.withConnection({ try PaymentRecord.load(paymentId, on: $0) }) else {
            throw PaymentProblems.internalError
        }
        guard payment.status == .pending else {
            return try recordOutcome(paymentId: paymentId, outcome: nil)
        }
        // Waiting for an operator: a retry of the key shows the state and calls nobody.
        guard payment.needsOperatorAt == nil else {
            try releaseKey(merchantId: payment.merchantId, idempotencyKey: payment.idempotencyKey)
            return Self.paymentResponse(payment)
        }
        let decrypted = try redecrypt(payment)
        return try complete(payment, decrypted: decrypted, requestID: requestID)
    }

    /// The stored (still encrypted) token decrypted again, checked for freshness at the time it was
    /// accepted, so a resumed attempt sends exactly what the first one would have.
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
    /// Succeeded marks the session paid and feeds the ledger sink in the same transaction. An unknown
    /// outcome leaves the payment pending and the key resumable (released, not finished).
    func recordOutcome(paymentId: String, outcome: ProcessorOutcome?) throws -> HTTPResponse {
        try pool.transaction { conn in
            try Self.lockSession(ofPayment: paymentId, on: conn)
            // A known answer is written with one conditional update that returns the row; only when it finds
            // the payment no longer pending (or the answer is unknown) is the row read and locked instead.
            var recorded: PaymentRecord?
            switch outcome {
            case .approved(let reference, _)?:
                recorded = try conn.query(Self.approvedSQL, [paymentId, reference]).first.map(PaymentRecord.init(row:))
                if let payment = recorded {
                    try sink.record(.paymentSucceeded(paymentId: paymentId, sessionId: payment.sessionId,
                                                      amountMinor: payment.amountMinor, currencyCode: payment.currencyCode,
                                                      processorReference: reference),
                                    merchantId: payment.merchantId, on: conn, now: Date())
                }
            case .declined(let code, let reference)?:
                recorded = try conn.query(Self.declinedSQL, [paymentId, code, reference]).first.map(PaymentRecord.init(row:))
            case .unknown?, nil:
                break
            }
            if recorded == nil {
                guard let payment = try PaymentRecord.load(paymentId, on: conn, forUpdate: true) else {
                    throw PaymentProblems.internalError
                }
                if payment.status == .pending, case .unknown(let reason)? = outcome {
                    logger.warning("processor outcome unknown", [("payment_id", paymentId), ("reason", reason)])
                    _ = try conn.execute("""
                        UPDATE payments SET recovery_point = 'processor_called', resolve_attempts = resolve_attempts + 1,
                               next_resolve_at = now() + least($2::bigint, $3::bigint * (2 ^ least(resolve_attempts, 16))::bigint)
                                                 * interval '1 millisecond',
                               updated_at = now()
                        WHERE payment_id = $1
                        """, [paymentId, settings.resolverBackoffMaxMilliseconds, settings.resolverIntervalMilliseconds])
                    if let key = payment.idempotencyKey {
                        _ = try conn.execute("""
                            UPDATE idempotency_keys SET recovery_point = 'processor_called', locked_until = NULL
                            WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
                            """, [payment.merchantId, key])
                    }
                    return Self.paymentResponse(payment)
                }
                recorded = payment
            }
            guard let payment = recorded else { throw PaymentProblems.internalError }
            let orderDetails = payment.status == .succeeded ? try WalletOrders.details(forPayment: paymentId, on: conn) : nil
            let response = Self.paymentResponse(payment, orderDetails: orderDetails)
            if let key = payment.idempotencyKey, payment.status != .pending {
                try KeyClaim.finish(conn: conn, merchantId: payment.merchantId, key: key, response: response)
            }
            return response
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
                     status: payment.status == .pending ? 202 : 200)
    }

    static func newId(prefix: String) -> String {
        while true {
            if let id = PaymentIdentifier.make(prefix: prefix, randomBytes: SecureRandom.bytes(64)) { return id }
        }
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
        struct Page: Encodable {
            let data: [RefundView]
            let hasMore: Bool
        }
        return .json(Page(data: rows.prefix(limit).map(RefundView.init), hasMore: rows.count > limit))
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
        struct Page: Encodable {
            let data: [PaymentView]
            let hasMore: Bool
        }
        return .json(Page(data: rows.prefix(limit).map { PaymentView($0, amountRefundedMinor: refunded[$0.paymentId] ?? 0) },
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

    /// Starts the one resolver thread (idempotent).
    public func startResolver() {
        resolver.withLock { loop in
            guard loop == nil else { return }
            let started = ResolverLoop(intervalMilliseconds: settings.resolverIntervalMilliseconds)
            started.start { [self] in _ = resolvePass() }
            loop = started
        }
    }

    /// Stops the resolver thread and waits for its current pass.
    public func stopResolver() {
        let loop = resolver.withLock { loop -> ResolverLoop? in
            defer { loop = nil }
            return loop
        }
        loop?.stop()
    }

    /// One resolver pass: pending payments and refunds whose time has come, each re-sent with its own key.
    /// Returns how many were attempted.
    @discardableResult
    public func resolvePass() -> Int {
        var attempted = 0
        do {
            let payments = try pool.query("""
                SELECT payment_id FROM payments WHERE status = 'pending' AND next_resolve_at <= now()
                ORDER BY next_resolve_at LIMIT $1
                """, [settings.resolverBatchMax]).rows.map { try $0.decode("payment_id", as: String.self) }
            for id in payments {
                attempted += 1
                do { try resolvePayment(id) } catch {
                    logger.warning("resolver: payment not resolved", [("payment_id", id), ("error", String(describing: type(of: error)))])
                }
            }
            let refunds = try pool.query("""
                SELECT refund_id FROM refunds WHERE status = 'pending' AND next_resolve_at <= now()
                ORDER BY next_resolve_at LIMIT $1
                """, [settings.resolverBatchMax]).rows.map { try $0.decode("refund_id", as: String.self) }
            for id in refunds {
                attempted += 1
                do { try resolveRefund(id) } catch {
                    logger.warning("resolver: refund not resolved", [("refund_id", id), ("error", String(describing: type(of: error)))])
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
                  payment.status == .pending, payment.needsOperatorAt == nil else { return nil }
            if let key = payment.idempotencyKey {
                // The key's lock is the one owner token shared by requests and the resolver.
                let taken = try conn.execute("""
                    UPDATE idempotency_keys SET locked_until = now() + $3 * interval '1 millisecond'
                    WHERE merchant_id = $1 AND idempotency_key = $2 AND finished_at IS NULL
                      AND (locked_until IS NULL OR locked_until <= now())
                    """, [payment.merchantId, key, settings.keyLockMilliseconds])
                guard taken == 1 else { return nil }
            }
            _ = try conn.execute("""
                UPDATE payments SET next_resolve_at = now() + $2 * interval '1 millisecond' WHERE payment_id = $1
                """, [paymentId, settings.keyLockMilliseconds])
            return payment
        }
        guard let payment = claimed else { return }
        let decrypted = try redecrypt(payment)
        let outcome = authorize(payment, decrypted: decrypted)
        _ = try recordingOrHolding(.payment(paymentId), outcome: outcome, merchantId: payment.merchantId,
                                   idempotencyKey: payment.idempotencyKey)
    }
}

/// The session a payment request is for, once the caller is allowed to pay it.
struct SessionAccess {
    let sessionId: String
    let merchantId: String
}

/// Records a refused payment (`failed`, with its reason) and finishes the key with the problem.
struct Refusal {
    let conn: PostgresConnection
    let service: PaymentsService
    let merchantId: String
    let sessionId: String
    let key: String
    let amountMinor: Int64
    let currencyCode: String
    let requestID: String

    func record(_ failure: PaymentFailure, status: Int, code: String, _ detail: String,
                tokenError: String? = nil, appleErrors: [ApplePayError] = []) throws -> PaymentsService.Claim {
        let paymentId = PaymentsService.newId(prefix: "pay_")
        _ = try conn.execute("""
            INSERT INTO payments (payment_id, merchant_id, session_id, status, recovery_point, amount_minor, currency_code,
                                  failure_code, token_error_code, processor_key, idempotency_key)
            VALUES ($1, $2, $3, 'failed', 'outcome_recorded', $4, $5, $6, $7, $8, $9)
            """, [paymentId, merchantId, sessionId, amountMinor, currencyCode, failure.rawValue, tokenError,
                  ProcessorKey.authorization(paymentId: paymentId), key])
        service.logger.info("payment refused", [("payment_id", paymentId), ("code", code), ("token_error", tokenError ?? "")])
        var extra: [String: JSONValue] = [
            "authorizationResult": .object(["status": .number("1"), "errors": .array(appleErrors.map(Self.json))]),
            "paymentId": .string(paymentId),
        ]
        if let tokenError { extra["tokenErrorCode"] = .string(tokenError) }
        let problem = HTTPProblem(status: status, code: code, title: "Payment refused", detail: detail, extra: extra)
        let response = HTTPResponse.problem(problem, requestID: requestID)
        _ = try conn.execute("UPDATE idempotency_keys SET resource_id = $3 WHERE merchant_id = $1 AND idempotency_key = $2",
                             [merchantId, key, paymentId])
        try KeyClaim.finish(conn: conn, merchantId: merchantId, key: key, response: response)
        return .respond(response)
    }

    /// An `ApplePayError` as Apple Pay JS reads it in `ApplePayPaymentAuthorizationResult.errors`.
    static func json(_ error: ApplePayError) -> JSONValue {
        var object: [String: JSONValue] = ["code": .string(error.code.rawValue)]
        if let field = error.contactField { object["contactField"] = .string(field.rawValue) }
        if !error.message.isEmpty { object["message"] = .string(error.message) }
        return .object(object)
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

/// The resolver's thread: one pass, then a wait that `stop()` cuts short.
final class ResolverLoop: Sendable {
    let intervalMilliseconds: Int
    let wake = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    let stopped = Atomic<Bool>(false)

    init(intervalMilliseconds: Int) { self.intervalMilliseconds = intervalMilliseconds }

    func start(_ pass: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            while !stopped.load(ordering: .acquiring) {
                pass()
                _ = wake.wait(timeout: .now() + .milliseconds(intervalMilliseconds))
            }
            finished.signal()
        }
        thread.name = "tender-payments-resolver"
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        wake.signal()
        _ = finished.wait(timeout: .now() + .seconds(30))
    }
}
