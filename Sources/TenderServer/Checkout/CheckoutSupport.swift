import Crypto
import Foundation
import HTTPServer
import Money
import Observability
import PaymentRequest
import Payments
import Synchronization

/// Identifiers and secrets of checkout sessions (openapi.yaml).
///
/// A session id is `cs_` + 24 lowercase alphanumerics; its client secret is
/// `<session id>_secret_<64 hex>`, the hex being HMAC-SHA256 of the session id under
/// `ClientSecretKey` (derived from the master key). Only SHA-256 of the whole client secret is stored,
/// and an idempotent replay of the creation re-derives it: no row a database reader sees holds it.
public enum CheckoutIdentifiers {
    /// Characters after `cs_` in a session id.
    public static let sessionIdRandomLength = PrefixedIdentifier.checkoutSession.randomCharacters
    /// Random bytes behind `applicationData` (the token binding, reference §1.6).
    public static let applicationDataBytes = 32

    /// A fresh session id (`PrefixedIdentifier.checkoutSession`).
    public static func newSessionId() -> String {
        PrefixedIdentifier.checkoutSession.mint(randomBytes: SecureRandom.bytes)
    }

    /// True for `cs_` + 24 lowercase alphanumerics, the only ids that can exist (schema CHECK).
    public static func isSessionId(_ text: String) -> Bool { PrefixedIdentifier.checkoutSession.isValid(text) }

    /// The client secret of `sessionId` under `key` (a PRF of the unguessable session id: as
    /// unpredictable as random bytes to anyone without the key, and re-derivable by every node).
    public static func clientSecret(sessionId: String, key: ClientSecretKey) throws -> String {
        "\(sessionId)_secret_\(hexEncoded(try key.mac(Array(sessionId.utf8))))"
    }

    /// The session id a presented client secret names, or nil when it is not in the exact format.
    public static func sessionId(ofClientSecret text: String) -> String? {
        let utf8 = Array(text.utf8)
        let idLength = 3 + sessionIdRandomLength
        guard utf8.count == idLength + 8 + 64 else { return nil }
        let id = String(decoding: utf8[0..<idLength], as: UTF8.self)
        guard isSessionId(id), String(decoding: utf8[idLength..<idLength + 8], as: UTF8.self) == "_secret_" else {
            return nil
        }
        guard utf8[(idLength + 8)...].allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            return nil
        }
        return id
    }

    /// Fresh `applicationData`: padded Base64 of random bytes, and SHA-256 hex of those decoded bytes,
    /// which a token's `header.applicationData` must later equal (rule 20).
    public static func newApplicationData() -> (base64: String, sha256Hex: String) {
        let bytes = SecureRandom.bytes(applicationDataBytes)
        return (Data(bytes).base64EncodedString(), hexEncoded(Digest.sha256(bytes)))
    }
}

/// Decimal percentages at the JSON edge: `"10"`, `"12.5"`, `"8.25"` → basis points (1 bp = 0.01 %).
enum PercentText {
    /// Parses `(0|[1-9][0-9]*)(\.[0-9]{1,2})?` into basis points; nil for anything else or above 100 %.
    static func basisPoints(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 3,
              whole.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              !(whole.count > 1 && whole.hasPrefix("0")), let wholeValue = Int64(whole) else { return nil }
        var fractionValue: Int64 = 0
        if parts.count == 2 {
            let fraction = parts[1]
            guard (1...2).contains(fraction.count), fraction.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int64(fraction) else { return nil }
            fractionValue = fraction.count == 1 ? value * 10 : value
        }
        let basisPoints = wholeValue * 100 + fractionValue
        return basisPoints <= Percent.basisPointsMax ? basisPoints : nil
    }

