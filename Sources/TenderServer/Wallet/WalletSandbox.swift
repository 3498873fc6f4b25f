import Crypto
import Foundation
import Time
import Postgres

/// A local stand-in for Apple's WWDR authority (CONTRACT §7, `tender sandbox bootstrap`): a root, a
/// WWDR intermediate and one order-type and one pass-type identity for the sandbox merchant, so the
/// sandbox flow issues signed orders and passes with no Apple account.
enum WalletSandbox {
    static let orderTypeIdentifier = "order.dev.tender.sandbox"
    static let passTypeIdentifier = "pass.dev.tender.sandbox"
    /// Validity of the sandbox certificates.
    static let validitySeconds: TimeInterval = 5 * 365 * 86_400

    /// The files of a sandbox WWDR stand-in.
    struct Files {
        let root: Certificate
        let wwdr: Certificate
        let identities: [(kind: MerchantKeyKind, typeIdentifier: String, certificate: Certificate, key: PrivateKey)]
    }

    /// Makes the chain and both identities (in memory); `directory` gets PEM files when given.
    static func make(now: Date, teamIdentifier: String = "SANDBOX01") throws -> Files {
        let start = now.addingTimeInterval(-86_400), end = now.addingTimeInterval(validitySeconds)
        let rootKey = try PrivateKey.generateP256()
        let root = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Tender Sandbox Apple Root", organization: "Tender Sandbox", serialNumber: 1,
                                notBefore: start, notAfter: end, isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign"),
            subjectKey: rootKey.publicKey, issuer: nil, issuerKey: rootKey)
        let wwdrKey = try PrivateKey.generateP256()
        let wwdr = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "Tender Sandbox WWDR", organization: "Tender Sandbox", serialNumber: 2,
                                notBefore: start, notAfter: end, isCertificateAuthority: true, keyUsage: "critical,keyCertSign,cRLSign"),
            subjectKey: wwdrKey.publicKey, issuer: root, issuerKey: rootKey)
        var identities: [(MerchantKeyKind, String, Certificate, PrivateKey)] = []
        for (index, (kind, typeIdentifier, label)) in [(MerchantKeyKind.orderType, orderTypeIdentifier, "Order Type ID"),
                                                       (.passType, passTypeIdentifier, "Pass Type ID")].enumerated() {
            let key = try PrivateKey.generateRSA(bits: 2_048)
            let certificate = try CertificateIssuer.issue(
                CertificateTemplate(commonName: "\(label): \(typeIdentifier)", organization: teamIdentifier,
                                    serialNumber: UInt64(3 + index), notBefore: start, notAfter: end,
                                    isCertificateAuthority: false, keyUsage: "critical,digitalSignature"),
                subjectKey: key.publicKey, issuer: wwdr, issuerKey: wwdrKey)
            identities.append((kind, typeIdentifier, certificate, key))
        }
        return Files(root: root, wwdr: wwdr,
                     identities: identities.map { (kind: $0.0, typeIdentifier: $0.1, certificate: $0.2, key: $0.3) })
    }

    /// `tender sandbox bootstrap`'s Wallet part: once per data directory, writes the stand-in to
    /// `$TENDER_DATA_DIR/sandbox/wallet` and imports both identities for the sandbox merchant.
    static func bootstrap(configuration: TenderConfiguration, pool: PostgresPool, merchantId: String) throws {
        let store = KeyStore(pool: pool, masterKeyFile: configuration.masterKeyFile,
                             onCreate: { Console.err("tender: created a new master key at \($0) (mode 0600)") })
        let existing = try store.list(merchantId: merchantId).filter { $0.kind.isWallet && $0.status == "active" }
        guard existing.isEmpty else { return }
        let files = try make(now: Time.Clock.system.now())
        let directory = configuration.dataDirectory + "/sandbox/wallet"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(files.root.pem.utf8).write(to: URL(fileURLWithPath: directory + "/wwdr-root.pem"))
        try Data(files.wwdr.pem.utf8).write(to: URL(fileURLWithPath: directory + "/wwdr.pem"))
        for identity in files.identities {
            try Data(identity.certificate.pem.utf8).write(to: URL(fileURLWithPath: directory + "/\(identity.kind.rawValue).pem"))
            _ = try store.importWalletIdentity(merchantId: merchantId, kind: identity.kind, typeIdentifier: identity.typeIdentifier,
                                               certificate: Array(identity.certificate.pem.utf8),
                                               privateKey: try identity.key.unsafePKCS8PEM(), wwdr: Array(files.wwdr.pem.utf8))
            Console.out("tender: sandbox \(identity.kind.rawValue) identity \(identity.typeIdentifier) imported")
        }
        Console.out("tender: sandbox WWDR stand-in written to \(directory) (verify packages with -CAfile \(directory)/wwdr-root.pem)")
    }
}
