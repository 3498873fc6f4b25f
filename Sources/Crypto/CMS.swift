internal import COpenSSL
public import Foundation

/// Owns one `CMS_ContentInfo`.
final class CMSHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { CMS_ContentInfo_free(pointer) }
}

/// Digest algorithms a CMS signer may declare.
public enum CMSDigestAlgorithm: String, Sendable {
    /// SHA-256 (the only one Apple Pay uses).
    case sha256
    /// SHA-384.
    case sha384
    /// Anything else, by dotted OID.
    case other

    init(nid: Int32) {
        switch nid {
        case NID_sha256: self = .sha256
        case NID_sha384: self = .sha384
        default: self = .other
        }
    }
}

/// A PKCS#7/CMS SignedData structure (RFC 5652) parsed from DER/BER.
public final class CMSSignedData: @unchecked Sendable {
    let handle: CMSHandle
    /// The certificates carried in the `certificates` field, in order.
    public let certificates: [Certificate]
    /// The signer infos, in order.
    public let signers: [CMSSignerInfo]
    /// True when the encapsulated content is absent (a detached signature).
    public let isDetached: Bool

    /// Most signers and certificates accepted, so hostile input cannot grow work without bound.
    public static let signersMax = 8
    /// See `signersMax`.
    public static let certificatesMax = 16

    /// Parses `der` (BER indefinite lengths, as Apple emits, are accepted).
    public init(der: [UInt8]) throws(CryptoError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p = buf.baseAddress
            return d2i_CMS_ContentInfo(nil, &p, buf.count)
        }
        guard let parsed else { throw CryptoError.openssl(.cmsMalformed, "CMS does not parse") }
        let handle = CMSHandle(owning: parsed)
        self.handle = handle
        guard let type = CMS_get0_type(parsed), OBJ_obj2nid(type) == NID_pkcs7_signed else {
            throw CryptoError(.cmsMalformed, "CMS content type is not SignedData")
        }
        isDetached = CMS_is_detached(parsed) == 1
        var certs: [Certificate] = []
        if let stack = CMS_get1_certs(parsed) {
            defer { tender_sk_X509_pop_free(stack) }
            let count = Int(tender_sk_X509_num(stack))
            guard count <= CMSSignedData.certificatesMax else { throw CryptoError(.cmsMalformed, "too many certificates") }
            for index in 0..<count {
                guard let x = tender_sk_X509_value(stack, Int32(index)), X509_up_ref(x) == 1 else { continue }
                certs.append(try Certificate(owning: x))
            }
        }
        certificates = certs
        var infos: [CMSSignerInfo] = []
        if let stack = CMS_get0_SignerInfos(parsed) {
            let count = Int(tender_sk_CMS_SignerInfo_num(stack))
            guard count <= CMSSignedData.signersMax else { throw CryptoError(.cmsMalformed, "too many signers") }
            for index in 0..<count {
                guard let si = tender_sk_CMS_SignerInfo_value(stack, Int32(index)) else { continue }
                infos.append(try CMSSignerInfo(handle: handle, pointer: si))
            }
        }
        signers = infos
    }
}

/// One SignerInfo of a `CMSSignedData`; keeps its parent alive.
public final class CMSSignerInfo: @unchecked Sendable {
    let handle: CMSHandle
    let pointer: OpaquePointer
    /// The declared digest algorithm.
    public let digestAlgorithm: CMSDigestAlgorithm
    /// Dotted OID of the digest algorithm.
    public let digestAlgorithmOID: String
    /// Dotted OID of the signature algorithm.
    public let signatureAlgorithmOID: String
    /// Dotted OIDs of all signed attributes.
    public let signedAttributeOIDs: [String]
    /// The messageDigest signed attribute (RFC 5652 §11.2), if present.
    public let messageDigest: [UInt8]?
    /// The signingTime signed attribute (RFC 5652 §11.3), if present.
    public let signingTime: Date?

