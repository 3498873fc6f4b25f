import Foundation
import Money
@testable import PaymentRequest

enum Fixture {
    /// 2026-01-01T00:00:00Z.
    static let now = Timestamp(unixSeconds: 1_767_225_600)

    static func currency(_ code: String) -> Currency {
        guard let currency = try? Currency(code: code) else { fatalError("fixture currency \(code)") }
        return currency
    }

    static func country(_ code: String) -> Country {
        guard let country = try? Country(code: code) else { fatalError("fixture country \(code)") }
        return country
    }

    static let merchant = MerchantProfile(
        merchantIdentifier: "merchant.com.example", displayName: "Example Store",
        supportedNetworks: [.visa, .masterCard, .amex, ApplePayNetwork(rawValue: "bancontact")],
        merchantCapabilities: [.supports3DS], countryCode: country("US"),
        currencies: ["USD", "EUR", "JPY", "KWD"].map(currency), domains: ["shop.example.com"])

    static let applicationData = "c2Vzc2lvbjoxMjM0"  // "session:1234"

    static func cart(currency: String = "USD") -> Cart {
        var cart = Cart(currencyCode: currency, lineItems: [ApplePayLineItem(label: "Widget", amount: "9.99")])
        cart.countryCode = "US"
        cart.shippingMethods = [
            CartShippingMethod(identifier: "standard", label: "Standard", detail: "5–7 days", amount: "4.99",
                               countries: ["US", "CA"]),
            CartShippingMethod(identifier: "express", label: "Express", detail: "1 day", amount: "14.99",
                               countries: ["US"]),
        ]
        cart.shippingType = .shipping
        cart.requiredShippingContactFields = [.postalAddress, .email]
        cart.supportsCouponCode = true
        cart.couponCode = ""
        cart.apiVersion = 14
        cart.metadata = ["orderId": "8841"]
        cart.expiresInSeconds = 3600
        return cart
    }

    static func build(_ cart: Cart, coupon: Coupon? = nil, taxRules: [TaxRule] = [],
                      limits: CheckoutLimits = .standard, merchant: MerchantProfile = merchant,
                      applicationData: String? = applicationData) throws(PaymentRequestError) -> PricedCheckout {
        try CheckoutBuilder.build(cart: cart, merchant: merchant, coupon: coupon, taxRules: taxRules,
                                  applicationData: applicationData, now: now, limits: limits)
    }

    /// The issues of building `cart`, or [] when it builds.
    static func issues(_ cart: Cart, coupon: Coupon? = nil, limits: CheckoutLimits = .standard,
                       merchant: MerchantProfile = merchant, applicationData: String? = applicationData) -> [RequestIssue] {
        do {
            _ = try build(cart, coupon: coupon, limits: limits, merchant: merchant, applicationData: applicationData)
            return []
        } catch {
            return error.issues
        }
    }

    static func decodeCart(_ json: String) throws -> Cart {
        try JSONDecoder().decode(Cart.self, from: Data(json.utf8))
    }

    static func json<T: Encodable>(_ value: T) throws -> [String: Any] {
        let data = try JSONEncoder().encode(value)
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            fatalError("not an object")
        }
        return object
    }

    static func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T {
        try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
    }

    static let recurring = ApplePayRecurringPaymentRequest(
        paymentDescription: "Monthly plan",
        regularBilling: ApplePayLineItem(label: "Plan", amount: "9.99", type: .final, paymentTiming: .recurring,
                                         recurringPaymentStartDate: Timestamp(unixSeconds: 1_767_225_600),
                                         recurringPaymentIntervalUnit: .month, recurringPaymentIntervalCount: 1,
                                         recurringPaymentEndDate: Timestamp(unixSeconds: 1_798_761_600)),
        trialBilling: nil, billingAgreement: "Cancel anytime.", managementURL: "https://shop.example.com/account",
        tokenNotificationURL: "https://shop.example.com/tokens")

    static let reload = ApplePayAutomaticReloadPaymentRequest(
        paymentDescription: "Card top-up",
        automaticReloadBilling: ApplePayLineItem(label: "Top-up", amount: "25.00", type: .final,
                                                 paymentTiming: .automaticReload,
                                                 automaticReloadPaymentThresholdAmount: "5.00"),
        billingAgreement: nil, managementURL: "https://shop.example.com/topup", tokenNotificationURL: nil)

    static let deferred = ApplePayDeferredPaymentRequest(
        billingAgreement: nil,
        deferredBilling: ApplePayLineItem(label: "Hotel", amount: "120.00", type: .final, paymentTiming: .deferred,
                                          deferredPaymentDate: Timestamp(unixSeconds: 1_769_904_000)),
        freeCancellationDate: Timestamp(unixSeconds: 1_769_817_600), freeCancellationDateTimeZone: "Europe/Paris",
        managementURL: "https://shop.example.com/booking", paymentDescription: "Room", tokenNotificationURL: nil)

    static let tokenContexts = [
        ApplePayPaymentTokenContext(merchantIdentifier: "merchant.com.a", externalIdentifier: "a",
                                    merchantName: "A", merchantDomain: "a.example.com", amount: "5.00"),
        ApplePayPaymentTokenContext(merchantIdentifier: "merchant.com.b", externalIdentifier: "b",
                                    merchantName: "B", merchantDomain: nil, amount: "4.00"),
    ]
}
