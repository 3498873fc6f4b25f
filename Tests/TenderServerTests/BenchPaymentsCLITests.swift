import Testing
@testable import TenderServer

/// `tender bench payments`: its arguments, and its refusal of any database not named as a bench one.
@Suite struct BenchPaymentsCLITests {
    static let benchURL = "postgresql://tender@127.0.0.1:54329/tender_bench_payments"

    @Test func defaultsAndOptions() throws {
        let plain = try PaymentsBench.options(try Arguments(["--database-url", Self.benchURL],
                                                            options: ["database-url", "seconds", "count-max", "clients"]),
                                              environment: [:])
        #expect(plain == PaymentsBench.Options(databaseURL: Self.benchURL, seconds: 10, countMax: 20_000, clients: 32))
        let sized = try PaymentsBench.options(try Arguments(["--seconds", "5", "--count-max=100", "--clients", "4"],
                                                            options: ["database-url", "seconds", "count-max", "clients"]),
                                              environment: ["TENDER_DATABASE_URL": "postgresql://tender@h/x_test?sslmode=disable"])
        #expect(sized == PaymentsBench.Options(databaseURL: "postgresql://tender@h/x_test?sslmode=disable", seconds: 5,
                                               countMax: 100, clients: 4))
        let fromEnvironment = try PaymentsBench.options(try Arguments([], options: ["database-url", "seconds"]),
                                                        environment: ["TENDER_DATABASE_URL": Self.benchURL, "BENCH_SECONDS": "3"])
        #expect(fromEnvironment.seconds == 3)
        #expect(fromEnvironment.subscribers)
        let bare = try PaymentsBench.options(try Arguments(["--without-subscribers"], options: ["database-url"],
                                                           flags: ["without-subscribers"]),
                                             environment: ["TENDER_DATABASE_URL": Self.benchURL])
        #expect(!bare.subscribers)
    }

    @Test func databaseNames() {
        #expect(PaymentsBench.databaseName("postgresql://tender@127.0.0.1:54329/tender_bench?sslmode=disable") == "tender_bench")
        #expect(PaymentsBench.databaseName("host=localhost dbname=shop_sandbox user=tender") == "shop_sandbox")
        #expect(PaymentsBench.databaseName("postgresql://tender@127.0.0.1:54329") == nil)
        #expect(PaymentsBench.isBenchDatabaseName("Tender_TEST"))
        #expect(!PaymentsBench.isBenchDatabaseName("tender"))
    }

    struct Refusal: Sendable, CustomStringConvertible {
        let argv: [String]
        let environment: [String: String]
        let message: String
        var description: String { argv.joined(separator: " ") }
    }

    static let refusals: [Refusal] = [
        Refusal(argv: ["bench", "payments"], environment: ["TENDER_DATABASE_URL": ""], message: "needs --database-url"),
        Refusal(argv: ["bench", "payments", "--database-url", "postgresql://tender@127.0.0.1:54329/tender"], environment: [:],
                message: "refusing database 'tender'"),
        Refusal(argv: ["bench", "payments"], environment: ["TENDER_DATABASE_URL": "postgresql://tender@127.0.0.1:54329/shop"],
                message: "refusing database 'shop'"),
        Refusal(argv: ["bench", "payments", "--database-url", benchURL, "--seconds", "0"], environment: [:],
                message: "--seconds must be in"),
        Refusal(argv: ["bench", "payments", "--database-url", benchURL, "--clients", "many"], environment: [:],
                message: "--clients must be in"),
        Refusal(argv: ["bench", "payments", "--database-url", benchURL, "extra"], environment: [:],
                message: "unexpected argument extra"),
    ]

    @Test(arguments: BenchPaymentsCLITests.refusals)
    func refusal(_ refusal: Refusal) throws {
        let r = try runTender(refusal.argv, environment: refusal.environment)
        #expect(r.status == ExitCode.usage.rawValue)
        #expect(r.stderr.contains(refusal.message))
    }

    @Test func help() throws {
        let r = try runTender(["bench", "payments", "--help"], environment: [:])
        #expect(r.status == 0)
        #expect(r.stdout.contains("usage: tender bench payments"))
    }
}
