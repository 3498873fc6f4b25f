import Foundation
import HTTPServer
import Payments
import PaymentRequest

/// `POST /v1/checkout-sessions/{id}/payments`, decoded once: `{"token": {…}, "shippingContact": {…},
/// "billingContact": {…}}`. Tender's own object refuses unknown members; Apple's token is kept as the
/// bytes the client sent (the verifier parses it within its own limits; nothing re-serialises it).
struct PaymentCommand {
    /// The token member's bytes, exactly as sent.
    let tokenJSON: [UInt8]
    /// The body's `shippingContact` (Apple's object, new fields tolerated), or nil when absent.
    let shippingContact: ApplePayPaymentContact?

    /// The typed shape of the body; `token` and `billingContact` are only checked to be objects.
    private struct Body: Decodable {
        let shippingContact: ApplePayPaymentContact?

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: MemberKey.self)
            for key in c.allKeys.map(\.stringValue).sorted() where !["token", "shippingContact", "billingContact"].contains(key) {
                throw PaymentProblems.unknownField(key)
            }
            guard (try? c.decode(AnyObjectShape.self, forKey: MemberKey("token"))) != nil else {
                throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "token is required.",
                                  errors: [.init(field: "token", code: "required", message: "An Apple Pay token object is required.")])
            }
            for field in ["shippingContact", "billingContact"] where c.contains(MemberKey(field)) {
                guard (try? c.decode(AnyObjectShape.self, forKey: MemberKey(field))) != nil else {
                    throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "\(field) must be an object.",
                                      errors: [.init(field: field, code: "invalid_type", message: "This field must be an object.")])
                }
            }
            guard c.contains(MemberKey("shippingContact")) else {
                shippingContact = nil
                return
            }
            do { shippingContact = try c.decode(ApplePayPaymentContact.self, forKey: MemberKey("shippingContact")) } catch {
                throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON",
                                  detail: "shippingContact is not an ApplePayPaymentContact.",
                                  errors: [.init(field: "shippingContact", code: "invalid_value", message: "Not a payment contact.")])
            }
        }
    }

    /// Decodes `body` (the JSON edge's checks first, then one decode) or throws a 400 problem.
    static func decode(_ body: [UInt8]) throws(HTTPProblem) -> PaymentCommand {
        guard JSONMemberSpans.isObject(body) else {
            try JSONCoding.checkBody(body)
            throw PaymentProblems.malformedJSON
        }
        let decoded = try PaymentProblems.decode(Body.self, from: body)
        guard let span = JSONMemberSpans.topLevel(body)["token"] else { throw PaymentProblems.malformedJSON }
        return PaymentCommand(tokenJSON: Array(body[span]), shippingContact: decoded.shippingContact)
    }
}

/// `POST /v1/payments/{id}/refunds`: exactly `{"amount": "<decimal>"}` (unknown members refused).
struct RefundCommand: Decodable {
    /// Largest accepted body.
    static let bodyBytesMax = 4_096
    /// The decimal amount as sent (parsed against the payment's currency).
    let amount: String

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: MemberKey.self)
        for key in c.allKeys.map(\.stringValue).sorted() where key != "amount" {
            throw PaymentProblems.unknownField(key)
        }
        guard let amount = try? c.decode(String.self, forKey: MemberKey("amount")) else {
            throw HTTPProblem(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "amount is required.",
                              errors: [.init(field: "amount", code: "required", message: "amount must be a decimal string.")])
        }
        self.amount = amount
    }

    /// Decodes `body` or throws a 400 problem.
    static func decode(_ body: [UInt8]) throws(HTTPProblem) -> RefundCommand {
        guard body.count <= bodyBytesMax else { throw PaymentProblems.malformedJSON }
        guard JSONMemberSpans.isObject(body) else {
            try JSONCoding.checkBody(body)
            throw PaymentProblems.malformedJSON
        }
        return try PaymentProblems.decode(RefundCommand.self, from: body)
    }
}

extension PaymentProblems {
    /// `JSONCoding.decode`, with a body that is not JSON at all answered as the payments routes always did.
    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws(HTTPProblem) -> T {
        do {
            return try JSONCoding.decode(T.self, from: body)
        } catch {
            throw error.code == "malformed_json" && error.errors.isEmpty ? malformedJSON : error
        }
    }

    /// 400 `unknown_field` naming `field`.
    static func unknownField(_ field: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: "unknown_field", title: "Unknown field",
                    detail: "The request contains a field this endpoint does not accept.",
                    errors: [.init(field: field, code: "unknown_field", message: "This field is not accepted.")])
    }
}

/// Any member name.
struct MemberKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Decodes only when the value is a JSON object (its members are skipped).
struct AnyObjectShape: Decodable {
    init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: MemberKey.self) }
}

/// The body of a refused payment's problem (RFC 9457 members, then the payment's): Encodable types
/// only, encoded like every problem (sorted keys).
struct PaymentRefusalProblem: Encodable {
    let type: String
    let title: String
    let status: Int
    let detail: String
    let code: String
    let requestId: String
    let paymentId: String
    let tokenErrorCode: String?
    let authorizationResult: AuthorizationResult

    /// The response for `refusal` of payment `paymentId`.
    static func response(_ refusal: PaymentRefusal, paymentId: String, appleErrors: [ApplePayError],
                         requestID: String) throws -> HTTPResponse {
        let body = PaymentRefusalProblem(
            type: HTTPProblem.typeBase + refusal.code, title: "Payment refused", status: refusal.status, detail: refusal.detail,
            code: refusal.code, requestId: requestID, paymentId: paymentId, tokenErrorCode: refusal.tokenErrorCode,
            authorizationResult: AuthorizationResult(status: 1, errors: appleErrors.map(AuthorizationResult.SheetError.init)))
        return HTTPResponse(status: refusal.status, headers: HTTPHeaders([("Content-Type", "application/problem+json")]),
                            body: Array(try JSONCoding.encoder.encode(body)))
    }
}

/// Apple Pay JS `ApplePayPaymentAuthorizationResult` (status 0 success, 1 failure).
struct AuthorizationResult: Encodable {
    /// One `ApplePayError` as Apple Pay JS reads it (an empty message is left out).
    struct SheetError: Encodable {
        let code: String
        let contactField: String?
        let message: String?

        init(_ error: ApplePayError) {
            code = error.code.rawValue
            contactField = error.contactField?.rawValue
            message = error.message.isEmpty ? nil : error.message
        }
    }

    let status: Int
    let errors: [SheetError]
    /// The Wallet order of a succeeded payment (CONTRACT §7); absent otherwise (never on a refusal).
    var orderDetails: WalletOrderDetails? = nil
}
