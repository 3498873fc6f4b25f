import Foundation
import Testing
@testable import Crypto

struct TestPKI {
    static let start = Date(timeIntervalSince1970: 1_700_000_000)
    static let end = start.addingTimeInterval(30 * 86_400)
    let rootKey: PrivateKey
    let root: Certificate
    let intermediateKey: PrivateKey
    let intermediate: Certificate
    let leafKey: PrivateKey
    let leaf: Certificate

    init() throws {
        rootKey = try PrivateKey.generateP256()
        root = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Test Root", organization: "Tender", serialNumber: 1, notBefore: Self.start, notAfter: Self.end,
                                isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign"),
            subjectKey: rootKey.publicKey, issuer: nil, issuerKey: rootKey)
        intermediateKey = try PrivateKey.generateP256()
        intermediate = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Test Intermediate", serialNumber: 2, notBefore: Self.start, notAfter: Self.end,
                                isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign",
                                customExtensions: [CertificateExtension(oid: "1.2.840.113635.100.6.2.14", isCritical: false, value: [5,
                                    0])]),
            subjectKey: intermediateKey.publicKey, issuer: root, issuerKey: rootKey)
        leafKey = try PrivateKey.generateP256()
        leaf = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Test Leaf", serialNumber: 0x0102_0304, notBefore: Self.start,
                notAfter: Self.end.addingTimeInterval(-86_400),
                                isCertificateAuthority: false, keyUsage: "critical,digitalSignature",
                                customExtensions: [CertificateExtension(oid: "1.2.840.113635.100.6.29", isCritical: false, value: [5, 0])]),
            subjectKey: leafKey.publicKey, issuer: intermediate, issuerKey: intermediateKey)
    }
}

@Suite struct CertificateTests {
    @Test func parsedFieldsMatchWhatWasIssued() throws {
        let pki = try TestPKI()
        let parsed = try Certificate(pem: pki.leaf.pem)
        #expect(parsed.subject == "CN=Test Leaf")
        #expect(parsed.issuer == "CN=Test Intermediate")
        #expect(parsed.serialNumber == [1, 2, 3, 4])
        #expect(parsed.notBefore == TestPKI.start)
        #expect(parsed.notAfter == TestPKI.end.addingTimeInterval(-86_400))
        #expect(parsed.fingerprintSHA256 == Digest.sha256(parsed.der))
        #expect(parsed.extensionValue(oid: "1.2.840.113635.100.6.29")?.value == [5, 0])
        #expect(parsed.extensionValue(oid: "1.2.840.113635.100.6.2.14") == nil)
        #expect(parsed.publicKey.spkiDER == pki.leafKey.publicKey.spkiDER)
        #expect(try PublicKey(spkiDER: parsed.publicKey.spkiDER).matches(pki.leafKey.publicKey))
    }

    @Test func chainVerifiesAtAGivenTimeNotTheWallClock() throws {
        let pki = try TestPKI()
        let chain = try CertificateChainVerifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], trustedRoots: [pki.root],
                                                        at: TestPKI.start.addingTimeInterval(3_600))
        #expect(chain == [pki.leaf.fingerprintSHA256, pki.intermediate.fingerprintSHA256, pki.root.fingerprintSHA256])
    }

    @Test(arguments: [
        ("before_validity", -3_600.0, CryptoError.Code.certificateNotYetValid),
        ("after_leaf_expiry", 29.5 * 86_400, .certificateExpired),
    ])
    func chainRefusedOutsideValidity(name: String, offset: Double, code: CryptoError.Code) throws {
        let pki = try TestPKI()
        let error = #expect(throws: CryptoError.self) {
            try CertificateChainVerifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], trustedRoots: [pki.root],
                                                at: TestPKI.start.addingTimeInterval(offset))
        }
        #expect(error?.code == code, "\(name)")
    }

    @Test func chainRefusedForAForeignRootOrMissingIntermediate() throws {
        let pki = try TestPKI()
        let other = try TestPKI()
        let at = TestPKI.start.addingTimeInterval(60)
        let foreign = #expect(throws: CryptoError.self) {
            try CertificateChainVerifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], trustedRoots: [other.root], at: at)
        }
        #expect(foreign?.code == .chainInvalid)
        let missing = #expect(throws: CryptoError.self) {
            try CertificateChainVerifier.verify(leaf: pki.leaf, intermediates: [], trustedRoots: [pki.root], at: at)
        }
        #expect(missing?.code == .chainInvalid)
    }

    @Test func detachedCMSVerifiesAndExposesSignedAttributes() throws {
        let pki = try TestPKI()
        let content = Array("ephemeral-key|data|transaction".utf8)
        let signingTime = TestPKI.start.addingTimeInterval(120)
        let der = try CertificateIssuer.signDetachedCMS(content: content, signer: pki.leaf, key: pki.leafKey,
                                                        extraCertificates: [pki.intermediate], signingTime: signingTime)
        let cms = try CMSSignedData(der: der)
        #expect(cms.isDetached)
        #expect(Set(cms.certificates) == Set([pki.leaf, pki.intermediate]))
        let signer = try #require(cms.signers.first)
        #expect(cms.signers.count == 1)
        #expect(signer.identifies(pki.leaf))
        #expect(!signer.identifies(pki.intermediate))
        #expect(signer.signingTime == signingTime)
        #expect(signer.messageDigest == Digest.sha256(content))
        #expect(signer.digestAlgorithm == .sha256)
        #expect(signer.signedAttributeOIDs.contains("1.2.840.113549.1.9.5"))
        try signer.verifyDetached(content: content, with: pki.leaf)

        let tampered = #expect(throws: CryptoError.self) { try signer.verifyDetached(content: content + [0], with: pki.leaf) }
        #expect(tampered?.code == .messageDigestMismatch)
        let wrongKey = #expect(throws: CryptoError.self) { try signer.verifySignedAttributes(with: pki.intermediate) }
        #expect(wrongKey?.code == .signatureInvalid)
    }

    @Test func cmsParsingRefusesGarbageAndEveryTruncation() throws {
        let pki = try TestPKI()
        let der = try CertificateIssuer.signDetachedCMS(content: [1, 2, 3], signer: pki.leaf, key: pki.leafKey,
                                                        extraCertificates: [], signingTime: TestPKI.start)
        for length in 0..<der.count {
            let error = #expect(throws: CryptoError.self) { try CMSSignedData(der: Array(der.prefix(length))) }
            #expect(error?.code == .cmsMalformed)
        }
        let error = #expect(throws: CryptoError.self) { try Certificate(der: [0x30, 0x03, 0x02, 0x01, 0x01]) }
        #expect(error?.code == .certificateMalformed)
    }
}
