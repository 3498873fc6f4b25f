import HTTPServer
import Payments
import Testing
@testable import TenderServer

@Suite struct ConfigurationTests {
    @Test func defaultsFollowTheContract() throws {
        let c = try TenderConfiguration.load(environment: [:])
        #expect(c.listenHost == "127.0.0.1")
        #expect(c.listenPort == 8080)
        #expect(c.tokenAgeMaxSeconds == 300)
        #expect(c.processor == .simulator)
        #expect(c.processorTimeoutMilliseconds == 10_000)
        #expect(c.logFormat == .json)
        #expect(c.masterKeyFile == "./.tender/master.key")
        #expect(c.databaseURL == nil)
        #expect(c.resolvedDatabaseURL == "postgresql://tender@127.0.0.1:54329/tender")
        #expect(c.applePayGatewayHosts.contains("apple-pay-gateway.apple.com"))
    }

    @Test(arguments: [
        ("TENDER_LISTEN", "localhost"),
        ("TENDER_LISTEN", "127.0.0.1:70000"),
        ("TENDER_LISTEN", "127.0.0.1:http"),
        ("TENDER_PROCESSOR", "stripe"),
        ("TENDER_LOG_FORMAT", "xml"),
        ("TENDER_TOKEN_MAX_AGE_SECONDS", "-5"),
        ("TENDER_TOKEN_MAX_AGE_SECONDS", "0"),
        ("TENDER_TOKEN_MAX_AGE_SECONDS", "86401"),
        ("TENDER_PROCESSOR_TIMEOUT_MS", "ten"),
        ("TENDER_PROCESSOR_URL", "ftp://processor.test"),
        ("TENDER_APPLE_ROOTS", "/nonexistent/root.pem"),
        ("TENDER_APPLE_PAY_GATEWAY_HOSTS", "bad host"),
        ("TENDER_DB_POOL_SIZE", "0"),
        ("TENDER_HTTP_BODY_BYTES_MAX", "1023"),
        ("TENDER_FINANCE_FEED_LAG_MAX_SECONDS", "0"),
        ("TENDER_FINANCE_FEED_LAG_MAX_SECONDS", "86401"),
    ])
    func badValueNamesTheVariable(variable: String, value: String) {
        #expect {
            _ = try TenderConfiguration.load(environment: [variable: value])
        } throws: { error in
            (error as? ConfigurationError)?.variable == variable
        }
    }

    @Test func limitBoundariesAreInclusive() throws {
        #expect(try TenderConfiguration.load(environment: ["TENDER_TOKEN_MAX_AGE_SECONDS": "86400"]).tokenAgeMaxSeconds == 86_400)
        #expect(try TenderConfiguration.load(environment: ["TENDER_TOKEN_MAX_AGE_SECONDS": "1"]).tokenAgeMaxSeconds == 1)
        #expect(try TenderConfiguration.load(environment: ["TENDER_HTTP_BODY_BYTES_MAX": "1024"]).limits.bodyBytesMax == 1_024)
        #expect(try TenderConfiguration.load(environment: ["TENDER_FINANCE_FEED_LAG_MAX_SECONDS": "1"]).financeFeedLagSecondsMax == 1)
        #expect(try TenderConfiguration.load(environment: ["TENDER_FINANCE_FEED_LAG_MAX_SECONDS": "86400"])
            .financeFeedLagSecondsMax == 86_400)
    }

    @Test func preparedStatementsAreOnUnlessTurnedOff() throws {
        #expect(try TenderConfiguration.load(environment: [:]).limits.databasePreparedStatements)
        #expect(try TenderConfiguration.load(environment: ["TENDER_DB_PREPARED_STATEMENTS": "on"]).limits.databasePreparedStatements)
        #expect(try !TenderConfiguration.load(environment: ["TENDER_DB_PREPARED_STATEMENTS": "off"]).limits.databasePreparedStatements)
        for bad in ["true", "OFF", "1", " on"] {
            #expect {
                _ = try TenderConfiguration.load(environment: ["TENDER_DB_PREPARED_STATEMENTS": bad])
            } throws: { error in
                let error = error as? ConfigurationError
                return error?.variable == "TENDER_DB_PREPARED_STATEMENTS"
                    && error?.code == TenderConfiguration.preparedStatementsInvalidCode
                    && error?.code == "database_prepared_statements_invalid"
            }
        }
    }

    @Test func theFinanceFeedConnectsWhereItIsTold() throws {
        let defaults = try TenderConfiguration.load(environment: [:])
        #expect(defaults.financeFeedDatabaseURL == nil)
        #expect(defaults.financeFeedLagSecondsMax == 30)
        let direct = "postgresql://tender@db-primary:5432/tender"
        #expect(try TenderConfiguration.load(environment: ["TENDER_FINANCE_FEED_DATABASE_URL": direct]).financeFeedDatabaseURL == direct)
    }

    @Test func reconciliationRulesDefaultToExactAmountsAndAWeek() throws {
        let c = try TenderConfiguration.load(environment: [:])
        #expect(c.reconciliation.amountToleranceMinor == 0)
        #expect(c.reconciliation.settlementLagSeconds == 604_800)
    }

    @Test(arguments: [
        ("0", "0", Int64(0), Int64(0)),
        ("1", "3600", 1, 3_600),
        ("25", "86400", 25, 86_400),
        ("1000", "7776000", 1_000, 7_776_000),   // both upper bounds are inclusive
        ("007", "060", 7, 60),
    ])
    func reconciliationRulesAreRead(tolerance: String, lag: String, toleranceMinor: Int64, lagSeconds: Int64) throws {
        let c = try TenderConfiguration.load(environment: ["TENDER_RECON_AMOUNT_TOLERANCE_MINOR": tolerance,
                                                           "TENDER_RECON_SETTLEMENT_LAG_SECONDS": lag])
        #expect(c.reconciliation.amountToleranceMinor == toleranceMinor)
        #expect(c.reconciliation.settlementLagSeconds == lagSeconds)
    }

    @Test func anEmptyReconciliationRuleMeansTheDefault() throws {
        let c = try TenderConfiguration.load(environment: ["TENDER_RECON_AMOUNT_TOLERANCE_MINOR": "",
                                                           "TENDER_RECON_SETTLEMENT_LAG_SECONDS": ""])
        #expect(c.reconciliation.amountToleranceMinor == 0)
        #expect(c.reconciliation.settlementLagSeconds == 604_800)
    }

    @Test(arguments: [
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "-1"),                    // negative
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "1001"),                  // just past the bound
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "0.5"),                   // a decimal, not minor units
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "+1"),                    // sign
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", " 1"),                    // whitespace
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "one"),                   // not a number
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "0x10"),                  // hex
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "\u{0661}"),              // a non-ASCII digit
        ("TENDER_RECON_AMOUNT_TOLERANCE_MINOR", "99999999999999999999"),  // overflows Int
        ("TENDER_RECON_SETTLEMENT_LAG_SECONDS", "-1"),
        ("TENDER_RECON_SETTLEMENT_LAG_SECONDS", "7776001"),               // 90 days + 1 s
        ("TENDER_RECON_SETTLEMENT_LAG_SECONDS", "7d"),                    // units are not parsed
        ("TENDER_RECON_SETTLEMENT_LAG_SECONDS", "1e3"),
        ("TENDER_RECON_SETTLEMENT_LAG_SECONDS", "3600 "),
        ("TENDER_RECON_SETTLEMENT_LAG_SECONDS", "99999999999999999999"),
    ])
    func badReconciliationRuleNamesTheVariable(variable: String, value: String) {
        #expect {
            _ = try TenderConfiguration.load(environment: [variable: value])
        } throws: { error in
            (error as? ConfigurationError)?.variable == variable
        }
    }

    @Test func httpProcessorNeedsURL() {
        #expect {
            _ = try TenderConfiguration.load(environment: ["TENDER_PROCESSOR": "http"])
        } throws: { ($0 as? ConfigurationError)?.variable == "TENDER_PROCESSOR_URL" }
    }

    @Test func flagsOverrideEnvironment() throws {
        let c = try TenderConfiguration.load(environment: ["TENDER_LISTEN": "127.0.0.1:9000"],
                                             overrides: ["TENDER_LISTEN": ":0"])
        #expect(c.listenPort == 0)
        #expect(c.listenHost == "127.0.0.1")
    }

    @Test func ipv6ListenAddress() throws {
        let c = try TenderConfiguration.load(environment: ["TENDER_LISTEN": "[::1]:8443"])
        #expect(c.listenHost == "::1")
        #expect(c.listenPort == 8443)
    }
}

