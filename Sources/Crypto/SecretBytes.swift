internal import COpenSSL

/// A secret byte buffer (keys, shared secrets, plaintexts) kept in one heap allocation that is zeroed
/// on deinit (PCI DSS 3.3.1: render SAD unrecoverable); it never prints or mirrors its contents.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    // Immutable after init, so sharing across threads is safe.
    private let storage: UnsafeMutableRawBufferPointer

    /// Number of bytes held.
    public let count: Int

    /// Copies `bytes` into a zeroing buffer (the caller's array is outside our control).
    public convenience init(_ bytes: [UInt8]) {
        self.init(count: bytes.count) { buffer in
            bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        }
    }

    /// Allocates `count` bytes and lets `fill` write them in place; the buffer is zeroed before and after use.
    public init<E: Error>(count: Int, fill: (UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) {
        precondition(count >= 0, "negative secret length")
        // Fill a local buffer first: a class whose stored properties are all set runs deinit when its
        // init throws, so assigning `storage` before `fill` could free the buffer twice.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        do {
            try fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
        } catch {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
            throw error
        }
        storage = buffer
        self.count = count
    }

    deinit {
        OPENSSL_cleanse(storage.baseAddress, storage.count)
        storage.deallocate()
    }

    /// Gives temporary read access; do not let the pointer escape.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// Constant-time comparison with `other`.
    public func constantTimeEquals(_ other: [UInt8]) -> Bool {
        guard other.count == count else { return false }
        if count == 0 { return true }
        return other.withUnsafeBytes { CRYPTO_memcmp(storage.baseAddress, $0.baseAddress, count) == 0 }
    }

    /// Copies the secret into an ordinary array, which will NOT be zeroed; for tests and wire encodings only.
    public func unsafeRevealedCopy() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// Shows only the length.
    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
    /// Shows only the length.
    public var debugDescription: String { description }
    /// Hides the storage from `dump` and debuggers' mirrors.
    public var customMirror: Mirror { Mirror(self, children: ["count": count], displayStyle: .struct) }
}
