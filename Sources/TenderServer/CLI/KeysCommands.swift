import Foundation
import HTTPServer
import Postgres

/// `tender keys import|csr|list|retire` (README.md, Commands): merchant Apple Pay keys, sealed at rest.
enum KeysCommands {
    static let help = """
        usage: tender keys csr --merchant-id ID --kind processing|identity --out DIR
               tender keys import --merchant-id ID --certificate FILE [--private-key FILE] [--kind processing|identity]
               tender keys import --merchant-id ID --kind order-type|pass-type --type-identifier ID
                                  --certificate FILE --private-key FILE --wwdr FILE
               tender keys list [--merchant-id ID]
               tender keys retire --public-key-hash H | --key-id ID

        csr     makes the private key Apple's portal asks for (EC P-256 for payment processing, RSA 2048 for
                the merchant identity), seals it with the master key, keeps it as pending, and writes the
                certificate signing request to DIR/<merchant-id>.<kind>.certSigningRequest for upload to Apple.
        import  stores an Apple Pay payment-processing certificate + key (default) or the merchant-identity
                certificate + key (mutual TLS for merchant validation; replaces the previous one). The
                certificate may be DER (Apple's .cer download) or PEM. Without --private-key the key is the
                pending one `tender keys csr` made for this certificate's public key (its kind too). A key
                file may be PEM (SEC1, PKCS#8, after EC PARAMETERS or .p12 "Bag Attributes") or bare base64
                DER; it is sealed with the master key (TENDER_MASTER_KEY_FILE) before it reaches the database.
                Prints {"publicKeyHash": …} for processing keys, {"keyId": …} for identity keys.
                With --kind order-type or pass-type it stores a Wallet signing identity (CONTRACT §7): the
                order-type or pass-type certificate, its key (sealed) and Apple's WWDR intermediate (--wwdr)
                that issued it; a new import for the same --type-identifier retires the previous one.
        list    prints the stored keys and the pending requests as JSON; never any key material.
        retire  stops a key from ever decrypting again. Several processing keys may be active at once:
                import the new one, wait for tokens for the old one to drain, then retire it.
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        switch sub {
        case "import":
            let args = try Arguments(Array(argv.dropFirst()), options: ["merchant-id", "certificate", "private-key", "kind",
                                                                        "type-identifier", "wwdr"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let merchantId = try args.required("merchant-id")
            let kind = try args.value("kind").map(parseKind)
            if let kind, kind.isWallet { return try importWallet(args, merchantId: merchantId, kind: kind, environment: environment) }
            guard args.value("type-identifier") == nil, args.value("wwdr") == nil else {
                throw UsageError(message: "--type-identifier and --wwdr go with --kind order-type|pass-type")
            }
            let certificate = try readSmallBytes(try args.required("certificate"), flag: "certificate")
            let key = try args.value("private-key").map { try readSmallFile($0, flag: "private-key") }
            let (store, pool) = try openKeyStore(environment)
            defer { pool.close() }
            let info = try key.map {
                try store.importKey(merchantId: merchantId, certificate: certificate, privateKey: $0, kind: kind ?? .processing)
            } ?? store.importCertificate(merchantId: merchantId, certificate: certificate, kind: kind)
            if let hash = info.publicKeyHash {
                struct Output: Encodable {
                    let publicKeyHash: String; let keyId: String; let merchantId: String; let certificateNotAfter: Date
                }
                KeysCommands.printJSON(Output(publicKeyHash: hash, keyId: info.keyId, merchantId: info.merchantId,
                    certificateNotAfter: info.certificateNotAfter))
            } else {
                struct Output: Encodable { let keyId: String; let merchantId: String; let kind: String; let certificateNotAfter: Date }
                KeysCommands.printJSON(Output(keyId: info.keyId, merchantId: info.merchantId, kind: info.kind.rawValue,
                    certificateNotAfter: info.certificateNotAfter))
            }
            return .success
        case "csr":
            let args = try Arguments(Array(argv.dropFirst()), options: ["merchant-id", "kind", "out"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let merchantId = try args.required("merchant-id")
            let kind = try parseKind(try args.required("kind"))
            guard !kind.isWallet else { throw UsageError(message: "csr makes processing or identity keys") }
            let directory = try args.required("out")
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw TenderError("directory_not_found", "--out: \(directory) is not a directory")
            }
            let path = directory + "/\(merchantId).\(kind.rawValue).certSigningRequest"
            guard !FileManager.default.fileExists(atPath: path) else {
                throw TenderError("file_exists", "--out: \(path) exists; move it away first")
            }
            let (store, pool) = try openKeyStore(environment)
            defer { pool.close() }
            let (pending, request) = try store.makeCertificateRequest(merchantId: merchantId, kind: kind)
            guard FileManager.default.createFile(atPath: path, contents: Data(request.pem.utf8)) else {
                throw TenderError("file_unwritable", "--out: cannot write \(path); the key \(pending.keyId) stays pending, run csr again")
            }
            struct Output: Encodable {
                let keyId: String; let merchantId: String; let kind: String; let publicKeyHash: String
                let certificateSigningRequest: String
            }
            KeysCommands.printJSON(Output(keyId: pending.keyId, merchantId: merchantId, kind: kind.rawValue,
                                          publicKeyHash: pending.publicKeyHash, certificateSigningRequest: path))
            return .success
        case "list":
            let args = try Arguments(Array(argv.dropFirst()), options: ["merchant-id"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            // Listing needs no master key: nothing sealed is read.
            let store = KeyStore(pool: pool, masterKeyFile: "")
            struct Output: Encodable { let keys: [StoredKeyInfo]; let pendingRequests: [KeyStore.PendingKeyRequest] }
            KeysCommands.printJSON(Output(keys: try store.list(merchantId: args.value("merchant-id")),
                                          pendingRequests: try store.pendingRequests(merchantId: args.value("merchant-id"))))
            return .success
        case "retire":
            let args = try Arguments(Array(argv.dropFirst()), options: ["public-key-hash", "key-id"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let hash = args.value("public-key-hash"), keyId = args.value("key-id")
            guard (hash == nil) != (keyId == nil) else { throw UsageError(message: "give exactly one of --public-key-hash and --key-id") }
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            let store = KeyStore(pool: pool, masterKeyFile: "")
            let info = try hash.map { try store.retire(publicKeyHash: $0) } ?? store.retire(keyId: keyId ?? "")
            KeysCommands.printJSON(info)
            return .success
        default:
            throw UsageError(message: "unknown subcommand \(sub)")
        }
    }

    /// A store whose master key comes from TENDER_MASTER_KEY_FILE (created with a notice when missing).
    static func openKeyStore(_ environment: [String: String]) throws -> (KeyStore, PostgresPool) {
        let (configuration, pool) = try TenderCLI.openDatabase(environment)
        let store = KeyStore(pool: pool, masterKeyFile: configuration.masterKeyFile,
                             onCreate: { Console.err("tender: created a new master key at \($0) (mode 0600); back it up") })
        do { _ = try store.masterKey() } catch {
            pool.close()
            throw error
        }
        return (store, pool)
    }

    /// Pretty, key-sorted JSON with RFC 3339 dates (openapi.yaml times).
    static func printJSON<T: Encodable>(_ value: T) {
        if let data = try? JSONCoding.prettyEncoder.encode(value) { Console.out(String(decoding: data, as: UTF8.self)) }
    }

    static func parseKind(_ text: String) throws(UsageError) -> MerchantKeyKind {
        guard let kind = MerchantKeyKind(rawValue: text) else {
            throw UsageError(message: "--kind must be processing, identity, order-type or pass-type")
        }
        return kind
    }

    /// `keys import --kind order-type|pass-type`: a Wallet signing identity.
    static func importWallet(_ args: Arguments, merchantId: String, kind: MerchantKeyKind,
                             environment: [String: String]) throws -> ExitCode {
        let typeIdentifier = try args.required("type-identifier")
        let certificate = try readSmallBytes(try args.required("certificate"), flag: "certificate")
        let key = try readSmallFile(try args.required("private-key"), flag: "private-key")
        let wwdr = try readSmallBytes(try args.required("wwdr"), flag: "wwdr")
        let (store, pool) = try openKeyStore(environment)
        defer { pool.close() }
        let info = try store.importWalletIdentity(merchantId: merchantId, kind: kind, typeIdentifier: typeIdentifier,
                                                  certificate: certificate, privateKey: key, wwdr: wwdr)
        struct Output: Encodable {
            let keyId: String; let merchantId: String; let kind: String; let typeIdentifier: String; let certificateNotAfter: Date
        }
        printJSON(Output(keyId: info.keyId, merchantId: info.merchantId, kind: info.kind.rawValue, typeIdentifier: typeIdentifier,
                         certificateNotAfter: info.certificateNotAfter))
        return .success
    }

    /// Reads a certificate, key or token file as text, bounded (`file_unreadable` / `file_too_large`).
    static func readSmallFile(_ path: String, flag: String) throws(TenderError) -> String {
        String(decoding: try readSmallBytes(path, flag: flag), as: UTF8.self)
    }

    /// Reads a certificate (DER or PEM), key or token file, bounded (`file_unreadable` / `file_too_large`).
    static func readSmallBytes(_ path: String, flag: String) throws(TenderError) -> [UInt8] {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let size = attributes[.size] as? NSNumber else {
            throw TenderError("file_unreadable", "--\(flag): cannot read \(path)")
        }
        guard size.intValue <= KeyStoreLimits.fileBytesMax else {
            throw TenderError("file_too_large", "--\(flag): \(path) is larger than \(KeyStoreLimits.fileBytesMax) bytes")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TenderError("file_unreadable", "--\(flag): cannot read \(path)")
        }
        return Array(data)
    }
}
