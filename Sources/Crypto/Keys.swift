internal import COpenSSL
import Foundation

/// The key algorithms Tender handles.
public enum KeyKind: Equatable, Sendable {
    /// EC on NIST P-256 (Apple Pay EC_v1, Apple's signing leaves).
    case ecP256
    /// EC on another named curve (e.g. secp384r1 in Apple's roots); verification only.
    case ecOther(curve: String)
    /// RSA with the given modulus size in bits (Apple Pay RSA_v1).
    case rsa(bits: Int)
}

/// Owns one `EVP_PKEY`; freed in deinit.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer
    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    func kind() throws(CryptoError) -> KeyKind {
        switch EVP_PKEY_get_base_id(pointer) {
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(pointer, &name, name.count, &length) == 1 else {
                throw CryptoError.openssl(.keyTypeUnsupported, "EC key without a named curve")
            }
            let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return curve == "prime256v1" || curve == "P-256" ? .ecP256 : .ecOther(curve: curve)
        case EVP_PKEY_RSA:
            return .rsa(bits: Int(EVP_PKEY_get_bits(pointer)))
        default:
            throw CryptoError(.keyTypeUnsupported, "only P-256 EC and RSA keys are supported")
        }
    }

    func spkiDER() throws(CryptoError) -> [UInt8] {
        let length = i2d_PUBKEY(pointer, nil)
        guard length > 0 else { throw CryptoError.openssl(.opensslFailure, "i2d_PUBKEY") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_PUBKEY(pointer, &p)
        }
        guard written == length else { throw CryptoError.openssl(.opensslFailure, "i2d_PUBKEY") }
        return der
    }
}

/// Owns one legacy `EC_KEY` on P-256, used read-only (hence shareable) by the per-token fast paths.
final class ECKeyHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init?(p256From key: EVPKey) {
        guard let ec = tender_ec_key_p256_from_pkey(key.pointer) else {
            CryptoError.clearQueue()
            return nil
        }
        pointer = ec
    }
    deinit { tender_ec_key_free(pointer) }
}

/// A public key (P-256 or RSA) parsed from SubjectPublicKeyInfo DER.
public final class PublicKey: @unchecked Sendable {
    let key: EVPKey
    /// The algorithm and size.
    public let kind: KeyKind
    /// DER SubjectPublicKeyInfo (what Apple's `publicKeyHash` and `ephemeralPublicKey` are made of).
    public let spkiDER: [UInt8]

    /// `knownSPKI` skips re-encoding through OpenSSL's generic encoder (costly in 3.0) when the caller
    /// already holds the exact DER.
    init(key: EVPKey, knownSPKI: [UInt8]? = nil) throws(CryptoError) {
        self.key = key
        self.kind = try key.kind()
        if let knownSPKI {
            spkiDER = knownSPKI
        } else {
            spkiDER = try key.spkiDER()
        }
    }

    /// Parses DER SubjectPublicKeyInfo.
    public convenience init(spkiDER der: [UInt8]) throws(CryptoError) {
        var consumedAll = false
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p = buf.baseAddress
            let key = d2i_PUBKEY(nil, &p, buf.count)
            consumedAll = key != nil && p == buf.baseAddress.map { $0 + buf.count }
            return key
        }
        guard let parsed else { throw CryptoError.openssl(.keyMalformed, "SubjectPublicKeyInfo does not parse") }
        // With trailing bytes the stored form is OpenSSL's re-encoding, as before.
        try self.init(key: EVPKey(owning: parsed), knownSPKI: consumedAll ? der : nil)
    }

    /// True when both keys have the same public components.
    public func matches(_ other: PublicKey) -> Bool { EVP_PKEY_eq(key.pointer, other.key.pointer) == 1 }
}

/// A private key (P-256 or RSA) loaded from the forms merchants have, or generated.
public final class PrivateKey: @unchecked Sendable, CustomStringConvertible {
    let key: EVPKey
    /// The algorithm and size.
    public let kind: KeyKind
    /// The matching public key.
    public let publicKey: PublicKey

    /// EC_KEY view for P-256 keys, converted once so ECDH per token skips provider lookups.
    let ecKey: ECKeyHandle?

    init(key: EVPKey) throws(CryptoError) {
        self.key = key
        self.kind = try key.kind()
        self.publicKey = try PublicKey(key: key)
        ecKey = kind == .ecP256 ? ECKeyHandle(p256From: key) : nil
    }

