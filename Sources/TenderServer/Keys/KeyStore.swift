import ApplePayToken
import Crypto
import Foundation
import Postgres
import Synchronization

/// What a stored key is for (README.md, Commands `tender keys import --kind`).
public enum MerchantKeyKind: String, Sendable, Codable {
    /// Apple Pay payment-processing key: decrypts tokens, selected by `header.publicKeyHash`.
    case processing
    /// Merchant-identity certificate + key: mutual TLS for merchant validation.
    case identity
    /// Wallet order-type identity: signs `.order` packages, APNs client certificate (CONTRACT §7).
    case orderType = "order-type"
    /// Wallet pass-type identity: signs `.pkpass` packages, APNs client certificate (CONTRACT §7).
    case passType = "pass-type"

    /// True for the Wallet signing identities (they carry a type identifier and a WWDR certificate).
    public var isWallet: Bool { self == .orderType || self == .passType }
}

/// A stored key as listings show it: never any private key material.
public struct StoredKeyInfo: Sendable, Codable, Equatable {
    public let keyId: String
    public let merchantId: String
    public let kind: MerchantKeyKind
    /// base64 SHA-256 of the certificate's SPKI DER (Apple's `publicKeyHash`); processing keys only.
    public let publicKeyHash: String?
    public let certificateSubject: String
    public let certificateNotAfter: Date
    /// `active` or `retired`.
    public let status: String
    public let createdAt: Date
    public let retiredAt: Date?
    /// The order or pass type identifier of a Wallet identity.
    public var typeIdentifier: String? = nil
}

/// The merchant-identity certificate and key for mutual TLS with Apple's gateway.
public struct MerchantIdentityKey: Sendable {
    public let keyId: String
    /// The certificate in PEM.
    public let certificatePEM: String
    /// The private key as PKCS#8 PEM bytes, in a zeroing buffer (hand to `SecretPEM`, never log).
    public let privateKeyPEM: SecretBytes
}

/// The processing keys of one merchant: the active ones (usable) and the hashes of retired ones
/// (so a token for a retired key gets its own code).
public struct MerchantProcessingKeys: Sendable {
    public let active: [MerchantKey]
    /// base64 publicKeyHash of every retired processing key of the merchant.
    public let retiredPublicKeyHashes: Set<String>
}

/// Named limits of the key store.
public enum KeyStoreLimits {
    /// Active processing keys per merchant: rotation needs two or three, never dozens.
    public static let activeProcessingKeysMax = 8
    /// Largest certificate or private-key file accepted, in bytes.
    public static let fileBytesMax = 65_536
}

/// Merchant Apple Pay keys in PostgreSQL (`merchant_keys`). Private keys are stored only sealed with
/// the key-encrypting key (AES-256-GCM, associated data = key id + merchant id + kind), PCI DSS 3.6.1.2.
public final class KeyStore: Sendable {
    public let pool: PostgresPool
    private let masterKeySource: MasterKeySource
    private let masterKeyLoaded: Mutex<SecretBytes?>

    private enum MasterKeySource: Sendable {
        case key(SecretBytes)
        case file(String, onCreate: @Sendable (String) -> Void)
    }

    /// A store using an already loaded key-encrypting key (32 bytes).
    public init(pool: PostgresPool, masterKey: SecretBytes) {
        precondition(masterKey.count == MasterKey.keyBytes, "master key must be 32 bytes")
        self.pool = pool
        masterKeySource = .key(masterKey)
        masterKeyLoaded = Mutex(masterKey)
    }

    /// A store that loads (or creates, calling `onCreate` with the path) `TENDER_MASTER_KEY_FILE` on
    /// first use, so processes that never touch keys never create one.
    public init(pool: PostgresPool, masterKeyFile: String, onCreate: @escaping @Sendable (String) -> Void = { _ in }) {
        self.pool = pool
        masterKeySource = .file(masterKeyFile, onCreate: onCreate)
        masterKeyLoaded = Mutex(nil)
    }

    /// The key-encrypting key; `master_key_permissions` for a group- or world-readable file.
    public func masterKey() throws(TenderError) -> SecretBytes {
        if let key = masterKeyLoaded.withLock({ $0 }) { return key }
        guard case .file(let path, let onCreate) = masterKeySource else { preconditionFailure("key source without key") }
        let (key, created) = try MasterKey.loadOrCreate(path: path)
        if created { onCreate(path) }
        masterKeyLoaded.withLock { $0 = key }
        return key
    }

