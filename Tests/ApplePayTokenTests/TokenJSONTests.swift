import Crypto
import Foundation
import Testing
@testable import ApplePayToken

/// One malformed or unusual spelling of the token JSON, named after the rule it breaks (or keeps).
struct TokenJSONCase: CustomTestStringConvertible, Sendable {
    let rule: String
    /// nil: the token must still verify and decrypt.
    let expected: TokenError.Code?
    let edit: @Sendable (String) -> String
    var testDescription: String { rule }
}

/// Replaces the first occurrence of `target` in `text`; the fixture token is compact JSON from JSONEncoder.
func replacingFirst(_ target: String, with replacement: String, in text: String) -> String {
    guard let range = text.range(of: target) else { return text }
    return text.replacingCharacters(in: range, with: replacement)
}

let tokenJSONCases: [TokenJSONCase] = [
    TokenJSONCase(rule: "trailing_comma_in_object", expected: .tokenMalformed) { String($0.dropLast()) + ",}" },
    TokenJSONCase(rule: "trailing_comma_in_array", expected: .tokenMalformed) { String($0.dropLast()) + ",\"extra\":[1,2,]}" },
    TokenJSONCase(rule: "text_after_the_object", expected: .tokenMalformed) { $0 + " x" },
    TokenJSONCase(rule: "second_object_after_the_first", expected: .tokenMalformed) { $0 + "{}" },
    TokenJSONCase(rule: "top_level_array", expected: .tokenMalformed) { "[" + $0 + "]" },
    TokenJSONCase(rule: "top_level_string", expected: .tokenMalformed) { _ in "\"EC_v1\"" },
    TokenJSONCase(rule: "empty_object", expected: .tokenMalformed) { _ in "{}" },
    TokenJSONCase(rule: "paymentData_twice", expected: .tokenMalformed) { text in
        replacingFirst("{\"paymentData\":", with: "{\"paymentData\":null,\"paymentData\":", in: text)
    },
    TokenJSONCase(rule: "header_key_twice", expected: .tokenMalformed) { text in
        replacingFirst("\"transactionId\":", with: "\"transactionId\":\"00\",\"transactionId\":", in: text)
    },
    TokenJSONCase(rule: "paymentData_is_a_string", expected: .tokenMalformed) { text in
        replacingFirst("{\"paymentData\":", with: "{\"paymentData\":\"x\",\"ignored\":", in: text)
    },
    TokenJSONCase(rule: "header_without_publicKeyHash", expected: .tokenMalformed) { text in
        replacingFirst("\"publicKeyHash\":", with: "\"publicKeyHashX\":", in: text)
    },
    TokenJSONCase(rule: "version_is_a_number", expected: .tokenMalformed) { text in
        replacingFirst("\"version\":\"EC_v1\"", with: "\"version\":1", in: text)
    },
    TokenJSONCase(rule: "signature_is_null", expected: .tokenMalformed) { text in
        replacingFirst("\"signature\":\"", with: "\"signature\":null,\"ignored\":\"", in: text)
    },
    TokenJSONCase(rule: "paymentMethod_is_a_string", expected: .tokenMalformed) { text in
        replacingFirst("\"paymentMethod\":{", with: "\"paymentMethod\":\"debit\",\"ignored\":{", in: text)
    },
    TokenJSONCase(rule: "displayName_is_a_number", expected: .tokenMalformed) { text in
        replacingFirst("\"displayName\":", with: "\"displayName\":5,\"ignored\":", in: text)
    },
    TokenJSONCase(rule: "unknown_escape_in_a_string", expected: .tokenMalformed) { text in
        replacingFirst("\"displayName\":\"", with: "\"displayName\":\"\\x", in: text)
    },
    TokenJSONCase(rule: "lone_high_surrogate", expected: .tokenMalformed) { text in
        replacingFirst("\"displayName\":\"", with: "\"displayName\":\"\\ud800", in: text)
    },
    TokenJSONCase(rule: "lone_low_surrogate", expected: .tokenMalformed) { text in
        replacingFirst("\"displayName\":\"", with: "\"displayName\":\"\\udc00", in: text)
    },
    TokenJSONCase(rule: "short_unicode_escape", expected: .tokenMalformed) { text in
        replacingFirst("\"displayName\":\"", with: "\"displayName\":\"\\u12\"", in: text)
    },
    TokenJSONCase(rule: "raw_control_character_in_a_string", expected: .tokenMalformed) { text in
        replacingFirst("\"displayName\":\"", with: "\"displayName\":\"\t", in: text)
    },
    TokenJSONCase(rule: "unterminated_string", expected: .tokenMalformed) { text in String(text.prefix(text.count - 3)) },
    TokenJSONCase(rule: "number_with_leading_zero_in_unknown_member", expected: .tokenMalformed) {
        String($0.dropLast()) + ",\"n\":01}"
    },
    TokenJSONCase(rule: "number_without_fraction_digits", expected: .tokenMalformed) { String($0.dropLast()) + ",\"n\":1.}" },
    TokenJSONCase(rule: "number_without_exponent_digits", expected: .tokenMalformed) { String($0.dropLast()) + ",\"n\":1e}" },
    TokenJSONCase(rule: "bare_minus", expected: .tokenMalformed) { String($0.dropLast()) + ",\"n\":-}" },
    TokenJSONCase(rule: "plus_sign_number", expected: .tokenMalformed) { String($0.dropLast()) + ",\"n\":+1}" },
    TokenJSONCase(rule: "misspelled_literal", expected: .tokenMalformed) { String($0.dropLast()) + ",\"n\":tru}" },
    TokenJSONCase(rule: "missing_colon", expected: .tokenMalformed) { text in
        replacingFirst("\"version\":", with: "\"version\"", in: text)
    },
    TokenJSONCase(rule: "single_quotes", expected: .tokenMalformed) { text in replacingFirst("\"version\"", with: "'version'", in: text) },
    TokenJSONCase(rule: "nesting_past_the_limit_in_unknown_member", expected: .tokenTooLarge) { text in
        String(text.dropLast()) + ",\"deep\":" + String(repeating: "[", count: 8) + String(repeating: "]", count: 8) + "}"
    },
    TokenJSONCase(rule: "nesting_past_the_limit_after_a_syntax_error", expected: .tokenTooLarge) { text in
        String(text.dropLast()) + ",\"deep\":x" + String(repeating: "[", count: 9)
    },
    // Spellings Apple Pay JS, JSON.stringify or a server's re-encoding may produce: all still the token.
    TokenJSONCase(rule: "nesting_at_the_limit_in_unknown_member", expected: nil) { text in
        String(text.dropLast()) + ",\"deep\":" + String(repeating: "[", count: 7) + String(repeating: "]", count: 7) + "}"
    },
    TokenJSONCase(rule: "whitespace_between_every_token", expected: nil) { text in
        text.replacingOccurrences(of: "\":", with: "\" :\r\n\t").replacingOccurrences(of: ",\"", with: " ,\n \"")
    },
    // The fixture is JSONEncoder's, which writes `\/`; JSON.stringify writes plain slashes.
    TokenJSONCase(rule: "plain_slashes_in_base64", expected: nil) { $0.replacingOccurrences(of: "\\/", with: "/") },
    TokenJSONCase(rule: "escaped_key", expected: nil) { text in replacingFirst("\"version\"", with: "\"\\u0076ersion\"", in: text) },
    TokenJSONCase(rule: "unknown_members_of_every_type", expected: nil) { text in
        String(text.dropLast()) + ",\"a\":[true,false,null,-0.5e+3,{\"b\":\"\\ud83d\\ude00\"}],\"c\":{}}"
    },
    TokenJSONCase(rule: "non_ascii_display_name", expected: nil) { text in
        replacingFirst("\"displayName\":\"", with: "\"displayName\":\"Carte bleue \u{E9} \\u00e9 ", in: text)
    },
    TokenJSONCase(rule: "paymentMethod_null", expected: nil) { text in
        replacingFirst("\"paymentMethod\":{", with: "\"paymentMethod\":null,\"ignored\":{", in: text)
    },
    TokenJSONCase(rule: "leading_byte_order_mark", expected: nil) { "\u{FEFF}" + $0 },
]

