import Crypto
import Foundation
import Testing

@Suite struct CertificateRequestTests {
    @Test(arguments: ["p256", "rsa2048"])
    func requestCarriesTheKeyAndVerifies(kind: String) throws {
        let key = kind == "p256" ? try PrivateKey.generateP256() : try PrivateKey.generateRSA(bits: 2_048)
        let request = try CertificateRequest.make(key: key, commonName: "merchant.com.example")
        let requested = try CertificateRequest.verifiedPublicKey(der: request.der)
        #expect(requested.matches(key.publicKey))
        #expect(requested.spkiDER == key.publicKey.spkiDER)
        #expect(request.pem.hasPrefix("-----BEGIN CERTIFICATE REQUEST-----\n"))
        let blocks = try PEM.blocks(in: request.pem)
        #expect(blocks.count == 1 && blocks.first?.der == request.der)
    }

    @Test func alteredRequestIsRefused() throws {
        let key = try PrivateKey.generateP256()
        var der = try CertificateRequest.make(key: key, commonName: "merchant.com.example").der
        // The subject's CN bytes sit inside the signed part: change one letter of it.
        let name = Array("merchant.com.example".utf8)
        let at = try #require((0...(der.count - name.count)).first { Array(der[$0..<$0 + name.count]) == name })
        der[at] ^= 0x01
        #expect(throws: CryptoError.self) { try CertificateRequest.verifiedPublicKey(der: der) }
        #expect((try? CertificateRequest.verifiedPublicKey(der: Array(der.prefix(20))) ) == nil)
    }

    @Test func commonNameIsBounded() throws {
        let key = try PrivateKey.generateP256()
        #expect(throws: CryptoError.self) { try CertificateRequest.make(key: key, commonName: "") }
        #expect(throws: CryptoError.self) { try CertificateRequest.make(key: key, commonName: String(repeating: "a", count: 65)) }
        _ = try CertificateRequest.make(key: key, commonName: String(repeating: "a", count: 64))
    }

    @Test func certificateParsesFromDERAndFromPEM() throws {
        let key = try PrivateKey.generateP256()
        let certificate = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "der-or-pem", serialNumber: 7, notBefore: Date(), notAfter: Date().addingTimeInterval(86_400),
                                isCertificateAuthority: false),
            subjectKey: key.publicKey, issuer: nil, issuerKey: key)
        #expect(try Certificate(derOrPEM: certificate.der) == certificate)
        #expect(try Certificate(derOrPEM: Array(certificate.pem.utf8)) == certificate)
        // PEM after a preamble, as some exports write it.
        #expect(try Certificate(derOrPEM: Array(("subject=/CN=der-or-pem\n" + certificate.pem).utf8)) == certificate)
        let error = try #require(throws: CryptoError.self) { try Certificate(derOrPEM: Array(certificate.der.dropLast())) }
        #expect(error.code == .certificateMalformed)
        let text = try #require(throws: CryptoError.self) { try Certificate(derOrPEM: Array("not a certificate".utf8)) }
        #expect(text.code == .certificateMalformed)
    }
}
