import HTTPServer

/// `POST /v1/checkout-sessions/{id}/merchant-validation` body: Tender's own object, so strict.
///
/// `initiativeContext` is optional: Tender cannot see the shopper's address bar from a server-to-server
/// call, so the page may name its own domain, which must be one of the merchant's registered domains
/// (rule 41); without it the merchant's first registered domain is used.
struct MerchantValidationRequest: Decodable {
    let validationURL: String
    let initiativeContext: String?

    /// Longest `initiativeContext` accepted (a DNS name).
    static let initiativeContextBytesMax = 253

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        // openapi.yaml: unknown members of Tender's request objects are refused, naming the first (sorted).
        if let unknown = container.allKeys.map(\.stringValue).sorted()
            .first(where: { $0 != "validationURL" && $0 != "initiativeContext" }) {
            throw HTTPProblem.unknownField(unknown)
        }
        validationURL = try container.decode(String.self, forKey: Key(stringValue: "validationURL"))
        let contextKey = Key(stringValue: "initiativeContext")
        // A member is a string or absent; `null` must not pass as "absent".
        let isNull = container.contains(contextKey) ? try container.decodeNil(forKey: contextKey) : false
        initiativeContext = isNull ? nil : try container.decodeIfPresent(String.self, forKey: contextKey)
        if isNull || initiativeContext.map({ $0.isEmpty || $0.utf8.count > Self.initiativeContextBytesMax }) == true {
            throw HTTPProblem(.initiativeContextInvalid,
                              detail: "initiativeContext must be a registered domain name.",
                              errors: [.init(field: "initiativeContext", code: "invalid_value",
                                             message: "1-\(Self.initiativeContextBytesMax) bytes.")])
        }
    }
}

extension TenderApp {
    /// Registers merchant validation with the default wiring: settings from the configuration and the
    /// merchants' identity certificates and keys from the key store.
    func registerMerchantValidationRoutes(into router: inout Router) {
        let service = MerchantValidationService(settings: MerchantValidationSettings(configuration: configuration),
                                                identities: tokens.keyStore, metrics: metrics, logger: logger)
        registerMerchantValidationRoutes(into: &router, service: service)
    }

    /// Registers merchant validation backed by `service` (tests pass one with a local gateway).
    func registerMerchantValidationRoutes(into router: inout Router, service: MerchantValidationService) {
        router.add("POST", "/v1/checkout-sessions/{id}/merchant-validation", guarded { [self] request in
            try self.merchantValidation(request, service: service)
        })
    }

    /// Authorizes the session, then returns Apple's merchant session untouched (rule 45), uncacheable
    /// because it is single-use (rule 46).
    private func merchantValidation(_ request: HTTPRequest, service: MerchantValidationService) throws -> HTTPResponse {
        let (_, merchant) = try authorizeOpenSession(request, id: request.pathParameters["id"] ?? "")
        let body = try JSONCoding.decode(MerchantValidationRequest.self, from: request.body)
        if let sandbox = sandboxMerchantSession(validationURL: body.validationURL, merchant: merchant) {
            return sandbox
        }
        do {
            let session = try service.requestSession(validationURL: body.validationURL, merchant: merchant,
                                                     initiativeContext: body.initiativeContext,
                                                     requestID: request.requestID)
            return HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json"),
                                                                   ("Cache-Control", "no-store")]),
                                body: session)
        } catch {
            throw error.problem
        }
    }
}