@Suite struct TokenJSONTests {
    @Test(arguments: tokenJSONCases)
    func eachSpellingGetsItsCode(_ row: TokenJSONCase) throws {
        let f = try SandboxFixture()
        let text = String(decoding: f.token, as: UTF8.self)
        let edited = row.edit(text)
        #expect(edited != text || row.rule == "none", "\(row.rule): the edit did not apply")
        let json = Array(edited.utf8)
        if let expected = row.expected {
            let error = try #require(throws: TokenError.self) { try f.decryptor().decrypt(json, now: fixtureTime) }
            #expect(error.code == expected, "\(row.rule): \(error)")
        } else {
            let data = try f.decryptor().decrypt(json, now: fixtureTime)
            #expect(data.transactionAmountMinor == 12_345, "\(row.rule)")
        }
    }

    @Test func invalidUTF8InAStringIsMalformed() throws {
        let f = try SandboxFixture()
        let text = String(decoding: f.token, as: UTF8.self)
        for bad: [UInt8] in [[0xC3, 0x28], [0xFF], [0xED, 0xA0, 0x80], [0xC0, 0xAF]] {
            let marker = "\"displayName\":\""
            let range = try #require(text.range(of: marker))
            let json = Array(text[..<range.upperBound].utf8) + bad + Array(text[range.upperBound...].utf8)
            let error = try #require(throws: TokenError.self) { try f.decryptor().decrypt(json, now: fixtureTime) }
            #expect(error.code == .tokenMalformed, "\(bad)")
        }
    }

