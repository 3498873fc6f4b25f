import Crypto
import Foundation

/// A local stand-in for Apple: a test root, an intermediate and a signing leaf carrying Apple's marker
/// OIDs. Production never trusts its root unless configured to.
public struct SandboxAuthority: Sendable {
    /// Self-signed test root (trust this instead of Apple Root CA – G3 in tests and `make run`).
    public let root: Certificate
    /// Intermediate with 1.2.840.113635.100.6.2.14.
    public let intermediate: Certificate
    /// Signing leaf with 1.2.840.113635.100.6.29.
    public let leaf: Certificate
    let rootKey: PrivateKey
    let intermediateKey: PrivateKey
    let leafKey: PrivateKey

    /// File names used by `unsafeFilesWithPrivateKeys()` and `init(files:)`.
    public static let fileNames = ["root.pem", "root-key.pem", "intermediate.pem", "intermediate-key.pem", "leaf.pem", "leaf-key.pem"]

    /// Creates a fresh authority valid from `validFrom` for `validityDays`. The `omit…ForTesting` switches
    /// drop a marker OID so verifiers can be tested against it.
    public static func create(validFrom: Date, validityDays: Int = 3650, omitLeafMarkerForTesting: Bool = false,
                              omitIntermediateMarkerForTesting: Bool = false) throws(TokenError) -> SandboxAuthority {
        let until = validFrom.addingTimeInterval(Double(validityDays) * 86_400)
        return try sandbox {
            let rootKey = try PrivateKey.generateP256()
            let intermediateKey = try PrivateKey.generateP256()
            let leafKey = try PrivateKey.generateP256()
            let root = try CertificateIssuer.issue(
                CertificateTemplate(commonName: "Tender Sandbox Root CA", organization: "Tender Sandbox", serialNumber: randomSerial(),
                                    notBefore: validFrom, notAfter: until, isCertificateAuthority: true,
                                    keyUsage: "critical,keyCertSign,cRLSign"),
                subjectKey: rootKey.publicKey, issuer: nil, issuerKey: rootKey)
            let intermediate = try CertificateIssuer.issue(
                CertificateTemplate(commonName: "Tender Sandbox Application Integration CA", organization: "Tender Sandbox",
                                    serialNumber: randomSerial(), notBefore: validFrom, notAfter: until, isCertificateAuthority: true,
                                    keyUsage: "critical,keyCertSign,cRLSign",
                                    customExtensions: omitIntermediateMarkerForTesting ? [] : [marker(AppleOID.intermediate)]),
                subjectKey: intermediateKey.publicKey, issuer: root, issuerKey: rootKey)
            let leaf = try CertificateIssuer.issue(
                CertificateTemplate(commonName: "tender-sandbox-smp-broker-sign", organization: "Tender Sandbox",
                                    serialNumber: randomSerial(), notBefore: validFrom, notAfter: until, isCertificateAuthority: false,
                                    keyUsage: "critical,digitalSignature",
                                    customExtensions: omitLeafMarkerForTesting ? [] : [marker(AppleOID.leaf)]),
                subjectKey: leafKey.publicKey, issuer: intermediate, issuerKey: intermediateKey)
            return SandboxAuthority(root: root, intermediate: intermediate, leaf: leaf, rootKey: rootKey,
                                    intermediateKey: intermediateKey, leafKey: leafKey)
        }
    }

    /// Loads an authority written by `unsafeFilesWithPrivateKeys()`.
    public init(files: [String: String]) throws(TokenError) {
        func file(_ name: String) throws(TokenError) -> String {
            guard let text = files[name] else { throw TokenError(.sandboxFailure, "missing \(name)") }
            return text
        }
        let texts = try Self.fileNames.map { (name: String) throws(TokenError) in try file(name) }
        self = try Self.sandbox {
            SandboxAuthority(root: try Certificate(pem: texts[0]), intermediate: try Certificate(pem: texts[2]),
                             leaf: try Certificate(pem: texts[4]), rootKey: try PrivateKey(pemOrBase64: texts[1]),
                             intermediateKey: try PrivateKey(pemOrBase64: texts[3]), leafKey: try PrivateKey(pemOrBase64: texts[5]))
        }
    }

    private init(root: Certificate, intermediate: Certificate, leaf: Certificate, rootKey: PrivateKey,
                 intermediateKey: PrivateKey, leafKey: PrivateKey) {
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
        self.rootKey = rootKey
        self.intermediateKey = intermediateKey
        self.leafKey = leafKey
    }

    /// Every certificate and private key as PEM, by file name; contains private keys, hence the name.
    public func unsafeFilesWithPrivateKeys() throws(TokenError) -> [String: String] {
        try Self.sandbox {
            [
                "root.pem": root.pem, "root-key.pem": try rootKey.unsafePKCS8PEM(),
                "intermediate.pem": intermediate.pem, "intermediate-key.pem": try intermediateKey.unsafePKCS8PEM(),
                "leaf.pem": leaf.pem, "leaf-key.pem": try leafKey.unsafePKCS8PEM(),
            ]
        }
    }

