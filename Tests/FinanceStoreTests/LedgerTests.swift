import Foundation
import Testing
@testable import FinanceStore

@Suite struct LedgerTests {
    @Test func checkBalancedRefusesUnbalancedAndNonPositiveLegs() {
        let psp = LedgerAccounts.settlement("adyen", "EUR")
        let sales = LedgerAccounts.sales("EUR")
        let usdSales = LedgerAccounts.sales("USD")
        let cases: [[LedgerEntry]] = [
            [LedgerEntry(account: psp, side: .debit, amountMinor: 100), LedgerEntry(account: sales, side: .credit, amountMinor: 99)],
            [LedgerEntry(account: psp, side: .debit, amountMinor: 100), LedgerEntry(account: usdSales, side: .credit, amountMinor: 100)],
            [LedgerEntry(account: psp, side: .debit, amountMinor: 0), LedgerEntry(account: sales, side: .credit, amountMinor: 0)],
            [LedgerEntry(account: psp, side: .debit, amountMinor: 100)],
        ]
        for entries in cases {
            #expect(financeError { try Posting.checkBalanced(entries) }?.code == .unbalancedPosting)
        }
        #expect(financeError { try Posting.checkBalanced([
            LedgerEntry(account: psp, side: .debit, amountMinor: 100), LedgerEntry(account: sales, side: .credit, amountMinor: 100),
        ]) } == nil)
    }

    static func randomEvent(_ rng: inout SplitMix64, step: Int, open: inout [String], refunds: inout [String],
                            payouts: inout [String]) -> BusinessEvent {
        let processors = ["adyen", "stripe"]
        let currencies = ["EUR", "JPY", "KWD"]
        func money() -> EventMoney {
            EventMoney(amountMinor: Int64.random(in: 1...1_000_000, using: &rng),
                       currencyCode: currencies[Int.random(in: 0..<3, using: &rng)],
                       processor: processors[Int.random(in: 0..<2, using: &rng)])
        }
        let at = ts(Int64(step))
        switch Int.random(in: 0..<14, using: &rng) {
        case 0, 1: open.append("p\(step)"); return .paymentSucceeded(paymentID: "p\(step)", money: money(), at: at)
        case 2: return .paymentDeclined(paymentID: "d\(step)")
        case 3: if let id = open.popLast() { return .paymentBooked(paymentID: id, at: at) }
        case 4: if let id = open.popLast() { return .paymentVoided(paymentID: id, at: at) }
        case 5: refunds.append("r\(step)"); return .refundCreated(refundID: "r\(step)", paymentID: "p", money: money(), at: at)
        case 6: if let id = refunds.popLast() { return .refundBooked(refundID: id, at: at) }
        case 7: return .fee(feeID: "f\(step)", paymentID: nil, money: money(), at: at)
        case 8: return .chargeback(chargebackID: "c\(step)", paymentID: "p", money: money(), at: at)
        case 9: return .chargebackReversal(reversalID: "v\(step)", chargebackID: "c", money: money(), at: at)
        case 10: return .adjustment(adjustmentID: "a\(step)", direction: Bool.random(using: &rng) ? .credit : .debit,
                                    money: money(), note: "", at: at)
        case 11: payouts.append("o\(step)"); return .payout(payoutID: "o\(step)", bankReference: "1234", money: money(), at: at)
        case 12: if let id = payouts.popLast() { return .payoutArrived(payoutID: id, at: at) }
        default: return .feeInvoiced(invoiceID: "i\(step)", money: money(), at: at)
        }
        return .paymentFailed(paymentID: "x\(step)")
    }

    /// Property: over seeded random event sequences, every posting balances, the whole ledger balances
    /// per currency, and each account's FinanceKit balances equal its general-ledger balance.
    @Test(arguments: [UInt64(1), 7, 42, 2026, 99_991])
    func postingsAlwaysBalanceAndBalancesMatchTheLedger(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var ledger = FinanceLedger(context: makeContext())
        var open: [String] = [], refunds: [String] = [], payouts: [String] = []
        for step in 0..<400 {
            let event = Self.randomEvent(&rng, step: step, open: &open, refunds: &refunds, payouts: &payouts)
            _ = try ledger.apply(event)
            if Int.random(in: 0..<5, using: &rng) == 0 { #expect(try ledger.apply(event) == []) }
        }
        var netByCurrency: [String: Int64] = [:]
        var glBooked: [String: Int64] = [:]     // by account key, debit-positive, booked only
        var glAvailable: [String: Int64] = [:]  // plus authorized/pending legs that reduce the account
        for posting in ledger.allPostings {
            try Posting.checkBalanced(posting.entries)
            for entry in posting.entries {
                let debitPositive = entry.side == .debit ? entry.amountMinor : -entry.amountMinor
                netByCurrency[entry.account.currencyCode, default: 0] += debitPositive
                guard entry.account.exposed else { continue }
                // Exposed accounts in FinanceKit's sense: + for asset increase / liability decrease.
                let key = entry.account.key
                if posting.status == .booked {
                    glBooked[key, default: 0] += debitPositive
                    glAvailable[key, default: 0] += debitPositive
                } else if posting.status == .authorized || posting.status == .pending, debitPositive < 0 {
                    glAvailable[key, default: 0] += debitPositive
                }
            }
        }
        #expect(netByCurrency.values.allSatisfy { $0 == 0 })
        let balances = try ledger.balances(asOf: ts(10_000))
        #expect(balances.count == ledger.accounts.count)
        for (key, account) in ledger.accounts {
            let balance = try #require(balances.first { $0.accountID == account.id })
            func signed(_ b: Balance?) -> Int64? {
                b.map { $0.creditDebitIndicator == .credit ? $0.amount.amountMinor : -$0.amount.amountMinor }
            }
            #expect(signed(balance.currentBalance.booked) == glBooked[key, default: 0])
            #expect(signed(balance.currentBalance.available) == glAvailable[key, default: 0])
        }
    }

    @Test func balancesFollowTheDocumentedRules() throws {
        var ledger = FinanceLedger(context: makeContext())
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p1", money: eur(10_000), at: ts(0)))
        _ = try ledger.apply(.refundCreated(refundID: "r1", paymentID: "p1", money: eur(3_000), at: ts(1)))
        _ = try ledger.apply(.feeInvoiced(invoiceID: "i1", money: eur(700), at: ts(2)))
        let identity = makeContext().identity
        func balance(_ key: String, _ at: Int64) throws -> CurrentBalance {
            let all = try ledger.balances(asOf: ts(at))
            return try #require(all.first { $0.accountID == identity.id("account", key) }).currentBalance
        }
        func pair(_ b: Balance?) -> String? { b.map { "\($0.amount.amountMinor) \($0.creditDebitIndicator.rawValue)" } }
        // Authorized credit not yet spendable; pending refund already reduces available.
        var psp = try balance("psp:adyen:EUR", 10)
        #expect(pair(psp.booked) == "0 credit")
        #expect(pair(psp.available) == "3000 debit")
        #expect(psp.booked?.asOfDate == ts(10))
        _ = try ledger.apply(.paymentBooked(paymentID: "p1", at: ts(3)))
        psp = try balance("psp:adyen:EUR", 11)
        #expect(pair(psp.booked) == "10000 credit")
        #expect(pair(psp.available) == "7000 credit")
        _ = try ledger.apply(.refundBooked(refundID: "r1", at: ts(4)))
        #expect(pair(try balance("psp:adyen:EUR", 12).booked) == "7000 credit")
        // An owed liability shows debit.
        #expect(pair(try balance("psp-fees-payable:adyen:EUR", 12).booked) == "700 debit")
    }

    @Test func jsonShapeUsesFinanceKitNamesAndExactDecimalStrings() throws {
        var ledger = FinanceLedger(context: makeContext())
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p1", money: eur(10_000), at: ts(0)))
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p2", money: EventMoney(
            amountMinor: 500, currencyCode: "JPY", processor: "stripe"), at: ts(0)))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let byCurrency = Dictionary(grouping: ledger.transactions) { $0.transactionAmount.currencyCode }
        let eurTransaction = try #require(byCurrency["EUR"]?.first)
        let eurJSON = String(decoding: try encoder.encode(eurTransaction), as: UTF8.self)
        #expect(eurJSON.contains("\"transactionAmount\":{\"amount\":\"100.00\",\"currencyCode\":\"EUR\"}"))
        #expect(eurJSON.contains("\"creditDebitIndicator\":\"credit\""))
        #expect(eurJSON.contains("\"transactionType\":\"pointOfSale\""))
        #expect(eurJSON.contains("\"status\":\"authorized\""))
        #expect(eurJSON.contains("\"postedDate\":null"))
        #expect(eurJSON.contains("\"transactionDate\":\"2026-02-02T02:40:00Z\""))
        #expect(eurJSON.contains("\"merchantCategoryCode\":5812"))
        let jpyTransaction = try #require(byCurrency["JPY"]?.first)
        let jpyJSON = String(decoding: try encoder.encode(jpyTransaction), as: UTF8.self)
        #expect(jpyJSON.contains("{\"amount\":\"500\",\"currencyCode\":\"JPY\"}"))
        for transaction in ledger.transactions {
            #expect(try JSONDecoder().decode(Transaction.self, from: try encoder.encode(transaction)) == transaction)
        }
        let accountJSON = String(decoding: try encoder.encode(ledger.financeAccounts[0]), as: UTF8.self)
        #expect(accountJSON.contains("\"kind\":\"asset\"") && accountJSON.contains("\"creditInformation\":null"))
        let balances = try ledger.balances(asOf: ts(0))
        let balanceJSON = String(decoding: try encoder.encode(balances[0]), as: UTF8.self)
        #expect(balanceJSON.contains("\"currentBalance\":{\"available\":{"))
        #expect(try JSONDecoder().decode(AccountBalance.self, from: try encoder.encode(balances[0])) == balances[0])
        // Wrong digits are refused at the JSON edge.
        for bad in ["100.0", "100", "1e2", "-1.00", "01.00", "100.000"] {
            let json = Data("{\"amount\":\"\(bad)\",\"currencyCode\":\"EUR\"}".utf8)
            #expect(throws: FinanceError.self) { try JSONDecoder().decode(CurrencyAmount.self, from: json) }
        }
    }

    @Test func timestampsAndIDsRoundTrip() throws {
        #expect(FinanceTimestamp(secondsSinceEpoch: 0).description == "1970-01-01T00:00:00Z")
        #expect(FinanceTimestamp(secondsSinceEpoch: 951_782_400).description == "2000-02-29T00:00:00Z")
        #expect(try FinanceTimestamp(parsing: "2000-02-29T01:00:00+01:00").secondsSinceEpoch == 951_782_400)
        #expect(try FinanceTimestamp(parsing: "1969-12-31T23:59:59.999Z").secondsSinceEpoch == -1)
        for bad in ["2001-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01 00:00:00Z", "2026-01-01T00:00:00"] {
            #expect(financeError { _ = try FinanceTimestamp(parsing: bad) }?.code == .valueInvalid)
        }
        let id = makeContext().identity.id("transaction", "payment:p1")
        #expect(try FinanceID(parsing: id.description) == id)
        #expect(try FinanceID(parsing: id.description.uppercased()) == id)
        #expect(Array(id.description)[14] == "8")  // UUID version 8
        // The text form PostgreSQL's uuid prints: lower case, 8-4-4-4-12, every nibble in place.
        #expect(FinanceID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210).description
                == "01234567-89ab-cdef-fedc-ba9876543210")
        #expect(FinanceID(high: 0, low: 0).description == "00000000-0000-0000-0000-000000000000")
        #expect(FinanceID(high: .max, low: .max).description == "ffffffff-ffff-ffff-ffff-ffffffffffff")
        #expect(makeContext(merchant: "m_2").identity.id("transaction", "payment:p1") != id)
    }
}
