import Crypto
import Foundation
import HTTPServer
import Observability
import Postgres

extension TenderApp {
    /// `POST /v1/wallet/passes`, `GET`/`PATCH /v1/wallet/passes/{typeId}/{serial}` and Apple's PassKit web
    /// service under `{TENDER_PUBLIC_BASE_URL}/wallet/passes/` (CONTRACT §7).
    func registerWalletPassRoutes(into router: inout Router) {
        let keys = walletKeyStore
        router.add("POST", "/v1/wallet/passes", guarded(authenticated { [self] request, merchant in
            try self.issuePass(request, merchantId: merchant.merchantId, keys: keys)
        }))
        router.add("GET", "/v1/wallet/passes/{typeId}/{serial}", guarded(authenticated { [self] request, merchant in
            let pass = try self.merchantPass(request, merchantId: merchant.merchantId)
            return try self.passPackage(pass, keys: keys)
        }))
        router.add("PATCH", "/v1/wallet/passes/{typeId}/{serial}", guarded(authenticated { [self] request, merchant in
            try self.updatePass(request, merchantId: merchant.merchantId)
        }))
        let base = "/wallet/passes/v1"
        router.add("POST", base + "/devices/{deviceId}/registrations/{typeId}/{serial}", guarded { [self] request in
            try self.registerPassDevice(request, register: true)
        })
        router.add("DELETE", base + "/devices/{deviceId}/registrations/{typeId}/{serial}", guarded { [self] request in
            try self.registerPassDevice(request, register: false)
        })
        router.add("GET", base + "/devices/{deviceId}/registrations/{typeId}", guarded { [self] request in
            guard let changed = try WalletWebService.changedSince(request, kind: .pass, tagParameter: "passesUpdatedSince",
                                                                  pool: pool) else { return HTTPResponse(status: 204) }
            struct Body: Encodable { let serialNumbers: [String]; let lastUpdated: String }
            return .json(Body(serialNumbers: changed.identifiers, lastUpdated: String(changed.tag)))
        })
        router.add("GET", base + "/passes/{typeId}/{serial}", guarded { [self] request in
            let pass = try pool.withConnection { try self.authorizedPass(request, on: $0) }
            if WalletWebService.notModified(request, updatedAt: pass.updatedAt) {
                return WalletWebService.notModifiedResponse(updatedAt: pass.updatedAt)
            }
            return try self.passPackage(pass, keys: keys)
        })
        router.add("POST", base + "/log", guarded { [logger] request in
            try WalletWebService.log(request, kind: .pass, logger: logger)
        })
    }

    static let passNotFound = HTTPProblem(status: 404, code: "pass_not_found", title: "Not found", detail: "No such pass.")

    func passPackage(_ pass: WalletPasses.Row, keys: KeyStore) throws -> HTTPResponse {
        guard let identity = try keys.walletIdentity(kind: .passType, typeIdentifier: pass.passTypeIdentifier) else {
            throw WalletWebService.signingUnavailable
        }
        let bytes = try WalletPasses.package(pass, identity: identity, webServiceURL: configuration.wallet.passesWebServiceURL)
        return WalletWebService.package(bytes, contentType: "application/vnd.apple.pkpass", updatedAt: pass.updatedAt)
    }

    /// The merchant's own pass for the path, or 404.
    func merchantPass(_ request: HTTPRequest, merchantId: String, on conn: PostgresConnection? = nil,
                      forUpdate: Bool = false) throws -> WalletPasses.Row {
        let typeId = try WalletWebService.identifier(request, "typeId")
        let serial = try WalletWebService.identifier(request, "serial")
        let load = { (conn: PostgresConnection) throws -> WalletPasses.Row? in
            try WalletPasses.load(passTypeIdentifier: typeId, serialNumber: serial, on: conn, forUpdate: forUpdate)
        }
        guard let pass = try conn.map(load) ?? pool.withConnection(load), pass.merchantId == merchantId else {
            throw Self.passNotFound
        }
        return pass
    }

    /// The pass for the path after `Authorization: ApplePass <token>` matched; 401 otherwise.
    func authorizedPass(_ request: HTTPRequest, on conn: PostgresConnection) throws -> WalletPasses.Row {
        let typeId = try WalletWebService.identifier(request, "typeId")
        let serial = try WalletWebService.identifier(request, "serial")
        guard let pass = try WalletPasses.load(passTypeIdentifier: typeId, serialNumber: serial, on: conn),
              WalletWebService.tokenMatches(WalletWebService.credential(request, scheme: "ApplePass"), pass.authenticationToken) else {
            throw WalletWebService.unauthorized
        }
        return pass
    }