    /// Basis points as the shortest decimal percent: 1000 → `"10"`, 1250 → `"12.5"`, 825 → `"8.25"`.
    static func format(_ basisPoints: Int64) -> String {
        let whole = basisPoints / 100
        let fraction = basisPoints % 100
        if fraction == 0 { return String(whole) }
        if fraction % 10 == 0 { return "\(whole).\(fraction / 10)" }
        return "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}

/// Maps the pure core's errors to problems.
enum CheckoutProblems {
    /// Codes that mean "this JSON is not a well-formed object of Tender's shape": a 400, not a rule (openapi.yaml).
    static let shapeCodes: Set<String> = ["unknown_field", "field_missing", "field_type_invalid", "json_malformed"]

    /// A decoding failure of Tender's own request object: 400 with every issue as a field error.
    static func badRequest(_ error: PaymentRequestError) -> HTTPProblem {
        HTTPProblem(status: 400, code: error.code == "json_malformed" ? "malformed_json" : error.code,
                    title: "Invalid request", detail: "The request body does not have the expected fields.",
                    errors: fieldErrors(error))
    }

    /// Rule violations of a well-formed request: 422 naming every issue; when a feature needs a newer
    /// Apple Pay JS version, `requiredApiVersion` names the lowest one that clears them all.
    static func unprocessable(_ error: PaymentRequestError) -> HTTPProblem {
        var extra: [String: JSONValue] = [:]
        if let version = error.requiredAPIVersion { extra["requiredApiVersion"] = .number(String(version)) }
        return HTTPProblem(status: 422, code: error.code, title: "Request not acceptable",
                           detail: "The request breaks one or more Apple Pay request rules.", errors: fieldErrors(error),
                           extra: extra)
    }

    static func fieldErrors(_ error: PaymentRequestError) -> [HTTPProblem.FieldError] {
        error.issues.map {
            let message: String
            if let version = $0.requiredAPIVersion {
                message = "Needs apiVersion \(version) or later (Apple Pay request rule \($0.rule))."
            } else if $0.code == "amount_too_large" || $0.code == "total_too_large" {
                message = "Above 100000000 in major units, the most Apple Pay accepts."
            } else {
                message = $0.rule > 0 ? "Breaks Apple Pay request rule \($0.rule)." : "Invalid value."
            }
            return HTTPProblem.FieldError(field: $0.path, code: $0.code, message: message)
        }
    }

    static let sessionNotFound = HTTPProblem(status: 404, code: "session_not_found", title: "Not found",
                                             detail: "No such checkout session.")
    static let sessionNotOpen = HTTPProblem(status: 409, code: "session_not_open", title: "Session not open",
                                            detail: "This checkout session no longer accepts updates.")
    static let sessionExpired = HTTPProblem(status: 410, code: "session_expired", title: "Session expired",
                                            detail: "This checkout session has expired.")

    /// A 422 with one field error, for Tender's own validation of coupons and tax rates.
    static func invalid(_ code: String, field: String, _ message: String) -> HTTPProblem {
        HTTPProblem(status: 422, code: code, title: "Request not acceptable", detail: message,
                    errors: [HTTPProblem.FieldError(field: field, code: code, message: message)])
    }
}

/// Decodes a Tender request object whose `init(from:)` throws `PaymentRequestError`s: shape errors
/// become a 400 problem (`unknown_field`, `field_missing`, …); JSON syntax and depth stay `JSONCoding`'s.
struct StrictBody<Value: Decodable>: Decodable {
    let value: Value

    init(from decoder: any Decoder) throws {
        do {
            value = try Value(from: decoder)
        } catch let problem as HTTPProblem {
            throw problem
        } catch {
            throw CheckoutProblems.badRequest(PaymentRequestError(decoding: error))
        }
    }

    /// The decoded body or a 400 problem.
    static func decode(_ body: [UInt8]) throws(HTTPProblem) -> Value {
        try JSONCoding.decode(StrictBody<Value>.self, from: body).value
    }
}

/// The clock of the shell, as the pure core's `Timestamp`, in whole seconds so `expiresAt` reads
/// `2026-01-31T09:30:00Z` and coupon expiry (Unix seconds) compares like for like.
enum Clock {
    static func now() -> Timestamp {
        Timestamp(unixSeconds: Int64(Date().timeIntervalSince1970.rounded(.down)))
    }
}

extension Merchant {
    /// The pricing core's view of this merchant (its Apple Pay defaults).
    func profile() throws -> MerchantProfile {
        do {
            return MerchantProfile(
                merchantIdentifier: merchantId, displayName: displayName,
                supportedNetworks: supportedNetworks.map(ApplePayNetwork.init(rawValue:)),
                merchantCapabilities: merchantCapabilities.map(ApplePayMerchantCapability.init(rawValue:)),
                countryCode: try Country(code: countryCode),
                // A code Money does not know can never be charged, so it is simply not offered.
                currencies: currencies.compactMap { try? Currency(code: $0) },
                domains: domains)
        } catch {
            throw TenderError("merchant_profile_invalid", "merchant \(merchantId) has an unknown country")
        }
    }
}

/// The key of checkout client secrets: HMAC-SHA256 of its own label under the master key (key
/// separation from the history-token and key-sealing uses), loaded on first use.
public final class ClientSecretKey: Sendable {
    static let label = "tender.checkout.client-secret.v1"

    private enum Source: Sendable {
        case file(String, Logger)
        case master(SecretBytes)
    }

    private let source: Source
    private let derived = Mutex<[UInt8]?>(nil)

    /// Reads (or creates) the master key file on first use.
    public init(masterKeyFile: String, logger: Logger) { source = .file(masterKeyFile, logger) }

    /// Derives from a master key held in memory (tests, tools).
    public init(masterKey: SecretBytes) { source = .master(masterKey) }

    /// HMAC-SHA256 of `message` under the derived key.
    func mac(_ message: [UInt8]) throws -> [UInt8] {
        Digest.hmacSHA256(key: try key(), message: message)
    }

    private func key() throws -> [UInt8] {
        if let key = derived.withLock({ $0 }) { return key }
        let master: SecretBytes
        switch source {
        case .master(let key):
            master = key
        case .file(let path, let logger):
            let (loaded, created) = try MasterKey.loadOrCreate(path: path)
            if created { logger.warning("master key created", [("path", path)]) }
            master = loaded
        }
        let key = Digest.hmacSHA256(key: master.unsafeRevealedCopy(), message: Array(Self.label.utf8))
        return derived.withLock { stored in
            if let stored { return stored }
            stored = key
            return key
        }
    }
}
