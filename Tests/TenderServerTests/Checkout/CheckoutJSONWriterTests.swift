import Foundation
import HTTPServer
import Money
import PaymentRequest
import Testing
@testable import TenderServer

/// `CheckoutJSON` writes the stored document and the update dictionaries by hand: its bytes must be
/// `JSONCoding.encoder`'s for every member a document can hold (each optional present or absent, escapes,
/// nested Apple dictionaries), and a stored version must read back as the value that was written.
@Suite struct CheckoutJSONWriterTests {
    static let labels = CheckoutJSONBytesTests.labels

    static func foundation<T: Encodable>(_ value: T) throws -> [UInt8] { [UInt8](try JSONCoding.encoder.encode(value)) }

    static func expectSame(_ priced: PricedCheckout) throws {
        let inputs = try CheckoutJSON.inputsBytes(priced.inputs)
        #expect(inputs == (try foundation(priced.inputs)))
        let ours = try CheckoutJSON.bytes(priced, inputsJSON: inputs)
        let theirs = try foundation(priced)
        #expect(ours == theirs, "\(String(decoding: ours, as: UTF8.self))\n\(String(decoding: theirs, as: UTF8.self))")
        // A stored version reads back as the value that was written.
        #expect(try TenderApp.decodeCheckout(String(decoding: ours, as: UTF8.self)) == priced)
    }

    static func expectSame<Update: Encodable>(_ update: Update, _ ours: [UInt8]) throws {
        let theirs = try foundation(update)
        #expect(ours == theirs, "\(String(decoding: ours, as: UTF8.self))\n\(String(decoding: theirs, as: UTF8.self))")
    }

    /// Every recalculation of `priced`, each checked against the generic encoders.
    static func expectSameUpdates(_ priced: PricedCheckout, round: Int) throws {
        let now = priced.inputs.createdAt
        for method in priced.availableShippingMethods {
            let r = try priced.selectingShippingMethod(method.identifier, now: now)
            try expectSame(r.update, try CheckoutJSON.bytes(r.update))
            try expectSame(r.checkout)
            #expect(r.checkout.inputs == priced.inputs)
        }
        for country in ["US", "CA", "FR", "zz", ""] {
            let contact = ApplePayPaymentContact(locality: labels[round % labels.count], postalCode: "9410\(round % 10)",
                                                 administrativeArea: round % 2 == 0 ? "CA" : nil, countryCode: country)
            let r = try priced.updatingShippingContact(contact, now: now)
            try expectSame(r.update, try CheckoutJSON.bytes(r.update))
            try expectSame(r.checkout)
            #expect(r.checkout.inputs == priced.inputs)
        }
        if priced.paymentRequest.supportsCouponCode == true {
            for code in ["", "SAVE10", "NOPE"] {
                let coupon = code == "SAVE10" ? Coupon(code: code, kind: .percent(basisPoints: 1_000)) : nil
                let r = try priced.applyingCouponCode(code, coupon: coupon, now: now)
                try expectSame(r.update, try CheckoutJSON.bytes(r.update))
                try expectSame(r.checkout)
                #expect(r.checkout.inputs == priced.inputs)
            }
        }
        let r = try priced.updatingPaymentMethod(ApplePayPaymentMethod(displayName: "Visa 1234", network: "visa", type: "debit"))
        try expectSame(r.update, try CheckoutJSON.bytes(r.update))
    }

    static func cart(round: Int, currency: String, generator: inout SystemRandomNumberGenerator) -> Cart {
        let amounts = CheckoutJSONBytesTests.amounts
        let amount = { (index: Int) -> String in
            let text = amounts[index % amounts.count]
            return currency == "JPY" ? String(text.prefix { $0 != "." }) : text
        }
        var cart = Cart(currencyCode: currency, lineItems: (0..<(1 + round % 4)).map {
            ApplePayLineItem(label: labels[($0 + round) % labels.count], amount: amount($0 + round),
                             type: $0 == 1 ? .final : nil)
        })
        cart.countryCode = "US"
        if round % 7 != 3 {
            cart.shippingMethods = [
                CartShippingMethod(identifier: "standard", label: labels[round % labels.count], detail: "5–7 days",
                                   amount: amount(round + 2), countries: round % 3 == 0 ? nil : ["US", "CA"]),
                CartShippingMethod(identifier: "express", label: "Express", detail: labels[(round + 4) % labels.count],
                                   amount: amount(round + 3), countries: ["US"]),
            ]
        }
        cart.supportsCouponCode = round % 2 == 0 ? true : nil
        cart.metadata = ["orderId": String(UInt64.random(in: 0...UInt64.max, using: &generator))]
        cart.expiresInSeconds = 3600
        return cart
    }

