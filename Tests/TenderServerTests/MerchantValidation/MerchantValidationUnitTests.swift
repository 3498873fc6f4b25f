import Foundation
import HTTPClient
import Testing
@testable import TenderServer

/// The pure parts of merchant validation: request body rules 41–43, the connect-address policy and the
/// reading of Apple's answers. No database, no network.
struct MerchantValidationUnitTests {
    static func merchant(displayName: String = "Tender Shop", domains: [String] = ["shop.tender.test", "pay.tender.test"])
        -> Merchant
    {
        Merchant(merchantId: "merchant.com.tender.shop", displayName: displayName, domains: domains,
                 countryCode: "US", currencies: ["USD"], supportedNetworks: Merchant.defaultNetworks,
                 merchantCapabilities: Merchant.defaultCapabilities, financeRestricted: false)
    }

    @Test func bodyUsesTheFirstDomainByDefaultAndARegisteredOneOnRequest() throws {
        let byDefault = try MerchantValidationService.requestBody(merchant: Self.merchant(), requested: nil)
        #expect(byDefault == MerchantSessionRequestBody(merchantIdentifier: "merchant.com.tender.shop",
                                                         displayName: "Tender Shop", initiative: "web",
                                                         initiativeContext: "shop.tender.test"))
        let chosen = try MerchantValidationService.requestBody(merchant: Self.merchant(), requested: "PAY.tender.test")
        #expect(chosen.initiativeContext == "pay.tender.test")
    }

    @Test(arguments: ["www.shop.tender.test", "tender.test", "shop.tender.test.", "https://shop.tender.test", ""])
    func unregisteredInitiativeContextIsRefused(context: String) {
        #expect(throws: MerchantValidationError.self) {
            try MerchantValidationService.requestBody(merchant: Self.merchant(), requested: context)
        }
        do {
            _ = try MerchantValidationService.requestBody(merchant: Self.merchant(), requested: context)
        } catch {
            #expect(error.code == .initiativeContextInvalid)
        }
    }

    @Test func displayNameLimitIsSixtyFourCharacters() throws {
        let atLimit = String(repeating: "é", count: MerchantValidationService.displayNameCharactersMax)
        #expect(try MerchantValidationService.requestBody(merchant: Self.merchant(displayName: atLimit),
                                                          requested: nil).displayName == atLimit)
        let pastLimit = atLimit + "e"
        do {
            _ = try MerchantValidationService.requestBody(merchant: Self.merchant(displayName: pastLimit), requested: nil)
            Issue.record("65-character display name accepted")
        } catch {
            #expect(error.code == .displayNameInvalid)
        }
        do {
            _ = try MerchantValidationService.requestBody(merchant: Self.merchant(domains: []), requested: nil)
            Issue.record("merchant without domains accepted")
        } catch {
            #expect(error.code == .merchantDomainMissing)
        }
    }

    @Test func encodedBodyHasExactlyTheFourMembers() throws {
        let body = try MerchantValidationService.requestBody(merchant: Self.merchant(), requested: nil)
        let object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(body)) as? [String: Any])
        #expect(Set(object.keys) == ["merchantIdentifier", "displayName", "initiative", "initiativeContext"])
    }

    static let addresses: [(String, HTTPConnectAddress, Bool)] = [
        ("Apple public v4", .init(family: .ipv4, bytes: [17, 141, 128, 7], port: 443), true),
        ("loopback", .init(family: .ipv4, bytes: [127, 0, 0, 1], port: 443), false),
        ("this network", .init(family: .ipv4, bytes: [0, 0, 0, 0], port: 443), false),
        ("10/8", .init(family: .ipv4, bytes: [10, 1, 2, 3], port: 443), false),
        ("172.16/12 low", .init(family: .ipv4, bytes: [172, 16, 0, 1], port: 443), false),
        ("172.31 high", .init(family: .ipv4, bytes: [172, 31, 255, 1], port: 443), false),
        ("172.32 outside", .init(family: .ipv4, bytes: [172, 32, 0, 1], port: 443), true),
        ("192.168/16", .init(family: .ipv4, bytes: [192, 168, 1, 1], port: 443), false),
        ("metadata", .init(family: .ipv4, bytes: [169, 254, 169, 254], port: 443), false),
        ("CGNAT", .init(family: .ipv4, bytes: [100, 64, 0, 1], port: 443), false),
        ("100.128 outside CGNAT", .init(family: .ipv4, bytes: [100, 128, 0, 1], port: 443), true),
        ("multicast", .init(family: .ipv4, bytes: [224, 0, 0, 1], port: 443), false),
        ("broadcast", .init(family: .ipv4, bytes: [255, 255, 255, 255], port: 443), false),
        ("v6 loopback", .init(family: .ipv6, bytes: [UInt8](repeating: 0, count: 15) + [1], port: 443), false),
        ("v6 unspecified", .init(family: .ipv6, bytes: [UInt8](repeating: 0, count: 16), port: 443), false),
        ("v4-mapped loopback", .init(family: .ipv6, bytes: [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 127, 0, 0, 1],
                                     port: 443), false),
        ("v4-mapped public", .init(family: .ipv6, bytes: [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 17, 1, 2, 3],
                                   port: 443), true),
        ("NAT64 metadata", .init(family: .ipv6, bytes: [0, 0x64, 0xFF, 0x9B] + [UInt8](repeating: 0, count: 8)
                                 + [169, 254, 169, 254], port: 443), false),
        ("unique local", .init(family: .ipv6, bytes: [0xFD] + [UInt8](repeating: 1, count: 15), port: 443), false),
        ("link-local", .init(family: .ipv6, bytes: [0xFE, 0x80] + [UInt8](repeating: 0, count: 14), port: 443), false),
        ("multicast v6", .init(family: .ipv6, bytes: [0xFF, 0x02] + [UInt8](repeating: 0, count: 14), port: 443), false),
        ("global v6", .init(family: .ipv6, bytes: [0x26, 0x20, 0x01, 0x49] + [UInt8](repeating: 0, count: 11) + [1],
                            port: 443), true),
        ("short v4", .init(family: .ipv4, bytes: [17, 1, 2], port: 443), false),
    ]

    @Test func connectPolicyAllowsOnlyPublicUnicast() {
        for (name, address, allowed) in Self.addresses {
            #expect(MerchantValidationAddressPolicy.isPublic(address) == allowed, "\(name)")
        }
    }

    @Test func answersMustBeJSONObjects() {
        #expect(MerchantValidationService.isJSONObject(Array(#"{"a":1}"#.utf8)))
        #expect(MerchantValidationService.isJSONObject(Array(" {} ".utf8)))
        #expect(!MerchantValidationService.isJSONObject(Array("[1]".utf8)))
        #expect(!MerchantValidationService.isJSONObject(Array(#""session""#.utf8)))
        #expect(!MerchantValidationService.isJSONObject(Array("{".utf8)))
        #expect(!MerchantValidationService.isJSONObject([]))
        #expect(!MerchantValidationService.isJSONObject([0x7B, 0xFF, 0x7D]))
    }

    @Test func appleStatusIsBoundedAndPrintable() {
        let long = String(repeating: "m", count: MerchantValidationService.appleStatusMessageBytesMax + 10)
        let body = Array(#"{"statusCode":417,"statusMessage":"line\nbreak \#(long)"}"#.utf8)
        let (code, message) = MerchantValidationService.appleStatus(body)
        #expect(code == "417")
        #expect(message.utf8.count == MerchantValidationService.appleStatusMessageBytesMax)
        #expect(message.hasPrefix("linebreak m"))
        #expect(MerchantValidationService.appleStatus(Array("not json".utf8)) == ("", ""))
    }

    @Test func settingsComeFromTheConfiguration() throws {
        let configuration = try TenderConfiguration.load(environment: [
            "TENDER_APPLE_PAY_GATEWAY_HOSTS": "apple-pay-gateway-cert.apple.com"])
        let settings = MerchantValidationSettings(configuration: configuration)
        #expect(settings.allowedHosts == ["apple-pay-gateway-cert.apple.com"])
        #expect(settings.caFile == nil)
        #expect(settings.totalTimeoutMilliseconds <= MerchantValidationSettings.totalTimeoutMillisecondsMax)
        #expect(settings.unsafeGatewayOverrideForTesting == nil)
    }
}
