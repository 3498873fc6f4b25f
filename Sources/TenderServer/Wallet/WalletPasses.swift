import Crypto
import Foundation
import HTTPServer
import Observability
import Postgres

/// Passes merchants issue (`wallet_passes`, migrations/0017), CONTRACT §7.
enum WalletPasses {
    struct Row: Sendable {
        let passTypeIdentifier: String
        let serialNumber: String
        let merchantId: String
        let authenticationToken: String
        let pass: [String: JSONValue]
        let images: [String: JSONValue]
        let updatedAt: Date
    }

    static func row(_ row: PostgresRow) throws -> Row {
        let passText: String = try row.decode("pass")
        let imagesText: String = try row.decode("images")
        do {
            return Row(passTypeIdentifier: try row.decode("pass_type_identifier"), serialNumber: try row.decode("serial_number"),
                       merchantId: try row.decode("merchant_id"), authenticationToken: try row.decode("authentication_token"),
                       pass: try JSONCoding.decoder.decode([String: JSONValue].self, from: Data(passText.utf8)),
                       images: try JSONCoding.decoder.decode([String: JSONValue].self, from: Data(imagesText.utf8)),
                       updatedAt: try row.decode("updated_at"))
        } catch let error as PostgresError {
            throw error
        } catch {
            throw TenderError("pass_row_invalid", "stored pass does not decode")
        }
    }

    static func load(passTypeIdentifier: String, serialNumber: String, on conn: PostgresConnection,
                     forUpdate: Bool = false) throws -> Row? {
        let rows = forUpdate
            ? try conn.query("""
                SELECT pass_type_identifier, serial_number, merchant_id, authentication_token, pass, images::text AS images, updated_at
                FROM wallet_passes WHERE pass_type_identifier = $1 AND serial_number = $2 FOR UPDATE
                """, [passTypeIdentifier, serialNumber])
            : try conn.query("""
                SELECT pass_type_identifier, serial_number, merchant_id, authentication_token, pass, images::text AS images, updated_at
                FROM wallet_passes WHERE pass_type_identifier = $1 AND serial_number = $2
                """, [passTypeIdentifier, serialNumber])
        return try rows.first.map(row)
    }

    static func encode(_ value: [String: JSONValue]) throws -> String {
        String(decoding: try JSONCoding.encoder.encode(value), as: UTF8.self)
    }

    /// The team identifier of a pass-type certificate: its subject OU (Apple's), else O.
    static func teamIdentifier(_ certificate: Certificate) -> String {
        let parts = certificate.subject.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for prefix in ["OU=", "O="] {
            if let part = parts.first(where: { $0.hasPrefix(prefix) }) { return String(part.dropFirst(prefix.count)) }
        }
        return ""
    }

    /// The signed `.pkpass`: pass.json (the merchant's fields plus Tender's), the images, SHA-1 manifest, signature.
    static func package(_ pass: Row, identity: WalletIdentity, webServiceURL: String) throws -> [UInt8] {
        var json = pass.pass
        json["formatVersion"] = .number("1")
        json["passTypeIdentifier"] = .string(pass.passTypeIdentifier)
        json["serialNumber"] = .string(pass.serialNumber)
        json["teamIdentifier"] = .string(teamIdentifier(identity.signing.certificate))
        json["webServiceURL"] = .string(webServiceURL)
        json["authenticationToken"] = .string(pass.authenticationToken)
        var files = [ZipArchive.Entry(name: "pass.json", bytes: Array(try JSONCoding.encoder.encode(json)))]
        for (name, value) in pass.images.sorted(by: { $0.key < $1.key }) {
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else { continue }
            files.append(ZipArchive.Entry(name: name, bytes: Array(data)))
        }
        do {
            return try WalletPackage.build(files: files, digest: .sha1, identity: identity.signing, now: pass.updatedAt)
        } catch {
            throw TenderError("wallet_signing_failed", "the pass package could not be signed (\(error.code.rawValue))")
        }
    }
}

/// A validated `POST /v1/wallet/passes` or `PATCH` body.
struct PassRequest {
    var passTypeIdentifier: String?
    var serialNumber: String?
    var pass: [String: JSONValue]?
    var images: [String: JSONValue]?
    var paymentId: String?

    static func invalid(_ field: String, _ code: String, _ message: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: code, title: code == "unknown_field" ? "Unknown field" : "Bad request", detail: message,
                    errors: [.init(field: field, code: code, message: message)])
    }

    /// Parses the body; `allowed` are the top-level keys this endpoint takes.
    static func parse(_ body: [UInt8], allowed: Set<String>) throws(HTTPProblem) -> PassRequest {
        let object = try JSONCoding.decode([String: JSONValue].self, from: body)
        for key in object.keys.sorted() where !allowed.contains(key) { throw invalid(key, "unknown_field", "This field is not accepted.") }
        var request = PassRequest()
        func string(_ key: String) throws(HTTPProblem) -> String? {
            guard let value = object[key] else { return nil }
            guard case .string(let text) = value else { throw invalid(key, "field_type_invalid", "\(key) must be a string.") }
            return text
        }
        func dictionary(_ key: String) throws(HTTPProblem) -> [String: JSONValue]? {
            guard let value = object[key] else { return nil }
            guard case .object(let members) = value else { throw invalid(key, "field_type_invalid", "\(key) must be an object.") }
            return members
        }
        request.passTypeIdentifier = try string("passTypeIdentifier")
        request.serialNumber = try string("serialNumber")
        request.paymentId = try string("paymentId")
        request.pass = try dictionary("pass")
        request.images = try dictionary("images")
        if let serial = request.serialNumber {
            guard (1...64).contains(serial.utf8.count), serial.unicodeScalars.allSatisfy({ $0.isASCII &&
                (CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "_" || $0 == "-") }) else {
                throw invalid("serialNumber", "serial_number_invalid", "serialNumber is 1 to 64 of A-Z a-z 0-9 . _ -")
            }
        }
        return request
    }
}

/// The pass as the merchant API returns it.
struct WalletPassView: Encodable {
    let serialNumber: String
    let passTypeIdentifier: String
    let updatedAt: String

    init(_ row: WalletPasses.Row) {
        serialNumber = row.serialNumber
        passTypeIdentifier = row.passTypeIdentifier
        updatedAt = RFC3339.string(from: row.updatedAt)
    }
}
