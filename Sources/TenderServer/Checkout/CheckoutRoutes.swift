import ApplePayToken
import Crypto
import Foundation
import HTTPServer
import Money
import PaymentRequest
import Payments
import Postgres
import Time

/// `POST /v1/checkout-sessions` response and `GET /v1/checkout-sessions/{id}` (openapi.yaml).
struct SessionView: Codable {
    let id: String
    let status: String
    let version: Int
    /// Only in the creation response (and its idempotent replay, which re-derives it): Tender keeps
    /// only its SHA-256.
    var clientSecret: String?
    let expiresAt: String
    let totalMinor: Int64
    let currencyCode: String
    /// The version to pass to `new ApplePaySession(apiVersion, paymentRequest)`: the cart's, or the
    /// lowest that shows every feature it uses.
    let apiVersion: Int
    let paymentRequest: ApplePayPaymentRequest
}

/// The sheet events a session answers (reference §3.1); raw values are the `event` column's.
enum CheckoutEvent: String, CaseIterable {
    case shippingMethod = "shipping_method"
    case shippingContact = "shipping_contact"
    case couponCode = "coupon_code"
    case paymentMethod = "payment_method"

    var pathSuffix: String { rawValue.replacingOccurrences(of: "_", with: "-") }
}

/// The outcome of an update transaction; `expired` commits the status change before the 410.
enum UpdateOutcome {
    case updated(body: [UInt8], version: Int, cached: CachedSessionVersion)
    case repeated(storedJSON: String, version: Int)
    case expired
}

extension TenderApp {
    /// Checkout sessions, coupons and tax rates (openapi.yaml, issue 3).
    func registerCheckoutRoutes(into router: inout Router) {
        router.add("POST", "/v1/checkout-sessions", guarded(authenticated { [self] request, merchant in
            try self.createCheckoutSession(request, merchant: merchant)
        }))
        router.add("GET", "/v1/checkout-sessions/{id}", guarded { [self] request in
            try self.checkoutSession(request)
        })
        for event in CheckoutEvent.allCases {
            router.add("POST", "/v1/checkout-sessions/{id}/\(event.pathSuffix)", guarded { [self] request in
                try self.updateCheckoutSession(request, event: event)
            })
        }
        registerCouponRoutes(into: &router)
    }

    // MARK: - Create

    func createCheckoutSession(_ request: HTTPRequest, merchant: Merchant) throws -> HTTPResponse {
        let key = try Idempotency.key(request)
        let cart = try StrictBody<Cart>.decode(request.body)
        // Amounts no real payment has are refused at the edge, before anything is looked up or stored.
        let tooLarge = CheckoutBuilder.amountCeilingIssues(cart)
        guard tooLarge.isEmpty else { throw CheckoutProblems.badRequest(PaymentRequestError(tooLarge)) }
        let profile = try merchant.profile()
        let now = checkoutNow()
        return try Idempotency.singlePhase(pool: pool, merchantId: merchant.merchantId, key: key, request: request,
                                           storing: { try Self.sessionWithoutSecret($0) },
                                           replaying: { try self.sessionWithSecret($0) }) { conn in
            let code = cart.couponCode ?? ""
            let coupon = code.isEmpty ? nil : try CouponStore.find(merchantId: merchant.merchantId, code: code, on: conn)
            let taxRules = try TaxRateStore.rules(merchantId: merchant.merchantId, on: conn)
            let sessionId = CheckoutIdentifiers.newSessionId()
            let clientSecret = try CheckoutIdentifiers.clientSecret(sessionId: sessionId, key: clientSecrets)
            let applicationData = CheckoutIdentifiers.newApplicationData()
            let priced: PricedCheckout
            do throws(PaymentRequestError) {
                priced = try CheckoutBuilder.build(cart: cart, merchant: profile, coupon: coupon, taxRules: taxRules,
                                                   applicationData: applicationData.base64, now: now)
            } catch {
                throw CheckoutProblems.unprocessable(error)
            }
            try CheckoutStore.insert(CheckoutStore.NewSession(
                sessionId: sessionId, merchantId: merchant.merchantId, currencyCode: priced.currency.code,
                totalMinor: priced.totalMinor, expiresAtRFC3339: priced.expiresAt.rfc3339,
                clientSecretSHA256: Digest.sha256(clientSecret), applicationData: applicationData.base64,
                applicationDataSHA256Hex: applicationData.sha256Hex,
                metadataJSON: try Self.jsonText(priced.metadata), checkoutJSON: try Self.jsonText(priced)), on: conn)
            return .json(SessionView(id: sessionId, status: "open", version: 1, clientSecret: clientSecret,
                                     expiresAt: priced.expiresAt.rfc3339, totalMinor: priced.totalMinor,
                                     currencyCode: priced.currency.code, apiVersion: priced.apiVersion,
                                     paymentRequest: priced.paymentRequest),
                         status: 201)
        }
    }

