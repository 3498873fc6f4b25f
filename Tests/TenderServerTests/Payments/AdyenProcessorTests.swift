import Crypto
import Foundation
import HTTPClient
import Payments
import Testing
@testable import TenderServer

/// The Adyen connector against the local stand-in that checks every request against Adyen's published schema.
@Suite struct AdyenProcessorTests {
    static let dpan = "4111111111119876"
    static let cryptogram = "AgAAAAAABk4DWZ4C28yUQAAAAAA="

    static func paymentId() -> String { PaymentIdentifier.make(prefix: "pay_", randomBytes: SecureRandom.bytes(64)) ?? "pay_x" }

    static func authorization(amountMinor: Int64, currency: String = "EUR", eci: String? = "07",
                              paymentDataType: String = "3DSecure") -> AuthorizationRequest {
        let id = paymentId()
        return AuthorizationRequest(merchantId: "merchant.test", paymentId: id, amountMinor: amountMinor, currencyCode: currency,
                                    network: "Visa", expirationMonth: 7, expirationYear: 2030, eci: eci,
                                    paymentDataType: paymentDataType, transactionId: "abc123",
                                    processorKey: ProcessorKey.authorization(paymentId: id),
                                    card: SensitiveCardData(dpan: dpan, cryptogram: cryptogram))
    }

    static func processor(_ stand: AdyenStandIn, timeoutMilliseconds: Int = 3_000, attempts: Int = 3,
                          apiKey: String? = nil) -> AdyenProcessor {
        AdyenProcessor(settings: stand.settings(apiKey: apiKey), timeoutMilliseconds: timeoutMilliseconds,
                       retryPolicy: RetryPolicy(attemptsMax: attempts, baseDelayMilliseconds: 10, maxDelayMilliseconds: 20))
    }

    @Test func paymentRequestMatchesTheSchemaWithEveryHeader() throws {
        let stand = try AdyenStandIn.get()
        let request = Self.authorization(amountMinor: 1_099)
        guard case .approved(let reference, let code) = Self.processor(stand).authorize(request) else {
            Issue.record("not approved"); return
        }
        #expect(reference.count == 16)
        #expect(code == "123456")
        let calls = try stand.calls(key: request.processorKey)
        let call = try #require(calls.first)
        #expect(calls.count == 1)
        #expect(call.violations == [])
        #expect(call.path == "/v71/payments")
        #expect(call.apiKey == stand.apiKey)
        #expect(call.contentType == "application/json")
        #expect(call.idempotencyKey == request.processorKey)
        let body = try #require(call.body)
        #expect(body["amount.value"]?.number == 1_099)
        #expect(body["amount.currency"]?.string == "EUR")
        #expect(body["reference"]?.string == request.paymentId)
        #expect(body["merchantAccount"]?.string == "TenderTestECOM")
        #expect(body["returnUrl"]?.string == "https://shop.test/checkout/return")
        #expect(body["shopperInteraction"]?.string == "Ecommerce")
        #expect(body["paymentMethod.type"]?.string == "scheme")
        #expect(body["paymentMethod.number"]?.string == Self.dpan)
        #expect(body["paymentMethod.expiryMonth"]?.string == "07")
        #expect(body["paymentMethod.expiryYear"]?.string == "2030")
        #expect(body["mpiData.cavv"]?.string == Self.cryptogram)
        #expect(body["mpiData.eci"]?.string == "07")
        #expect(body["mpiData.directoryResponse"]?.string == "Y")
        #expect(body["mpiData.authenticationResponse"]?.string == "Y")
        #expect(body["additionalData"] == .object(["paymentdatasource.type": .string("applepay")]))
        // No ECI in the token (Mastercard): the field is left out, not sent empty.
        let noECI = Self.authorization(amountMinor: 1_099, eci: nil)
        _ = Self.processor(stand).authorize(noECI)
        let second = try #require(try stand.calls(key: noECI.processorKey).first)
        #expect(second.violations == [])
        #expect(second.body?["mpiData.eci"] == nil)
    }

