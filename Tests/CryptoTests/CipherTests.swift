import Foundation
import Testing
@testable import Crypto

func hexBytes(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        out.append(UInt8(text[index..<next], radix: 16) ?? 0)
        index = next
    }
    return out
}

@Suite struct CipherTests {
    // McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 2 (AES-128) and 14 (AES-256).
    @Test(arguments: [
        (16, "0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf"),
        (32, "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"),
    ])
    func aesGCMMatchesPublishedVectors(keyBytes: Int, ciphertextHex: String, tagHex: String) throws {
        let key = SecretBytes([UInt8](repeating: 0, count: keyBytes))
        let nonce = [UInt8](repeating: 0, count: 12)
        let sealed = try AESGCM.seal(key: key, nonce: nonce, plaintext: [UInt8](repeating: 0, count: 16))
        #expect(hexEncoded(sealed) == ciphertextHex + tagHex)
        let opened = try AESGCM.open(key: key, nonce: nonce, sealed: sealed)
        #expect(opened.constantTimeEquals([UInt8](repeating: 0, count: 16)))
    }

    @Test func aesGCMRejectsATamperedTagAndWrongAAD() throws {
        let key = SecretBytes(SecureRandom.bytes(32))
        let nonce = [UInt8](repeating: 0, count: 16)
        var sealed = try AESGCM.seal(key: key, nonce: nonce, plaintext: Array("payload".utf8), associatedData: [1])
        #expect(throws: CryptoError.self) { try AESGCM.open(key: key, nonce: nonce, sealed: sealed, associatedData: [2]) }
        sealed[sealed.count - 1] ^= 1
        let error = #expect(throws: CryptoError.self) { try AESGCM.open(key: key, nonce: nonce, sealed: sealed, associatedData: [1]) }
        #expect(error?.code == .decryptionFailed)
    }

    @Test func ecdhAgreesBothWays() throws {
        let a = try PrivateKey.generateP256()
        let b = try PrivateKey.generateP256()
        let ab = try ECDH.sharedSecret(privateKey: a, peer: b.publicKey)
        let ba = try ECDH.sharedSecret(privateKey: b, peer: a.publicKey)
        #expect(ab.count == 32)
        #expect(ab.constantTimeEquals(ba.unsafeRevealedCopy()))
    }

    @Test func rsaOAEPRoundTripsAndRejectsTampering() throws {
        let key = try PrivateKey.generateRSA(bits: 2048)
        let secret = SecretBytes(SecureRandom.bytes(16))
        var wrapped = try RSAOAEP.encrypt(publicKey: key.publicKey, plaintext: secret)
        #expect(try RSAOAEP.decrypt(privateKey: key, ciphertext: wrapped).constantTimeEquals(secret.unsafeRevealedCopy()))
        wrapped[10] ^= 1
        let error = #expect(throws: CryptoError.self) { try RSAOAEP.decrypt(privateKey: key, ciphertext: wrapped) }
        #expect(error?.code == .decryptionFailed)
    }

    @Test func keyEncryptionRoundTripsAndBindsEverything() throws {
        let kek = SecureRandom.bytes(32)
        let plaintext = Array("-----BEGIN PRIVATE KEY-----".utf8)
        let sealed = try KeyEncryption.seal(plaintext: plaintext, keyEncryptingKey: kek, associatedData: Array("key-1".utf8))
        #expect(sealed.first == KeyEncryption.version)
        #expect(sealed.count == 1 + 12 + plaintext.count + 16)
        #expect(try KeyEncryption.open(sealed: sealed, keyEncryptingKey: kek,
            associatedData: Array("key-1".utf8)).constantTimeEquals(plaintext))
        // Random nonce: sealing twice never repeats.
        #expect(try KeyEncryption.seal(plaintext: plaintext, keyEncryptingKey: kek,
            associatedData: []) != KeyEncryption.seal(plaintext: plaintext, keyEncryptingKey: kek, associatedData: []))
        var wrongVersion = sealed
        wrongVersion[0] = 2
        var flipped = sealed
        flipped[20] ^= 1
        let cases: [([UInt8], [UInt8], [UInt8], CryptoError.Code)] = [
            (sealed, SecureRandom.bytes(32), Array("key-1".utf8), .decryptionFailed),
            (sealed, kek, Array("key-2".utf8), .decryptionFailed),
            (flipped, kek, Array("key-1".utf8), .decryptionFailed),
            (wrongVersion, kek, Array("key-1".utf8), .unsupportedVersion),
            (Array(sealed.prefix(28)), kek, Array("key-1".utf8), .sealedKeyMalformed),
            ([], kek, Array("key-1".utf8), .sealedKeyMalformed),
            (sealed, Array(kek.prefix(16)), Array("key-1".utf8), .invalidArgument),
        ]
        for (blob, key, aad, code) in cases {
            let error = #expect(throws: CryptoError.self) { try KeyEncryption.open(sealed: blob, keyEncryptingKey: key,
                associatedData: aad) }
            #expect(error?.code == code)
        }
        // Exactly the minimum length (empty plaintext) is accepted.
        let empty = try KeyEncryption.seal(plaintext: [], keyEncryptingKey: kek, associatedData: [])
        #expect(empty.count == 29)
        #expect(try KeyEncryption.open(sealed: empty, keyEncryptingKey: kek, associatedData: []).count == 0)
    }
}
