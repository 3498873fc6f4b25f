import Crypto
import Foundation
import Synchronization

/// A token whose signature, certificate chain and freshness have been checked. Only `TokenVerifier` builds it.
public struct VerifiedPaymentToken: Sendable {
    /// EC_v1 or RSA_v1.
    public let version: PaymentTokenVersion
    /// `header.transactionId` (hex); the replay key (Apple step 5).
    public let transactionIdHex: String
    /// `header.applicationData` (hex SHA-256 of the request's applicationData), if present (Apple step 6).
    public let applicationDataHex: String?
    /// `header.publicKeyHash` (SHA-256 of the merchant certificate's SPKI DER).
    public let publicKeyHash: [UInt8]
    /// The CMS signingTime.
    public let signingTime: Date
    /// Unsigned wrapper metadata, if sent.
    public let paymentMethod: PaymentMethodInfo?
    /// Unsigned wrapper `transactionIdentifier`, if sent.
    public let transactionIdentifier: String?
    let encryptedData: [UInt8]
    let ephemeralPublicKey: [UInt8]?
    let wrappedKey: [UInt8]?

    /// `publicKeyHash` in base64, as it appears in the token.
    public var publicKeyHashBase64: String { Data(publicKeyHash).base64EncodedString() }
}

/// Apple's marker OIDs (Payment Token Format Reference, step 1.a).
public enum AppleOID {
    /// Marks Apple Pay's signing leaf.
    public static let leaf = "1.2.840.113635.100.6.29"
    /// Marks the Apple Application Integration CA intermediate.
    public static let intermediate = "1.2.840.113635.100.6.2.14"
    /// Carries the merchant identifier hash in a payment-processing certificate.
    public static let merchantIdentifier = "1.2.840.113635.100.6.32"
}

/// Verifies tokens: a pipeline of small named checks, cheapest first; each throws its own code.
public final class TokenVerifier: Sendable {
    /// The roots a chain must end at.
    public let trustedRoots: [Certificate]
    /// Largest allowed age of the CMS signingTime relative to `now` (Apple step 1.e: "a few minutes").
    public let tokenAgeMaxSeconds: Int64
    /// Largest allowed lead of signingTime over `now`, for clock skew.
    public let futureSkewMaxSeconds: Int64
    let cache: ChainCache

    /// Creates a verifier; `chainCacheEntriesMax` bounds the verified-chain cache (0 disables it).
    public init(trustedRoots: [Certificate], tokenAgeMaxSeconds: Int64, futureSkewMaxSeconds: Int64 = 60,
                chainCacheEntriesMax: Int = 64) {
        precondition(tokenAgeMaxSeconds >= 0 && futureSkewMaxSeconds >= 0, "negative time window")
        self.trustedRoots = trustedRoots
        self.tokenAgeMaxSeconds = tokenAgeMaxSeconds
        self.futureSkewMaxSeconds = futureSkewMaxSeconds
        self.cache = ChainCache(entriesMax: chainCacheEntriesMax)
    }

    /// Number of chains currently cached.
    public var cachedChainCount: Int { cache.count }

    /// Runs every check in order and returns the verified token.
    public func verify(_ token: UnverifiedPaymentToken, now: Date) throws(TokenError) -> VerifiedPaymentToken {
        let version = try Self.checkVersion(token)
        try Self.checkHeaderMatchesVersion(token, version)
        if let signingTime = verifyWithCachedChain(token, now: now) {
            try checkFreshness(signingTime: signingTime, now: now)
            return VerifiedPaymentToken(version: version, transactionIdHex: token.transactionIdHex,
                                        applicationDataHex: token.applicationDataHex, publicKeyHash: token.publicKeyHash,
                                        signingTime: signingTime, paymentMethod: token.paymentMethod,
                                        transactionIdentifier: token.transactionIdentifier, encryptedData: token.encryptedData,
                                        ephemeralPublicKey: token.ephemeralPublicKey, wrappedKey: token.wrappedKey)
        }
        let cms = try Self.parseSignature(token)
        let (leaf, intermediate) = try Self.checkMarkerCertificates(cms.data)
        try Self.checkSignerIsLeaf(cms.signer, leaf)
        try Self.checkDigestAlgorithm(cms.signer)
        let signingTime = try Self.checkSigningTimePresent(cms.signer)
        try Self.checkMessageDigest(cms.signer, token)
        try Self.checkSignature(cms.signer, leaf)
        try checkChain(leaf: leaf, intermediate: intermediate, now: now)
        try checkFreshness(signingTime: signingTime, now: now)
        return VerifiedPaymentToken(version: version, transactionIdHex: token.transactionIdHex,
                                    applicationDataHex: token.applicationDataHex, publicKeyHash: token.publicKeyHash,
                                    signingTime: signingTime, paymentMethod: token.paymentMethod,
                                    transactionIdentifier: token.transactionIdentifier, encryptedData: token.encryptedData,
                                    ephemeralPublicKey: token.ephemeralPublicKey, wrappedKey: token.wrappedKey)
    }

