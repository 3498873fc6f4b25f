import FinanceStore
import HTTPServer
import Testing
@testable import TenderServer

/// The byte-level encoders the recorder and the feed hub use instead of per-row statements and Strings.
struct FinanceEncodingTests {
    @Test func arrayLiteralQuotesEveryElementAndEscapesQuotesAndBackslashes() {
        #expect(PGArray.text([String]()) == "{}")
        #expect(PGArray.text(["a", "b c"]) == "{\"a\",\"b c\"}")
        #expect(PGArray.text(["say \"hi\"", "back\\slash", "{,}"]) == "{\"say \\\"hi\\\"\",\"back\\\\slash\",\"{,}\"}")
        #expect(PGArray.text(["x", nil]) == "{\"x\",NULL}")
        // A present string spelled NULL stays a string: only nil is unquoted.
        #expect(PGArray.text(["NULL"]) == "{\"NULL\"}")
    }

    @Test func changesFrameEqualsTheGeneralSSEEncoding() throws {
        let body = Array("{\"inserted\":[{\"id\":\"a\"}],\"hasMore\":false}".utf8)
        let expected = try SSEEvent(id: "tok_1", event: "changes", data: String(decoding: body, as: UTF8.self)).encoded
        #expect(try FinanceFeedHub.changesFrame(token: "tok_1", body: body) == expected)
    }

    @Test func changesFrameWithALineBreakFallsBackToSeveralDataLines() throws {
        let body = Array("{\"a\":1,\n\"b\":2}".utf8)
        let frame = try FinanceFeedHub.changesFrame(token: "t", body: body)
        #expect(String(decoding: frame, as: UTF8.self) == "id: t\nevent: changes\ndata: {\"a\":1,\ndata: \"b\":2}\n\n")
    }

    /// The recorder's FinanceKit JSON (`FinanceBatchSQL.json`, our bytes encoder) is byte for byte what
    /// `JSONCoding.encoder` wrote before: transactions with absent and present optionals, accounts, balances.
    @Test func financeKitJSONEqualsFoundationsBytes() throws {
        let context = FinanceContext(identity: FinanceStoreIdentity.identity("merchant.json"), merchantName: "Caf\u{e9} \"Q\"",
                                     merchantCategoryCode: 5812)
        let at = FinanceTimestamp(secondsSinceEpoch: 1_709_380_800)
        let money = EventMoney(amountMinor: 1_234, currencyCode: "USD", processor: "adyen")
        var transactions: [Transaction] = []
        for event in [BusinessEvent.fee(feeID: "st01", paymentID: "pay_1", money: money, at: at),
                      .paymentSucceeded(paymentID: "pay_2", money: money, at: at),
                      .payout(payoutID: "po_1", bankReference: "payouts", money: money, at: at)] {
            guard case .insert(let postings) = try FinanceMapping.effect(of: event, context: context) else {
                Issue.record("\(event) inserts postings")
                continue
            }
            for posting in postings { transactions += posting.transactions(context: context) }
        }
        var foreign = try #require(transactions.first)
        foreign.foreignCurrencyAmount = try CurrencyAmount(amountMinor: 1_000, currencyCode: "EUR")
        foreign.foreignCurrencyExchangeRate = "1.0834"
        foreign.transactionDescription = "tab\tnew\nline/slash \u{1}"
        transactions.append(foreign)
        #expect(transactions.count == 5)
        for transaction in transactions {
            #expect(try FinanceBatchSQL.json(transaction) == String(decoding: try JSONCoding.encoder.encode(transaction), as: UTF8.self))
        }
        let account = try #require(LedgerAccounts.settlement("adyen", "USD").financeAccount(identity: context.identity,
                                                                                            openingDate: at))
        #expect(try FinanceBatchSQL.json(account) == String(decoding: try JSONCoding.encoder.encode(account), as: UTF8.self))
        for (booked, available) in [(Int64(5_000), Int64(-20)), (0, 0)] {
            let balance = try FinanceBatchSQL.accountBalance(accountID: account.id, currency: "USD", booked: booked,
                                                             available: available, asOf: at, identity: context.identity)
            #expect(try FinanceBatchSQL.json(balance) == String(decoding: try JSONCoding.encoder.encode(balance), as: UTF8.self))
        }
    }
}
