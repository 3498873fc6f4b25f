import Foundation
import Money
import Testing
@testable import PaymentRequest

/// Property: nothing Tender emits makes Safari throw. Seeded random carts with large sums in USD,
/// EUR, JPY and KWD, each followed by random sheet events; every request and update dictionary that
/// comes out is encoded to JSON and judged by `WebKitModel`, a reading of WebKit's checks written
/// here on the JSON alone (NSRegularExpression for the grammar, Foundation's Decimal for the range),
/// and by `SafariRules`, the gate Tender itself runs.
@Suite struct SafariPropertyTests {
    static let later = Timestamp(unixSeconds: 1_767_225_600 + 60)
    static let currencies = ["USD", "EUR", "JPY", "KWD"].map(Fixture.currency)

    struct Tally {
        var requests = 0, carts = 0, cartsRefusedForSize = 0
        var updates = 0, updatesRefusedForSize = 0
    }

    @Test func randomCartsAndUpdatesNeverMakeSafariThrow() throws {
        var rng = SplitMix64(seed: 0x5AFA_21)
        var tally = Tally()
        for _ in 0..<1500 {
            tally.carts += 1
            let (cart, coupon, taxRules) = Self.randomCart(&rng)
            let built: PricedCheckout
            do {
                built = try Fixture.build(cart, coupon: coupon, taxRules: taxRules)
            } catch {
                if error.issues.contains(where: { $0.code == "total_too_large" || $0.code == "amount_too_large" }) {
                    tally.cartsRefusedForSize += 1
                }
                continue
            }
            tally.requests += 1
            try Self.expectSafariAccepts(request: built.paymentRequest, apiVersion: built.apiVersion)

            var checkout = built
            for _ in 0..<6 {
                do {
                    let emitted = try Self.randomEvent(&rng, on: checkout, coupon: coupon)
                    tally.updates += 1
                    try Self.expectSafariAccepts(update: emitted.json, apiVersion: checkout.apiVersion)
                    #expect(emitted.safari.isEmpty, "SafariRules disagrees: \(emitted.safari)")
                    // GET shows the latest version's request: it is emitted too.
                    try Self.expectSafariAccepts(request: emitted.checkout.paymentRequest, apiVersion: checkout.apiVersion)
                    checkout = emitted.checkout
                } catch let error as PaymentRequestError {
                    if error.issues.contains(where: { $0.code == "total_too_large" }) { tally.updatesRefusedForSize += 1 }
                }
            }
        }
        // Both sides of the cap were exercised, not just the easy one.
        #expect(tally.requests > 300, "\(tally)")
        #expect(tally.cartsRefusedForSize > 100, "\(tally)")
        #expect(tally.updates > 1000, "\(tally)")
        #expect(tally.updatesRefusedForSize > 20, "\(tally)")
    }

    // MARK: - Generator

    /// An amount of `currency` in minor units: small, near the cap, or far beyond it.
    static func amount(_ rng: inout SplitMix64, _ currency: Currency, share: Int64) -> Int64 {
        let cap = currency.acceptedAmountMaxMinor
        switch rng.next() % 10 {
        case 0..<4: return Int64(rng.next() % 100_000) + 1
        case 4..<9: return Int64(rng.next() % UInt64(max(1, 2 * cap / share))) + 1
        default: return Int64(rng.next() % UInt64(Int64.max / 2))
        }
    }

