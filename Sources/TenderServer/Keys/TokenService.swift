import ApplePayToken
import Crypto
import Foundation
import Synchronization

/// Verifies and decrypts Apple Pay tokens for a merchant with the merchant's active keys.
///
/// Built once at start (`TenderApp.tokens`). One long-lived `TokenVerifier` is shared by every request,
/// so its verified-chain cache makes the common case one ECDSA verify and one ECDH. Each merchant's
/// unsealed keys are cached for `keyCacheSeconds` (another process may import or retire keys) and
/// dropped at once when this process imports or retires through `invalidateKeys(merchantId:)`.
///
/// Usage (payments): `let result = try app.tokens.verifyAndDecrypt(tokenJSON: bytes, merchantId: m, now: Date())`,
/// then compare `result.token.applicationDataHex`, amount and currency with the session, and use
/// `result.token.transactionIdHex` as the replay key.
public final class TokenService: Sendable {
    /// How long a merchant's loaded keys are reused before the database is asked again.
    public static let keyCacheSeconds: Double = 15
    /// Merchants whose keys are held in memory at once.
    public static let keyCacheMerchantsMax = 1_024

    /// The shared verifier (and chain cache).
    public let verifier: TokenVerifier
    /// Parse limits for incoming tokens.
    public let limits: TokenLimits
    /// Where keys come from.
    public let keyStore: KeyStore
    /// Roots that did not load (reported by `prepare()` and every call), or nil.
    private let setupError: TokenError?
    private let cache = Mutex<[String: CachedKeys]>([:])

    private struct CachedKeys {
        let decryptor: PaymentDataDecryptor
        let retired: Set<String>
        let loadedAt: ContinuousClock.Instant
    }

    /// A service trusting `trustedRoots`, accepting tokens signed at most `tokenAgeMaxSeconds` ago.
    public init(trustedRoots: [Certificate], tokenAgeMaxSeconds: Int, keyStore: KeyStore, limits: TokenLimits = TokenLimits(),
                chainCacheEntriesMax: Int = 64) {
        verifier = TokenVerifier(trustedRoots: trustedRoots, tokenAgeMaxSeconds: Int64(tokenAgeMaxSeconds),
                                 chainCacheEntriesMax: chainCacheEntriesMax)
        self.limits = limits
        self.keyStore = keyStore
        setupError = trustedRoots.isEmpty ? TokenError(.trustedRootInvalid, "no trusted roots") : nil
    }

    /// From configuration: Apple Root CA – G3, or the PEM files of `TENDER_APPLE_ROOTS` instead.
    /// Never throws: a root that does not load is reported by `prepare()` (serve refuses to start)
    /// and by every `verifyAndDecrypt`.
    public convenience init(configuration: TenderConfiguration, keyStore: KeyStore) {
        do {
            let roots = try Self.trustedRoots(files: configuration.appleRootsFiles)
            self.init(trustedRoots: roots, tokenAgeMaxSeconds: configuration.tokenAgeMaxSeconds, keyStore: keyStore)
        } catch {
            self.init(trustedRoots: [], tokenAgeMaxSeconds: configuration.tokenAgeMaxSeconds, keyStore: keyStore)
        }
    }

    /// The roots to trust: every certificate in `files` (PEM), or the embedded, pinned Apple root when nil.
    public static func trustedRoots(files: [String]?) throws(TokenError) -> [Certificate] {
        guard let files else { return [try ApplePayTokenDecryptor.appleRootCertificate()] }
        var roots: [Certificate] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file), data.count <= KeyStoreLimits.fileBytesMax else {
                throw TokenError(.trustedRootInvalid, "cannot read \(file)")
            }
            do { roots += try Certificate.all(pem: String(decoding: data, as: UTF8.self)) } catch {
                throw TokenError(.trustedRootInvalid, "\(file) holds no PEM certificate")
            }
        }
        guard !roots.isEmpty else { throw TokenError(.trustedRootInvalid, "no certificate in TENDER_APPLE_ROOTS") }
        return roots
    }

    /// Checks what can fail before the first token: the roots and the master key (created, and
    /// logged by the store's callback, when missing). `serve` calls it at start.
    public func prepare() throws {
        if let setupError { throw TenderError(setupError.code.rawValue, setupError.detail) }
        _ = try keyStore.masterKey()
    }

    /// Parses within limits, verifies every rule in Apple's order with the shared verifier, then
    /// decrypts with the merchant's active keys. Codes besides the verifier's: `unknown_merchant_key`
    /// (no key of this merchant has the token's publicKeyHash), `merchant_key_retired` (the merchant
    /// retired that key: retired keys never decrypt), `merchant_keys_unavailable` (the key store
    /// could not be read: transient, answer 503).
    public func verifyAndDecrypt(tokenJSON: [UInt8], merchantId: String, now: Date) throws(TokenError) -> DecryptedPaymentToken {
        if let setupError { throw setupError }
        let unverified = try UnverifiedPaymentToken(json: tokenJSON, limits: limits)
        // Signature, chain and freshness come before any key is loaded or used (Apple steps 1–2).
        let token = try verifier.verify(unverified, now: now)
        let keys = try merchantKeys(merchantId)
        do {
            return DecryptedPaymentToken(token: token, paymentData: try keys.decryptor.decrypt(token))
        } catch where error.code == .unknownMerchantKey && keys.retired.contains(token.publicKeyHashBase64) {
            throw TokenError(.merchantKeyRetired, "publicKeyHash \(token.publicKeyHashBase64) belongs to a retired key")
        }
    }

    /// Drops the cached keys of `merchantId` (after an import or retirement in this process).
    public func invalidateKeys(merchantId: String) {
        _ = cache.withLock { $0.removeValue(forKey: merchantId) }
    }

    /// Number of merchants whose keys are cached.
    public var cachedMerchantCount: Int { cache.withLock { $0.count } }

    private func merchantKeys(_ merchantId: String) throws(TokenError) -> CachedKeys {
        let now = ContinuousClock.now
        if let hit = cache.withLock({ $0[merchantId] }), now - hit.loadedAt < .seconds(Self.keyCacheSeconds) {
            return hit
        }
        let loaded: MerchantProcessingKeys
        do { loaded = try keyStore.processingKeys(merchantId: merchantId) } catch {
            throw TokenError(.merchantKeysUnavailable, "the merchant's keys could not be loaded")
        }
        let entry = CachedKeys(decryptor: PaymentDataDecryptor(merchantKeys: loaded.active, limits: limits),
                               retired: loaded.retiredPublicKeyHashes, loadedAt: now)
        cache.withLock { map in
            if map[merchantId] == nil, map.count >= Self.keyCacheMerchantsMax { map.removeAll(keepingCapacity: true) }
            map[merchantId] = entry
        }
        return entry
    }
}

extension KeyStore {
    /// Imports and drops `tokens`' cached keys for the merchant, so the new key is used at once.
    public func importKey(merchantId: String, certificatePEM: String, privateKey: String, kind: MerchantKeyKind,
                          invalidating tokens: TokenService) throws -> StoredKeyInfo {
        defer { tokens.invalidateKeys(merchantId: merchantId) }
        return try importKey(merchantId: merchantId, certificatePEM: certificatePEM, privateKey: privateKey, kind: kind)
    }

    /// Retires and drops `tokens`' cached keys for the merchant, so the key stops decrypting at once.
    public func retire(publicKeyHash: String, invalidating tokens: TokenService) throws -> StoredKeyInfo {
        let info = try retire(publicKeyHash: publicKeyHash)
        tokens.invalidateKeys(merchantId: info.merchantId)
        return info
    }
}
