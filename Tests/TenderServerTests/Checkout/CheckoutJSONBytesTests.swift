import Foundation
import HTTPServer
import Money
import PaymentRequest
import Testing
@testable import TenderServer

/// Checkout's stored documents and responses are written by `JSONBytesEncoder`: the bytes must be
/// `JSONCoding.encoder`'s for every shape an update produces (money strings, unicode labels, escapes).
@Suite struct CheckoutJSONBytesTests {
    static let labels = ["Widget", "Café crème", "日本の茶", "Quote \" and \\ slash /", "Tab\tNew\nline", "🙂 gift",
                         "e\u{301}", "\u{1}\u{1f}", "Über-Größe", "Line\u{2028}Sep"]
    static let amounts = ["0.00", "0.01", "9.99", "5.00", "14.99", "1234.50", "100000.00"]

    static func foundation<T: Encodable>(_ value: T) throws -> [UInt8] { [UInt8](try JSONCoding.encoder.encode(value)) }

    static func expectSame<T: Encodable>(_ value: T) throws {
        let ours = try #require(JSONBytesEncoder.encode(value))
        let theirs = try foundation(value)
        #expect(ours == theirs, "\(String(decoding: ours, as: UTF8.self))\n\(String(decoding: theirs, as: UTF8.self))")
    }

    @Test func pricedCheckoutsAndTheirUpdatesMatchFoundation() throws {
        let merchant = MerchantProfile(
            merchantIdentifier: "merchant.com.example", displayName: "Example Störe",
            supportedNetworks: [.visa, .masterCard, .amex], merchantCapabilities: [.supports3DS],
            countryCode: try Country(code: "US"), currencies: [try Currency(code: "USD"), try Currency(code: "JPY")],
            domains: ["shop.example.com"])
        var generator = SystemRandomNumberGenerator()
        for round in 0..<60 {
            let currency = round % 5 == 0 ? "JPY" : "USD"
            let amount = { (index: Int) -> String in
                let text = Self.amounts[index % Self.amounts.count]
                return currency == "JPY" ? String(text.prefix { $0 != "." }) : text
            }
            var cart = Cart(currencyCode: currency, lineItems: (0..<(1 + round % 3)).map {
                ApplePayLineItem(label: Self.labels[($0 + round) % Self.labels.count], amount: amount($0 + round))
            })
            cart.countryCode = "US"
            cart.shippingMethods = [
                CartShippingMethod(identifier: "standard", label: Self.labels[round % Self.labels.count],
                                   detail: "5–7 days", amount: amount(round + 2), countries: ["US", "CA"]),
                CartShippingMethod(identifier: "express", label: "Express", detail: Self.labels[(round + 4) % Self.labels.count],
                                   amount: amount(round + 3), countries: ["US"]),
            ]
            cart.metadata = ["orderId": String(UInt64.random(in: 0...UInt64.max, using: &generator)),
                             Self.labels[round % Self.labels.count]: Self.labels[(round + 1) % Self.labels.count]]
            cart.expiresInSeconds = 3600
            let now = Timestamp(unixSeconds: 1_767_225_600 + Int64(round))
            let priced = try CheckoutBuilder.build(cart: cart, merchant: merchant, coupon: nil, taxRules: [],
                                                   applicationData: "c2Vzc2lvbjoxMjM0", now: now)
            try Self.expectSame(priced)
            let selected = try priced.selectingShippingMethod(round % 2 == 0 ? "express" : "standard", now: now)
            try Self.expectSame(selected.update)
            try Self.expectSame(selected.checkout)
            try Self.expectSame(SessionView(id: "cs_abc", status: "open", version: round, clientSecret: nil,
                                            expiresAt: priced.expiresAt.rfc3339, totalMinor: priced.totalMinor,
                                            currencyCode: currency, apiVersion: priced.apiVersion,
                                            paymentRequest: priced.paymentRequest))
            let stored = try JSONCoding.decoder.decode(JSONValue.self, from: Data(try Self.foundation(selected.update)))
            try Self.expectSame(stored)
        }
    }

    @Test func merchantViewMatchesFoundation() throws {
        for label in Self.labels {
            let view = MerchantView(Merchant(merchantId: "merchant.\(label)", displayName: label, domains: ["a.example", label],
                                             countryCode: "US", currencies: ["USD"], supportedNetworks: ["visa", label],
                                             merchantCapabilities: ["supports3DS"], financeRestricted: false))
            try Self.expectSame(view)
        }
    }
}
