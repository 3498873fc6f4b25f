internal import COpenSSL

/// Elliptic-curve Diffie-Hellman on P-256.
public enum ECDH {
    /// The raw shared secret Z (x coordinate, 32 bytes) of `privateKey` and `peer`.
    public static func sharedSecret(privateKey: PrivateKey, peer: PublicKey) throws(CryptoError) -> SecretBytes {
        guard privateKey.kind == .ecP256, peer.kind == .ecP256 else {
            throw CryptoError(.keyTypeUnsupported, "ECDH needs two P-256 keys")
        }
        guard let ctx = EVP_PKEY_CTX_new(privateKey.key.pointer, nil) else {
            throw CryptoError.openssl(.opensslFailure, "EVP_PKEY_CTX_new")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var length = 0
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, peer.key.pointer) == 1,
              EVP_PKEY_derive(ctx, nil, &length) == 1, length == 32
        else { throw CryptoError.openssl(.decryptionFailed, "ECDH setup") }
        return try SecretBytes(count: length) { (buf: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            var written = length
            guard EVP_PKEY_derive(ctx, buf.baseAddress?.assumingMemoryBound(to: UInt8.self), &written) == 1,
                  written == length
            else { throw CryptoError.openssl(.decryptionFailed, "ECDH derive") }
        }
    }
}

extension ECDH {
    /// DER prefix of a P-256 SubjectPublicKeyInfo with an uncompressed point (RFC 5480 §2), as Apple
    /// sends `ephemeralPublicKey`.
    static let p256SPKIPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
        0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]
    /// Length of an uncompressed P-256 point (0x04 ‖ X ‖ Y).
    static let p256PointBytes = 65

    /// The shared secret Z of `privateKey` and the peer's SubjectPublicKeyInfo DER. A P-256 SPKI with an
    /// uncompressed point goes straight to the curve arithmetic (the point is checked to be on the curve);
    /// any other form is parsed by OpenSSL's generic decoder first.
    public static func sharedSecret(privateKey: PrivateKey, peerSPKI: [UInt8]) throws(CryptoError) -> SecretBytes {
        guard let ecKey = privateKey.ecKey, peerSPKI.count == p256SPKIPrefix.count + p256PointBytes,
              peerSPKI.starts(with: p256SPKIPrefix)
        else {
            return try sharedSecret(privateKey: privateKey, peer: PublicKey(spkiDER: peerSPKI))
        }
        return try SecretBytes(count: 32) { (buf: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            let ok = peerSPKI.withUnsafeBufferPointer { spki in
                tender_ecdh_p256(ecKey.pointer, spki.baseAddress.map { $0 + p256SPKIPrefix.count }, p256PointBytes,
                                 buf.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
            guard ok == 1 else { throw CryptoError.openssl(.decryptionFailed, "ECDH with the peer point failed") }
        }
    }
}

/// RSA-OAEP with SHA-256 and MGF1-SHA-256 (Apple Pay RSA_v1 key wrapping).
public enum RSAOAEP {
    /// Unwraps `ciphertext` with `privateKey`.
    public static func decrypt(privateKey: PrivateKey, ciphertext: [UInt8]) throws(CryptoError) -> SecretBytes {
        guard case .rsa = privateKey.kind else { throw CryptoError(.keyTypeUnsupported, "RSA-OAEP needs an RSA key") }
        let ctx = try context(privateKey.key, encrypt: false)
        defer { EVP_PKEY_CTX_free(ctx) }
        var length = 0
        guard ciphertext.withUnsafeBufferPointer({ EVP_PKEY_decrypt(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw CryptoError.openssl(.decryptionFailed, "RSA-OAEP size")
        }
        var out = [UInt8](repeating: 0, count: length)
        defer { out.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        guard ciphertext.withUnsafeBufferPointer({ c in
            out.withUnsafeMutableBufferPointer { o in EVP_PKEY_decrypt(ctx, o.baseAddress, &length, c.baseAddress, c.count) }
        }) == 1 else { throw CryptoError.openssl(.decryptionFailed, "RSA-OAEP decrypt") }
        return SecretBytes(count: length) { buf in
            out.withUnsafeBytes { buf.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }
    }

    /// Wraps `plaintext` for `publicKey` (used by the sandbox and tests).
    public static func encrypt(publicKey: PublicKey, plaintext: SecretBytes) throws(CryptoError) -> [UInt8] {
        guard case .rsa = publicKey.kind else { throw CryptoError(.keyTypeUnsupported, "RSA-OAEP needs an RSA key") }
        let ctx = try context(publicKey.key, encrypt: true)
        defer { EVP_PKEY_CTX_free(ctx) }
        var length = 0
        let ok = plaintext.withUnsafeBytes { p -> Bool in
            let base = p.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return EVP_PKEY_encrypt(ctx, nil, &length, base, p.count) == 1
        }
        guard ok else { throw CryptoError.openssl(.opensslFailure, "RSA-OAEP size") }
        var out = [UInt8](repeating: 0, count: length)
        let ok2 = plaintext.withUnsafeBytes { p -> Bool in
            let base = p.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return out.withUnsafeMutableBufferPointer { EVP_PKEY_encrypt(ctx, $0.baseAddress, &length, base, p.count) } == 1
        }
        guard ok2 else { throw CryptoError.openssl(.opensslFailure, "RSA-OAEP encrypt") }
        return Array(out.prefix(length))
    }

    private static func context(_ key: EVPKey, encrypt: Bool) throws(CryptoError) -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new(key.pointer, nil) else { throw CryptoError.openssl(.opensslFailure, "EVP_PKEY_CTX_new") }
        guard (encrypt ? EVP_PKEY_encrypt_init(ctx) : EVP_PKEY_decrypt_init(ctx)) == 1,
              EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1,
              EVP_PKEY_CTX_set_rsa_oaep_md(ctx, EVP_sha256()) == 1,
              EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, EVP_sha256()) == 1
        else {
            EVP_PKEY_CTX_free(ctx)
            throw CryptoError.openssl(.opensslFailure, "RSA-OAEP parameters")
        }
        return ctx
    }
}

/// AES-GCM with a 128- or 256-bit key (chosen by key length) and a 16-byte tag appended to the ciphertext.
public enum AESGCM {
    /// Tag length in bytes.
    public static let tagBytes = 16

    /// Encrypts `plaintext`; returns ciphertext ‖ tag.
    public static func seal(key: SecretBytes, nonce: [UInt8], plaintext: [UInt8],
        associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        let ctx = try context(key: key, nonce: nonce, encrypt: true)
        defer { EVP_CIPHER_CTX_free(ctx) }
        try addAAD(ctx, associatedData)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagBytes)
        var length: Int32 = 0
        var total = 0
        if !plaintext.isEmpty {
            guard plaintext.withUnsafeBufferPointer({ p in out.withUnsafeMutableBufferPointer {
                EVP_EncryptUpdate(ctx, $0.baseAddress, &length, p.baseAddress, Int32(p.count)) } }) == 1
            else { throw CryptoError.openssl(.opensslFailure, "AES-GCM encrypt") }
            total = Int(length)
        }
        guard out.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(ctx, $0.baseAddress.map { $0 + total }, &length) }) == 1
        else { throw CryptoError.openssl(.opensslFailure, "AES-GCM final") }
        total += Int(length)
        guard out.withUnsafeMutableBufferPointer({
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagBytes), $0.baseAddress.map { $0 + total })
        }) == 1 else { throw CryptoError.openssl(.opensslFailure, "AES-GCM tag") }
        return out
    }

