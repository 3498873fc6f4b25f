import Foundation
import Testing
@testable import Crypto

/// A WWDR-shaped chain: root → WWDR intermediate → order-type/pass-type leaf, valid around now (the
/// `openssl` tool verifies at its own clock).
struct WalletTestPKI {
    let root: Certificate
    let wwdr: Certificate
    let identity: WalletSigningIdentity

    init(rsa: Bool) throws {
        let now = Date()
        let start = now.addingTimeInterval(-86_400), end = now.addingTimeInterval(30 * 86_400)
        let rootKey = try PrivateKey.generateP256()
        root = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Test Apple Root", serialNumber: 1, notBefore: start, notAfter: end,
                                isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign"),
            subjectKey: rootKey.publicKey, issuer: nil, issuerKey: rootKey)
        let wwdrKey = try PrivateKey.generateP256()
        wwdr = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Test WWDR", serialNumber: 2, notBefore: start, notAfter: end,
                                isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign"),
            subjectKey: wwdrKey.publicKey, issuer: root, issuerKey: rootKey)
        let leafKey = rsa ? try PrivateKey.generateRSA(bits: 2_048) : try PrivateKey.generateP256()
        let leaf = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Order Type ID: order.com.example.shop", serialNumber: 3, notBefore: start,
                                notAfter: end, isCertificateAuthority: false, keyUsage: "critical,digitalSignature"),
            subjectKey: leafKey.publicKey, issuer: wwdr, issuerKey: wwdrKey)
        identity = try WalletSigningIdentity(certificate: leaf, privateKey: leafKey, wwdr: wwdr)
    }
}

/// Runs `openssl cms -verify` on a package's manifest and signature; returns its exit status.
func opensslVerify(manifest: [UInt8], signature: [UInt8], root: Certificate) throws -> Int32 {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wallet-verify-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    try Data(manifest).write(to: dir.appendingPathComponent("manifest.json"))
    try Data(signature).write(to: dir.appendingPathComponent("signature"))
    try Data(root.pem.utf8).write(to: dir.appendingPathComponent("wwdr-root.pem"))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.currentDirectoryURL = dir
    process.arguments = ["cms", "-verify", "-binary", "-inform", "DER", "-in", "signature", "-content", "manifest.json",
                         "-CAfile", "wwdr-root.pem", "-out", "/dev/null"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

@Suite struct WalletPackageTests {
    static let files = [ZipArchive.Entry(name: "order.json", bytes: Array(#"{"schemaVersion":1}"#.utf8)),
                        ZipArchive.Entry(name: "logo.png", bytes: [0x89, 0x50, 0x4e, 0x47])]

    @Test(arguments: [false, true]) func opensslAcceptsThePackageAndRefusesATamperedManifest(rsa: Bool) throws {
        let pki = try WalletTestPKI(rsa: rsa)
        let package = try WalletPackage.build(files: Self.files, digest: .sha256, identity: pki.identity, now: Date())
        let entries = try ZipArchive.read(package)
        #expect(entries.map(\.name) == ["logo.png", "order.json", "manifest.json", "signature"])
        let manifest = try #require(entries.first { $0.name == "manifest.json" }).bytes
        let signature = try #require(entries.first { $0.name == "signature" }).bytes
        #expect(try opensslVerify(manifest: manifest, signature: signature, root: pki.root) == 0)
        var tampered = manifest
        tampered[tampered.count - 3] ^= 0x01
        #expect(try opensslVerify(manifest: tampered, signature: signature, root: pki.root) != 0)
        // The signature carries the signer and WWDR certificates and a signing time.
        let cms = try CMSSignedData(der: signature)
        #expect(cms.isDetached)
        #expect(Set(cms.certificates) == [pki.identity.certificate, pki.wwdr])
        #expect(cms.signers.first?.signingTime != nil)
    }

    @Test func manifestDigestsArePerPackageType() throws {
        let sha256 = try WalletPackage.manifest(Self.files, digest: .sha256)
        let sha1 = try WalletPackage.manifest(Self.files, digest: .sha1)
        let decoded256 = try JSONDecoder().decode([String: String].self, from: Data(sha256))
        let decoded1 = try JSONDecoder().decode([String: String].self, from: Data(sha1))
        #expect(decoded256["order.json"] == hexEncoded(Digest.sha256(Self.files[0].bytes)))
        #expect(decoded1["order.json"] == hexEncoded(Digest.sha1(Self.files[0].bytes)))
        #expect(hexEncoded(Digest.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    }

    @Test func zipIsDeterministicAndReadableByUnzip() throws {
        let first = try ZipArchive.write(Self.files)
        #expect(try ZipArchive.write(Self.files) == first)
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("wallet-\(UUID().uuidString).zip").path
        try Data(first).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; "
                             + "print(','.join(z.namelist()))", path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus == 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") {
            #expect(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "order.json,logo.png\n")
        }
    }

    @Test func reservedAndUnsafeNamesAreRefused() throws {
        let pki = try WalletTestPKI(rsa: false)
        #expect(throws: CryptoError.self) {
            try WalletPackage.build(files: [ZipArchive.Entry(name: "signature", bytes: [])], digest: .sha1,
                                    identity: pki.identity, now: Date())
        }
        for name in ["", "/etc/passwd", "../x", "a/../../b"] {
            #expect(throws: CryptoError.self) { try ZipArchive.write([ZipArchive.Entry(name: name, bytes: [])]) }
        }
        #expect(throws: CryptoError.self) { try ZipArchive.write(Self.files + Self.files) }
    }
}
