import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The key-encrypting key for private keys at rest (`TENDER_MASTER_KEY_FILE`).
///
/// The file holds 32 random bytes as 64 hex characters. A missing file is created with mode 0600 (and
/// its creation logged by the caller); a file readable by group or others is refused, as is anything
/// that is not exactly a 32-byte key.
public enum MasterKey {
    public static let keyBytes = 32

    /// Loads the key, creating the file when it does not exist. `created` tells the caller to log it.
    public static func loadOrCreate(path: String) throws(TenderError) -> (key: SecretBytes, created: Bool) {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { throw TenderError("master_key_unreadable", "cannot stat \(path)") }
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            let hex = hexEncoded(SecureRandom.bytes(keyBytes)) + "\n"
            // O_EXCL: two processes racing to create the key must not each write their own.
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            if fd >= 0 {
                let written = hex.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
                fsync(fd)
                close(fd)
                guard written == hex.utf8.count else { throw TenderError("master_key_unwritable", "cannot write \(path)") }
                return (try load(path: path), true)
            }
            guard errno == EEXIST else { throw TenderError("master_key_unwritable", "cannot create \(path)") }
        }
        return (try load(path: path), false)
    }

    /// Loads an existing key file, refusing unsafe permissions.
    public static func load(path: String) throws(TenderError) -> SecretBytes {
        var info = stat()
        guard stat(path, &info) == 0 else { throw TenderError("master_key_unreadable", "cannot stat \(path)") }
        guard info.st_mode & 0o077 == 0 else {
            throw TenderError("master_key_permissions", "\(path) is readable by group or others; chmod 600 it")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 1_024,
              let data = FileManager.default.contents(atPath: path) else {
            throw TenderError("master_key_unreadable", "\(path) is not a small regular file")
        }
        var text = Array(data)
        defer { for i in text.indices { text[i] = 0 } }
        while let last = text.last, last == 0x0a || last == 0x0d || last == 0x20 { text.removeLast() }
        guard text.count == keyBytes * 2, let bytes = hexDecoded(text) else {
            throw TenderError("master_key_malformed", "\(path) must hold 64 hex characters (32 bytes)")
        }
        return SecretBytes(bytes)
    }

    static func hexDecoded(_ text: [UInt8]) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x61...0x66: c - 0x61 + 10
            case 0x41...0x46: c - 0x41 + 10
            default: nil
            }
        }
        guard text.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(text.count / 2)
        var i = 0
        while i < text.count {
            guard let hi = nibble(text[i]), let lo = nibble(text[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
