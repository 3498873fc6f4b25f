import Crypto
import Testing
@testable import TenderServer

/// The bounded (session id, version) cache behind checkout updates.
struct SessionVersionCacheTests {
    @Test func holdsExactlyEntriesMaxThenEvictsTheOldest() {
        let cache = SessionVersionCache<Int>(entriesMax: 3)
        for v in 1...3 { cache.insert(sessionId: "cs_a", version: v, v * 10) }
        // At the bound: everything is still there.
        #expect(cache.count == 3)
        #expect(cache.entry(sessionId: "cs_a", version: 1) == 10)
        // One past the bound: the oldest (version 1) leaves, the rest stay.
        cache.insert(sessionId: "cs_a", version: 4, 40)
        #expect(cache.count == 3)
        #expect(cache.entry(sessionId: "cs_a", version: 1) == nil)
        #expect(cache.entry(sessionId: "cs_a", version: 2) == 20)
        #expect(cache.entry(sessionId: "cs_a", version: 4) == 40)
    }

    @Test func keysAreSessionAndVersionAndAnEntryIsNeverRewritten() {
        let cache = SessionVersionCache<Int>(entriesMax: 8)
        cache.insert(sessionId: "cs_a", version: 1, 1)
        cache.insert(sessionId: "cs_b", version: 1, 2)
        cache.insert(sessionId: "cs_a", version: 1, 99)
        #expect(cache.entry(sessionId: "cs_a", version: 1) == 1)
        #expect(cache.entry(sessionId: "cs_b", version: 1) == 2)
        #expect(cache.entry(sessionId: "cs_a", version: 2) == nil)
        #expect(cache.count == 2)
    }

    @Test func theLatestVersionPerSessionFollowsInsertsAndEvictions() {
        let cache = SessionVersionCache<Int>(entriesMax: 3)
        #expect(cache.latest(sessionId: "cs_a") == nil)
        cache.insert(sessionId: "cs_a", version: 2, 20)
        cache.insert(sessionId: "cs_a", version: 1, 10)  // an older version read later does not become the latest
        #expect(cache.latest(sessionId: "cs_a").map { [$0.version, $0.value] } == [2, 20])
        cache.insert(sessionId: "cs_b", version: 1, 1)
        cache.insert(sessionId: "cs_b", version: 2, 2)  // evicts cs_a v2, its latest: cs_a has none now
        #expect(cache.latest(sessionId: "cs_a") == nil)
        #expect(cache.latest(sessionId: "cs_b").map { [$0.version, $0.value] } == [2, 2])
        cache.insert(sessionId: "cs_c", version: 1, 7)  // evicts cs_a v1
        cache.insert(sessionId: "cs_c", version: 2, 8)  // evicts cs_b v1: cs_b's latest stays
        #expect(cache.latest(sessionId: "cs_b").map { [$0.version, $0.value] } == [2, 2])
        #expect(cache.latest(sessionId: "cs_c").map { [$0.version, $0.value] } == [2, 8])
    }
}

@Suite struct ClientSecretKeyTests {
    @Test func secretsAreDerivedPerSessionAndPerMasterKey() throws {
        let master = SecretBytes(SecureRandom.bytes(32))
        let key = ClientSecretKey(masterKey: master)
        let id = CheckoutIdentifiers.newSessionId()
        let secret = try CheckoutIdentifiers.clientSecret(sessionId: id, key: key)
        #expect(CheckoutIdentifiers.sessionId(ofClientSecret: secret) == id)
        #expect(try CheckoutIdentifiers.clientSecret(sessionId: id, key: ClientSecretKey(masterKey: master)) == secret)
        #expect(try CheckoutIdentifiers.clientSecret(sessionId: CheckoutIdentifiers.newSessionId(), key: key) != secret)
        #expect(try CheckoutIdentifiers.clientSecret(sessionId: id, key: ClientSecretKey(masterKey: SecretBytes(SecureRandom.bytes(32))))
                != secret)
        // Separated from the master key itself: the secret is not HMAC(master, id).
        #expect(!secret.hasSuffix(hexEncoded(Digest.hmacSHA256(key: master.unsafeRevealedCopy(), message: Array(id.utf8)))))
    }
}
