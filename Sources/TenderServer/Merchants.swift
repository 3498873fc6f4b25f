import Crypto
import Foundation
import Payments
import Postgres

/// A failure of a Tender store or command with a stable code and a detail safe to show an operator.
public struct TenderError: Error, Sendable, CustomStringConvertible {
    public let code: String
    public let detail: String
    public init(_ code: String, _ detail: String) {
        self.code = code
        self.detail = detail
    }
    public var description: String { "\(code): \(detail)" }
}

/// A registered merchant (README.md, Commands `tender merchants add`).
public struct Merchant: Sendable, Codable, Equatable {
    public var merchantId: String
    public var displayName: String
    public var domains: [String]
    public var countryCode: String
    public var currencies: [String]
    public var supportedNetworks: [String]
    public var merchantCapabilities: [String]
    public var financeRestricted: Bool

    /// Networks offered when the merchant names none.
    public static let defaultNetworks = ["amex", "discover", "masterCard", "visa"]
    /// `supports3DS` is required by Apple Pay on the web; EMV is opt-in.
    public static let defaultCapabilities = ["supports3DS"]

    /// Validates operator input; every failure names the flag.
    public static func validated(merchantId: String, displayName: String, domains: [String], countryCode: String,
                                 currencies: [String]) throws(TenderError) -> Merchant {
        guard (1...128).contains(merchantId.utf8.count),
              merchantId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
            throw TenderError("merchant_id_invalid", "--merchant-id: 1-128 characters of A-Z a-z 0-9 . _ -")
        }
        let name = displayName.trimmingCharacters(in: .whitespaces)
        guard (1...64).contains(name.count) else {
            throw TenderError("display_name_invalid", "--display-name: 1-64 characters (Apple's merchant validation limit)")
        }
        guard !domains.isEmpty, domains.count <= 100, domains.allSatisfy(TenderConfiguration.isHostName) else {
            throw TenderError("domain_invalid", "--domain: comma-separated host names")
        }
        guard countryCode.count == 2, countryCode.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
            throw TenderError("country_invalid", "--country: an ISO 3166-1 alpha-2 code such as US")
        }
        guard !currencies.isEmpty, currencies.count <= 50,
              currencies.allSatisfy({ $0.count == 3 && $0.allSatisfy { $0.isASCII && $0.isUppercase } }) else {
            throw TenderError("currency_invalid", "--currencies: comma-separated ISO 4217 codes such as USD,EUR")
        }
        return Merchant(merchantId: merchantId, displayName: name, domains: domains.map { $0.lowercased() },
                        countryCode: countryCode, currencies: currencies, supportedNetworks: defaultNetworks,
                        merchantCapabilities: defaultCapabilities, financeRestricted: false)
    }
}

/// An API key as listings show it: its id (the part between `tk_` and the next `_`), never the secret.
public struct APIKeyInfo: Sendable, Codable, Equatable {
    public let keyId: String
    public let merchantId: String
    public let createdAt: Date
    /// Last successful authentication, to the minute (`APIKeyUsage.lastUsedResolutionSeconds`); nil if never.
    public let lastUsedAt: Date?
    public let revokedAt: Date?
    /// `active` or `revoked`.
    public let status: String
}

/// How API key use is recorded.
public enum APIKeyUsage {
    /// `last_used_at` is rewritten at most this often per key, so authentication stays a read.
    public static let lastUsedResolutionSeconds = 60
    /// Keys one listing returns at most (a merchant needs a handful; rotation leaves a few more).
    public static let listMax = 1_000
}

/// A newly minted API key. The secret is shown once; only its SHA-256 is stored.
public struct IssuedAPIKey: Sendable {
    public let keyId: String
    public let merchantId: String
    public let secret: String
}

/// Merchants and API keys in PostgreSQL.
public struct MerchantStore: Sendable {
    public let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    /// Inserts a merchant; an existing id is `merchant_exists`.
    public func add(_ m: Merchant) throws {
        do {
            _ = try pool.execute("""
                INSERT INTO merchants (merchant_id, display_name, domains, country_code, currencies,
                                       supported_networks, merchant_capabilities, finance_restricted)
                VALUES ($1, $2, string_to_array($3, ','), $4, string_to_array($5, ','),
                        string_to_array($6, ','), string_to_array($7, ','), $8)
                """,
                [m.merchantId, m.displayName, m.domains.joined(separator: ","), m.countryCode,
                 m.currencies.joined(separator: ","), m.supportedNetworks.joined(separator: ","),
                 m.merchantCapabilities.joined(separator: ","), m.financeRestricted])
        } catch let error as PostgresError where error.isUniqueViolation {
            throw TenderError("merchant_exists", "merchant \(m.merchantId) is already registered")
        }
    }

