internal import COpenSSL
public import Foundation

/// What to put in a new X.509 v3 certificate (for test authorities and the sandbox, not production CAs).
public struct CertificateTemplate: Sendable {
    /// Subject CN.
    public var commonName: String
    /// Subject O, if any.
    public var organization: String?
    /// Serial number (positive).
    public var serialNumber: UInt64
    /// Start of validity.
    public var notBefore: Date
    /// End of validity.
    public var notAfter: Date
    /// basicConstraints cA flag (critical).
    public var isCertificateAuthority: Bool
    /// keyUsage in OpenSSL's configuration syntax, e.g. `critical,keyCertSign,cRLSign`; nil for none.
    public var keyUsage: String?
    /// Extra extensions by OID with raw extnValue contents.
    public var customExtensions: [CertificateExtension]

    /// Creates a template.
    public init(commonName: String, organization: String? = nil, serialNumber: UInt64, notBefore: Date, notAfter: Date,
                isCertificateAuthority: Bool, keyUsage: String? = nil, customExtensions: [CertificateExtension] = []) {
        self.commonName = commonName
        self.organization = organization
        self.serialNumber = serialNumber
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.isCertificateAuthority = isCertificateAuthority
        self.keyUsage = keyUsage
        self.customExtensions = customExtensions
    }
}

