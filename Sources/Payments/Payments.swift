// Payments: the exactly-once payment state machine and processor protocol (pure: no I/O; time, ids
// and randomness come in as parameters).

/// What a client sees of a payment (openapi.yaml, payment result).
public enum PaymentStatus: String, Sendable, CaseIterable, Codable {
    /// The processor approved the authorization.
    case succeeded
    /// The processor declined it (`declineCode` says why).
    case declined
    /// The processor's answer is not known yet; the resolver re-sends with the same key.
    case pending
    /// Tender refused the token before any processor call (`failureCode` says why).
    case failed

    /// True when no further transition can happen.
    public var isFinal: Bool { self != .pending }
}

/// What a processor said about one authorization or refund.
public enum ProcessorOutcome: Sendable, Equatable {
    /// Approved, with the processor's reference.
    case approved(processorReference: String, authorizationCode: String?)
    /// Declined, with the processor's code (e.g. `insufficient_funds`).
    case declined(declineCode: String, processorReference: String?)
    /// No answer (timeout, connection lost, 5xx after retries): the charge may or may not exist.
    case unknown(reason: String)
    /// Taken for asynchronous processing, with the processor's reference of the request; the final answer
    /// comes later by another channel (Adyen answers every refund this way, `status: received`). Not a
    /// success, and re-sending cannot change it: the request waits, `pending`, and is not re-sent.
    case accepted(processorReference: String)

    /// Unknown outcomes are transient; answers are permanent (a decline is never retried, nor an accepted request).
    public var outcomeClass: OutcomeClass {
        if case .unknown = self { return .transient }
        return .permanent
    }

    /// The payment status this outcome leads to.
    public var paymentStatus: PaymentStatus {
        switch self {
        case .approved: .succeeded
        case .declined: .declined
        case .unknown, .accepted: .pending
        }
    }
}

/// Why Tender refused a payment before calling the processor; stable codes stored as `failure_code`.
public enum PaymentFailure: String, Error, Sendable, CaseIterable {
    /// The token failed verification or decryption (the token error's own code is kept beside it).
    case tokenRejected = "token_rejected"
    /// The Apple transactionId was already used (Apple step 5).
    case tokenReplayed = "token_replayed"
    /// `transactionAmount` differs from the session total (Apple step 6).
    case amountMismatch = "amount_mismatch"
    /// The numeric `currencyCode` differs from the session currency (Apple step 6).
    case currencyMismatch = "currency_mismatch"
    /// `header.applicationData` is not this session's (Apple step 6, token binding).
    case applicationDataMismatch = "application_data_mismatch"
    /// The token carries EMV data but the request did not offer `supportsEMV` (rule 55).
    case emvNotRequested = "emv_not_requested"
    /// The shipping contact given at authorization is not serviceable at the session's total (rule 53).
    case shippingContactInvalid = "shipping_contact_invalid"
    /// The session is paid, expired or canceled.
    case sessionNotPayable = "session_not_payable"
    /// Another payment of this session is pending or succeeded.
    case sessionPaymentInProgress = "session_payment_in_progress"
    /// The unsigned `paymentMethod.network` names another scheme than the decrypted DPAN's BIN.
    case networkMismatch = "payment_network_mismatch"
}

/// The one error type of Payments: a stable code and a detail free of card data.
public struct PaymentsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable snake_case codes.
    public enum Code: String, Sendable, CaseIterable {
        /// An identifier is not in its documented format.
        case identifierInvalid = "identifier_invalid"
        /// `applicationExpirationDate` is not YYMMDD.
        case expirationInvalid = "expiration_invalid"
        /// The processor call could not be made or understood.
        case processorUnavailable = "processor_unavailable"
    }

    /// Machine code.
    public let code: Code
    /// Human detail; never card data.
    public let detail: String

    /// Creates an error.
    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// `code: detail`.
    public var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }
}

/// The key Tender sends to the processor (docs/processor-protocol.md): derived only from stable identifiers, so every
/// retry of one attempt — after a crash, from the resolver, from another node — carries the same key
/// (docs/reliability-security.md I12). Never a fresh local sequence value.
public enum ProcessorKey {
    /// Key of the authorization of `paymentId`.
    public static func authorization(paymentId: String) -> String { "tender:\(paymentId):authorize" }
    /// Key of the refund `refundId`.
    public static func refund(refundId: String) -> String { "tender:\(refundId):refund" }
}

