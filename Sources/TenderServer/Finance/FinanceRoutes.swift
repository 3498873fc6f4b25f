import Crypto
import FinanceStore
import Foundation
import HTTPServer
import Observability
import Postgres
import Synchronization

/// The finance store's shell state: the history-token codec and the monitoring hub, both made on
/// first use (the token key needs the master key file; the hub needs a LISTEN connection).
public final class FinanceFeature: Sendable {
    /// Label of the history-token key derived from the master key: HMAC-SHA256(master key, label).
    /// Rotating the master key invalidates every outstanding token (clients get 410 and re-catch-up).
    public static let tokenKeyLabel = "tender.finance.history-token.v1"

    /// Limits of queries, pages and tokens.
    public let limits: FinanceLimits
    private let pool: PostgresPool
    private let masterKeyFile: String
    private let logger: Logger
    private let hubSettings: FinanceFeedHub.Settings
    private let state = Mutex<(codec: HistoryTokenCodec?, hub: FinanceFeedHub?)>((nil, nil))
    /// The feed writer (docs/finance-feed.md); started by `serve`, or by the first history read.
    public let ingest: FinanceFeedIngest

    /// Creates the feature; nothing is loaded or started yet.
    public init(pool: PostgresPool, masterKeyFile: String, logger: Logger, limits: FinanceLimits = FinanceLimits(),
                hubSettings: FinanceFeedHub.Settings = FinanceFeedHub.Settings(),
                ingestSettings: FinanceFeedIngest.Settings = FinanceFeedIngest.Settings()) {
        self.pool = pool
        self.masterKeyFile = masterKeyFile
        self.logger = logger
        self.limits = limits
        self.hubSettings = hubSettings
        self.ingest = FinanceFeedIngest(pool: pool, logger: logger, settings: ingestSettings)
    }

    /// Starts the feed writer once (later calls do nothing).
    public func startIngest() {
        ingest.start()
    }

    /// The token codec, keyed from the master key on first use.
    public func codec() throws -> HistoryTokenCodec {
        if let codec = state.withLock({ $0.codec }) { return codec }
        let (master, created) = try MasterKey.loadOrCreate(path: masterKeyFile)
        if created { logger.warning("master key created", [("path", masterKeyFile)]) }
        let tokenKey = Digest.hmacSHA256(key: master.unsafeRevealedCopy(), message: Array(Self.tokenKeyLabel.utf8))
        let codec = HistoryTokenCodec(
            signingKey: HistoryTokenKey(keyID: 1, mac: { Digest.hmacSHA256(key: tokenKey, message: $0) }),
            limits: limits)
        return state.withLock { state in
            if let existing = state.codec { return existing }
            state.codec = codec
            return codec
        }
    }

    /// The monitoring hub, created (not yet started) on first use.
    public func hub() throws -> FinanceFeedHub {
        let codec = try codec()
        return state.withLock { state in
            if let hub = state.hub { return hub }
            let hub = FinanceFeedHub(pool: pool, codec: codec, logger: logger, settings: hubSettings)
            state.hub = hub
            return hub
        }
    }

    /// Stops the hub and the feed writer if they were started (server shutdown).
    public func stop() {
        stopHub()
        ingest.stop()
    }

    /// Stops the monitoring hub if it was created, closing its streams (the `finance-hub` service).
    public func stopHub() {
        state.withLock { $0.hub }?.stop()
    }
}

