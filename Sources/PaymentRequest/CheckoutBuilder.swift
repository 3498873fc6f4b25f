import Money

/// Turns a cart into a `PricedCheckout`: validates every rule, applies merchant defaults and prices it.
///
/// Pricing (reference §5.4; one rounding rule, `Percent.of`, half away from zero):
/// 1. goods = the cart's line items, in order; their final amounts sum to the goods subtotal;
/// 2. coupon discount on max(subtotal, 0), one negative line `Discount (CODE)` when non-zero;
/// 3. shipping: the selected method (first one shipping to the address by default) as a line;
/// 4. tax: the destination's rule (region over country; the merchant's country until an address is
///    known) on max(subtotal − discount, 0) + shipping if taxable, rounded once, one `Tax` line;
/// 5. total = Σ final lines, labelled with the merchant's display name.
public enum CheckoutBuilder {
    /// Builds a priced checkout or throws every issue found.
    ///
    /// - Parameters:
    ///   - coupon: the shell's lookup of `cart.couponCode` (nil when the code is empty or unknown).
    ///   - applicationData: padded Base64 chosen by the shell (e.g. a session binding), rule 20.
    ///   - now: the clock; nothing here reads the time itself.
    public static func build(cart: Cart, merchant: MerchantProfile, coupon: Coupon?, taxRules: [TaxRule],
                             applicationData: String?, now: Timestamp,
                             limits: CheckoutLimits = .standard) throws(PaymentRequestError) -> PricedCheckout {
        // Amounts above the ceiling first: nothing below may add or compare them.
        let tooLarge = amountCeilingIssues(cart)
        guard tooLarge.isEmpty else { throw PaymentRequestError(tooLarge) }
        let apiVersion = cart.apiVersion ?? lowestAPIVersion(for: cart, merchant: merchant, limits: limits)
        var issues = cartIssues(cart, limits: limits)
        let shell = requestShell(cart: cart, merchant: merchant, apiVersion: apiVersion, applicationData: applicationData)
        let context = ValidationContext(apiVersion: apiVersion, enabledCurrencies: merchant.currencies, now: now,
                                        limits: limits, checkTotals: false)
        issues += RequestValidator.issues(in: shell, context: context)
        guard issues.isEmpty, let currency = try? Currency(code: cart.currencyCode) else {
            throw PaymentRequestError(issues.isEmpty ? [RequestIssue(code: "currency_unknown", path: "currencyCode", rule: 3)] : issues)
        }

        let inputs = CheckoutInputs(cart: cart, merchant: merchant, taxRules: taxRules,
                                    applicationData: applicationData, limits: limits, createdAt: now)
        var selection = CheckoutSelection(shippingMethodIdentifier: nil,
                                          shippingAddress: cart.shippingContact.flatMap(ShippingAddress.init(contact:)),
                                          couponCode: cart.couponCode ?? "", coupon: nil)
        // §1.7: the initial code gets no change event, so it must already be applied here (rule 21).
        if !selection.couponCode.isEmpty {
            let subtotal = try goodsSubtotal(cart, currency)
            guard let coupon else { throw PaymentRequestError(code: "coupon_code_invalid", path: "couponCode", rule: 21) }
            switch coupon.evaluate(goodsSubtotalMinor: subtotal, currency: currency, now: now) {
            case .applies: selection.coupon = coupon
            case .expired: throw PaymentRequestError(code: "coupon_code_expired", path: "couponCode", rule: 21)
            case .belowMinimum, .currencyMismatch, .misconfigured:
                throw PaymentRequestError(code: "coupon_code_invalid", path: "couponCode", rule: 21)
            }
        }
        selection.shippingMethodIdentifier = offered(cart, for: selection.shippingAddress).first?.identifier
        return try price(inputs: inputs, selection: selection, currency: currency, apiVersion: apiVersion, now: now)
    }

    // MARK: - The amount ceiling (issue: amounts no real payment has)

