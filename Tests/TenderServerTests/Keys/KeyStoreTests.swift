import ApplePayToken
import Crypto
import Foundation
import Postgres
import Testing
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// A migrated database with one merchant, a sandbox authority and a key store over a fresh master key.
struct KeyFixture {
    static let merchantId = "merchant.com.example.keys"
    let pool: PostgresPool
    let store: KeyStore
    let masterKey: SecretBytes
    let authority: SandboxAuthority
    let now = Date()

    init(merchants: [String] = [KeyFixture.merchantId]) throws {
        pool = try TestEnvironment.migratedPool("keys")
        for id in merchants {
            try MerchantStore(pool: pool).add(try Merchant.validated(
                merchantId: id, displayName: "Keys", domains: ["shop.example"], countryCode: "US", currencies: ["USD"]))
        }
        masterKey = SecretBytes(SecureRandom.bytes(32))
        store = KeyStore(pool: pool, masterKey: masterKey)
        authority = try SandboxAuthority.create(validFrom: now.addingTimeInterval(-3_600))
    }

    func merchantKey(_ merchantId: String = KeyFixture.merchantId) throws -> MerchantKey {
        try authority.makeMerchantKey(merchantIdentifier: merchantId, validFrom: now.addingTimeInterval(-3_600))
    }

    @discardableResult
    func importKey(_ key: MerchantKey, merchantId: String = KeyFixture.merchantId,
        kind: MerchantKeyKind = .processing) throws -> StoredKeyInfo {
        try store.importKey(merchantId: merchantId, certificatePEM: key.certificate.pem,
                            privateKey: try key.privateKey.unsafePKCS8PEM(), kind: kind)
    }

    func service() -> TokenService {
        TokenService(trustedRoots: [authority.root], tokenAgeMaxSeconds: 300, keyStore: store)
    }

    func token(for key: MerchantKey, amountMinor: Int64 = 1498) throws -> [UInt8] {
        try authority.mintToken(SandboxTokenRequest(amountMinor: amountMinor, currencyCodeNumeric: "840",
                                                    applicationData: Array("session-1".utf8), signingTime: now), for: key)
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct KeyStoreTests {
    @Test func importListAndRetireRoundTrip() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey()
        let info = try f.importKey(key)
        #expect(info.publicKeyHash == Data(Digest.sha256(key.certificate.publicKey.spkiDER)).base64EncodedString())
        #expect(info.kind == .processing && info.status == "active" && info.retiredAt == nil)
        #expect(info.certificateNotAfter.timeIntervalSince(key.certificate.notAfter).magnitude < 1)

        // The listing carries no key material, sealed or not.
        let listed = try f.store.list(merchantId: KeyFixture.merchantId)
        #expect(listed == [info])
        let json = String(decoding: try JSONEncoder().encode(listed), as: UTF8.self)
        let pkcs8 = try key.privateKey.pkcs8DER().unsafeRevealedCopy()
        #expect(!json.contains("PRIVATE KEY"))
        #expect(!json.contains(Data(pkcs8).base64EncodedString()))

        // The stored column is sealed: neither the DER nor its PEM body appears in it.
        let sealed: [UInt8] = try #require(try f.pool.query("SELECT private_key_sealed FROM merchant_keys WHERE key_id = $1",
                                                           [info.keyId]).first).decode("private_key_sealed")
        #expect(sealed.count > pkcs8.count)
        #expect(!Data(sealed).contains(Data(pkcs8)))
        #expect(!Data(sealed).contains(Data(pkcs8.suffix(32))))

        // The unsealed key is the imported one.
        let loaded = try f.store.activeProcessingKeys(merchantId: KeyFixture.merchantId)
        #expect(loaded.count == 1)
        #expect(loaded.first?.privateKey.publicKey.matches(key.privateKey.publicKey) == true)

