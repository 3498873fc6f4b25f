import Crypto
import Foundation
import HTTPServer
import Observability
import Postgres

extension TenderApp {
    /// Apple's Order web service under `{TENDER_PUBLIC_BASE_URL}/wallet/orders/` (CONTRACT §7) and the
    /// merchant's `POST /v1/payments/{id}/order`.
    func registerWalletOrderRoutes(into router: inout Router) {
        let base = "/wallet/orders/v1"
        let keys = walletKeyStore
        router.add("GET", base + "/orders/{typeId}/{orderId}", guarded { [self] request in
            try self.latestOrder(request, keys: keys)
        })
        router.add("POST", base + "/devices/{deviceId}/registrations/{typeId}/{orderId}", guarded { [self] request in
            try self.registerOrderDevice(request, register: true)
        })
        router.add("DELETE", base + "/devices/{deviceId}/registrations/{typeId}/{orderId}", guarded { [self] request in
            try self.registerOrderDevice(request, register: false)
        })
        router.add("GET", base + "/devices/{deviceId}/registrations/{typeId}", guarded { [self] request in
            guard let changed = try WalletWebService.changedSince(request, kind: .order, tagParameter: "ordersModifiedSince",
                                                                  pool: pool) else { return HTTPResponse(status: 204) }
            struct Body: Encodable { let orderIdentifiers: [String]; let lastModified: String }
            return .json(Body(orderIdentifiers: changed.identifiers, lastModified: String(changed.tag)))
        })
        router.add("POST", base + "/log", guarded { [logger] request in
            try WalletWebService.log(request, kind: .order, logger: logger)
        })
        router.add("POST", "/v1/payments/{id}/order", guarded(authenticated { [self] request, merchant in
            try self.updateOrder(request, merchantId: merchant.merchantId)
        }))
    }

    /// The APNs sender for order and pass updates.
    var walletPushService: WalletPushService {
        WalletPushService(pool: pool, keys: walletKeyStore, configuration: configuration.wallet, logger: logger)
    }

    /// A key store for Wallet identities (the master key is loaded on first use).
    var walletKeyStore: KeyStore {
        KeyStore(pool: pool, masterKeyFile: configuration.masterKeyFile,
                 onCreate: { [logger] in logger.warning("created a new master key", [("path", $0)]) })
    }

    /// The order row for the path, after `Authorization: AppleOrder <token>` matched; 401 otherwise
    /// (an unknown order answers like a wrong token, so identifiers cannot be probed).
    func authorizedOrder(_ request: HTTPRequest, on conn: PostgresConnection, forUpdate: Bool = false) throws -> WalletOrders.Row {
        let typeId = try WalletWebService.identifier(request, "typeId")
        let orderId = try WalletWebService.identifier(request, "orderId")
        let presented = WalletWebService.credential(request, scheme: "AppleOrder")
        guard let order = try conn.query("""
            SELECT order_type_identifier, order_identifier, merchant_id, payment_id, authentication_token, document, modified_seq,
                   updated_at
            FROM wallet_orders WHERE order_type_identifier = $1 AND order_identifier = $2
            """, [typeId, orderId]).first.map(WalletOrders.row),
              WalletWebService.tokenMatches(presented, order.authenticationToken) else {
            throw WalletWebService.unauthorized
        }
        return order
    }

    /// `GET v1/orders/{typeId}/{orderId}`: the signed `.order` package, or 304 for a current copy.
    func latestOrder(_ request: HTTPRequest, keys: KeyStore) throws -> HTTPResponse {
        let order = try pool.withConnection { try authorizedOrder(request, on: $0) }
        if WalletWebService.notModified(request, updatedAt: order.updatedAt) {
            return WalletWebService.notModifiedResponse(updatedAt: order.updatedAt)
        }
        guard let identity = try keys.walletIdentity(kind: .orderType, typeIdentifier: order.orderTypeIdentifier) else {
            throw WalletWebService.signingUnavailable
        }
        let package = try WalletPackages.order(order, identity: identity)
        return WalletWebService.package(package, contentType: "application/vnd.apple.order", updatedAt: order.updatedAt)
    }

    /// `POST`/`DELETE v1/devices/{deviceId}/registrations/{typeId}/{orderId}`.
    func registerOrderDevice(_ request: HTTPRequest, register: Bool) throws -> HTTPResponse {
        let device = try WalletWebService.identifier(request, "deviceId")
        let pushToken = register ? try WalletWebService.pushToken(request.body) : ""
        return try pool.transaction { conn in
            let order = try authorizedOrder(request, on: conn)
            guard register else {
                _ = try WalletRegistrations.unregister(kind: .order, device: device, typeIdentifier: order.orderTypeIdentifier,
                                                       objectIdentifier: order.orderIdentifier, on: conn)
                return HTTPResponse(status: 200)
            }
            let created = try WalletRegistrations.register(kind: .order, device: device, typeIdentifier: order.orderTypeIdentifier,
                                                           objectIdentifier: order.orderIdentifier, pushToken: pushToken,
                                                           on: conn, now: clock.now())
            return HTTPResponse(status: created ? 201 : 200)
        }
    }

    /// `POST /v1/payments/{id}/order`: the merchant changes the order's status and fulfillments.
    func updateOrder(_ request: HTTPRequest, merchantId: String) throws -> HTTPResponse {
        let update = try WalletOrderUpdate.parse(request.body)
        guard let paymentId = request.pathParameters["id"] else { throw WalletOrderUpdate.notFound }
        let now = clock.now()
        let order: WalletOrders.Row = try pool.transaction { conn in
            guard let order = try WalletOrders.lock(paymentId: paymentId, on: conn), order.merchantId == merchantId else {
                throw WalletOrderUpdate.notFound
            }
            var document = order.document
            if let status = update.status { document.status = status }
            if let fulfillments = update.fulfillments { document.fulfillments = fulfillments }
            return try WalletOrders.save(order, document: document, on: conn, now: now)
        }
        return .json(WalletOrderView(order))
    }
}

/// The merchant's view of an order (`POST /v1/payments/{id}/order` response, openapi.yaml `WalletOrder`).
struct WalletOrderView: Encodable {
    let paymentId: String
    let orderTypeIdentifier: String
    let orderIdentifier: String
    let status: WalletOrderStatus
    let fulfillments: [JSONValue]
    let paymentStatus: String
    let updatedAt: String

    init(_ row: WalletOrders.Row) {
        paymentId = row.paymentId
        orderTypeIdentifier = row.orderTypeIdentifier
        orderIdentifier = row.orderIdentifier
        status = row.document.status
        fulfillments = row.document.fulfillments
        paymentStatus = row.document.payment.status
        updatedAt = row.document.updatedAt
    }
}

/// Builds the signed packages from stored rows.
enum WalletPackages {
    /// The `.order` package: order.json and the logo, SHA-256 manifest, signature.
    static func order(_ order: WalletOrders.Row, identity: WalletIdentity) throws -> [UInt8] {
        let json = try JSONCoding.encoder.encode(order.document)
        do {
            return try WalletPackage.build(files: [ZipArchive.Entry(name: "order.json", bytes: Array(json)),
                                                   ZipArchive.Entry(name: OrderDocument.logoName, bytes: WalletImages.placeholderPNG)],
                                           digest: .sha256, identity: identity.signing, now: order.updatedAt)
        } catch {
            throw TenderError("wallet_signing_failed", "the order package could not be signed (\(error.code.rawValue))")
        }
    }
}