extension TenderApp {
    /// Registers the finance store's routes (openapi.yaml, Finance store).
    func registerFinanceRoutes(into router: inout Router) {
        router.add("GET", "/v1/finance/accounts", guarded(financeEndpoint { [self] request, merchant in
            let query = try AccountQuery.parse(FinanceHTTP.pairs(request), limits: finance.limits)
            let items = try pool.withConnection { try FinanceReader.accounts(merchantId: merchant.merchantId, query: query, on: $0) }
            return FinanceHTTP.json(FinanceReader.listBody("accounts", items))
        }))
        router.add("GET", "/v1/finance/account-balances", guarded(financeEndpoint { [self] request, merchant in
            let parameters = try FinanceHTTP.parameters(request, allowed: ["accountID"])
            let accountID = try parameters["accountID"].map(FinanceHTTP.accountID)
            let items = try pool.withConnection {
                try FinanceReader.balances(merchantId: merchant.merchantId, accountID: accountID,
                                           limit: finance.limits.queryLimitMax, on: $0)
            }
            return FinanceHTTP.json(FinanceReader.listBody("accountBalances", items))
        }))
        router.add("GET", "/v1/finance/transactions", guarded(financeEndpoint { [self] request, merchant in
            let query = try TransactionQuery.parse(FinanceHTTP.pairs(request), limits: finance.limits)
            let items = try pool.withConnection {
                try FinanceReader.transactions(merchantId: merchant.merchantId, query: query, on: $0)
            }
            return FinanceHTTP.json(FinanceReader.listBody("transactions", items))
        }))
        router.add("POST", "/v1/finance/payouts/{id}/arrived", guarded(financeEndpoint { [self] request, merchant in
            try payoutArrived(request.pathParameters["id"] ?? "", merchantId: merchant.merchantId)
        }))
        for (path, resource) in [("/v1/finance/accounts/history", HistoryResource.accounts),
                                 ("/v1/finance/account-balances/history", .accountBalances),
                                 ("/v1/finance/transactions/history", .transactions)] {
            router.add("GET", path, guarded(financeEndpoint { [self] request, merchant in
                try history(request, merchant: merchant, resource: resource)
            }))
        }
    }

    /// `…/history`: one JSON page, or with `Accept: text/event-stream` a monitoring stream.
    private func history(_ request: HTTPRequest, merchant: Merchant, resource: HistoryResource) throws -> HTTPResponse {
        let allowed: Set<String> = resource == .accounts ? ["since", "limit"] : ["accountID", "since", "limit"]
        let parameters = try FinanceHTTP.parameters(request, allowed: allowed)
        let accountID = try parameters["accountID"].map(FinanceHTTP.accountID)
        if resource != .accounts && accountID == nil {
            throw FinanceError(.queryParameterInvalid, field: "accountID", detail: "required")
        }
        let scope = try HistoryScope(merchantID: merchant.merchantId, resource: resource, accountID: accountID)
        let limits = finance.limits
        var pageSize = limits.historyPageSizeDefault
        if let text = parameters["limit"] {
            guard text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text),
                  (1...limits.historyPageSizeMax).contains(value) else {
                throw FinanceError(.queryParameterInvalid, field: "limit", detail: "outside 1...\(limits.historyPageSizeMax)")
            }
            pageSize = value
        }
        let codec = try finance.codec()
        let now = FinanceTimestamp(secondsSinceEpoch: Int64(Date().timeIntervalSince1970))
        let monitoring = request.headers["Accept"]?.lowercased().contains("text/event-stream") == true
        // A reconnecting EventSource sends Last-Event-ID, which is newer than the URL's `since`.
        let token = monitoring ? (request.lastEventID ?? parameters["since"]) : parameters["since"]
        finance.startIngest()
        return try pool.withConnection { conn in
            let position = try FinanceReader.resume(token, scope: scope, codec: codec, now: now, on: conn)
            if monitoring {
                let hub = try finance.hub()
                return HTTPResponse.eventStream { stream in
                    if !hub.subscribe(stream, scope: scope, position: position) {
                        if let event = try? SSEEvent(event: "error", data: "{\"code\":\"subscribers_full\"}") {
                            _ = stream.send(event)
                        }
                        stream.close()
                    }
                }
            }
            let page = try FinanceReader.feedPage(scope: scope, after: position, pageSize: pageSize, codec: codec,
                                                  now: now, on: conn)
            return FinanceHTTP.json(page.jsonBody())
        }
    }

    /// `POST /v1/finance/payouts/{id}/arrived`: the bank statement shows the payout, so its deposit becomes
    /// booked. `{id}` is the id of either FinanceKit transaction of the payout (the bank deposit or the
    /// transfer off the processor balance). Idempotent: an arrived payout answers the same again. Another
    /// merchant's id, or one that is no payout, is 404; a payout a corrected settlement took back is 409.
    private func payoutArrived(_ id: String, merchantId: String) throws -> HTTPResponse {
        let notFound = HTTPProblem(status: 404, code: "not_found", title: "Not found", detail: "No such payout.")
        guard let transactionID = try? FinanceID(parsing: id) else { throw notFound }
        let payload: String = try pool.transaction { conn in
            guard let row = try conn.query("""
                SELECT posting_key FROM finance_transaction WHERE merchant_id = $1 AND id = $2::uuid
                """, [merchantId, transactionID.description]).first else { throw notFound }
            let postingKey: String = try row.decode(0)
            let arrivalPrefix = FinanceMapping.payoutArrivalKey("")
            let payoutID: String
            if postingKey.hasPrefix(arrivalPrefix) {
                payoutID = String(postingKey.dropFirst(arrivalPrefix.count))
            } else if postingKey.hasPrefix("payout:") {
                payoutID = String(postingKey.dropFirst("payout:".count))
            } else {
                throw notFound
            }
            let now = Date()
            let at = FinanceTimestamp(secondsSinceEpoch: Int64(now.timeIntervalSince1970.rounded(.down)))
            do {
                _ = try FinanceRecorder().apply([.payoutArrived(payoutID: payoutID, at: at)], merchantId: merchantId,
                                                on: conn, now: now, missingPostings: .fail)
            } catch let error as FinanceError where error.code == .statusTransitionInvalid || error.code == .postingNotFound {
                throw HTTPProblem(status: 409, code: "payout_reversed", title: "Payout reversed",
                                  detail: "A corrected settlement took this payout back; it cannot arrive.")
            }
            guard let deposit = try conn.query("""
                SELECT payload::text FROM finance_transaction WHERE merchant_id = $1 AND posting_key = $2
                """, [merchantId, FinanceMapping.payoutArrivalKey(payoutID)]).first else { throw notFound }
            return try deposit.decode(0)
        }
        return FinanceHTTP.json(Array(payload.utf8))
    }

    /// Authenticates, refuses restricted merchants (`403 data_restricted`) and maps FinanceError to problems.
    private func financeEndpoint(_ handler: @escaping @Sendable (HTTPRequest, Merchant) throws -> HTTPResponse) -> HTTPHandler {
        authenticated { request, merchant in
            do {
                try FinanceAccess.check(financeDataEnabled: !merchant.financeRestricted)
                return try handler(request, merchant)
            } catch let error as FinanceError {
                throw FinanceHTTP.problem(error, logger: self.logger, requestID: request.requestID)
            }
        }
    }
}

