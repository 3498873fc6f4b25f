import Crypto
import Foundation
import PaymentRequest
import Testing
@testable import TenderServer

/// Safari's rules for `ApplePayPaymentAuthorizationResult.orderDetails` (WebKit's
/// ApplePayPaymentOrderDetails): four required strings, `webServiceURL` a valid URL.
func passesSafariOrderDetailsRules(_ details: [String: Any]) -> Bool {
    let names = ["orderTypeIdentifier", "orderIdentifier", "webServiceURL", "authenticationToken"]
    guard names.allSatisfy({ (details[$0] as? String)?.isEmpty == false }), details.count == names.count,
          let text = details["webServiceURL"] as? String, let url = URL(string: text), url.scheme != nil, url.host != nil else {
        return false
    }
    return true
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"), .serialized)
struct WalletOrderTests {
    static let base = "/wallet/orders/v1"

    /// Pays a session and returns (payment id, orderDetails).
    func payForOrder(_ w: WalletHarness, key: String) throws -> (String, [String: Any]) {
        let s = try w.session()
        let r = try w.payments.pay(s, token: try w.payments.token(for: s), key: key)
        #expect(r.status == 200)
        let body = try r.json()
        let payment = try #require(body["payment"] as? [String: Any])
        let result = try #require(body["authorizationResult"] as? [String: Any])
        #expect(result["status"] as? Int == 0)
        return (try #require(payment["id"] as? String), try #require(result["orderDetails"] as? [String: Any]))
    }

    @Test func orderFlowEndToEnd() throws {
        let w = try WalletHarness(prefix: "wallet_flow")
        defer { w.stop() }
        let (paymentId, details) = try payForOrder(w, key: "wallet-flow-1")
        #expect(passesSafariOrderDetailsRules(details))
        #expect(details["webServiceURL"] as? String == WalletHarness.publicBaseURL + "/wallet/orders/")
        #expect(details["orderTypeIdentifier"] as? String == WalletSandbox.orderTypeIdentifier)
        // Apple Pay JS's own model decodes it.
        let data = try JSONSerialization.data(withJSONObject: ["status": 0, "orderDetails": details])
        #expect(try JSONDecoder().decode(ApplePayPaymentAuthorizationResult.self, from: data).orderDetails != nil)
        let typeId = try #require(details["orderTypeIdentifier"] as? String)
        let orderId = try #require(details["orderIdentifier"] as? String)
        let token = try #require(details["authenticationToken"] as? String)
        let auth = [("Authorization", "AppleOrder \(token)")]
        let orderPath = "\(Self.base)/orders/\(typeId)/\(orderId)"

        // The latest order: 401 without or with a wrong token, 200 signed package, 304 when current.
        #expect(try w.request("GET", orderPath).status == 401)
        #expect(try w.request("GET", orderPath, headers: [("Authorization", "AppleOrder wrong-token-0123456789")]).status == 401)
        #expect(try w.request("GET", "\(Self.base)/orders/\(typeId)/ord_000000000000000000000000", headers: auth).status == 401)
        let first = try w.request("GET", orderPath, headers: auth)
        #expect(first.status == 200)
        #expect(first.header("Content-Type") == "application/vnd.apple.order")
        let lastModified = try #require(first.header("Last-Modified"))
        #expect(try opensslVerifies(package: first.body, root: w.sandbox.root))
        let order = try packageJSON(first.body, "order.json")
        #expect(order["orderNumber"] as? String == paymentId)
        #expect(order["orderType"] as? String == "ecommerce")
        #expect(order["status"] as? String == "open")
        #expect(order["authenticationToken"] as? String == token)
        #expect(order["webServiceURL"] as? String == WalletHarness.publicBaseURL + "/wallet/orders/")
        #expect(order["orderManagementURL"] as? String == "https://shop.test/")
        let merchant = try #require(order["merchant"] as? [String: Any])
        #expect(merchant["merchantIdentifier"] as? String == w.payments.merchantId)
        let lineItems = try #require(order["lineItems"] as? [[String: Any]])
        #expect(lineItems.first?["title"] as? String == "Widget")
        let payment = try #require(order["payment"] as? [String: Any])
        let total = try #require(payment["total"] as? [String: Any])
        #expect((total["amount"] as? NSNumber)?.decimalValue == Decimal(string: "10.99"))
        #expect(payment["status"] as? String == "paid")
        let fulfillments = try #require(order["fulfillments"] as? [[String: Any]])
        #expect(fulfillments.first?["fulfillmentIdentifier"] as? String == "std")
        #expect(try w.request("GET", orderPath, headers: auth + [("If-Modified-Since", lastModified)]).status == 304)

        // Register: 201 new, 200 existing, 401 bad token, 400 no push token.
        let device = "device-\(UUID().uuidString.prefix(8))"
        let registration = "\(Self.base)/devices/\(device)/registrations/\(typeId)/\(orderId)"
        #expect(try w.request("POST", registration, headers: auth, body: #"{"pushToken":"push-1"}"#).status == 201)
        #expect(try w.request("POST", registration, headers: auth, body: #"{"pushToken":"push-1"}"#).status == 200)
        #expect(try w.request("POST", registration, headers: [("Authorization", "AppleOrder nope-nope-nope-nope")],
                              body: #"{"pushToken":"push-1"}"#).status == 401)
        #expect(try w.request("POST", registration, headers: auth, body: #"{}"#).status == 400)

        // Changed since: listed with a tag; nothing newer → 204.
        let list = "\(Self.base)/devices/\(device)/registrations/\(typeId)"
        let listed = try w.request("GET", list)
        #expect(listed.status == 200)
        #expect(try listed.json()["orderIdentifiers"] as? [String] == [orderId])
        let tag = try #require(try listed.json()["lastModified"] as? String)
        #expect(try w.request("GET", list + "?ordersModifiedSince=\(tag)").status == 204)
        #expect(try w.request("GET", "\(Self.base)/devices/other-device/registrations/\(typeId)").status == 204)

        // The merchant ships: the order changes, a push is owed, the device's list shows it, a new package.
        let shipped = #"{"status":"open","fulfillments":[{"fulfillmentType":"shipping","fulfillmentIdentifier":"std","#
            + #""status":"shipped","carrier":"UPS","trackingNumber":"1Z999","trackingURL":"https://ups.example/1Z999"}]}"#
        let api = [("Authorization", "Bearer \(w.payments.apiKey)")]
        sleep(1) // Last-Modified has whole seconds.
        let updated = try w.request("POST", "/v1/payments/\(paymentId)/order", headers: api, body: shipped)
        #expect(updated.status == 200)
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_pushes WHERE push_token = 'push-1'") == 1)
        let relisted = try w.request("GET", list + "?ordersModifiedSince=\(tag)")
        #expect(relisted.status == 200)
        #expect(try relisted.json()["orderIdentifiers"] as? [String] == [orderId])
        let second = try w.request("GET", orderPath, headers: auth + [("If-Modified-Since", lastModified)])
        #expect(second.status == 200)
        #expect(try opensslVerifies(package: second.body, root: w.sandbox.root))
        let shippedOrder = try packageJSON(second.body, "order.json")
        let shippedFulfillment = try #require((shippedOrder["fulfillments"] as? [[String: Any]])?.first)
        #expect(shippedFulfillment["status"] as? String == "shipped")
        #expect(shippedFulfillment["trackingNumber"] as? String == "1Z999")

        // Refunding everything marks the order's payment refunded, by itself.
        #expect(try w.payments.refund(paymentId, amount: "10.99", key: "wallet-refund-1").status == 200)
        let refunded = try packageJSON(try w.request("GET", orderPath, headers: auth).body, "order.json")
        #expect((refunded["payment"] as? [String: Any])?["status"] as? String == "refunded")

        // Unregister: 200, 401 with a bad token; log: 200.
        #expect(try w.request("DELETE", registration, headers: [("Authorization", "AppleOrder nope-nope-nope-nope")]).status == 401)
        #expect(try w.request("DELETE", registration, headers: auth).status == 200)
        #expect(try w.request("GET", list).status == 204)
        #expect(try w.request("POST", "\(Self.base)/log", body: #"{"logs":["order download failed"]}"#).status == 200)
        #expect(try w.request("POST", "\(Self.base)/log", body: #"{"nologs":1}"#).status == 400)
    }

    @Test func merchantUpdatesAreValidated() throws {
        let w = try WalletHarness(prefix: "wallet_update")
        defer { w.stop() }
        let (paymentId, _) = try payForOrder(w, key: "wallet-update-1")
        let api = [("Authorization", "Bearer \(w.payments.apiKey)")]
        let path = "/v1/payments/\(paymentId)/order"
        let cases: [(String, Int, String)] = [
            (#"{"status":"open","total":"1.00"}"#, 400, "unknown_field"),
            (#"{"status":"shipped"}"#, 400, "order_status_invalid"),
            (#"{}"#, 400, "order_update_empty"),
            (#"{"fulfillments":[{"fulfillmentType":"drone","fulfillmentIdentifier":"a","status":"open"}]}"#, 400,
             "fulfillment_type_invalid"),
            (#"{"fulfillments":[{"fulfillmentType":"shipping","fulfillmentIdentifier":"a","status":"readyForPickup"}]}"#, 400,
             "fulfillment_status_invalid"),
            (#"{"fulfillments":[{"fulfillmentType":"shipping","fulfillmentIdentifier":"a","status":"open","trackingURL":"http://x"}]}"#,
             400, "tracking_url_invalid"),
            (#"{"fulfillments":[{"fulfillmentType":"shipping","fulfillmentIdentifier":"a","status":"open","price":1}]}"#, 400,
             "unknown_field"),
        ]
        for (body, status, code) in cases {
            let r = try w.request("POST", path, headers: api, body: body)
            #expect(r.status == status, "\(body)")
            #expect(r.code == code, "\(body)")
        }
        #expect(try w.request("POST", "/v1/payments/pay_000000000000000000000000/order", headers: api,
                              body: #"{"status":"completed"}"#).code == "order_not_found")
        #expect(try w.request("POST", path, body: #"{"status":"completed"}"#).status == 401)
        let done = try w.request("POST", path, headers: api, body: #"{"status":"completed"}"#)
        #expect(done.status == 200)
        #expect(try done.json()["status"] as? String == "completed")
    }

    @Test func noOrderWithoutIdentityOrOnRefusal() throws {
        let w = try WalletHarness(prefix: "wallet_none", importOrderIdentity: false)
        defer { w.stop() }
        let s = try w.session()
        let plain = try w.payments.pay(s, token: try w.payments.token(for: s), key: "wallet-none-1")
        #expect(plain.status == 200)
        #expect((try plain.json()["authorizationResult"] as? [String: Any])?["orderDetails"] == nil)
        try w.importIdentity(.orderType)
        let declinedSession = try w.session()
        let declined = try w.payments.pay(declinedSession, token: try w.payments.token(for: declinedSession, pan: "4000000000000002"),
                                          key: "wallet-none-2")
        #expect(declined.payment?["status"] as? String == "declined")
        let result = try #require(try declined.json()["authorizationResult"] as? [String: Any])
        #expect(result["status"] as? Int == 1)
        #expect(result["orderDetails"] == nil)
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_orders") == 0)
        // A replay of a paid key answers with the same orderDetails; orderManagementURL is the merchant's.
        try WalletOrders.setOrderManagementURL("https://shop.test/account/orders", merchantId: w.payments.merchantId,
                                               pool: w.payments.pool)
        let paidSession = try w.session()
        let token = try w.payments.token(for: paidSession)
        let paid = try w.payments.pay(paidSession, token: token, key: "wallet-none-3")
        let replay = try w.payments.pay(paidSession, token: token, key: "wallet-none-3")
        let paidDetails = (try paid.json()["authorizationResult"] as? [String: Any])?["orderDetails"] as? [String: Any]
        let replayDetails = (try replay.json()["authorizationResult"] as? [String: Any])?["orderDetails"] as? [String: Any]
        #expect(paidDetails?["orderIdentifier"] as? String != nil)
        #expect(paidDetails?["orderIdentifier"] as? String == replayDetails?["orderIdentifier"] as? String)
        #expect(try w.payments.scalar("""
            SELECT count(*)::bigint AS n FROM wallet_orders
            WHERE document::jsonb ->> 'orderManagementURL' = 'https://shop.test/account/orders'
            """) == 1)
    }

    @Test func identitiesImportListAndRetire() throws {
        let w = try WalletHarness(prefix: "wallet_keys", importOrderIdentity: false)
        defer { w.stop() }
        let info = try w.importIdentity(.orderType)
        #expect(info.kind == .orderType)
        #expect(info.typeIdentifier == WalletSandbox.orderTypeIdentifier)
        // Renewal retires the previous identity for the type identifier.
        let renewed = try w.importIdentity(.orderType)
        let listed = try w.keyStore.list(merchantId: w.payments.merchantId)
        #expect(listed.first { $0.keyId == info.keyId }?.status == "retired")
        #expect(listed.first { $0.keyId == renewed.keyId }?.status == "active")
        #expect(try w.keyStore.walletIdentity(kind: .orderType, typeIdentifier: WalletSandbox.orderTypeIdentifier)?.keyId == renewed.keyId)
        _ = try w.keyStore.retire(keyId: renewed.keyId)
        #expect(try w.keyStore.walletIdentity(kind: .orderType, typeIdentifier: WalletSandbox.orderTypeIdentifier) == nil)
        // Wrong pairings are refused with stable codes.
        let order = w.identity(.orderType), pass = w.identity(.passType)
        func code(_ body: () throws -> Void) -> String? {
            do { try body(); return nil } catch let error as TenderError { return error.code } catch { return "\(error)" }
        }
        #expect(code {
            _ = try w.keyStore.importWalletIdentity(merchantId: w.payments.merchantId, kind: .orderType, typeIdentifier: "order.x.y",
                                                    certificate: Array(order.certificate.pem.utf8),
                                                    privateKey: try pass.key.unsafePKCS8PEM(), wwdr: Array(w.sandbox.wwdr.pem.utf8))
        } == "key_mismatch")
        #expect(code {
            _ = try w.keyStore.importWalletIdentity(merchantId: w.payments.merchantId, kind: .orderType, typeIdentifier: "order.x.y",
                                                    certificate: Array(order.certificate.pem.utf8),
                                                    privateKey: try order.key.unsafePKCS8PEM(), wwdr: Array(w.sandbox.root.pem.utf8))
        } == "wwdr_mismatch")
        #expect(code {
            _ = try w.keyStore.importWalletIdentity(merchantId: w.payments.merchantId, kind: .orderType, typeIdentifier: "bad id",
                                                    certificate: Array(order.certificate.pem.utf8),
                                                    privateKey: try order.key.unsafePKCS8PEM(), wwdr: Array(w.sandbox.wwdr.pem.utf8))
        } == "type_identifier_invalid")
    }
}