    /// Loads a key from text: PEM (`EC PRIVATE KEY` SEC1, `PRIVATE KEY` PKCS#8, `RSA PRIVATE KEY`),
    /// possibly after an `EC PARAMETERS` block, `Bag Attributes` lines or certificates; or bare base64 DER.
    public convenience init(pemOrBase64 text: String) throws(CryptoError) {
        let blocks = try PEM.blocks(in: text)
        if blocks.isEmpty {
            // Bare base64 DER, as some dashboards export it.
            let compact = text.filter { !$0.isWhitespace }
            guard !compact.isEmpty, let data = Data(base64Encoded: compact) else {
                throw CryptoError(.keyMalformed, "no PEM block and not base64 DER")
            }
            try self.init(der: Array(data))
            return
        }
        if blocks.contains(where: { $0.label == "ENCRYPTED PRIVATE KEY" || $0.headers.contains { $0.hasPrefix("Proc-Type") } }) {
            throw CryptoError(.keyEncryptedUnsupported, "decrypt the key before importing it")
        }
        let keyLabels: Set<String> = ["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"]
        let keyBlocks = blocks.filter { keyLabels.contains($0.label) }
        guard keyBlocks.count == 1, let block = keyBlocks.first else {
            throw CryptoError(.keyMalformed, "expected exactly one private key block, found \(keyBlocks.count)")
        }
        try self.init(der: block.der)
    }

    /// Loads DER: PKCS#8, SEC1 EC or PKCS#1 RSA.
    public convenience init(der: [UInt8]) throws(CryptoError) {
        // d2i_AutoPrivateKey recognises PKCS#8 and the type-specific (SEC1, PKCS#1) structures.
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p = buf.baseAddress
            return d2i_AutoPrivateKey(nil, &p, buf.count)
        }
        guard let parsed else { throw CryptoError.openssl(.keyMalformed, "private key DER does not parse") }
        try self.init(key: EVPKey(owning: parsed))
    }

    /// Generates a fresh P-256 key.
    public static func generateP256() throws(CryptoError) -> PrivateKey {
        try generate(algorithm: "EC") { ctx in EVP_PKEY_CTX_set_group_name(ctx, "P-256") }
    }

    /// Generates a fresh RSA key of `bits` (2048 or more).
    public static func generateRSA(bits: Int) throws(CryptoError) -> PrivateKey {
        guard bits >= 2048, bits <= 8192 else { throw CryptoError(.invalidArgument, "RSA size out of range") }
        return try generate(algorithm: "RSA") { ctx in EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) }
    }

    private static func generate(algorithm: String, configure: (OpaquePointer) -> Int32) throws(CryptoError) -> PrivateKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw CryptoError.openssl(.opensslFailure, "EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var out: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, configure(ctx) == 1, EVP_PKEY_generate(ctx, &out) == 1, let out else {
            throw CryptoError.openssl(.opensslFailure, "key generation")
        }
        return try PrivateKey(key: EVPKey(owning: out))
    }

    /// PKCS#8 DER of the key, in a zeroing buffer.
    public func pkcs8DER() throws(CryptoError) -> SecretBytes {
        guard let info = EVP_PKEY2PKCS8(key.pointer) else { throw CryptoError.openssl(.opensslFailure, "EVP_PKEY2PKCS8") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        let length = i2d_PKCS8_PRIV_KEY_INFO(info, nil)
        guard length > 0 else { throw CryptoError.openssl(.opensslFailure, "i2d_PKCS8_PRIV_KEY_INFO") }
        return try SecretBytes(count: Int(length)) { (buf: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            var p = buf.baseAddress?.assumingMemoryBound(to: UInt8.self)
            guard i2d_PKCS8_PRIV_KEY_INFO(info, &p) == length else {
                throw CryptoError.openssl(.opensslFailure, "i2d_PKCS8_PRIV_KEY_INFO")
            }
        }
    }

    /// Type-specific DER (SEC1 for EC, PKCS#1 for RSA), as older tools write it.
    public func traditionalDER() throws(CryptoError) -> SecretBytes {
        let length = i2d_PrivateKey(key.pointer, nil)
        guard length > 0 else { throw CryptoError.openssl(.opensslFailure, "i2d_PrivateKey") }
        return try SecretBytes(count: Int(length)) { (buf: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            var p = buf.baseAddress?.assumingMemoryBound(to: UInt8.self)
            guard i2d_PrivateKey(key.pointer, &p) == length else { throw CryptoError.openssl(.opensslFailure, "i2d_PrivateKey") }
        }
    }

    /// PKCS#8 PEM (`PRIVATE KEY`); the returned String cannot be zeroed, so write it out and drop it.
    public func unsafePKCS8PEM() throws(CryptoError) -> String {
        try PEM.encode(label: "PRIVATE KEY", der: pkcs8DER().unsafeRevealedCopy())
    }

    /// Never prints key material.
    public var description: String { "PrivateKey(\(kind), redacted)" }
}
