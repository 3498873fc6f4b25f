import ApplePayToken
import Crypto
import Foundation
import Payments
import Postgres

/// Verifies and decrypts an Apple Pay token for a merchant. `TokenService` (merchant keys from the key
/// store) is the production implementation; tests use `DecryptorTokenVerifier` (`@_spi(Testing)`).
public protocol PaymentTokenVerifying: Sendable {
    /// Verifies every rule (signature, chain, freshness at `now`) and decrypts with the merchant's keys.
    func verifyAndDecrypt(tokenJSON: [UInt8], merchantId: String, now: Date) throws(TokenError) -> DecryptedPaymentToken
}

/// A verifier over one fixed `ApplePayTokenDecryptor` (its roots and keys serve every merchant): a test
/// seam, never wired by `tender serve` (only tests and `tender bench payments`, with a sandbox authority, use it).
@_spi(Testing)
public struct DecryptorTokenVerifier: PaymentTokenVerifying {
    /// The decryptor used for every merchant.
    public let decryptor: ApplePayTokenDecryptor

    /// Wraps `decryptor`.
    public init(decryptor: ApplePayTokenDecryptor) { self.decryptor = decryptor }

    /// Verifies and decrypts, ignoring `merchantId` (the keys are shared).
    public func verifyAndDecrypt(tokenJSON: [UInt8], merchantId: String, now: Date) throws(TokenError) -> DecryptedPaymentToken {
        try decryptor.verifyAndDecrypt(tokenJSON, now: now)
    }
}

/// Receives every payment and refund outcome inside the transaction that records it (after the event
/// row is written to the outbox), so what it writes commits with the outcome or not at all. Throwing
/// rolls the outcome back; the resolver then tries again. The finance ledger is one subscriber.
public protocol PaymentEventSubscriber: Sendable {
    /// Handles `event` on `conn` (inside the open transaction).
    func record(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws
    /// `record`, also handing back the Wallet order of a succeeded payment when this subscriber made it, for the
    /// response's `orderDetails` (so phase 3 does not read it back). By default: `record`, and no order.
    func recordReportingOrder(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection,
                              now: Date) throws -> WalletOrderDetails?
}

extension PaymentEventSubscriber {
    public func recordReportingOrder(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection,
                                     now: Date) throws -> WalletOrderDetails? {
        try record(event, merchantId: merchantId, on: conn, now: now)
        return nil
    }
}

/// Fault injection for the crash tests (docs/reliability-security.md test 7): with
/// `TENDER_UNSAFE_CRASH_AT_FOR_TESTING=after_accepted|after_processor_call|after_outcome` set, the
/// process kills itself with SIGKILL at that point. Unset (always, in production) it does nothing.
public struct CrashHook: Sendable {
    /// Points where the process may be killed.
    public enum Point: String, Sendable, CaseIterable {
        /// After phase 1 committed (payment accepted), before the processor call.
        case afterAccepted = "after_accepted"
        /// After the processor answered, before the outcome is committed.
        case afterProcessorCall = "after_processor_call"
        /// After the outcome committed, before the response is sent.
        case afterOutcome = "after_outcome"
    }

    /// The environment variable; its name says it must never be set in production.
    public static let variable = "TENDER_UNSAFE_CRASH_AT_FOR_TESTING"
    /// The armed point, if any.
    public let point: Point?

    /// Reads the variable; an unknown value arms nothing.
    public init(environment: [String: String]) {
        point = environment[Self.variable].flatMap(Point.init(rawValue:))
    }

    /// A hook that never fires.
    public static let disarmed = CrashHook(environment: [:])

    /// Kills the process when `reached` is the armed point.
    public func reach(_ reached: Point) {
        guard point == reached else { return }
        kill(getpid(), SIGKILL)
        _exit(137)
    }
}