    /// Issues a merchant payment-processing certificate (P-256, with the 1.2.840.113635.100.6.32
    /// merchant-id extension) and key, signed by the sandbox root.
    public func makeMerchantKey(merchantIdentifier: String, validFrom: Date, validityDays: Int = 825,
                                omitMerchantIdForTesting: Bool = false) throws(TokenError) -> MerchantKey {
        let key = try Self.sandbox { try PrivateKey.generateP256() }
        let certificate = try issueMerchantCertificate(merchantIdentifier: merchantIdentifier, publicKey: key.publicKey,
                                                       validFrom: validFrom, validityDays: validityDays,
                                                       omitMerchantIdForTesting: omitMerchantIdForTesting)
        return try MerchantKey(certificate: certificate, privateKey: key)
    }

    /// Issues a payment-processing certificate for a public key made elsewhere (what Apple's portal
    /// does with the CSR `tender keys csr` writes), carrying the merchant-id extension Apple sets.
    public func issueMerchantCertificate(merchantIdentifier: String, publicKey: PublicKey, validFrom: Date, validityDays: Int = 825,
                                         omitMerchantIdForTesting: Bool = false) throws(TokenError) -> Certificate {
        try Self.sandbox {
            // Apple stores hex(SHA-256(merchant id)) as a DER UTF8String of 64 characters.
            let hashHex = Array(hexEncoded(Digest.sha256(merchantIdentifier)).uppercased().utf8)
            let value: [UInt8] = [0x0C, UInt8(hashHex.count)] + hashHex
            return try CertificateIssuer.issue(
                CertificateTemplate(commonName: "Merchant ID: \(merchantIdentifier)", organization: "Tender Sandbox Merchant",
                                    serialNumber: Self.randomSerial(), notBefore: validFrom,
                                    notAfter: validFrom.addingTimeInterval(Double(validityDays) * 86_400),
                                    isCertificateAuthority: false, keyUsage: "critical,keyEncipherment,keyAgreement",
                                    customExtensions: omitMerchantIdForTesting ? []
                                        : [CertificateExtension(oid: AppleOID.merchantIdentifier, isCritical: false, value: value)]),
                subjectKey: publicKey, issuer: root, issuerKey: rootKey)
        }
    }

    /// Mints an EC_v1 token for `merchant` exactly as Apple Pay JS would hand it to the page.
    public func mintToken(_ request: SandboxTokenRequest, for merchant: MerchantKey) throws(TokenError) -> [UInt8] {
        guard let merchantIdHash = merchant.merchantIdHash else { throw TokenError(.merchantIdMissing,
            "merchant certificate lacks the id") }
        return try Self.sandbox {
            let payload = try request.payloadJSON()
            // Apple step 3 in reverse: ephemeral ECDH with the merchant public key, KDF, AES-256-GCM, zero IV.
            let ephemeral = try PrivateKey.generateP256()
            let shared = try ECDH.sharedSecret(privateKey: ephemeral, peer: merchant.certificate.publicKey)
            let key = ApplePayKeyDerivation.symmetricKey(sharedSecret: shared, merchantIdHash: merchantIdHash)
            let data = try AESGCM.seal(key: key, nonce: [UInt8](repeating: 0, count: 16), plaintext: payload)
            let ephemeralDER = ephemeral.publicKey.spkiDER
            let transactionId = request.transactionId ?? SecureRandom.bytes(32)
            let applicationDataHash = request.applicationData.map { Digest.sha256($0) }
            let signed = ephemeralDER + data + transactionId + (applicationDataHash ?? [])
            let signature = try CertificateIssuer.signDetachedCMS(
                content: signed, signer: leaf, key: leafKey,
                extraCertificates: (request.signTwiceForTesting ? [] : [intermediate]) + request.extraCertificatesForTesting,
                    signingTime: request.signingTime,
                digest: request.digestForTesting, omitSigningTimeForTesting: request.omitSigningTimeForTesting,
                extraSignersForTesting: request.signTwiceForTesting ? [(intermediate, intermediateKey)] : [])
            var header: [String: String] = [
                "ephemeralPublicKey": Data(ephemeralDER).base64EncodedString(),
                "publicKeyHash": merchant.publicKeyHashBase64,
                "transactionId": hexEncoded(transactionId),
            ]
            if let applicationDataHash { header["applicationData"] = hexEncoded(applicationDataHash) }
            let transactionIdentifier = hexEncoded(transactionId).uppercased()
            let token = SandboxTokenJSON(
                paymentData: .init(data: Data(data).base64EncodedString(), header: header,
                                   signature: Data(signature).base64EncodedString(), version: "EC_v1"),
                paymentMethod: .init(displayName: "\(request.network) \(request.pan.suffix(4))", network: request.network,
                                     type: "debit"),
                transactionIdentifier: transactionIdentifier)
            return Array(try SandboxTokenJSON.encoder.encode(token))
        }
    }

