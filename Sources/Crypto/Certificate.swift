internal import COpenSSL
public import Foundation

/// One X.509 extension.
public struct CertificateExtension: Sendable, Equatable {
    /// Dotted OID, e.g. `1.2.840.113635.100.6.29`.
    public let oid: String
    /// Whether the extension is marked critical.
    public let isCritical: Bool
    /// The raw extnValue contents (the DER inside the OCTET STRING).
    public let value: [UInt8]

    /// Creates an extension description (for `CertificateTemplate.customExtensions`).
    public init(oid: String, isCritical: Bool, value: [UInt8]) {
        self.oid = oid
        self.isCritical = isCritical
        self.value = value
    }
}

/// A parsed X.509 certificate; owns its `X509` handle.
public final class Certificate: @unchecked Sendable, Hashable, CustomStringConvertible {
    let pointer: OpaquePointer
    /// The DER encoding.
    public let der: [UInt8]
    /// SHA-256 of the DER encoding (the usual "fingerprint").
    public let fingerprintSHA256: [UInt8]
    /// Subject distinguished name, RFC 2253 form.
    public let subject: String
    /// Issuer distinguished name, RFC 2253 form.
    public let issuer: String
    /// Serial number, big-endian magnitude bytes.
    public let serialNumber: [UInt8]
    /// Start of validity.
    public let notBefore: Date
    /// End of validity.
    public let notAfter: Date
    /// All extensions in certificate order.
    public let extensions: [CertificateExtension]
    /// The subject public key.
    public let publicKey: PublicKey

