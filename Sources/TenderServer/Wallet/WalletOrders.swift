import Crypto
import Foundation
import HTTPServer
import Observability
import Payments
import PaymentRequest
import Postgres

/// Wallet orders in PostgreSQL (`wallet_orders`, migrations/0017): created in the transaction that
/// records a succeeded payment, changed by merchant updates and refunds, each change owing a push.
enum WalletOrders {
    /// One stored order.
    struct Row: Sendable {
        let orderTypeIdentifier: String
        let orderIdentifier: String
        let merchantId: String
        let paymentId: String
        let authenticationToken: String
        let document: OrderDocument
        let modifiedSeq: Int64
        let updatedAt: Date

        var details: WalletOrderDetails {
            WalletOrderDetails(orderTypeIdentifier: orderTypeIdentifier, orderIdentifier: orderIdentifier,
                               webServiceURL: document.webServiceURL, authenticationToken: authenticationToken)
        }
    }

    static func row(_ row: PostgresRow) throws -> Row {
        let text: String = try row.decode("document")
        let document: OrderDocument
        do { document = try JSONCoding.decoder.decode(OrderDocument.self, from: Data(text.utf8)) } catch {
            throw TenderError("order_row_invalid", "stored order.json does not decode")
        }
        return Row(orderTypeIdentifier: try row.decode("order_type_identifier"), orderIdentifier: try row.decode("order_identifier"),
                   merchantId: try row.decode("merchant_id"), paymentId: try row.decode("payment_id"),
                   authenticationToken: try row.decode("authentication_token"), document: document,
                   modifiedSeq: try row.decode("modified_seq"), updatedAt: try row.decode("updated_at"))
    }

    /// A fresh bearer secret for Wallet's `Authorization: AppleOrder` (Apple: at least 16 characters).
    static func newAuthenticationToken() -> String { hexEncoded(SecureRandom.bytes(24)) }

    /// The order of `paymentId`'s details for `authorizationResult.orderDetails`, or nil when none.
    static func details(forPayment paymentId: String, on conn: PostgresConnection) throws -> WalletOrderDetails? {
        try conn.query("""
            SELECT order_type_identifier, order_identifier, merchant_id, payment_id, authentication_token, document,
                   modified_seq, updated_at
            FROM wallet_orders WHERE payment_id = $1
            """, [paymentId]).first.map(row)?.details
    }

    /// Creates the order of a succeeded payment when its merchant has an active order-type identity;
    /// does nothing otherwise or when the order exists. Runs inside the payment's transaction. Returns the
    /// payment's order (made now, or found), nil when it has none.
    @discardableResult
    static func createForPayment(paymentId: String, sessionId: String, amountMinor: Int64, merchantId: String,
                                 configuration: WalletConfiguration, on conn: PostgresConnection,
                                 now: Date) throws -> WalletOrderDetails? {
        guard let typeIdentifier = try KeyStore.activeTypeIdentifier(merchantId: merchantId, kind: .orderType, on: conn) else {
            return nil
        }
        if let existing = try details(forPayment: paymentId, on: conn) { return existing }
        guard let merchant = try MerchantStore.merchant(id: merchantId, on: conn),
              let checkoutText: String = try conn.query("""
                SELECT v.checkout::text AS checkout FROM checkout_sessions s
                JOIN checkout_session_versions v ON v.session_id = s.session_id AND v.version = s.version
                WHERE s.session_id = $1
                """, [sessionId]).first?.decode("checkout") else { return nil }
        let checkout: PricedCheckout
        do { checkout = try JSONCoding.decoder.decode(PricedCheckout.self, from: Data(checkoutText.utf8)) } catch {
            throw TenderError("checkout_row_invalid", "stored checkout does not decode")
        }
        let managementURL: String = try conn.query("SELECT order_management_url FROM merchants WHERE merchant_id = $1",
                                                   [merchantId]).first?.decodeIfPresent("order_management_url")
            ?? "https://\(merchant.domains.first ?? "localhost")/"
        let orderIdentifier = PaymentsService.newId(prefix: "ord_")
        let token = newAuthenticationToken()
        let document = OrderDocument.make(orderTypeIdentifier: typeIdentifier, orderIdentifier: orderIdentifier, paymentId: paymentId,
                                          merchant: merchant, orderManagementURL: managementURL,
                                          webServiceURL: configuration.ordersWebServiceURL, authenticationToken: token,
                                          checkout: checkout, amountMinor: amountMinor, now: now)
        _ = try conn.execute("""
            INSERT INTO wallet_orders (order_type_identifier, order_identifier, merchant_id, payment_id, authentication_token,
                                       web_service_url, document, created_at, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
            """, [typeIdentifier, orderIdentifier, merchantId, paymentId, token, configuration.ordersWebServiceURL,
                  try encode(document), now])
        return WalletOrderDetails(orderTypeIdentifier: typeIdentifier, orderIdentifier: orderIdentifier,
                                  webServiceURL: configuration.ordersWebServiceURL, authenticationToken: token)
    }

