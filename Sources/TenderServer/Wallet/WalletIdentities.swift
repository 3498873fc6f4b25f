import Crypto
import Foundation
import Postgres

/// A Wallet signing identity as loaded for use: whose it is and what it signs for.
public struct WalletIdentity: Sendable {
    public let keyId: String
    public let merchantId: String
    public let kind: MerchantKeyKind
    /// The order or pass type identifier (also the APNs topic).
    public let typeIdentifier: String
    /// Certificate, unsealed key and WWDR certificate.
    public let signing: WalletSigningIdentity
}

extension KeyStore {
    /// Type identifiers as Apple issues them (`order.com.example.shop`, `pass.com.example.card`).
    static func validTypeIdentifier(_ text: String) -> Bool {
        (1...128).contains(text.utf8.count) && text.contains(".") && text.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "." || scalar == "-")
        }
    }

    /// Imports an order-type or pass-type identity (CONTRACT §7): the certificate, its private key
    /// (sealed like every other key) and the WWDR certificate that issued it. A second import for the
    /// same type identifier retires the previous identity (certificate renewal); a type identifier
    /// active for another merchant is `type_identifier_taken`.
    public func importWalletIdentity(merchantId: String, kind: MerchantKeyKind, typeIdentifier: String,
                                     certificate certificateBytes: [UInt8], privateKey keyText: String,
                                     wwdr wwdrBytes: [UInt8]) throws -> StoredKeyInfo {
        guard kind.isWallet else { throw TenderError("kind_invalid", "--kind must be order-type or pass-type with --type-identifier") }
        guard Self.validTypeIdentifier(typeIdentifier) else {
            throw TenderError("type_identifier_invalid", "--type-identifier must look like order.com.example.shop")
        }
        let certificate = try Self.parseCertificate(certificateBytes)
        let wwdr: Certificate
        do { wwdr = try Certificate(derOrPEM: wwdrBytes) } catch {
            throw TenderError("wwdr_invalid", "the WWDR certificate parses neither as DER nor as PEM (\(error.code.rawValue))")
        }
        guard certificate.issuer == wwdr.subject else {
            throw TenderError("wwdr_mismatch", "the certificate was not issued by this WWDR certificate")
        }
        let key: PrivateKey
        do { key = try PrivateKey(pemOrBase64: keyText) } catch {
            throw TenderError("private_key_invalid", "the private key does not load (\(error.code.rawValue))")
        }
        do { _ = try WalletSigningIdentity(certificate: certificate, privateKey: key, wwdr: wwdr) } catch {
            throw TenderError("key_mismatch", "the private key does not belong to the certificate")
        }
        let keyId = Self.newKeyId()
        let sealed = try seal(key, keyId: keyId, merchantId: merchantId, kind: kind)
        try pool.transaction { conn in
            guard try conn.query("SELECT 1 FROM merchants WHERE merchant_id = $1", [merchantId]).first != nil else {
                throw TenderError("merchant_not_found", "no merchant \(merchantId)")
            }
            if let owner = try conn.query("""
                SELECT merchant_id, kind FROM merchant_keys WHERE type_identifier = $1 AND status = 'active' FOR UPDATE
                """, [typeIdentifier]).first {
                let ownerId: String = try owner.decode("merchant_id")
                let ownerKind: String = try owner.decode("kind")
                guard ownerId == merchantId, ownerKind == kind.rawValue else {
                    throw TenderError("type_identifier_taken",
                                      "\(typeIdentifier) is already an active identity of another merchant or kind")
                }
            }
            _ = try conn.execute("""
                UPDATE merchant_keys SET status = 'retired', retired_at = now()
                WHERE type_identifier = $1 AND status = 'active'
                """, [typeIdentifier])
            _ = try conn.execute("""
                INSERT INTO merchant_keys (key_id, merchant_id, kind, certificate_pem, certificate_not_after,
                                           private_key_sealed, type_identifier, wwdr_pem)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                """, [keyId, merchantId, kind.rawValue, certificate.pem, certificate.notAfter, sealed, typeIdentifier, wwdr.pem])
        }
        return try info(keyId: keyId, merchantId: merchantId)
    }

    /// The type identifier of the merchant's active identity of `kind`, if any (newest first).
    static func activeTypeIdentifier(merchantId: String, kind: MerchantKeyKind, on conn: PostgresConnection) throws -> String? {
        try conn.query("""
            SELECT type_identifier FROM merchant_keys
            WHERE merchant_id = $1 AND kind = $2 AND status = 'active' ORDER BY created_at DESC LIMIT 1
            """, [merchantId, kind.rawValue]).first?.decode("type_identifier")
    }

    /// The active identity that signs for `typeIdentifier`, unsealed; nil when none is active.
    public func walletIdentity(kind: MerchantKeyKind, typeIdentifier: String) throws -> WalletIdentity? {
        guard let row = try pool.query("""
            SELECT key_id, merchant_id, certificate_pem, wwdr_pem, private_key_sealed FROM merchant_keys
            WHERE kind = $1 AND type_identifier = $2 AND status = 'active' LIMIT 1
            """, [kind.rawValue, typeIdentifier]).first else { return nil }
        let keyId: String = try row.decode("key_id")
        let merchantId: String = try row.decode("merchant_id")
        let key = try unseal(row, keyId: keyId, merchantId: merchantId, kind: kind)
        do {
            let signing = try WalletSigningIdentity(certificate: try Certificate(pem: try row.decode("certificate_pem")),
                                                    privateKey: key, wwdr: try Certificate(pem: try row.decode("wwdr_pem")))
            return WalletIdentity(keyId: keyId, merchantId: merchantId, kind: kind, typeIdentifier: typeIdentifier, signing: signing)
        } catch let error as CryptoError {
            throw TenderError("key_row_invalid", "stored Wallet identity \(keyId) does not load (\(error.code.rawValue))")
        }
    }
}