    /// Every merchant, by id (at most `listMax`).
    public func list() throws -> [Merchant] {
        try pool.query("""
            SELECT merchant_id, display_name, array_to_string(domains, ',') AS domains, country_code,
                   array_to_string(currencies, ',') AS currencies,
                   array_to_string(supported_networks, ',') AS supported_networks,
                   array_to_string(merchant_capabilities, ',') AS merchant_capabilities, finance_restricted
            FROM merchants ORDER BY merchant_id LIMIT $1
            """, [Self.listMax]).rows.map(Self.decodeMerchant)
    }

    /// Merchants one listing returns at most.
    public static let listMax = 10_000

    /// Changes a merchant's display name, domains or currencies (nil keeps the value), validated as
    /// `merchants add` validates them; `merchant_not_found` for an unknown id. Checkout sessions
    /// already created keep the payment request they were priced with.
    public func update(merchantId: String, displayName: String?, domains: [String]?, currencies: [String]?) throws -> Merchant {
        try pool.transaction { conn in
            guard var current = try conn.query("""
                SELECT merchant_id, display_name, array_to_string(domains, ',') AS domains, country_code,
                       array_to_string(currencies, ',') AS currencies,
                       array_to_string(supported_networks, ',') AS supported_networks,
                       array_to_string(merchant_capabilities, ',') AS merchant_capabilities, finance_restricted
                FROM merchants WHERE merchant_id = $1 FOR UPDATE
                """, [merchantId]).first.map(Self.decodeMerchant) else {
                throw TenderError("merchant_not_found", "no merchant \(merchantId)")
            }
            let checked = try Merchant.validated(merchantId: merchantId, displayName: displayName ?? current.displayName,
                                                 domains: domains ?? current.domains, countryCode: current.countryCode,
                                                 currencies: currencies ?? current.currencies)
            current.displayName = checked.displayName
            current.domains = checked.domains
            current.currencies = checked.currencies
            _ = try conn.execute("""
                UPDATE merchants SET display_name = $2, domains = string_to_array($3, ','), currencies = string_to_array($4, ',')
                WHERE merchant_id = $1
                """, [merchantId, current.displayName, current.domains.joined(separator: ","), current.currencies.joined(separator: ",")])
            return current
        }
    }

    /// The merchant's API keys, oldest first, without secrets; `merchant_not_found` for an unknown id.
    public func apiKeys(merchantId: String) throws -> [APIKeyInfo] {
        try pool.withConnection { conn in
            guard try conn.query("SELECT 1 AS found FROM merchants WHERE merchant_id = $1", [merchantId]).first != nil else {
                throw TenderError("merchant_not_found", "no merchant \(merchantId)")
            }
            return try conn.query("""
                SELECT key_id, merchant_id, created_at, last_used_at, revoked_at FROM api_keys
                WHERE merchant_id = $1 ORDER BY created_at, key_id LIMIT $2
                """, [merchantId, APIKeyUsage.listMax]).rows.map(Self.decodeAPIKey)
        }
    }

    /// Revokes a key at once: every node reads the key row on each request (no cache), so the next
    /// request after this commits is refused everywhere. `api_key_not_found`, `api_key_already_revoked`.
    public func revokeAPIKey(keyId: String) throws -> APIKeyInfo {
        try pool.transaction { conn in
            guard let row = try conn.query("SELECT revoked_at FROM api_keys WHERE key_id = $1 FOR UPDATE", [keyId]).first else {
                throw TenderError("api_key_not_found", "no API key \(keyId) (give the part between tk_ and the next _)")
            }
            guard try row.decodeIfPresent("revoked_at", as: Date.self) == nil else {
                throw TenderError("api_key_already_revoked", "API key \(keyId) is already revoked")
            }
            guard let updated = try conn.query("""
                UPDATE api_keys SET revoked_at = now() WHERE key_id = $1
                RETURNING key_id, merchant_id, created_at, last_used_at, revoked_at
                """, [keyId]).first else { throw TenderError("api_key_not_found", "no API key \(keyId)") }
            return try Self.decodeAPIKey(updated)
        }
    }

    static func decodeAPIKey(_ row: PostgresRow) throws -> APIKeyInfo {
        let revokedAt: Date? = try row.decodeIfPresent("revoked_at")
        return APIKeyInfo(keyId: try row.decode("key_id"), merchantId: try row.decode("merchant_id"),
                          createdAt: try row.decode("created_at"), lastUsedAt: try row.decodeIfPresent("last_used_at"),
                          revokedAt: revokedAt, status: revokedAt == nil ? "active" : "revoked")
    }

    /// Loads one merchant.
    public func merchant(id: String) throws -> Merchant? {
        try pool.withConnection { try Self.merchant(id: id, on: $0) }
    }

    static let merchantColumns: SQL = """
        SELECT merchant_id, display_name, array_to_string(domains, ',') AS domains, country_code,
               array_to_string(currencies, ',') AS currencies,
               array_to_string(supported_networks, ',') AS supported_networks,
               array_to_string(merchant_capabilities, ',') AS merchant_capabilities, finance_restricted
        FROM merchants WHERE merchant_id = $1
        """