    init(owning pointer: OpaquePointer) throws(CryptoError) {
        self.pointer = pointer
        let length = i2d_X509(pointer, nil)
        guard length > 0 else {
            X509_free(pointer)
            throw CryptoError.openssl(.certificateMalformed, "i2d_X509")
        }
        var der = [UInt8](repeating: 0, count: Int(length))
        _ = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_X509(pointer, &p)
        }
        self.der = der
        fingerprintSHA256 = Digest.sha256(der)
        subject = Certificate.name(X509_get_subject_name(pointer))
        issuer = Certificate.name(X509_get_issuer_name(pointer))
        if let serial = X509_get0_serialNumber(pointer), let data = ASN1_STRING_get0_data(serial) {
            serialNumber = Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(serial))))
        } else {
            serialNumber = []
        }
        var parsedExtensions: [CertificateExtension] = []
        for index in 0..<max(0, X509_get_ext_count(pointer)) {
            guard let ext = X509_get_ext(pointer, index), let object = X509_EXTENSION_get_object(ext) else { continue }
            var value: [UInt8] = []
            if let octets = X509_EXTENSION_get_data(ext), let data = ASN1_STRING_get0_data(octets) {
                value = Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(octets))))
            }
            parsedExtensions.append(CertificateExtension(oid: Certificate.oidText(object),
                isCritical: X509_EXTENSION_get_critical(ext) == 1, value: value))
        }
        extensions = parsedExtensions
        do throws(CryptoError) {
            guard let before = X509_get0_notBefore(pointer), let after = X509_get0_notAfter(pointer) else {
                throw CryptoError(.certificateMalformed, "validity missing")
            }
            notBefore = try Certificate.date(before)
            notAfter = try Certificate.date(after)
            guard let key = X509_get_pubkey(pointer) else { throw CryptoError.openssl(.certificateMalformed, "public key") }
            // The SPKI comes straight from the certificate's own encoding, avoiding OpenSSL's encoder.
            publicKey = try PublicKey(key: EVPKey(owning: key), knownSPKI: Certificate.spkiDER(pointer))
        } catch {
            X509_free(pointer)
            throw error
        }
    }

    deinit { X509_free(pointer) }

    /// Parses one DER certificate.
    public convenience init(der: [UInt8]) throws(CryptoError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p = buf.baseAddress
            let x = d2i_X509(nil, &p, buf.count)
            // Trailing bytes would mean we hash something other than what was parsed.
            if x != nil, p != buf.baseAddress.map({ $0 + buf.count }) {
                X509_free(x)
                return nil
            }
            return x
        }
        guard let parsed else { throw CryptoError.openssl(.certificateMalformed, "certificate DER does not parse") }
        try self.init(owning: parsed)
    }

    /// Parses every `CERTIFICATE` block in `pem` (other blocks and preambles are skipped).
    public static func all(pem: String) throws(CryptoError) -> [Certificate] {
        var result: [Certificate] = []
        for block in try PEM.blocks(in: pem) where block.label == "CERTIFICATE" {
            result.append(try Certificate(der: block.der))
        }
        return result
    }

    /// Parses exactly one certificate from PEM.
    public convenience init(pem: String) throws(CryptoError) {
        let blocks = try PEM.blocks(in: pem).filter { $0.label == "CERTIFICATE" }
        guard blocks.count == 1, let block = blocks.first else {
            throw CryptoError(.certificateMalformed, "expected one CERTIFICATE block, found \(blocks.count)")
        }
        try self.init(der: block.der)
    }

    /// PEM encoding.
    public var pem: String { PEM.encode(label: "CERTIFICATE", der: der) }

    /// The first extension with `oid`, if any.
    public func extensionValue(oid: String) -> CertificateExtension? { extensions.first { $0.oid == oid } }

    /// True when `date` lies within [notBefore, notAfter].
    public func isValid(at date: Date) -> Bool { notBefore <= date && date <= notAfter }

    /// Certificates are equal when their DER is.
    public static func == (lhs: Certificate, rhs: Certificate) -> Bool { lhs.der == rhs.der }
    /// Hashes the fingerprint.
    public func hash(into hasher: inout Hasher) { hasher.combine(fingerprintSHA256) }
    /// Subject and fingerprint prefix.
    public var description: String { "Certificate(\(subject), sha256 \(hexEncoded(Array(fingerprintSHA256.prefix(8)))))" }

    static func spkiDER(_ x509: OpaquePointer) -> [UInt8]? {
        guard let spki = X509_get_X509_PUBKEY(x509) else { return nil }
        let length = i2d_X509_PUBKEY(spki, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_X509_PUBKEY(spki, &p)
        }
        return written == length ? der : nil
    }

    /// DER of the issuer Name and of the serial INTEGER, as a CMS IssuerAndSerialNumber carries them.
    func issuerAndSerialDER() -> (issuer: [UInt8], serial: [UInt8])? {
        guard let name = X509_get_issuer_name(pointer), let serial = X509_get0_serialNumber(pointer) else { return nil }
        let nameLength = i2d_X509_NAME(name, nil)
        let serialLength = i2d_ASN1_INTEGER(serial, nil)
        guard nameLength > 0, serialLength > 0 else { return nil }
        var nameDER = [UInt8](repeating: 0, count: Int(nameLength))
        var serialDER = [UInt8](repeating: 0, count: Int(serialLength))
        let n = nameDER.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_X509_NAME(name, &p)
        }
        let s = serialDER.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_ASN1_INTEGER(serial, &p)
        }
        guard n == nameLength, s == serialLength else { return nil }
        return (nameDER, serialDER)
    }

    static func oidText(_ object: OpaquePointer) -> String {
        var buf = [CChar](repeating: 0, count: 128)
        let n = OBJ_obj2txt(&buf, Int32(buf.count), object, 1)
        guard n > 0, Int(n) < buf.count else { return "" }
        return String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func name(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, tender_xn_flag_rfc2253()) >= 0 else { return "" }
        return readAll(bio)
    }

    static func readAll(_ bio: OpaquePointer) -> String {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32($0.count)) }
            if n <= 0 { break }
            out.append(contentsOf: chunk.prefix(Int(n)))
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>) throws(CryptoError) -> Date {
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { throw CryptoError.openssl(.certificateMalformed, "time") }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }
}