    /// `POST /v1/wallet/passes`.
    func issuePass(_ request: HTTPRequest, merchantId: String, keys: KeyStore) throws -> HTTPResponse {
        let input = try PassRequest.parse(request.body, allowed: ["passTypeIdentifier", "serialNumber", "pass", "images", "paymentId"])
        guard let typeId = input.passTypeIdentifier else {
            throw PassRequest.invalid("passTypeIdentifier", "field_missing", "passTypeIdentifier is required.")
        }
        guard let pass = input.pass else { throw PassRequest.invalid("pass", "field_missing", "pass is required.") }
        try PassValidation.check(pass: pass)
        let images = try PassValidation.images(input.images ?? [:])
        let serial = input.serialNumber ?? ("ps_" + hexEncoded(SecureRandom.bytes(12)))
        let now = clock.now()
        let row: WalletPasses.Row = try pool.transaction { conn in
            guard try KeyStore.activeTypeIdentifiers(merchantId: merchantId, kind: .passType, on: conn).contains(typeId) else {
                throw PassValidation.problem("passTypeIdentifier", "pass_type_identifier_unknown",
                                             "You have no active pass-type identity for \(typeId).")
            }
            if let paymentId = input.paymentId {
                guard try conn.query("SELECT 1 FROM payments WHERE payment_id = $1 AND merchant_id = $2",
                                     [paymentId, merchantId]).first != nil else {
                    throw PassValidation.problem("paymentId", "payment_not_found", "No such payment.")
                }
            }
            let encodedImages = images.mapValues { JSONValue.string(Data($0).base64EncodedString()) }
            let inserted = try conn.query("""
                INSERT INTO wallet_passes (pass_type_identifier, serial_number, merchant_id, payment_id, authentication_token, pass,
                                           images, created_at, updated_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $8)
                ON CONFLICT (pass_type_identifier, serial_number) DO NOTHING
                RETURNING 1 AS inserted
                """, [typeId, serial, merchantId, input.paymentId, WalletOrders.newAuthenticationToken(),
                      try WalletPasses.encode(pass), try WalletPasses.encode(encodedImages), now]).first != nil
            guard inserted, let row = try WalletPasses.load(passTypeIdentifier: typeId, serialNumber: serial, on: conn) else {
                throw HTTPProblem(status: 409, code: "pass_exists", title: "Conflict", detail: "A pass with this serialNumber exists.")
            }
            return row
        }
        return .json(WalletPassView(row), status: 201)
    }

    /// `PATCH /v1/wallet/passes/{typeId}/{serial}`: top-level pass fields replaced (`null` removes one),
    /// images replaced by name; the result is checked like a new pass, stored, and pushed.
    func updatePass(_ request: HTTPRequest, merchantId: String) throws -> HTTPResponse {
        let input = try PassRequest.parse(request.body, allowed: ["pass", "images"])
        guard input.pass != nil || input.images != nil else {
            throw PassRequest.invalid("", "pass_update_empty", "Give pass, images or both.")
        }
        let now = clock.now()
        let row: WalletPasses.Row = try pool.transaction { conn in
            let current = try merchantPass(request, merchantId: merchantId, on: conn, forUpdate: true)
            var pass = current.pass
            for (key, value) in input.pass ?? [:] {
                if case .null = value { pass.removeValue(forKey: key) } else { pass[key] = value }
            }
            try PassValidation.check(pass: pass)
            var images = current.images
            for (name, value) in input.images ?? [:] { images[name] = value }
            _ = try PassValidation.images(images)
            _ = try conn.execute("""
                UPDATE wallet_passes SET pass = $3, images = $4::jsonb, updated_at = $5, modified_seq = nextval('wallet_modified_seq')
                WHERE pass_type_identifier = $1 AND serial_number = $2
                """, [current.passTypeIdentifier, current.serialNumber, try WalletPasses.encode(pass),
                      try WalletPasses.encode(images), now])
            try WalletPushQueue.enqueue(kind: .pass, merchantId: merchantId, typeIdentifier: current.passTypeIdentifier,
                                        objectIdentifier: current.serialNumber, on: conn, now: now)
            guard let row = try WalletPasses.load(passTypeIdentifier: current.passTypeIdentifier, serialNumber: current.serialNumber,
                                                  on: conn) else { throw Self.passNotFound }
            return row
        }
        return .json(WalletPassView(row))
    }

    /// `POST`/`DELETE v1/devices/{deviceId}/registrations/{typeId}/{serial}` (PassKit web service).
    func registerPassDevice(_ request: HTTPRequest, register: Bool) throws -> HTTPResponse {
        let device = try WalletWebService.identifier(request, "deviceId")
        let pushToken = register ? try WalletWebService.pushToken(request.body) : ""
        return try pool.transaction { conn in
            let pass = try authorizedPass(request, on: conn)
            guard register else {
                _ = try WalletRegistrations.unregister(kind: .pass, device: device, typeIdentifier: pass.passTypeIdentifier,
                                                       objectIdentifier: pass.serialNumber, on: conn)
                return HTTPResponse(status: 200)
            }
            let created = try WalletRegistrations.register(kind: .pass, device: device, typeIdentifier: pass.passTypeIdentifier,
                                                           objectIdentifier: pass.serialNumber,
                                                           pushToken: pushToken, on: conn, now: clock.now())
            return HTTPResponse(status: created ? 201 : 200)
        }
    }
}

extension KeyStore {
    /// Every active type identifier of `kind` the merchant holds.
    static func activeTypeIdentifiers(merchantId: String, kind: MerchantKeyKind, on conn: PostgresConnection) throws -> [String] {
        try conn.query("""
            SELECT type_identifier FROM merchant_keys WHERE merchant_id = $1 AND kind = $2 AND status = 'active'
            """, [merchantId, kind.rawValue]).rows.map { try $0.decode("type_identifier") }
    }
}
