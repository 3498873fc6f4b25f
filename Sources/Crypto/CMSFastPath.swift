internal import COpenSSL
public import Foundation

/// One BER element: tag, and byte offsets of the whole element and of its contents.
struct BERElement {
    let tag: UInt8
    let start: Int
    let contentStart: Int
    let contentEnd: Int
    let end: Int
    let indefinite: Bool
}

/// A small BER reader (X.690 §8.1) for the fixed shape of CMS SignedData: low tag numbers, definite lengths
/// up to 3 length octets, and indefinite lengths on constructed elements (Apple emits those).
struct BERReader {
    /// Deepest nesting of indefinite-length elements followed.
    static let depthMax = 16
    /// Most children read from one constructed element.
    static let childrenMax = 64

    let bytes: [UInt8]

    func element(at offset: Int, limit: Int, depth: Int = 0) -> BERElement? {
        guard depth <= BERReader.depthMax, offset >= 0, limit <= bytes.count, offset + 2 <= limit else { return nil }
        let tag = bytes[offset]
        guard tag & 0x1F != 0x1F else { return nil }
        var index = offset + 1
        let first = bytes[index]
        index += 1
        if first == 0x80 {
            guard tag & 0x20 != 0 else { return nil }
            var cursor = index
            var count = 0
            while true {
                guard cursor + 2 <= limit else { return nil }
                if bytes[cursor] == 0, bytes[cursor + 1] == 0 {
                    return BERElement(tag: tag, start: offset, contentStart: index, contentEnd: cursor, end: cursor + 2, indefinite: true)
                }
                guard count < BERReader.childrenMax, let child = element(at: cursor, limit: limit, depth: depth + 1) else { return nil }
                cursor = child.end
                count += 1
            }
        }
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let octets = Int(first & 0x7F)
            guard octets >= 1, octets <= 3, index + octets <= limit else { return nil }
            for _ in 0..<octets {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard length <= limit - index else { return nil }
        return BERElement(tag: tag, start: offset, contentStart: index, contentEnd: index + length, end: index + length, indefinite: false)
    }

    func children(of parent: BERElement) -> [BERElement]? {
        guard parent.tag & 0x20 != 0 else { return nil }
        var out: [BERElement] = []
        var cursor = parent.contentStart
        while cursor < parent.contentEnd {
            guard out.count < BERReader.childrenMax, let child = element(at: cursor, limit: parent.contentEnd) else { return nil }
            out.append(child)
            cursor = child.end
        }
        return out
    }

    func content(_ element: BERElement) -> ArraySlice<UInt8> { bytes[element.contentStart..<element.contentEnd] }
    func encoding(_ element: BERElement) -> ArraySlice<UInt8> { bytes[element.start..<element.end] }
}

/// DER contents of the OIDs the fast path recognises.
enum CMSOID {
    static let signedData: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
    static let data: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]
    static let sha256: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]
    static let ecdsaWithSHA256: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
    static let ecPublicKey: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let contentType: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x03]
    static let messageDigest: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x04]
    static let signingTime: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x05]
    static let algorithmProtection: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x34]
}

/// A P-256 signer certificate prepared for repeated CMS verification: its key converted once, and the
/// issuer/serial encodings a SignerInfo must name (RFC 5652 §5.3 IssuerAndSerialNumber).
public final class CMSSignerKey: Sendable {
    /// The signer certificate.
    public let certificate: Certificate
    let ecKey: ECKeyHandle
    let issuerDER: [UInt8]
    let serialDER: [UInt8]

    /// Prepares `certificate`; `key_type_unsupported` unless its key is P-256.
    public init(certificate: Certificate) throws(CryptoError) {
        guard certificate.publicKey.kind == .ecP256, let ecKey = ECKeyHandle(p256From: certificate.publicKey.key) else {
            throw CryptoError(.keyTypeUnsupported, "fast CMS verification needs a P-256 signer")
        }
        guard let encodings = certificate.issuerAndSerialDER() else {
            throw CryptoError.openssl(.certificateMalformed, "issuer and serial do not encode")
        }
        self.certificate = certificate
        self.ecKey = ecKey
        issuerDER = encodings.issuer
        serialDER = encodings.serial
    }
}

