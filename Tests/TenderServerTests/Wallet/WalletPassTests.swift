import Crypto
import Foundation
import HTTPServer
import Testing
@testable import TenderServer

/// A PNG header of `width`×`height` (enough for the size check; Wallet itself is not involved).
func pngHeader(width: Int, height: Int) -> String {
    var bytes: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13] + Array("IHDR".utf8)
    for value in [width, height] {
        bytes += [UInt8(value >> 24 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }
    bytes += [8, 6, 0, 0, 0, 0, 0, 0, 0]
    return Data(bytes).base64EncodedString()
}

@Suite struct PassValidationTests {
    static let valid: [String: JSONValue] = [
        "organizationName": .string("Shop"), "description": .string("Receipt"), "generic": .object([:]),
        "backgroundColor": .string("rgb(10, 20, 255)"),
        "barcodes": .array([.object(["format": .string("PKBarcodeFormatQR"), "message": .string("x"),
                                     "messageEncoding": .string("iso-8859-1")])]),
    ]

    /// One row per rule, most important first.
    @Test func rulesInOrder() {
        let cases: [(String, [String: JSONValue], String)] = [
            ("reserved key", Self.valid.merging(["serialNumber": .string("1")]) { $1 }, "pass_field_reserved"),
            ("organizationName missing", Self.valid.filter { $0.key != "organizationName" }, "pass_field_missing"),
            ("description empty", Self.valid.merging(["description": .string("")]) { $1 }, "pass_field_missing"),
            ("no style", Self.valid.filter { $0.key != "generic" }, "pass_style_invalid"),
            ("two styles", Self.valid.merging(["coupon": .object([:])]) { $1 }, "pass_style_invalid"),
            ("colour out of range", Self.valid.merging(["labelColor": .string("rgb(0,0,256)")]) { $1 }, "pass_color_invalid"),
            ("colour as hex", Self.valid.merging(["foregroundColor": .string("#ffffff")]) { $1 }, "pass_color_invalid"),
            ("barcode format", Self.valid.merging(["barcode": .object(["format": .string("QR"), "message": .string("x"),
                                                                     "messageEncoding": .string("utf-8")])]) { $1 },
             "pass_barcode_format_invalid"),
            ("barcode message", Self.valid.merging(["barcodes": .array([.object(["format": .string("PKBarcodeFormatAztec")])])]) { $1 },
             "pass_barcode_invalid"),
        ]
        for (name, pass, code) in cases {
            #expect(throws: (any Error).self, "\(name)") { try PassValidation.check(pass: pass) }
            do { try PassValidation.check(pass: pass) } catch { #expect(error.code == code, "\(name)") }
        }
        #expect(throws: Never.self) { try PassValidation.check(pass: Self.valid) }
    }

    @Test func imagesAreNamedSizedPNGs() {
        let icon = pngHeader(width: 29, height: 29)
        let cases: [([String: JSONValue], String)] = [
            ([:], "pass_image_missing"),
            (["logo.png": .string(pngHeader(width: 160, height: 50))], "pass_image_missing"),
            (["icon.png": .string(icon), "banner.png": .string(icon)], "pass_image_name_invalid"),
            (["icon.jpg": .string(icon)], "pass_image_name_invalid"),
            (["icon.png": .string("not base64!")], "pass_image_invalid"),
            (["icon.png": .string(Data("GIF89a........................".utf8).base64EncodedString())], "pass_image_invalid"),
            (["icon.png": .string(pngHeader(width: 39, height: 39))], "pass_image_too_large"),
            (["icon.png": .string(icon), "logo@2x.png": .string(pngHeader(width: 321, height: 100))], "pass_image_too_large"),
        ]
        for (images, code) in cases {
            do { _ = try PassValidation.images(images); Issue.record("accepted \(images.keys)") } catch { #expect(error.code == code) }
        }
        #expect(throws: Never.self) {
            try PassValidation.images(["icon.png": .string(icon), "icon@3x.png": .string(pngHeader(width: 114, height: 114)),
                                       "logo@2x.png": .string(pngHeader(width: 320, height: 100))])
        }
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"), .serialized)
struct WalletPassTests {
    static let base = "/wallet/passes/v1"
    static var body: String {
        """
        {"passTypeIdentifier":"\(WalletSandbox.passTypeIdentifier)","serialNumber":"R-1001",
         "pass":{"organizationName":"Test Shop","description":"Receipt","generic":{"primaryFields":[{"key":"total","value":"10.99"}]},
                 "backgroundColor":"rgb(255,255,255)",
                 "barcodes":[{"format":"PKBarcodeFormatQR","message":"R-1001","messageEncoding":"iso-8859-1"}]},
         "images":{"icon.png":"\(pngHeader(width: 29, height: 29))"}}
        """
    }

    @Test func passFlowEndToEnd() throws {
        let w = try WalletHarness(prefix: "wallet_pass", importOrderIdentity: false)
        defer { w.stop() }
        let api = [("Authorization", "Bearer \(w.payments.apiKey)")]
        // Without a pass-type identity the type identifier is refused.
        #expect(try w.request("POST", "/v1/wallet/passes", headers: api, body: Self.body).code == "pass_type_identifier_unknown")
        try w.importIdentity(.passType)
        #expect(try w.request("POST", "/v1/wallet/passes", headers: api, body: #"{"pass":{},"colour":1}"#).code == "unknown_field")
        let created = try w.request("POST", "/v1/wallet/passes", headers: api, body: Self.body)
        #expect(created.status == 201, "\(created.text)")
        #expect(try created.json()["serialNumber"] as? String == "R-1001")
        #expect(try w.request("POST", "/v1/wallet/passes", headers: api, body: Self.body).code == "pass_exists")
        let typeId = WalletSandbox.passTypeIdentifier
        let merchantPath = "/v1/wallet/passes/\(typeId)/R-1001"
        #expect(try w.request("GET", merchantPath).status == 401)
        #expect(try w.request("GET", "/v1/wallet/passes/\(typeId)/R-404", headers: api).code == "pass_not_found")
        let package = try w.request("GET", merchantPath, headers: api)
        #expect(package.status == 200)
        #expect(package.header("Content-Type") == "application/vnd.apple.pkpass")
        #expect(try opensslVerifies(package: package.body, root: w.sandbox.root))
        let pass = try packageJSON(package.body, "pass.json")
        #expect(pass["formatVersion"] as? Int == 1)
        #expect(pass["passTypeIdentifier"] as? String == typeId)
        #expect(pass["serialNumber"] as? String == "R-1001")
        #expect(pass["teamIdentifier"] as? String == "SANDBOX01")
        #expect(pass["webServiceURL"] as? String == WalletHarness.publicBaseURL + "/wallet/passes/")
        let token = try #require(pass["authenticationToken"] as? String)
        let entries = try ZipArchive.read(package.body).map(\.name)
        #expect(entries == ["icon.png", "pass.json", "manifest.json", "signature"])

        // PassKit web service: latest pass with 401/200/304.
        let auth = [("Authorization", "ApplePass \(token)")]
        let latest = "\(Self.base)/passes/\(typeId)/R-1001"
        #expect(try w.request("GET", latest).status == 401)
        #expect(try w.request("GET", latest, headers: [("Authorization", "ApplePass not-the-token-000000")]).status == 401)
        let fetched = try w.request("GET", latest, headers: auth)
        #expect(fetched.status == 200)
        let lastModified = try #require(fetched.header("Last-Modified"))
        #expect(try w.request("GET", latest, headers: auth + [("If-Modified-Since", lastModified)]).status == 304)

        // Register 201/200/401, list, update pushes, list since tag, unregister, log.
        let registration = "\(Self.base)/devices/lib-1/registrations/\(typeId)/R-1001"
        #expect(try w.request("POST", registration, headers: auth, body: #"{"pushToken":"pass-push"}"#).status == 201)
        #expect(try w.request("POST", registration, headers: auth, body: #"{"pushToken":"pass-push"}"#).status == 200)
        #expect(try w.request("POST", registration, body: #"{"pushToken":"pass-push"}"#).status == 401)
        let list = "\(Self.base)/devices/lib-1/registrations/\(typeId)"
        let listed = try w.request("GET", list)
        #expect(listed.status == 200)
        #expect(try listed.json()["serialNumbers"] as? [String] == ["R-1001"])
        let tag = try #require(try listed.json()["lastUpdated"] as? String)
        #expect(try w.request("GET", list + "?passesUpdatedSince=\(tag)").status == 204)
        #expect(try w.request("PATCH", merchantPath, headers: api, body: #"{"pass":{"labelColor":"red"}}"#).code == "pass_color_invalid")
        #expect(try w.request("PATCH", merchantPath, headers: api, body: #"{"pass":{"serialNumber":"x"}}"#).code == "pass_field_reserved")
        sleep(1)
        let patched = try w.request("PATCH", merchantPath, headers: api, body: #"{"pass":{"description":"Refunded receipt"}}"#)
        #expect(patched.status == 200)
        #expect(try w.payments.scalar("SELECT count(*)::bigint AS n FROM wallet_pushes WHERE push_token = 'pass-push'") == 1)
        #expect(try w.request("GET", list + "?passesUpdatedSince=\(tag)").status == 200)
        let newer = try w.request("GET", latest, headers: auth + [("If-Modified-Since", lastModified)])
        #expect(newer.status == 200)
        #expect(try packageJSON(newer.body, "pass.json")["description"] as? String == "Refunded receipt")
        #expect(try w.request("DELETE", registration).status == 401)
        #expect(try w.request("DELETE", registration, headers: auth).status == 200)
        #expect(try w.request("GET", list).status == 204)
        #expect(try w.request("POST", "\(Self.base)/log", body: #"{"logs":["pass update failed"]}"#).status == 200)
        #expect(try w.request("POST", "\(Self.base)/log", body: #"{"logs":"not a list"}"#).status == 400)
        #expect(try w.request("POST", registration, headers: auth, body: #"{"pushToken":""}"#).code == "push_token_invalid")
        // With the pass-type identity retired nothing can be signed: 503, never an unsigned pass.
        let keys = try w.keyStore.list(merchantId: w.payments.merchantId)
        let active = try #require(keys.first { $0.kind == .passType && $0.status == "active" })
        _ = try w.keyStore.retire(keyId: active.keyId)
        let unsigned = try w.request("GET", latest, headers: auth)
        #expect(unsigned.status == 503)
        #expect(unsigned.code == "wallet_identity_unavailable")
    }
}