    /// Decrypts ciphertext ‖ tag, failing with `decryption_failed` when the tag does not authenticate.
    public static func open(key: SecretBytes, nonce: [UInt8], sealed: [UInt8],
        associatedData: [UInt8] = []) throws(CryptoError) -> SecretBytes {
        guard sealed.count >= tagBytes else { throw CryptoError(.decryptionFailed, "ciphertext shorter than the tag") }
        let ctx = try context(key: key, nonce: nonce, encrypt: false)
        defer { EVP_CIPHER_CTX_free(ctx) }
        try addAAD(ctx, associatedData)
        let bodyCount = sealed.count - tagBytes
        var tag = Array(sealed[bodyCount...])
        return try SecretBytes(count: bodyCount) { (buf: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            let out = buf.baseAddress?.assumingMemoryBound(to: UInt8.self)
            var length: Int32 = 0
            var total = 0
            if bodyCount > 0 {
                guard sealed.withUnsafeBufferPointer({ EVP_DecryptUpdate(ctx, out, &length, $0.baseAddress, Int32(bodyCount)) }) == 1
                else { throw CryptoError.openssl(.decryptionFailed, "AES-GCM decrypt") }
                total = Int(length)
            }
            guard tag.withUnsafeMutableBytes({ EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagBytes), $0.baseAddress) }) == 1
            else { throw CryptoError.openssl(.opensslFailure, "AES-GCM set tag") }
            var scratch = [UInt8](repeating: 0, count: 32)
            let finalOK = scratch.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx, $0.baseAddress, &length) } == 1
            guard finalOK, total == bodyCount else {
                buf.initializeMemory(as: UInt8.self, repeating: 0)
                throw CryptoError.openssl(.decryptionFailed, "AES-GCM authentication failed")
            }
        }
    }

    private static func context(key: SecretBytes, nonce: [UInt8], encrypt: Bool) throws(CryptoError) -> OpaquePointer {
        let cipher: OpaquePointer?
        switch key.count {
        case 16: cipher = FetchedCipher.aes128GCM.pointer ?? EVP_aes_128_gcm()
        case 32: cipher = FetchedCipher.aes256GCM.pointer ?? EVP_aes_256_gcm()
        default: throw CryptoError(.invalidArgument, "AES-GCM key must be 16 or 32 bytes")
        }
        guard (12...16).contains(nonce.count) else { throw CryptoError(.invalidArgument, "AES-GCM nonce must be 12–16 bytes") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl(.opensslFailure, "EVP_CIPHER_CTX_new") }
        let initCipher = encrypt ? EVP_EncryptInit_ex(ctx, cipher, nil, nil, nil) : EVP_DecryptInit_ex(ctx, cipher, nil, nil, nil)
        let ok = initCipher == 1
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1
            && key.withUnsafeBytes { k in
                nonce.withUnsafeBufferPointer { n in
                    let kp = k.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    return (encrypt ? EVP_EncryptInit_ex(ctx, nil, nil, kp, n.baseAddress)
                                    : EVP_DecryptInit_ex(ctx, nil, nil, kp, n.baseAddress)) == 1
                }
            }
        guard ok else {
            EVP_CIPHER_CTX_free(ctx)
            throw CryptoError.openssl(.opensslFailure, "AES-GCM init")
        }
        return ctx
    }

    private static func addAAD(_ ctx: OpaquePointer, _ aad: [UInt8]) throws(CryptoError) {
        guard !aad.isEmpty else { return }
        var length: Int32 = 0
        guard aad.withUnsafeBufferPointer({ EVP_CipherUpdate(ctx, nil, &length, $0.baseAddress, Int32($0.count)) }) == 1
        else { throw CryptoError.openssl(.opensslFailure, "AES-GCM AAD") }
    }
}

