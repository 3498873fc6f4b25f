// The business outcomes of payments and refunds as typed domain events. The shell writes each into
// the events outbox and hands it to its in-transaction subscribers (the finance ledger among them).

/// The money facts of one payment outcome.
public struct PaymentOutcomeFacts: Sendable, Equatable {
    /// `pay_…`.
    public var paymentId: String
    /// The paid (or attempted) session.
    public var sessionId: String
    /// Minor units.
    public var amountMinor: Int64
    /// ISO 4217 alphabetic code.
    public var currencyCode: String
    /// The processor's reference, when it gave one.
    public var processorReference: String?

    /// Creates the facts.
    public init(paymentId: String, sessionId: String, amountMinor: Int64, currencyCode: String, processorReference: String?) {
        self.paymentId = paymentId
        self.sessionId = sessionId
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.processorReference = processorReference
    }
}

/// The money facts of one refund outcome.
public struct RefundOutcomeFacts: Sendable, Equatable {
    /// `re_…`.
    public var refundId: String
    /// The refunded payment.
    public var paymentId: String
    /// Minor units.
    public var amountMinor: Int64
    /// ISO 4217 alphabetic code.
    public var currencyCode: String
    /// The processor's reference, when it gave one.
    public var processorReference: String?

    /// Creates the facts.
    public init(refundId: String, paymentId: String, amountMinor: Int64, currencyCode: String, processorReference: String?) {
        self.refundId = refundId
        self.paymentId = paymentId
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
        self.processorReference = processorReference
    }
}

/// One recorded outcome (CONTRACT §6 event types).
public enum PaymentEvent: Sendable, Equatable {
    /// `payment.succeeded`: captured.
    case paymentSucceeded(PaymentOutcomeFacts)
    /// `payment.declined`: the processor declined it.
    case paymentDeclined(PaymentOutcomeFacts)
    /// `payment.failed`: Tender refused it before any processor call.
    case paymentFailed(PaymentOutcomeFacts)
    /// `refund.succeeded`: paid back.
    case refundSucceeded(RefundOutcomeFacts)
    /// `refund.failed`: the processor declined the refund.
    case refundFailed(RefundOutcomeFacts)

    /// The event for a payment reaching final `status`; nil for `pending` (no outcome yet).
    public static func payment(_ status: PaymentStatus, _ facts: PaymentOutcomeFacts) -> PaymentEvent? {
        switch status {
        case .succeeded: .paymentSucceeded(facts)
        case .declined: .paymentDeclined(facts)
        case .failed: .paymentFailed(facts)
        case .pending: nil
        }
    }

    /// The event for a refund reaching final `status`; nil for `pending`.
    public static func refund(_ status: RefundStatus, _ facts: RefundOutcomeFacts) -> PaymentEvent? {
        switch status {
        case .succeeded: .refundSucceeded(facts)
        case .declined: .refundFailed(facts)
        case .pending: nil
        }
    }

    /// The wire name (CONTRACT §6).
    public var typeName: String {
        switch self {
        case .paymentSucceeded: "payment.succeeded"
        case .paymentDeclined: "payment.declined"
        case .paymentFailed: "payment.failed"
        case .refundSucceeded: "refund.succeeded"
        case .refundFailed: "refund.failed"
        }
    }

    /// The id of the object the event is about (`pay_…` or `re_…`).
    public var objectId: String {
        switch self {
        case .paymentSucceeded(let f), .paymentDeclined(let f), .paymentFailed(let f): f.paymentId
        case .refundSucceeded(let f), .refundFailed(let f): f.refundId
        }
    }
}