    /// The creation response as kept for its idempotent replay: everything but the client secret.
    static func sessionWithoutSecret(_ response: HTTPResponse) throws -> [UInt8] {
        guard response.status == 201 else { return response.body }
        var view = try JSONCoding.decoder.decode(SessionView.self, from: Data(response.body))
        view.clientSecret = nil
        return Array(try JSONCoding.encoder.encode(view))
    }

    /// A replayed creation response with its client secret derived again (the same bytes as the first answer).
    func sessionWithSecret(_ stored: HTTPResponse) throws -> HTTPResponse {
        guard stored.status == 201 else { return stored }
        var view = try JSONCoding.decoder.decode(SessionView.self, from: Data(stored.body))
        // A response stored before secrets were derived still holds its own (random) secret.
        if view.clientSecret == nil {
            view.clientSecret = try CheckoutIdentifiers.clientSecret(sessionId: view.id, key: clientSecrets)
        }
        var response = HTTPResponse.json(view, status: 201)
        response.headers = stored.headers
        return response
    }

    // MARK: - Read

    func checkoutSession(_ request: HTTPRequest) throws -> HTTPResponse {
        let sessionId = request.pathParameters["id"] ?? ""
        let caller = try sessionCaller(request, sessionId: sessionId)
        guard CheckoutIdentifiers.isSessionId(sessionId),
              let snapshot = try pool.withConnection({ try CheckoutStore.snapshot(sessionId, on: $0) }) else {
            throw caller.notFound
        }
        try caller.authorize(merchantId: snapshot.merchantId, clientSecretSHA256: snapshot.clientSecretSHA256)
        var response = HTTPResponse.json(try Self.sessionView(snapshot))
        response.headers.replaceOrAdd("Cache-Control", "no-store")
        return response
    }

    /// A session as `GET /v1/checkout-sessions/{id}` shows it (also the `checkout_session.expired` event's object).
    static func sessionView(_ snapshot: SessionSnapshot) throws -> SessionView {
        let checkout = try decodeCheckout(snapshot.checkoutJSON)
        // An open session past its expiry reads as expired before any update has marked it so.
        let status = snapshot.status == "open" && snapshot.isPastExpiry ? "expired" : snapshot.status
        return SessionView(
            id: snapshot.sessionId, status: status, version: snapshot.version, clientSecret: nil,
            expiresAt: Timestamp(millisecondsSinceEpoch: snapshot.expiresAtMilliseconds).rfc3339,
            totalMinor: snapshot.totalMinor, currencyCode: snapshot.currencyCode, apiVersion: checkout.apiVersion,
            paymentRequest: checkout.paymentRequest)
    }

    // MARK: - Updates (rules 31–39)

