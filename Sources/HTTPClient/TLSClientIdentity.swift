internal import CCurl

/// Private-key PEM bytes held outside Swift arrays so they can be zeroed on release and never printed.
public final class SecretPEM: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    // @unchecked Sendable: the buffer is written once in init and only read until deinit zeroes it.
    private let storage: UnsafeMutableBufferPointer<UInt8>

    /// Copies `bytes`; the caller should zero its own copy (see `init(zeroingSource:)`).
    public init(_ bytes: [UInt8]) {
        storage = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        storage.initialize(repeating: 0)
        _ = storage.update(fromContentsOf: bytes)
        count = bytes.count
    }

    /// Copies `source` and then overwrites it with zeros, so only this object holds the key.
    public convenience init(zeroingSource source: inout [UInt8]) {
        self.init(source)
        source.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { tender_zero_memory(base, raw.count) }
        }
    }

    /// Number of PEM bytes held.
    public let count: Int

    deinit {
        // explicit_bzero cannot be optimised away, unlike a plain store before free.
        tender_zero_memory(storage.baseAddress, storage.count)
        storage.deallocate()
    }

    /// Lends the bytes for the duration of `body`; do not let the pointer escape.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: storage[0..<count])))
    }

    /// Redacted: keys never reach logs (STYLE.md, errors and logs).
    public var description: String { "SecretPEM(redacted, \(count) bytes)" }
    /// Redacted like `description`.
    public var debugDescription: String { description }
    /// Hides the storage from `dump` and reflection.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}

/// A client certificate and its private key, both PEM, used for mutual TLS (Apple's Merchant Identity Certificate).
public struct TLSClientIdentity: Sendable, CustomStringConvertible {
    /// The certificate chain (leaf first) in PEM.
    public var certificatePEM: [UInt8]
    /// The unencrypted private key in PEM (PKCS#8 or traditional).
    public var privateKeyPEM: SecretPEM

    /// Pairs a certificate with its key.
    public init(certificatePEM: [UInt8], privateKeyPEM: SecretPEM) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
    }

    /// Never includes the key.
    public var description: String {
        "TLSClientIdentity(certificate: \(certificatePEM.count) bytes, key: \(privateKeyPEM))"
    }
}
