internal import COpenSSL

/// Incremental SHA-256 over OpenSSL's EVP digest API, for inputs streamed in chunks (settlement
/// files are hashed while they are read, never loaded whole).
public final class SHA256Hasher {
    private let context: OpaquePointer?
    private var finished = false

    /// A hasher ready for `update`.
    public init() {
        context = EVP_MD_CTX_new()
        _ = EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Feeds `bytes`; ignored after `finalize()`.
    public func update(_ bytes: ArraySlice<UInt8>) {
        guard !finished, !bytes.isEmpty else { return }
        bytes.withUnsafeBufferPointer { buffer in
            _ = EVP_DigestUpdate(context, buffer.baseAddress, buffer.count)
        }
    }

    /// Feeds `bytes`.
    public func update(_ bytes: [UInt8]) { update(bytes[...]) }

    /// The 32-byte digest of everything fed so far; the hasher is spent afterwards.
    public func finalize() -> [UInt8] {
        precondition(!finished, "SHA256Hasher.finalize called twice")
        finished = true
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        out.withUnsafeMutableBufferPointer { output in
            _ = EVP_DigestFinal_ex(context, output.baseAddress, &length)
        }
        return out
    }
}
