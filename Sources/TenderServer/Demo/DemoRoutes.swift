import ApplePayToken
import Crypto
import Foundation
import HTTPServer
import Money
import PaymentRequest
import Time

/// The sandbox stand-ins the demo store uses in place of Apple (only with `TENDER_DEMO=on`, which the
/// configuration refuses in production).
enum DemoSandbox {
    /// The `validationURL` a sandbox Apple Pay sheet hands over. Its `.invalid` name never resolves
    /// (RFC 6761 §6.4), so outside the demo it can only fail the host allow-list.
    static let validationURL = "https://apple-pay-gateway.sandbox.tender.invalid/paymentservices/paymentSession"

    /// A merchant session shaped like Apple's (Apple Pay on the web, "Merchant validation"): opaque to the
    /// page, which hands it to `completeMerchantValidation`. It proves nothing and is only for the demo.
    struct MerchantSession: Encodable {
        let epochTimestamp: Int64
        let expiresAt: Int64
        let merchantSessionIdentifier: String
        let nonce: String
        let merchantIdentifier: String
        let domainName: String
        let displayName: String
        let signature: String
        let retries: Int
    }

    /// `{"sessionId": "cs_…"}` of `POST /demo/api/sandbox-token`; unknown fields refused.
    struct TokenRequest: Decodable {
        let sessionId: String
        enum CodingKeys: String, CodingKey { case sessionId }
        init(from decoder: any Decoder) throws {
            try KeySchema.object(["sessionId": .leaf]).refuseUnknownFields(decoder)
            sessionId = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .sessionId)
        }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}

extension TenderApp {
    /// `/demo/api/…`: the sample store's server side, for the sandbox merchant only.
    func registerDemoRoutes(into router: inout Router) {
        router.add("GET", "/demo/api/catalog") { _ in
            struct Catalog: Encodable {
                struct Product: Encodable { let sku: String; let name: String; let detail: String; let amount: String }
                let currencyCode: String
                let couponHint: String
                let products: [Product]
            }
            let currency = DemoCatalog.currency
            return Self.demoResponse(.json(Catalog(
                currencyCode: currency.code, couponHint: DemoCatalog.couponCode,
                products: DemoCatalog.products.map {
                    .init(sku: $0.sku, name: $0.name, detail: $0.detail, amount: currency.formatAmount($0.amountMinor))
                })))
        }
        router.add("POST", "/demo/api/checkout-sessions", guarded { [self] request in
            try Self.demoAnswer { try self.createDemoSession(request) }
        })
        router.add("POST", "/demo/api/sandbox-token", guarded { [self] request in
            try Self.demoAnswer { try self.mintSandboxToken(request) }
        })
    }

    /// Creates a checkout session for the sandbox merchant from SKUs and quantities, exactly as
    /// `POST /v1/checkout-sessions` would with the merchant's API key (which stays on the server).
    func createDemoSession(_ request: HTTPRequest) throws -> HTTPResponse {
        let order = try StrictBody<DemoCatalog.Order>.decode(request.body)
        let cart: DemoCatalog.CartBody
        switch DemoCatalog.cart(for: order.items) {
        case .success(let built): cart = built
        case .failure(let error):
            throw CheckoutProblems.invalid(error.code, field: error.field, "The order names no valid product and quantity.")
        }
        guard let merchant = try merchants.merchant(id: SandboxCommands.sandboxMerchantId) else {
            throw DemoProblems.notBootstrapped
        }
        let body = [UInt8](try JSONCoding.encoder.encode(cart))
        return try createCheckoutSession(HTTPRequest(method: "POST", path: "/v1/checkout-sessions", body: body,
                                                     requestID: request.requestID), merchant: merchant)
    }

    /// Mints an EC_v1 token for an open sandbox-merchant session, authorized by its client secret, with the
    /// sandbox authority `tender sandbox bootstrap` wrote (the same code as `tender sandbox token --session`).
    func mintSandboxToken(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try StrictBody<DemoSandbox.TokenRequest>.decode(request.body)
        let (session, _) = try authorizeOpenSession(request, id: body.sessionId)
        guard session.merchantId == SandboxCommands.sandboxMerchantId else { throw DemoProblems.notSandboxMerchant }
        let directory = configuration.dataDirectory + "/sandbox"
        let loaded: (SandboxAuthority, MerchantKey)
        do { loaded = try SandboxCommands.loadSandbox(directory: directory) } catch { throw DemoProblems.notBootstrapped }
        let (amountMinor, currency, applicationData) = try SandboxCommands.sessionTerms(session.sessionId, pool: pool)
        let token = try loaded.0.mintToken(SandboxTokenRequest(
            amountMinor: amountMinor, currencyCodeNumeric: currency.numericCodeString,
            applicationData: applicationData, signingTime: clock.now()), for: loaded.1)
        return HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json")]), body: token)
    }

    /// The sandbox merchant session for the demo's own validation URL, or nil for any other call.
    func sandboxMerchantSession(validationURL: String, merchant: Merchant) -> HTTPResponse? {
        guard configuration.demoEnabled, merchant.merchantId == SandboxCommands.sandboxMerchantId,
              validationURL == DemoSandbox.validationURL else { return nil }
        let nowMilliseconds = clock.unixMilliseconds()
        var response = HTTPResponse.json(DemoSandbox.MerchantSession(
            epochTimestamp: nowMilliseconds, expiresAt: nowMilliseconds + 300_000,
            merchantSessionIdentifier: "SSH" + DemoSandbox.hex(SecureRandom.bytes(16)),
            nonce: DemoSandbox.hex(SecureRandom.bytes(4)),
            merchantIdentifier: DemoSandbox.hex(Digest.sha256(merchant.merchantId)),
            domainName: merchant.domains.first ?? "localhost", displayName: merchant.displayName,
            signature: "sandbox", retries: 0))
        response.headers.replaceOrAdd("Cache-Control", "no-store")
        return response
    }

    /// Runs a demo handler; its answer, or the problem it throws, carries the pages' headers.
    static func demoAnswer(_ handler: () throws -> HTTPResponse) throws -> HTTPResponse {
        do {
            return demoResponse(try handler())
        } catch var problem as HTTPProblem {
            WebSecurityHeaders.apply(to: &problem.headers)
            problem.headers.replaceOrAdd("Cache-Control", "no-store")
            throw problem
        }
    }

    /// Demo API answers carry the pages' security headers and are never cached.
    static func demoResponse(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        WebSecurityHeaders.apply(to: &response.headers)
        response.headers.replaceOrAdd("Cache-Control", "no-store")
        return response
    }
}

enum DemoProblems {
    static let notBootstrapped = HTTPProblem(.demoNotBootstrapped,
        detail: "The sandbox merchant or its keys are missing; run `tender sandbox bootstrap`.")
    static let notSandboxMerchant = HTTPProblem(.notSandboxMerchant,
        detail: "Sandbox tokens are minted only for the sandbox merchant's sessions.")
}