    @Test func paymentMethodAndTransactionIdentifierAreRead() throws {
        let f = try SandboxFixture()
        let token = try UnverifiedPaymentToken(json: f.token)
        #expect(token.paymentMethod == PaymentMethodInfo(displayName: "Visa 9876", network: "Visa", type: "debit"))
        #expect(token.transactionIdentifier == token.transactionIdHex.uppercased())
        #expect(token.version == "EC_v1")
    }

    /// Canonical padded Base64 exactly as Foundation decodes and re-encodes it, over random texts.
    @Test func canonicalBase64AgreesWithFoundationsRoundTrip() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        for length in 0..<40 {
            for _ in 0..<200 {
                var text = (0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
                if length > 0, Bool.random(using: &generator) { text[length - 1] = UInt8(ascii: "=") }
                if length > 1, Int.random(in: 0..<4, using: &generator) == 0 { text[length - 2] = UInt8(ascii: "=") }
                if length > 2, Int.random(in: 0..<8, using: &generator) == 0 {
                    text[Int.random(in: 0..<length, using: &generator)] = [UInt8(ascii: "="), 0x0A, UInt8(ascii: "-")].randomElement()!
                }
                let string = String(decoding: text, as: UTF8.self)
                let foundation = Data(base64Encoded: string).flatMap { $0.isEmpty || $0.base64EncodedString() != string ? nil : Array($0) }
                #expect(Base64Canonical.decode(text) == foundation, "\(string)")
            }
        }
        for length in 1..<64 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64Canonical.decode(Array(Data(bytes).base64EncodedString().utf8)) == bytes)
        }
    }
}

/// The decrypted payload read by `PayloadDTO`: one row per rule, each refusal `payload_malformed`.
@Suite struct PayloadJSONTests {
    static let valid = """
        {"applicationPrimaryAccountNumber":"4111111111119876","applicationExpirationDate":"291231","currencyCode":"978",\
        "transactionAmount":12345,"deviceManufacturerIdentifier":"040010030273","paymentDataType":"3DSecure",\
        "paymentData":{"onlinePaymentCryptogram":"AQID","eciIndicator":"7"}}
        """