        let retired = try f.store.retire(publicKeyHash: try #require(info.publicKeyHash))
        #expect(retired.status == "retired" && retired.retiredAt != nil)
        #expect(try f.store.activeProcessingKeys(merchantId: KeyFixture.merchantId).isEmpty)
        #expect(try f.store.processingKeys(merchantId: KeyFixture.merchantId).retiredPublicKeyHashes == [try #require(info.publicKeyHash)])
        #expect(throws: TenderError.self) { try f.store.retire(publicKeyHash: try #require(info.publicKeyHash)) }
        do { _ = try f.store.retire(publicKeyHash: info.publicKeyHash ?? "") } catch let e as TenderError {
            #expect(e.code == "key_already_retired")
        }
        do { _ = try f.store.retire(publicKeyHash: "AAAA") } catch let e as TenderError { #expect(e.code == "key_not_found") }
    }

    @Test func importRefusals() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey(), other = try f.merchantKey()
        try f.importKey(key)
        func code(_ body: () throws -> Void) -> String? {
            do { try body(); return nil } catch let e as TenderError { return e.code } catch { return "\(error)" }
        }
        #expect(code { try f.importKey(key) } == "key_exists")
        #expect(code { _ = try f.store.importKey(merchantId: KeyFixture.merchantId, certificatePEM: key.certificate.pem,
                                                  privateKey: try other.privateKey.unsafePKCS8PEM(), kind: .processing) } == "key_mismatch")
        #expect(code { try f.importKey(try f.merchantKey("merchant.unknown"), merchantId: "merchant.unknown") } == "merchant_not_found")
        #expect(code { _ = try f.store.importKey(merchantId: KeyFixture.merchantId, certificatePEM: "nope",
                                                  privateKey: "nope", kind: .processing) } == "certificate_invalid")
        #expect(code { _ = try f.store.importKey(merchantId: KeyFixture.merchantId, certificatePEM: other.certificate.pem,
                                                  privateKey: "not a key", kind: .processing) } == "private_key_invalid")
        let noMerchantId = try f.authority.makeMerchantKey(merchantIdentifier: "x", validFrom: f.now, omitMerchantIdForTesting: true)
        #expect(code { try f.importKey(noMerchantId) } == "certificate_invalid")
        // The certificate's merchant identifier must be this merchant's, for processing and identity keys alike.
        let foreign = try f.merchantKey("merchant.com.example.someone-else")
        #expect(code { try f.importKey(foreign) } == "certificate_merchant_mismatch")
        #expect(code { try f.importKey(foreign, kind: .identity) } == "certificate_merchant_mismatch")
        // SEC1 ("EC PRIVATE KEY") imports as well as PKCS#8.
        let sec1 = PEM.encode(label: "EC PRIVATE KEY", der: try other.privateKey.traditionalDER().unsafeRevealedCopy())
        #expect(code { _ = try f.store.importKey(merchantId: KeyFixture.merchantId, certificatePEM: other.certificate.pem,
                                                  privateKey: sec1, kind: .processing) } == nil)
    }

    @Test func activeProcessingKeysAreBoundedAtTheLimit() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        for _ in 0..<KeyStoreLimits.activeProcessingKeysMax { try f.importKey(try f.merchantKey()) }
        do { try f.importKey(try f.merchantKey()); Issue.record("limit not enforced") } catch let e as TenderError {
            #expect(e.code == "too_many_keys")
        }
        let first = try #require(try f.store.list(merchantId: KeyFixture.merchantId).first?.publicKeyHash)
        _ = try f.store.retire(publicKeyHash: first)
        try f.importKey(try f.merchantKey())
    }

    @Test func sealedKeysOpenOnlyWithTheirMasterKeyAndRow() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        try f.importKey(try f.merchantKey())
        let wrong = KeyStore(pool: f.pool, masterKey: SecretBytes(SecureRandom.bytes(32)))
        do { _ = try wrong.activeProcessingKeys(merchantId: KeyFixture.merchantId); Issue.record("opened") } catch let e as TenderError {
            #expect(e.code == "key_unseal_failed")
        }
        // A sealed blob copied onto another row does not open there (associated data binds key id and merchant).
        let second = try f.importKey(try f.merchantKey())
        _ = try f.pool.execute("""
            UPDATE merchant_keys SET private_key_sealed = (SELECT private_key_sealed FROM merchant_keys WHERE key_id <> $1 LIMIT 1)
            WHERE key_id = $1
            """, [second.keyId])
        do { _ = try f.store.activeProcessingKeys(merchantId: KeyFixture.merchantId); Issue.record("opened") } catch let e as TenderError {
            #expect(e.code == "key_unseal_failed")
        }
    }

    @Test func identityKeyRoundTripAndReplacement() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        #expect(try f.store.activeIdentity(merchantId: KeyFixture.merchantId) == nil)
        let first = try f.merchantKey(), second = try f.merchantKey()
        let info = try f.importKey(first, kind: .identity)
        #expect(info.kind == .identity && info.publicKeyHash == nil)
        let identity = try #require(try f.store.activeIdentity(merchantId: KeyFixture.merchantId))
        #expect(identity.certificatePEM == first.certificate.pem)
        let pem = String(decoding: identity.privateKeyPEM.unsafeRevealedCopy(), as: UTF8.self)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(try PrivateKey(pemOrBase64: pem).publicKey.matches(first.privateKey.publicKey))
        // Identity keys never decrypt tokens.
        #expect(try f.store.activeProcessingKeys(merchantId: KeyFixture.merchantId).isEmpty)

        try f.importKey(second, kind: .identity)
        let replaced = try #require(try f.store.activeIdentity(merchantId: KeyFixture.merchantId))
        #expect(replaced.certificatePEM == second.certificate.pem)
        #expect(try f.store.list().filter { $0.status == "active" }.count == 1)
        _ = try f.store.retire(keyId: replaced.keyId)
        #expect(try f.store.activeIdentity(merchantId: KeyFixture.merchantId) == nil)
    }

    @Test func worldReadableMasterKeyIsRefused() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let path = NSTemporaryDirectory() + "tender-master-\(UUID().uuidString).key"
        defer { unlink(path) }
        _ = FileManager.default.createFile(atPath: path, contents: Data((hexEncoded(SecureRandom.bytes(32)) + "\n").utf8))
        chmod(path, 0o644)
        let store = KeyStore(pool: f.pool, masterKeyFile: path)
        do { _ = try store.masterKey(); Issue.record("accepted") } catch { #expect(error.code == "master_key_permissions") }
        do { try f.importKeyVia(store); Issue.record("accepted") } catch let e as TenderError {
            #expect(e.code == "master_key_permissions")
        }
        #expect(try f.store.list().isEmpty)
        chmod(path, 0o600)
        try f.importKeyVia(store)
    }

    @Test func missingMasterKeyIsCreatedPrivate() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let path = NSTemporaryDirectory() + "tender-master-\(UUID().uuidString)/master.key"
        defer { unlink(path) }
        let created = Mutex<[String]>([])
        let store = KeyStore(pool: f.pool, masterKeyFile: path, onCreate: { p in created.withLock { $0.append(p) } })
        try f.importKeyVia(store)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(created.withLock { $0 } == [path])
    }
}