    static func randomCart(_ rng: inout SplitMix64) -> (Cart, Coupon?, [TaxRule]) {
        let currency = currencies[Int(rng.next() % UInt64(currencies.count))]
        var cart = Fixture.cart(currency: currency.code)
        let count = 1 + Int64(rng.next() % 5)
        cart.lineItems = (0..<count).map { i in
            if rng.next() % 12 == 0 { return ApplePayLineItem(label: "Estimate \(i)", amount: nil, type: .pending) }
            return .item("Item \(i)", currency.formatAmount(amount(&rng, currency, share: count)))
        }
        if rng.next() % 6 == 0 {
            cart.lineItems.append(.item("Credit", currency.formatAmount(-(Int64(rng.next() % 10_000) + 1))))
        }
        if !cart.lineItems.contains(where: { $0.effectiveType == .final }) {
            cart.lineItems.append(.item("Base", currency.formatAmount(1)))
        }
        let methods = Int(rng.next() % 4)
        cart.shippingMethods = methods == 0 ? nil : (0..<methods).map { i in
            CartShippingMethod(identifier: "m\(i)", label: "M\(i)", detail: "d",
                               amount: currency.formatAmount(amount(&rng, currency, share: 4)),
                               countries: rng.next() % 3 == 0 ? ["US"] : nil)
        }
        cart.apiVersion = rng.next() % 2 == 0 ? nil : 12 + Int(rng.next() % 4)
        var coupon: Coupon?
        if rng.next() % 3 == 0 {
            cart.couponCode = "C"
            coupon = rng.next() % 2 == 0
                ? Coupon(code: "C", kind: .percent(basisPoints: Int64(rng.next() % 10_001)))
                : Coupon(code: "C", kind: .fixed(amountMinor: amount(&rng, currency, share: 2)), currency: currency)
        }
        switch rng.next() % 8 {
        case 0:
            var mode = Fixture.recurring
            mode.regularBilling.amount = currency.formatAmount(amount(&rng, currency, share: 1))
            cart.recurringPaymentRequest = mode
        case 1:
            var mode = Fixture.reload
            mode.automaticReloadBilling.amount = currency.formatAmount(amount(&rng, currency, share: 1))
            mode.automaticReloadBilling.automaticReloadPaymentThresholdAmount = currency.formatAmount(Int64(rng.next() % 1000))
            cart.automaticReloadPaymentRequest = mode
        case 2:
            cart.multiTokenContexts = [ApplePayPaymentTokenContext(
                merchantIdentifier: "merchant.com.a", externalIdentifier: "a", merchantName: "A", merchantDomain: nil,
                amount: currency.formatAmount(1 + Int64(rng.next() % 100)))]
        default:
            break
        }
        var taxRules: [TaxRule] = []
        for country in ["US", "CA", "FR"] where rng.next() % 2 == 0 {
            taxRules.append(TaxRule(country: Fixture.country(country), rateBasisPoints: Int64(rng.next() % 3000),
                                    shippingTaxable: rng.next() % 2 == 0))
        }
        return (cart, coupon, taxRules)
    }

    struct Emitted {
        let checkout: PricedCheckout
        let json: [String: Any]
        let safari: [RequestIssue]
    }

    static func emitted<U: ApplePaySafariCheckable>(_ r: Recalculation<U>, _ version: Int) throws -> Emitted {
        Emitted(checkout: r.checkout, json: try Fixture.json(r.update),
                safari: SafariRules.issues(in: r.update, apiVersion: version))
    }

    static func randomEvent(_ rng: inout SplitMix64, on checkout: PricedCheckout, coupon: Coupon?) throws -> Emitted {
        let version = checkout.apiVersion
        switch rng.next() % 4 {
        case 0:
            let offered = checkout.availableShippingMethods.map(\.identifier)
            let pick = offered.isEmpty ? "none" : offered[Int(rng.next() % UInt64(offered.count))]
            return try emitted(checkout.selectingShippingMethod(pick, now: later), version)
        case 1:
            let country = ["US", "CA", "FR", "ZZ"][Int(rng.next() % 4)]
            return try emitted(checkout.updatingShippingContact(ApplePayPaymentContact(countryCode: country), now: later),
                               version)
        case 2:
            let code = ["C", "", "NOPE"][Int(rng.next() % 3)]
            return try emitted(checkout.applyingCouponCode(code, coupon: code == "C" ? coupon : nil, now: later), version)
        default:
            return try emitted(checkout.updatingPaymentMethod(ApplePayPaymentMethod(network: "Visa", type: "debit")), version)
        }
    }

    // MARK: - The model of WebKit's checks, on JSON

    static func expectSafariAccepts(request: ApplePayPaymentRequest, apiVersion: Int) throws {
        let json = try Fixture.json(request)
        let problems = WebKitModel.requestProblems(json, apiVersion: apiVersion)
        #expect(problems.isEmpty, "request Safari would refuse: \(problems)")
        #expect(SafariRules.issues(in: request, apiVersion: apiVersion).isEmpty)
    }

    static func expectSafariAccepts(update json: [String: Any], apiVersion: Int) throws {
        let problems = WebKitModel.updateProblems(json, apiVersion: apiVersion)
        #expect(problems.isEmpty, "update Safari would refuse: \(problems)")
    }
}

/// WebKit's ApplePaySession `convertAndValidate*` and PaymentRequestValidator, read off JSON.
enum WebKitModel {
    static let grammar = try? NSRegularExpression(pattern: "^-?[0-9]+(\\.[0-9]+)?$")
    static let cap = Decimal(100_000_000)

