import Testing
@testable import FinanceStore

@Suite struct MappingTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let event: BusinessEvent
        let accountKey: String
        let indicator: CreditDebitIndicator
        let status: TransactionStatus
        let type: TransactionType
        let amountMinor: Int64
        var testDescription: String { name }
    }

    // Expected values are §5.7's table, written out by hand.
    static let rows: [Row] = [
        Row(name: "succeeded", event: .paymentSucceeded(paymentID: "pay_1", money: eur(10_000), at: ts(0)),
            accountKey: "psp:adyen:EUR", indicator: .credit, status: .authorized, type: .pointOfSale, amountMinor: 10_000),
        Row(name: "refund", event: .refundCreated(refundID: "re_1", paymentID: "pay_1", money: eur(10_000), at: ts(1)),
            accountKey: "psp:adyen:EUR", indicator: .debit, status: .pending, type: .refund, amountMinor: 10_000),
        Row(name: "partial refund", event: .refundCreated(refundID: "re_2", paymentID: "pay_1", money: eur(3_000), at: ts(1)),
            accountKey: "psp:adyen:EUR", indicator: .debit, status: .pending, type: .refund, amountMinor: 3_000),
        Row(name: "fee", event: .fee(feeID: "fee_1", paymentID: "pay_1", money: eur(120), at: ts(2)),
            accountKey: "psp:adyen:EUR", indicator: .debit, status: .booked, type: .fee, amountMinor: 120),
        Row(name: "chargeback", event: .chargeback(chargebackID: "cb_1", paymentID: "pay_1", money: eur(10_000), at: ts(3)),
            accountKey: "psp:adyen:EUR", indicator: .debit, status: .booked, type: .adjustment, amountMinor: 10_000),
        Row(name: "chargeback reversal",
            event: .chargebackReversal(reversalID: "cbr_1", chargebackID: "cb_1", money: eur(10_000), at: ts(4)),
            accountKey: "psp:adyen:EUR", indicator: .credit, status: .booked, type: .adjustment, amountMinor: 10_000),
        Row(name: "adjustment debit",
            event: .adjustment(adjustmentID: "adj_1", direction: .debit, money: eur(50), note: "correction", at: ts(5)),
            accountKey: "psp:adyen:EUR", indicator: .debit, status: .booked, type: .adjustment, amountMinor: 50),
        Row(name: "fee invoiced (liability grows)", event: .feeInvoiced(invoiceID: "inv_1", money: eur(700), at: ts(6)),
            accountKey: "psp-fees-payable:adyen:EUR", indicator: .debit, status: .booked, type: .fee, amountMinor: 700),
    ]

    @Test(arguments: rows)
    func singleLegEventsMapToOneTransaction(row: Row) throws {
        var ledger = FinanceLedger(context: makeContext())
        let changes = try ledger.apply(row.event)
        let transactions = changes.compactMap { change -> Transaction? in
            if case .transactionInserted(let t) = change { return t } else { return nil }
        }
        try #require(transactions.count == 1)
        let t = transactions[0]
        let identity = makeContext().identity
        #expect(t.accountID == identity.id("account", row.accountKey))
        #expect(t.creditDebitIndicator == row.indicator)
        #expect(t.status == row.status)
        #expect(t.transactionType == row.type)
        #expect(t.transactionAmount.amountMinor == row.amountMinor)
        #expect(t.transactionAmount.currencyCode == "EUR")
        #expect(t.merchantName == "Our Shop")
        #expect(t.postedDate == (row.status == .booked ? t.transactionDate : nil))
        // The account is created on first use, in the same change set.
        #expect(changes.contains(.accountInserted(ledger.accounts[row.accountKey] ?? Account(
            id: FinanceID(high: 0, low: 0), kind: .asset, displayName: "", institutionName: "", currencyCode: "EUR"))))
    }

    @Test func declinedAndFailedPaymentsCreateNothing() throws {
        var ledger = FinanceLedger(context: makeContext())
        #expect(try ledger.apply(.paymentDeclined(paymentID: "pay_d")) == [])
        #expect(try ledger.apply(.paymentFailed(paymentID: "pay_f")) == [])
        #expect(ledger.allPostings.isEmpty)
        #expect(ledger.accounts.isEmpty)
    }

    @Test func bookedAndRejectedUpdateTheSameTransactionID() throws {
        var ledger = FinanceLedger(context: makeContext())
        let inserted = try ledger.apply(.paymentSucceeded(paymentID: "pay_1", money: eur(10_000), at: ts(0)))
        let insertedIDs = inserted.compactMap { if case .transactionInserted(let t) = $0 { t.id } else { nil } }
        let booked = try ledger.apply(.paymentBooked(paymentID: "pay_1", at: ts(86_400)))
        guard case .transactionUpdated(let t) = try #require(booked.first) else { Issue.record("not an update"); return }
        #expect(booked.count == 1)
        #expect([t.id] == insertedIDs)
        #expect(t.status == .booked)
        #expect(t.postedDate == ts(86_400))

        _ = try ledger.apply(.paymentSucceeded(paymentID: "pay_2", money: eur(500), at: ts(10)))
        let voided = try ledger.apply(.paymentVoided(paymentID: "pay_2", at: ts(20)))
        guard case .transactionUpdated(let v) = try #require(voided.first) else { Issue.record("not an update"); return }
        #expect(v.status == .rejected)
        #expect(v.postedDate == nil)
        // Booked is final.
        #expect(financeError { _ = try ledger.apply(.paymentVoided(paymentID: "pay_1", at: ts(99))) }?.code
                == .statusTransitionInvalid)
    }

    @Test func payoutDebitsProcessorAndCreditsBankPending() throws {
        var ledger = FinanceLedger(context: makeContext())
        let changes = try ledger.apply(.payout(payoutID: "po_1", bankReference: "4321", money: eur(9_880), at: ts(0)))
        let transactions = changes.compactMap { if case .transactionInserted(let t) = $0 { t } else { nil } }
        let identity = makeContext().identity
        let psp = try #require(transactions.first { $0.accountID == identity.id("account", "psp:adyen:EUR") })
        let bank = try #require(transactions.first { $0.accountID == identity.id("account", "bank:4321:EUR") })
        #expect(transactions.count == 2)
        #expect((psp.creditDebitIndicator, psp.status, psp.transactionType) == (.debit, .booked, .transfer))
        #expect((bank.creditDebitIndicator, bank.status, bank.transactionType) == (.credit, .pending, .deposit))
        let arrived = try ledger.apply(.payoutArrived(payoutID: "po_1", at: ts(172_800)))
        #expect(arrived == [.transactionUpdated(try #require(
            ledger.transactions.first { $0.id == bank.id && $0.status == .booked }))])
    }

    @Test func feeInvoiceSettlementCreditsLiabilityAndDebitsAsset() throws {
        var ledger = FinanceLedger(context: makeContext())
        let changes = try ledger.apply(.feeInvoiceSettled(invoiceID: "inv_1", money: eur(700), at: ts(0)))
        let transactions = changes.compactMap { if case .transactionInserted(let t) = $0 { t } else { nil } }
        let identity = makeContext().identity
        #expect(transactions.first { $0.accountID == identity.id("account", "psp-fees-payable:adyen:EUR") }?
            .creditDebitIndicator == .credit)
        #expect(transactions.first { $0.accountID == identity.id("account", "psp:adyen:EUR") }?
            .creditDebitIndicator == .debit)
        #expect(ledger.financeAccounts.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.asset, .liability])
    }

    @Test func reapplyingAnEventIsIdempotentAndConflictsAreRefused() throws {
        var ledger = FinanceLedger(context: makeContext())
        let event = BusinessEvent.paymentSucceeded(paymentID: "pay_1", money: eur(10_000), at: ts(0))
        #expect(try ledger.apply(event).count == 2)  // account + transaction
        #expect(try ledger.apply(event) == [])
        _ = try ledger.apply(.paymentBooked(paymentID: "pay_1", at: ts(5)))
        #expect(try ledger.apply(.paymentBooked(paymentID: "pay_1", at: ts(5))) == [])
        #expect(try ledger.apply(event) == [])  // replay after the status advanced is still a replay
        #expect(ledger.allPostings.count == 1)
        let conflicting = BusinessEvent.paymentSucceeded(paymentID: "pay_1", money: eur(9_999), at: ts(0))
        #expect(financeError { _ = try ledger.apply(conflicting) }?.code == .eventConflict)
    }

    @Test func statusChangeBeforeInsertIsPostingNotFound() {
        var ledger = FinanceLedger(context: makeContext())
        #expect(financeError { _ = try ledger.apply(.refundBooked(refundID: "re_x", at: ts(0))) }?.code == .postingNotFound)
    }

    @Test func invalidEventsAreRefusedByField() {
        var ledger = FinanceLedger(context: makeContext())
        let cases: [(BusinessEvent, FinanceError.Code, String?)] = [
            (.paymentSucceeded(paymentID: "", money: eur(1), at: ts(0)), .eventInvalid, "paymentID"),
            (.paymentSucceeded(paymentID: "a:b", money: eur(1), at: ts(0)), .eventInvalid, "paymentID"),
            (.paymentSucceeded(paymentID: String(repeating: "x", count: 129), money: eur(1), at: ts(0)), .eventInvalid, "paymentID"),
            (.paymentSucceeded(paymentID: "p", money: eur(0), at: ts(0)), .eventInvalid, "amount"),
            (.paymentSucceeded(paymentID: "p", money: eur(-5), at: ts(0)), .eventInvalid, "amount"),
            (.paymentSucceeded(paymentID: "p", money: EventMoney(amountMinor: 1, currencyCode: "XXX", processor: "adyen"),
                               at: ts(0)), .currencyUnknown, "currencyCode"),
            (.paymentSucceeded(paymentID: "p", money: eur(1, "Adyen"), at: ts(0)), .eventInvalid, "processor"),
            (.payout(payoutID: "po", bankReference: "", money: eur(1), at: ts(0)), .eventInvalid, "bankReference"),
        ]
        for (event, code, field) in cases {
            let error = financeError { _ = try ledger.apply(event) }
            #expect(error?.code == code)
            #expect(error?.field == field)
        }
        // At the id-length boundary the event is accepted.
        #expect(financeError { _ = try ledger.apply(.paymentSucceeded(
            paymentID: String(repeating: "x", count: 128), money: eur(1), at: ts(0))) } == nil)
    }
}
