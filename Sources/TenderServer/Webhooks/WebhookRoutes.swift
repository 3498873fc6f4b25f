import Foundation
import HTTPServer
import Observability
import PaymentRequest
import Postgres

/// `POST /v1/webhook-endpoints` and `PATCH …/{id}` bodies. Unknown fields are refused; `status` only in a PATCH.
struct WebhookEndpointInput: Decodable {
    let url: String?
    let enabledEvents: [String]?
    let description: String?
    let financeFrequency: String?
    let status: String?

    static let createSchema = KeySchema.object(["url": .leaf, "enabledEvents": .array(.leaf), "description": .leaf,
                                                "financeFrequency": .leaf])
    static let patchSchema = KeySchema.object(["url": .leaf, "enabledEvents": .array(.leaf), "description": .leaf,
                                               "financeFrequency": .leaf, "status": .leaf])
    enum CodingKeys: String, CodingKey { case url, enabledEvents, description, financeFrequency, status }

    init(from decoder: any Decoder) throws {
        try Self.patchSchema.refuseUnknownFields(decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        url = try c.decodeIfPresent(String.self, forKey: .url)
        enabledEvents = try c.decodeIfPresent([String].self, forKey: .enabledEvents)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        financeFrequency = try c.decodeIfPresent(String.self, forKey: .financeFrequency)
        status = try c.decodeIfPresent(String.self, forKey: .status)
    }
}

/// A create body: the PATCH fields less `status`.
struct WebhookEndpointCreateInput: Decodable {
    let input: WebhookEndpointInput
    init(from decoder: any Decoder) throws {
        try WebhookEndpointInput.createSchema.refuseUnknownFields(decoder)
        input = try WebhookEndpointInput(from: decoder)
    }
}

/// `POST /v1/events/{id}/redeliver` body.
struct RedeliverInput: Decodable {
    let endpointId: String
    static let schema = KeySchema.object(["endpointId": .leaf])
    enum CodingKeys: String, CodingKey { case endpointId }
    init(from decoder: any Decoder) throws {
        try Self.schema.refuseUnknownFields(decoder)
        endpointId = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .endpointId)
    }
}

/// An endpoint as the API shows it; `secret` only in the answer that created it.
struct WebhookEndpointView: Encodable {
    let id: String
    let url: String
    let enabledEvents: [String]
    let description: String
    let financeFrequency: String?
    let status: String
    let disabledReason: String?
    let createdAt: String
    let updatedAt: String
    let secret: String?

    init(_ r: WebhookEndpointRecord, secret: String? = nil) {
        id = r.endpointId
        url = r.url
        enabledEvents = r.enabledEvents
        description = r.description
        financeFrequency = r.financeFrequency?.rawValue
        status = r.status
        disabledReason = r.disabledReason
        createdAt = RFC3339.string(from: r.createdAt)
        updatedAt = RFC3339.string(from: r.updatedAt)
        self.secret = secret
    }
}

/// Problems of the webhook routes.
enum WebhookProblems {
    static let endpointNotFound = HTTPProblem(status: 404, code: "endpoint_not_found", title: "Not found",
                                              detail: "No such webhook endpoint.")

    /// 400 `field_missing`, as the other strict bodies answer a missing required member.
    static func missing(_ field: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: "field_missing", title: "Invalid request",
                    detail: "The request body does not have the expected fields.",
                    errors: [HTTPProblem.FieldError(field: field, code: "field_missing", message: "\(field) is required.")])
    }

    static func invalid(_ code: String, field: String, _ message: String) -> HTTPProblem {
        HTTPProblem(status: 422, code: code, title: "Request not acceptable", detail: message,
                    errors: [HTTPProblem.FieldError(field: field, code: code, message: message)])
    }
}

extension TenderApp {
    func registerWebhookRoutes(into router: inout Router) {
        router.add("POST", "/v1/webhook-endpoints", guarded(authenticated { [self] request, merchant in
            try self.createWebhookEndpoint(request, merchant: merchant)
        }))
        router.add("GET", "/v1/webhook-endpoints", guarded(authenticated { [self] _, merchant in
            let records = try self.pool.withConnection { try WebhookEndpointStore.list(merchantId: merchant.merchantId, on: $0) }
            struct Page: Encodable { let data: [WebhookEndpointView]; let hasMore: Bool }
            return .json(Page(data: records.map { WebhookEndpointView($0) }, hasMore: false))
        }))
        router.add("GET", "/v1/webhook-endpoints/{id}", guarded(authenticated { [self] request, merchant in
            let id = request.pathParameters["id"] ?? ""
            return .json(WebhookEndpointView(try self.pool.withConnection {
                try WebhookEndpointStore.get(merchantId: merchant.merchantId, endpointId: id, on: $0)
            }))
        }))
        router.add("PATCH", "/v1/webhook-endpoints/{id}", guarded(authenticated { [self] request, merchant in
            let id = request.pathParameters["id"] ?? ""
            let changes = try self.validatedChanges(try StrictBody<WebhookEndpointInput>.decode(request.body), creating: false)
            let record = try self.pool.transaction {
                try WebhookEndpointStore.update(merchantId: merchant.merchantId, endpointId: id, changes: changes,
                                                 on: $0, now: self.clock.now())
            }
            return .json(WebhookEndpointView(record))
        }))
        router.add("DELETE", "/v1/webhook-endpoints/{id}", guarded(authenticated { [self] request, merchant in
            let id = request.pathParameters["id"] ?? ""
            try self.pool.transaction { try WebhookEndpointStore.delete(merchantId: merchant.merchantId, endpointId: id, on: $0) }
            struct Deleted: Encodable { let id: String; let deleted: Bool }
            return .json(Deleted(id: id, deleted: true))
        }))
        router.add("POST", "/v1/webhook-endpoints/{id}/rotate-secret", guarded(authenticated { [self] request, merchant in
            let id = request.pathParameters["id"] ?? ""
            let box = self.webhookSecretBox
            let secret = try self.pool.transaction {
                try WebhookEndpointStore.rotate(merchantId: merchant.merchantId, endpointId: id, box: box, on: $0, now: self.clock.now())
            }
            return .json(["secret": secret])
        }))
        router.add("GET", "/v1/webhook-endpoints/{id}/deliveries", guarded(authenticated { [self] request, merchant in
            try self.listWebhookAttempts(request, merchant: merchant)
        }))
        router.add("POST", "/v1/events/{id}/redeliver", guarded(authenticated { [self] request, merchant in
            let eventId = request.pathParameters["id"] ?? ""
            let input = try StrictBody<RedeliverInput>.decode(request.body)
            try self.pool.transaction {
                try WebhookEndpointStore.redeliver(merchantId: merchant.merchantId, eventId: eventId,
                                                   endpointId: input.endpointId, on: $0, now: self.clock.now())
            }
            _ = try? self.pool.execute("SELECT pg_notify('tender_events', $1)", [merchant.merchantId])
            struct Accepted: Encodable { let eventId: String; let endpointId: String; let status: String }
            return .json(Accepted(eventId: eventId, endpointId: input.endpointId, status: "pending"), status: 202)
        }))
    }

