// The phases of a payment and of a refund as a pure state machine: what the shell does next with a
// stored row, and which transition a processor outcome makes. The shell performs each step in SQL.

/// The committed checkpoints of one payment attempt (docs/reliability-security.md §1.3, Brandur's recovery
/// points), stored as `recovery_point`. A crash between two of them leaves a state that a retry of the
/// same key resumes.
public enum RecoveryPoint: String, Sendable, CaseIterable {
    /// The idempotency key is claimed; nothing else is committed.
    case started
    /// The token was verified, bound to the session and the payment row inserted (processor not called yet).
    case accepted
    /// The processor was called and its outcome is unknown (timeout, 5xx): re-send with the same key.
    case processorCalled = "processor_called"
    /// The outcome is committed; the stored response is final.
    case outcomeRecorded = "outcome_recorded"

    /// The points from which work continues with a processor call.
    public var needsProcessorCall: Bool { self == .accepted || self == .processorCalled }
}

/// Whether repeating can change an outcome (STYLE.md: outcomes are classified, retries follow the class).
public enum OutcomeClass: String, Sendable {
    /// Retrying with the same processor key may give an answer.
    case transient
    /// Final: repeating cannot change it.
    case permanent
}

/// What a client sees of a refund (openapi.yaml, refund).
public enum RefundStatus: String, Sendable, CaseIterable, Codable {
    /// The processor paid it back.
    case succeeded
    /// The processor declined it (`declineCode` says why).
    case declined
    /// The processor's answer is not known yet; the resolver re-sends with the same key.
    case pending

    /// True when no further transition can happen.
    public var isFinal: Bool { self != .pending }
}

/// A status with a pending state, shared by payments and refunds.
public protocol OutcomeStatus: Sendable, Equatable {
    /// True when no further transition can happen.
    var isFinal: Bool { get }
    /// The status an answer or a lost answer leads to.
    static func after(_ outcome: ProcessorOutcome) -> Self
}

extension PaymentStatus: OutcomeStatus {
    /// Approved → succeeded, declined → declined, unknown → pending.
    public static func after(_ outcome: ProcessorOutcome) -> PaymentStatus { outcome.paymentStatus }
}

extension RefundStatus: OutcomeStatus {
    /// Approved → succeeded, declined → declined, unknown or accepted (asynchronous) → pending.
    public static func after(_ outcome: ProcessorOutcome) -> RefundStatus {
        switch outcome {
        case .approved: .succeeded
        case .declined: .declined
        case .unknown, .accepted: .pending
        }
    }
}

/// The next step for a stored payment or refund (a retry of its key, or the resolver).
public enum ResumeStep: Sendable, Equatable {
    /// Final: answer with the stored outcome (and finish the key if it is not yet).
    case respondFinal
    /// Pending and marked for an operator: show it, release the key, call nobody.
    case awaitOperator
    /// Pending: call the processor again with the same key (phase 2), then record (phase 3).
    case callProcessor
}

/// What phase 3 does with a processor outcome.
public enum OutcomeTransition<Status: OutcomeStatus>: Sendable, Equatable {
    /// An answer: write `status` at `outcome_recorded`, notify subscribers, finish the key.
    case record(Status)
    /// No answer (transient): stay pending at `processor_called`, back off the next resolver attempt
    /// and release the key so a retry or the resolver re-sends with the same processor key.
    case retryLater(reason: String)
}

/// The state machine of payments and refunds: accepted → processor called → outcome recorded.
public enum OutcomePhases {
    /// What to do with a row at `status`.
    public static func resume<Status: OutcomeStatus>(status: Status, needsOperator: Bool) -> ResumeStep {
        if status.isFinal { return .respondFinal }
        return needsOperator ? .awaitOperator : .callProcessor
    }

    /// The transition `outcome` makes from pending; nil when the row is no longer pending (another
    /// holder recorded an outcome first, which stands).
    public static func transition<Status: OutcomeStatus>(from status: Status, on outcome: ProcessorOutcome)
        -> OutcomeTransition<Status>? {
        guard !status.isFinal else { return nil }
        switch outcome.outcomeClass {
        case .permanent: return .record(Status.after(outcome))
        case .transient:
            guard case .unknown(let reason) = outcome else { return .record(Status.after(outcome)) }
            return .retryLater(reason: reason)
        }
    }

    /// The recovery point a row at `status` is stored with.
    public static func recoveryPoint<Status: OutcomeStatus>(after transition: OutcomeTransition<Status>) -> RecoveryPoint {
        switch transition {
        case .record: .outcomeRecorded
        case .retryLater: .processorCalled
        }
    }
}
