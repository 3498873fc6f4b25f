import Testing
@testable import FinanceStore

@Suite struct QueryTests {
    func parse(_ pairs: [(String, String)]) throws -> TransactionQuery {
        try TransactionQuery.parse(pairs.map { QueryPair($0.0, $0.1) })
    }

    @Test func badParametersAreRefusedByName() {
        let cases: [([(String, String)], String)] = [
            ([("stauts", "booked")], "stauts"),
            ([("status", "booked"), ("status", "pending")], "status"),
            ([("status", "")], "status"),
            ([("status", "settled")], "status"),
            ([("status", "booked,")], "status"),
            ([("transactionType", "purchase")], "transactionType"),
            ([("creditDebitIndicator", "CREDIT")], "creditDebitIndicator"),
            ([("accountID", "not-a-uuid")], "accountID"),
            ([("transactionDateFrom", "yesterday")], "transactionDateFrom"),
            ([("transactionDateFrom", "2026-02-02T00:00:00Z"), ("transactionDateTo", "2026-02-01T00:00:00Z")], "transactionDateTo"),
            ([("limit", "0")], "limit"), ([("limit", "501")], "limit"), ([("limit", "-1")], "limit"),
            ([("limit", "+5")], "limit"), ([("limit", "99999999999999999999")], "limit"),
            ([("offset", "10001")], "offset"),
            ([("sort", "amount:sideways")], "sort"), ([("sort", "merchantName")], "sort"),
            ([("sort", "id,id")], "sort"), ([("sort", "a,b,c,d,e")], "sort"),
            ([("merchantCategoryCode", "58x2")], "merchantCategoryCode"),
            ([("status", Array(repeating: "booked", count: 33).joined(separator: ","))], "status"),
        ]
        for (pairs, field) in cases {
            let error = financeError { _ = try parse(pairs) }
            #expect(error?.code == .queryParameterInvalid, "\(pairs)")
            #expect(error?.field == field, "\(pairs)")
        }
    }

    @Test func limitsAreAcceptedAtTheirBoundary() throws {
        #expect(try parse([("limit", "500")]).limit == 500)
        #expect(try parse([("limit", "1")]).limit == 1)
        #expect(try parse([]).limit == 100)
        #expect(try parse([("offset", "10000")]).offset == 10_000)
        #expect(try parse([("status", Array(repeating: "booked", count: 32).joined(separator: ","))]).statuses == [.booked])
    }

    static func sample() throws -> [Transaction] {
        var ledger = FinanceLedger(context: makeContext())
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p1", money: eur(1_000), at: ts(100)))
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p2", money: eur(2_000), at: ts(100)))
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p3", money: eur(3_000), at: ts(300)))
        _ = try ledger.apply(.refundCreated(refundID: "r1", paymentID: "p1", money: eur(500), at: ts(200)))
        _ = try ledger.apply(.fee(feeID: "f1", paymentID: "p1", money: eur(10), at: ts(400)))
        _ = try ledger.apply(.paymentBooked(paymentID: "p2", at: ts(500)))
        _ = try ledger.apply(.paymentSucceeded(paymentID: "s1", money: eur(7_000, "stripe"), at: ts(100)))
        return ledger.transactions
    }