    // MARK: Import

    /// Imports a certificate and its private key (PEM, DER-in-base64, SEC1, PKCS#8, p12 "Bag Attributes"
    /// exports: whatever `PrivateKey(pemOrBase64:)` accepts). Processing keys must be usable for Apple
    /// Pay decryption; a second import of the same public key is `key_exists`. Importing an identity
    /// key retires the merchant's previous identity key (one is active at a time).
    public func importKey(merchantId: String, certificatePEM: String, privateKey keyText: String,
                          kind: MerchantKeyKind) throws -> StoredKeyInfo {
        try importKey(merchantId: merchantId, certificate: Array(certificatePEM.utf8), privateKey: keyText, kind: kind)
    }

    /// As above with the certificate as Apple's portal hands it out (`.cer`, DER) or as PEM.
    public func importKey(merchantId: String, certificate certificateBytes: [UInt8], privateKey keyText: String,
                          kind: MerchantKeyKind) throws -> StoredKeyInfo {
        guard !kind.isWallet else {
            throw TenderError("type_identifier_required", "Wallet identities are imported with --type-identifier and --wwdr")
        }
        let certificate = try Self.parseCertificate(certificateBytes)
        let key: PrivateKey
        do { key = try PrivateKey(pemOrBase64: keyText) } catch {
            throw TenderError("private_key_invalid", "the private key does not load (\(error.code.rawValue))")
        }
        let publicKeyHash = try Self.checkPair(certificate: certificate, key: key, kind: kind, merchantId: merchantId)
        let keyId = Self.newKeyId()
        let sealed = try seal(key, keyId: keyId, merchantId: merchantId, kind: kind)
        try store(keyId: keyId, merchantId: merchantId, kind: kind, publicKeyHash: publicKeyHash, certificate: certificate, sealed: sealed)
        return try info(keyId: keyId, merchantId: merchantId)
    }

    /// Imports Apple's certificate for a key made earlier by `makeCertificateRequest`: the pending key
    /// is found by the certificate's public key and moved to the merchant's keys unchanged (still
    /// sealed). `key_request_not_found` when no pending request has that public key;
    /// `key_request_mismatch` when it was made for another merchant or kind.
    public func importCertificate(merchantId: String, certificate certificateBytes: [UInt8],
                                  kind: MerchantKeyKind?) throws -> StoredKeyInfo {
        let certificate = try Self.parseCertificate(certificateBytes)
        let spkiHash = Self.spkiHash(certificate.publicKey)
        guard let row = try pool.query("""
            SELECT key_id, merchant_id, kind, private_key_sealed FROM merchant_key_requests
            WHERE spki_sha256 = $1 AND completed_at IS NULL
            """, [spkiHash]).first else {
            throw TenderError("key_request_not_found",
                              "no pending `tender keys csr` key has this certificate's public key"
                                  + "; give --private-key for a key made elsewhere")
        }
        let keyId: String = try row.decode("key_id")
        let requestMerchant: String = try row.decode("merchant_id")
        let kindText: String = try row.decode("kind")
        guard let requestKind = MerchantKeyKind(rawValue: kindText) else { throw TenderError("key_row_invalid",
            "unknown kind \(kindText)") }
        guard requestMerchant == merchantId else {
            throw TenderError("key_request_mismatch",
                "this certificate's key was requested for merchant \(requestMerchant), not \(merchantId)")
        }
        if let kind, kind != requestKind {
            throw TenderError("key_request_mismatch",
                "this certificate's key was requested as a \(requestKind.rawValue) key, not \(kind.rawValue)")
        }
        let key = try unseal(row, keyId: keyId, merchantId: merchantId, kind: requestKind)
        let publicKeyHash = try Self.checkPair(certificate: certificate, key: key, kind: requestKind, merchantId: merchantId)
        let sealed: [UInt8] = try row.decode("private_key_sealed")
        try store(keyId: keyId, merchantId: merchantId, kind: requestKind, publicKeyHash: publicKeyHash,
                  certificate: certificate, sealed: sealed) { conn in
            let done = try conn.execute("""
                UPDATE merchant_key_requests SET completed_at = now() WHERE key_id = $1 AND completed_at IS NULL
                """, [keyId])
            guard done == 1 else { throw TenderError("key_request_not_found", "the pending key \(keyId) was imported concurrently") }
        }
        return try info(keyId: keyId, merchantId: merchantId)
    }

