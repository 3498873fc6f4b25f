import Crypto
import Foundation
import Testing
@testable import ApplePayToken

/// The cached-chain fast path: taken only for known certificates, and never weaker than the full pipeline.
@Suite struct CachedChainTests {
    static func unverified(_ json: [UInt8]) throws -> UnverifiedPaymentToken { try UnverifiedPaymentToken(json: json) }

    @Test func fastPathServesATokenOnlyAfterItsChainWasVerified() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        let fresh = try Self.unverified(f.authority.mintToken(SandboxFixture.request(), for: f.merchant))
        #expect(decryptor.verifier.verifyWithCachedChain(fresh, now: fixtureTime) == nil)
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let signingTime = try #require(decryptor.verifier.verifyWithCachedChain(fresh, now: fixtureTime))
        #expect(signingTime == SandboxFixture.signingTime)
        let data = try decryptor.decrypt(f.authority.mintToken(SandboxFixture.request(), for: f.merchant), now: fixtureTime)
        #expect(data.transactionAmountMinor == 12_345)
    }

    @Test func fastPathIsOffWhenTheCacheIsDisabled() throws {
        let f = try SandboxFixture()
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [f.authority.root], merchantKeys: [f.merchant],
                                               tokenAgeMaxSeconds: 300, chainCacheEntriesMax: 0)
        _ = try decryptor.verify(f.token, now: fixtureTime)
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(f.token), now: fixtureTime) == nil)
    }

    @Test func cachedChainIsNotUsedForDifferentCertificates() throws {
        let f = try SandboxFixture()
        let other = try SandboxAuthority.create(validFrom: fixtureTime.addingTimeInterval(-86_400), validityDays: 30)
        let decryptor = f.decryptor(roots: [f.authority.root, other.root])
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let foreign = try other.mintToken(SandboxFixture.request(), for: f.merchant)
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(foreign), now: fixtureTime) == nil)
        // The full pipeline still accepts it, and caches that chain separately.
        _ = try decryptor.verify(foreign, now: fixtureTime)
        #expect(decryptor.verifier.cachedChainCount == 2)
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(foreign), now: fixtureTime) != nil)
    }

    @Test func cachedChainIsNotUsedOutsideTheCertificatesValidity() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let later = fixtureTime.addingTimeInterval(40 * 86_400)
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(f.token), now: later) == nil)
    }

    @Test func tamperedSignatureIsRefusedWithACachedChain() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let tampered = try f.editedPaymentData { $0["signature"] = try flippingBase64($0["signature"], at: -5) }
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(tampered), now: fixtureTime) == nil)
        let error = try #require(throws: TokenError.self) { try decryptor.decrypt(tampered, now: fixtureTime) }
        #expect(error.code == .signatureInvalid)
    }

    @Test func tamperedSignedContentIsRefusedWithACachedChain() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor(keys: [])
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let tampered = try f.editedPaymentData { $0["data"] = try flippingBase64($0["data"], at: 0) }
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(tampered), now: fixtureTime) == nil)
        let error = try #require(throws: TokenError.self) { try decryptor.decrypt(tampered, now: fixtureTime) }
        #expect(error.code == .messageDigestMismatch)
    }

    @Test func staleTokenIsRefusedOnTheFastPath() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let late = fixtureTime.addingTimeInterval(301)
        #expect(decryptor.verifier.verifyWithCachedChain(try Self.unverified(f.token), now: late) != nil)
        let error = try #require(throws: TokenError.self) { try decryptor.verify(f.token, now: late) }
        #expect(error.code == .tokenExpired)
    }

    /// Every rule of the table gives the same code when the decryptor has already verified a genuine
    /// token, so the chain (and its signer) is cached.
    @Test(arguments: ruleCases)
    func eachRuleRejectsWithItsCodeWithAWarmCache(_ row: RuleCase) throws {
        let f = try SandboxFixture()
        let (token, decryptor, now) = try row.make(f)
        _ = try? decryptor.verify(f.token, now: fixtureTime)
        let error = try #require(throws: TokenError.self) { try decryptor.decrypt(token, now: now) }
        #expect(error.code == row.expected, "\(row.rule): \(error)")
    }

    @Test func everyPrefixOfTheSignatureFailsCleanlyWithAWarmCache() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        _ = try decryptor.verify(f.token, now: fixtureTime)
        let object = try #require(JSONSerialization.jsonObject(with: Data(f.token)) as? [String: Any])
        let body = try #require(object["paymentData"] as? [String: Any])
        let encoded = try #require(body["signature"] as? String)
        let signature = Array(try #require(Data(base64Encoded: encoded)))
        for length in stride(from: 0, to: signature.count, by: 7) {
            let cut = try f.editedPaymentData { $0["signature"] = Data(signature.prefix(length)).base64EncodedString() }
            #expect(throws: TokenError.self) { try decryptor.verify(cut, now: fixtureTime) }
        }
    }
}