/// Issues certificates and CMS signatures (used by the sandbox stand-in for Apple and by tests).
public enum CertificateIssuer {
    /// Issues a certificate for `subjectKey` from `template`, signed by `issuerKey` (self-signed when `issuer` is nil).
    public static func issue(_ template: CertificateTemplate, subjectKey: PublicKey, issuer: Certificate?,
                             issuerKey: PrivateKey) throws(CryptoError) -> Certificate {
        guard let x = X509_new() else { throw CryptoError.openssl(.opensslFailure, "X509_new") }
        var owned = true
        defer { if owned { X509_free(x) } }
        guard let name = X509_NAME_new() else { throw CryptoError.openssl(.opensslFailure, "X509_NAME_new") }
        defer { X509_NAME_free(name) }
        var ok = X509_set_version(x, 2) == 1
        ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, template.commonName, -1, -1, 0) == 1
        if let org = template.organization {
            ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, org, -1, -1, 0) == 1
        }
        ok = ok && X509_set_subject_name(x, name) == 1
        ok = ok && X509_set_issuer_name(x, issuer.map { X509_get_subject_name($0.pointer) } ?? name) == 1
        ok = ok && ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), template.serialNumber) == 1
        ok = ok && ASN1_TIME_set(X509_getm_notBefore(x), time_t(template.notBefore.timeIntervalSince1970)) != nil
        ok = ok && ASN1_TIME_set(X509_getm_notAfter(x), time_t(template.notAfter.timeIntervalSince1970)) != nil
        ok = ok && X509_set_pubkey(x, subjectKey.key.pointer) == 1
        guard ok else { throw CryptoError.openssl(.opensslFailure, "certificate fields") }

        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuer?.pointer ?? x, x, nil, nil, 0)
        var standard: [(Int32, String)] = [
            (NID_basic_constraints, template.isCertificateAuthority ? "critical,CA:TRUE" : "critical,CA:FALSE"),
            (NID_subject_key_identifier, "hash"),
        ]
        if let usage = template.keyUsage { standard.append((NID_key_usage, usage)) }
        if issuer != nil { standard.append((NID_authority_key_identifier, "keyid:always")) }
        for (nid, value) in standard {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else { throw CryptoError.openssl(.invalidArgument,
                "extension \(nid)") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x, ext, -1) == 1 else { throw CryptoError.openssl(.opensslFailure, "X509_add_ext") }
        }
        for custom in template.customExtensions {
            guard let object = OBJ_txt2obj(custom.oid, 1) else { throw CryptoError.openssl(.invalidArgument, "OID \(custom.oid)") }
            defer { ASN1_OBJECT_free(object) }
            guard let octets = ASN1_OCTET_STRING_new() else { throw CryptoError.openssl(.opensslFailure, "octet string") }
            defer { ASN1_OCTET_STRING_free(octets) }
            guard custom.value.withUnsafeBufferPointer({ ASN1_OCTET_STRING_set(octets, $0.baseAddress, Int32($0.count)) }) == 1,
                  let ext = X509_EXTENSION_create_by_OBJ(nil, object, custom.isCritical ? 1 : 0, octets)
            else { throw CryptoError.openssl(.opensslFailure, "custom extension") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x, ext, -1) == 1 else { throw CryptoError.openssl(.opensslFailure, "X509_add_ext") }
        }
        guard X509_sign(x, issuerKey.key.pointer, EVP_sha256()) > 0 else { throw CryptoError.openssl(.opensslFailure, "X509_sign") }
        owned = false
        return try Certificate(owning: x)
    }

    /// Signs `content` as a detached CMS SignedData (DER) with `signer`/`key`, carrying `extraCertificates`
    /// and a signingTime attribute. `omitSigningTimeForTesting` strips the attribute after signing
    /// (leaving an invalid signature) so verifiers can be tested on its absence; `extraSignersForTesting`
    /// adds further SignerInfos.
    public static func signDetachedCMS(content: [UInt8], signer: Certificate, key: PrivateKey,
                                       extraCertificates: [Certificate], signingTime: Date,
                                       digest: CMSDigestAlgorithm = .sha256,
                                       omitSigningTimeForTesting: Bool = false,
                                       extraSignersForTesting: [(Certificate, PrivateKey)] = []) throws(CryptoError) -> [UInt8] {
        let flags = UInt32(CMS_PARTIAL | CMS_DETACHED | CMS_BINARY | CMS_NOSMIMECAP)
        guard let cms = CMS_sign(nil, nil, nil, nil, flags) else { throw CryptoError.openssl(.opensslFailure, "CMS_sign") }
        let handle = CMSHandle(owning: cms)
        let md = digest == .sha384 ? EVP_sha384() : EVP_sha256()
        guard let si = CMS_add1_signer(cms, signer.pointer, key.key.pointer, md, flags) else {
            throw CryptoError.openssl(.opensslFailure, "CMS_add1_signer")
        }
        guard let time = ASN1_TIME_set(nil, time_t(signingTime.timeIntervalSince1970)) else {
            throw CryptoError.openssl(.opensslFailure, "ASN1_TIME_set")
        }
        defer { ASN1_TIME_free(time) }
        // A preset signingTime stops OpenSSL from stamping the wall clock (RFC 5652 §11.3).
        guard CMS_signed_add1_attr_by_NID(si, NID_pkcs9_signingTime, ASN1_STRING_type(time), time, -1) == 1 else {
            throw CryptoError.openssl(.opensslFailure, "signingTime attribute")
        }
        for (cert, extraKey) in extraSignersForTesting {
            guard CMS_add1_signer(cms, cert.pointer, extraKey.key.pointer, md, flags) != nil else {
                throw CryptoError.openssl(.opensslFailure, "CMS_add1_signer")
            }
        }
        for cert in extraCertificates {
            guard CMS_add1_cert(cms, cert.pointer) == 1 else { throw CryptoError.openssl(.opensslFailure, "CMS_add1_cert") }
        }
        guard let bio = content.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
            throw CryptoError.openssl(.opensslFailure, "BIO_new_mem_buf")
        }
        defer { BIO_free(bio) }
        guard CMS_final(cms, bio, nil, flags) == 1 else { throw CryptoError.openssl(.opensslFailure, "CMS_final") }
        if omitSigningTimeForTesting {
            let index = CMS_signed_get_attr_by_NID(si, NID_pkcs9_signingTime, -1)
            if index >= 0, let removed = CMS_signed_delete_attr(si, index) { X509_ATTRIBUTE_free(removed) }
        }
        let length = i2d_CMS_ContentInfo(handle.pointer, nil)
        guard length > 0 else { throw CryptoError.openssl(.opensslFailure, "i2d_CMS_ContentInfo") }
        var der = [UInt8](repeating: 0, count: Int(length))
        _ = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d_CMS_ContentInfo(handle.pointer, &p)
        }
        return der
    }
}