    /// One row per Adyen resultCode: what Tender records.
    @Test func everyResultCodeMapsToATenderOutcome() throws {
        let stand = try AdyenStandIn.get()
        let processor = Self.processor(stand)
        let table: [(Int64, String, (ProcessorOutcome) -> Bool)] = [
            (1_000, "Authorised", { if case .approved = $0 { true } else { false } }),
            (1_051, "Refused 12", { if case .declined("insufficient_funds", let r?) = $0 { r.count == 16 } else { false } }),
            (1_054, "Refused 6", { if case .declined("expired_card", _) = $0 { true } else { false } }),
            (1_057, "Refused 27", { if case .declined("adyen_refusal_27", _) = $0 { true } else { false } }),
            (1_060, "Error", { if case .declined("processor_error", _) = $0 { true } else { false } }),
            (1_061, "Cancelled", { if case .declined("cancelled", _) = $0 { true } else { false } }),
            (1_074, "RedirectShopper", { if case .declined("processor_action_required", _) = $0 { true } else { false } }),
            (1_062, "Pending", { $0 == .unknown(reason: "adyen_pending") }),
            (1_063, "Received", { $0 == .unknown(reason: "adyen_received") }),
            (1_073, "malformed", { $0 == .unknown(reason: "malformed_response") }),
        ]
        for (amount, name, expected) in table {
            let request = Self.authorization(amountMinor: amount)
            let outcome = processor.authorize(request)
            #expect(expected(outcome), "\(name): \(outcome)")
            #expect(outcome.outcomeClass == (name == "Pending" || name == "Received" || name == "malformed" ? .transient : .permanent))
            #expect(try stand.calls(key: request.processorKey).allSatisfy { $0.violations.isEmpty }, "\(name)")
        }
    }

    @Test func transientFailuresRetryWithTheSameKeyAndChargeOnce() throws {
        let stand = try AdyenStandIn.get()
        // 500 once, then an answer: the retry inside the call carries the same Idempotency-Key.
        let flaky = Self.authorization(amountMinor: 1_070)
        guard case .approved = Self.processor(stand).authorize(flaky) else { Issue.record("not approved"); return }
        let flakyCalls = try stand.calls(key: flaky.processorKey)
        #expect(flakyCalls.map(\.status) == [500, 200])
        #expect(Set(flakyCalls.compactMap(\.idempotencyKey)) == [flaky.processorKey])
        // Always 503: bounded retries, then unknown.
        let down = Self.authorization(amountMinor: 1_071)
        #expect(Self.processor(stand).authorize(down) == .unknown(reason: "http_503"))
        #expect(try stand.calls(key: down.processorKey).count == 3)
        // A timeout: the first request is still running when the retry arrives (Adyen error 704), so the outcome is
        // unknown; the next attempt with the same key gets the first answer, one charge.
        let slow = Self.authorization(amountMinor: 1_072)
        let first = Self.processor(stand, timeoutMilliseconds: 500, attempts: 2).authorize(slow)
        #expect(first == .unknown(reason: "adyen_request_in_progress") || first == .unknown(reason: "timeout"), "\(first)")
        Thread.sleep(forTimeInterval: 1.6)
        guard case .approved(let reference, _) = Self.processor(stand).authorize(slow) else { Issue.record("not approved"); return }
        guard case .approved(let again, _) = Self.processor(stand).authorize(slow) else { Issue.record("not approved"); return }
        #expect(again == reference)
        #expect(Set(try stand.calls(key: slow.processorKey).compactMap(\.idempotencyKey)) == [slow.processorKey])
    }

    @Test func refundsAreAcceptedNotSucceeded() throws {
        let stand = try AdyenStandIn.get()
        let processor = Self.processor(stand)
        let payment = Self.authorization(amountMinor: 2_000)
        guard case .approved(let psp, _) = processor.authorize(payment) else { Issue.record("not approved"); return }
        let refundId = PaymentIdentifier.make(prefix: "re_", randomBytes: SecureRandom.bytes(64)) ?? "re_x"
        let refund = RefundRequest(refundId: refundId, paymentId: payment.paymentId, processorReference: psp, amountMinor: 500,
                                   currencyCode: "EUR", processorKey: ProcessorKey.refund(refundId: refundId))
        guard case .accepted(let refundReference) = processor.refund(refund) else { Issue.record("not accepted"); return }
        #expect(refundReference != psp)
        let call = try #require(try stand.calls(key: refund.processorKey).first)
        #expect(call.violations == [])
        #expect(call.path == "/v71/payments/\(psp)/refunds")
        #expect(call.apiKey == stand.apiKey)
        #expect(call.body?["amount.value"]?.number == 500)
        #expect(call.body?["reference"]?.string == refundId)
        // The same key again: Adyen's stored answer, the same refund reference.
        #expect(processor.refund(refund) == .accepted(processorReference: refundReference))
        // Adyen refusing the request (validation, 422) is final.
        var refused = refund
        refused.processorKey = ProcessorKey.refund(refundId: "re_refused\(refundId.suffix(16))")
        refused.amountMinor = 513
        let refusedOutcome = processor.refund(refused)
        if case .declined("processor_rejected_request", _) = refusedOutcome {} else { Issue.record("\(refusedOutcome)") }
        // A reference that is not Adyen's never reaches a URL path.
        var odd = refund
        odd.processorReference = "../payments"
        #expect(processor.refund(odd) == .declined(declineCode: "processor_reference_invalid", processorReference: nil))
    }