    /// One event: lock the session, refuse if not open (rule 31), recalculate on the latest version,
    /// store the next version with its input hash and response (rule 39), all in one transaction.
    ///
    /// Repeat rule (rule 37): when the latest version was produced by this same event with a
    /// byte-identical body, the stored response is returned and no version is added, so a retried
    /// request (a lost response, a double-fired event) answers exactly as the first time.
    ///
    /// When this process committed the session's latest version, the update first goes the one-round-trip
    /// way (`updateFromCachedVersion`): recalculated on that version, stored only if the row still is at it,
    /// open and unexpired. Anything else (another node moved it on, a payment, expiry, a repeat, a coupon, an
    /// error) goes the locked way, which answers exactly as if the first had not been tried.
    func updateCheckoutSession(_ request: HTTPRequest, event: CheckoutEvent) throws -> HTTPResponse {
        let sessionId = request.pathParameters["id"] ?? ""
        let caller = try sessionCaller(request, sessionId: sessionId)
        guard CheckoutIdentifiers.isSessionId(sessionId) else { throw caller.notFound }
        let command = try CheckoutCommand.decode(event, body: request.body)
        let inputHash = Digest.sha256(Array(event.rawValue.utf8) + [0x0a] + request.body)
        let now = checkoutNow()
        let outcome: UpdateOutcome
        if let fast = try updateFromCachedVersion(sessionId, caller: caller, event: event, command: command,
                                                  inputHash: inputHash, now: now) {
            outcome = fast
            metrics.increment("tender_checkout_updates_total", labels: [("path", "cached")], help: Self.updatesHelp)
        } else {
            outcome = try updateUnderLock(sessionId, caller: caller, event: event, command: command, inputHash: inputHash, now: now)
            metrics.increment("tender_checkout_updates_total", labels: [("path", "locked")], help: Self.updatesHelp)
        }

        let body: [UInt8]
        let version: Int
        switch outcome {
        case .expired:
            throw CheckoutProblems.sessionExpired
        case .updated(let bytes, let v, let entry):
            // Only now, with the version committed, may later updates start from it without reading it back.
            Self.checkoutVersions.insert(sessionId: sessionId, version: v, entry)
            (body, version) = (bytes, v)
        case .repeated(let stored, let v):
            // jsonb reorders keys; re-encoding with the shared sorted-keys encoder restores the exact bytes.
            let value = try JSONCoding.decoder.decode(JSONValue.self, from: Data(stored.utf8))
            (body, version) = (try Self.jsonBytes(value), v)
        }
        return HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json"),
                                                               ("Cache-Control", "no-store"),
                                                               ("Checkout-Session-Version", String(version))]),
                            body: body)
    }

    static let updatesHelp = "Checkout session updates by path: cached (one round trip on the version this process "
        + "committed) or locked (the session row read FOR UPDATE)."

    /// The update on the latest version this process committed, in one round trip (BEGIN, the
    /// conditional write and COMMIT in one pipeline), with no lock held while recalculating; nil when it
    /// does not apply or the row has moved on (then nothing was written). The caller's right to the session
    /// is checked against the cached owner and secret digest, which never change.
    func updateFromCachedVersion(_ sessionId: String, caller: SessionCaller, event: CheckoutEvent, command: CheckoutCommand,
                                 inputHash: [UInt8], now: Timestamp) throws -> UpdateOutcome? {
        if case .couponCode = command { return nil }  // reads the coupon table: the locked way
        guard let (current, latest) = Self.checkoutVersions.latest(sessionId: sessionId) else { return nil }
        try caller.authorize(merchantId: latest.access.merchantId, clientSecretSHA256: latest.access.clientSecretSHA256)
        if latest.event == event.rawValue && latest.inputSHA256 == inputHash { return nil }  // a repeat, perhaps
        guard let (next, body) = try? pureRecalculation(command, checkout: latest.checkout, now: now) else { return nil }
        let version = current + 1
        let responseJSON = String(decoding: body, as: UTF8.self)
        let checkoutJSON = try CheckoutJSON.bytes(next, inputsJSON: latest.inputsJSON)
        let stored = try pool.transaction { conn in
            try CheckoutStore.appendIfCurrentAndCommit(sessionId: sessionId, version: version, event: event.rawValue,
                                                       totalMinor: next.totalMinor,
                                                       checkoutJSON: String(decoding: checkoutJSON, as: UTF8.self),
                                                       inputSHA256: inputHash, responseJSON: responseJSON, on: conn)
        }
        guard stored else { return nil }
        return .updated(body: body, version: version,
                        cached: CachedSessionVersion(event: event.rawValue, inputSHA256: inputHash, responseJSON: responseJSON,
                                                     checkout: next, inputsJSON: latest.inputsJSON, access: latest.access))
    }

    /// The update with the session row locked `FOR UPDATE` for the whole transaction.
    func updateUnderLock(_ sessionId: String, caller: SessionCaller, event: CheckoutEvent, command: CheckoutCommand,
                         inputHash: [UInt8], now: Timestamp) throws -> UpdateOutcome {
        try pool.transaction { conn in
            guard let session = try CheckoutStore.lock(sessionId, on: conn) else { throw caller.notFound }
            try caller.authorize(merchantId: session.merchantId, clientSecretSHA256: session.clientSecretSHA256)
            switch session.state.updateRefusal(atMilliseconds: session.lockedAtMilliseconds) {
            case .expired? where session.state.status == .open:
                // The change an update notices is the sweeper's change: the same status, the same event.
                try SessionExpiry.expire(sessionId, on: conn, now: Date(timeIntervalSince1970: TimeInterval(now.unixSeconds)))
                return .expired
            case .expired?: throw CheckoutProblems.sessionExpired
            case .notOpen?, .alreadyPaid?: throw CheckoutProblems.sessionNotOpen
            case nil: break
            }
            let access = SessionAccessFacts(merchantId: session.merchantId, clientSecretSHA256: session.clientSecretSHA256)
            let latest = try Self.latestVersion(sessionId, session.version, access: access, on: conn)
            if latest.event == event.rawValue, latest.inputSHA256 == inputHash, let stored = latest.responseJSON {
                return .repeated(storedJSON: stored, version: session.version)
            }
            let (next, body) = try self.recalculate(command, checkout: latest.checkout, merchantId: session.merchantId,
                                                    now: now, on: conn)
            let version = session.version + 1
            let responseJSON = String(decoding: body, as: UTF8.self)
            let checkoutJSON = try CheckoutJSON.bytes(next, inputsJSON: latest.inputsJSON)
            // The row is locked at `version - 1`, open and unexpired (checked above): the conditional write
            // stores. Should it not, nothing was written and the update is refused as for a moved session.
            guard try CheckoutStore.appendIfCurrentAndCommit(sessionId: sessionId, version: version, event: event.rawValue,
                                                             totalMinor: next.totalMinor,
                                                             checkoutJSON: String(decoding: checkoutJSON, as: UTF8.self),
                                                             inputSHA256: inputHash, responseJSON: responseJSON, on: conn)
            else { throw CheckoutProblems.sessionNotOpen }
            return .updated(body: body, version: version,
                            cached: CachedSessionVersion(event: event.rawValue, inputSHA256: inputHash,
                                                         responseJSON: responseJSON, checkout: next,
                                                         inputsJSON: latest.inputsJSON, access: access))
        }
    }

    /// Runs the pure recalculation for one command; shopper-fixable outcomes are in the update's `errors`,
    /// protocol problems (unknown shipping identifier, rule 32) are 422.
    func recalculate(_ command: CheckoutCommand, checkout: PricedCheckout, merchantId: String, now: Timestamp,
                     on conn: PostgresConnection) throws -> (PricedCheckout, [UInt8]) {
        do {
            if case .couponCode(let code) = command {
                let coupon = try CouponStore.find(merchantId: merchantId, code: code, on: conn)
                let r = try checkout.applyingCouponCode(code, coupon: coupon, now: now)
                return (r.checkout, try CheckoutJSON.bytes(r.update))
            }
            return try pureRecalculation(command, checkout: checkout, now: now)
        } catch let error as PaymentRequestError {
            throw CheckoutProblems.unprocessable(error)
        }
    }

    /// The recalculations that read nothing but the session's version (every event but a coupon code).
    func pureRecalculation(_ command: CheckoutCommand, checkout: PricedCheckout, now: Timestamp) throws -> (PricedCheckout, [UInt8]) {
        switch command {
        case .shippingMethod(let identifier):
            let r = try checkout.selectingShippingMethod(identifier, now: now)
            return (r.checkout, try CheckoutJSON.bytes(r.update))
        case .shippingContact(let contact):
            let r = try checkout.updatingShippingContact(contact, now: now)
            return (r.checkout, try CheckoutJSON.bytes(r.update))
        case .couponCode:
            throw TenderError("coupon_needs_lookup", "a coupon code is recalculated with its coupon row")
        case .paymentMethod(let method):
            let r = try checkout.updatingPaymentMethod(method)
            return (r.checkout, try CheckoutJSON.bytes(r.update))
        }
    }

    /// Process-wide cache of decoded session versions (immutable once committed; see `SessionVersionCache`).
    static let checkoutVersions = SessionVersionCache<CachedSessionVersion>()

    /// The latest version, from the cache when this process committed it, else read and decoded.
    static func latestVersion(_ sessionId: String, _ version: Int, access: SessionAccessFacts,
                              on conn: PostgresConnection) throws -> CachedSessionVersion {
        if let cached = checkoutVersions.entry(sessionId: sessionId, version: version) { return cached }
        guard let stored = try CheckoutStore.version(sessionId, version, on: conn) else {
            throw TenderError("session_version_missing", "session \(sessionId) has no version \(version)")
        }
        let checkout = try decodeCheckout(stored.checkoutJSON)
        return CachedSessionVersion(event: stored.event, inputSHA256: stored.inputSHA256, responseJSON: stored.responseJSON,
                                    checkout: checkout, inputsJSON: try CheckoutJSON.inputsBytes(checkout.inputs), access: access)
    }

    // MARK: - Auth

    /// A client secret (only for its own session) or an API key; anything else is 401 (`SessionAuthorizer`).
    func sessionCaller(_ request: HTTPRequest, sessionId: String) throws -> SessionCaller {
        try SessionAuthorizer(merchants: merchants).caller(request)
    }

    // MARK: - JSON helpers

    /// `JSONCoding.encoder`'s bytes, written by `JSONBytesEncoder` (Foundation's boxing was half of an update's instructions).
    static func jsonBytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        try JSONBytesEncoder.bytes(value)
    }

    static func jsonText<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try jsonBytes(value), as: UTF8.self)
    }

    static func decodeCheckout(_ json: String) throws -> PricedCheckout {
        try JSONCoding.decoder.decode(PricedCheckout.self, from: Data(json.utf8))
    }
}

