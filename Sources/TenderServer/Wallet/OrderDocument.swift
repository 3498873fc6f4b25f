import Foundation
import HTTPServer
import Money
import Observability
import PaymentRequest

/// `ApplePayPaymentAuthorizationResult.orderDetails` (Apple Pay on the Web, `ApplePayPaymentOrderDetails`):
/// the four strings that hand a paid order to the shopper's Wallet.
public struct WalletOrderDetails: Codable, Equatable, Sendable {
    public let orderTypeIdentifier: String
    public let orderIdentifier: String
    /// `{TENDER_PUBLIC_BASE_URL}/wallet/orders/` (CONTRACT §7).
    public let webServiceURL: String
    public let authenticationToken: String
}

/// Order statuses of Apple's order.json `status` that merchants set (CONTRACT §7).
enum WalletOrderStatus: String, Codable, Sendable, CaseIterable {
    case open, completed, cancelled
}

/// Apple's order.json (Wallet Orders, schemaVersion 1), the fields Tender fills. Fulfillments are kept
/// as the merchant sent Apple's fulfillment objects (checked by `WalletOrderUpdate`).
struct OrderDocument: Codable, Equatable, Sendable {
    struct CurrencyAmount: Codable, Equatable, Sendable {
        /// Apple's `amount` is a JSON number; written from the exact decimal text, never via Double.
        var amount: JSONValue
        var currency: String
    }

    struct Merchant: Codable, Equatable, Sendable {
        var merchantIdentifier: String
        var displayName: String
        var url: String
        var logo: String
    }

    struct LineItem: Codable, Equatable, Sendable {
        var title: String
        var quantity: Int
        var price: CurrencyAmount
    }

    struct Payment: Codable, Equatable, Sendable {
        var total: CurrencyAmount
        /// `paid`, or `refunded` once the whole amount went back.
        var status: String
    }

    var schemaVersion = 1
    var orderTypeIdentifier: String
    var orderIdentifier: String
    var orderType = "ecommerce"
    var orderNumber: String
    var createdAt: String
    var updatedAt: String
    var status: WalletOrderStatus
    var merchant: Merchant
    var orderManagementURL: String
    var webServiceURL: String
    var authenticationToken: String
    var lineItems: [LineItem]
    var payment: Payment
    var fulfillments: [JSONValue]

    /// The logo every order carries (Apple's merchant `logo` names a file of the package).
    static let logoName = "logo.png"

    /// Apple's CurrencyAmount for `amountMinor` of `currency` (exact decimal text).
    static func amount(_ amountMinor: Int64, _ currency: Currency) -> CurrencyAmount {
        CurrencyAmount(amount: .number(currency.formatAmount(amountMinor)), currency: currency.code)
    }

    /// The order for a succeeded payment of `checkout`: line items and total as the shopper saw them, a
    /// shipping fulfillment for the chosen shipping method (when the cart ships), status `open`.
    static func make(orderTypeIdentifier: String, orderIdentifier: String, paymentId: String, merchant: TenderServer.Merchant,
                     orderManagementURL: String, webServiceURL: String, authenticationToken: String,
                     checkout: PricedCheckout, amountMinor: Int64, now: Date) -> OrderDocument {
        let currency = checkout.currency
        let lineItems = checkout.lineItems.compactMap { item -> LineItem? in
            guard let text = item.amount, let minor = try? currency.parseAmount(text, allowNegative: true), minor >= 0 else { return nil }
            return LineItem(title: String(item.label.prefix(256)), quantity: 1, price: amount(minor, currency))
        }
        var fulfillments: [JSONValue] = []
        if let identifier = checkout.selection.shippingMethodIdentifier,
           let method = checkout.availableShippingMethods.first(where: { $0.identifier == identifier }),
           checkout.inputs.cart.shippingType?.rawValue != "storePickup" {
            // A pickup fulfillment needs the store's address, which a cart does not carry: merchants add it.
            fulfillments.append(.object([
                "fulfillmentType": .string("shipping"),
                "fulfillmentIdentifier": .string(identifier),
                "status": .string("open"),
                "notes": .string(method.label),
            ]))
        }
        let stamp = RFC3339.string(from: now)
        return OrderDocument(
            orderTypeIdentifier: orderTypeIdentifier, orderIdentifier: orderIdentifier, orderNumber: paymentId,
            createdAt: stamp, updatedAt: stamp, status: .open,
            merchant: Merchant(merchantIdentifier: merchant.merchantId, displayName: merchant.displayName,
                               url: "https://\(merchant.domains.first ?? "localhost")/", logo: logoName),
            orderManagementURL: orderManagementURL, webServiceURL: webServiceURL, authenticationToken: authenticationToken,
            lineItems: lineItems, payment: Payment(total: amount(amountMinor, currency), status: "paid"),
            fulfillments: fulfillments)
    }
}

/// A 1×1 transparent PNG: the merchant logo until merchants upload their own.
enum WalletImages {
    static let placeholderPNG: [UInt8] = Array(Data(base64Encoded:
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==") ?? Data())
}
