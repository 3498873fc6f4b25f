internal import COpenSSL
import Foundation

/// A PKCS#10 certificate signing request (RFC 2986), as Apple's developer portal takes it to issue a
/// payment-processing or merchant-identity certificate.
public struct CertificateRequest: Sendable {
    /// The request in DER.
    public let der: [UInt8]

    /// Builds a request for `key`'s public key with subject CN = `commonName`, signed with `key`
    /// (SHA-256), which proves to the CA that the requester holds the private key.
    public static func make(key: PrivateKey, commonName: String, emailAddress: String? = nil) throws(CryptoError) -> CertificateRequest {
        guard !commonName.isEmpty, commonName.utf8.count <= 64 else {
            throw CryptoError(.invalidArgument, "common name must be 1-64 bytes")
        }
        guard let req = X509_REQ_new() else { throw CryptoError.openssl(.opensslFailure, "X509_REQ_new") }
        defer { X509_REQ_free(req) }
        guard let name = X509_NAME_new() else { throw CryptoError.openssl(.opensslFailure, "X509_NAME_new") }
        defer { X509_NAME_free(name) }
        var ok = X509_REQ_set_version(req, 0) == 1
        if let email = emailAddress {
            ok = ok && X509_NAME_add_entry_by_txt(name, "emailAddress", MBSTRING_UTF8, email, -1, -1, 0) == 1
        }
        ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0) == 1
        ok = ok && X509_REQ_set_subject_name(req, name) == 1
        ok = ok && X509_REQ_set_pubkey(req, key.key.pointer) == 1
        guard ok else { throw CryptoError.openssl(.opensslFailure, "certificate request fields") }
        guard X509_REQ_sign(req, key.key.pointer, EVP_sha256()) > 0 else {
            throw CryptoError.openssl(.opensslFailure, "X509_REQ_sign")
        }
        let length = i2d_X509_REQ(req, nil)
        guard length > 0 else { throw CryptoError.openssl(.opensslFailure, "i2d_X509_REQ") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_X509_REQ(req, &p)
        }
        guard written == length else { throw CryptoError.openssl(.opensslFailure, "i2d_X509_REQ") }
        return CertificateRequest(der: der)
    }

    /// `-----BEGIN CERTIFICATE REQUEST-----` text, the form Apple's portal uploads.
    public var pem: String { PEM.encode(label: "CERTIFICATE REQUEST", der: der) }

    /// Parses a DER request and checks its self-signature; returns the requested public key.
    public static func verifiedPublicKey(der: [UInt8]) throws(CryptoError) -> PublicKey {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p = buf.baseAddress
            return d2i_X509_REQ(nil, &p, buf.count)
        }
        guard let parsed else { throw CryptoError.openssl(.certificateMalformed, "certificate request does not parse") }
        defer { X509_REQ_free(parsed) }
        guard let key = X509_REQ_get_pubkey(parsed) else { throw CryptoError.openssl(.certificateMalformed, "request public key") }
        let evp = EVPKey(owning: key)
        guard X509_REQ_verify(parsed, evp.pointer) == 1 else {
            throw CryptoError.openssl(.signatureInvalid, "certificate request signature")
        }
        return try PublicKey(key: evp)
    }
}

extension Certificate {
    /// Parses one certificate given as DER (Apple's `.cer` downloads) or as PEM text.
    public convenience init(derOrPEM bytes: [UInt8]) throws(CryptoError) {
        // DER starts with a SEQUENCE tag; PEM (and any preamble before it) is text.
        if bytes.first == 0x30 {
            try self.init(der: bytes)
        } else {
            try self.init(pem: String(decoding: bytes, as: UTF8.self))
        }
    }
}
