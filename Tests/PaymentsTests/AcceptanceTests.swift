import Payments
import Testing

/// The refusal rules of a payment, one row per rule in precedence order, with no database.
@Suite struct AcceptanceTests {
    static let now: Int64 = 1_700_000_000_000
    static let appData = String(repeating: "ab", count: 32)

    static func session(_ status: CheckoutSessionStatus = .open, expiresInMilliseconds: Int64 = 60_000,
                        supportsEMV: Bool = false) -> PaymentSessionSnapshot {
        PaymentSessionSnapshot(session: CheckoutSessionState(status: status, expiresAtMilliseconds: now + expiresInMilliseconds),
                               totalMinor: 1_099, currencyNumericCode: "978", applicationDataSHA256Hex: appData,
                               supportsEMV: supportsEMV)
    }

    static func facts(appData: String? = AcceptanceTests.appData.uppercased(), currency: String = "978", amountMinor: Int64 = 1_099,
                      emv: Bool = false, claimed: String? = "visa", dpan: String = "4111111111119876") -> TokenVerification {
        .verified(VerifiedTokenFacts(applicationDataHex: appData, currencyCodeNumeric: currency, transactionAmountMinor: amountMinor,
                                     isEMV: emv, claimedNetwork: claimed, dpan: dpan))
    }

    /// (rule name, session, token, contact, expected code; nil = accepted). Each row breaks exactly one
    /// rule and every rule after it too, so a row passes only when precedence holds.
    static let rows: [(String, PaymentSessionSnapshot, TokenVerification, ContactCheck, String?)] = [
        ("rule31_sessionPaid", session(.paid, expiresInMilliseconds: -1), .rejected(tokenErrorCode: "signature_invalid"),
         .notServiceable, "session_already_paid"),
        ("sessionCanceled", session(.canceled), .rejected(tokenErrorCode: "signature_invalid"), .notServiceable, "session_not_open"),
        ("sessionExpiredStatus", session(.expired), .rejected(tokenErrorCode: "signature_invalid"), .notServiceable, "session_expired"),
        ("rule58_sessionPastExpiry", session(expiresInMilliseconds: 0), .rejected(tokenErrorCode: "signature_invalid"),
         .notServiceable, "session_expired"),
        ("apple1to4_tokenRejected", session(), .rejected(tokenErrorCode: "signature_invalid"), .notServiceable, "token_rejected"),
        ("apple6_applicationData", session(), facts(appData: nil, currency: "840", amountMinor: 1), .notServiceable,
         "application_data_mismatch"),
        ("apple6_currency", session(), facts(currency: "840", amountMinor: 1), .notServiceable, "currency_mismatch"),
        ("apple6_amount", session(), facts(amountMinor: 1_098, emv: true), .notServiceable, "amount_mismatch"),
        ("rule53_shippingContact", session(), facts(emv: true, claimed: "amex"), .notServiceable, "shipping_contact_invalid"),
        ("rule55_emvNotRequested", session(), facts(emv: true, claimed: "amex"), .serviceable, "emv_not_requested"),
        ("networkMismatch", session(supportsEMV: true), facts(emv: true, claimed: "amex"), .serviceable, "payment_network_mismatch"),
        ("accepted", session(supportsEMV: true), facts(emv: true), .notGiven, nil),
        ("acceptedServiceableContact", session(), facts(), .serviceable, nil),
    ]

    @Test(arguments: rows.indices)
    func firstFailingRuleWins(_ index: Int) {
        let (name, session, token, contact, expected) = Self.rows[index]
        let refusal = PaymentAcceptance.firstRefusal(session: session, nowMilliseconds: Self.now, token: token) { contact }
        #expect(refusal?.code == expected, "\(name)")
    }

    @Test func refusalsCarryTheirStoredFailureAndStatus() {
        let token = PaymentAcceptance.firstRefusal(session: Self.session(), nowMilliseconds: Self.now,
                                                   token: .rejected(tokenErrorCode: "token_expired")) { .notGiven }
        #expect(token?.failure == .tokenRejected)
        #expect(token?.status == 422)
        #expect(token?.tokenErrorCode == "token_expired")
        let expired = PaymentAcceptance.firstRefusal(session: Self.session(expiresInMilliseconds: -5), nowMilliseconds: Self.now,
                                                     token: Self.facts()) { .notGiven }
        #expect(expired?.failure == .sessionNotPayable)
        #expect(expired?.status == 410)
    }

    @Test func theContactIsCheckedOnlyWhenEarlierRulesPass() {
        var asked = 0
        _ = PaymentAcceptance.firstRefusal(session: Self.session(), nowMilliseconds: Self.now,
                                           token: Self.facts(amountMinor: 5)) { asked += 1; return .serviceable }
        #expect(asked == 0)
        _ = PaymentAcceptance.firstRefusal(session: Self.session(), nowMilliseconds: Self.now, token: Self.facts()) {
            asked += 1
            return .serviceable
        }
        #expect(asked == 1)
    }

