import Foundation
import Testing
import Reconciliation

/// The sample Settlement details reports in Vectors/adyen-sdr (README there): both layouts read to the
/// same lines, and every journal type lands in its type, category and currency with its amounts.
@Suite struct AdyenFixtureTests {
    static let layouts = ["settlement_detail_report_batch_57_30_columns.csv",
                          "settlement_detail_report_batch_57_49_columns.csv"]

    static func fixture(_ name: String) throws -> String {
        let url = try #require(Bundle.module.url(forResource: "Vectors/adyen-sdr/\(name)", withExtension: nil))
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// One row's expectations, worked out by hand from the file: the line's type, its money (currency,
    /// signed gross, net, fee: minor units, processor-balance view) and the category matching gives it
    /// against `recorded`.
    struct Expected: Sendable, CustomStringConvertible {
        let written: String
        let reference: String?
        let type: SettlementLineType
        let currency: String
        let grossMinor: Int64
        let netMinor: Int64
        let feeMinor: Int64
        let category: ReconciliationCategory
        var description: String { written + (reference.map { " " + $0 } ?? "") }
    }

    static let rows: [Expected] = [
        .init(written: "Settled", reference: "8815000000000001", type: .payment, currency: "USD",
              grossMinor: 5_200, netMinor: 5_153, feeMinor: 47, category: .matched),
        .init(written: "SettledExternally", reference: nil, type: .payment, currency: "USD",
              grossMinor: 2_000, netMinor: 0, feeMinor: 0, category: .matched),
        .init(written: "Settled", reference: "8815000000000003", type: .payment, currency: "EUR",
              grossMinor: 50, netMinor: -5, feeMinor: 59, category: .matched),
        .init(written: "settled", reference: nil, type: .payment, currency: "USD",
              grossMinor: 999, netMinor: 970, feeMinor: 29, category: .matched),
        .init(written: "Refunded", reference: nil, type: .refund, currency: "USD",
              grossMinor: -1_000, netMinor: -1_012, feeMinor: 12, category: .refund),
        .init(written: "RefundedExternally", reference: nil, type: .refund, currency: "USD",
              grossMinor: -500, netMinor: 0, feeMinor: 0, category: .refund),
        .init(written: "RefundedReversed", reference: nil, type: .refund, currency: "USD",
              grossMinor: 1_000, netMinor: 1_000, feeMinor: 0, category: .refund),
        .init(written: "Chargeback", reference: nil, type: .chargeback, currency: "USD",
              grossMinor: -3_000, netMinor: -3_750, feeMinor: 750, category: .chargeback),
        .init(written: "ChargebackReversed", reference: nil, type: .chargebackReversal, currency: "USD",
              grossMinor: 3_000, netMinor: 3_000, feeMinor: 0, category: .chargeback),
        .init(written: "SecondChargeback", reference: nil, type: .chargeback, currency: "USD",
              grossMinor: -3_000, netMinor: -3_000, feeMinor: 0, category: .chargeback),
        .init(written: "ChargebackExternally", reference: nil, type: .chargeback, currency: "USD",
              grossMinor: -1_200, netMinor: 0, feeMinor: 0, category: .chargeback),
        .init(written: "ChargebackReversal", reference: nil, type: .chargebackReversal, currency: "USD",
              grossMinor: 400, netMinor: 400, feeMinor: 0, category: .chargeback),
        // Gross Currency EUR, the only amount in the net currency: USD money.
        .init(written: "Fee", reference: nil, type: .fee, currency: "USD",
              grossMinor: -125, netMinor: -125, feeMinor: 0, category: .fee),
        .init(written: "MiscCosts", reference: nil, type: .fee, currency: "USD",
              grossMinor: -40, netMinor: -40, feeMinor: 0, category: .fee),
        .init(written: "PaymentCost", reference: nil, type: .fee, currency: "USD",
              grossMinor: 15, netMinor: 15, feeMinor: 0, category: .fee),
        .init(written: "AuthorisationSchemeFee", reference: nil, type: .fee, currency: "USD",
              grossMinor: -7, netMinor: -7, feeMinor: 0, category: .fee),
        .init(written: "SettleCost", reference: nil, type: .fee, currency: "USD",
              grossMinor: -2, netMinor: -2, feeMinor: 0, category: .fee),
        .init(written: "DepositCorrection", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: -500, netMinor: -500, feeMinor: 0, category: .adjustment),
        .init(written: "InvoiceDeduction", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: -310, netMinor: -310, feeMinor: 0, category: .adjustment),
        .init(written: "ManualCorrected", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: 100, netMinor: 100, feeMinor: 0, category: .adjustment),
        .init(written: "Balancetransfer", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: 200, netMinor: 200, feeMinor: 0, category: .adjustment),
        .init(written: "MatchedStatement", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: 5_000, netMinor: 5_000, feeMinor: 0, category: .adjustment),
        .init(written: "EpaPaid", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: -90, netMinor: -90, feeMinor: 0, category: .adjustment),
        .init(written: "ReserveAdjustment", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: -400, netMinor: -400, feeMinor: 0, category: .adjustment),
        .init(written: "InternalCompanyPayout", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: -600, netMinor: -600, feeMinor: 0, category: .adjustment),
        .init(written: "MerchantPayin", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: 300, netMinor: 300, feeMinor: 0, category: .adjustment),
        .init(written: "BankInstructionReturned", reference: nil, type: .payout, currency: "USD",
              grossMinor: 2_500, netMinor: 2_500, feeMinor: 0, category: .payout),
        // A payout to a shopper's card is not money to the merchant's bank.
        .init(written: "PaidOut", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: -800, netMinor: -800, feeMinor: 0, category: .adjustment),
        .init(written: "PaidOutReversed", reference: nil, type: .adjustment, currency: "USD",
              grossMinor: 800, netMinor: 800, feeMinor: 0, category: .adjustment),
        .init(written: "MerchantPayout", reference: nil, type: .payout, currency: "USD",
              grossMinor: -8_908, netMinor: -8_908, feeMinor: 0, category: .payout),
        .init(written: "SomethingNewFromAdyen", reference: nil, type: .unknown, currency: "USD",
              grossMinor: 111, netMinor: 111, feeMinor: 0, category: .adjustment),
    ]

    /// What Tender recorded for the sample's payments and refunds.
    static let created = Date(timeIntervalSince1970: 1_793_000_000)
    static let payments = [
        RecordedPayment(paymentId: "pay_adyensample0000000000001", amountMinor: 5_200, currencyCode: "USD", status: .pending,
            createdAt: created),
        RecordedPayment(paymentId: "pay_adyensample0000000000002", amountMinor: 2_000, currencyCode: "USD", status: .pending,
            createdAt: created),
        RecordedPayment(paymentId: "pay_adyensample0000000000003", amountMinor: 50, currencyCode: "EUR", status: .pending,
            createdAt: created),
        RecordedPayment(paymentId: "pay_adyensample0000000000007", amountMinor: 999, currencyCode: "USD", status: .pending,
            createdAt: created),
    ]
    static let refunds = [
        RecordedRefund(refundId: "re_adyensample0000000000001", paymentId: "pay_adyensample0000000000001", amountMinor: 1_000,
            currencyCode: "USD",
                       status: .pending, createdAt: created),
        RecordedRefund(refundId: "re_adyensample0000000000002", paymentId: "pay_adyensample0000000000002", amountMinor: 500,
            currencyCode: "USD",
                       status: .pending, createdAt: created),
    ]

    static func read(_ layout: String) throws -> [SettlementLine] {
        try lines(try fixture(layout), format: .adyenSDR)
    }

    static func line(_ expected: Expected, in lines: [SettlementLine]) -> SettlementLine? {
        lines.first { line in
            line.journalType == AdyenJournalType.lookup(expected.written)?.name ?? expected.written
                && (expected.reference == nil || line.processorReference == expected.reference)
                && (expected.written != "settled" || line.paymentId == "pay_adyensample0000000000007")
        }
    }

    @Test func everyMappedTypeHasARowAndAnExpectation() throws {
        let expectedTypes = Set(Self.rows.map(\.written))
        for journal in AdyenJournalType.mapping.keys {
            #expect(expectedTypes.contains(journal), "\(journal) has no row in the sample")
        }
        for layout in Self.layouts {
            #expect(try Self.read(layout).count == Self.rows.count, "\(layout)")
        }
    }

    @Test func bothLayoutsReadToTheSameLines() throws {
        let old = try Self.read(Self.layouts[0])
        let current = try Self.read(Self.layouts[1])
        #expect(old.count == current.count)
        for (a, b) in zip(old, current) {
            var b = b
            // The current layout has a Booking Date (the next morning), which is the settlement date.
            #expect(b.settlementDate.description == "2026-11-03")
            #expect(a.settlementDate.description == "2026-11-02")
            b.settlementDate = a.settlementDate
            #expect(a == b)
        }
    }

    @Test(arguments: rows)
    func journalType(_ expected: Expected) throws {
        for layout in Self.layouts {
            let all = try Self.read(layout)
            let line = try #require(Self.line(expected, in: all), "\(expected) in \(layout)")
            #expect(line.type == expected.type, "\(expected) in \(layout)")
            #expect(line.currencyCode == expected.currency, "\(expected) in \(layout)")
            #expect(line.grossMinor == expected.grossMinor, "\(expected) in \(layout)")
            #expect(line.netMinor == expected.netMinor, "\(expected) in \(layout)")
            #expect(line.netCurrencyCode == "USD", "\(expected) in \(layout)")
            #expect(line.feeMinor == expected.feeMinor, "\(expected) in \(layout)")
            let report = Reconciler.reconcile(lines: all, payments: Self.payments, refunds: Self.refunds,
                                              now: Self.created)
            let item = try #require(report.items.first { $0.lineNumber == line.lineNumber })
            #expect(item.category == expected.category, "\(expected) in \(layout)")
            // Money that is not a payment's or refund's gross is reported in the currency it is in.
            if expected.type != .payment && expected.type != .refund && expected.type != .chargeback
                && expected.type != .chargebackReversal {
                #expect(item.currencyCode == "USD", "\(expected) in \(layout)")
                #expect(item.actualMinor == expected.netMinor, "\(expected) in \(layout)")
            }
            // Every effect is in the currency of the amount it books.
            for effect in report.effects where effect.lineNumber == line.lineNumber {
                let expectedCurrency = effect.kind == .bookPayment || effect.kind == .bookRefund
                    || effect.kind == .chargeback || effect.kind == .chargebackReversal
                    || effect.kind == .refundReversal ? expected.currency : "USD"
                #expect(effect.currencyCode == expectedCurrency, "\(expected) \(effect.kind) in \(layout)")
            }
        }
    }

    @Test func theUnknownTypeIsReportedAndNeverBooked() throws {
        let all = try Self.read(Self.layouts[1])
        let report = Reconciler.reconcile(lines: all, payments: Self.payments, refunds: Self.refunds, now: Self.created)
        let unknown = try #require(report.items.first { $0.journalType == "SomethingNewFromAdyen" })
        #expect(unknown.reason == "journal_type_unknown")
        #expect(!report.effects.contains { $0.lineNumber == unknown.lineNumber })
    }

    @Test func theBatchBalancesInTheNetCurrency() throws {
        for layout in Self.layouts {
            let report = Reconciler.reconcile(lines: try Self.read(layout), payments: Self.payments,
                                              refunds: Self.refunds, now: Self.created)
            #expect(report.batches.count == 1, "\(layout)")
            let batch = try #require(report.batches.first)
            #expect(batch.batchId == "TenderShopUS:57")
            #expect(batch.currencyCode == "USD")
            // Σ net of the 29 rows that are not payouts to the merchant's bank, added up by hand from the file.
            #expect(batch.linesNetMinor == 6_408)
            // MerchantPayout 89.08 out, BankInstructionReturned 25.00 back.
            #expect(batch.payoutMinor == 8_908 - 2_500)
            #expect(batch.balanced)
        }
    }
}
