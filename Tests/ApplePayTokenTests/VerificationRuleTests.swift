import Crypto
import Foundation
import Testing
@testable import ApplePayToken

/// One row per rule, named after the rule it breaks, most important first.
struct RuleCase: CustomTestStringConvertible, Sendable {
    let rule: String
    let expected: TokenError.Code
    let make: @Sendable (SandboxFixture) throws -> (token: [UInt8], decryptor: ApplePayTokenDecryptor, now: Date)
    var testDescription: String { rule }
}

let fixtureTime = SandboxFixture.signingTime

let ruleCases: [RuleCase] = [
    RuleCase(rule: "version_must_be_EC_v1_or_RSA_v1", expected: .unsupportedVersion) { f in
        (try f.editedPaymentData { $0["version"] = "EC_v2" }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "EC_v1_header_must_not_carry_wrappedKey", expected: .headerMismatch) { f in
        (try f.editedHeader { $0["wrappedKey"] = "AAAA" }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "RSA_v1_needs_wrappedKey", expected: .headerMismatch) { f in
        (try f.editedPaymentData { $0["version"] = "RSA_v1" }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_must_be_CMS_SignedData", expected: .signatureMalformed) { f in
        (try f.editedPaymentData { $0["signature"] = Data(repeating: 0x30, count: 40).base64EncodedString() }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_has_exactly_one_signer", expected: .signatureMalformed) { f in
        var request = SandboxFixture.request()
        request.signTwiceForTesting = true
        return (try f.authority.mintToken(request, for: f.merchant), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_carries_only_leaf_and_intermediate", expected: .signatureMalformed) { f in
        var request = SandboxFixture.request()
        request.extraCertificatesForTesting = [f.authority.root]
        return (try f.authority.mintToken(request, for: f.merchant), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "leaf_must_carry_1.2.840.113635.100.6.29", expected: .leafCertificateMissingOID) { f in
        let authority = try SandboxAuthority.create(validFrom: fixtureTime.addingTimeInterval(-60), omitLeafMarkerForTesting: true)
        return (try authority.mintToken(SandboxFixture.request(), for: f.merchant), f.decryptor(roots: [authority.root]), fixtureTime)
    },
    RuleCase(rule: "intermediate_must_carry_1.2.840.113635.100.6.2.14", expected: .intermediateCertificateMissingOID) { f in
        let authority = try SandboxAuthority.create(validFrom: fixtureTime.addingTimeInterval(-60), omitIntermediateMarkerForTesting: true)
        return (try authority.mintToken(SandboxFixture.request(), for: f.merchant), f.decryptor(roots: [authority.root]), fixtureTime)
    },
    RuleCase(rule: "digest_must_be_SHA-256", expected: .digestAlgorithmUnsupported) { f in
        var request = SandboxFixture.request()
        request.digestForTesting = .sha384
        return (try f.authority.mintToken(request, for: f.merchant), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signing_time_must_be_present", expected: .signingTimeMissing) { f in
        var request = SandboxFixture.request()
        request.omitSigningTimeForTesting = true
        return (try f.authority.mintToken(request, for: f.merchant), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_covers_data", expected: .messageDigestMismatch) { f in
        (try f.editedPaymentData { $0["data"] = try flippingBase64($0["data"], at: 3) }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_covers_ephemeralPublicKey", expected: .messageDigestMismatch) { f in
        (try f.editedHeader { $0["ephemeralPublicKey"] = try flippingBase64($0["ephemeralPublicKey"], at: -2) }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_covers_transactionId", expected: .messageDigestMismatch) { f in
        (try f.editedHeader { $0["transactionId"] = String(repeating: "ab", count: 32) }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_covers_applicationData_wrong_value", expected: .messageDigestMismatch) { f in
        (try f.editedHeader { $0["applicationData"] = hexEncoded(Digest.sha256("another-session")) }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_covers_applicationData_removed", expected: .messageDigestMismatch) { f in
        (try f.editedHeader { $0["applicationData"] = nil }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_covers_applicationData_added", expected: .messageDigestMismatch) { f in
        var request = SandboxFixture.request()
        request.applicationData = nil
        let token = try f.authority.mintToken(request, for: f.merchant)
        var object = try #require(JSONSerialization.jsonObject(with: Data(token)) as? [String: Any])
        var body = try #require(object["paymentData"] as? [String: Any])
        var header = try #require(body["header"] as? [String: Any])
        header["applicationData"] = hexEncoded(Digest.sha256(SandboxFixture.applicationData))
        body["header"] = header
        object["paymentData"] = body
        return (Array(try JSONSerialization.data(withJSONObject: object)), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "leaf_signature_must_verify", expected: .signatureInvalid) { f in
        (try f.editedPaymentData { $0["signature"] = try flippingBase64($0["signature"], at: -5) }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "chain_must_end_at_a_trusted_root_foreign", expected: .certificateChainInvalid) { f in
        let other = try SandboxAuthority.create(validFrom: fixtureTime.addingTimeInterval(-60))
        return (f.token, f.decryptor(roots: [other.root]), fixtureTime)
    },
    RuleCase(rule: "chain_must_end_at_a_trusted_root_apple", expected: .certificateChainInvalid) { f in
        (f.token, f.decryptor(roots: [try ApplePayTokenDecryptor.appleRootCertificate()]), fixtureTime)
    },
    RuleCase(rule: "chain_must_be_valid_at_now", expected: .certificateChainInvalid) { f in
        (f.token, f.decryptor(), fixtureTime.addingTimeInterval(40 * 86_400))
    },
    RuleCase(rule: "signing_time_within_max_age", expected: .tokenExpired) { f in
        (f.token, f.decryptor(), fixtureTime.addingTimeInterval(301))
    },
    RuleCase(rule: "signing_time_not_in_future", expected: .signingTimeInFuture) { f in
        (f.token, f.decryptor(), fixtureTime.addingTimeInterval(-61))
    },
    RuleCase(rule: "publicKeyHash_selects_a_known_key", expected: .unknownMerchantKey) { f in
        let other = try f.authority.makeMerchantKey(merchantIdentifier: "merchant.other", validFrom: fixtureTime)
        return (f.token, f.decryptor(keys: [other]), fixtureTime)
    },
    RuleCase(rule: "merchant_certificate_must_carry_merchant_id", expected: .merchantIdMissing) { f in
        let bare = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "no id", serialNumber: 7, notBefore: fixtureTime.addingTimeInterval(-60),
                                notAfter: fixtureTime.addingTimeInterval(86_400), isCertificateAuthority: false),
            subjectKey: f.merchant.privateKey.publicKey, issuer: f.authority.root, issuerKey: f.authority.rootKey)
        return (f.token, f.decryptor(keys: [try MerchantKey(certificate: bare, privateKey: f.merchant.privateKey)]), fixtureTime)
    },
    RuleCase(rule: "KDF_uses_the_merchant_id_of_the_certificate", expected: .decryptionFailed) { f in
        let id = Array(hexEncoded(Digest.sha256("merchant.someone.else")).uppercased().utf8)
        let wrongId = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "wrong id", serialNumber: 8, notBefore: fixtureTime.addingTimeInterval(-60),
                                notAfter: fixtureTime.addingTimeInterval(86_400), isCertificateAuthority: false,
                                customExtensions: [CertificateExtension(oid: AppleOID.merchantIdentifier, isCritical: false, value: [0x0C,
                                    64] + id)]),
            subjectKey: f.merchant.privateKey.publicKey, issuer: f.authority.root, issuerKey: f.authority.rootKey)
        return (f.token, f.decryptor(keys: [try MerchantKey(certificate: wrongId, privateKey: f.merchant.privateKey)]), fixtureTime)
    },
    RuleCase(rule: "payload_must_have_a_numeric_PAN", expected: .payloadMalformed) { f in
        var request = SandboxFixture.request()
        request.pan = "41111111111X9876"
        return (try f.authority.mintToken(request, for: f.merchant), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "token_must_be_JSON", expected: .tokenMalformed) { f in
        (Array("not json".utf8), f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "token_must_have_a_header", expected: .tokenMalformed) { f in
        (try f.editedPaymentData { $0["header"] = nil }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "transactionId_must_be_hex", expected: .tokenMalformed) { f in
        (try f.editedHeader { $0["transactionId"] = "zz" }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "json_depth_is_bounded", expected: .tokenTooLarge) { f in
        (Array((String(repeating: "[", count: 9) + String(repeating: "]", count: 9)).utf8), f.decryptor(), fixtureTime)
    },
    // Apple writes canonical padded Base64: the same bytes spelled any other way are not Apple's token.
    RuleCase(rule: "data_is_canonical_base64_no_extra_padding", expected: .tokenMalformed) { f in
        (try f.editedPaymentData { $0["data"] = try #require($0["data"] as? String) + "==" }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "signature_is_canonical_base64_no_extra_padding", expected: .tokenMalformed) { f in
        (try f.editedPaymentData { $0["signature"] = try #require($0["signature"] as? String) + "=" }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "ephemeralPublicKey_is_canonical_base64_no_extra_padding", expected: .tokenMalformed) { f in
        (try f.editedHeader { $0["ephemeralPublicKey"] = try #require($0["ephemeralPublicKey"] as? String) + "=" }, f.decryptor(),
            fixtureTime)
    },
    RuleCase(rule: "ephemeralPublicKey_is_canonical_base64_padding_kept", expected: .tokenMalformed) { f in
        (try f.editedHeader {
            $0["ephemeralPublicKey"] = try #require($0["ephemeralPublicKey"] as? String).replacingOccurrences(of: "=", with: "")
        }, f.decryptor(), fixtureTime)
    },
    RuleCase(rule: "publicKeyHash_is_canonical_base64_no_line_break", expected: .tokenMalformed) { f in
        (try f.editedHeader {
            let text = try #require($0["publicKeyHash"] as? String)
            $0["publicKeyHash"] = String(text.prefix(20)) + "\r\n" + String(text.dropFirst(20))
        }, f.decryptor(), fixtureTime)
    },
]

@Suite struct VerificationRuleTests {
    @Test func sandboxTokenRoundTrips() throws {
        let f = try SandboxFixture()
        let result = try f.decryptor().verifyAndDecrypt(f.token, now: fixtureTime.addingTimeInterval(10))
        #expect(result.paymentData.transactionAmountMinor == 12_345)
        #expect(result.paymentData.currencyCodeNumeric == "978")
        #expect(result.paymentData.panLastFour == "9876")
        #expect(result.paymentData.unsafeRevealSensitive().applicationPrimaryAccountNumber == SandboxFixture.pan)
        #expect(result.paymentData.unsafeRevealSensitive().onlinePaymentCryptogram == SandboxFixture.cryptogram)
        #expect(result.token.applicationDataHex == hexEncoded(Digest.sha256(SandboxFixture.applicationData)))
        #expect(result.token.publicKeyHash == Digest.sha256(f.merchant.certificate.publicKey.spkiDER))
        #expect(result.token.transactionIdHex.count == 64)
    }

    @Test(arguments: ruleCases)
    func eachRuleRejectsWithItsCode(_ row: RuleCase) throws {
        let f = try SandboxFixture()
        let (token, decryptor, now) = try row.make(f)
        let error = try #require(throws: TokenError.self) { try decryptor.decrypt(token, now: now) }
        #expect(error.code == row.expected, "\(row.rule): \(error)")
    }

    @Test func signatureFailureStopsBeforeAnyKeyLookup() throws {
        // With no merchant keys at all, a tampered token must still fail on its signature, proving
        // decryption (which would report unknown_merchant_key) is never reached.
        let f = try SandboxFixture()
        let tampered = try f.editedPaymentData { $0["data"] = try flippingBase64($0["data"], at: 0) }
        let error = try #require(throws: TokenError.self) { try f.decryptor(keys: []).decrypt(tampered, now: fixtureTime) }
        #expect(error.code == .messageDigestMismatch)
    }

    @Test func tokenSizeLimitAtAndPastTheBoundary() throws {
        let f = try SandboxFixture()
        var limits = TokenLimits()
        limits.tokenBytesMax = f.token.count
        _ = try f.decryptor(limits: limits).decrypt(f.token, now: fixtureTime)
        limits.tokenBytesMax = f.token.count - 1
        let error = try #require(throws: TokenError.self) { try f.decryptor(limits: limits).decrypt(f.token, now: fixtureTime) }
        #expect(error.code == .tokenTooLarge)
    }

    @Test(arguments: ["header", "data", "signature"])
    func fieldLimitsAtAndPastTheBoundary(field: String) throws {
        let f = try SandboxFixture()
        let token = try UnverifiedPaymentToken(json: f.token)
        var limits = TokenLimits()
        switch field {
        case "header": limits.headerFieldBytesMax = Data(token.ephemeralPublicKey ?? []).base64EncodedString().utf8.count
        case "data": limits.encryptedDataBytesMax = token.encryptedData.count
        default: limits.signatureBytesMax = token.signature.count
        }
        _ = try f.decryptor(limits: limits).decrypt(f.token, now: fixtureTime)
        switch field {
        case "header": limits.headerFieldBytesMax -= 1
        case "data": limits.encryptedDataBytesMax -= 1
        default: limits.signatureBytesMax -= 1
        }
        let error = try #require(throws: TokenError.self) { try f.decryptor(limits: limits).decrypt(f.token, now: fixtureTime) }
        #expect(error.code == .tokenTooLarge, "\(field)")
    }

    @Test func ageLimitAtAndPastTheBoundary() throws {
        let f = try SandboxFixture()
        _ = try f.decryptor().decrypt(f.token, now: fixtureTime.addingTimeInterval(300))
        let error = try #require(throws: TokenError.self) { try f.decryptor().decrypt(f.token, now: fixtureTime.addingTimeInterval(301)) }
        #expect(error.code == .tokenExpired)
    }

    @Test func everyPrefixOfAValidTokenFailsCleanly() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        for length in 0..<f.token.count {
            let error = try #require(throws: TokenError.self) { try decryptor.decrypt(Array(f.token.prefix(length)), now: fixtureTime) }
            #expect(error.code == .tokenMalformed, "prefix \(length)")
        }
    }

    @Test func truncatedSignaturesFailCleanly() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        let object = try JSONSerialization.jsonObject(with: Data(f.token)) as? [String: Any]
        let body = try #require(object?["paymentData"] as? [String: Any])
        let signatureText = try #require(body["signature"] as? String)
        let signature = Array(try #require(Data(base64Encoded: signatureText)))
        for length in stride(from: 1, to: signature.count, by: 7) {
            let token = try f.editedPaymentData { $0["signature"] = Data(signature.prefix(length)).base64EncodedString() }
            let error = try #require(throws: TokenError.self) { try decryptor.decrypt(token, now: fixtureTime) }
            #expect(error.code == .signatureMalformed, "signature prefix \(length)")
        }
    }

    @Test func barePaymentDataObjectIsAccepted() throws {
        let f = try SandboxFixture()
        let object = try #require(JSONSerialization.jsonObject(with: Data(f.token)) as? [String: Any])
        let inner = try #require(object["paymentData"])
        let bare = Array(try JSONSerialization.data(withJSONObject: inner))
        let data = try f.decryptor().decrypt(bare, now: fixtureTime)
        #expect(data.transactionAmountMinor == 12_345)
    }

    @Test func chainCacheServesRepeatsAndHonoursValidity() throws {
        let f = try SandboxFixture()
        let decryptor = f.decryptor()
        _ = try decryptor.verify(f.token, now: fixtureTime)
        _ = try decryptor.verify(f.authority.mintToken(SandboxFixture.request(), for: f.merchant), now: fixtureTime)
        #expect(decryptor.verifier.cachedChainCount == 1)
        // A cached chain is not reused past the certificates' validity.
        let later = fixtureTime.addingTimeInterval(40 * 86_400)
        var request = SandboxFixture.request()
        request.signingTime = later
        let error = try #require(throws: TokenError.self) {
            try decryptor.verify(f.authority.mintToken(request, for: f.merchant), now: later)
        }
        #expect(error.code == .certificateChainInvalid)
    }

    @Test func sandboxAuthorityRoundTripsThroughPEMFiles() throws {
        let f = try SandboxFixture()
        let reloaded = try SandboxAuthority(files: try f.authority.unsafeFilesWithPrivateKeys())
        #expect(reloaded.root == f.authority.root)
        let token = try reloaded.mintToken(SandboxFixture.request(), for: f.merchant)
        _ = try f.decryptor().decrypt(token, now: fixtureTime)
        let merchantAgain = try MerchantKey(certificatePEM: f.merchant.certificate.pem,
            privateKeyPEM: f.merchant.privateKey.unsafePKCS8PEM())
        #expect(merchantAgain.publicKeyHash == f.merchant.publicKeyHash)
    }

    @Test func merchantKeyRefusesAMismatchedPair() throws {
        let f = try SandboxFixture()
        let error = try #require(throws: TokenError.self) {
            try MerchantKey(certificate: f.merchant.certificate, privateKey: PrivateKey.generateP256())
        }
        #expect(error.code == .merchantKeyInvalid)
    }
}

@Suite struct MaskingTests {
    @Test func descriptionsNeverContainThePANOrCryptogram() throws {
        let f = try SandboxFixture()
        let data = try f.decryptor().decrypt(f.token, now: fixtureTime)
        var dumped = ""
        dump(data, to: &dumped)
        let renderings = [String(describing: data), String(reflecting: data), "\(data)", dumped,
                          String(describing: data.unsafeRevealSensitive()), String(describing: f.merchant.privateKey)]
        for text in renderings {
            #expect(!text.contains(SandboxFixture.pan))
            #expect(!text.contains(String(SandboxFixture.pan.dropLast(4))))
            #expect(!text.contains(SandboxFixture.cryptogram))
        }
        #expect(String(describing: data).contains("9876"))
    }
}