/// Card data for one processor call. Kept as bytes so it can be zeroed once the call is done
/// (PCI DSS 3.3.1: SAD unrecoverable after authorization); `description` never shows it.
public final class SensitiveCardData: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: the buffers are written once at init and by `wipe()`, which callers invoke only after
    // the single processor call that used them has returned.
    private var dpanBytes: [UInt8]
    private var cryptogramBytes: [UInt8]

    /// Copies the values in.
    public init(dpan: String, cryptogram: String) {
        dpanBytes = Array(dpan.utf8)
        cryptogramBytes = Array(cryptogram.utf8)
    }

    /// The DPAN, for the processor request only.
    public func unsafeDPAN() -> String { String(decoding: dpanBytes, as: UTF8.self) }
    /// The cryptogram, for the processor request only.
    public func unsafeCryptogram() -> String { String(decoding: cryptogramBytes, as: UTF8.self) }

    /// Overwrites both buffers with zeros.
    public func wipe() {
        for i in dpanBytes.indices { dpanBytes[i] = 0 }
        for i in cryptogramBytes.indices { cryptogramBytes[i] = 0 }
    }

    /// Never prints the values.
    public var description: String { "SensitiveCardData(redacted)" }
}

/// One authorization as sent to a processor (docs/processor-protocol.md body fields).
public struct AuthorizationRequest: Sendable, CustomStringConvertible {
    /// Tender merchant id.
    public var merchantId: String
    /// `pay_…`.
    public var paymentId: String
    /// Amount in minor units.
    public var amountMinor: Int64
    /// ISO 4217 alphabetic code.
    public var currencyCode: String
    /// Card network as Apple reported it.
    public var network: String
    /// Expiry month 1–12.
    public var expirationMonth: Int
    /// Four-digit expiry year.
    public var expirationYear: Int
    /// ECI indicator, forwarded when present (docs/apple-pay-rules.md, rule 55).
    public var eci: String?
    /// `3DSecure` or `EMV`.
    public var paymentDataType: String
    /// Apple transactionId (hex).
    public var transactionId: String
    /// The idempotency key for the processor (`ProcessorKey.authorization`).
    public var processorKey: String
    /// DPAN and cryptogram.
    public var card: SensitiveCardData

    /// Creates a request.
    public init(merchantId: String, paymentId: String, amountMinor: Int64, currencyCode: String, network: String,
                expirationMonth: Int, expirationYear: Int, eci: String?, paymentDataType: String, transactionId: String,
                processorKey: String, card: SensitiveCardData) {
        self.merchantId = merchantId
        self.paymentId = paymentId
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.network = network
        self.expirationMonth = expirationMonth
        self.expirationYear = expirationYear
        self.eci = eci
        self.paymentDataType = paymentDataType
        self.transactionId = transactionId
        self.processorKey = processorKey
        self.card = card
    }

    /// Masked: no DPAN or cryptogram.
    public var description: String {
        "AuthorizationRequest(paymentId: \(paymentId), amountMinor: \(amountMinor), currency: \(currencyCode), key: \(processorKey))"
    }
}

/// One refund as sent to a processor.
public struct RefundRequest: Sendable {
    /// `re_…`.
    public var refundId: String
    /// The refunded payment.
    public var paymentId: String
    /// The processor's reference of the payment.
    public var processorReference: String
    /// Amount in minor units.
    public var amountMinor: Int64
    /// ISO 4217 alphabetic code.
    public var currencyCode: String
    /// The idempotency key for the processor (`ProcessorKey.refund`).
    public var processorKey: String

    /// Creates a request.
    public init(refundId: String, paymentId: String, processorReference: String, amountMinor: Int64, currencyCode: String,
                processorKey: String) {
        self.refundId = refundId
        self.paymentId = paymentId
        self.processorReference = processorReference
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.processorKey = processorKey
    }
}

/// A payment processor connector. Calls block; an unanswered call is `.unknown`, never a throw, so
/// the caller records `pending` and the resolver re-sends with the same key (docs/processor-protocol.md).
public protocol PaymentProcessor: Sendable {
    /// Authorizes (and captures) a payment.
    func authorize(_ request: AuthorizationRequest) -> ProcessorOutcome
    /// Refunds part or all of a captured payment.
    func refund(_ request: RefundRequest) -> ProcessorOutcome
}