    /// Every amount in `cart` whose magnitude is above `Currency.acceptedAmountMaxMinor` (Safari's total
    /// cap, per currency exponent), as `amount_too_large` naming the field, including amounts beyond
    /// `Int64`. Malformed amounts are left to the rules. The shell calls this at the edge (400) before
    /// anything is stored; `build` calls it first too.
    public static func amountCeilingIssues(_ cart: Cart) -> [RequestIssue] {
        guard let currency = try? Currency(code: cart.currencyCode) else { return [] }  // rule 3 reports it
        var out: [RequestIssue] = []
        func check(_ text: String?, _ path: String) {
            guard let text else { return }
            do { _ = try currency.parseAcceptedAmount(text, allowNegative: true) } catch {
                if error.code == .amountTooLarge { out.append(RequestIssue(code: "amount_too_large", path: path, rule: 0)) }
            }
        }
        func check(item: ApplePayLineItem, _ path: String) {
            check(item.amount, path + ".amount")
            check(item.automaticReloadPaymentThresholdAmount, path + ".automaticReloadPaymentThresholdAmount")
        }
        for (i, item) in cart.lineItems.enumerated() { check(item: item, "lineItems[\(i)]") }
        for (i, method) in (cart.shippingMethods ?? []).enumerated() { check(method.amount, "shippingMethods[\(i)].amount") }
        if let mode = cart.recurringPaymentRequest {
            check(item: mode.regularBilling, "recurringPaymentRequest.regularBilling")
            if let trial = mode.trialBilling { check(item: trial, "recurringPaymentRequest.trialBilling") }
        }
        if let mode = cart.automaticReloadPaymentRequest {
            check(item: mode.automaticReloadBilling, "automaticReloadPaymentRequest.automaticReloadBilling")
        }
        if let mode = cart.deferredPaymentRequest { check(item: mode.deferredBilling, "deferredPaymentRequest.deferredBilling") }
        for (i, context) in (cart.multiTokenContexts ?? []).enumerated() {
            check(context.amount, "multiTokenContexts[\(i)].amount")
        }
        return out
    }

    // MARK: - apiVersion

    /// The lowest Apple Pay JS version that shows every feature `cart` uses, never below
    /// `limits.apiVersionDefault` (3: Tender answers sheet events with update dictionaries and
    /// `ApplePayError`s). Features come from `RequestValidator.featureRequirements`, the table the
    /// validator also enforces, so the version picked always passes it. Networks count only when the
    /// cart names them: the merchant's defaults are filtered to the version instead (`requestShell`),
    /// so one new network in a profile does not lock older devices out of every checkout. A goods
    /// subtotal of zero can make a zero total, which needs 4.
    public static func lowestAPIVersion(for cart: Cart, merchant: MerchantProfile,
                                        limits: CheckoutLimits = .standard) -> Int {
        var shell = requestShell(cart: cart, merchant: merchant, apiVersion: limits.apiVersionMax, applicationData: nil)
        if cart.supportedNetworks == nil { shell.supportedNetworks = [] }
        var version = limits.apiVersionDefault
        for requirement in RequestValidator.featureRequirements(in: shell) {
            version = max(version, requirement.minimumVersion)
        }
        if let currency = try? Currency(code: cart.currencyCode), (try? goodsSubtotal(cart, currency)) == 0 {
            version = max(version, 4)
        }
        return min(version, limits.apiVersionMax)
    }

    // MARK: - Cart-only checks (Tender's own, rule 0 unless noted)

    static func cartIssues(_ cart: Cart, limits: CheckoutLimits) -> [RequestIssue] {
        var out: [RequestIssue] = []
        func add(_ code: String, _ path: String, _ rule: Int = 0) { out.append(RequestIssue(code: code, path: path, rule: rule)) }
        if cart.lineItems.count > limits.lineItemsMax { add("line_items_too_many", "lineItems") }
        if cart.lineItems.isEmpty { add("line_items_empty", "lineItems") }
        if let methods = cart.shippingMethods {
            if methods.count > limits.shippingMethodsMax { add("shipping_methods_too_many", "shippingMethods") }
            for (i, method) in methods.enumerated() {
                var seen: Set<String> = []
                for (j, code) in (method.countries ?? []).enumerated() {
                    if (try? Country(code: code)) == nil { add("country_unknown", "shippingMethods[\(i)].countries[\(j)]") }
                    if !seen.insert(code).inserted { add("country_duplicate", "shippingMethods[\(i)].countries[\(j)]") }
                }
                if method.countries?.isEmpty == true { add("countries_empty", "shippingMethods[\(i)].countries") }
            }
        }
        if let metadata = cart.metadata {
            if metadata.count > limits.metadataEntriesMax { add("metadata_too_many_entries", "metadata") }
            for key in metadata.keys.sorted() {
                if key.isEmpty || key.count > limits.metadataKeyLengthMax { add("metadata_key_invalid", "metadata." + key) }
                if let value = metadata[key], value.count > limits.metadataValueLengthMax {
                    add("metadata_value_too_long", "metadata." + key)
                }
            }
        }
        if let seconds = cart.expiresInSeconds,
           seconds < limits.expiresInSecondsMin || seconds > limits.expiresInSecondsMax {
            add("expires_in_out_of_range", "expiresInSeconds")
        }
        if let countryCode = cart.shippingContact?.countryCode,
            ShippingAddress(contact: ApplePayPaymentContact(countryCode: countryCode)) == nil {
            add("country_unknown", "shippingContact.countryCode", 2)
        }
        return out
    }

