import Testing
@testable import Payments

struct IdentifierTests {
    @Test func idsHaveThePrefixAnd24LowercaseAlphanumerics() throws {
        let bytes = (0..<64).map { UInt8(($0 * 37 + 11) % 256) }
        let id = try #require(PaymentIdentifier.make(prefix: "pay_", randomBytes: bytes))
        #expect(id.count == 4 + 24)
        #expect(PaymentIdentifier.isValid(id, prefix: "pay_"))
        #expect(!PaymentIdentifier.isValid(id, prefix: "re_"))
    }

    @Test func tooFewUsableBytesGiveNil() {
        // Bytes ≥ 252 are rejected (uniformity), so 64 of them draw nothing.
        #expect(PaymentIdentifier.make(prefix: "pay_", randomBytes: [UInt8](repeating: 255, count: 64)) == nil)
        #expect(PaymentIdentifier.make(prefix: "pay_", randomBytes: [UInt8](repeating: 0, count: 23)) == nil)
        #expect(PaymentIdentifier.make(prefix: "pay_", randomBytes: [UInt8](repeating: 0, count: 24))
                == "pay_" + String(repeating: "a", count: 24))
    }

    @Test(arguments: [
        ("pay_abcdefghijklmnopqrstuvwx", true),
        ("pay_abcdefghijklmnopqrstuvw", false),      // 23
        ("pay_abcdefghijklmnopqrstuvwxy", false),    // 25
        ("pay_ABCDEFGHIJKLMNOPQRSTUVWX", false),     // upper case
        ("pay_abcdefghijklmnopqrstuv-x", false),
        ("re_abcdefghijklmnopqrstuvwx", false),
    ])
    func validation(_ text: String, _ valid: Bool) {
        #expect(PaymentIdentifier.isValid(text, prefix: "pay_") == valid)
    }
}

struct ProcessorKeyTests {
    @Test func keysDependOnlyOnStableIdentifiers() {
        #expect(ProcessorKey.authorization(paymentId: "pay_x") == ProcessorKey.authorization(paymentId: "pay_x"))
        #expect(ProcessorKey.authorization(paymentId: "pay_x") != ProcessorKey.authorization(paymentId: "pay_y"))
        #expect(ProcessorKey.refund(refundId: "re_x") != ProcessorKey.authorization(paymentId: "re_x"))
        #expect(ProcessorKey.authorization(paymentId: "pay_abc") == "tender:pay_abc:authorize")
    }
}

struct OutcomeTests {
    @Test func classificationAndStatus() {
        let approved = ProcessorOutcome.approved(processorReference: "r", authorizationCode: nil)
        let declined = ProcessorOutcome.declined(declineCode: "insufficient_funds", processorReference: nil)
        let unknown = ProcessorOutcome.unknown(reason: "timeout")
        #expect(approved.outcomeClass == .permanent && approved.paymentStatus == .succeeded)
        #expect(declined.outcomeClass == .permanent && declined.paymentStatus == .declined)
        #expect(unknown.outcomeClass == .transient && unknown.paymentStatus == .pending)
        #expect(PaymentStatus.allCases.filter { !$0.isFinal } == [.pending])
        #expect(RecoveryPoint.allCases.filter(\.needsProcessorCall) == [.accepted, .processorCalled])
    }
}

struct SimulatorRuleTests {
    @Test(arguments: [
        (Int64(1_051), "4111111111111111", SimulatorDecision.decline("insufficient_funds")),
        (Int64(2_054), "4111111111111111", SimulatorDecision.decline("expired_card")),
        (Int64(1_005), "4111111111111111", SimulatorDecision.decline("do_not_honor")),
        (Int64(1_008), "4111111111111111", SimulatorDecision.approveLosingFirstAnswers(1)),
        (Int64(1_099), "4000000000000002", SimulatorDecision.decline("card_declined")),
        (Int64(1_051), "4000000000000002", SimulatorDecision.decline("card_declined")),  // DPAN wins
        (Int64(1_099), "4111111111111111", SimulatorDecision.approve),
        (Int64(1_050), "4111111111111111", SimulatorDecision.approve),
        (Int64(1_052), "4111111111111111", SimulatorDecision.approve),
    ])
    func authorizationRules(_ amount: Int64, _ dpan: String, _ expected: SimulatorDecision) {
        #expect(SimulatorRules().authorizationDecision(amountMinor: amount, dpan: dpan) == expected)
    }