    /// The common case: the token carries exactly the leaf and intermediate of a chain already verified
    /// by the full pipeline below (marker OIDs, chain to a trusted root) and still valid at `now`. Then
    /// the signer, digest algorithm, signed attributes, messageDigest and signature are checked on a light
    /// parse with the cached leaf key. Returns the signing time, or nil to run the full pipeline (which
    /// also reports the precise error for any token this path does not confirm).
    func verifyWithCachedChain(_ token: UnverifiedPaymentToken, now: Date) -> Date? {
        guard cache.entriesMax > 0, let view = CMSDetachedSignatureView(der: token.signature),
              view.certificateFingerprints.count == 2
        else { return nil }
        let first = view.certificateFingerprints[0]
        let second = view.certificateFingerprints[1]
        guard let signer = cache.signer(first + second, at: now) ?? cache.signer(second + first, at: now) else { return nil }
        return view.verify(content: token.signedContent, signer: signer)
    }

    // Rule: version is EC_v1 or RSA_v1 (Payment Token Format Reference, paymentData keys).
    static func checkVersion(_ token: UnverifiedPaymentToken) throws(TokenError) -> PaymentTokenVersion {
        guard let version = PaymentTokenVersion(rawValue: token.version) else {
            throw TokenError(.unsupportedVersion, "version must be EC_v1 or RSA_v1")
        }
        return version
    }

    // Rule: EC_v1 carries ephemeralPublicKey only, RSA_v1 wrappedKey only (header keys table).
    static func checkHeaderMatchesVersion(_ token: UnverifiedPaymentToken, _ version: PaymentTokenVersion) throws(TokenError) {
        switch version {
        case .ecV1:
            guard token.ephemeralPublicKey != nil, token.wrappedKey == nil else {
                throw TokenError(.headerMismatch, "EC_v1 needs ephemeralPublicKey and no wrappedKey")
            }
        case .rsaV1:
            guard token.wrappedKey != nil, token.ephemeralPublicKey == nil else {
                throw TokenError(.headerMismatch, "RSA_v1 needs wrappedKey and no ephemeralPublicKey")
            }
        }
    }

    // Rule: signature is a detached PKCS#7 SignedData with one signer (header `signature` key).
    static func parseSignature(_ token: UnverifiedPaymentToken) throws(TokenError) -> (data: CMSSignedData, signer: CMSSignerInfo) {
        let cms: CMSSignedData
        do { cms = try CMSSignedData(der: token.signature) } catch {
            throw TokenError(.signatureMalformed, error.code.rawValue)
        }
        guard cms.isDetached else { throw TokenError(.signatureMalformed, "signature is not detached") }
        guard cms.signers.count == 1, let signer = cms.signers.first else {
            throw TokenError(.signatureMalformed, "expected one signer, found \(cms.signers.count)")
        }
        return (cms, signer)
    }

    // Rule: the CMS holds exactly Apple's leaf (1.2.840.113635.100.6.29) and intermediate
    // (1.2.840.113635.100.6.2.14) (Apple step 1.a).
    static func checkMarkerCertificates(_ cms: CMSSignedData) throws(TokenError) -> (Certificate, Certificate) {
        let leaves = cms.certificates.filter { $0.extensionValue(oid: AppleOID.leaf) != nil }
        let intermediates = cms.certificates.filter { $0.extensionValue(oid: AppleOID.intermediate) != nil }
        guard let leaf = leaves.first else { throw TokenError(.leafCertificateMissingOID, "no certificate carries \(AppleOID.leaf)") }
        guard let intermediate = intermediates.first else {
            throw TokenError(.intermediateCertificateMissingOID, "no certificate carries \(AppleOID.intermediate)")
        }
        guard leaves.count == 1, intermediates.count == 1, cms.certificates.count == 2, leaf != intermediate else {
            throw TokenError(.signatureMalformed, "signature must carry exactly the leaf and the intermediate")
        }
        return (leaf, intermediate)
    }

    // Rule: the signer is the marked leaf, not some other certificate.
    static func checkSignerIsLeaf(_ signer: CMSSignerInfo, _ leaf: Certificate) throws(TokenError) {
        guard signer.identifies(leaf) else { throw TokenError(.signatureMalformed, "signer is not the Apple leaf") }
    }

    // Rule: ecdsa-with-SHA256 / sha256WithRSA, i.e. SHA-256 digests (Apple step 1.d).
    static func checkDigestAlgorithm(_ signer: CMSSignerInfo) throws(TokenError) {
        guard signer.digestAlgorithm == .sha256 else {
            throw TokenError(.digestAlgorithmUnsupported, "digest algorithm \(signer.digestAlgorithmOID)")
        }
    }

    // Rule: the CMS signing time (RFC 5652 §11.3) must be present for the replay window (Apple step 1.e).
    static func checkSigningTimePresent(_ signer: CMSSignerInfo) throws(TokenError) -> Date {
        guard let time = signer.signingTime else { throw TokenError(.signingTimeMissing, "no signingTime attribute") }
        return time
    }

