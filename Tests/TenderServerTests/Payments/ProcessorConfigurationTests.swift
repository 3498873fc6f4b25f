import ApplePayToken
import Crypto
import Foundation
import Payments
import Testing
@_spi(Testing) @testable import TenderServer

/// Processor settings: Adyen's secrets come from files, plain HTTP needs its unsafe switch.
@Suite struct ProcessorConfigurationTests {
    static func failure(_ env: [String: String]) -> ConfigurationError? {
        do { _ = try TenderConfiguration.load(environment: env); return nil } catch { return error }
    }

    static func adyenEnvironment(_ dir: ScratchDirectory, key: String) -> [String: String] {
        _ = FileManager.default.createFile(atPath: dir.file("adyen-key"), contents: Data((key + "\n").utf8),
                                           attributes: [.posixPermissions: 0o600])
        return ["TENDER_PROCESSOR": "adyen", "TENDER_ADYEN_URL": "https://checkout-test.adyen.com",
                "TENDER_ADYEN_API_KEY_FILE": dir.file("adyen-key"), "TENDER_ADYEN_MERCHANT_ACCOUNT": "ShopECOM",
                "TENDER_ADYEN_RETURN_URL": "https://shop.test/return"]
    }

    @Test func adyenKeyIsReadFromAPrivateFileAndNeverShown() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let key = "AQE" + hexEncoded(SecureRandom.bytes(24))
        let configuration = try TenderConfiguration.load(environment: Self.adyenEnvironment(dir, key: key))
        let adyen = try #require(configuration.adyen)
        #expect(configuration.processor == .adyen)
        #expect(adyen.apiKey == key)
        #expect(adyen.merchantAccount == "ShopECOM")
        #expect(!adyen.description.contains(key))
        #expect(!String(describing: configuration).contains(key))
    }

    /// One row per rule: the variable at fault.
    @Test func incompleteOrUnsafeAdyenSettingsStopTheStart() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let good = Self.adyenEnvironment(dir, key: "AQEkey")
        _ = FileManager.default.createFile(atPath: dir.file("open-key"), contents: Data("AQEkey".utf8),
                                           attributes: [.posixPermissions: 0o644])
        _ = FileManager.default.createFile(atPath: dir.file("token"), contents: Data("t".utf8), attributes: [.posixPermissions: 0o600])
        let rows: [(String, [String: String], String)] = [
            ("url missing", good.merging(["TENDER_ADYEN_URL": ""]) { $1 }, "TENDER_ADYEN_URL"),
            ("key file missing", good.merging(["TENDER_ADYEN_API_KEY_FILE": ""]) { $1 }, "TENDER_ADYEN_API_KEY_FILE"),
            ("key file readable by others", good.merging(["TENDER_ADYEN_API_KEY_FILE": dir.file("open-key")]) { $1 },
             "TENDER_ADYEN_API_KEY_FILE"),
            ("merchant account missing", good.merging(["TENDER_ADYEN_MERCHANT_ACCOUNT": ""]) { $1 }, "TENDER_ADYEN_MERCHANT_ACCOUNT"),
            ("return url missing", good.merging(["TENDER_ADYEN_RETURN_URL": ""]) { $1 }, "TENDER_ADYEN_RETURN_URL"),
            ("return url not https", good.merging(["TENDER_ADYEN_RETURN_URL": "http://shop.test"]) { $1 }, "TENDER_ADYEN_RETURN_URL"),
            ("bearer secret is for http", good.merging(["TENDER_PROCESSOR_TOKEN_FILE": dir.file("token")]) { $1 },
             "TENDER_PROCESSOR_TOKEN_FILE"),
        ]
        for (name, env, variable) in rows {
            #expect(Self.failure(env)?.variable == variable, "\(name)")
        }
    }

    @Test func plainHTTPProcessorNeedsTheUnsafeSwitch() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let http = ["TENDER_PROCESSOR": "http", "TENDER_PROCESSOR_URL": "http://127.0.0.1:9"]
        let refused = try #require(Self.failure(http))
        #expect(refused.variable == "TENDER_PROCESSOR_URL")
        #expect(refused.code == "processor_plain_http_refused")
        let adyen = Self.adyenEnvironment(dir, key: "AQEkey").merging(["TENDER_ADYEN_URL": "http://127.0.0.1:9"]) { $1 }
        #expect(Self.failure(adyen)?.code == "processor_plain_http_refused")
        #expect(Self.failure(adyen)?.variable == "TENDER_ADYEN_URL")
        // With the switch, both are accepted (and the service logs a warning at start).
        let unsafe = [TenderConfiguration.plainHTTPProcessorVariable: "true"]
        let allowed = try TenderConfiguration.load(environment: http.merging(unsafe) { $1 })
        #expect(allowed.processorPlainHTTPForTesting)
        #expect(try TenderConfiguration.load(environment: adyen.merging([TenderConfiguration.plainHTTPProcessorVariable: "true"]) { $1 })
            .adyen?.allowPlainHTTPForTesting == true)
        #expect(Self.failure(http.merging([TenderConfiguration.plainHTTPProcessorVariable: "yes"]) { $1 })?.variable
            == TenderConfiguration.plainHTTPProcessorVariable)
        // https needs nothing.
        #expect(Self.failure(["TENDER_PROCESSOR": "http", "TENDER_PROCESSOR_URL": "https://processor.test"]) == nil)
        // The connector itself refuses http:// without the switch (libcurl's protocol list).
        let processor = HTTPProcessor(baseURL: "http://127.0.0.1:9", timeoutMilliseconds: 500)
        let outcome = processor.refund(RefundRequest(refundId: "re_1", paymentId: "pay_1", processorReference: "p", amountMinor: 1,
                                                     currencyCode: "EUR", processorKey: "k"))
        #expect(outcome == .unknown(reason: "protocol_not_allowed"))
    }

    @Test func plainHTTPSwitchIsLoggedAtStart() throws {
        let capture = PaymentLogCapture()
        let configuration = try TenderConfiguration.load(environment: [
            "TENDER_PROCESSOR": "http", "TENDER_PROCESSOR_URL": "http://127.0.0.1:9",
            TenderConfiguration.plainHTTPProcessorVariable: "true"])
        let pool = try TestEnvironment.migratedPool("proc_plain")
        defer { pool.close() }
        _ = PaymentsService.live(configuration: configuration, pool: pool, logger: capture.logger,
                                 verifier: DecryptorTokenVerifier(decryptor: ApplePayTokenDecryptor(
                                     trustedRoots: [PaymentsHarness.authority.root], merchantKeys: [], tokenAgeMaxSeconds: 300)),
                                 environment: [:])
        #expect(capture.text.contains(TenderConfiguration.plainHTTPProcessorVariable))
    }
}