    // MARK: Certificate requests

    /// A key made for a certificate Apple has yet to issue.
    public struct PendingKeyRequest: Sendable, Codable, Equatable {
        /// The id the key keeps once its certificate is imported.
        public let keyId: String
        public let merchantId: String
        public let kind: MerchantKeyKind
        /// base64 SHA-256 of the public key's SPKI (what Apple's token header calls publicKeyHash).
        public let publicKeyHash: String
        public let createdAt: Date
    }

    /// Makes a private key for a certificate Apple will issue (EC P-256 for payment processing, RSA
    /// 2048 for merchant identity: the kinds Apple's portal asks for), seals it and stores it as
    /// pending; returns the request to upload (PKCS#10 DER). The key never leaves Tender.
    public func makeCertificateRequest(merchantId: String, kind: MerchantKeyKind) throws -> (PendingKeyRequest, CertificateRequest) {
        let key: PrivateKey
        do {
            key = kind == .processing ? try PrivateKey.generateP256() : try PrivateKey.generateRSA(bits: 2_048)
        } catch {
            throw TenderError("key_generation_failed", "cannot generate the key (\(error.code.rawValue))")
        }
        let request: CertificateRequest
        do {
            request = try CertificateRequest.make(key: key, commonName: String(merchantId.prefix(64)))
        } catch {
            throw TenderError("key_generation_failed", "cannot build the certificate request (\(error.code.rawValue))")
        }
        let keyId = Self.newKeyId()
        let sealed = try seal(key, keyId: keyId, merchantId: merchantId, kind: kind)
        let spkiHash = Self.spkiHash(key.publicKey)
        do {
            _ = try pool.execute("""
                INSERT INTO merchant_key_requests (key_id, merchant_id, kind, spki_sha256, private_key_sealed)
                VALUES ($1, $2, $3, $4, $5)
                """, [keyId, merchantId, kind.rawValue, spkiHash, sealed])
        } catch let error as PostgresError where error.sqlState == "23503" {
            throw TenderError("merchant_not_found", "no merchant \(merchantId)")
        }
        guard let pending = try pendingRequests(merchantId: merchantId).first(where: { $0.keyId == keyId }) else {
            throw TenderError("key_request_not_found", "request \(keyId) vanished")
        }
        return (pending, request)
    }

    /// Keys still waiting for their certificate (of one merchant, or all).
    public func pendingRequests(merchantId: String? = nil) throws -> [PendingKeyRequest] {
        try pool.query("""
            SELECT key_id, merchant_id, kind, spki_sha256, created_at FROM merchant_key_requests
            WHERE completed_at IS NULL AND ($1 = '' OR merchant_id = $1) ORDER BY merchant_id, created_at, key_id
            """, [merchantId ?? ""]).rows.map { row in
            let kindText: String = try row.decode("kind")
            guard let kind = MerchantKeyKind(rawValue: kindText) else { throw TenderError("key_row_invalid", "unknown kind \(kindText)") }
            return PendingKeyRequest(keyId: try row.decode("key_id"), merchantId: try row.decode("merchant_id"), kind: kind,
                                     publicKeyHash: try row.decode("spki_sha256"), createdAt: try row.decode("created_at"))
        }
    }

    // MARK: Import steps

    static func parseCertificate(_ bytes: [UInt8]) throws(TenderError) -> Certificate {
        do { return try Certificate(derOrPEM: bytes) } catch {
            throw TenderError("certificate_invalid",
                "the certificate parses neither as DER (Apple's .cer) nor as PEM X.509 (\(error.code.rawValue))")
        }
    }

    static func spkiHash(_ key: PublicKey) -> String { Data(Digest.sha256(key.spkiDER)).base64EncodedString() }