    /// The secret box over this process's master key.
    var webhookSecretBox: WebhookSecretBox {
        let keyStore = tokens.keyStore
        return WebhookSecretBox(masterKey: { try keyStore.masterKey() })
    }

    private func createWebhookEndpoint(_ request: HTTPRequest, merchant: Merchant) throws -> HTTPResponse {
        let changes = try validatedChanges(try StrictBody<WebhookEndpointCreateInput>.decode(request.body).input, creating: true)
        let endpointId = WebhookEndpointStore.newEndpointId()
        let secret = WebhookSecretBox.newSecret()
        let sealed = try webhookSecretBox.seal(secret, endpointId: endpointId, merchantId: merchant.merchantId, version: 1)
        let record = try pool.transaction {
            try WebhookEndpointStore.create(merchantId: merchant.merchantId, endpointId: endpointId, changes: changes,
                                            sealed: sealed, on: $0, now: self.clock.now())
        }
        return .json(WebhookEndpointView(record, secret: secret), status: 201)
    }

    private func listWebhookAttempts(_ request: HTTPRequest, merchant: Merchant) throws -> HTTPResponse {
        let id = request.pathParameters["id"] ?? ""
        var limit = 20
        if let raw = request.queryValue("limit") {
            guard let value = Int(raw), (1...100).contains(value) else {
                throw PaymentProblems.invalidQuery("limit", "limit must be 1-100.")
            }
            limit = value
        }
        var after: Int64?
        if let raw = request.queryValue("startingAfter") {
            guard raw.hasPrefix("wa_"), let value = Int64(raw.dropFirst(3)), value > 0 else {
                throw PaymentProblems.invalidQuery("startingAfter", "startingAfter must be an attempt id (wa_…).")
            }
            after = value
        }
        let rows = try pool.withConnection {
            try WebhookEndpointStore.attempts(merchantId: merchant.merchantId, endpointId: id, limit: limit + 1,
                                              startingAfter: after, on: $0)
        }
        struct Page: Encodable { let data: [WebhookEndpointStore.AttemptView]; let hasMore: Bool }
        return .json(Page(data: Array(rows.prefix(limit)), hasMore: rows.count > limit))
    }

    /// Checks a create or PATCH body against the endpoint rules; 422 with the field on the first failure.
    func validatedChanges(_ input: WebhookEndpointInput, creating: Bool) throws -> WebhookEndpointChanges {
        var changes = WebhookEndpointChanges()
        if creating {
            guard input.url != nil else { throw WebhookProblems.missing("url") }
            guard input.enabledEvents != nil else { throw WebhookProblems.missing("enabledEvents") }
        }
        if let url = input.url {
            if let problem = WebhookTargetPolicy.problem(url: url, allowInsecure: webhookSettings.allowInsecureTargetsForTesting) {
                throw problem
            }
            changes.url = url
        }
        if let events = input.enabledEvents {
            let known = Set(EventType.allCases.map(\.rawValue) + ["*"])
            guard !events.isEmpty, events.count <= 32, events.allSatisfy(known.contains) else {
                throw WebhookProblems.invalid("enabled_events_invalid", field: "enabledEvents",
                                              "enabledEvents lists 1-32 event types (or \"*\") Tender knows.")
            }
            var seen = Set<String>()
            changes.enabledEvents = events.filter { seen.insert($0).inserted }
        }
        if let description = input.description {
            guard description.unicodeScalars.count <= WebhookSettings.descriptionLengthMax else {
                throw WebhookProblems.invalid("description_too_long", field: "description", "description is at most 500 characters.")
            }
            changes.description = description
        }
        if let frequency = input.financeFrequency {
            guard let parsed = FinanceFrequency(rawValue: frequency) else {
                throw WebhookProblems.invalid("finance_frequency_invalid", field: "financeFrequency",
                                              "financeFrequency is hourly, daily or weekly.")
            }
            changes.financeFrequency = parsed
        }
        if let status = input.status {
            guard status == "enabled" || status == "disabled" else {
                throw WebhookProblems.invalid("status_invalid", field: "status", "status is enabled or disabled.")
            }
            changes.status = status
        }
        return changes
    }
}