    @Test func storedDocumentsAndUpdatesMatchTheGenericEncoders() throws {
        let merchant = MerchantProfile(
            merchantIdentifier: "merchant.com.example", displayName: "Example Störe \"quoted\"",
            supportedNetworks: [.visa, .masterCard, .amex], merchantCapabilities: [.supports3DS],
            countryCode: try Country(code: "US"), currencies: [try Currency(code: "USD"), try Currency(code: "JPY")],
            domains: ["shop.example.com"])
        let taxes = [TaxRule(country: try Country(code: "US"), rateBasisPoints: 825, shippingTaxable: true),
                     TaxRule(country: try Country(code: "US"), region: "CA", rateBasisPoints: 725, shippingTaxable: false)]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<40 {
            let currency = round % 5 == 0 ? "JPY" : "USD"
            let priced = try CheckoutBuilder.build(cart: Self.cart(round: round, currency: currency, generator: &generator),
                                                   merchant: merchant, coupon: nil, taxRules: round % 2 == 0 ? taxes : [],
                                                   applicationData: "c2Vzc2lvbjoxMjM0",
                                                   now: Timestamp(unixSeconds: 1_767_225_600 + Int64(round)))
            try Self.expectSame(priced)
            try Self.expectSameUpdates(priced, round: round)
            for _ in 0..<8 {
                try Self.expectSame(try Self.withRandomMembers(priced, generator: &generator))
            }
        }
    }