    /// Checks that `key` belongs to `certificate`, that the certificate is `merchantId`'s, and that it suits
    /// `kind`; returns the publicKeyHash of a processing key.
    static func checkPair(certificate: Certificate, key: PrivateKey, kind: MerchantKeyKind,
                          merchantId: String) throws(TenderError) -> String? {
        guard certificate.publicKey.matches(key.publicKey) else {
            throw TenderError("key_mismatch", "the private key does not belong to the certificate")
        }
        // Apple's certificates name their merchant in extension 1.2.840.113635.100.6.32 (SHA-256 of the
        // merchant identifier, hex). A certificate issued to another merchant must not be stored under
        // this one: its key would decrypt that merchant's tokens here (and EC_v1 would derive with the
        // other merchant's id).
        let named = ApplePayKeyDerivation.merchantIdHash(from: certificate)
        // A processing certificate's extension feeds the KDF, so it must read as a SHA-256; an identity
        // certificate is only judged when its extension reads as one.
        if named == nil, kind == .processing, certificate.extensionValue(oid: AppleOID.merchantIdentifier) != nil {
            throw TenderError("certificate_invalid", "the merchant identifier extension \(AppleOID.merchantIdentifier) is not a SHA-256")
        }
        if let named, named != Digest.sha256(merchantId) {
            throw TenderError("certificate_merchant_mismatch",
                              "the certificate's merchant identifier (\(AppleOID.merchantIdentifier)) is not \(merchantId)'s")
        }
        guard kind == .processing else { return nil }
        let merchantKey: MerchantKey
        do { merchantKey = try MerchantKey(certificate: certificate, privateKey: key) } catch {
            throw TenderError("private_key_invalid", error.description)
        }
        // EC_v1 needs the merchant-id hash from the certificate for the KDF (Apple step 3).
        // Apple Pay processing keys are P-256 (EC_v1) or RSA (RSA_v1); nothing else can decrypt a token.
        if case .ecOther(let curve) = key.kind {
            throw TenderError("key_unsupported", "processing keys are P-256 or RSA, not \(curve)")
        }
        if key.kind == .ecP256, merchantKey.merchantIdHash == nil {
            throw TenderError("certificate_invalid",
                "the certificate lacks the merchant identifier extension \(AppleOID.merchantIdentifier)")
        }
        return merchantKey.publicKeyHashBase64
    }

    func seal(_ key: PrivateKey, keyId: String, merchantId: String, kind: MerchantKeyKind) throws -> [UInt8] {
        let pkcs8: SecretBytes
        do { pkcs8 = try key.pkcs8DER() } catch { throw TenderError("private_key_invalid", "cannot encode the key as PKCS#8") }
        do {
            return try KeyEncryption.seal(plaintext: pkcs8, keyEncryptingKey: try masterKey(),
                                          associatedData: Self.associatedData(keyId: keyId, merchantId: merchantId, kind: kind))
        } catch let error as TenderError {
            throw error
        } catch {
            throw TenderError("key_seal_failed", "cannot seal the private key")
        }
    }