@Suite struct ArgumentsTests {
    @Test func parsesValuesFlagsAndEquals() throws {
        let a = try Arguments(["--merchant-id", "m1", "--kind=identity", "--reveal"], options: ["merchant-id", "kind"], flags: ["reveal"])
        #expect(a.value("merchant-id") == "m1")
        #expect(a.value("kind") == "identity")
        #expect(a.flag("reveal"))
        #expect(!a.wantsHelp)
    }

    @Test func unknownOptionIsAUsageError() {
        #expect(throws: UsageError.self) { try Arguments(["--colour", "red"], options: ["color"]) }
    }

    @Test func missingValueIsAUsageError() {
        #expect(throws: UsageError.self) { try Arguments(["--merchant-id"], options: ["merchant-id"]) }
        #expect(throws: UsageError.self) { try Arguments(["--merchant-id", "--other", "x"], options: ["merchant-id", "other"]) }
    }

    @Test func repeatedOptionIsRefused() {
        #expect(throws: UsageError.self) { try Arguments(["--a", "1", "--a", "2"], options: ["a"]) }
    }

    @Test func requiredNamesTheFlag() throws {
        let a = try Arguments([], options: ["merchant-id"])
        #expect { try a.required("merchant-id") } throws: { ($0 as? UsageError)?.message == "missing --merchant-id" }
    }