    static func isValid(_ value: Any?) -> Bool {
        guard let text = value as? String, let grammar else { return false }
        return grammar.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    static func decimal(_ value: Any?) -> Decimal? { (value as? String).flatMap { Decimal(string: $0) } }

    static func total(_ item: [String: Any]?, _ name: String, apiVersion: Int, into problems: inout [String]) {
        guard let item, (item["label"] as? String).map({ !$0.isEmpty }) == true else {
            return problems.append("\(name): Missing total label.")
        }
        guard isValid(item["amount"]), let amount = decimal(item["amount"]) else {
            return problems.append("\(name): not a valid amount")
        }
        if amount < 0 { problems.append("\(name): Total amount must not be negative.") }
        if amount > cap { problems.append("\(name): Total amount is too big.") }
        if apiVersion < 4 && amount == 0 { problems.append("\(name): zero total before v4") }
    }

    static func items(_ value: Any?, _ name: String, into problems: inout [String]) {
        for (i, item) in (value as? [[String: Any]] ?? []).enumerated()
        where (item["type"] as? String) != "pending" && !isValid(item["amount"]) {
            problems.append("\(name)[\(i)]: not a valid amount")
        }
    }

    static func methods(_ value: Any?, _ name: String, into problems: inout [String]) {
        for (i, method) in (value as? [[String: Any]] ?? []).enumerated() {
            for key in ["label", "detail", "identifier"] where !(method[key] is String) {
                problems.append("\(name)[\(i)]: Missing shipping method \(key).")
            }
            if !isValid(method["amount"]) {
                problems.append("\(name)[\(i)]: not a valid amount")
            } else if let amount = decimal(method["amount"]), amount < 0 {
                problems.append("\(name)[\(i)]: Shipping method amount must be greater than or equal to zero.")
            }
        }
    }

    static func billing(_ value: Any?, timing: String, _ name: String, into problems: inout [String]) {
        guard let item = value as? [String: Any] else { return problems.append("\(name): missing") }
        if item["paymentTiming"] as? String != timing { problems.append("\(name): must be a '\(timing)' line item.") }
        if (item["label"] as? String)?.isEmpty != false { problems.append("\(name): Missing label.") }
        if item["type"] as? String != "pending" && !isValid(item["amount"]) { problems.append("\(name): not a valid amount") }
    }

    static func modes(_ json: [String: Any], recurring: String, reload: String, contexts: String,
                      into problems: inout [String]) {
        if let mode = json[recurring] as? [String: Any] {
            billing(mode["regularBilling"], timing: "recurring", recurring + ".regularBilling", into: &problems)
            if mode["trialBilling"] != nil {
                billing(mode["trialBilling"], timing: "recurring", recurring + ".trialBilling", into: &problems)
            }
        }
        if let mode = json[reload] as? [String: Any] {
            billing(mode["automaticReloadBilling"], timing: "automaticReload", reload + ".automaticReloadBilling",
                    into: &problems)
            if !isValid((mode["automaticReloadBilling"] as? [String: Any])?["automaticReloadPaymentThresholdAmount"]) {
                problems.append("\(reload): not a valid automaticReloadPaymentThresholdAmount")
            }
        }
        for (i, context) in (json[contexts] as? [[String: Any]] ?? []).enumerated() where !isValid(context["amount"]) {
            problems.append("\(contexts)[\(i)]: not a valid amount")
        }
    }

    static func requestProblems(_ json: [String: Any], apiVersion: Int) -> [String] {
        var problems: [String] = []
        if !(1...15).contains(apiVersion) { problems.append("\"\(apiVersion)\" is not a supported version.") }
        if (json["merchantCapabilities"] as? [String])?.isEmpty != false { problems.append("Missing merchant capabilities.") }
        if (json["supportedNetworks"] as? [String])?.isEmpty != false {
            problems.append("At least one supported network must be provided.")
        }
        total(json["total"] as? [String: Any], "total", apiVersion: apiVersion, into: &problems)
        items(json["lineItems"], "lineItems", into: &problems)
        methods(json["shippingMethods"], "shippingMethods", into: &problems)
        modes(json, recurring: "recurringPaymentRequest", reload: "automaticReloadPaymentRequest",
              contexts: "multiTokenContexts", into: &problems)
        return problems
    }

    static func updateProblems(_ json: [String: Any], apiVersion: Int) -> [String] {
        var problems: [String] = []
        total(json["newTotal"] as? [String: Any], "newTotal", apiVersion: apiVersion, into: &problems)
        items(json["newLineItems"], "newLineItems", into: &problems)
        methods(json["newShippingMethods"], "newShippingMethods", into: &problems)
        modes(json, recurring: "newRecurringPaymentRequest", reload: "newAutomaticReloadPaymentRequest",
              contexts: "newMultiTokenContexts", into: &problems)
        return problems
    }
}
