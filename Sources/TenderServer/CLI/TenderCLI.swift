import ApplePayToken
import Foundation
import Observability
import PaymentRequest
import Postgres

/// The `tender` command line: hand-written subcommand dispatch (README.md, Commands).
public enum TenderCLI {
    static let usage = """
        usage: tender <command> [options]

        commands:
          serve                 run the HTTP server (SIGTERM drains and exits 0)
          migrate               apply pending migrations/*.sql
          merchants add|list|update   register, list or change merchants
          api-keys create|list|revoke print a new secret API key (shown once), list or revoke keys
          keys csr|import|list|retire merchant Apple Pay keys (CSRs for Apple; sealed at rest; rotation)
          token decrypt         offline verify + decrypt of one Apple Pay token, for debugging
          sandbox bootstrap     create the sandbox merchant and print its API key the first time
          sandbox init|token    a local stand-in for Apple: test CA files, minted EC_v1 tokens
          finance-bench         print the finance feed's catch-up and live-latency figures
          reconcile             import a settlement report file and print the reconciliation summary
          payments needs-operator|release   outcomes Tender could not record, for an operator
          docs apple-pay-rules  print docs/apple-pay-rules.md from the validator's rule table

        Every command accepts --help. Configuration comes from TENDER_* environment variables
        (see README.md); flags override them.
        """

    /// Runs one command line (without the program name) and returns the process exit code.
    public static func run(_ argv: [String], environment: [String: String]) -> Int32 {
        defer { Logger.flush() }
        guard let command = argv.first else {
            Console.err(usage)
            return ExitCode.usage.rawValue
        }
        let rest = Array(argv.dropFirst())
        do {
            switch command {
            case "--help", "-h", "help":
                Console.out(usage)
                return ExitCode.success.rawValue
            case "serve":
                return try ServeCommand.run(rest, environment: environment).rawValue
            case "migrate":
                return try MigrateCommand.run(rest, environment: environment).rawValue
            case "merchants":
                return try MerchantCommands.run(rest, environment: environment).rawValue
            case "api-keys":
                return try APIKeyCommands.run(rest, environment: environment).rawValue
            case "keys":
                return try KeysCommands.run(rest, environment: environment).rawValue
            case "token":
                return try TokenCommands.run(rest, environment: environment).rawValue
            case "bench":
                return try BenchCommands.run(rest, environment: environment).rawValue
            case "sandbox":
                return try SandboxCommands.run(rest, environment: environment).rawValue
            case "finance-bench": return try FinanceBenchCommand.run(rest, environment: environment).rawValue
            case "reconcile":
                return try ReconcileCommand.run(rest, environment: environment).rawValue
            case "payments":
                return try PaymentsCommands.run(rest, environment: environment).rawValue
            case "docs":
                return try DocsCommand.run(rest).rawValue
            default:
                Console.err("tender: unknown command \(command)\n\n\(usage)")
                return ExitCode.usage.rawValue
            }
        } catch let error as UsageError {
            Console.err("tender \(command): \(error.message) (see tender \(command) --help)")
            return ExitCode.usage.rawValue
        } catch let error as ConfigurationError {
            Console.err("tender: \(error)")
            return ExitCode.configuration.rawValue
        } catch let error as TenderError {
            Console.err("tender \(command): error \(error.code): \(error.detail)")
            return ExitCode.failure.rawValue
        } catch let error as TokenError {
            Console.err("tender \(command): error \(error.code.rawValue): \(error.detail)")
            return ExitCode.failure.rawValue
        } catch let error as MigrationError {
            Console.err("tender \(command): error \(error.code.rawValue): \(error.detail)")
            return ExitCode.failure.rawValue
        } catch let error as PostgresError {
            Console.err("tender \(command): error \(error.code.rawValue): \(error.message)")
            switch error.code {
            case .connectionFailed, .poolTimeout, .poolExhausted, .poolClosed: return ExitCode.unavailable.rawValue
            default: return ExitCode.failure.rawValue
            }
        } catch {
            Console.err("tender \(command): error internal: \(type(of: error))")
            return ExitCode.failure.rawValue
        }
    }

    /// Parsed configuration (`overrides` from flags win over the environment) plus a pool for one-shot commands.
    static func openDatabase(_ environment: [String: String], overrides: [String: String] = [:],
                             connectionsMax: Int = 2) throws -> (TenderConfiguration, PostgresPool) {
        let configuration = try TenderConfiguration.load(environment: environment, overrides: overrides)
        var pg = PostgresConfiguration(connectionString: configuration.resolvedDatabaseURL)
        pg.preparedStatements = configuration.limits.databasePreparedStatements
        pg.connectionsMax = connectionsMax
        pg.statementTimeoutMilliseconds = configuration.limits.statementTimeoutMilliseconds
        pg.applicationName = "tender-cli"
        return (configuration, PostgresPool(configuration: pg))
    }