    @Test func lostAnswersThenTheRealOne() {
        let decision = SimulatorDecision.approveLosingFirstAnswers(2)
        #expect(SimulatorRules.visibleOutcome(decision, call: 1, processorReference: "r") == .unknown(reason: "simulated_timeout"))
        #expect(SimulatorRules.visibleOutcome(decision, call: 2, processorReference: "r") == .unknown(reason: "simulated_timeout"))
        #expect(SimulatorRules.visibleOutcome(decision, call: 3, processorReference: "r")
            == .approved(processorReference: "r", authorizationCode: "SIM001"))
    }

    @Test func refundRule() {
        #expect(SimulatorRules().refundDecision(amountMinor: 113) == .decline("refund_declined"))
        #expect(SimulatorRules().refundDecision(amountMinor: 114) == .approve)
    }
}

struct MaskingTests {
    @Test func lastFourOnlyForPANs() {
        #expect(CardMask.lastFour("4111111111119876") == "9876")
        #expect(CardMask.lastFour("411111111111") == "1111")        // 12 digits, the shortest accepted
        #expect(CardMask.lastFour("41111111111") == nil)            // 11
        #expect(CardMask.lastFour("41111111111111111111") == nil)   // 20
        #expect(CardMask.lastFour("4111 1111 1111 1111") == nil)
    }

    @Test func expiration() throws {
        let e = try CardMask.expiration(yymmdd: "301231")
        #expect(e.month == 12 && e.year == 2030)
        #expect(throws: PaymentsError(.expirationInvalid, "expected YYMMDD")) { try CardMask.expiration(yymmdd: "301331") }
        #expect(throws: PaymentsError(.expirationInvalid, "expected YYMMDD")) { try CardMask.expiration(yymmdd: "3012") }
    }

    @Test func sensitiveDataIsRedactedAndWiped() {
        let card = SensitiveCardData(dpan: "4111111111119876", cryptogram: "Q3J5cHRv")
        #expect(!"\(card)".contains("9876"))
        let request = AuthorizationRequest(merchantId: "m", paymentId: "pay_1", amountMinor: 1, currencyCode: "USD", network: "Visa",
                                           expirationMonth: 1, expirationYear: 2030, eci: nil, paymentDataType: "3DSecure",
                                           transactionId: "ab", processorKey: "k", card: card)
        #expect(!"\(request)".contains("4111111111119876") && !"\(request)".contains("Q3J5cHRv"))
        card.wipe()
        #expect(card.unsafeDPAN().utf8.allSatisfy { $0 == 0 })
        #expect(card.unsafeCryptogram().utf8.allSatisfy { $0 == 0 })
    }
}

struct RefundRuleTests {
    @Test func boundary() {
        #expect(RefundRules.fits(capturedMinor: 1_000, alreadyRefundedMinor: 400, amountMinor: 600))
        #expect(!RefundRules.fits(capturedMinor: 1_000, alreadyRefundedMinor: 400, amountMinor: 601))
        #expect(!RefundRules.fits(capturedMinor: 1_000, alreadyRefundedMinor: 0, amountMinor: 0))
        #expect(!RefundRules.fits(capturedMinor: Int64.max, alreadyRefundedMinor: Int64.max, amountMinor: 1))
    }
}

/// The stored network is the DPAN's scheme; an unsigned claim may only agree with it.
struct PaymentNetworkTests {
    @Test(arguments: [
        ("4111111111119876", "Visa", "Visa"),
        ("4111111111119876", nil, "Visa"),
        ("4111111111119876", "CartesBancaires", "Visa"),        // co-badged: the scheme of the number
        ("5555555555554444", "MasterCard", "MasterCard"),
        ("2223003122003222", "mastercard", "MasterCard"),
        ("378282246310005", "AmEx", "AmEx"),
        ("6011111111111117", "Discover", "Discover"),
        ("3530111333300000", "JCB", "JCB"),
        ("6212345678901232", "Discover", "ChinaUnionPay"),     // UnionPay co-brand accepted as Discover
        ("5018000000000009", "Maestro", "Maestro"),            // outside the major ranges: the domestic claim
        ("9999000000000000", "Interac\u{0}<x>", "Interacx"),   // only letters and digits of a claim are kept
        ("9999000000000000", nil, "unknown"),
    ] as [(String, String?, String)])
    func networkComesFromTheBIN(dpan: String, claimed: String?, expected: String) {
        #expect(PaymentNetwork.resolve(claimed: claimed, dpan: dpan) == .success(expected))
    }

    @Test(arguments: [
        ("4111111111119876", "AmEx"),          // the reported case: a Visa DPAN presented as Amex
        ("5555555555554444", "Visa"),
        ("378282246310005", "MasterCard"),
        ("9999000000000000", "Visa"),          // a major scheme the digits do not show
        ("6011111111111117", "JCB"),
    ])
    func aClaimNamingAnotherSchemeIsRefused(dpan: String, claimed: String) {
        #expect(PaymentNetwork.resolve(claimed: claimed, dpan: dpan) == .failure(.networkMismatch))
        #expect(PaymentFailure.networkMismatch.rawValue == "payment_network_mismatch")
    }
}