/// A cipher implementation fetched from the default provider once. OpenSSL 3 otherwise re-fetches it by
/// name (under a lock) on every init; fetched ciphers are immutable and safe to share between threads.
final class FetchedCipher: @unchecked Sendable {
    let pointer: OpaquePointer?
    init(_ name: String) { pointer = EVP_CIPHER_fetch(nil, name, nil) }
    deinit { EVP_CIPHER_free(pointer) }

    static let aes128GCM = FetchedCipher("AES-128-GCM")
    static let aes256GCM = FetchedCipher("AES-256-GCM")
}

/// Versioned AES-256-GCM envelope for private keys at rest (PCI DSS 3.6.1.2: encrypted under a KEK).
/// Format v1: 0x01 ‖ 12-byte random nonce ‖ ciphertext ‖ 16-byte tag; AAD = 0x01 ‖ associatedData.
public enum KeyEncryption {
    /// The only format version written.
    public static let version: UInt8 = 1
    static let nonceBytes = 12

    /// Seals `plaintext` under the 32-byte `keyEncryptingKey`, binding `associatedData` (e.g. the key id).
    public static func seal(plaintext: SecretBytes, keyEncryptingKey: SecretBytes, associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard keyEncryptingKey.count == 32 else { throw CryptoError(.invalidArgument, "key-encrypting key must be 32 bytes") }
        let nonce = SecureRandom.bytes(nonceBytes)
        let body = try AESGCM.seal(key: keyEncryptingKey, nonce: nonce, plaintext: plaintext.unsafeRevealedCopy(),
                                   associatedData: [version] + associatedData)
        return [version] + nonce + body
    }

    /// Array-based convenience for `seal(plaintext:keyEncryptingKey:associatedData:)`.
    public static func seal(plaintext: [UInt8], keyEncryptingKey: [UInt8], associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        try seal(plaintext: SecretBytes(plaintext), keyEncryptingKey: SecretBytes(keyEncryptingKey), associatedData: associatedData)
    }

    /// Array-key convenience for `open(sealed:keyEncryptingKey:associatedData:)`.
    public static func open(sealed: [UInt8], keyEncryptingKey: [UInt8], associatedData: [UInt8]) throws(CryptoError) -> SecretBytes {
        try open(sealed: sealed, keyEncryptingKey: SecretBytes(keyEncryptingKey), associatedData: associatedData)
    }

    /// Opens a v1 envelope; `decryption_failed` if the KEK, data or associated data differ.
    public static func open(sealed: [UInt8], keyEncryptingKey: SecretBytes, associatedData: [UInt8]) throws(CryptoError) -> SecretBytes {
        guard keyEncryptingKey.count == 32 else { throw CryptoError(.invalidArgument, "key-encrypting key must be 32 bytes") }
        guard let first = sealed.first else { throw CryptoError(.sealedKeyMalformed, "empty envelope") }
        guard first == version else { throw CryptoError(.unsupportedVersion, "envelope version \(first)") }
        guard sealed.count >= 1 + nonceBytes + AESGCM.tagBytes else { throw CryptoError(.sealedKeyMalformed, "envelope too short") }
        let nonce = Array(sealed[1...nonceBytes])
        return try AESGCM.open(key: keyEncryptingKey, nonce: nonce, sealed: Array(sealed[(1 + nonceBytes)...]),
                               associatedData: [version] + associatedData)
    }
}
