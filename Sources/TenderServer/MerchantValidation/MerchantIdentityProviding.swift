import Foundation
import HTTPClient

/// Where merchant validation gets a merchant's Apple Pay Merchant Identity certificate and key.
///
/// The key store (`merchant_keys`, kind `identity`, key sealed under the master key) implements this;
/// merchant validation only needs the unsealed PEM pair for one call and never keeps it.
public protocol MerchantIdentityProviding: Sendable {
    /// The active identity for `merchantId`, or nil when the merchant has none (→ 409 `merchant_identity_missing`).
    func identity(merchantId: String) throws -> TLSClientIdentity?
}

/// No merchant has an identity, so every call is refused with `merchant_identity_missing` rather than
/// attempted without a client certificate. A test seam: visible only to `@_spi(Testing) import TenderServer`.
@_spi(Testing)
public struct NoMerchantIdentities: MerchantIdentityProviding {
    /// Builds the empty provider.
    public init() {}

    /// Always nil.
    public func identity(merchantId: String) throws -> TLSClientIdentity? { nil }
}

/// Identities read from PEM files on each call; no caching, so a replaced certificate takes effect on the
/// next validation. A test seam (production reads the key store): visible only to `@_spi(Testing) import`.
@_spi(Testing)
public struct PEMFileMerchantIdentities: MerchantIdentityProviding {
    /// Certificate and unencrypted private-key PEM paths for one merchant.
    public struct Files: Sendable {
        /// Certificate chain PEM, leaf first.
        public var certificatePath: String
        /// Unencrypted private key PEM (PKCS#8 or traditional).
        public var privateKeyPath: String

        /// Pairs the two paths.
        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// Largest PEM file read; identity certificates and keys are a few kilobytes.
    public static let fileBytesMax = 65_536

    private let files: [String: Files]

    /// Maps merchant ids to their files.
    public init(files: [String: Files]) {
        self.files = files
    }

    /// Reads the merchant's pair; nil when the merchant is not listed. An unreadable file throws.
    public func identity(merchantId: String) throws -> TLSClientIdentity? {
        guard let entry = files[merchantId] else { return nil }
        let certificate = try Self.read(entry.certificatePath)
        var key = try Self.read(entry.privateKeyPath)
        return TLSClientIdentity(certificatePEM: certificate, privateKeyPEM: SecretPEM(zeroingSource: &key))
    }

    private static func read(_ path: String) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw MerchantValidationError(.identityUnreadable, "cannot open an identity PEM file")
        }
        defer { try? handle.close() }
        let data = try handle.read(upToCount: fileBytesMax + 1) ?? Data()
        guard data.count <= fileBytesMax else {
            throw MerchantValidationError(.identityUnreadable, "identity PEM file larger than \(fileBytesMax) bytes")
        }
        return Array(data)
    }
}