    static func decode(_ text: String) throws(TokenError) -> DecryptedPaymentData {
        try DecryptedPaymentData(payload: SecretBytes(Array(text.utf8)), depthMax: TokenLimits().jsonDepthMax)
    }

    @Test func validPayloadReadsEveryField() throws {
        let text = String(Self.valid.dropLast()) + """
            ,"cardholderName":"A B","merchantTokenIdentifier":"DNITHE1","unknown":[{"x":null}],\
            "authenticationResponses":[{"merchantIdentifier":"m.1","authenticationData":"Zm9v","transactionAmount":100}]}
            """
        let data = try Self.decode(text)
        #expect(data.panLastFour == "9876")
        #expect(data.transactionAmountMinor == 12_345)
        #expect(data.eciIndicator == "7")
        #expect(data.merchantTokenIdentifier == "DNITHE1")
        #expect(data.hasCardholderName)
        #expect(data.authenticationResponses.map(\.transactionAmountMinor) == [100])
        #expect(data.unsafeRevealSensitive().authenticationData == ["Zm9v"])
    }

    @Test func nullOptionalsAreAbsent() throws {
        let text = String(Self.valid.dropLast()) + ",\"cardholderName\":null,\"authenticationResponses\":null}"
        let data = try Self.decode(text)
        #expect(!data.hasCardholderName)
        #expect(data.authenticationResponses.isEmpty)
    }

    @Test(arguments: [
        ("amount_with_fraction", "\"transactionAmount\":12345", "\"transactionAmount\":12345.5"),
        ("amount_with_exponent", "\"transactionAmount\":12345", "\"transactionAmount\":1e3"),
        ("amount_as_string", "\"transactionAmount\":12345", "\"transactionAmount\":\"12345\""),
        ("amount_past_Int64", "\"transactionAmount\":12345", "\"transactionAmount\":9223372036854775808"),
        ("amount_leading_zero", "\"transactionAmount\":12345", "\"transactionAmount\":012345"),
        ("amount_negative", "\"transactionAmount\":12345", "\"transactionAmount\":-1"),
        ("amount_null", "\"transactionAmount\":12345", "\"transactionAmount\":null"),
        ("pan_missing", "\"applicationPrimaryAccountNumber\"", "\"applicationPrimaryAccountNumberX\""),
        ("pan_null", "\"4111111111119876\"", "null"),
        ("key_twice", "\"currencyCode\":\"978\"", "\"currencyCode\":\"978\",\"currencyCode\":\"840\""),
        ("paymentData_not_an_object", "\"paymentData\":{", "\"paymentData\":[],\"x\":{"),
        ("cryptogram_missing", "\"onlinePaymentCryptogram\"", "\"onlinePaymentCryptogramX\""),
        ("responses_not_an_array", "}}", "},\"authenticationResponses\":{}}"),
        ("response_without_amount", "}}", "},\"authenticationResponses\":[{\"merchantIdentifier\":\"m\",\"authenticationData\":\"d\"}]}"),
        ("trailing_comma", "}}", "},}"),
        ("text_after_the_object", "}}", "}} x"),
        ("nesting_past_the_limit", "}}", "},\"x\":[[[[[[[[]]]]]]]]}"),
    ])
    func eachMalformedPayloadIsRefused(rule: String, target: String, replacement: String) throws {
        let text = replacingFirst(target, with: replacement, in: Self.valid)
        #expect(text != Self.valid, "\(rule): the edit did not apply")
        let error = try #require(throws: TokenError.self) { try Self.decode(text) }
        #expect(error.code == .payloadMalformed, "\(rule)")
    }

    @Test func amountAtInt64Max() throws {
        let text = replacingFirst("\"transactionAmount\":12345", with: "\"transactionAmount\":9223372036854775807", in: Self.valid)
        #expect(try Self.decode(text).transactionAmountMinor == Int64.max)
    }
}
