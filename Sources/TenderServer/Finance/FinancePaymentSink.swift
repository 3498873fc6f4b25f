import FinanceStore
import Foundation
import Payments
import Postgres

/// Feeds payment outcomes into the finance store inside the payment's own transaction, so the
/// ledger and the payment commit together or not at all (issue 6 item 2): a `PaymentEventSubscriber`
/// for captured payments and paid-back refunds (declines and refusals move no money).
public struct FinancePaymentSink: PaymentEventSubscriber {
    /// Slug of the processor account the money sits on (`simulator`, `http`…).
    public let processor: String
    private let recorder = FinanceRecorder()

    public init(processor: String) { self.processor = processor }

    public func record(_ event: PaymentEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let at = FinanceTimestamp(secondsSinceEpoch: Int64(now.timeIntervalSince1970))
        switch event {
        case .paymentSucceeded(let p):
            try recorder.apply(.paymentSucceeded(paymentID: p.paymentId,
                                                 money: EventMoney(amountMinor: p.amountMinor, currencyCode: p.currencyCode,
                                                                   processor: processor),
                                                 at: at),
                               merchantId: merchantId, on: conn, now: now)
        case .refundSucceeded(let r):
            try recorder.apply(.refundCreated(refundID: r.refundId, paymentID: r.paymentId,
                                              money: EventMoney(amountMinor: r.amountMinor, currencyCode: r.currencyCode,
                                                                processor: processor),
                                              at: at),
                               merchantId: merchantId, on: conn, now: now)
        case .paymentDeclined, .paymentFailed, .refundFailed:
            break
        }
    }
}

extension TokenService: PaymentTokenVerifying {}