    /// The checks behind every "no violations" above: the stand-in refuses what Adyen's schema refuses.
    @Test func standInRefusesBodiesOutsideTheSchema() throws {
        let stand = try AdyenStandIn.get()
        var options = HTTPClientOptions()
        options.allowPlainHTTPForTesting = true
        let rows: [(String, String, String)] = [
            ("returnUrl missing", #"{"amount":{"currency":"EUR","value":1},"merchantAccount":"M","reference":"r","#
                + #""paymentMethod":{"type":"scheme","number":"4111111111111111","expiryMonth":"07","expiryYear":"2030"}}"#,
             "body.returnUrl: required"),
            ("unknown field", #"{"amount":{"currency":"EUR","value":1},"merchantAccount":"M","reference":"r","returnUrl":"https://x","#
                + #""paymentMethod":{"type":"scheme","number":"4111111111111111","expiryMonth":"07","expiryYear":"2030"},"dpan":"4"}"#,
             "body.dpan: not allowed (additionalProperties false)"),
            ("amount as a string", #"{"amount":{"currency":"EUR","value":"1.00"},"merchantAccount":"M","reference":"r","#
                + #""returnUrl":"https://x","paymentMethod":{"type":"scheme","number":"4111111111111111","expiryMonth":"07","#
                + #""expiryYear":"2030"}}"#, "body.amount.value: expected int64"),
            ("cavv not base64", #"{"amount":{"currency":"EUR","value":1},"merchantAccount":"M","reference":"r","returnUrl":"https://x","#
                + #""paymentMethod":{"type":"scheme","number":"4111111111111111","expiryMonth":"07","expiryYear":"2030"},"#
                + #""mpiData":{"cavv":"not base64!","directoryResponse":"Y"}}"#, "body.mpiData.cavv: not base64"),
            ("bad enum", #"{"amount":{"currency":"EUR","value":1},"merchantAccount":"M","reference":"r","returnUrl":"https://x","#
                + #""paymentMethod":{"type":"applepay_decrypted","number":"4111111111111111","expiryMonth":"07","expiryYear":"2030"},"#
                + #""shopperInteraction":"Online"}"#, "body.shopperInteraction: not one of Ecommerce,ContAuth,Moto,POS"),
        ]
        for (name, body, violation) in rows {
            let key = "schema-\(UUID().uuidString)"
            let request = HTTPClientRequest(method: "POST", url: stand.plainURL + "/v71/payments",
                                            headers: [("Content-Type", "application/json"), ("Idempotency-Key", key),
                                                      ("X-API-Key", stand.apiKey)], body: Array(body.utf8))
            let response = try HTTPClient().send(request, options: options)
            #expect(response.status == 422, "\(name)")
            #expect(try stand.calls(key: key).first?.violations.contains(violation) == true, "\(name)")
        }
    }

    @Test func wrongKeyAndEMVPayloads() throws {
        let stand = try AdyenStandIn.get()
        let wrong = Self.authorization(amountMinor: 1_000)
        #expect(Self.processor(stand, apiKey: "AQE-not-the-key").authorize(wrong) == .unknown(reason: "http_401"))
        let emv = Self.authorization(amountMinor: 1_000, paymentDataType: "EMV")
        #expect(Self.processor(stand).authorize(emv) == .declined(declineCode: "payment_data_type_unsupported", processorReference: nil))
        #expect(try stand.calls(key: emv.processorKey).isEmpty)
    }
}