    /// Finds `migrations/`: `TENDER_MIGRATIONS_DIR`, then `./migrations`, then beside the checkout of the binary.
    static func migrationsDirectory(_ environment: [String: String]) -> String {
        if let dir = environment["TENDER_MIGRATIONS_DIR"], !dir.isEmpty { return dir }
        let fm = FileManager.default
        if fm.fileExists(atPath: "migrations") { return "migrations" }
        // .build/<config>/tender -> checkout root
        let exe = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath()
        let candidate = exe.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("migrations").path
        return fm.fileExists(atPath: candidate) ? candidate : "migrations"
    }
}

enum MigrateCommand {
    static let help = """
        usage: tender migrate
        Applies migrations/*.sql (NNNN_name.sql) forward-only, each in its own transaction, under an
        advisory lock; refuses to run if an applied file has changed. Prints what it applied.
        Environment: TENDER_DATABASE_URL, TENDER_MIGRATIONS_DIR.
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: [])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(0)
        let (_, pool) = try TenderCLI.openDatabase(environment)
        defer { pool.close() }
        let files = try MigrationFile.load(directory: TenderCLI.migrationsDirectory(environment))
        let applied = try Migrator(pool: pool, files: files).migrate()
        struct Output: Encodable { let applied: [String]; let total: Int }
        Console.json(Output(applied: applied.map { String(format: "%04d_%@", $0.version, $0.name) }, total: files.count))
        return .success
    }
}

enum MerchantCommands {
    static let help = """
        usage: tender merchants add --merchant-id ID --display-name NAME --domain HOST[,HOST] --country CC --currencies USD[,EUR]
               tender merchants list
               tender merchants update --merchant-id ID [--display-name NAME] [--domain HOST[,HOST]] [--currencies USD[,EUR]]
                                       [--order-management-url https://…]
        add registers a merchant; list prints every merchant; update changes the given fields (the domains
        and currencies given replace the old lists; sessions already created keep their payment request;
        --order-management-url is where new Wallet orders send the shopper, default https://{first domain}/).
        Each prints JSON.
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        switch sub {
        case "add":
            let args = try Arguments(Array(argv.dropFirst()),
                                     options: ["merchant-id", "display-name", "domain", "country", "currencies"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let merchant = try Merchant.validated(
                merchantId: try args.required("merchant-id"), displayName: try args.required("display-name"),
                domains: try args.list("domain"), countryCode: try args.required("country"),
                currencies: try args.list("currencies"))
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            try MerchantStore(pool: pool).add(merchant)
            Console.json(merchant)
        case "list":
            let args = try Arguments(Array(argv.dropFirst()), options: [])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            struct Output: Encodable { let merchants: [Merchant] }
            Console.json(Output(merchants: try MerchantStore(pool: pool).list()))
        case "update":
            let args = try Arguments(Array(argv.dropFirst()), options: ["merchant-id", "display-name", "domain", "currencies",
                                                                        "order-management-url"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let merchantId = try args.required("merchant-id")
            let displayName = args.value("display-name")
            let domains = args.value("domain") == nil ? nil : try args.list("domain")
            let currencies = args.value("currencies") == nil ? nil : try args.list("currencies")
            let orderManagementURL = args.value("order-management-url")
            guard displayName != nil || domains != nil || currencies != nil || orderManagementURL != nil else {
                throw UsageError(message: "give at least one of --display-name, --domain, --currencies, --order-management-url")
            }
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            if let orderManagementURL {
                try WalletOrders.setOrderManagementURL(orderManagementURL, merchantId: merchantId, pool: pool)
            }
            let store = MerchantStore(pool: pool)
            guard displayName != nil || domains != nil || currencies != nil else {
                guard let merchant = try store.merchant(id: merchantId) else {
                    throw TenderError("merchant_not_found", "no merchant \(merchantId)")
                }
                Console.json(merchant)
                return .success
            }
            Console.json(try store.update(merchantId: merchantId, displayName: displayName, domains: domains, currencies: currencies))
        default:
            throw UsageError(message: "unknown subcommand \(sub)")
        }
        return .success
    }
}

enum APIKeyCommands {
    static let help = """
        usage: tender api-keys create --merchant-id ID
               tender api-keys list --merchant-id ID
               tender api-keys revoke --key-id ID
        create prints a new secret API key once; only its hash is stored.
        list prints the merchant's keys by id (the part between tk_ and the next _), with creation, last
        use (to the minute) and revocation; never a secret.
        revoke refuses the key from the next request on, on every node: API keys are not cached.
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        switch sub {
        case "create":
            let args = try Arguments(Array(argv.dropFirst()), options: ["merchant-id"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let merchantId = try args.required("merchant-id")
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            let key = try MerchantStore(pool: pool).createAPIKey(merchantId: merchantId)
            struct Output: Encodable { let merchantId: String; let keyId: String; let apiKey: String }
            Console.json(Output(merchantId: key.merchantId, keyId: key.keyId, apiKey: key.secret))
        case "list":
            let args = try Arguments(Array(argv.dropFirst()), options: ["merchant-id"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let merchantId = try args.required("merchant-id")
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            struct Output: Encodable { let apiKeys: [APIKeyInfo] }
            KeysCommands.printJSON(Output(apiKeys: try MerchantStore(pool: pool).apiKeys(merchantId: merchantId)))
        case "revoke":
            let args = try Arguments(Array(argv.dropFirst()), options: ["key-id"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let keyId = try args.required("key-id")
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            KeysCommands.printJSON(try MerchantStore(pool: pool).revokeAPIKey(keyId: keyId))
        default:
            throw UsageError(message: "unknown subcommand \(sub)")
        }
        return .success
    }
}

enum SandboxCommands {
    static let sandboxMerchantId = "merchant.dev.tender.sandbox"
    static let help = """
        usage: tender sandbox bootstrap
               tender sandbox init --dir DIR [--merchant-id ID]          (see tender sandbox init --help)
               tender sandbox token --dir DIR …                          (see tender sandbox token --help)
        bootstrap creates the sandbox merchant (\(sandboxMerchantId)) and prints an API key the first time
        (later runs print nothing new; more keys: `tender api-keys create`). It also writes a sandbox Apple
        stand-in to $TENDER_DATA_DIR/sandbox and imports its processing key for the sandbox merchant, once,
        so tokens from `tender sandbox token --dir $TENDER_DATA_DIR/sandbox` decrypt when the server runs
        with TENDER_APPLE_ROOTS=$TENDER_DATA_DIR/sandbox/root.pem (as `make run` does). And it writes a
        sandbox WWDR stand-in to $TENDER_DATA_DIR/sandbox/wallet with one order-type and one pass-type
        identity for the sandbox merchant, so paid sandbox sessions get Wallet orders.
        """

    /// The demo store's coupon (`DemoCatalog.couponCode`, 10 % off) for the sandbox merchant, once.
    static func bootstrapDemoCoupon(pool: PostgresPool) throws {
        guard let merchant = try MerchantStore(pool: pool).merchant(id: sandboxMerchantId) else { return }
        let input = try StrictBody<CouponInput>.decode(Array(#"{"code":"\#(DemoCatalog.couponCode)","percentOff":"10"}"#.utf8))
        let coupon = try TenderApp.validatedCoupon(input, merchant: merchant)
        try pool.withConnection { conn in
            guard try CouponStore.find(merchantId: sandboxMerchantId, code: coupon.code, on: conn) == nil else { return }
            _ = try CouponStore.insert(coupon, merchantId: sandboxMerchantId, on: conn)
            Console.out("tender: sandbox coupon \(coupon.code) created (10 % off)")
        }
    }

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        switch sub {
        case "init":
            return try runInit(Array(argv.dropFirst()))
        case "token":
            return try runToken(Array(argv.dropFirst()), environment: environment)
        case "bootstrap":
            let args = try Arguments(Array(argv.dropFirst()), options: [])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let (configuration, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            let store = MerchantStore(pool: pool)
            if try store.merchant(id: sandboxMerchantId) != nil {
                Console.err("tender: sandbox merchant \(sandboxMerchantId) exists;"
                    + " its API key was printed when it was created (new key: tender api-keys create --merchant-id \(sandboxMerchantId))")
            } else {
                let merchant = try Merchant.validated(
                    merchantId: sandboxMerchantId, displayName: "Tender Sandbox", domains: ["localhost"],
                    countryCode: "US", currencies: ["USD", "EUR", "JPY", "KWD"])
                try store.add(merchant)
                let key = try store.createAPIKey(merchantId: sandboxMerchantId)
                Console.out("tender: sandbox merchant \(sandboxMerchantId) created")
                Console.out("tender: sandbox API key (shown once): \(key.secret)")
            }
            try bootstrapSandboxKeys(configuration: configuration, pool: pool)
            try WalletSandbox.bootstrap(configuration: configuration, pool: pool, merchantId: sandboxMerchantId)
            try bootstrapDemoCoupon(pool: pool)
            return .success
        default:
            throw UsageError(message: "unknown subcommand \(sub)")
        }
    }
}

/// `tender docs apple-pay-rules`: the generated rule list (docs/apple-pay-rules.md).
enum DocsCommand {
    static let help = """
        usage: tender docs apple-pay-rules
        Prints the Apple Pay request rules that error messages cite, from the validator's own table;
        docs/apple-pay-rules.md is this output (a test fails when it is stale).
        """

    static func run(_ argv: [String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        guard sub == "apple-pay-rules" else { throw UsageError(message: "unknown subcommand \(sub)") }
        let args = try Arguments(Array(argv.dropFirst()), options: [])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(0)
        Console.out(String(RequestRuleCatalogue.markdown().dropLast()))
        return .success
    }
}