    /// The request with every member except the priced ones (total, lineItems' Tender lines, methods order).
    static func requestShell(cart: Cart, merchant: MerchantProfile, apiVersion: Int,
                             applicationData: String?) -> ApplePayPaymentRequest {
        // Merchant networks are defaults: drop the ones the page's version cannot show rather than fail.
        // Networks the cart names itself are validated strictly (rule 5).
        let networks = cart.supportedNetworks
            ?? merchant.supportedNetworks.filter { ($0.minimumVersion ?? Int.max) <= apiVersion }
        return ApplePayPaymentRequest(
            features: nil,
            merchantCapabilities: cart.merchantCapabilities ?? merchant.merchantCapabilities,
            supportedNetworks: networks,
            countryCode: cart.countryCode ?? merchant.countryCode.code,
            requiredBillingContactFields: cart.requiredBillingContactFields,
            billingContact: cart.billingContact,
            requiredShippingContactFields: cart.requiredShippingContactFields,
            shippingContact: cart.shippingContact,
            applicationData: applicationData,
            supportedCountries: cart.supportedCountries,
            supportsCouponCode: cart.supportsCouponCode,
            couponCode: cart.couponCode,
            shippingContactEditingMode: cart.shippingContactEditingMode,
            applePayLaterAvailability: cart.applePayLaterAvailability,
            merchantCategoryCode: nil,
            total: ApplePayLineItem(label: merchant.displayName, amount: nil, type: .final),
            lineItems: cart.lineItems,
            currencyCode: cart.currencyCode,
            shippingType: cart.shippingType,
            shippingMethods: cart.shippingMethods?.map(\.applePay),
            recurringPaymentRequest: cart.recurringPaymentRequest,
            automaticReloadPaymentRequest: cart.automaticReloadPaymentRequest,
            multiTokenContexts: cart.multiTokenContexts,
            deferredPaymentRequest: cart.deferredPaymentRequest,
            disbursementRequest: nil)
    }

    // MARK: - Pricing

    /// Shipping methods that ship to `address` (all of them before an address is known), in cart order.
    static func offered(_ cart: Cart, for address: ShippingAddress?) -> [CartShippingMethod] {
        let methods = cart.shippingMethods ?? []
        guard let address else { return methods }
        return methods.filter { $0.shipsTo(address.countryCode) }
    }

    static func goodsSubtotal(_ cart: Cart, _ currency: Currency) throws(PaymentRequestError) -> Int64 {
        var amounts: [Int64] = []
        for (i, item) in cart.lineItems.enumerated() where item.effectiveType == .final {
            amounts.append(try parse(item.amount, currency, "lineItems[\(i)].amount", negative: true))
        }
        do { return try Money.sum(amounts) } catch { throw PaymentRequestError(code: "amount_overflow", path: "lineItems", rule: 10) }
    }

    static func parse(_ text: String?, _ currency: Currency, _ path: String,
                      negative: Bool) throws(PaymentRequestError) -> Int64 {
        guard let text else { throw PaymentRequestError(code: "amount_missing", path: path, rule: 8) }
        do { return try currency.parseAmount(text, allowNegative: negative) } catch {
            throw PaymentRequestError(code: error.code.rawValue, path: path, rule: 8)
        }
    }

