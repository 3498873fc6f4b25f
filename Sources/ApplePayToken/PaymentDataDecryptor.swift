import Crypto
import Foundation

/// A merchant payment-processing certificate and its private key, selected by `publicKeyHash`.
public struct MerchantKey: Sendable {
    /// base64-decoded SHA-256 of the certificate's SPKI DER (what tokens carry as `publicKeyHash`).
    public let publicKeyHash: [UInt8]
    /// The payment-processing certificate.
    public let certificate: Certificate
    /// Its private key.
    public let privateKey: PrivateKey
    /// SHA-256 of the merchant identifier from extension 1.2.840.113635.100.6.32, if present.
    public let merchantIdHash: [UInt8]?

    /// Pairs `certificate` and `privateKey`, refusing a key that does not belong to the certificate.
    public init(certificate: Certificate, privateKey: PrivateKey) throws(TokenError) {
        guard certificate.publicKey.matches(privateKey.publicKey) else {
            throw TokenError(.merchantKeyInvalid, "private key does not match the certificate")
        }
        self.certificate = certificate
        self.privateKey = privateKey
        publicKeyHash = Digest.sha256(certificate.publicKey.spkiDER)
        merchantIdHash = ApplePayKeyDerivation.merchantIdHash(from: certificate)
    }

    /// Loads both from PEM (or bare base64 for the key).
    public init(certificatePEM: String, privateKeyPEM: String) throws(TokenError) {
        do {
            try self.init(certificate: Certificate(pem: certificatePEM), privateKey: PrivateKey(pemOrBase64: privateKeyPEM))
        } catch let error as TokenError {
            throw error
        } catch {
            throw TokenError(.merchantKeyInvalid, "certificate or key does not load")
        }
    }

    /// `publicKeyHash` in base64.
    public var publicKeyHashBase64: String { Data(publicKeyHash).base64EncodedString() }
}

/// EC_v1 key derivation (Payment Token Format Reference, step 3).
public enum ApplePayKeyDerivation {
    /// Reads SHA-256(merchant id) from extension 1.2.840.113635.100.6.32: a UTF8String of 64 hex digits.
    public static func merchantIdHash(from certificate: Certificate) -> [UInt8]? {
        guard let ext = certificate.extensionValue(oid: AppleOID.merchantIdentifier) else { return nil }
        var value = ext.value
        // Strip a DER UTF8String/IA5String/OCTET STRING wrapper when present (0x0C/0x16/0x04, short length).
        if value.count >= 2, [0x0C, 0x16, 0x04].contains(value[0]), Int(value[1]) == value.count - 2 {
            value = Array(value[2...])
        }
        if value.count == 64, let bytes = Hex.decode(String(decoding: value, as: UTF8.self)) { return bytes }
        if value.count == 32 { return value }
        return nil
    }

    /// NIST SP 800-56A §5.8.1 single-step KDF with SHA-256, one round:
    /// SHA-256(00000001 ‖ Z ‖ 0x0D ‖ "id-aes256-GCM" ‖ "Apple" ‖ SHA-256(merchantId)).
    public static func symmetricKey(sharedSecret: SecretBytes, merchantIdHash: [UInt8]) -> SecretBytes {
        let otherInfo: [UInt8] = [0x0D] + Array("id-aes256-GCM".utf8) + Array("Apple".utf8) + merchantIdHash
        var input: [UInt8] = [0, 0, 0, 1] + sharedSecret.unsafeRevealedCopy() + otherInfo
        defer { for i in input.indices { input[i] = 0 } }
        return SecretBytes(Digest.sha256(input))
    }
}

/// Decrypts verified tokens with the merchant's keys. Only it builds `DecryptedPaymentData`.
public final class PaymentDataDecryptor: Sendable {
    /// Keys by publicKeyHash; several may be active during certificate rotation (TN3206).
    public let merchantKeys: [MerchantKey]
    /// Limits (the decrypted payload size).
    public let limits: TokenLimits

    /// Creates a decryptor over `merchantKeys`.
    public init(merchantKeys: [MerchantKey], limits: TokenLimits = TokenLimits()) {
        self.merchantKeys = merchantKeys
        self.limits = limits
    }

    /// Selects the key by publicKeyHash, restores the symmetric key, decrypts and parses the payload.
    public func decrypt(_ token: VerifiedPaymentToken) throws(TokenError) -> DecryptedPaymentData {
        let key = try selectKey(token)
        let symmetricKey = try restoreSymmetricKey(token, key)
        let plaintext: SecretBytes
        do {
            // IV = 16 zero bytes, no AAD (Apple step 4).
            plaintext = try AESGCM.open(key: symmetricKey, nonce: [UInt8](repeating: 0, count: 16), sealed: token.encryptedData)
        } catch {
            throw TokenError(.decryptionFailed, "AES-GCM authentication failed")
        }
        guard plaintext.count <= limits.decryptedPayloadBytesMax else {
            throw TokenError(.payloadMalformed, "payload larger than \(limits.decryptedPayloadBytesMax) bytes")
        }
        return try DecryptedPaymentData(payload: plaintext, depthMax: limits.jsonDepthMax)
    }

    // Rule: publicKeyHash picks the merchant certificate and key (Apple step 2).
    func selectKey(_ token: VerifiedPaymentToken) throws(TokenError) -> MerchantKey {
        guard let key = merchantKeys.first(where: { constantTimeEqual($0.publicKeyHash, token.publicKeyHash) }) else {
            throw TokenError(.unknownMerchantKey, "no merchant key for publicKeyHash \(token.publicKeyHashBase64)")
        }
        return key
    }

    // Rule: EC_v1 ECDH + KDF, RSA_v1 RSA-OAEP(SHA-256, MGF1-SHA-256) unwrap (Apple step 3).
    func restoreSymmetricKey(_ token: VerifiedPaymentToken, _ key: MerchantKey) throws(TokenError) -> SecretBytes {
        switch token.version {
        case .ecV1:
            guard let merchantIdHash = key.merchantIdHash else {
                throw TokenError(.merchantIdMissing, "certificate lacks extension \(AppleOID.merchantIdentifier)")
            }
            guard let ephemeral = token.ephemeralPublicKey else { throw TokenError(.headerMismatch, "ephemeralPublicKey missing") }
            do {
                let shared = try ECDH.sharedSecret(privateKey: key.privateKey, peerSPKI: ephemeral)
                return ApplePayKeyDerivation.symmetricKey(sharedSecret: shared, merchantIdHash: merchantIdHash)
            } catch {
                throw TokenError(.decryptionFailed, "ECDH failed: \(error.code.rawValue)")
            }
        case .rsaV1:
            guard let wrapped = token.wrappedKey else { throw TokenError(.headerMismatch, "wrappedKey missing") }
            let unwrapped: SecretBytes
            do { unwrapped = try RSAOAEP.decrypt(privateKey: key.privateKey, ciphertext: wrapped) } catch {
                throw TokenError(.decryptionFailed, "RSA-OAEP unwrap failed")
            }
            guard unwrapped.count == 16 || unwrapped.count == 32 else {
                throw TokenError(.decryptionFailed, "unwrapped key has \(unwrapped.count) bytes")
            }
            return unwrapped
        }
    }
}