    @Test func helpIsRecognised() throws {
        #expect(try Arguments(["--help"], options: []).wantsHelp)
    }
}

@Suite struct APIKeyFormatTests {
    @Test func parsesOnlyTheExactFormat() {
        let good = "tk_abcdefghij012345_" + String(repeating: "0a", count: 32)
        #expect(APIKeyFormat.parse(good)?.keyId == "abcdefghij012345")
        #expect(APIKeyFormat.parse(good + "0") == nil)
        #expect(APIKeyFormat.parse(String(good.dropLast())) == nil)
        #expect(APIKeyFormat.parse(good.uppercased()) == nil)
        #expect(APIKeyFormat.parse("Bearer " + good) == nil)
        #expect(APIKeyFormat.parse("") == nil)
    }

    @Test func newKeyIdsAreWellFormedAndDistinct() {
        let ids = (0..<200).map { _ in APIKeyFormat.newKeyId() }
        #expect(Set(ids).count == 200)
        #expect(ids.allSatisfy { PrefixedIdentifier.apiKeyId.isValid($0) })
    }
}

@Suite struct MerchantValidationTests {
    @Test(arguments: [
        ("", "Shop", "shop.test", "US", "USD", "merchant_id_invalid"),
        ("merchant id", "Shop", "shop.test", "US", "USD", "merchant_id_invalid"),
        ("m1", "", "shop.test", "US", "USD", "display_name_invalid"),
        ("m1", String(repeating: "x", count: 65), "shop.test", "US", "USD", "display_name_invalid"),
        ("m1", "Shop", "https://shop.test/", "US", "USD", "domain_invalid"),
        ("m1", "Shop", "shop.test", "usa", "USD", "country_invalid"),
        ("m1", "Shop", "shop.test", "US", "usd", "currency_invalid"),
    ])
    func rejectsBadInput(id: String, name: String, domain: String, country: String, currency: String, code: String) {
        #expect {
            _ = try Merchant.validated(merchantId: id, displayName: name, domains: [domain], countryCode: country, currencies: [currency])
        } throws: { ($0 as? TenderError)?.code == code }
    }

    @Test func displayNameAtLimitIsAccepted() throws {
        let m = try Merchant.validated(merchantId: "m1", displayName: String(repeating: "x", count: 64),
                                       domains: ["Shop.Test"], countryCode: "US", currencies: ["USD"])
        #expect(m.domains == ["shop.test"])
        #expect(m.merchantCapabilities.contains("supports3DS"))
    }
}

@Suite struct BearerTokenTests {
    func token(_ header: String?) -> String? {
        var headers = HTTPHeaders()
        if let header { headers.add("Authorization", header) }
        return TenderApp.bearerToken(HTTPRequest(method: "GET", path: "/", headers: headers))
    }

    @Test func acceptsBearerCaseInsensitivelyWithSpaces() {
        #expect(token("Bearer abc") == "abc")
        #expect(token("bearer abc") == "abc")
        #expect(token("BEARER   abc  ") == "abc")
    }

    @Test func refusesOtherSchemesAndEmptyCredentials() {
        #expect(token(nil) == nil)
        #expect(token("Basic abc") == nil)
        #expect(token("Bearerabc") == nil)
        #expect(token("Bearer ") == nil)
        #expect(token("Bearer     ") == nil)
        #expect(token("Bearer " + String(repeating: "a", count: 513)) == nil)
        #expect(token("Bearer " + String(repeating: "a", count: 512))?.count == 512)
    }
}
