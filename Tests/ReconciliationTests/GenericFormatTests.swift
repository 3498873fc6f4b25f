import Testing
import Reconciliation

@Suite struct GenericFormatTests {
    @Test func parsesLinesWithSignsFromType() throws {
        let text = genericHeader + """
            2024-03-01,B1,payment,pay_1,psp_1,USD,10.00,0.30,9.70
            2024-03-01,B1,refund,pay_1,psp_r1,USD,2.50,0.00,2.50
            2024-03-01,B1,payout,,,USD,-7.20,0.00,-7.20
            2024-03-02,B2,adjustment,,,KWD,-1.234,0.000,-1.234
            2024-03-02,B3,payment,pay_2,,JPY,1500,30,1470

            """
        let result = try lines(text, format: .generic)
        #expect(result.count == 5)
        #expect(result[0].grossMinor == 1000)
        #expect(result[0].feeMinor == 30)
        #expect(result[0].netMinor == 970)
        #expect(result[0].lineNumber == 2)
        #expect(result[0].settlementDate.description == "2024-03-01")
        #expect(result[1].type == .refund)
        #expect(result[1].grossMinor == -250)
        #expect(result[2].netMinor == -720)
        #expect(result[2].paymentId == nil)
        #expect(result[3].grossMinor == -1234)
        #expect(result[4].grossMinor == 1500)
        #expect(result[4].processorReference == nil)
    }

    static let good = "2024-03-01,B1,payment,pay_1,psp_1,USD,10.00,0.30,9.70"

    /// Replaces field `index` of the good line; returns the line and the field's column.
    static func breaking(_ index: Int, with value: String) -> (String, Int) {
        var fields = good.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        fields[index] = value
        let line = fields.joined(separator: ",")
        return (line, column(ofField: index, in: line))
    }

    // One row per rule, each named after the rule it breaks; the bad line is line 3.
    @Test(arguments: [
        ("amount_not_a_number", 6, "1O.00", ReconciliationError.Code.amountInvalid),
        ("amount_two_points", 8, "9.7.0", .amountInvalid),
        ("amount_empty", 7, "", .amountInvalid),
        ("amount_plus_sign", 6, "+10.00", .amountInvalid),
        ("amount_exponent", 6, "1e3", .amountInvalid),
        ("usd_one_decimal", 6, "10.5", .amountWrongDecimals),
        ("usd_no_decimals", 6, "10", .amountWrongDecimals),
        ("usd_three_decimals", 7, "0.300", .amountWrongDecimals),
        ("amount_overflow", 6, "92233720368547758.08", .amountOverflow),
        ("currency_unknown", 5, "XYZ", .currencyUnknown),
        ("currency_lowercase", 5, "usd", .currencyUnknown),
        ("type_unknown", 2, "partial_refund", .typeUnknown),
        // Only Adyen files may carry types Tender does not know; the generic list is closed.
        ("type_unknown_word", 2, "unknown", .typeUnknown),
        ("usd_leading_dot", 6, ".50", .amountInvalid),
        ("date_february_30", 0, "2024-02-30", .dateInvalid),
        ("date_not_leap", 0, "2023-02-29", .dateInvalid),
        ("date_wrong_shape", 0, "01/03/2024", .dateInvalid),
        ("batch_missing", 1, "", .fieldRequired),
    ])
    func rowErrorCarriesLineAndColumn(rule: String, index: Int, value: String,
                                      code: ReconciliationError.Code) {
        let (bad, expectedColumn) = Self.breaking(index, with: value)
        let error = parseError(genericHeader + Self.good + "\n" + bad + "\n", format: .generic)
        #expect(error?.code == code, "\(rule)")
        #expect(error?.line == 3, "\(rule)")
        #expect(error?.column == expectedColumn, "\(rule)")
    }

    @Test func jpyWithDecimalsIsWrongDecimals() {
        let error = parseError(genericHeader + "2024-03-01,B1,payment,p,r,JPY,10.00,0,10\n", format: .generic)
        #expect(error?.code == .amountWrongDecimals)
        #expect(error?.line == 2)
        #expect(error?.column == 31)
    }

    @Test func wrongColumnCount() {
        let short = parseError(genericHeader + "2024-03-01,B1,payment,p,r,USD,1.00,0.00\n", format: .generic)
        #expect(short?.code == .csvWrongColumnCount)
        #expect(short?.line == 2)
        #expect(short?.column == 40)  // the terminator, where net_amount is missing
        let long = parseError(genericHeader + Self.good + ",extra\n", format: .generic)
        #expect(long?.code == .csvWrongColumnCount)
        #expect(long?.column == Self.good.utf8.count + 2)
    }

    @Test func lineNumbersCountEmbeddedNewlines() {
        let text = genericHeader + "2024-03-01,\"B\n1\",payment,p,r,USD,1.00,0.00,1.00\n"
            + "2024-03-01,B1,bogus,p,r,USD,1.00,0.00,1.00\n"
        let error = parseError(text, format: .generic)
        #expect(error?.code == .typeUnknown)
        #expect(error?.line == 4)
        #expect(error?.column == 15)
    }

    @Test func headerMustMatchContractExactly() {
        let typo = parseError(genericHeader.replacingOccurrences(of: "fee_amount", with: "fees") + Self.good,
                              format: .generic)
        #expect(typo?.code == .headerInvalid)
        #expect(typo?.line == 1)
        #expect(typo?.field == "fee_amount")
        let extra = parseError(genericHeader.dropLast() + ",memo\n", format: .generic)
        #expect(extra?.code == .headerInvalid)
        #expect(parseError("", format: .generic)?.code == .csvEmpty)
    }

    @Test func headerOnlyFileHasNoLines() throws {
        #expect(try lines(genericHeader, format: .generic).isEmpty)
    }
}