    // Rule: messageDigest equals SHA-256(ephemeralPublicKey|wrappedKey ‖ data ‖ transactionId ‖ applicationData)
    // (Apple step 1.d; RFC 5652 §11.2).
    static func checkMessageDigest(_ signer: CMSSignerInfo, _ token: UnverifiedPaymentToken) throws(TokenError) {
        guard let digest = signer.messageDigest else { throw TokenError(.signatureMalformed, "no messageDigest attribute") }
        guard constantTimeEqual(digest, Digest.sha256(token.signedContent)) else {
            throw TokenError(.messageDigestMismatch, "signed content differs from the token")
        }
    }

    // Rule: the signature over the signed attributes verifies with the leaf's key (Apple step 1.d).
    static func checkSignature(_ signer: CMSSignerInfo, _ leaf: Certificate) throws(TokenError) {
        do { try signer.verifySignedAttributes(with: leaf) } catch {
            throw TokenError(.signatureInvalid, "leaf signature does not verify")
        }
    }

    // Rule: leaf → intermediate → trusted root, valid at `now` (Apple steps 1.b–1.c).
    func checkChain(leaf: Certificate, intermediate: Certificate, now: Date) throws(TokenError) {
        let key = leaf.fingerprintSHA256 + intermediate.fingerprintSHA256
        if cache.contains(key, at: now) { return }
        let chain: [[UInt8]]
        do {
            chain = try CertificateChainVerifier.verify(leaf: leaf, intermediates: [intermediate], trustedRoots: trustedRoots, at: now)
        } catch {
            throw TokenError(.certificateChainInvalid, error.description)
        }
        guard chain.count == 3, chain[1] == intermediate.fingerprintSHA256,
              let root = trustedRoots.first(where: { $0.fingerprintSHA256 == chain[2] })
        else { throw TokenError(.certificateChainInvalid, "chain is not leaf → intermediate → root") }
        // The result holds while every certificate is within its validity (no revocation checking).
        let from = max(leaf.notBefore, intermediate.notBefore, root.notBefore)
        let until = min(leaf.notAfter, intermediate.notAfter, root.notAfter)
        // A leaf whose key the fast path cannot use (not P-256) still caches the chain, without a signer.
        let signer = try? CMSSignerKey(certificate: leaf)
        cache.insert(key, validFrom: from, validUntil: until, signer: signer, now: now)
    }

    // Rule: signingTime within tokenAgeMaxSeconds before `now`, and not ahead of it beyond the skew (Apple step 1.e).
    func checkFreshness(signingTime: Date, now: Date) throws(TokenError) {
        let age = now.timeIntervalSince(signingTime)
        guard age >= -Double(futureSkewMaxSeconds) else {
            throw TokenError(.signingTimeInFuture, "signed \(Int64(-age)) s after the verification time")
        }
        guard age <= Double(tokenAgeMaxSeconds) else {
            throw TokenError(.tokenExpired, "signed \(Int64(age)) s before the verification time, limit \(tokenAgeMaxSeconds)")
        }
    }
}

/// Thread-safe bounded cache of verified chains, keyed by leaf+intermediate fingerprints and valid
/// only within the certificates' common validity window. Entries also hold the leaf prepared for
/// signature verification, so cached tokens never re-parse certificates.
final class ChainCache: Sendable {
    private struct Entry {
        let validFrom: Date
        let validUntil: Date
        let signer: CMSSignerKey?
    }
    private let entries: Mutex<[[UInt8]: Entry]>
    let entriesMax: Int

    init(entriesMax: Int) {
        precondition(entriesMax >= 0, "negative cache size")
        self.entriesMax = entriesMax
        entries = Mutex([:])
    }

    var count: Int { entries.withLock { $0.count } }

    func contains(_ key: [UInt8], at now: Date) -> Bool {
        entries.withLock { map in
            guard let entry = map[key] else { return false }
            return entry.validFrom <= now && now <= entry.validUntil
        }
    }

    /// The prepared leaf of the chain under `key`, if cached, valid at `now` and usable by the fast path.
    func signer(_ key: [UInt8], at now: Date) -> CMSSignerKey? {
        entries.withLock { map in
            guard let entry = map[key], entry.validFrom <= now, now <= entry.validUntil else { return nil }
            return entry.signer
        }
    }

    func insert(_ key: [UInt8], validFrom: Date, validUntil: Date, signer: CMSSignerKey?, now: Date) {
        guard entriesMax > 0 else { return }
        entries.withLock { map in
            if map[key] == nil, map.count >= entriesMax {
                map = map.filter { $0.value.validUntil >= now }
                if map.count >= entriesMax, let victim = map.keys.first { map[victim] = nil }
            }
            map[key] = Entry(validFrom: validFrom, validUntil: validUntil, signer: signer)
        }
    }
}
