import HTTPServer
import PaymentRequest

/// The JSON of what every checkout update writes: the next version's `PricedCheckout` and Apple's update
/// dictionary, written member by member (`JSONBytesWriter`) in the generic encoders' order, so the bytes are
/// `JSONCoding.encoder`'s (`CheckoutJSONWriterTests` holds them to it over random and fixture documents).
/// A session's `inputs` never change after creation (every recalculation reprices the same inputs), so their
/// JSON is written once per session and carried from version to version (`CachedSessionVersion.inputsJSON`).
enum CheckoutJSON {
    /// `checkout` as JSON, with `inputsJSON` (the JSON of `checkout.inputs`) copied in place of encoding them.
    static func bytes(_ checkout: PricedCheckout, inputsJSON: [UInt8]) throws -> [UInt8] {
        var w = JSONBytesWriter(capacity: inputsJSON.count + 1_536)
        w.openObject()
        w.key("apiVersion"); w.integer(checkout.apiVersion)
        w.key("availableShippingMethods"); write(checkout.availableShippingMethods, into: &w)
        w.key("currency"); w.string(checkout.currency.code)
        w.key("discountMinor"); w.integer(checkout.discountMinor)
        w.key("expiresAt"); w.string(checkout.expiresAt.rfc3339)
        w.key("inputs"); w.raw(inputsJSON)
        w.key("paymentRequest"); try write(checkout.paymentRequest, into: &w)
        w.key("selection"); try write(checkout.selection, into: &w)
        w.member("taxMinor", checkout.taxMinor)
        w.key("totalMinor"); w.integer(checkout.totalMinor)
        w.closeObject()
        return w.bytes
    }

    /// The JSON of a session's inputs (once per session; every later version carries these bytes).
    static func inputsBytes(_ inputs: CheckoutInputs) throws -> [UInt8] {
        try JSONBytesEncoder.bytes(inputs)
    }

    // MARK: - Update dictionaries (§3.2)

    static func bytes(_ update: ApplePayShippingMethodUpdate) throws -> [UInt8] {
        try updateBytes(errors: nil, update.newAutomaticReloadPaymentRequest, update.newDeferredPaymentRequest,
                        update.newLineItems, update.newMultiTokenContexts, update.newRecurringPaymentRequest,
                        update.newShippingMethods, update.newTotal)
    }

    static func bytes(_ update: ApplePayShippingContactUpdate) throws -> [UInt8] {
        try updateBytes(errors: update.errors, update.newAutomaticReloadPaymentRequest, update.newDeferredPaymentRequest,
                        update.newLineItems, update.newMultiTokenContexts, update.newRecurringPaymentRequest,
                        update.newShippingMethods, update.newTotal)
    }

    static func bytes(_ update: ApplePayCouponCodeUpdate) throws -> [UInt8] {
        try updateBytes(errors: update.errors, update.newAutomaticReloadPaymentRequest, update.newDeferredPaymentRequest,
                        update.newLineItems, update.newMultiTokenContexts, update.newRecurringPaymentRequest,
                        update.newShippingMethods, update.newTotal)
    }

    static func bytes(_ update: ApplePayPaymentMethodUpdate) throws -> [UInt8] {
        try updateBytes(errors: update.errors, update.newAutomaticReloadPaymentRequest, update.newDeferredPaymentRequest,
                        update.newLineItems, update.newMultiTokenContexts, update.newRecurringPaymentRequest,
                        update.newShippingMethods, update.newTotal)
    }

    // The four update dictionaries share their members; `errors` is absent from the shipping-method one.
    private static func updateBytes(errors: [ApplePayError]?, _ automaticReload: ApplePayAutomaticReloadPaymentRequest?,
                                    _ deferred: ApplePayDeferredPaymentRequest?, _ lineItems: [ApplePayLineItem]?,
                                    _ multiTokenContexts: [ApplePayPaymentTokenContext]?,
                                    _ recurring: ApplePayRecurringPaymentRequest?, _ shippingMethods: [ApplePayShippingMethod]?,
                                    _ total: ApplePayLineItem) throws -> [UInt8] {
        var w = JSONBytesWriter(capacity: 512)
        w.openObject()
        if let errors {
            w.key("errors")
            w.openArray()
            for error in errors { write(error, into: &w) }
            w.closeArray()
        }
        try w.memberValue("newAutomaticReloadPaymentRequest", automaticReload)
        try w.memberValue("newDeferredPaymentRequest", deferred)
        if let lineItems { w.key("newLineItems"); try write(lineItems, into: &w) }
        try w.memberValue("newMultiTokenContexts", multiTokenContexts)
        try w.memberValue("newRecurringPaymentRequest", recurring)
        if let shippingMethods { w.key("newShippingMethods"); write(shippingMethods, into: &w) }
        w.key("newTotal"); try write(total, into: &w)
        w.closeObject()
        return w.bytes
    }

    // MARK: - Members

