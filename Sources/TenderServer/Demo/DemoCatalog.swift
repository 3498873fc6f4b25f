import Money
import PaymentRequest

/// The demo store's products and the cart it builds from a shopper's choice (pure; no I/O).
/// The page names only SKUs and quantities: prices, shipping and the cart come from here, as a
/// merchant's own server would build them.
enum DemoCatalog {
    struct Product: Encodable, Sendable {
        let sku: String
        let name: String
        let detail: String
        let amountMinor: Int64
    }

    static let currency: Currency = {
        do { return try Currency(code: "USD") } catch { preconditionFailure("USD is in the ISO 4217 table") }
    }()
    static let products: [Product] = [
        Product(sku: "mug", name: "Tender mug", detail: "Stoneware, 350 ml", amountMinor: 1_200),
        Product(sku: "tee", name: "Tender T-shirt", detail: "Organic cotton", amountMinor: 2_500),
        Product(sku: "stickers", name: "Sticker pack", detail: "Six vinyl stickers", amountMinor: 499),
    ]
    /// Apple Pay JS version of the demo's sessions: coupon codes need 12 or later.
    static let apiVersion = 14
    /// Most units of one product in one order.
    static let quantityMax = 10
    /// The coupon `tender sandbox bootstrap` creates for the sandbox merchant (10 % off).
    static let couponCode = "SAVE10"

    /// One chosen product and how many.
    struct Item: Decodable, Sendable {
        let sku: String
        let quantity: Int
    }

    /// `POST /demo/api/checkout-sessions`: `{"items":[{"sku":"mug","quantity":1}]}`; unknown fields refused.
    struct Order: Decodable, Sendable {
        let items: [Item]
        enum CodingKeys: String, CodingKey { case items }
        init(from decoder: any Decoder) throws {
            try KeySchema.object(["items": .array(.object(["sku": .leaf, "quantity": .leaf]))]).refuseUnknownFields(decoder)
            items = try decoder.container(keyedBy: CodingKeys.self).decode([Item].self, forKey: .items)
        }
    }

    /// The cart for `POST /v1/checkout-sessions`, in Tender's own request shape.
    struct CartBody: Encodable {
        struct LineItem: Encodable { let label: String; let amount: String }
        struct ShippingMethod: Encodable {
            let identifier: String, label: String, detail: String, amount: String, countries: [String]
        }
        let currencyCode: String
        let countryCode: String
        let lineItems: [LineItem]
        let shippingMethods: [ShippingMethod]
        let shippingType: String
        let requiredShippingContactFields: [String]
        let supportsCouponCode: Bool
        let apiVersion: Int
        let metadata: [String: String]
    }

    /// Builds the cart, or names the first problem with the shopper's choice.
    static func cart(for items: [Item]) -> Result<CartBody, DemoError> {
        guard !items.isEmpty else { return .failure(DemoError(code: "cart_empty", field: "items")) }
        guard items.count <= products.count else { return .failure(DemoError(code: "too_many_items", field: "items")) }
        var lineItems: [CartBody.LineItem] = []
        var seen: Set<String> = []
        for (index, item) in items.enumerated() {
            guard let product = products.first(where: { $0.sku == item.sku }) else {
                return .failure(DemoError(code: "unknown_sku", field: "items[\(index)].sku"))
            }
            guard seen.insert(item.sku).inserted else {
                return .failure(DemoError(code: "duplicate_sku", field: "items[\(index)].sku"))
            }
            guard (1...quantityMax).contains(item.quantity) else {
                return .failure(DemoError(code: "quantity_out_of_range", field: "items[\(index)].quantity"))
            }
            // At most 10 × 25.00: far from overflow.
            let amountMinor = product.amountMinor * Int64(item.quantity)
            let label = item.quantity == 1 ? product.name : "\(product.name) × \(item.quantity)"
            lineItems.append(.init(label: label, amount: currency.formatAmount(amountMinor)))
        }
        return .success(CartBody(
            currencyCode: currency.code, countryCode: "US", lineItems: lineItems,
            shippingMethods: [
                .init(identifier: "standard", label: "Standard", detail: "5–7 days", amount: "4.99", countries: ["US", "CA"]),
                .init(identifier: "express", label: "Express", detail: "1–2 days", amount: "14.99", countries: ["US"]),
            ],
            shippingType: "shipping", requiredShippingContactFields: ["postalAddress"],
            supportsCouponCode: true, apiVersion: apiVersion, metadata: ["store": "demo"]))
    }
}

/// A refused demo request: a stable code and the field it names.
struct DemoError: Error, Sendable {
    let code: String
    let field: String
}
