import Crypto
import Foundation
import HTTPServer
import Observability
import Postgres

/// Shared pieces of Apple's two Wallet web services (Order web service, PassKit web service).
enum WalletWebService {
    /// The "changed since a tag" list of both web services (`devices/{deviceId}/registrations/{typeId}`):
    /// the identifiers of `kind` registered to the device and changed after the tag, or nil (answered 204).
    static func changedSince(_ request: HTTPRequest, kind: WalletObjectKind, tagParameter: String,
                             pool: PostgresPool) throws -> (identifiers: [String], tag: Int64)? {
        let device = try identifier(request, "deviceId")
        let typeId = try identifier(request, "typeId")
        let since = sinceTag(request, tagParameter)
        let changed = try pool.withConnection {
            try WalletRegistrations.changed(kind: kind, device: device, typeIdentifier: typeId, since: since, on: $0)
        }
        return changed.identifiers.isEmpty ? nil : changed
    }

    /// Largest body of a register or log request (a push token, a few log lines).
    static let bodyBytesMax = 65_536
    /// Log lines accepted per `POST v1/log`, and characters per line logged.
    static let logLinesMax = 50
    static let logLineCharactersMax = 512

    /// The credential after `scheme` (`AppleOrder` / `ApplePass`) in `Authorization`, if any.
    static func credential(_ request: HTTPRequest, scheme: String) -> String? {
        guard let header = request.headers["Authorization"], header.utf8.count <= 512 else { return nil }
        let prefix = scheme + " "
        guard header.hasPrefix(prefix) else { return nil }
        let token = header.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// Constant-time comparison of a presented token with the stored one.
    static func tokenMatches(_ presented: String?, _ stored: String) -> Bool {
        guard let presented else { return false }
        return constantTimeEqual(Array(presented.utf8), Array(stored.utf8))
    }

    /// Apple's web services answer a bad or missing token with a bare 401.
    static let unauthorized = HTTPProblem(status: 401, code: "wallet_unauthorized", title: "Unauthorized",
                                          detail: "The authentication token does not match.")

    static func badRequest(_ code: String, _ detail: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: code, title: "Bad request", detail: detail)
    }

    /// `{"pushToken": "…"}` (Apple's register body); anything else is a 400.
    static func pushToken(_ body: [UInt8]) throws(HTTPProblem) -> String {
        guard body.count <= bodyBytesMax else { throw badRequest("push_token_invalid", "the body is too large") }
        struct Body: Decodable { let pushToken: String }
        let decoded = try JSONCoding.decode(Body.self, from: body)
        guard (1...512).contains(decoded.pushToken.utf8.count), decoded.pushToken.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw badRequest("push_token_invalid", "pushToken must be 1 to 512 printable characters")
        }
        return decoded.pushToken
    }

    /// Device, type and object identifiers as path segments: `[A-Za-z0-9._-]{1,128}` (openapi.yaml), what
    /// Apple's device identifiers, type identifiers and Tender's order ids and serial numbers are made of.
    static func identifier(_ request: HTTPRequest, _ name: String) throws(HTTPProblem) -> String {
        guard let value = request.pathParameters[name], (1...128).contains(value.utf8.count),
              value.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".contains(Character($0))) })
        else {
            throw badRequest("identifier_invalid", "\(name) is not a valid identifier")
        }
        return value
    }

    /// `POST v1/log`: Wallet reports problems it met with Tender's packages; they go to Tender's log.
    static func log(_ request: HTTPRequest, kind: WalletObjectKind, logger: Logger) throws -> HTTPResponse {
        guard request.body.count <= bodyBytesMax else { throw badRequest("log_invalid", "the body is too large") }
        struct Body: Decodable { let logs: [String] }
        let decoded = try JSONCoding.decode(Body.self, from: request.body)
        for line in decoded.logs.prefix(logLinesMax) {
            logger.warning("wallet device log", [("kind", kind.rawValue), ("message", String(line.prefix(logLineCharactersMax)))])
        }
        return HTTPResponse(status: 200)
    }

    /// The changed-since tag of a query (`ordersModifiedSince` / `passesUpdatedSince`): nil when absent;
    /// a tag Tender never issued reads as "everything".
    static func sinceTag(_ request: HTTPRequest, _ name: String) -> Int64? {
        guard let text = request.queryValue(name), !text.isEmpty else { return nil }
        return Int64(text).map { max($0, 0) } ?? nil
    }

    // MARK: HTTP dates (RFC 9110 §5.6.7)

    static func httpDate(_ date: Date) -> String { formatter().string(from: date) }

    static func parseHTTPDate(_ text: String) -> Date? { formatter().date(from: text) }

    private static func formatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }

    /// True when the client's copy (`If-Modified-Since`) is as new as `updatedAt` (whole seconds).
    static func notModified(_ request: HTTPRequest, updatedAt: Date) -> Bool {
        guard let text = request.headers["If-Modified-Since"], let since = parseHTTPDate(text) else { return false }
        return updatedAt.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
    }

    /// A signed package response with `Last-Modified`.
    static func package(_ bytes: [UInt8], contentType: String, updatedAt: Date) -> HTTPResponse {
        HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", contentType), ("Last-Modified", httpDate(updatedAt)),
                                                        ("Cache-Control", "no-store")]), body: bytes)
    }

    static func notModifiedResponse(updatedAt: Date) -> HTTPResponse {
        HTTPResponse(status: 304, headers: HTTPHeaders([("Last-Modified", httpDate(updatedAt))]))
    }

    static let signingUnavailable = HTTPProblem(status: 503, code: "wallet_identity_unavailable", title: "Service unavailable",
                                                detail: "No active signing identity for this type identifier.",
                                                headers: HTTPHeaders([("Retry-After", "60")]))
}