    @Test func insertConflictsAreReplayThenSessionInProgress() {
        #expect(PaymentAcceptance.refusalAfterConflict(transactionIdSeen: true).code == "token_replayed")
        #expect(PaymentAcceptance.refusalAfterConflict(transactionIdSeen: true).status == 409)
        #expect(PaymentAcceptance.refusalAfterConflict(transactionIdSeen: false).failure == .sessionPaymentInProgress)
    }
}

/// Session rules at a given time.
@Suite struct CheckoutSessionStateTests {
    static let rows: [(CheckoutSessionStatus, Int64, SessionRefusal?, SessionRefusal?)] = [
        // status, expires minus now (ms), payment refusal, update refusal
        (.open, 1, nil, nil),
        (.open, 0, .expired, .expired),
        (.paid, 1, .alreadyPaid, .notOpen),
        (.expired, 1, .expired, .expired),
        (.canceled, 1, .notOpen, .notOpen),
    ]

    @Test(arguments: rows.indices)
    func rules(_ index: Int) {
        let (status, delta, payment, update) = Self.rows[index]
        let state = CheckoutSessionState(status: status, expiresAtMilliseconds: 1_000 + delta)
        #expect(state.paymentRefusal(atMilliseconds: 1_000) == payment)
        #expect(state.updateRefusal(atMilliseconds: 1_000) == update)
    }
}

/// The phase state machine of payments and refunds.
@Suite struct OutcomePhasesTests {
    @Test func resumeSteps() {
        #expect(OutcomePhases.resume(status: PaymentStatus.pending, needsOperator: false) == .callProcessor)
        #expect(OutcomePhases.resume(status: PaymentStatus.pending, needsOperator: true) == .awaitOperator)
        for status in PaymentStatus.allCases where status != .pending {
            #expect(OutcomePhases.resume(status: status, needsOperator: false) == .respondFinal)
        }
        #expect(OutcomePhases.resume(status: RefundStatus.declined, needsOperator: true) == .respondFinal)
        #expect(OutcomePhases.resume(status: RefundStatus.pending, needsOperator: false) == .callProcessor)
    }

    @Test func transitions() {
        let approved = ProcessorOutcome.approved(processorReference: "r", authorizationCode: nil)
        let declined = ProcessorOutcome.declined(declineCode: "do_not_honor", processorReference: nil)
        let unknown = ProcessorOutcome.unknown(reason: "timeout")
        #expect(OutcomePhases.transition(from: PaymentStatus.pending, on: approved) == .record(.succeeded))
        #expect(OutcomePhases.transition(from: PaymentStatus.pending, on: declined) == .record(.declined))
        #expect(OutcomePhases.transition(from: PaymentStatus.pending, on: unknown) == .retryLater(reason: "timeout"))
        #expect(OutcomePhases.transition(from: PaymentStatus.succeeded, on: declined) == nil)
        #expect(OutcomePhases.transition(from: RefundStatus.pending, on: approved) == .record(.succeeded))
        #expect(OutcomePhases.transition(from: RefundStatus.pending, on: declined) == .record(.declined))
        #expect(OutcomePhases.recoveryPoint(after: OutcomeTransition<PaymentStatus>.record(.declined)) == .outcomeRecorded)
        #expect(OutcomePhases.recoveryPoint(after: OutcomeTransition<RefundStatus>.retryLater(reason: "x")) == .processorCalled)
    }

    @Test func events() {
        let p = PaymentOutcomeFacts(paymentId: "pay_1", sessionId: "cs_1", amountMinor: 1, currencyCode: "EUR", processorReference: nil)
        #expect(PaymentEvent.payment(.succeeded, p)?.typeName == "payment.succeeded")
        #expect(PaymentEvent.payment(.declined, p)?.typeName == "payment.declined")
        #expect(PaymentEvent.payment(.failed, p)?.typeName == "payment.failed")
        #expect(PaymentEvent.payment(.pending, p) == nil)
        let r = RefundOutcomeFacts(refundId: "re_1", paymentId: "pay_1", amountMinor: 1, currencyCode: "EUR", processorReference: nil)
        #expect(PaymentEvent.refund(.succeeded, r)?.typeName == "refund.succeeded")
        #expect(PaymentEvent.refund(.declined, r)?.typeName == "refund.failed")
        #expect(PaymentEvent.refund(.declined, r)?.objectId == "re_1")
    }

    @Test func prefixedIdentifiers() {
        let id = PrefixedIdentifier.event.mint { [UInt8](repeating: 7, count: $0) }
        #expect(id == "evt_" + String(repeating: "h", count: 24))
        #expect(PrefixedIdentifier.event.isValid(id))
        #expect(!PrefixedIdentifier.payment.isValid(id))
        #expect(PrefixedIdentifier.apiKeyId.isValid(String(repeating: "a", count: 16)))
    }
}
