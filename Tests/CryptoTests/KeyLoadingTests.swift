import Foundation
import Testing
@testable import Crypto

/// SEC1 P-256 key from spreedly/gala test/fixtures/private_key.pem (MIT), as merchants' files look.
let galaSEC1PEM = """
-----BEGIN EC PRIVATE KEY-----
MHcCAQEEICmvB7bzRczaJX05lCTK2ueRVRAAivM/CgbHyOaIcqW1oAoGCCqGSM49
AwEHoUQDQgAE4pUGHJqfJCucG40MvdGqTwvYRz2N9WvCtOHdtAuNf1vB2MPZyLsq
U32Z3a5z1WcWK6OHmfDDSqOrfQq7UXlQgA==
-----END EC PRIVATE KEY-----
"""

/// The `EC PARAMETERS` block `openssl ecparam -genkey` writes before the key (OID prime256v1).
let ecParametersBlock = """
-----BEGIN EC PARAMETERS-----
BggqhkjOPQMBBw==
-----END EC PARAMETERS-----
"""

/// What `openssl pkcs12 -nodes` writes before each block.
let bagAttributes = """
Bag Attributes
    localKeyID: 01 00 00 00
    friendlyName: Merchant ID: merchant.com.example
Key Attributes: <No Attributes>

"""

@Suite struct KeyLoadingTests {
    var galaDER: [UInt8] {
        get throws { try #require(try PEM.blocks(in: galaSEC1PEM).first).der }
    }

    @Test func sec1PEMLoadsAsP256() throws {
        let key = try PrivateKey(pemOrBase64: galaSEC1PEM)
        #expect(key.kind == .ecP256)
    }

    @Test(arguments: ["sec1", "ecParameters", "bagAttributes", "bareBase64", "pkcs8", "crlf"])
    func everyMerchantFormLoadsTheSameKey(form: String) throws {
        let reference = try PrivateKey(pemOrBase64: galaSEC1PEM)
        let text: String
        switch form {
        case "sec1": text = galaSEC1PEM
        case "ecParameters": text = ecParametersBlock + "\n" + galaSEC1PEM
        case "bagAttributes": text = bagAttributes + galaSEC1PEM
        case "bareBase64": text = Data(try galaDER).base64EncodedString() + "\n"
        case "pkcs8": text = try reference.unsafePKCS8PEM()
        default: text = galaSEC1PEM.replacingOccurrences(of: "\n", with: "\r\n")
        }
        let loaded = try PrivateKey(pemOrBase64: text)
        #expect(loaded.publicKey.spkiDER == reference.publicKey.spkiDER)
    }

    @Test func pkcs8DERLoads() throws {
        let reference = try PrivateKey.generateP256()
        let loaded = try PrivateKey(der: reference.pkcs8DER().unsafeRevealedCopy())
        #expect(loaded.publicKey.matches(reference.publicKey))
    }

    @Test func rsaKeysLoadFromPKCS8AndPKCS1() throws {
        let reference = try PrivateKey.generateRSA(bits: 2048)
        #expect(reference.kind == .rsa(bits: 2048))
        let pkcs8 = try PrivateKey(pemOrBase64: reference.unsafePKCS8PEM())
        let pkcs1PEM = PEM.encode(label: "RSA PRIVATE KEY", der: try reference.traditionalDER().unsafeRevealedCopy())
        let pkcs1 = try PrivateKey(pemOrBase64: bagAttributes + pkcs1PEM)
        #expect(pkcs8.publicKey.matches(reference.publicKey))
        #expect(pkcs1.publicKey.matches(reference.publicKey))
    }

    @Test func keyFollowingACertificateInOneFileLoads() throws {
        let key = try PrivateKey.generateP256()
        let cert = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "bundle", serialNumber: 1, notBefore: Date(timeIntervalSince1970: 0),
                                notAfter: Date(timeIntervalSince1970: 4_000_000_000), isCertificateAuthority: false),
            subjectKey: key.publicKey, issuer: nil, issuerKey: key)
        let loaded = try PrivateKey(pemOrBase64: bagAttributes + cert.pem + bagAttributes + key.unsafePKCS8PEM())
        #expect(loaded.publicKey.matches(key.publicKey))
    }

    @Test(arguments: [
        ("encrypted_pkcs8", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
            CryptoError.Code.keyEncryptedUnsupported),
        ("legacy_encrypted", "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
            + "DEK-Info: AES-128-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n", .keyEncryptedUnsupported),
        ("garbage_der", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", .keyMalformed),
        ("not_base64", "this is not a key", .keyMalformed),
        ("unterminated", "-----BEGIN PRIVATE KEY-----\nAAAA\n", .keyMalformed),
        ("two_keys", galaSEC1PEM + "\n" + galaSEC1PEM, .keyMalformed),
    ])
    func badKeyTextIsRefusedWithItsCode(name: String, text: String, code: CryptoError.Code) {
        let error = #expect(throws: CryptoError.self) { try PrivateKey(pemOrBase64: text) }
        #expect(error?.code == code, "\(name)")
    }

    @Test func privateKeyDescriptionHidesMaterial() throws {
        let key = try PrivateKey(pemOrBase64: galaSEC1PEM)
        #expect(!String(describing: key).contains("MHcC"))
        let secret = SecretBytes([1, 2, 3, 0xAB])
        #expect(String(describing: secret) == "SecretBytes(4 bytes, redacted)")
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("171"))
    }
}
