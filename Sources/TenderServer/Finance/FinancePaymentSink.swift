import FinanceStore
import Foundation
import Postgres

/// Feeds payment outcomes into the finance store inside the payment's own transaction, so the
/// ledger and the payment commit together or not at all (issue 6 item 2).
public struct FinancePaymentSink: PaymentOutcomeSink {
    /// Slug of the processor account the money sits on (`simulator`, `http`…).
    public let processor: String
    private let recorder = FinanceRecorder()

    public init(processor: String) { self.processor = processor }

    public func record(_ event: PaymentLedgerEvent, merchantId: String, on conn: PostgresConnection, now: Date) throws {
        let at = FinanceTimestamp(secondsSinceEpoch: Int64(now.timeIntervalSince1970))
        switch event {
        case let .paymentSucceeded(paymentId, _, amountMinor, currencyCode, _):
            try recorder.apply(.paymentSucceeded(paymentID: paymentId,
                                                 money: EventMoney(amountMinor: amountMinor, currencyCode: currencyCode,
                                                     processor: processor),
                                                 at: at),
                               merchantId: merchantId, on: conn, now: now)
        case let .refundSucceeded(refundId, paymentId, amountMinor, currencyCode, _):
            try recorder.apply(.refundCreated(refundID: refundId, paymentID: paymentId,
                                              money: EventMoney(amountMinor: amountMinor, currencyCode: currencyCode, processor: processor),
                                              at: at),
                               merchantId: merchantId, on: conn, now: now)
        }
    }
}

extension TokenService: PaymentTokenVerifying {}
