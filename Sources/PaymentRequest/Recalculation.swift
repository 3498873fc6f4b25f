// Answers to the sheet's events (reference §3, rules 31–39, pure part). Each function takes the stored
// state and the event and returns the next state plus Apple's update dictionary. Same input, same
// output (rule 37): nothing here reads a clock or a random source. Session status and expiry (rule 31),
// versioning and storage (rule 39) are the shell's.

import Money

extension PricedCheckout {
    /// `onshippingmethodselected`: `identifier` must be one Tender offered for the current address;
    /// anything else is `shipping_method_unknown` (rule 32), never priced from client input.
    public func selectingShippingMethod(_ identifier: String,
                                        now: Timestamp) throws(PaymentRequestError) -> Recalculation<ApplePayShippingMethodUpdate> {
        guard availableShippingMethods.contains(where: { $0.identifier == identifier }) else {
            throw PaymentRequestError(code: "shipping_method_unknown", path: "shippingMethod.identifier", rule: 32)
        }
        var next = selection
        next.shippingMethodIdentifier = identifier
        let priced = try repriced(next, now: now)
        let update = ApplePayShippingMethodUpdate(
            newTotal: priced.total, newLineItems: priced.lineItems,
            newShippingMethods: priced.paymentRequest.shippingMethods)
        return try emitted(priced, update)
    }

    /// `onshippingcontactselected`: a redacted contact is enough (rule 33). A missing or unknown country
    /// gives `shippingContactInvalid` on `countryCode`; a country no offered method ships to gives
    /// `addressUnserviceable` on `countryCode` with the method list emptied; tax follows the address.
    public func updatingShippingContact(_ contact: ApplePayPaymentContact,
                                        now: Timestamp) throws(PaymentRequestError) -> Recalculation<ApplePayShippingContactUpdate> {
        var next = selection
        var errors: [ApplePayError] = []
        if let address = ShippingAddress(contact: contact) {
            next.shippingAddress = address
            let available = CheckoutBuilder.offered(inputs.cart, for: address)
            if available.isEmpty && !(inputs.cart.shippingMethods ?? []).isEmpty {
                errors.append(ApplePayError(code: .addressUnserviceable, contactField: .countryCode,
                                            message: "We can't ship to this country."))
                next.shippingMethodIdentifier = nil
            } else if !available.contains(where: { $0.identifier == next.shippingMethodIdentifier }) {
                next.shippingMethodIdentifier = available.first?.identifier
            }
        } else {
            errors.append(ApplePayError(code: .shippingContactInvalid, contactField: .countryCode,
                                        message: "Enter a valid country."))
        }
        let priced = try repriced(next, now: now)
        let update = ApplePayShippingContactUpdate(
            newTotal: priced.total, newLineItems: priced.lineItems,
            newShippingMethods: inputs.cart.shippingMethods == nil ? nil : priced.availableShippingMethods,
            errors: errors)
        return try emitted(priced, update)
    }

    /// `oncouponcodechanged`: `coupon` is the shell's lookup of `code` (nil when unknown). Unknown, below
    /// minimum or other currency → `couponCodeInvalid`; expired → `couponCodeExpired` (rule 34). The
    /// update still carries a valid `newTotal`, without any discount. An empty code removes the coupon.
    public func applyingCouponCode(_ code: String, coupon: Coupon?,
                                   now: Timestamp) throws(PaymentRequestError) -> Recalculation<ApplePayCouponCodeUpdate> {
        guard paymentRequest.supportsCouponCode == true else {
            throw PaymentRequestError(code: "coupon_code_not_supported", path: "couponCode", rule: 21)
        }
        guard code.count <= inputs.limits.identifierLengthMax else {
            throw PaymentRequestError(code: "coupon_code_too_long", path: "couponCode", rule: 21)
        }
        var next = selection
        next.couponCode = code
        next.coupon = nil
        var errors: [ApplePayError] = []
        if !code.isEmpty {
            let subtotal = try CheckoutBuilder.goodsSubtotal(inputs.cart, currency)
            switch coupon?.evaluate(goodsSubtotalMinor: subtotal, currency: currency, now: now) {
            case .applies?:
                next.coupon = coupon
            case .expired?:
                errors.append(ApplePayError(code: .couponCodeExpired, message: "This code has expired."))
            case nil, .belowMinimum?, .currencyMismatch?, .misconfigured?:
                errors.append(ApplePayError(code: .couponCodeInvalid, message: "This code isn't valid."))
            }
        }
        let priced = try repriced(next, now: now)
        let update = ApplePayCouponCodeUpdate(
            newTotal: priced.total, newLineItems: priced.lineItems,
            newShippingMethods: priced.paymentRequest.shippingMethods, errors: errors)
        return try emitted(priced, update)
    }

    /// `onpaymentmethodselected`: Tender's prices do not depend on the card, so the answer is the
    /// current total and items (an update without `newTotal` would leave the sheet stuck, §3.2).
    public func updatingPaymentMethod(_ method: ApplePayPaymentMethod)
        throws(PaymentRequestError) -> Recalculation<ApplePayPaymentMethodUpdate> {
        let update = ApplePayPaymentMethodUpdate(newTotal: total, newLineItems: lineItems, errors: [])
        return try emitted(self, update)
    }

    /// The last gate before an update leaves Tender (rule 35): Safari's own checks on the dictionary
    /// (`total_too_large` for a `newTotal` above its cap, …). An update that fails them is an error
    /// answer, never a dictionary `complete…` would throw on; the session keeps its previous version.
    func emitted<Update: ApplePaySafariCheckable>(_ priced: PricedCheckout,
                                                  _ update: Update) throws(PaymentRequestError) -> Recalculation<Update> {
        let refused = SafariRules.issues(in: update, apiVersion: apiVersion)
        guard refused.isEmpty else { throw PaymentRequestError(refused) }
        return Recalculation(checkout: priced, update: update)
    }

    /// Re-prices with a new selection; every rule is re-validated (rule 35).
    /// A coupon in `next` was accepted when it was entered; pricing evaluates it at creation time, so
    /// one that expires mid-session keeps its discount on the sheet (expiry is re-checked at payment, rule 54).
    func repriced(_ next: CheckoutSelection, now: Timestamp) throws(PaymentRequestError) -> PricedCheckout {
        try CheckoutBuilder.price(inputs: inputs, selection: next, currency: currency, apiVersion: apiVersion, now: now)
    }
}
