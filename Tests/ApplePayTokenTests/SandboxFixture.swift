import Crypto
import Foundation
import Testing
@testable import ApplePayToken

/// One sandbox authority, merchant and valid token shared by the negative tests.
struct SandboxFixture {
    static let signingTime = Date(timeIntervalSince1970: 1_800_000_000)
    static let applicationData = Array("checkout-session-42".utf8)
    static let pan = "4111111111119876"
    static let cryptogram = "Q3J5cHRvZ3JhbVNlY3JldFZhbHVl"

    let authority: SandboxAuthority
    let merchant: MerchantKey
    let token: [UInt8]

    init() throws {
        let validFrom = Self.signingTime.addingTimeInterval(-86_400)
        authority = try SandboxAuthority.create(validFrom: validFrom, validityDays: 30)
        merchant = try authority.makeMerchantKey(merchantIdentifier: "merchant.com.tender.test", validFrom: validFrom)
        token = try authority.mintToken(Self.request(), for: merchant)
    }

    static func request() -> SandboxTokenRequest {
        SandboxTokenRequest(amountMinor: 12_345, currencyCodeNumeric: "978", applicationData: applicationData, pan: pan,
                            cryptogram: cryptogram, signingTime: signingTime)
    }

    func decryptor(roots: [Certificate]? = nil, keys: [MerchantKey]? = nil, limits: TokenLimits = TokenLimits()) -> ApplePayTokenDecryptor {
        ApplePayTokenDecryptor(trustedRoots: roots ?? [authority.root], merchantKeys: keys ?? [merchant],
                               tokenAgeMaxSeconds: 300, limits: limits)
    }

    /// Rewrites the token JSON with `edit` applied to its top-level object.
    func edited(_ edit: (inout [String: Any]) throws -> Void) throws -> [UInt8] {
        var object = try #require(JSONSerialization.jsonObject(with: Data(token)) as? [String: Any])
        try edit(&object)
        return Array(try JSONSerialization.data(withJSONObject: object))
    }

    /// Rewrites one paymentData field.
    func editedPaymentData(_ edit: (inout [String: Any]) throws -> Void) throws -> [UInt8] {
        try edited { top in
            var body = try #require(top["paymentData"] as? [String: Any])
            try edit(&body)
            top["paymentData"] = body
        }
    }

    /// Rewrites one header field.
    func editedHeader(_ edit: (inout [String: Any]) throws -> Void) throws -> [UInt8] {
        try editedPaymentData { body in
            var header = try #require(body["header"] as? [String: Any])
            try edit(&header)
            body["header"] = header
        }
    }
}

/// Flips one bit in the base64 value `text` at byte `index` (negative counts from the end).
func flippingBase64(_ text: Any?, at index: Int) throws -> String {
    let string = try #require(text as? String)
    var bytes = Array(try #require(Data(base64Encoded: string)))
    let position = index >= 0 ? index : bytes.count + index
    bytes[position] ^= 0x01
    return Data(bytes).base64EncodedString()
}