    /// Prices `selection` on `inputs` and validates the result with every rule (rule 35 for updates).
    static func price(inputs: CheckoutInputs, selection: CheckoutSelection, currency: Currency, apiVersion: Int,
                      now: Timestamp) throws(PaymentRequestError) -> PricedCheckout {
        let cart = inputs.cart
        let subtotal = try goodsSubtotal(cart, currency)
        var lines = cart.lineItems
        var finals: [Int64] = [subtotal]

        var discount: Int64 = 0
        if let coupon = selection.coupon,
           case .applies(let amount) = coupon.evaluate(goodsSubtotalMinor: subtotal, currency: currency, now: inputs.createdAt),
           amount > 0 {
            discount = amount
            lines.append(ApplePayLineItem(label: "Discount (\(coupon.code))", amount: currency.formatAmount(-amount),
                                          type: .final))
            finals.append(-amount)
        }

        let available = offered(cart, for: selection.shippingAddress)
        var shippingMinor: Int64 = 0
        var shippingLineIndex: Int?
        var methodsShown: [ApplePayShippingMethod] = available.map(\.applePay)
        if let id = selection.shippingMethodIdentifier, let method = available.first(where: { $0.identifier == id }) {
            shippingMinor = try parse(method.amount, currency, "shippingMethods.amount", negative: false)
            shippingLineIndex = lines.count
            lines.append(ApplePayLineItem(label: method.label, amount: method.amount, type: .final))
            finals.append(shippingMinor)
            // Rule 14: the selected method is first.
            methodsShown = [method.applePay] + available.filter { $0.identifier != id }.map(\.applePay)
        }

        var taxMinor: Int64?
        let destination = selection.shippingAddress.flatMap { try? Country(code: $0.countryCode) } ?? inputs.merchant.countryCode
        if let rule = TaxRule.applicable(inputs.taxRules, country: destination,
                                         region: selection.shippingAddress?.administrativeArea) {
            let goodsBase = max(subtotal - discount, 0)
            let (base, overflow) = goodsBase.addingReportingOverflow(rule.shippingTaxable ? shippingMinor : 0)
            guard !overflow, let tax = try? Percent.of(base, basisPoints: rule.rateBasisPoints) else {
                throw PaymentRequestError(code: "tax_rule_invalid", path: "taxRules", rule: 0)
            }
            taxMinor = tax
            lines.append(ApplePayLineItem(label: "Tax", amount: currency.formatAmount(tax), type: .final))
            finals.append(tax)
        }

        let total: Int64
        do { total = try Money.sum(finals) } catch { throw PaymentRequestError(code: "amount_overflow", path: "total.amount", rule: 10) }

        var request = requestShell(cart: cart, merchant: inputs.merchant, apiVersion: apiVersion,
                                   applicationData: inputs.applicationData)
        request.total = ApplePayLineItem(label: inputs.merchant.displayName, amount: currency.formatAmount(total),
                                         type: .final)
        request.lineItems = lines
        request.shippingMethods = cart.shippingMethods == nil ? nil : methodsShown
        request.couponCode = cart.supportsCouponCode == true ? selection.couponCode : cart.couponCode

        let context = ValidationContext(apiVersion: apiVersion, enabledCurrencies: inputs.merchant.currencies,
                                        now: now, limits: inputs.limits, checkTotals: true,
                                        shippingLineIndex: shippingLineIndex)
        let issues = RequestValidator.issues(in: request, context: context)
        guard issues.isEmpty else { throw PaymentRequestError(issues) }
        // Safari's own reading of what is about to be emitted: never hand the page a request it throws on.
        let refused = SafariRules.issues(in: request, apiVersion: apiVersion)
        guard refused.isEmpty else { throw PaymentRequestError(refused) }

        let lifetime = cart.expiresInSeconds ?? inputs.limits.expiresInSecondsDefault
        return PricedCheckout(
            inputs: inputs, selection: selection, paymentRequest: request, totalMinor: total, currency: currency,
            apiVersion: apiVersion,
            expiresAt: Timestamp(millisecondsSinceEpoch: inputs.createdAt.millisecondsSinceEpoch + lifetime * 1000),
            availableShippingMethods: methodsShown, discountMinor: discount, taxMinor: taxMinor)
    }
}