    static func merchant(id: String, on conn: PostgresConnection) throws -> Merchant? {
        guard let row = try conn.query(merchantColumns, [id]).first else { return nil }
        return try decodeMerchant(row)
    }

    static func decodeMerchant(_ row: PostgresRow) throws -> Merchant {
        func list(_ column: String) throws -> [String] {
            let text: String = try row.decode(column)
            guard !text.isEmpty else { return [] }
            // Read on every authenticated request: ASCII lists are split by byte, not by grapheme.
            guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return text.split(separator: ",").map(String.init) }
            return text.utf8.split(separator: UInt8(ascii: ",")).map { String(decoding: $0, as: UTF8.self) }
        }
        return Merchant(merchantId: try row.decode("merchant_id"), displayName: try row.decode("display_name"),
                        domains: try list("domains"), countryCode: try row.decode("country_code"),
                        currencies: try list("currencies"), supportedNetworks: try list("supported_networks"),
                        merchantCapabilities: try list("merchant_capabilities"),
                        financeRestricted: try row.decode("finance_restricted"))
    }

    /// Creates an API key for an existing merchant.
    public func createAPIKey(merchantId: String) throws -> IssuedAPIKey {
        let keyId = APIKeyFormat.newKeyId()
        let secret = hexEncoded(SecureRandom.bytes(32))
        do {
            _ = try pool.execute("INSERT INTO api_keys (key_id, merchant_id, secret_sha256) VALUES ($1, $2, $3)",
                             [keyId, merchantId, Digest.sha256(secret)])
        } catch let error as PostgresError where error.sqlState == "23503" {
            throw TenderError("merchant_not_found", "no merchant \(merchantId)")
        }
        return IssuedAPIKey(keyId: keyId, merchantId: merchantId, secret: APIKeyFormat.render(keyId: keyId, secret: secret))
    }

    /// The merchant a bearer secret belongs to, or nil. The stored hash is compared in constant time.
    public func authenticate(bearer: String) throws -> Merchant? {
        guard let parsed = APIKeyFormat.parse(bearer) else { return nil }
        // One round trip: the key row and its merchant together.
        guard let row = try pool.query(SQL(idempotent: """
            SELECT k.secret_sha256, k.last_used_at IS NULL OR k.last_used_at < now() - make_interval(secs => $2) AS use_stale,
                   m.merchant_id, m.display_name, array_to_string(m.domains, ',') AS domains,
                   m.country_code, array_to_string(m.currencies, ',') AS currencies,
                   array_to_string(m.supported_networks, ',') AS supported_networks,
                   array_to_string(m.merchant_capabilities, ',') AS merchant_capabilities, m.finance_restricted
            FROM api_keys k JOIN merchants m ON m.merchant_id = k.merchant_id
            WHERE k.key_id = $1 AND k.revoked_at IS NULL
            """), [parsed.keyId, APIKeyUsage.lastUsedResolutionSeconds]).first else { return nil }
        let stored: [UInt8] = try row.decode("secret_sha256")
        guard constantTimeEqual(stored, Digest.sha256(parsed.secret)) else { return nil }
        if try row.decode("use_stale", as: Bool.self) {
            // At most once a minute per key; a lost update only makes the shown time older.
            _ = try? pool.execute("UPDATE api_keys SET last_used_at = now() WHERE key_id = $1", [parsed.keyId])
        }
        return try Self.decodeMerchant(row)
    }
}

/// `tk_<16 lowercase alphanumerics>_<64 hex>`: the key id finds the row, the secret proves possession.
public enum APIKeyFormat {
    /// 36^16 ids (`PrefixedIdentifier.apiKeyId`).
    static func newKeyId() -> String { PrefixedIdentifier.apiKeyId.mint(randomBytes: SecureRandom.bytes) }

    static func render(keyId: String, secret: String) -> String { "tk_\(keyId)_\(secret)" }

    /// Splits a presented key; nil for anything not in the exact format.
    public static func parse(_ text: String) -> (keyId: String, secret: String)? {
        var text = text
        return text.withUTF8 { bytes -> (keyId: String, secret: String)? in
            guard bytes.count == 3 + 16 + 1 + 64, bytes[0] == UInt8(ascii: "t"), bytes[1] == UInt8(ascii: "k"),
                  bytes[2] == UInt8(ascii: "_"), bytes[19] == UInt8(ascii: "_") else { return nil }
            for b in bytes[3..<19] where !(isLowerAlpha(b) || isDigit(b)) { return nil }
            for b in bytes[20...] where !(isDigit(b) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f"))) { return nil }
            return (String(decoding: UnsafeBufferPointer(rebasing: bytes[3..<19]), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(rebasing: bytes[20...]), as: UTF8.self))
        }
    }

    private static func isLowerAlpha(_ b: UInt8) -> Bool { b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z") }
    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}
