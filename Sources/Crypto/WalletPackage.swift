internal import COpenSSL
public import Foundation

/// A Wallet signing identity: the order-type or pass-type certificate Apple issued, its private key,
/// and Apple's WWDR intermediate that signed it (carried in every signature).
public struct WalletSigningIdentity: Sendable {
    /// The order-type or pass-type certificate.
    public let certificate: Certificate
    /// Its private key (RSA or EC).
    public let privateKey: PrivateKey
    /// Apple WWDR intermediate (or the sandbox stand-in).
    public let wwdr: Certificate

    /// Creates an identity; `key_mismatch` when the key is not the certificate's.
    public init(certificate: Certificate, privateKey: PrivateKey, wwdr: Certificate) throws(CryptoError) {
        guard certificate.publicKey.matches(privateKey.publicKey) else {
            throw CryptoError(.keyMismatch, "the private key does not belong to the certificate")
        }
        self.certificate = certificate
        self.privateKey = privateKey
        self.wwdr = wwdr
    }
}

/// Builds signed Wallet packages: Apple's "Building a Pass" / "Wallet Orders" bundle layout, a
/// `manifest.json` of per-file digests and a detached CMS `signature` over it.
public enum WalletPackage {
    /// The manifest digest Apple specifies per package type.
    public enum ManifestDigest: Sendable {
        /// SHA-1 hex (`.pkpass`, PassKit's manifest).
        case sha1
        /// SHA-256 hex (`.order`, Wallet Orders' manifest).
        case sha256
    }

    /// Names Tender writes itself; a caller's file may not take them.
    public static let reservedNames: Set<String> = ["manifest.json", "signature"]

    /// `manifest.json`: `{"file": "hex digest", …}` with sorted keys.
    public static func manifest(_ files: [ZipArchive.Entry], digest: ManifestDigest) throws(CryptoError) -> [UInt8] {
        var entries: [String: String] = [:]
        for file in files {
            entries[file.name] = hexEncoded(digest == .sha1 ? Digest.sha1(file.bytes) : Digest.sha256(file.bytes))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return Array(try encoder.encode(entries)) } catch { throw CryptoError(.invalidArgument, "manifest does not encode") }
    }

    /// The signed package: `files` (in name order), `manifest.json`, then `signature` = detached CMS
    /// SignedData over the manifest by `identity`, with the WWDR certificate and a signingTime of `now`.
    public static func build(files: [ZipArchive.Entry], digest: ManifestDigest, identity: WalletSigningIdentity,
                             now: Date) throws(CryptoError) -> [UInt8] {
        guard !files.contains(where: { reservedNames.contains($0.name) }) else {
            throw CryptoError(.invalidArgument, "manifest.json and signature are written by the signer")
        }
        let sorted = files.sorted { $0.name < $1.name }
        let manifest = try manifest(sorted, digest: digest)
        let signature = try CertificateIssuer.signDetachedCMS(content: manifest, signer: identity.certificate,
                                                              key: identity.privateKey, extraCertificates: [identity.wwdr],
                                                              signingTime: now)
        return try ZipArchive.write(sorted + [ZipArchive.Entry(name: "manifest.json", bytes: manifest),
                                              ZipArchive.Entry(name: "signature", bytes: signature)])
    }
}

extension Digest {
    /// SHA-1 of `bytes` (only where a format demands it: PassKit's manifest).
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = SHA1(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return out
    }
}