    init(handle: CMSHandle, pointer: OpaquePointer) throws(CryptoError) {
        self.handle = handle
        self.pointer = pointer
        var digest: UnsafeMutablePointer<X509_ALGOR>?
        var signature: UnsafeMutablePointer<X509_ALGOR>?
        CMS_SignerInfo_get0_algs(pointer, nil, nil, &digest, &signature)
        let digestObject = CMSSignerInfo.algorithmObject(digest)
        digestAlgorithmOID = digestObject.map(Certificate.oidText) ?? ""
        digestAlgorithm = digestObject.map { CMSDigestAlgorithm(nid: OBJ_obj2nid($0)) } ?? .other
        signatureAlgorithmOID = CMSSignerInfo.algorithmObject(signature).map(Certificate.oidText) ?? ""
        var oids: [String] = []
        for index in 0..<max(0, CMS_signed_get_attr_count(pointer)) {
            if let attr = CMS_signed_get_attr(pointer, index), let object = X509_ATTRIBUTE_get0_object(attr) {
                oids.append(Certificate.oidText(object))
            }
        }
        signedAttributeOIDs = oids
        messageDigest = try CMSSignerInfo.singleValue(pointer, NID_pkcs9_messageDigest, types: [V_ASN1_OCTET_STRING]).map { value in
            guard let data = ASN1_STRING_get0_data(value.string) else { return [] }
            return Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(value.string))))
        }
        if let value = try CMSSignerInfo.singleValue(pointer, NID_pkcs9_signingTime, types: [V_ASN1_UTCTIME, V_ASN1_GENERALIZEDTIME]) {
            signingTime = try Certificate.date(UnsafePointer(value.string))
        } else {
            signingTime = nil
        }
    }

    /// True when `certificate` is the one this SignerInfo identifies (issuer+serial or key id).
    public func identifies(_ certificate: Certificate) -> Bool {
        CMS_SignerInfo_cert_cmp(pointer, certificate.pointer) == 0
    }

    /// Verifies the signature over the signed attributes with `certificate`'s key. Callers must also
    /// compare `messageDigest` with the content digest (see `verifyDetached`).
    public func verifySignedAttributes(with certificate: Certificate) throws(CryptoError) {
        CMS_SignerInfo_set1_signer_cert(pointer, certificate.pointer)
        guard CMS_SignerInfo_verify(pointer) == 1 else {
            throw CryptoError.openssl(.signatureInvalid, "signer signature does not verify")
        }
    }

    /// Full detached verification (RFC 5652 §5.4, §5.6): content digest equals messageDigest, then the
    /// signature over the signed attributes verifies with `certificate`.
    public func verifyDetached(content: [UInt8], with certificate: Certificate) throws(CryptoError) {
        guard digestAlgorithm == .sha256 else {
            throw CryptoError(.digestAlgorithmUnsupported, "digest algorithm \(digestAlgorithmOID)")
        }
        guard let messageDigest else { throw CryptoError(.cmsMalformed, "messageDigest attribute missing") }
        guard constantTimeEqual(messageDigest, Digest.sha256(content)) else {
            throw CryptoError(.messageDigestMismatch, "content does not match messageDigest")
        }
        try verifySignedAttributes(with: certificate)
    }

    private struct StringValue { let string: UnsafeMutablePointer<ASN1_STRING> }

    private static func algorithmObject(_ algorithm: UnsafeMutablePointer<X509_ALGOR>?) -> OpaquePointer? {
        guard let algorithm else { return nil }
        var object: OpaquePointer?
        X509_ALGOR_get0(&object, nil, nil, UnsafePointer(algorithm))
        return object
    }

    // A signed attribute must have exactly one value of the expected type (RFC 5652 §11.2, §11.3).
    private static func singleValue(_ si: OpaquePointer, _ nid: Int32, types: [Int32]) throws(CryptoError) -> StringValue? {
        let index = CMS_signed_get_attr_by_NID(si, nid, -1)
        guard index >= 0, let attr = CMS_signed_get_attr(si, index) else { return nil }
        guard CMS_signed_get_attr_by_NID(si, nid, index) < 0, X509_ATTRIBUTE_count(attr) == 1 else {
            throw CryptoError(.cmsMalformed, "signed attribute repeated")
        }
        for type in types {
            if let raw = X509_ATTRIBUTE_get0_data(attr, 0, type, nil) {
                return StringValue(string: raw.assumingMemoryBound(to: ASN1_STRING.self))
            }
        }
        throw CryptoError(.cmsMalformed, "signed attribute has the wrong type")
    }
}

/// Certificate path validation against explicit roots at an explicit time (never the wall clock).
public enum CertificateChainVerifier {
    /// Verifies `leaf` → `intermediates` → one of `trustedRoots` as of `time`; returns the chain's
    /// fingerprints leaf first.
    public static func verify(leaf: Certificate, intermediates: [Certificate], trustedRoots: [Certificate],
                              at time: Date) throws(CryptoError) -> [[UInt8]] {
        guard !trustedRoots.isEmpty else { throw CryptoError(.chainInvalid, "no trusted roots") }
        guard let store = X509_STORE_new() else { throw CryptoError.openssl(.opensslFailure, "X509_STORE_new") }
        defer { X509_STORE_free(store) }
        for root in trustedRoots {
            guard X509_STORE_add_cert(store, root.pointer) == 1 else { throw CryptoError.openssl(.opensslFailure, "X509_STORE_add_cert") }
        }
        guard let untrusted = tender_sk_X509_new_null() else { throw CryptoError.openssl(.opensslFailure, "stack") }
        defer { tender_sk_X509_free(untrusted) }
        for cert in intermediates { _ = tender_sk_X509_push(untrusted, cert.pointer) }
        guard let ctx = X509_STORE_CTX_new() else { throw CryptoError.openssl(.opensslFailure, "X509_STORE_CTX_new") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leaf.pointer, untrusted) == 1 else {
            throw CryptoError.openssl(.opensslFailure, "X509_STORE_CTX_init")
        }
        X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), time_t(time.timeIntervalSince1970.rounded(.down)))
        guard X509_verify_cert(ctx) == 1 else {
            let code = X509_STORE_CTX_get_error(ctx)
            let reason = String(cString: X509_verify_cert_error_string(Int(code)))
            CryptoError.clearQueue()
            switch code {
            case X509_V_ERR_CERT_HAS_EXPIRED: throw CryptoError(.certificateExpired, reason)
            case X509_V_ERR_CERT_NOT_YET_VALID: throw CryptoError(.certificateNotYetValid, reason)
            default: throw CryptoError(.chainInvalid, reason)
            }
        }
        var fingerprints: [[UInt8]] = []
        if let chain = X509_STORE_CTX_get0_chain(ctx) {
            for index in 0..<Int(tender_sk_X509_num(chain)) {
                guard let x = tender_sk_X509_value(chain, Int32(index)) else { continue }
                let length = i2d_X509(x, nil)
                guard length > 0 else { continue }
                var der = [UInt8](repeating: 0, count: Int(length))
                _ = der.withUnsafeMutableBufferPointer { buf -> Int32 in
                    var p = buf.baseAddress
                    return i2d_X509(x, &p)
                }
                fingerprints.append(Digest.sha256(der))
            }
        }
        return fingerprints
    }
}