    @Test func filtersSortAndPage() throws {
        let all = try Self.sample()
        let adyen = makeContext().identity.id("account", "psp:adyen:EUR")
        let byDesc = Dictionary(uniqueKeysWithValues: all.map { ($0.originalTransactionDescription, $0) })
        func names(_ list: [Transaction]) -> [String] { list.map(\.originalTransactionDescription) }

        var q = try parse([("accountID", adyen.description), ("status", "authorized,booked"),
                           ("sort", "transactionDate:asc"), ("limit", "10")])
        let ids = [try #require(byDesc["payment_succeeded p1"]).id, try #require(byDesc["payment_succeeded p2"]).id].sorted()
        let at100 = ids.map { id in all.first { $0.id == id }?.originalTransactionDescription ?? "" }
        // Same transactionDate: the id tie-breaker decides, ascending.
        #expect(names(q.apply(to: all)) == at100 + ["payment_succeeded p3", "fee f1 payment p1"])
        #expect(q.sort.last == TransactionSort(.id, .asc))

        q = try parse([("creditDebitIndicator", "debit"), ("sort", "amount:desc")])
        #expect(names(q.apply(to: all)) == ["refund r1 payment p1", "fee f1 payment p1"])

        q = try parse([("transactionType", "pointOfSale"), ("transactionDateFrom", ts(100).description),
                       ("transactionDateTo", ts(300).description), ("sort", "amount:asc")])
        #expect(names(q.apply(to: all)) == ["payment_succeeded p1", "payment_succeeded p2", "payment_succeeded s1"])

        q = try parse([("sort", "postedDate:desc,amount:asc")])
        #expect(names(q.apply(to: all)).prefix(2) == ["payment_succeeded p2", "fee f1 payment p1"])  // nulls last

        // limit and offset walk the same total order without gaps or repeats.
        let full = try parse([("sort", "transactionDate:desc")]).apply(to: all)
        var paged: [Transaction] = []
        for offset in stride(from: 0, to: 9, by: 2) {
            paged += try parse([("sort", "transactionDate:desc"), ("limit", "2"), ("offset", String(offset))]).apply(to: all)
        }
        #expect(paged == full)
        #expect(full.count == 6)
        #expect(try parse([("offset", "6")]).apply(to: all).isEmpty)
        #expect(try parse([("offset", "5")]).apply(to: all).count == 1)
    }

    @Test func sqlPlanBindsEveryValueInOrder() throws {
        let account = makeContext().identity.id("account", "psp:adyen:EUR")
        let q = try parse([("accountID", account.description), ("status", "booked,pending"), ("transactionType", "fee"),
                           ("creditDebitIndicator", "debit"), ("transactionDateFrom", "2026-01-01T00:00:00Z"),
                           ("sort", "postedDate:desc"), ("limit", "20"), ("offset", "40")])
        let plan = q.sqlPlan(firstParameter: 2)
        #expect(plan.whereSQL == "account_id = $2 AND status = ANY($3::text[]) AND transaction_type = ANY($4::text[])"
            + " AND credit_debit_indicator = $5 AND transaction_date >= $6::timestamptz")
        #expect(plan.orderBySQL == "posted_date DESC NULLS LAST, id ASC")
        #expect(plan.bindings == [.uuid(account), .textArray(["booked", "pending"]), .textArray(["fee"]), .text("debit"),
                                  .timestamp(try FinanceTimestamp(parsing: "2026-01-01T00:00:00Z"))])
        #expect((plan.limit, plan.offset) == (20, 40))
        #expect(TransactionQuery().sqlPlan(firstParameter: 2).whereSQL == "TRUE")
    }

    @Test func accountQuery() throws {
        var ledger = FinanceLedger(context: makeContext())
        _ = try ledger.apply(.paymentSucceeded(paymentID: "p1", money: eur(1), at: ts(0)))
        _ = try ledger.apply(.feeInvoiced(invoiceID: "i1", money: eur(1), at: ts(0)))
        let accounts = ledger.financeAccounts
        #expect(try AccountQuery.parse([QueryPair("kind", "liability")]).apply(to: accounts).map(\.displayName)
                == ["Adyen EUR fees payable"])
        #expect(try AccountQuery.parse([]).apply(to: accounts).map(\.displayName) == ["Adyen EUR balance", "Adyen EUR fees payable"])
        #expect(financeError { _ = try AccountQuery.parse([QueryPair("currencyCode", "EURO")]) }?.field == "currencyCode")
        #expect(financeError { _ = try AccountQuery.parse([QueryPair("limit", "501")]) }?.code == .queryParameterInvalid)
        #expect(try AccountQuery.parse([QueryPair("kind", "asset")]).sqlPlan(firstParameter: 2).whereSQL == "kind = $2")
    }

    @Test func restrictedMerchantIsRefused() {
        #expect(financeError { try FinanceAccess.check(financeDataEnabled: false) }?.code == .dataRestricted)
        #expect(financeError { try FinanceAccess.check(financeDataEnabled: true) } == nil)
    }
}
