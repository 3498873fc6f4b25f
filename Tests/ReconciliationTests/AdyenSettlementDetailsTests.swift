import Foundation
import Testing
import Reconciliation

@Suite struct AdyenSettlementDetailsTests {
    static let header = "Company Account,Merchant Account,Psp Reference,Merchant Reference,Payment Method,"
        + "Creation Date,TimeZone,Type,Modification Reference,Gross Currency,Gross Debit (GC),"
        + "Gross Credit (GC),Exchange Rate,Net Currency,Net Debit (NC),Net Credit (NC),Commission (NC),"
        + "Markup (NC),Scheme Fees (NC),Interchange (NC),Payment Method Variant,"
        + "Modification Merchant Reference,Batch Number,Booking Date\n"

    /// One row; amounts in the order gross debit, gross credit, net debit, net credit.
    static func row(psp: String, ref: String, type: String, mod: String, gross: (String, String),
                    net: (String, String), fees: [String] = ["", "", "", ""], variant: String = "",
                    modRef: String = "", grossCurrency: String = "EUR", booking: String = "") -> String {
        let fields = ["Tender", "TenderEU", psp, ref, "visa", "2024-03-01 10:15:00", "CET", type, mod, grossCurrency,
         gross.0, gross.1, "1", "EUR", net.0, net.1] + fees + [variant, modRef, "42", booking]
        return fields.joined(separator: ",")
    }

    @Test func everyJournalTypeIsUnderstood() throws {
        var text = Self.header
        var expected: [(String, SettlementLineType)] = []
        for (journal, type) in AdyenJournalType.mapping.sorted(by: { $0.key < $1.key }) {
            text += Self.row(psp: "PSP\(journal)", ref: "pay_\(journal)", type: journal, mod: "MOD\(journal)",
                             gross: ("", "1.00"), net: ("", "1.00")) + "\n"
            expected.append((journal, type))
        }
        let result = try lines(text, format: .adyenSDR)
        #expect(result.count == expected.count)
        #expect(result.count >= 19)
        for (line, (journal, type)) in zip(result, expected) {
            #expect(line.journalType == journal)
            #expect(line.type == type, "\(journal)")
            #expect(line.batchId == "TenderEU:42")
        }
        // The types named in docs/finance-store.md §4.1 and §4.4.
        for journal in ["Settled", "Refunded", "RefundedReversed", "Fee", "MiscCosts", "PaymentCost",
                        "Chargeback", "SecondChargeback", "ChargebackReversed", "MerchantPayout",
                        "Balancetransfer", "DepositCorrection", "InvoiceDeduction", "ManualCorrected"] {
            #expect(AdyenJournalType.mapping[journal] != nil, "\(journal)")
        }
    }

    @Test func settledApplePayRowWithFees() throws {
        let text = Self.header
            + Self.row(psp: "8515131751004933", ref: "pay_1", type: "Settled", mod: "8515131751004934",
                       gross: ("", "100.00"), net: ("", "98.8"), fees: ["0.12", "0.08", "0.2", "0.80"],
                       variant: "visa_applepay", booking: "2024-03-02 06:00:00") + "\n"
            + Self.row(psp: "", ref: "", type: "MerchantPayout", mod: "payout-42", gross: ("", ""),
                       net: ("98.80", ""), grossCurrency: "") + "\n"
            + Self.row(psp: "8515131751004999", ref: "pay_1", type: "Refunded", mod: "8515131751005000",
                       gross: ("30.00", ""), net: ("30.00", ""), variant: "mc_applepay", modRef: "ref_1") + "\n"
        let result = try lines(text, format: .adyenSDR)
        let settled = result[0]
        #expect(settled.type == .payment)
        #expect(settled.paymentId == "pay_1")
        #expect(settled.processorReference == "8515131751004933")
        #expect(settled.grossMinor == 10_000)
        #expect(settled.netMinor == 9_880)
        #expect(settled.feeMinor == 120)
        #expect(settled.isApplePay)
        #expect(settled.settlementDate.description == "2024-03-02")
        let payout = result[1]
        #expect(payout.type == .payout)
        #expect(payout.netMinor == -9_880)
        #expect(payout.currencyCode == "EUR")
        #expect(!payout.isApplePay)
        #expect(payout.settlementDate.description == "2024-03-01")
        let refund = result[2]
        #expect(refund.grossMinor == -3_000)
        #expect(refund.refundId == "ref_1")
        #expect(refund.isApplePay)
    }

    @Test func columnsAreFoundByNameInAnyOrder() throws {
        // Reverse every column; values follow.
        let names = Self.header.dropLast().split(separator: ",", omittingEmptySubsequences: false)
        let values = Self.row(psp: "P1", ref: "pay_9", type: "Settled", mod: "M1", gross: ("", "5.00"),
                              net: ("", "5.00")).split(separator: ",", omittingEmptySubsequences: false)
        let text = names.reversed().joined(separator: ",") + "\n" + values.reversed().joined(separator: ",") + "\n"
        let result = try lines(text, format: .adyenSDR)
        #expect(result.first?.paymentId == "pay_9")
        #expect(result.first?.grossMinor == 500)
    }