/// HTTP helpers of the finance routes.
enum FinanceHTTP {
    static func pairs(_ request: HTTPRequest) -> [QueryPair] {
        request.query.map { QueryPair($0.0, $0.1) }
    }

    /// Query parameters by name: unknown, repeated or empty ones are `query_parameter_invalid`.
    static func parameters(_ request: HTTPRequest, allowed: Set<String>) throws -> [String: String] {
        var result: [String: String] = [:]
        for (name, value) in request.query {
            guard allowed.contains(name) else {
                throw FinanceError(.queryParameterInvalid, field: String(name.prefix(64)), detail: "unknown parameter")
            }
            guard result[name] == nil, !value.isEmpty else {
                throw FinanceError(.queryParameterInvalid, field: name, detail: "repeated or empty")
            }
            result[name] = value
        }
        return result
    }

    static func accountID(_ text: String) throws -> FinanceID {
        do { return try FinanceID(parsing: text) } catch {
            throw FinanceError(.queryParameterInvalid, field: "accountID", detail: "not a uuid")
        }
    }

    static func json(_ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }

    /// docs/finance-store.md §5.4: 410 for every token failure (the sub-reason goes to the log only),
    /// 403 for restricted data, 400 for bad parameters.
    static func problem(_ error: FinanceError, logger: Logger, requestID: String) -> HTTPProblem {
        switch error.code {
        case .historyTokenInvalid:
            logger.info("history token refused", [("reason", error.tokenRejection?.rawValue ?? ""), ("request_id", requestID)])
            return HTTPProblem(status: 410, code: error.code.rawValue, title: "History token invalid",
                               detail: "The history token is not valid for this scope any more; catch up again without `since`.")
        case .dataRestricted:
            return HTTPProblem(status: 403, code: error.code.rawValue, title: "Data restricted",
                               detail: "Finance data is switched off for this merchant.",
                               extra: ["dataType": .string("financialData")])
        case .queryParameterInvalid:
            return HTTPProblem(status: 400, code: error.code.rawValue, title: "Invalid query parameter",
                               detail: "A query parameter is unknown, repeated, empty or out of range.",
                               errors: [HTTPProblem.FieldError(field: error.field ?? "", code: error.code.rawValue,
                                                               message: "invalid value")])
        default:
            logger.error("finance read failed", [("code", error.code.rawValue), ("request_id", requestID)])
            return HTTPProblem(status: 500, code: "internal_error", title: "Internal error",
                               detail: "The request could not be completed.")
        }
    }
}
