internal import COpenSSL

/// Hashing, MACs, randomness and constant-time comparison over OpenSSL 3.
public enum Digest {
    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                // Direct SHA-256 (see tender_sha256); it cannot fail on a valid buffer, so a failure is a broken library.
                precondition(tender_sha256(input.baseAddress, input.count, output.baseAddress) == 1, "SHA-256 failed")
            }
        }
        return out
    }

    /// SHA-256 of the UTF-8 bytes of `text`.
    public static func sha256(_ text: String) -> [UInt8] { sha256(Array(text.utf8)) }

    /// HMAC-SHA-256 of `message` under `key`.
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress, m.count,
                             o.baseAddress, &length)
                }
            }
        }
        return out
    }
}

/// Compares two byte strings in time that depends only on their lengths.
public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 }
    }
}

/// Cryptographically secure random bytes.
public enum SecureRandom {
    /// Returns `count` random bytes from OpenSSL's CSPRNG; traps if the generator is unavailable,
    /// since continuing without randomness would mint guessable secrets.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= 1 << 20, "random byte count out of range")
        var out = [UInt8](repeating: 0, count: count)
        let rc = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(rc == 1, "OpenSSL RAND_bytes failed")
        return out
    }
}

/// Lower-case hex encoding.
public func hexEncoded(_ bytes: [UInt8]) -> String {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