    static func write(_ r: ApplePayPaymentRequest, into w: inout JSONBytesWriter) throws {
        w.openObject()
        w.member("applePayLaterAvailability", r.applePayLaterAvailability?.rawValue)
        w.member("applicationData", r.applicationData)
        try w.memberValue("automaticReloadPaymentRequest", r.automaticReloadPaymentRequest)
        try w.memberValue("billingContact", r.billingContact)
        w.key("countryCode"); w.string(r.countryCode)
        w.member("couponCode", r.couponCode)
        w.key("currencyCode"); w.string(r.currencyCode)
        try w.memberValue("deferredPaymentRequest", r.deferredPaymentRequest)
        try w.memberValue("disbursementRequest", r.disbursementRequest)
        w.member("features", r.features)
        if let items = r.lineItems { w.key("lineItems"); try write(items, into: &w) }
        w.member("merchantCapabilities", r.merchantCapabilities.map(\.rawValue))
        w.member("merchantCategoryCode", r.merchantCategoryCode)
        try w.memberValue("multiTokenContexts", r.multiTokenContexts)
        try w.memberValue("recurringPaymentRequest", r.recurringPaymentRequest)
        w.member("requiredBillingContactFields", r.requiredBillingContactFields?.map(\.rawValue))
        w.member("requiredShippingContactFields", r.requiredShippingContactFields?.map(\.rawValue))
        try w.memberValue("shippingContact", r.shippingContact)
        w.member("shippingContactEditingMode", r.shippingContactEditingMode?.rawValue)
        if let methods = r.shippingMethods { w.key("shippingMethods"); write(methods, into: &w) }
        w.member("shippingType", r.shippingType?.rawValue)
        w.member("supportedCountries", r.supportedCountries)
        w.member("supportedNetworks", r.supportedNetworks.map(\.rawValue))
        w.member("supportsCouponCode", r.supportsCouponCode)
        w.key("total"); try write(r.total, into: &w)
        w.closeObject()
    }

    static func write(_ items: [ApplePayLineItem], into w: inout JSONBytesWriter) throws {
        w.openArray()
        for item in items { try write(item, into: &w) }
        w.closeArray()
    }

    static func write(_ item: ApplePayLineItem, into w: inout JSONBytesWriter) throws {
        w.openObject()
        w.member("amount", item.amount)
        w.member("automaticReloadPaymentThresholdAmount", item.automaticReloadPaymentThresholdAmount)
        w.member("deferredPaymentDate", item.deferredPaymentDate?.rfc3339)
        w.key("label"); w.string(item.label)
        w.member("paymentTiming", item.paymentTiming?.rawValue)
        w.member("recurringPaymentEndDate", item.recurringPaymentEndDate?.rfc3339)
        w.member("recurringPaymentIntervalCount", item.recurringPaymentIntervalCount)
        w.member("recurringPaymentIntervalUnit", item.recurringPaymentIntervalUnit?.rawValue)
        w.member("recurringPaymentStartDate", item.recurringPaymentStartDate?.rfc3339)
        w.member("type", item.type?.rawValue)
        w.closeObject()
    }

    static func write(_ methods: [ApplePayShippingMethod], into w: inout JSONBytesWriter) {
        w.openArray()
        for method in methods { write(method, into: &w) }
        w.closeArray()
    }

    static func write(_ method: ApplePayShippingMethod, into w: inout JSONBytesWriter) {
        w.openObject()
        w.key("amount"); w.string(method.amount)
        if let range = method.dateComponentsRange {
            w.key("dateComponentsRange")
            w.openObject()
            w.key("endDateComponents"); write(range.endDateComponents, into: &w)
            w.key("startDateComponents"); write(range.startDateComponents, into: &w)
            w.closeObject()
        }
        w.key("detail"); w.string(method.detail)
        w.key("identifier"); w.string(method.identifier)
        w.key("label"); w.string(method.label)
        w.member("selected", method.selected)
        w.closeObject()
    }

    static func write(_ components: ApplePayDateComponents, into w: inout JSONBytesWriter) {
        w.openObject()
        w.member("days", components.days)
        w.member("hours", components.hours)
        w.member("months", components.months)
        w.member("years", components.years)
        w.closeObject()
    }

    static func write(_ selection: CheckoutSelection, into w: inout JSONBytesWriter) throws {
        w.openObject()
        try w.memberValue("coupon", selection.coupon)
        w.key("couponCode"); w.string(selection.couponCode)
        if let address = selection.shippingAddress {
            w.key("shippingAddress")
            w.openObject()
            w.member("administrativeArea", address.administrativeArea)
            w.key("countryCode"); w.string(address.countryCode)
            w.member("locality", address.locality)
            w.member("postalCode", address.postalCode)
            w.closeObject()
        }
        w.member("shippingMethodIdentifier", selection.shippingMethodIdentifier)
        w.closeObject()
    }

    static func write(_ error: ApplePayError, into w: inout JSONBytesWriter) {
        w.openObject()
        w.key("code"); w.string(error.code.rawValue)
        w.member("contactField", error.contactField?.rawValue)
        w.key("message"); w.string(error.message)
        w.closeObject()
    }
}