    private func store(keyId: String, merchantId: String, kind: MerchantKeyKind, publicKeyHash: String?, certificate: Certificate,
                       sealed: [UInt8], also: (PostgresConnection) throws -> Void = { _ in }) throws {
        do {
            try pool.transaction { conn in
                guard try conn.query("SELECT 1 FROM merchants WHERE merchant_id = $1", [merchantId]).first != nil else {
                    throw TenderError("merchant_not_found", "no merchant \(merchantId)")
                }
                switch kind {
                case .processing:
                    let active: Int64 = try conn.query("""
                        SELECT count(*) AS n FROM merchant_keys
                        WHERE merchant_id = $1 AND kind = 'processing' AND status = 'active'
                        """, [merchantId]).first?.decode("n") ?? 0
                    guard active < KeyStoreLimits.activeProcessingKeysMax else {
                        throw TenderError("too_many_keys",
                            "merchant has \(active) active processing keys, limit \(KeyStoreLimits.activeProcessingKeysMax)"
                                + "; retire one first")
                    }
                case .identity:
                    _ = try conn.execute("""
                        UPDATE merchant_keys SET status = 'retired', retired_at = now()
                        WHERE merchant_id = $1 AND kind = 'identity' AND status = 'active'
                        """, [merchantId])
                case .orderType, .passType:
                    throw TenderError("type_identifier_required", "Wallet identities are stored by importWalletIdentity")
                }
                _ = try conn.execute("""
                    INSERT INTO merchant_keys (key_id, merchant_id, kind, public_key_hash, certificate_pem,
                                               certificate_not_after, private_key_sealed)
                    VALUES ($1, $2, $3, $4, $5, $6, $7)
                    """, [keyId, merchantId, kind.rawValue, publicKeyHash, certificate.pem, certificate.notAfter, sealed])
                try also(conn)
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            throw TenderError("key_exists", "a key with publicKeyHash \(publicKeyHash ?? "") is already stored")
        }
    }

    func info(keyId: String, merchantId: String) throws -> StoredKeyInfo {
        guard let info = try list(merchantId: merchantId).first(where: { $0.keyId == keyId }) else {
            throw TenderError("key_not_found", "imported key \(keyId) not found")
        }
        return info
    }

    // MARK: Listing and retirement

    static let listColumns: SQL = """
        SELECT key_id, merchant_id, kind, public_key_hash, certificate_pem, certificate_not_after, status,
               created_at, retired_at, type_identifier
        FROM merchant_keys WHERE ($1 = '' OR merchant_id = $1) ORDER BY merchant_id, created_at, key_id
        """

    /// Every stored key (of one merchant, or all); no private key material, sealed or not.
    public func list(merchantId: String? = nil) throws -> [StoredKeyInfo] {
        try pool.query(Self.listColumns, [merchantId ?? ""]).rows.map { row in
            let pem: String = try row.decode("certificate_pem")
            let subject = (try? Certificate(pem: pem))?.subject ?? ""
            let kindText: String = try row.decode("kind")
            guard let kind = MerchantKeyKind(rawValue: kindText) else {
                throw TenderError("key_row_invalid", "unknown kind \(kindText)")
            }
            return StoredKeyInfo(keyId: try row.decode("key_id"), merchantId: try row.decode("merchant_id"), kind: kind,
                                 publicKeyHash: try row.decodeIfPresent("public_key_hash"), certificateSubject: subject,
                                 certificateNotAfter: try row.decode("certificate_not_after"), status: try row.decode("status"),
                                 createdAt: try row.decode("created_at"), retiredAt: try row.decodeIfPresent("retired_at"),
                                 typeIdentifier: try row.decodeIfPresent("type_identifier"))
        }
    }

    /// Retires the processing key with `publicKeyHash` (base64); it will never decrypt again.
    /// Unknown hash: `key_not_found`; already retired: `key_already_retired`.
    public func retire(publicKeyHash: String) throws -> StoredKeyInfo {
        try retire(where: "public_key_hash", publicKeyHash)
    }

    /// Retires a key by id (how identity keys, which have no publicKeyHash, are retired).
    public func retire(keyId: String) throws -> StoredKeyInfo {
        try retire(where: "key_id", keyId)
    }

    private func retire(where column: String, _ value: String) throws -> StoredKeyInfo {
        let row = try pool.transaction { conn -> PostgresRow? in
            let found = column == "key_id"
                ? try conn.query("SELECT key_id, status FROM merchant_keys WHERE key_id = $1 FOR UPDATE", [value]).first
                : try conn.query("SELECT key_id, status FROM merchant_keys WHERE public_key_hash = $1 FOR UPDATE", [value]).first
            guard let found else { return nil }
            let status: String = try found.decode("status")
            guard status == "active" else {
                throw TenderError("key_already_retired", "key \(try found.decode("key_id") as String) is already retired")
            }
            _ = try conn.execute("UPDATE merchant_keys SET status = 'retired', retired_at = now() WHERE key_id = $1",
                                 [try found.decode("key_id") as String])
            return found
        }
        guard let row else { throw TenderError("key_not_found",
            "no stored key with that \(column == "key_id" ? "key id" : "publicKeyHash")") }
        let keyId: String = try row.decode("key_id")
        guard let info = try list().first(where: { $0.keyId == keyId }) else {
            throw TenderError("key_not_found", "key \(keyId) vanished")
        }
        return info
    }

    // MARK: Loading for use

    /// The merchant's active processing keys, unsealed, plus the hashes of its retired ones.
    public func processingKeys(merchantId: String) throws -> MerchantProcessingKeys {
        let rows = try pool.query("""
            SELECT key_id, public_key_hash, status, certificate_pem,
                   CASE WHEN status = 'active' THEN private_key_sealed END AS private_key_sealed
            FROM merchant_keys WHERE merchant_id = $1 AND kind = 'processing' ORDER BY created_at DESC
            """, [merchantId])
        var active: [MerchantKey] = []
        var retired: Set<String> = []
        for row in rows.rows {
            let hash: String = try row.decode("public_key_hash")
            let status: String = try row.decode("status")
            guard status == "active" else { retired.insert(hash); continue }
            let keyId: String = try row.decode("key_id")
            let certificate: Certificate
            do { certificate = try Certificate(pem: try row.decode("certificate_pem")) } catch {
                throw TenderError("key_row_invalid", "stored certificate of \(keyId) does not parse")
            }
            let key = try unseal(row, keyId: keyId, merchantId: merchantId, kind: .processing)
            do { active.append(try MerchantKey(certificate: certificate, privateKey: key)) } catch {
                throw TenderError("key_row_invalid", "stored key \(keyId) does not match its certificate")
            }
        }
        return MerchantProcessingKeys(active: active, retiredPublicKeyHashes: retired)
    }

    /// The merchant's active processing keys (what `TokenService` decrypts with).
    public func activeProcessingKeys(merchantId: String) throws -> [MerchantKey] {
        try processingKeys(merchantId: merchantId).active
    }

    /// The merchant's active identity certificate and key for mutual TLS, or nil when none is stored.
    public func activeIdentity(merchantId: String) throws -> MerchantIdentityKey? {
        guard let row = try pool.query("""
            SELECT key_id, certificate_pem, private_key_sealed FROM merchant_keys
            WHERE merchant_id = $1 AND kind = 'identity' AND status = 'active' ORDER BY created_at DESC LIMIT 1
            """, [merchantId]).first else { return nil }
        let keyId: String = try row.decode("key_id")
        let key = try unseal(row, keyId: keyId, merchantId: merchantId, kind: .identity)
        let pem: SecretBytes
        do { pem = Self.pemBytes(label: "PRIVATE KEY", der: try key.pkcs8DER()) } catch {
            throw TenderError("key_row_invalid", "stored key \(keyId) cannot be encoded")
        }
        return MerchantIdentityKey(keyId: keyId, certificatePEM: try row.decode("certificate_pem"), privateKeyPEM: pem)
    }

    func unseal(_ row: PostgresRow, keyId: String, merchantId: String, kind: MerchantKeyKind) throws -> PrivateKey {
        let sealed: [UInt8] = try row.decode("private_key_sealed")
        let der: SecretBytes
        do {
            der = try KeyEncryption.open(sealed: sealed, keyEncryptingKey: try masterKey(),
                                         associatedData: Self.associatedData(keyId: keyId, merchantId: merchantId, kind: kind))
        } catch let error as TenderError {
            throw error
        } catch {
            // Wrong master key, or a sealed blob moved to another row: both refuse (AAD binds the row).
            throw TenderError("key_unseal_failed", "stored key \(keyId) does not open with this master key")
        }
        do {
            return try der.withUnsafeBytes { raw throws(CryptoError) in try PrivateKey(der: Array(raw)) }
        } catch {
            throw TenderError("key_row_invalid", "stored key \(keyId) does not parse")
        }
    }

    // MARK: Helpers

    /// Binds a sealed key to its row, so a blob copied to another key or merchant does not open.
    static func associatedData(keyId: String, merchantId: String, kind: MerchantKeyKind) -> [UInt8] {
        Array("tender.merchant_keys.v1\u{0}\(keyId)\u{0}\(merchantId)\u{0}\(kind.rawValue)".utf8)
    }

    static func newKeyId() -> String { "mk_" + hexEncoded(SecureRandom.bytes(12)) }

    /// PEM text built directly into a zeroing buffer (a Swift String could not be wiped).
    static func pemBytes(label: String, der: SecretBytes) -> SecretBytes {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        let header = Array("-----BEGIN \(label)-----\n".utf8)
        let footer = Array("-----END \(label)-----\n".utf8)
        let encodedCount = (der.count + 2) / 3 * 4
        let total = header.count + encodedCount + (encodedCount + 63) / 64 + footer.count
        return SecretBytes(count: total) { out in
            var o = 0
            func put(_ b: UInt8) { out[o] = b; o += 1 }
            for b in header { put(b) }
            der.withUnsafeBytes { src in
                var line = 0
                var i = 0
                while i < src.count {
                    let b0 = src[i], b1 = i + 1 < src.count ? src[i + 1] : 0, b2 = i + 2 < src.count ? src[i + 2] : 0
                    let chars = [alphabet[Int(b0 >> 2)], alphabet[Int((b0 & 3) << 4 | b1 >> 4)],
                                 i + 1 < src.count ? alphabet[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="),
                                 i + 2 < src.count ? alphabet[Int(b2 & 63)] : UInt8(ascii: "=")]
                    for c in chars {
                        put(c)
                        line += 1
                        if line == 64 { put(0x0a); line = 0 }
                    }
                    i += 3
                }
                if line > 0 { put(0x0a) }
            }
            for b in footer { put(b) }
            precondition(o == total, "PEM length miscomputed")
        }
    }
}