    static func randomSerial() -> UInt64 {
        SecureRandom.bytes(8).reduce(0) { $0 << 8 | UInt64($1) } & 0x7FFF_FFFF_FFFF_FFFF | 1
    }

    // Apple's marker extensions carry ASN.1 NULL; only their presence matters (Apple step 1.a).
    static func marker(_ oid: String) -> CertificateExtension {
        CertificateExtension(oid: oid, isCritical: false, value: [0x05, 0x00])
    }

    static func sandbox<T>(_ body: () throws -> T) throws(TokenError) -> T {
        do { return try body() } catch let error as TokenError { throw error } catch {
            throw TokenError(.sandboxFailure, "\(error)")
        }
    }
}

/// What to put in a sandbox token; every field settable.
public struct SandboxTokenRequest: Sendable {
    /// Amount in minor units.
    public var amountMinor: Int64
    /// ISO 4217 numeric currency, e.g. "840".
    public var currencyCodeNumeric: String
    /// Request applicationData bytes (their SHA-256 goes in the header), or nil.
    public var applicationData: [UInt8]?
    /// Device PAN.
    public var pan: String
    /// `YYMMDD`.
    public var expirationDate: String
    /// Base64 online payment cryptogram.
    public var cryptogram: String
    /// ECI indicator, or nil.
    public var eciIndicator: String?
    /// CMS signing time.
    public var signingTime: Date
    /// Card network shown in paymentMethod.
    public var network: String
    /// Fixed transactionId bytes, or nil for random.
    public var transactionId: [UInt8]?
    /// Digest for the CMS signature; only tests change it.
    public var digestForTesting: CMSDigestAlgorithm = .sha256
    /// Strip signingTime; only tests set it.
    public var omitSigningTimeForTesting = false
    /// Carry more certificates than the leaf and intermediate; only tests set it.
    public var extraCertificatesForTesting: [Certificate] = []
    /// Add a second SignerInfo (by the intermediate); only tests set it.
    public var signTwiceForTesting = false
    /// Mint an EMV payload (`emvData` carries the cryptogram field's value) instead of 3DSecure.
    public var emvPaymentData = false

    /// Creates a request with a test card's defaults.
    public init(amountMinor: Int64, currencyCodeNumeric: String, applicationData: [UInt8]?, pan: String = "4111111111111111",
                expirationDate: String = "301231", cryptogram: String = "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", eciIndicator: String? = "7",
                signingTime: Date, network: String = "Visa", transactionId: [UInt8]? = nil) {
        self.amountMinor = amountMinor
        self.currencyCodeNumeric = currencyCodeNumeric
        self.applicationData = applicationData
        self.pan = pan
        self.expirationDate = expirationDate
        self.cryptogram = cryptogram
        self.eciIndicator = eciIndicator
        self.signingTime = signingTime
        self.network = network
        self.transactionId = transactionId
    }

    func payloadJSON() throws -> [UInt8] {
        var inner: [String: String] = emvPaymentData ? ["emvData": cryptogram] : ["onlinePaymentCryptogram": cryptogram]
        if let eciIndicator, !emvPaymentData { inner["eciIndicator"] = eciIndicator }
        let payload = SandboxPayloadJSON(
            applicationExpirationDate: expirationDate, applicationPrimaryAccountNumber: pan,
            currencyCode: currencyCodeNumeric, deviceManufacturerIdentifier: "040010030273",
            paymentData: inner, paymentDataType: emvPaymentData ? "EMV" : "3DSecure", transactionAmount: amountMinor)
        return Array(try SandboxTokenJSON.encoder.encode(payload))
    }
}

/// The token a sandbox wallet hands the page (Apple's `PKPaymentToken` JSON), keys sorted.
struct SandboxTokenJSON: Encodable {
    struct PaymentData: Encodable {
        var data: String
        var header: [String: String]
        var signature: String
        var version: String
    }

    struct PaymentMethod: Encodable {
        var displayName: String
        var network: String
        var type: String
    }

    var paymentData: PaymentData
    var paymentMethod: PaymentMethod
    var transactionIdentifier: String

    /// Sorted keys, so the same inputs give the same bytes.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}

/// The decrypted payment data a sandbox token carries (Apple's payment data keys).
struct SandboxPayloadJSON: Encodable {
    var applicationExpirationDate: String
    var applicationPrimaryAccountNumber: String
    var currencyCode: String
    var deviceManufacturerIdentifier: String
    var paymentData: [String: String]
    var paymentDataType: String
    var transactionAmount: Int64
}
