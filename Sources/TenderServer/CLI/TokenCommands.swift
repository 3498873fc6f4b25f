import ApplePayToken
import Crypto
import Foundation
import Money
import Postgres
#if canImport(Glibc)
import Glibc
import Time
#endif

/// `tender token decrypt` (README.md, Commands): offline verification and decryption of one token, no database.
enum TokenCommands {
    static let help = """
        usage: tender token decrypt --token FILE --certificate FILE --private-key FILE [--at ISO8601] [--reveal-sensitive]

        Verifies one Apple Pay token (ApplePayPaymentToken JSON or a bare paymentData object) exactly as
        the server does, then decrypts it with the given payment-processing certificate and key. No
        database is used. --at sets the clock for the certificate chain and freshness checks (e.g. the
        token's signing time, to debug an old token). Trusted roots: Apple Root CA - G3, or the PEM files
        in TENDER_APPLE_ROOTS instead; TENDER_TOKEN_MAX_AGE_SECONDS bounds the token's age.

        Output: the verified header and the payload as JSON, with the PAN masked to its last four and the
        cryptogram, ECI and cardholder name redacted, unless --reveal-sensitive (never paste that output
        anywhere). Exit 0 on success; 1 on failure with {"error": code} on stdout and the code on stderr.
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        guard sub == "decrypt" else { throw UsageError(message: "unknown subcommand \(sub)") }
        let args = try Arguments(Array(argv.dropFirst()), options: ["token", "certificate", "private-key", "at"],
                                 flags: ["reveal-sensitive"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(0)
        let tokenPath = try args.required("token"), certificatePath = try args.required("certificate")
        let keyPath = try args.required("private-key")
        let now = try args.value("at").map { (text: String) throws(UsageError) in try parseTime(text, flag: "at") } ?? Clock.system.now()
        let configuration = try TenderConfiguration.load(environment: environment)
        do {
            let token = try readToken(tokenPath)
            let key = try MerchantKey(certificatePEM: try KeysCommands.readSmallFile(certificatePath, flag: "certificate"),
                                      privateKeyPEM: try KeysCommands.readSmallFile(keyPath, flag: "private-key"))
            let roots = try TokenService.trustedRoots(files: configuration.appleRootsFiles)
            let decryptor = ApplePayTokenDecryptor(trustedRoots: roots, merchantKeys: [key],
                                                   tokenAgeMaxSeconds: Int64(configuration.tokenAgeMaxSeconds))
            let result = try decryptor.verifyAndDecrypt(token, now: now)
            KeysCommands.printJSON(DecryptOutput(result, reveal: args.flag("reveal-sensitive")))
            return .success
        } catch {
            let (code, detail) = describe(error)
            Console.err("tender token: error \(code): \(detail)")
            KeysCommands.printJSON(["error": code])
            return .failure
        }
    }

    static func describe(_ error: any Error) -> (String, String) {
        switch error {
        case let e as TokenError: (e.code.rawValue, e.detail)
        case let e as TenderError: (e.code, e.detail)
        default: ("internal", String(describing: type(of: error)))
        }
    }

    static func readToken(_ path: String) throws(TenderError) -> [UInt8] {
        // The parser enforces TokenLimits.tokenBytesMax; this bound only keeps a wrong file from being slurped.
        Array(try KeysCommands.readSmallFile(path, flag: "token").utf8)
    }

    /// RFC 3339 / ISO 8601 with or without fractional seconds.
    static func parseTime(_ text: String, flag: String) throws(UsageError) -> Date {
        guard let date = RFC3339.date(from: text) else {
            throw UsageError(message: "--\(flag) must be an ISO 8601 time such as 2024-01-08T17:54:44Z")
        }
        return date
    }

    /// The decrypted token as printed: masked unless `reveal`.
    struct DecryptOutput: Encodable {
        struct Header: Encodable {
            let version: String
            let transactionId: String
            let applicationData: String?
            let publicKeyHash: String
            let signingTime: Date
        }
        struct Payload: Encodable {
            let applicationPrimaryAccountNumber: String
            let applicationExpirationDate: String
            let currencyCode: String
            let transactionAmount: Int64
            let deviceManufacturerIdentifier: String
            let paymentDataType: String
            let onlinePaymentCryptogram: String?
            let eciIndicator: String?
            let emvData: String?
            let cardholderName: String?
            let merchantTokenIdentifier: String?
        }
        let verified: Header
        let paymentMethod: PaymentMethodInfo?
        let transactionIdentifier: String?
        let paymentData: Payload
        let masked: Bool

        init(_ result: DecryptedPaymentToken, reveal: Bool) {
            let t = result.token, p = result.paymentData
            verified = Header(version: t.version.rawValue, transactionId: t.transactionIdHex, applicationData: t.applicationDataHex,
                              publicKeyHash: t.publicKeyHashBase64, signingTime: t.signingTime)
            paymentMethod = t.paymentMethod
            transactionIdentifier = t.transactionIdentifier
            masked = !reveal
            let redacted = "<redacted>"
            // PCI DSS 3.4.1: at most the last four digits unless the operator asked otherwise.
            let sensitive = reveal ? p.unsafeRevealSensitive() : nil
            paymentData = Payload(
                applicationPrimaryAccountNumber: sensitive?.applicationPrimaryAccountNumber ?? "****" + p.panLastFour,
                applicationExpirationDate: p.applicationExpirationDate, currencyCode: p.currencyCodeNumeric,
                transactionAmount: p.transactionAmountMinor, deviceManufacturerIdentifier: p.deviceManufacturerIdentifier,
                paymentDataType: p.paymentDataType.rawValue,
                onlinePaymentCryptogram: reveal ? sensitive?.onlinePaymentCryptogram : p.paymentDataType == .threeDSecure ? redacted : nil,
                eciIndicator: reveal ? p.eciIndicator : p.eciIndicator.map { _ in redacted },
                emvData: reveal ? sensitive?.emvData : p.paymentDataType == .emv ? redacted : nil,
                cardholderName: reveal ? sensitive?.cardholderName : p.hasCardholderName ? redacted : nil,
                merchantTokenIdentifier: p.merchantTokenIdentifier)
        }
    }
}

/// `tender sandbox init` and `tender sandbox token`: a local stand-in for Apple.
extension SandboxCommands {
    /// Merchant payment-processing certificate and key written beside the authority's files.
    static let merchantCertificateFile = "merchant-processing.pem"
    static let merchantKeyFile = "merchant-processing-key.pem"

    static let initHelp = """
        usage: tender sandbox init --dir DIR [--merchant-id ID]
        Writes a sandbox Apple stand-in to DIR as PEM files: root.pem, intermediate.pem, leaf.pem (with
        Apple's marker OIDs) and their keys, and a payment-processing certificate for the merchant
        (default \(sandboxMerchantId)) with its key (\(merchantCertificateFile), \(merchantKeyFile)).
        Keys are written mode 0600. Refuses a DIR that already holds a sandbox. Trust it only in
        development: TENDER_APPLE_ROOTS=DIR/root.pem. Prints the processing key's publicKeyHash.
        """

    static let tokenHelp = """
        usage: tender sandbox token --dir DIR (--amount 14.98 --currency USD --application-data BASE64 | --session ID)
                                    [--pan DIGITS] [--at ISO8601] [--out FILE]
        Mints an EC_v1 Apple Pay token (ApplePayPaymentToken JSON: paymentData, paymentMethod,
        transactionIdentifier) signed by the sandbox in DIR for its merchant processing certificate.
        --session reads the amount, currency and applicationData of a checkout session from the
        database (TENDER_DATABASE_URL). --at sets the CMS signing time (default now). Writes to --out
        (mode 0600) or stdout.
        """

    static func runInit(_ argv: [String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["dir", "merchant-id"])
        if args.wantsHelp { Console.out(initHelp); return .success }
        try args.expectPositionals(0)
        let merchantId = args.value("merchant-id") ?? sandboxMerchantId
        let hash = try writeSandbox(directory: try args.required("dir"), merchantId: merchantId, now: Clock.system.now())
        struct Output: Encodable { let dir: String; let merchantId: String; let publicKeyHash: String }
        KeysCommands.printJSON(Output(dir: try args.required("dir"), merchantId: merchantId, publicKeyHash: hash))
        return .success
    }

    /// Creates the authority and a merchant key and writes them; returns the publicKeyHash.
    static func writeSandbox(directory: String, merchantId: String, now: Date) throws -> String {
        let fm = FileManager.default
        if fm.fileExists(atPath: directory + "/root.pem") {
            throw TenderError("sandbox_exists", "\(directory) already holds a sandbox; use another --dir")
        }
        do { try fm.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
            throw TenderError("file_unwritable", "cannot create \(directory)")
        }
        // Valid from a day back, so tokens minted with a slightly earlier --at still chain.
        let validFrom = now.addingTimeInterval(-86_400)
        let authority = try SandboxAuthority.create(validFrom: validFrom)
        let merchant = try authority.makeMerchantKey(merchantIdentifier: merchantId, validFrom: validFrom)
        var files = try authority.unsafeFilesWithPrivateKeys()
        files[merchantCertificateFile] = merchant.certificate.pem
        files[merchantKeyFile] = try merchant.privateKey.unsafePKCS8PEM()
        for (name, text) in files.sorted(by: { $0.key < $1.key }) {
            try writeFile(directory + "/" + name, Array(text.utf8), secret: name.hasSuffix("-key.pem"))
        }
        return merchant.publicKeyHashBase64
    }

    /// Writes a file created with mode 0600 for secrets (0644 otherwise), never following an existing file.
    static func writeFile(_ path: String, _ bytes: [UInt8], secret: Bool) throws(TenderError) {
        _ = unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, secret ? 0o600 : 0o644)
        guard fd >= 0 else { throw TenderError("file_unwritable", "cannot create \(path)") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw TenderError("file_unwritable", "cannot write \(path)") }
    }

    /// Loads the authority and the merchant key written by `sandbox init`.
    static func loadSandbox(directory: String) throws -> (SandboxAuthority, MerchantKey) {
        var files: [String: String] = [:]
        for name in SandboxAuthority.fileNames + [merchantCertificateFile, merchantKeyFile] {
            files[name] = try KeysCommands.readSmallFile(directory + "/" + name, flag: "dir")
        }
        let authority = try SandboxAuthority(files: files)
        let merchant = try MerchantKey(certificatePEM: files[merchantCertificateFile] ?? "", privateKeyPEM: files[merchantKeyFile] ?? "")
        return (authority, merchant)
    }

    static func runToken(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["dir", "amount", "currency", "application-data", "session", "pan", "at", "out"])
        if args.wantsHelp { Console.out(tokenHelp); return .success }
        try args.expectPositionals(0)
        let directory = try args.required("dir")
        let signingTime = try args.value("at").map { (text: String) throws(UsageError) in try TokenCommands.parseTime(text,
            flag: "at") } ?? Clock.system.now()
        let amountMinor: Int64, currency: Currency, applicationData: [UInt8]
        if let session = args.value("session") {
            guard args.value("amount") == nil, args.value("currency") == nil, args.value("application-data") == nil else {
                throw UsageError(message: "--session replaces --amount, --currency and --application-data")
            }
            (amountMinor, currency, applicationData) = try sessionTerms(session, environment: environment)
        } else {
            do { currency = try Currency(code: try args.required("currency")) } catch let error as UsageError { throw error } catch {
                throw UsageError(message: "--currency must be an ISO 4217 code such as USD")
            }
            do { amountMinor = try currency.parseAmount(try args.required("amount")) } catch let error as UsageError { throw error } catch {
                throw UsageError(message: "--amount must be a decimal with \(currency.minorUnits)"
                    + " fraction digits, e.g. \(currency.formatAmount(1498))")
            }
            guard let data = Data(base64Encoded: try args.required("application-data")) else {
                throw UsageError(message: "--application-data must be base64")
            }
            applicationData = Array(data)
        }
        var request = SandboxTokenRequest(amountMinor: amountMinor, currencyCodeNumeric: currency.numericCodeString,
                                          applicationData: applicationData, signingTime: signingTime)
        if let pan = args.value("pan") {
            guard (12...19).contains(pan.count), pan.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw UsageError(message: "--pan must be 12-19 digits")
            }
            request.pan = pan
        }
        let (authority, merchant) = try loadSandbox(directory: directory)
        let token = try authority.mintToken(request, for: merchant)
        if let out = args.value("out") {
            try writeFile(out, token, secret: true)
        } else {
            Console.out(String(decoding: token, as: UTF8.self))
        }
        return .success
    }

    /// Amount, currency and applicationData bytes of a checkout session.
    static func sessionTerms(_ sessionId: String, environment: [String: String]) throws -> (Int64, Currency, [UInt8]) {
        let (_, pool) = try TenderCLI.openDatabase(environment)
        defer { pool.close() }
        return try sessionTerms(sessionId, pool: pool)
    }

    /// Amount, currency and applicationData bytes of a checkout session (also `POST /demo/api/sandbox-token`).
    static func sessionTerms(_ sessionId: String, pool: PostgresPool) throws -> (Int64, Currency, [UInt8]) {
        guard let row = try pool.query(
            "SELECT total_minor, currency_code, application_data FROM checkout_sessions WHERE session_id = $1",
            [sessionId]).first else {
            throw TenderError("session_not_found", "no checkout session \(sessionId)")
        }
        let code: String = try row.decode("currency_code")
        let applicationData: String = try row.decode("application_data")
        guard let bytes = Data(base64Encoded: applicationData) else {
            throw TenderError("session_invalid", "session applicationData is not base64")
        }
        return (try row.decode("total_minor"), try Currency(code: code), Array(bytes))
    }

    /// The `bootstrap` part that gives `make run` a working token flow: a sandbox in
    /// `$TENDER_DATA_DIR/sandbox` and its processing key imported for the sandbox merchant, once.
    static func bootstrapSandboxKeys(configuration: TenderConfiguration, pool: PostgresPool) throws {
        let directory = configuration.dataDirectory + "/sandbox"
        if !FileManager.default.fileExists(atPath: directory + "/root.pem") {
            _ = try writeSandbox(directory: directory, merchantId: sandboxMerchantId, now: Clock.system.now())
            Console.out("tender: sandbox Apple stand-in written to \(directory) (trust it with TENDER_APPLE_ROOTS=\(directory)/root.pem)")
        }
        let (_, merchant) = try loadSandbox(directory: directory)
        let store = KeyStore(pool: pool, masterKeyFile: configuration.masterKeyFile,
                             onCreate: { Console.err("tender: created a new master key at \($0) (mode 0600)") })
        if try store.list(merchantId: sandboxMerchantId).contains(where: { $0.publicKeyHash == merchant.publicKeyHashBase64 }) {
            return
        }
        let info = try store.importKey(merchantId: sandboxMerchantId, certificatePEM: merchant.certificate.pem,
                                       privateKey: try merchant.privateKey.unsafePKCS8PEM(), kind: .processing)
        Console.out("tender: sandbox processing key imported (publicKeyHash \(info.publicKeyHash ?? ""))")
    }
}