    /// Update dictionaries with every optional member, including the nested Apple dictionaries.
    @Test func fullUpdateDictionariesMatchTheGenericEncoders() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<40 {
            let members = Self.randomUpdateMembers(generator: &generator)
            let withErrors = members.merging(["errors": Self.errors(generator: &generator)]) { a, _ in a }
            let method = try Self.decode(ApplePayShippingMethodUpdate.self, .object(members))
            try Self.expectSame(method, try CheckoutJSON.bytes(method))
            let contact = try Self.decode(ApplePayShippingContactUpdate.self, .object(withErrors))
            try Self.expectSame(contact, try CheckoutJSON.bytes(contact))
            let coupon = try Self.decode(ApplePayCouponCodeUpdate.self, .object(withErrors))
            try Self.expectSame(coupon, try CheckoutJSON.bytes(coupon))
            let payment = try Self.decode(ApplePayPaymentMethodUpdate.self, .object(withErrors))
            try Self.expectSame(payment, try CheckoutJSON.bytes(payment))
        }
    }

    // MARK: - Random members

    static func decode<T: Decodable>(_ type: T.Type, _ value: JSONValue) throws -> T {
        try JSONCoding.decoder.decode(T.self, from: Data(try foundation(value)))
    }

    static func text(_ generator: inout SystemRandomNumberGenerator) -> JSONValue {
        .string(labels[Int.random(in: 0..<labels.count, using: &generator)])
    }

    static func lineItem(_ generator: inout SystemRandomNumberGenerator) -> JSONValue {
        var item: [String: JSONValue] = ["label": text(&generator)]
        let optional: [(String, JSONValue)] = [
            ("amount", .string("1.50")), ("type", .string(Bool.random(using: &generator) ? "final" : "pending")),
            ("paymentTiming", .string("recurring")), ("recurringPaymentStartDate", .string("2026-02-01T00:00:00Z")),
            ("recurringPaymentIntervalUnit", .string("month")), ("recurringPaymentIntervalCount", .number("3")),
            ("recurringPaymentEndDate", .string("2027-02-01T12:30:00.250Z")), ("deferredPaymentDate", .string("2026-03-01T00:00:00Z")),
            ("automaticReloadPaymentThresholdAmount", .string("5.00")),
        ]
        for (key, value) in optional where Bool.random(using: &generator) { item[key] = value }
        return .object(item)
    }

    static func shippingMethod(_ generator: inout SystemRandomNumberGenerator) -> JSONValue {
        var method: [String: JSONValue] = ["label": text(&generator), "detail": text(&generator), "amount": .string("4.99"),
                                           "identifier": text(&generator)]
        if Bool.random(using: &generator) { method["selected"] = .bool(Bool.random(using: &generator)) }
        if Bool.random(using: &generator) {
            var start: [String: JSONValue] = ["days": .number("2")]
            if Bool.random(using: &generator) { start["years"] = .number("2026") }
            if Bool.random(using: &generator) { start["months"] = .number("1"); start["hours"] = .number("9") }
            method["dateComponentsRange"] = .object(["startDateComponents": .object(start),
                                                     "endDateComponents": .object(["days": .number("5")])])
        }
        return .object(method)
    }

    static func contact(_ generator: inout SystemRandomNumberGenerator) -> JSONValue {
        var contact: [String: JSONValue] = [:]
        for key in ["phoneNumber", "emailAddress", "givenName", "familyName", "locality", "postalCode", "countryCode"]
        where Bool.random(using: &generator) { contact[key] = text(&generator) }
        if Bool.random(using: &generator) { contact["addressLines"] = .array([text(&generator), text(&generator)]) }
        return .object(contact)
    }

    static func errors(generator: inout SystemRandomNumberGenerator) -> JSONValue {
        .array((0..<Int.random(in: 0...2, using: &generator)).map { index in
            var error: [String: JSONValue] = ["code": .string(index == 0 ? "shippingContactInvalid" : "couponCodeInvalid"),
                                              "message": text(&generator)]
            if Bool.random(using: &generator) { error["contactField"] = .string("postalCode") }
            return .object(error)
        })
    }

    static func recurring(_ generator: inout SystemRandomNumberGenerator) -> JSONValue {
        .object(["paymentDescription": text(&generator), "regularBilling": lineItem(&generator),
                 "managementURL": .string("https://shop.example.com/manage"), "billingAgreement": text(&generator)])
    }

    static func randomUpdateMembers(generator: inout SystemRandomNumberGenerator) -> [String: JSONValue] {
        var members: [String: JSONValue] = ["newTotal": lineItem(&generator)]
        if Bool.random(using: &generator) { members["newLineItems"] = .array([lineItem(&generator), lineItem(&generator)]) }
        if Bool.random(using: &generator) { members["newShippingMethods"] = .array([shippingMethod(&generator)]) }
        if Bool.random(using: &generator) { members["newRecurringPaymentRequest"] = recurring(&generator) }
        if Bool.random(using: &generator) {
            members["newAutomaticReloadPaymentRequest"] = .object([
                "paymentDescription": text(&generator), "automaticReloadBilling": lineItem(&generator),
                "managementURL": .string("https://shop.example.com/reload")])
        }
        if Bool.random(using: &generator) {
            members["newDeferredPaymentRequest"] = .object([
                "paymentDescription": text(&generator), "deferredBilling": lineItem(&generator),
                "managementURL": .string("https://shop.example.com/deferred"),
                "freeCancellationDate": .string("2026-02-01T00:00:00Z"), "freeCancellationDateTimeZone": .string("Europe/Paris")])
        }
        if Bool.random(using: &generator) {
            members["newMultiTokenContexts"] = .array([.object([
                "merchantIdentifier": .string("merchant.a"), "externalIdentifier": text(&generator),
                "merchantName": text(&generator), "amount": .string("1.00")])])
        }
        return members
    }

    /// `priced` with optional members of its request, line items, methods and selection set at random.
    static func withRandomMembers(_ priced: PricedCheckout, generator: inout SystemRandomNumberGenerator) throws -> PricedCheckout {
        guard case .object(var document) = try JSONCoding.decoder.decode(JSONValue.self, from: Data(try foundation(priced))) else {
            throw TenderError("test_shape", "not an object")
        }
        guard case .object(var request)? = document["paymentRequest"] else { throw TenderError("test_shape", "no request") }
        let optional: [(String, JSONValue)] = [
            ("features", .array([.string("f1"), text(&generator)])),
            ("requiredBillingContactFields", .array([.string("email"), .string("phone")])),
            ("requiredShippingContactFields", .array([.string("postalAddress")])),
            ("billingContact", contact(&generator)), ("shippingContact", contact(&generator)),
            ("supportedCountries", .array([.string("US"), .string("CA")])), ("supportsCouponCode", .bool(Bool.random(using: &generator))),
            ("couponCode", text(&generator)), ("shippingContactEditingMode", .string("storePickup")),
            ("applePayLaterAvailability", .string("unavailableRecurringTransaction")), ("merchantCategoryCode", .string("5411")),
            ("shippingType", .string("delivery")), ("recurringPaymentRequest", recurring(&generator)),
            ("multiTokenContexts", .array([])), ("disbursementRequest", .object(["requiredRecipientContactFields": .array([])])),
            ("lineItems", .array([lineItem(&generator), lineItem(&generator)])),
            ("shippingMethods", .array([shippingMethod(&generator), shippingMethod(&generator)])),
            ("total", lineItem(&generator)),
        ]
        for (key, value) in optional where Bool.random(using: &generator) { request[key] = value }
        if Bool.random(using: &generator) { request["applicationData"] = nil }
        document["paymentRequest"] = .object(request)
        if Bool.random(using: &generator) { document["availableShippingMethods"] = .array([shippingMethod(&generator)]) }
        if Bool.random(using: &generator) { document["taxMinor"] = .number(String(Int64.random(in: 0...9_999, using: &generator))) }
        var selection: [String: JSONValue] = ["couponCode": text(&generator)]
        if Bool.random(using: &generator) { selection["shippingMethodIdentifier"] = text(&generator) }
        if Bool.random(using: &generator) {
            var address: [String: JSONValue] = ["countryCode": .string("US")]
            for key in ["administrativeArea", "locality", "postalCode"] where Bool.random(using: &generator) {
                address[key] = text(&generator)
            }
            selection["shippingAddress"] = .object(address)
        }
        if Bool.random(using: &generator) {
            let kind = JSONValue.object(["percent": .object(["basisPoints": .number("1000")])])
            selection["coupon"] = .object(["code": .string("SAVE10"), "kind": kind,
                                           "currency": .string("USD"), "expiresAtUnixSeconds": .number("1767225600")])
        }
        document["selection"] = .object(selection)
        return try decode(PricedCheckout.self, .object(document))
    }
}