/// A validated update request (openapi.yaml bodies). The outer object is Tender's and strict; the
/// objects inside come from Apple Pay JS and are read leniently, their amounts ignored.
enum CheckoutCommand {
    case shippingMethod(identifier: String)
    case shippingContact(ApplePayPaymentContact)
    case couponCode(String)
    case paymentMethod(ApplePayPaymentMethod)

    static func decode(_ event: CheckoutEvent, body: [UInt8]) throws(HTTPProblem) -> CheckoutCommand {
        switch event {
        case .shippingMethod:
            try JSONCoding.checkBody(body)
            if let identifier = ShippingMethodBody.identifier(strictlyReading: body) { return .shippingMethod(identifier: identifier) }
            return .shippingMethod(identifier: try StrictBody<ShippingMethodBody>.decode(body).shippingMethod.identifier)
        case .shippingContact:
            return .shippingContact(try StrictBody<ShippingContactBody>.decode(body).shippingContact)
        case .couponCode:
            return .couponCode(try StrictBody<CouponCodeBody>.decode(body).couponCode)
        case .paymentMethod:
            return .paymentMethod(try StrictBody<PaymentMethodBody>.decode(body).paymentMethod)
        }
    }
}

/// `{"shippingMethod": {"identifier": "…", …Apple's other members ignored}}`.
struct ShippingMethodBody: Decodable {
    struct Selected: Decodable { let identifier: String }
    let shippingMethod: Selected
    enum CodingKeys: String, CodingKey { case shippingMethod }
    init(from decoder: any Decoder) throws {
        try KeySchema.object(["shippingMethod": .open]).refuseUnknownFields(decoder)
        shippingMethod = try decoder.container(keyedBy: CodingKeys.self).decode(Selected.self, forKey: .shippingMethod)
    }

