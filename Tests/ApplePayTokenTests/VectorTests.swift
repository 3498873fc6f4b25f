import Crypto
import Foundation
import Testing
@testable import ApplePayToken

/// Loads files from the test bundle's Vectors folder.
enum Vectors {
    static func url(_ set: String, _ file: String) throws -> URL {
        try #require(Bundle.module.url(forResource: "Vectors/\(set)/\(file)", withExtension: nil))
    }
    static func bytes(_ set: String, _ file: String) throws -> [UInt8] { try Array(Data(contentsOf: url(set, file))) }
    static func text(_ set: String, _ file: String) throws -> String { try String(decoding: bytes(set, file), as: UTF8.self) }
    static func json(_ set: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(bytes(set, "vector.json"))) as? [String: Any])
    }
    static func merchantKey(_ set: String, cert: String, key: String) throws -> MerchantKey {
        try MerchantKey(certificatePEM: text(set, cert), privateKeyPEM: text(set, key))
    }
    static func date(_ iso: String) throws -> Date { try #require(ISO8601DateFormatter().date(from: iso)) }
    static func appleRoot() throws -> Certificate { try ApplePayTokenDecryptor.appleRootCertificate() }
}

@Suite struct VectorTests {
    static let galaTime = "2021-09-01T19:03:06Z"
    static let rsaTime = "2024-01-08T17:54:44Z"

    func expectFields(_ data: DecryptedPaymentData, _ set: String) throws {
        let expected = try #require((try Vectors.json(set))["expected"] as? [String: Any])
        let fields = try #require(expected["fields"] as? [String: Any])
        let inner = try #require(fields["paymentData"] as? [String: Any])
        let sensitive = data.unsafeRevealSensitive()
        #expect(sensitive.applicationPrimaryAccountNumber == fields["applicationPrimaryAccountNumber"] as? String)
        #expect(data.applicationExpirationDate == fields["applicationExpirationDate"] as? String)
        #expect(data.currencyCodeNumeric == fields["currencyCode"] as? String)
        #expect(data.transactionAmountMinor == (fields["transactionAmount"] as? NSNumber)?.int64Value)
        #expect(data.deviceManufacturerIdentifier == fields["deviceManufacturerIdentifier"] as? String)
        #expect(data.paymentDataType.rawValue == fields["paymentDataType"] as? String)
        #expect(sensitive.onlinePaymentCryptogram == inner["onlinePaymentCryptogram"] as? String)
        #expect(data.eciIndicator == inner["eciIndicator"] as? String)
    }

    @Test func galaEC_v1VerifiesAndDecryptsAtItsSigningTime() throws {
        let key = try Vectors.merchantKey("gala-2023", cert: "certificate.pem", key: "private_key.pem")
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [try Vectors.appleRoot()], merchantKeys: [key], tokenAgeMaxSeconds: 300)
        let result = try decryptor.verifyAndDecrypt(Vectors.bytes("gala-2023", "token.json"), now: Vectors.date(Self.galaTime))
        #expect(result.token.version == .ecV1)
        #expect(result.token.signingTime == (try Vectors.date(Self.galaTime)))
        try expectFields(result.paymentData, "gala-2023")
        #expect(!result.paymentData.hasCardholderName)
    }

    @Test func galaIntermediatesMatchTheRecordedSecretAndKey() throws {
        let vector = try Vectors.json("gala-2023")
        let mid = try #require(vector["intermediates"] as? [String: String])
        let key = try Vectors.merchantKey("gala-2023", cert: "certificate.pem", key: "private_key.pem")
        #expect(hexEncoded(try #require(key.merchantIdHash)) == mid["merchant_id_hash_hex"]?.lowercased())
        let token = try UnverifiedPaymentToken(json: Vectors.bytes("gala-2023", "token.json"))
        let shared = try ECDH.sharedSecret(privateKey: key.privateKey, peer: PublicKey(spkiDER: try #require(token.ephemeralPublicKey)))
        #expect(hexEncoded(shared.unsafeRevealedCopy()) == mid["shared_secret_hex"])
        let symmetric = ApplePayKeyDerivation.symmetricKey(sharedSecret: shared, merchantIdHash: try #require(key.merchantIdHash))
        #expect(hexEncoded(symmetric.unsafeRevealedCopy()) == mid["symmetric_key_hex"])
    }

    @Test func basisTheoryRSA_v1VerifiesAndDecryptsAtItsSigningTime() throws {
        let key = try Vectors.merchantKey("basis-theory-rsa", cert: "apple_pay.pem", key: "private.key")
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [try Vectors.appleRoot()], merchantKeys: [key], tokenAgeMaxSeconds: 300)
        let result = try decryptor.verifyAndDecrypt(Vectors.bytes("basis-theory-rsa", "token.json"), now: Vectors.date(Self.rsaTime))
        #expect(result.token.version == .rsaV1)
        try expectFields(result.paymentData, "basis-theory-rsa")
    }

    @Test func processoutSignatureVerifiesAtItsSigningTime() throws {
        let vector = try Vectors.json("processout-ec-signature-only")
        let expected = try #require(vector["expected"] as? [String: Any])
        let time = try Vectors.date(try #require(expected["signing_time"] as? String))
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [try Vectors.appleRoot()], merchantKeys: [], tokenAgeMaxSeconds: 300)
        let token = try decryptor.verify(Vectors.bytes("processout-ec-signature-only", "token-ec.json"), now: time)
        #expect(token.signingTime == time)
        #expect(token.transactionIdentifier != nil)
        #expect(throws: TokenError(.unknownMerchantKey, "no merchant key for publicKeyHash \(token.publicKeyHashBase64)")) {
            try decryptor.decryptor.decrypt(token)
        }
    }

    @Test(arguments: [("gala-2023", "token.json"), ("basis-theory-rsa", "token.json"), ("processout-ec-signature-only", "token-ec.json")])
    func realTokensAreRefusedAtTodaysDate(set: String, file: String) throws {
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [try Vectors.appleRoot()], merchantKeys: [], tokenAgeMaxSeconds: 300)
        let error = try #require(throws: TokenError.self) { try decryptor.verify(Vectors.bytes(set, file), now: Date()) }
        // Expired certificates fail the chain before freshness is even considered.
        #expect(error.code == .certificateChainInvalid)
    }

    @Test func realTokenIsStaleAMinuteAfterTheWindow() throws {
        let decryptor = ApplePayTokenDecryptor(trustedRoots: [try Vectors.appleRoot()], merchantKeys: [], tokenAgeMaxSeconds: 300)
        let late = try Vectors.date(Self.galaTime).addingTimeInterval(301)
        let error = try #require(throws: TokenError.self) { try decryptor.verify(Vectors.bytes("gala-2023", "token.json"), now: late) }
        #expect(error.code == .tokenExpired)
    }

    @Test func embeddedAppleRootMatchesTheVectorCopy() throws {
        let fromVector = try Certificate(pem: Vectors.text("apple", "AppleRootCA-G3.pem"))
        #expect(try Vectors.appleRoot() == fromVector)
    }
}