/// Masking helpers (PCI DSS 3.4.1: at most the last four digits are shown).
public enum CardMask {
    /// The last four digits of a PAN, or nil when it is not 12–19 digits.
    public static func lastFour(_ pan: String) -> String? {
        let utf8 = Array(pan.utf8)
        guard (12...19).contains(utf8.count), utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return String(decoding: utf8.suffix(4), as: UTF8.self)
    }

    /// Apple's `applicationExpirationDate` (`YYMMDD`) as month and four-digit year.
    public static func expiration(yymmdd: String) throws(PaymentsError) -> (month: Int, year: Int) {
        let utf8 = Array(yymmdd.utf8)
        guard utf8.count == 6, utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let yy = Int(String(decoding: utf8[0..<2], as: UTF8.self)),
              let mm = Int(String(decoding: utf8[2..<4], as: UTF8.self)), (1...12).contains(mm) else {
            throw PaymentsError(.expirationInvalid, "expected YYMMDD")
        }
        return (mm, 2000 + yy)
    }
}

/// The simulator's deterministic rules, which a tester drives through amounts and test DPANs.
public struct SimulatorRules: Sendable, Equatable {
    /// Amount endings (minor units mod 100) that decline, with the code returned.
    public var declineByAmountEnding: [Int: String] = [51: "insufficient_funds", 54: "expired_card", 5: "do_not_honor"]
    /// Test DPANs that always decline, with the code returned.
    public var declineByDPAN: [String: String] = ["4000000000000002": "card_declined",
                                                  "4000000000009995": "insufficient_funds"]
    /// Amount ending (mod 100) whose first `unknownOutcomeCalls` calls per key charge the card but lose the answer.
    public var unknownOutcomeAmountEnding = 8
    /// How many calls per key answer `unknown` for that ending.
    public var unknownOutcomeCalls = 1
    /// Simulated processing time per call.
    public var latencyMilliseconds = 0
    /// Amount ending whose refunds decline (`refund_declined`).
    public var refundDeclineAmountEnding = 13

    /// The default rules.
    public init() {}

    /// The answer for an authorization: a DPAN rule wins over an amount rule.
    public func authorizationDecision(amountMinor: Int64, dpan: String) -> SimulatorDecision {
        if let code = declineByDPAN[dpan] { return .decline(code) }
        let ending = Int(amountMinor % 100)
        if let code = declineByAmountEnding[ending] { return .decline(code) }
        if ending == unknownOutcomeAmountEnding { return .approveLosingFirstAnswers(unknownOutcomeCalls) }
        return .approve
    }

    /// The answer for a refund.
    public func refundDecision(amountMinor: Int64) -> SimulatorDecision {
        Int(amountMinor % 100) == refundDeclineAmountEnding ? .decline("refund_declined") : .approve
    }

    /// What the caller sees on call number `call` (1-based) for a key whose decision is `decision`.
    public static func visibleOutcome(_ decision: SimulatorDecision, call: Int, processorReference: String) -> ProcessorOutcome {
        switch decision {
        case .approve:
            return .approved(processorReference: processorReference, authorizationCode: "SIM001")
        case .decline(let code):
            return .declined(declineCode: code, processorReference: processorReference)
        case .approveLosingFirstAnswers(let lost):
            return call <= lost ? .unknown(reason: "simulated_timeout")
                : .approved(processorReference: processorReference, authorizationCode: "SIM001")
        }
    }
}

/// What the simulator decided for a key (stored with it, so every later call answers the same).
public enum SimulatorDecision: Sendable, Equatable {
    /// Approve.
    case approve
    /// Decline with this code.
    case decline(String)
    /// Charge, but answer `unknown` to the first N calls (the "processor charged, then timed out" case).
    case approveLosingFirstAnswers(Int)
}

/// Sums of refunds never exceed the captured amount.
public enum RefundRules {
    /// True when a new refund of `amountMinor` fits: `already + amount ≤ captured`, without overflow.
    public static func fits(capturedMinor: Int64, alreadyRefundedMinor: Int64, amountMinor: Int64) -> Bool {
        guard amountMinor > 0, alreadyRefundedMinor >= 0 else { return false }
        let (sum, overflow) = alreadyRefundedMinor.addingReportingOverflow(amountMinor)
        return !overflow && sum <= capturedMinor
    }
}
