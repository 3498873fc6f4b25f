import Testing
@testable import FinanceStore

/// `BusinessEvent.reversal`: what a corrected settlement uses to take an earlier booking back.
@Suite struct ReversalTests {
    @Test func aBookedPostingIsMirroredAndBalancesReturnToZero() throws {
        var ledger = FinanceLedger(context: makeContext())
        _ = try ledger.apply(.fee(feeID: "fee_1", paymentID: nil, money: eur(120), at: ts(0)))
        let changes = try ledger.apply(.reversal(reversalID: "rev_1", postingKey: "fee:fee_1", at: ts(60)))
        let inserted = changes.compactMap { if case .transactionInserted(let t) = $0 { t } else { nil } }
        #expect(inserted.count == 1)
        #expect(inserted.first?.creditDebitIndicator == .credit)  // the fee was a debit
        #expect(inserted.first?.transactionType == .fee)
        #expect(inserted.first?.status == .booked)
        #expect(inserted.first?.transactionAmount.amountMinor == 120)
        let reversal = try #require(ledger.postings["reversal:rev_1"])
        let original = try #require(ledger.postings["fee:fee_1"])
        #expect(reversal.entries.map(\.side) == original.entries.map { $0.side == .debit ? .credit : .debit })
        let psp = try #require(try ledger.balances(asOf: ts(120)).first)
        guard case .availableAndBooked(let available, let booked) = psp.currentBalance else {
            Issue.record("balance shape")
            return
        }
        #expect(booked.amount.amountMinor == 0)
        #expect(available.amount.amountMinor == 0)
        // Applying it again changes nothing.
        #expect(try ledger.apply(.reversal(reversalID: "rev_1", postingKey: "fee:fee_1", at: ts(60))) == [])
    }

    @Test func aPendingDepositIsRejectedNotMirrored() throws {
        var ledger = FinanceLedger(context: makeContext())
        _ = try ledger.apply(.payout(payoutID: "po_1", bankReference: "payouts", money: eur(435), at: ts(0)))
        let changes = try ledger.apply(.reversal(reversalID: "rev_2", postingKey: "payout-arrival:po_1", at: ts(60)))
        #expect(changes.count == 1)
        guard case .transactionUpdated(let deposit) = try #require(changes.first) else {
            Issue.record("not an update")
            return
        }
        #expect(deposit.status == .rejected)
        #expect(ledger.postings["reversal:rev_2"] == nil)
        // Rejected stays rejected; it cannot arrive any more.
        #expect(try ledger.apply(.reversal(reversalID: "rev_2", postingKey: "payout-arrival:po_1", at: ts(90))) == [])
        #expect(financeError { _ = try ledger.apply(.payoutArrived(payoutID: "po_1", at: ts(100))) }?.code
                == .statusTransitionInvalid)
    }

    @Test func reversingNothingIsRefused() {
        var ledger = FinanceLedger(context: makeContext())
        #expect(financeError { _ = try ledger.apply(.reversal(reversalID: "rev_3", postingKey: "fee:none", at: ts(0))) }?.code
                == .postingNotFound)
        #expect(financeError { _ = try ledger.apply(.reversal(reversalID: "bad:id", postingKey: "fee:none", at: ts(0))) }?.code
                == .eventInvalid)
        #expect(financeError { _ = try ledger.apply(.reversal(reversalID: "rev_4", postingKey: "", at: ts(0))) }?.code
                == .eventInvalid)
    }
}
