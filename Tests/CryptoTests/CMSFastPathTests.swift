import Foundation
import Testing
@testable import Crypto

@Suite struct CMSFastPathTests {
    static let content = Array("ephemeral-key|data|transaction".utf8)
    static let signingTime = TestPKI.start.addingTimeInterval(120)

    static func signed(_ pki: TestPKI, digest: CMSDigestAlgorithm = .sha256) throws -> [UInt8] {
        try CertificateIssuer.signDetachedCMS(content: content, signer: pki.leaf, key: pki.leafKey,
                                              extraCertificates: [pki.intermediate], signingTime: signingTime, digest: digest)
    }

    @Test func lightReadAgreesWithOpenSSLsParse() throws {
        let pki = try TestPKI()
        let der = try Self.signed(pki)
        let view = try #require(CMSDetachedSignatureView(der: der))
        let cms = try CMSSignedData(der: der)
        #expect(view.certificateFingerprints == cms.certificates.map(\.fingerprintSHA256))
        let signer = try CMSSignerKey(certificate: pki.leaf)
        #expect(view.verify(content: Self.content, signer: signer) == cms.signers.first?.signingTime)
        #expect(view.verify(content: Self.content, signer: signer) == Self.signingTime)
    }

    @Test func lightReadConfirmsNothingThatDiffers() throws {
        let pki = try TestPKI()
        let der = try Self.signed(pki)
        let view = try #require(CMSDetachedSignatureView(der: der))
        // Other content: messageDigest no longer matches.
        #expect(view.verify(content: Self.content + [0], signer: try CMSSignerKey(certificate: pki.leaf)) == nil)
        // Another certificate as signer: issuer/serial and key differ.
        #expect(view.verify(content: Self.content, signer: try CMSSignerKey(certificate: pki.intermediate)) == nil)
        // Any single flipped bit in the signature's last bytes is refused.
        for offset in 1...12 {
            var tampered = der
            tampered[der.count - offset] ^= 0x01
            if let other = CMSDetachedSignatureView(der: tampered) {
                #expect(other.verify(content: Self.content, signer: try CMSSignerKey(certificate: pki.leaf)) == nil)
            }
        }
        // SHA-384 digests are left to the full path.
        let sha384 = try #require(CMSDetachedSignatureView(der: try Self.signed(pki, digest: .sha384)))
        #expect(sha384.verify(content: Self.content, signer: try CMSSignerKey(certificate: pki.leaf)) == nil)
    }

    @Test func everyTruncationIsRefusedWithoutCrashing() throws {
        let pki = try TestPKI()
        let der = try Self.signed(pki)
        for length in 0..<der.count {
            #expect(CMSDetachedSignatureView(der: Array(der.prefix(length))) == nil)
        }
        #expect(CMSDetachedSignatureView(der: der + [0]) == nil)
    }

    @Test func signerKeyNeedsP256() throws {
        let rsa = try PrivateKey.generateRSA(bits: 2048)
        let cert = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "RSA", serialNumber: 9, notBefore: TestPKI.start, notAfter: TestPKI.end,
                                isCertificateAuthority: false),
            subjectKey: rsa.publicKey, issuer: nil, issuerKey: rsa)
        let error = #expect(throws: CryptoError.self) { try CMSSignerKey(certificate: cert) }
        #expect(error?.code == .keyTypeUnsupported)
    }

    @Test func directECDHMatchesTheGenericPath() throws {
        let merchant = try PrivateKey.generateP256()
        let ephemeral = try PrivateKey.generateP256()
        let fast = try ECDH.sharedSecret(privateKey: merchant, peerSPKI: ephemeral.publicKey.spkiDER)
        let generic = try ECDH.sharedSecret(privateKey: merchant, peer: ephemeral.publicKey)
        #expect(fast.unsafeRevealedCopy() == generic.unsafeRevealedCopy())
        let reverse = try ECDH.sharedSecret(privateKey: ephemeral, peer: merchant.publicKey)
        #expect(fast.unsafeRevealedCopy() == reverse.unsafeRevealedCopy())
        // A point off the curve is refused.
        var offCurve = ephemeral.publicKey.spkiDER
        offCurve[offCurve.count - 1] ^= 0x01
        let error = #expect(throws: CryptoError.self) { try ECDH.sharedSecret(privateKey: merchant, peerSPKI: offCurve) }
        #expect(error?.code == .decryptionFailed)
    }
}