/// A detached CMS SignedData (RFC 5652 §5) read with `BERReader` instead of OpenSSL's CMS decoder, whose
/// certificate parsing runs OpenSSL 3's generic key decoders and dominates the cost of a token. It only
/// ever confirms: any shape it does not expect, and any failed check, yields nil, and the caller then
/// takes the full `CMSSignedData` path, which reports the precise error.
public struct CMSDetachedSignatureView: Sendable {
    /// SHA-256 of each certificate's DER, in the order carried.
    public let certificateFingerprints: [[UInt8]]
    private let reader: BERReader
    private let signerInfo: BERElement

    /// Reads `der`; nil unless it is a SignedData over id-data with absent content, only certificates
    /// (no CRLs) and exactly one SignerInfo.
    public init?(der: [UInt8]) {
        let reader = BERReader(bytes: der)
        guard let root = reader.element(at: 0, limit: der.count), root.tag == 0x30, root.end == der.count,
              let top = reader.children(of: root), top.count == 2, top[0].tag == 0x06,
              reader.content(top[0]).elementsEqual(CMSOID.signedData), top[1].tag == 0xA0,
              let wrapped = reader.children(of: top[1]), wrapped.count == 1, wrapped[0].tag == 0x30,
              let fields = reader.children(of: wrapped[0]), fields.count == 5,
              fields[0].tag == 0x02, fields[1].tag == 0x31, fields[2].tag == 0x30, fields[3].tag == 0xA0, fields[4].tag == 0x31,
              let encapsulated = reader.children(of: fields[2]), encapsulated.count == 1, encapsulated[0].tag == 0x06,
              reader.content(encapsulated[0]).elementsEqual(CMSOID.data),
              let certificates = reader.children(of: fields[3]),
              let signers = reader.children(of: fields[4]), signers.count == 1, signers[0].tag == 0x30
        else { return nil }
        var fingerprints: [[UInt8]] = []
        for certificate in certificates {
            guard certificate.tag == 0x30, !certificate.indefinite else { return nil }
            fingerprints.append(Digest.sha256(Array(reader.encoding(certificate))))
        }
        self.reader = reader
        certificateFingerprints = fingerprints
        signerInfo = signers[0]
    }

    /// Checks that the one SignerInfo names `signer` by issuer and serial, uses SHA-256 and ECDSA, carries
    /// contentType (id-data), messageDigest equal to SHA-256(`content`) and signingTime once each and no
    /// unknown signed attribute, and that its signature over the signed attributes verifies with
    /// `signer`'s key (RFC 5652 §5.4, §5.6, §11). Returns the signing time, or nil if anything differs.
    public func verify(content: [UInt8], signer: CMSSignerKey) -> Date? {
        guard let fields = reader.children(of: signerInfo), fields.count == 6 || fields.count == 7,
              fields[0].tag == 0x02, reader.content(fields[0]).elementsEqual([0x01]),
              fields[1].tag == 0x30, let sid = reader.children(of: fields[1]), sid.count == 2,
              reader.encoding(sid[0]).elementsEqual(signer.issuerDER), reader.encoding(sid[1]).elementsEqual(signer.serialDER),
              fields[2].tag == 0x30, isAlgorithm(fields[2], CMSOID.sha256, allowNullParameters: true),
              fields[3].tag == 0xA0, !fields[3].indefinite,
              fields[4].tag == 0x30,
              isAlgorithm(fields[4], CMSOID.ecdsaWithSHA256, allowNullParameters: false)
                || isAlgorithm(fields[4], CMSOID.ecPublicKey, allowNullParameters: false),
              fields[5].tag == 0x04, !fields[5].indefinite
        else { return nil }
        if fields.count == 7 {
            guard fields[6].tag == 0xA1, unsignedAttributesAcceptable(fields[6]) else { return nil }
        }
        guard let signingTime = checkSignedAttributes(fields[3], content: content) else { return nil }
        // The signature covers the DER of the attributes with the SET OF tag in place of [0] (RFC 5652 §5.4).
        var signed = Array(reader.encoding(fields[3]))
        signed[0] = 0x31
        let digest = Digest.sha256(signed)
        let signature = Array(reader.content(fields[5]))
        let valid = digest.withUnsafeBufferPointer { d in
            signature.withUnsafeBufferPointer { s in
                tender_ecdsa_verify_sha256(signer.ecKey.pointer, d.baseAddress, s.baseAddress, Int32(s.count))
            }
        }
        guard valid == 1 else {
            CryptoError.clearQueue()
            return nil
        }
        return signingTime
    }