    /// The identifier of a body `checkBody` accepted, read without `JSONDecoder` (a sixth of an update's
    /// instructions) when the body is exactly this shape; nil for anything else (an unknown member, a
    /// missing or non-string identifier, a byte-order mark, text the stricter reader refuses), which the
    /// decoder then answers with its own error. The reader accepts nothing the decoder refuses.
    static func identifier(strictlyReading body: [UInt8]) -> String? {
        guard body.first != 0xEF else { return nil }
        return body.withUnsafeBufferPointer { bytes -> String? in
            var reader = JSONReader(bytes, depthMax: JSONCoding.depthMax)
            var identifier: String?
            do {
                try reader.beginObject()
                guard try reader.nextKey([Self.memberName], first: true) == 0 else { return nil }
                try reader.forEachMember([Self.identifierName]) { _, inner throws(JSONReadError) in identifier = try inner.readString() }
                guard try reader.nextKey([], first: false) == nil else { return nil }
                try reader.expectEnd()
            } catch {
                return nil
            }
            return identifier
        }
    }

    private static let memberName = Array("shippingMethod".utf8)
    private static let identifierName = Array("identifier".utf8)
}

/// `{"shippingContact": {…ApplePayPaymentContact, possibly redacted…}}`.
struct ShippingContactBody: Decodable {
    let shippingContact: ApplePayPaymentContact
    enum CodingKeys: String, CodingKey { case shippingContact }
    init(from decoder: any Decoder) throws {
        try KeySchema.object(["shippingContact": .open]).refuseUnknownFields(decoder)
        shippingContact = try decoder.container(keyedBy: CodingKeys.self)
            .decode(ApplePayPaymentContact.self, forKey: .shippingContact)
    }
}

/// `{"couponCode": "SAVE10"}`; `""` removes the coupon.
struct CouponCodeBody: Decodable {
    let couponCode: String
    enum CodingKeys: String, CodingKey { case couponCode }
    init(from decoder: any Decoder) throws {
        try KeySchema.object(["couponCode": .leaf]).refuseUnknownFields(decoder)
        couponCode = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .couponCode)
    }
}

/// `{"paymentMethod": {…ApplePayPaymentMethod…}}`.
struct PaymentMethodBody: Decodable {
    let paymentMethod: ApplePayPaymentMethod
    enum CodingKeys: String, CodingKey { case paymentMethod }
    init(from decoder: any Decoder) throws {
        try KeySchema.object(["paymentMethod": .open]).refuseUnknownFields(decoder)
        paymentMethod = try decoder.container(keyedBy: CodingKeys.self)
            .decode(ApplePayPaymentMethod.self, forKey: .paymentMethod)
    }
}