    @Test func unknownJournalTypeIsAReportedLineNotARefusal() throws {
        let row = Self.row(psp: "P", ref: "r", type: "Mystery", mod: "M", gross: ("", "1.00"), net: ("", "1.00"))
        let result = try lines(Self.header + row + "\n", format: .adyenSDR)
        #expect(result.count == 1)
        #expect(result.first?.type == .unknown)
        #expect(result.first?.journalType == "Mystery")
        let report = Reconciler.reconcile(lines: result, payments: [], now: Date(timeIntervalSince1970: 0))
        #expect(report.items.first?.category == .adjustment)
        #expect(report.items.first?.reason == "journal_type_unknown")
        #expect(report.effects.isEmpty)
    }

    @Test func anEmptyTypeIsStillRefused() {
        let row = Self.row(psp: "P", ref: "r", type: "", mod: "M", gross: ("", "1.00"), net: ("", "1.00"))
        let error = parseError(Self.header + row + "\n", format: .adyenSDR)
        #expect(error?.code == .fieldRequired)
        #expect(error?.line == 2)
        #expect(error?.column == column(ofField: 7, in: row))
    }

    @Test func tooManyDecimalsAndUnknownCurrency() {
        let decimals = Self.row(psp: "P", ref: "r", type: "Settled", mod: "M", gross: ("", "1.005"), net: ("", "1.00"))
        let error = parseError(Self.header + decimals + "\n", format: .adyenSDR)
        #expect(error?.code == .amountWrongDecimals)
        #expect(error?.column == column(ofField: 11, in: decimals))
        let currency = Self.row(psp: "P", ref: "r", type: "Settled", mod: "M", gross: ("", "1.00"),
                                net: ("", "1.00"), grossCurrency: "EURO")
        #expect(parseError(Self.header + currency + "\n", format: .adyenSDR)?.code == .currencyUnknown)
    }

    @Test func missingRequiredColumnIsHeaderInvalid() {
        let header = Self.header.replacingOccurrences(of: "Batch Number,", with: "")
        let error = parseError(header, format: .adyenSDR)
        #expect(error?.code == .headerInvalid)
        #expect(error?.field == "Batch Number")
    }

    @Test func badCreationDate() {
        let row = Self.row(psp: "P", ref: "r", type: "Settled", mod: "M", gross: ("", "1.00"), net: ("", "1.00"))
            .replacingOccurrences(of: "2024-03-01 10:15:00", with: "2024-13-01 10:15:00")
        let error = parseError(Self.header + row + "\n", format: .adyenSDR)
        #expect(error?.code == .dateInvalid)
        #expect(error?.column == column(ofField: 5, in: row))
    }
}

/// Amounts as Adyen writes them (`FractionDigitsRule.atMost`), one row per shape.
@Suite struct AdyenAmountTests {
    static let cases: [(text: String, minor: Int64?)] = [
        (".11", 11), ("52", 5_200), ("98.8", 9_880), ("0.05", 5), (".5", 50), ("-.5", -50), ("100", 10_000),
        (".", nil), ("1.", nil), (".123", nil), ("1..2", nil), ("+.5", nil), ("..5", nil),
    ]

    @Test func adyenAmountShapes() throws {
        for (text, minor) in Self.cases {
            let row = AdyenSettlementDetailsTests.row(psp: "P", ref: "r", type: "Settled", mod: "M",
                                                      gross: ("", text), net: ("", "1.00"))
            let text = AdyenSettlementDetailsTests.header + row + "\n"
            if let minor {
                #expect(try lines(text, format: .adyenSDR).first?.grossMinor == minor, "\(text)")
            } else {
                #expect(parseError(text, format: .adyenSDR) != nil, "\(text)")
            }
        }
    }

    @Test func anEmptyAmountIsAbsentAndANetOnlyRowIsInTheNetCurrency() throws {
        // Gross Currency EUR, nothing in the gross columns, 1.25 in Net Debit: USD money.
        var row = AdyenSettlementDetailsTests.row(psp: "", ref: "", type: "Fee", mod: "Transaction Fees",
                                                  gross: ("", ""), net: ("1.25", ""), grossCurrency: "EUR")
        row = row.replacingOccurrences(of: ",1,EUR,1.25", with: ",,USD,1.25")
        let line = try #require(try lines(AdyenSettlementDetailsTests.header + row + "\n", format: .adyenSDR).first)
        #expect(line.currencyCode == "USD")
        #expect(line.netCurrencyCode == "USD")
        #expect(line.grossMinor == -125)
        #expect(line.netMinor == -125)
    }

    @Test func typesAreComparedWithoutLetterCase() throws {
        for written in ["MERCHANTPAYOUT", "merchantpayout", "MerchantPayout", "BalanceTransfer"] {
            let row = AdyenSettlementDetailsTests.row(psp: "", ref: "", type: written, mod: "TX1", gross: ("", ""),
                                                      net: ("1.00", ""))
            let line = try #require(try lines(AdyenSettlementDetailsTests.header + row + "\n", format: .adyenSDR).first)
            #expect(line.type == (written == "BalanceTransfer" ? .adjustment : .payout), "\(written)")
            // Adyen's spelling, so the line's identity does not depend on the letter case of the file.
            #expect(line.journalType == (written == "BalanceTransfer" ? "Balancetransfer" : "MerchantPayout"))
        }
    }
}