    private func isAlgorithm(_ element: BERElement, _ oid: [UInt8], allowNullParameters: Bool) -> Bool {
        guard let parts = reader.children(of: element), let first = parts.first, first.tag == 0x06,
              reader.content(first).elementsEqual(oid)
        else { return false }
        if parts.count == 1 { return true }
        return allowNullParameters && parts.count == 2 && reader.encoding(parts[1]).elementsEqual([0x05, 0x00])
    }

    // Signed-only attributes must not appear unsigned (RFC 5652 §11.1–11.3).
    private func unsignedAttributesAcceptable(_ element: BERElement) -> Bool {
        guard let attributes = reader.children(of: element) else { return false }
        for attribute in attributes {
            guard attribute.tag == 0x30, let parts = reader.children(of: attribute), let oid = parts.first,
                oid.tag == 0x06 else { return false }
            let value = reader.content(oid)
            if value.elementsEqual(CMSOID.contentType) || value.elementsEqual(CMSOID.messageDigest)
                || value.elementsEqual(CMSOID.signingTime) {
                return false
            }
        }
        return true
    }

    private func checkSignedAttributes(_ element: BERElement, content: [UInt8]) -> Date? {
        guard let attributes = reader.children(of: element) else { return nil }
        var contentTypeSeen = false
        var digestMatched = false
        var signingTime: Date?
        var protectionSeen = false
        for attribute in attributes {
            guard attribute.tag == 0x30, let parts = reader.children(of: attribute), parts.count == 2,
                  parts[0].tag == 0x06, parts[1].tag == 0x31, let values = reader.children(of: parts[1])
            else { return nil }
            let oid = reader.content(parts[0])
            if oid.elementsEqual(CMSOID.contentType) {
                guard !contentTypeSeen, values.count == 1, values[0].tag == 0x06,
                      reader.content(values[0]).elementsEqual(CMSOID.data)
                else { return nil }
                contentTypeSeen = true
            } else if oid.elementsEqual(CMSOID.messageDigest) {
                guard !digestMatched, values.count == 1, values[0].tag == 0x04,
                      constantTimeEqual(Array(reader.content(values[0])), Digest.sha256(content))
                else { return nil }
                digestMatched = true
            } else if oid.elementsEqual(CMSOID.signingTime) {
                guard signingTime == nil, values.count == 1, values[0].tag == 0x17 || values[0].tag == 0x18,
                      let time = decodeTime(values[0])
                else { return nil }
                signingTime = time
            } else if oid.elementsEqual(CMSOID.algorithmProtection) {
                // Informational for verification in OpenSSL 3.0 as well; allowed once.
                guard !protectionSeen else { return nil }
                protectionSeen = true
            } else {
                return nil
            }
        }
        guard contentTypeSeen, digestMatched else { return nil }
        return signingTime
    }

    private func decodeTime(_ element: BERElement) -> Date? {
        guard !element.indefinite else { return nil }
        let encoding = Array(reader.encoding(element))
        let parsed: UnsafeMutablePointer<ASN1_TIME>? = encoding.withUnsafeBufferPointer { buf in
            var p = buf.baseAddress
            return d2i_ASN1_TIME(nil, &p, buf.count)
        }
        guard let parsed else {
            CryptoError.clearQueue()
            return nil
        }
        defer { ASN1_TIME_free(parsed) }
        return try? Certificate.date(UnsafePointer(parsed))
    }
}
