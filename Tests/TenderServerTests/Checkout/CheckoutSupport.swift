import Crypto
import Foundation
import Postgres
import Testing
import Time
@testable import TenderServer

/// A running server with a merchant that charges in USD, JPY (0 decimals) and KWD (3 decimals).
final class CheckoutFixture: @unchecked Sendable {
    let server: RunningServer
    let merchant: Merchant
    let key: String

    init(_ prefix: String, clock: Clock = .system) throws {
        server = try RunningServer(prefix: prefix, clock: clock)
        let id = "merchant.co.\(UUID().uuidString.prefix(8).lowercased())"
        let m = try Merchant.validated(merchantId: id, displayName: "Corner Shop", domains: ["corner.test"],
                                       countryCode: "US", currencies: ["USD", "JPY", "KWD"])
        try server.app.merchants.add(m)
        merchant = m
        key = try server.app.merchants.createAPIKey(merchantId: id).secret
    }

    func stop() { server.stop() }

    func client() throws -> RawHTTPClient { try RawHTTPClient(port: server.port) }

    /// A second merchant (USD only) and its key.
    func otherMerchantKey() throws -> String { try server.merchantWithKey().1 }

    /// POST/PUT/GET with a JSON body built from a Swift value, authorized by `bearer` (the API key by default).
    func call(_ method: String, _ path: String, _ body: Any? = nil, bearer: String? = nil,
              headers: [(String, String)] = [], client: RawHTTPClient? = nil) throws -> RawResponse {
        let bytes = try body.map { [UInt8](try JSONSerialization.data(withJSONObject: $0)) } ?? []
        return try (client ?? self.client()).request(method, path,
                                                     headers: [("Authorization", "Bearer \(bearer ?? key)")] + headers,
                                                     body: bytes)
    }

    /// Creates a session and returns its JSON (expects 201).
    func createSession(_ cart: [String: Any]) throws -> [String: Any] {
        let response = try call("POST", "/v1/checkout-sessions", cart)
        #expect(response.status == 201, "\(response.text)")
        return try response.json()
    }

    func query(_ sql: SQL, _ parameters: [any PostgresEncodable]) throws -> PostgresResult {
        try server.pool.query(sql, parameters)
    }

    /// The stored version numbers of a session, ascending.
    func versions(_ sessionId: String) throws -> [Int] {
        try query("SELECT version FROM checkout_session_versions WHERE session_id = $1 ORDER BY version", [sessionId])
            .rows.map { try $0.decode("version") }
    }
}

/// A cart in USD with two items and two shipping methods (standard ships to US and CA, express to US only).
func usdCart(_ extra: [String: Any] = [:]) -> [String: Any] {
    var cart: [String: Any] = [
        "currencyCode": "USD", "countryCode": "US",
        "lineItems": [["label": "Widget", "amount": "9.99"], ["label": "Gadget", "amount": "5.00"]],
        "shippingMethods": [
            ["identifier": "standard", "label": "Standard", "detail": "5-7 days", "amount": "4.99", "countries": ["US", "CA"]],
            ["identifier": "express", "label": "Express", "detail": "1-2 days", "amount": "14.99", "countries": ["US"]],
        ],
        "requiredShippingContactFields": ["postalAddress", "email"],
        "supportsCouponCode": true, "couponCode": "", "apiVersion": 14,
    ]
    for (k, v) in extra { cart[k] = v }
    return cart
}

/// Minor units of a decimal string, computed independently of Money: digits without the point.
func minorUnits(_ text: String) -> Int64? {
    let negative = text.hasPrefix("-")
    let digits = text.replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ".", with: "")
    guard let value = Int64(digits) else { return nil }
    return negative ? -value : value
}

/// Σ final line items of a request or update (`lineItems` / `newLineItems`).
func sumOfFinalItems(_ items: [[String: Any]]) -> Int64 {
    items.filter { ($0["type"] as? String ?? "final") == "final" }
        .compactMap { ($0["amount"] as? String).flatMap(minorUnits) }.reduce(0, +)
}

func object(_ value: Any?) -> [String: Any] { value as? [String: Any] ?? [:] }
func objects(_ value: Any?) -> [[String: Any]] { value as? [[String: Any]] ?? [] }