    static func encode(_ document: OrderDocument) throws -> String {
        String(decoding: try JSONCoding.encoder.encode(document), as: UTF8.self)
    }

    /// The order of `paymentId`, locked for an update.
    static func lock(paymentId: String, on conn: PostgresConnection) throws -> Row? {
        try conn.query("""
            SELECT order_type_identifier, order_identifier, merchant_id, payment_id, authentication_token, document,
                   modified_seq, updated_at
            FROM wallet_orders WHERE payment_id = $1 FOR UPDATE
            """, [paymentId]).first.map(row)
    }

    /// Stores a changed document (new `updatedAt`, a new change tag) and owes every registered device a push.
    static func save(_ order: Row, document: OrderDocument, on conn: PostgresConnection, now: Date) throws -> Row {
        var changed = document
        changed.updatedAt = RFC3339.string(from: now)
        guard let updated = try conn.query("""
            UPDATE wallet_orders SET document = $3, updated_at = $4, modified_seq = nextval('wallet_modified_seq')
            WHERE order_type_identifier = $1 AND order_identifier = $2
            RETURNING order_type_identifier, order_identifier, merchant_id, payment_id, authentication_token, document,
                   modified_seq, updated_at
            """, [order.orderTypeIdentifier, order.orderIdentifier, try encode(changed), now]).first.map(row) else {
            throw TenderError("order_not_found", "order vanished")
        }
        try WalletPushQueue.enqueue(kind: .order, merchantId: order.merchantId, typeIdentifier: order.orderTypeIdentifier,
                                    objectIdentifier: order.orderIdentifier, on: conn, now: now)
        return updated
    }

    /// `tender merchants update --order-management-url`: where order.json sends a shopper to manage an order.
    static func setOrderManagementURL(_ text: String, merchantId: String, pool: PostgresPool) throws {
        guard let url = URL(string: text), url.scheme == "https", url.host != nil, text.utf8.count <= 512 else {
            throw TenderError("order_management_url_invalid", "--order-management-url must be an https URL")
        }
        guard try pool.execute("UPDATE merchants SET order_management_url = $2 WHERE merchant_id = $1", [merchantId, text]) == 1 else {
            throw TenderError("merchant_not_found", "no merchant \(merchantId)")
        }
    }

    /// A refund changed the payment: a full refund marks the order's payment `refunded`.
    static func refundSucceeded(paymentId: String, on conn: PostgresConnection, now: Date) throws {
        guard let order = try lock(paymentId: paymentId, on: conn) else { return }
        let totals = try conn.query("""
            SELECT p.amount_minor, coalesce((SELECT sum(r.amount_minor) FROM refunds r
                                             WHERE r.payment_id = p.payment_id AND r.status = 'succeeded'), 0)::bigint AS refunded
            FROM payments p WHERE p.payment_id = $1
            """, [paymentId]).first
        let amount: Int64 = try totals?.decode("amount_minor") ?? 0
        let refunded: Int64 = try totals?.decode("refunded") ?? 0
        var document = order.document
        document.payment.status = refunded >= amount ? "refunded" : "paid"
        _ = try save(order, document: document, on: conn, now: now)
    }
}

/// The Wallet side of payment outcomes: the order of a succeeded payment, and the order's payment status
/// after a refund, both in the payment's own transaction (a subscriber beside the finance ledger).
struct WalletOrderSubscriber: PaymentEventSubscriber {
    let configuration: WalletConfiguration

    func record(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        _ = try recordReportingOrder(event, merchantId: merchantId, on: conn, now: now)
    }

    func recordReportingOrder(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection,
                              now: Date) throws -> WalletOrderDetails? {
        switch event {
        case .paymentSucceeded(let p):
            return try WalletOrders.createForPayment(paymentId: p.paymentId, sessionId: p.sessionId, amountMinor: p.amountMinor,
                                                     merchantId: merchantId, configuration: configuration, on: conn, now: now)
        case .refundSucceeded(let r):
            // The refund row was marked succeeded earlier in this transaction, so the sum includes it.
            try WalletOrders.refundSucceeded(paymentId: r.paymentId, on: conn, now: now)
            return nil
        case .paymentDeclined, .paymentFailed, .refundFailed:
            return nil
        }
    }
}