import Synchronization

extension KeyFixture {
    func importKeyVia(_ store: KeyStore) throws {
        let key = try merchantKey()
        _ = try store.importKey(merchantId: KeyFixture.merchantId, certificatePEM: key.certificate.pem,
                                privateKey: try key.privateKey.unsafePKCS8PEM(), kind: .processing)
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct TokenServiceTests {
    func code(_ body: () throws -> Void) -> TokenError.Code? {
        do { try body(); return nil } catch let error as TokenError { return error.code } catch {
            Issue.record("not a TokenError: \(error)")
            return nil
        }
    }

    @Test func sandboxTokenDecryptsThroughTheService() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey()
        try f.importKey(key)
        let service = f.service()
        let result = try service.verifyAndDecrypt(tokenJSON: try f.token(for: key, amountMinor: 2_500),
                                                  merchantId: KeyFixture.merchantId, now: f.now)
        #expect(result.paymentData.transactionAmountMinor == 2_500)
        #expect(result.paymentData.currencyCodeNumeric == "840")
        #expect(result.token.applicationDataHex == hexEncoded(Digest.sha256(Array("session-1".utf8))))
        #expect(result.token.publicKeyHash == key.publicKeyHash)
        // One shared verifier: the chain is cached after the first token.
        #expect(service.verifier.cachedChainCount == 1)
        #expect(service.cachedMerchantCount == 1)
    }

    @Test func retiredKeyIsRefusedWithItsOwnCode() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey()
        let info = try f.importKey(key)
        let service = f.service()
        let token = try f.token(for: key)
        _ = try service.verifyAndDecrypt(tokenJSON: token, merchantId: KeyFixture.merchantId, now: f.now)
        _ = try f.store.retire(publicKeyHash: try #require(info.publicKeyHash), invalidating: service)
        #expect(code { _ = try service.verifyAndDecrypt(tokenJSON: token, merchantId: KeyFixture.merchantId,
            now: f.now) } == .merchantKeyRetired)
    }

    @Test func tokenForAnotherMerchantsKeyIsUnknown() throws {
        let f = try KeyFixture(merchants: [KeyFixture.merchantId, "merchant.com.example.other"])
        defer { f.pool.close() }
        let mine = try f.merchantKey(), theirs = try f.merchantKey("merchant.com.example.other")
        try f.importKey(mine)
        try f.importKey(theirs, merchantId: "merchant.com.example.other")
        let service = f.service()
        #expect(code { _ = try service.verifyAndDecrypt(tokenJSON: try f.tokenOrTrap(theirs), merchantId: KeyFixture.merchantId,
                                                         now: f.now) } == .unknownMerchantKey)
        #expect(code { _ = try service.verifyAndDecrypt(tokenJSON: try f.tokenOrTrap(mine), merchantId: "merchant.com.example.none",
                                                         now: f.now) } == .unknownMerchantKey)
    }

    @Test func rotationDecryptsWithEitherActiveKey() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let old = try f.merchantKey(), new = try f.merchantKey()
        try f.importKey(old)
        let service = f.service()
        _ = try service.verifyAndDecrypt(tokenJSON: try f.token(for: old), merchantId: KeyFixture.merchantId, now: f.now)
        _ = try f.store.importKey(merchantId: KeyFixture.merchantId, certificatePEM: new.certificate.pem,
                                  privateKey: try new.privateKey.unsafePKCS8PEM(), kind: .processing, invalidating: service)
        let a = try service.verifyAndDecrypt(tokenJSON: try f.token(for: old, amountMinor: 1), merchantId: KeyFixture.merchantId,
            now: f.now)
        let b = try service.verifyAndDecrypt(tokenJSON: try f.token(for: new, amountMinor: 2), merchantId: KeyFixture.merchantId,
            now: f.now)
        #expect(a.paymentData.transactionAmountMinor == 1 && a.token.publicKeyHash == old.publicKeyHash)
        #expect(b.paymentData.transactionAmountMinor == 2 && b.token.publicKeyHash == new.publicKeyHash)
    }

    @Test func verificationFailsBeforeAnyKeyIsLoaded() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey()
        try f.importKey(key)
        let service = f.service()
        var token = try f.token(for: key)
        // Flip one bit of the decoded `data`: the signed content changes. (Editing the JSON text could
        // land inside an escape such as `\/` and make the JSON itself malformed.)
        var object = try #require(try JSONSerialization.jsonObject(with: Data(token)) as? [String: Any])
        var paymentData = try #require(object["paymentData"] as? [String: Any])
        let encoded = try #require(paymentData["data"] as? String)
        var data = try #require(Data(base64Encoded: encoded))
        data[10] ^= 0x01
        paymentData["data"] = data.base64EncodedString()
        object["paymentData"] = paymentData
        token = Array(try JSONSerialization.data(withJSONObject: object))
        #expect(code { _ = try service.verifyAndDecrypt(tokenJSON: token, merchantId: KeyFixture.merchantId,
            now: f.now) } == .messageDigestMismatch)
        #expect(service.cachedMerchantCount == 0)
        // Stale: the service's tokenAgeMaxSeconds applies.
        #expect(code { _ = try service.verifyAndDecrypt(tokenJSON: try f.tokenOrTrap(key), merchantId: KeyFixture.merchantId,
                                                         now: f.now.addingTimeInterval(301)) } == .tokenExpired)
    }

    @Test func foreignRootsAreNotTrusted() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey()
        try f.importKey(key)
        let apple = TokenService(trustedRoots: [try ApplePayTokenDecryptor.appleRootCertificate()], tokenAgeMaxSeconds: 300,
            keyStore: f.store)
        #expect(code { _ = try apple.verifyAndDecrypt(tokenJSON: try f.tokenOrTrap(key), merchantId: KeyFixture.merchantId, now: f.now) }
                == .certificateChainInvalid)
        // From configuration: TENDER_APPLE_ROOTS replaces Apple's root.
        let path = NSTemporaryDirectory() + "tender-root-\(UUID().uuidString).pem"
        defer { unlink(path) }
        _ = FileManager.default.createFile(atPath: path, contents: Data(f.authority.root.pem.utf8))
        let configuration = try TenderConfiguration.load(environment: ["TENDER_APPLE_ROOTS": path])
        let configured = TokenService(configuration: configuration, keyStore: f.store)
        #expect(configured.verifier.trustedRoots == [f.authority.root])
        _ = try configured.verifyAndDecrypt(tokenJSON: try f.token(for: key), merchantId: KeyFixture.merchantId, now: f.now)
        #expect(try TokenService(configuration: TenderConfiguration.load(environment: [:]), keyStore: f.store).verifier.trustedRoots
                == [try ApplePayTokenDecryptor.appleRootCertificate()])
    }
}

extension KeyFixture {
    /// `token(for:)` with typed-throws callers in mind: a minting failure is a test bug, not a token error.
    func tokenOrTrap(_ key: MerchantKey) throws(TokenError) -> [UInt8] {
        try authority.mintToken(SandboxTokenRequest(amountMinor: 1498, currencyCodeNumeric: "840",
                                                    applicationData: Array("session-1".utf8), signingTime: now), for: key)
    }
}
