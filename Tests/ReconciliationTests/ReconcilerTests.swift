import Foundation
import Testing
import Reconciliation

@Suite struct ReconcilerTests {
    static let now = Date(timeIntervalSince1970: 1_710_000_000)
    static let day: TimeInterval = 86_400

    static func payment(_ id: String, _ amountMinor: Int64, _ currency: String = "USD",
                        reference: String? = nil, status: RecordedStatus = .pending,
                        age: TimeInterval = 2 * day) -> RecordedPayment {
        RecordedPayment(paymentId: id, processorReference: reference, amountMinor: amountMinor,
                        currencyCode: currency, status: status, createdAt: now.addingTimeInterval(-age))
    }

    static let payments = [
        payment("pay_match", 1000), payment("pay_amount", 2000), payment("pay_cur", 500, "EUR"),
        payment("pay_ref", 400, reference: "psp_byref"), payment("pay_booked", 800, status: .booked),
        payment("pay_old", 100, age: 10 * day), payment("pay_new", 100, age: 1 * day),
        payment("pay_rejected", 100, status: .rejected, age: 10 * day),
    ]
    static let refunds = [
        RecordedRefund(refundId: "ref_1", paymentId: "pay_booked", processorReference: "psp_r1",
                       amountMinor: 300, currencyCode: "USD", status: .pending, createdAt: now),
    ]

    static func report(payout: String = "34.20") -> String {
        genericHeader + """
            2024-03-01,B1,payment,pay_match,psp_m,USD,10.00,0.30,9.70
            2024-03-01,B1,payment,pay_amount,psp_a,USD,19.00,0.00,19.00
            2024-03-01,B1,payment,pay_cur,psp_c,USD,5.00,0.00,5.00
            2024-03-01,B1,payment,pay_ghost,psp_g,USD,7.00,0.00,7.00
            2024-03-01,B1,payment,pay_match,psp_m,USD,10.00,0.30,9.70
            2024-03-01,B1,payment,,psp_byref,USD,4.00,0.00,4.00
            2024-03-01,B1,refund,pay_booked,psp_r1,USD,3.00,0.00,3.00
            2024-03-01,B1,fee,,,USD,0.00,0.50,-0.50
            2024-03-01,B1,chargeback,pay_booked,psp_cb,USD,-8.00,0.00,-8.00
            2024-03-01,B1,adjustment,,,USD,1.00,0.00,1.00
            2024-03-01,B1,payout,,,USD,\(payout),0.00,\(payout)

            """
    }

    static func run(_ text: String = report(), payments: [RecordedPayment] = payments,
                    refunds: [RecordedRefund] = refunds, configuration: ReconciliationConfiguration = ReconciliationConfiguration())
        throws -> ReconciliationReport {
        var reader = SettlementLineReader(format: .generic, source: ByteArraySource(Array(text.utf8)))
        var reconciler = Reconciler(payments: payments, refunds: refunds, configuration: configuration)
        try reconciler.addAll(from: &reader)
        return reconciler.report(now: now)
    }

    func item(_ report: ReconciliationReport, line: Int) -> ReconciliationItem? {
        report.items.first { $0.lineNumber == line }
    }

    @Test func oneLinePerCategory() throws {
        let report = try Self.run()
        var expected: [String: Int] = [:]
        for category in ReconciliationCategory.allCases { expected[category.rawValue] = 1 }
        expected["matched"] = 2
        #expect(report.counts == expected)
        #expect(report.lineCount == 11)
        #expect(item(report, line: 2)?.category == .matched)
        #expect(item(report, line: 3)?.category == .amountMismatch)
        #expect(item(report, line: 3)?.expectedMinor == 2000)
        #expect(item(report, line: 3)?.actualMinor == 1900)
        #expect(item(report, line: 3)?.differenceMinor == -100)
        #expect(item(report, line: 4)?.category == .currencyMismatch)
        #expect(item(report, line: 4)?.expectedCurrencyCode == "EUR")
        #expect(item(report, line: 5)?.category == .missingInLedger)
        #expect(item(report, line: 6)?.category == .duplicate)
        #expect(item(report, line: 7)?.category == .matched)
        #expect(item(report, line: 7)?.paymentId == "pay_ref")
        #expect(item(report, line: 8)?.category == .refund)
        #expect(item(report, line: 8)?.refundId == "ref_1")
        #expect(item(report, line: 9)?.category == .fee)
        #expect(item(report, line: 10)?.category == .chargeback)
        #expect(item(report, line: 11)?.category == .adjustment)
        #expect(item(report, line: 12)?.category == .payout)
        let absent = report.items.filter { $0.lineNumber == nil }
        #expect(absent.map(\.paymentId) == ["pay_old", "pay_new"])
        #expect(absent.map(\.category) == [.missingInSettlement, .awaitingSettlement])
    }

    @Test func effectsOnlyForWhatSettled() throws {
        let effects = try Self.run().effects
        let summary = effects.map { "\($0.lineNumber) \($0.kind.rawValue) \($0.amountMinor) \($0.creditDebitIndicator)" }
        #expect(summary == [
            "2 book_payment 1000 credit", "2 fee 30 debit", "7 book_payment 400 credit",
            "8 book_refund 300 debit", "9 fee 50 debit", "10 chargeback 800 debit",
            "11 adjustment 100 credit", "12 payout 3420 debit",
        ])
        #expect(effects[0].paymentId == "pay_match")
        #expect(effects[0].postedDate.description == "2024-03-01")
        #expect(effects[0].transactionType == nil)
        #expect(effects[5].transactionType == "adjustment")
        #expect(effects[7].transactionType == "transfer")
        #expect(Set(effects.map(\.key)).count == effects.count)
    }

    @Test func batchBalancedAndImbalanced() throws {
        // 9.70 + 19.00 + 5.00 + 7.00 + 4.00 − 3.00 − 0.50 − 8.00 + 1.00 = 34.20 (the repeat excluded).
        let balanced = try Self.run().batches
        #expect(balanced == [BatchBalance(batchId: "B1", currencyCode: "USD", linesNetMinor: 3420,
                                          payoutMinor: 3420, differenceMinor: 0, payoutLines: 1,
                                          balanced: true)])
        let short = try Self.run(Self.report(payout: "34.00")).batches
        #expect(short.first?.differenceMinor == -20)
        #expect(short.first?.balanced == false)
    }

    @Test func batchWithoutPayoutIsNotBalanced() throws {
        let text = genericHeader + "2024-03-01,B9,payment,pay_match,psp_m,USD,10.00,0.00,10.00\n"
        let batch = try Self.run(text).batches.first
        #expect(batch?.payoutLines == 0)
        #expect(batch?.balanced == false)
        #expect(batch?.differenceMinor == -1000)
    }

    @Test(arguments: [
        ("10.01", Int64(0), ReconciliationCategory.amountMismatch),
        ("10.01", Int64(1), .matched),
        ("9.99", Int64(1), .matched),
        ("10.02", Int64(1), .amountMismatch),
        ("10.00", Int64(0), .matched),
    ])
    func tolerance(settled: String, toleranceMinor: Int64, category: ReconciliationCategory) throws {
        let text = genericHeader + "2024-03-01,B1,payment,pay_match,,USD,\(settled),0.00,\(settled)\n"
        let report = try Self.run(text, configuration: ReconciliationConfiguration(amountToleranceMinor: toleranceMinor))
        #expect(item(report, line: 2)?.category == category)
    }

    @Test func settlementLagBoundary() throws {
        let lag = ReconciliationConfiguration().settlementLagSeconds
        let payments = [Self.payment("at_lag", 100, age: TimeInterval(lag)),
                        Self.payment("past_lag", 100, age: TimeInterval(lag + 1))]
        let report = try Self.run(genericHeader, payments: payments, refunds: [])
        #expect(report.items.map(\.paymentId) == ["past_lag", "at_lag"])
        #expect(report.items.map(\.category) == [.missingInSettlement, .awaitingSettlement])
    }

    @Test func unsettledRefundAwaitsThenGoesMissing() throws {
        let refund = RecordedRefund(refundId: "ref_late", paymentId: "pay_booked", amountMinor: 50,
                                    currencyCode: "USD", status: .pending,
                                    createdAt: Self.now.addingTimeInterval(-30 * Self.day))
        let report = try Self.run(genericHeader, payments: [], refunds: [refund])
        #expect(report.items.map(\.refundId) == ["ref_late"])
        #expect(report.items.map(\.category) == [.missingInSettlement])
    }

    @Test func refundWithWrongAmountIsAMismatch() throws {
        let text = genericHeader + "2024-03-01,B1,refund,pay_booked,psp_r1,USD,-3.10,0.00,-3.10\n"
        let report = try Self.run(text)
        #expect(item(report, line: 2)?.category == .amountMismatch)
        #expect(item(report, line: 2)?.differenceMinor == 10)
        #expect(report.effects.isEmpty)
    }

    @Test func rejectedPaymentThatSettledNeedsAHuman() throws {
        let text = genericHeader + "2024-03-01,B1,payment,pay_rejected,,USD,1.00,0.00,1.00\n"
        let report = try Self.run(text)
        #expect(item(report, line: 2)?.category == .missingInLedger)
        #expect(item(report, line: 2)?.reason == "payment_rejected")
        #expect(report.effects.isEmpty)
    }

    @Test func samePaymentSettledTwiceUnderDifferentReferences() throws {
        let text = genericHeader + "2024-03-01,B1,payment,pay_match,psp_1,USD,10.00,0.00,10.00\n"
            + "2024-03-01,B1,payment,pay_match,psp_2,USD,10.00,0.00,10.00\n"
        let report = try Self.run(text)
        #expect(item(report, line: 3)?.category == .duplicate)
        #expect(item(report, line: 3)?.reason == "payment_already_matched")
        #expect(report.effects.filter { $0.kind == .bookPayment }.count == 1)
    }

    @Test func aPaymentSettledByAnEarlierReportIsADuplicateUnlessItIsTheSameLine() throws {
        let line = "2024-03-01,B1,payment,pay_twice,,USD,10.00,0.00,10.00\n"
        let sameLineKey = "generic|B1|payment|pay_twice||USD"
        func payment(bookedBy: String?) -> RecordedPayment {
            RecordedPayment(paymentId: "pay_twice", amountMinor: 1_000, currencyCode: "USD", status: .booked,
                            createdAt: Self.now, bookedByLineKey: bookedBy)
        }
        // Booked by this very line (a revision of its batch): matched again, its effect key unchanged.
        let revision = try Self.run(genericHeader + line, payments: [payment(bookedBy: sameLineKey)], refunds: [])
        #expect(item(revision, line: 2)?.category == .matched)
        #expect(revision.effects.map(\.key) == ["recon|book_payment|" + sameLineKey])
        // Booked by a line of another batch: a second settlement of one payment needs a human.
        let other = try Self.run(genericHeader + line, payments: [payment(bookedBy: "generic|B0|payment|pay_twice||USD")],
                                 refunds: [])
        #expect(item(other, line: 2)?.category == .duplicate)
        #expect(item(other, line: 2)?.reason == "payment_already_settled")
        #expect(other.effects.isEmpty)
    }

    /// Sorted keys, `/` unescaped: how the shell encodes a report (`JSONCoding.encoder`).
    static func canonical(_ report: ReconciliationReport) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(report))
    }

    @Test func runningTwiceGivesIdenticalBytes() throws {
        let first = try Self.canonical(Self.run())
        let second = try Self.canonical(Self.run())
        let shuffled = try Self.canonical(Self.run(payments: Self.payments.reversed()))
        #expect(first == second)
        #expect(first == shuffled)
        let text = String(decoding: first, as: UTF8.self)
        #expect(text.hasPrefix("{\"batches\":[{\"balanced\":true,"))
        #expect(text.contains("\"counts\":{\"adjustment\":1,\"amount_mismatch\":1,"))
    }

    @Test func effectKeysDependOnlyOnTheLine() throws {
        // The same lines in another order give the same keys for the same effects.
        let body = Self.report().split(separator: "\n").dropFirst()
        let reordered = genericHeader + body.reversed().joined(separator: "\n") + "\n"
        let original = Dictionary(try Self.run().effects.map { ($0.key, $0.amountMinor) },
                                  uniquingKeysWith: { first, _ in first })
        let moved = Dictionary(try Self.run(reordered).effects.map { ($0.key, $0.amountMinor) },
                               uniquingKeysWith: { first, _ in first })
        #expect(original == moved)
    }
}

@Suite struct IdempotencyTests {
    @Test func revisionDiffByNaturalKey() throws {
        let old = try lines(genericHeader + """
            2024-03-01,B1,payment,pay_a,psp_a,USD,10.00,0.30,9.70
            2024-03-01,B1,payment,pay_b,psp_b,USD,20.00,0.30,19.70
            2024-03-01,B1,payment,pay_c,psp_c,USD,30.00,0.30,29.70

            """, format: .generic)
        let new = try lines(genericHeader + """
            2024-03-01,B1,payment,pay_d,psp_d,USD,40.00,0.30,39.70
            2024-03-01,B1,payment,pay_a,psp_a,USD,10.00,0.30,9.70
            2024-03-01,B1,payment,pay_b,psp_b,USD,21.00,0.30,20.70

            """, format: .generic)
        let diff = RevisionDiff(old: old, new: new)
        #expect(diff.added.map(\.paymentId) == ["pay_d"])
        #expect(diff.removed.map(\.paymentId) == ["pay_c"])
        #expect(diff.changed.map(\.new.paymentId) == ["pay_b"])
        #expect(diff.changed.first?.old.grossMinor == 2000)
        #expect(diff.changed.first?.new.grossMinor == 2100)
        // pay_a moved from line 2 to line 3: position is not content.
        #expect(RevisionDiff(old: old, new: old).isEmpty)
    }

    @Test func duplicateDetectorFlagsOnlyTheRepeat() throws {
        let parsed = try lines(genericHeader + """
            2024-03-01,B1,fee,,,USD,0.00,0.50,-0.50
            2024-03-01,B1,fee,,,USD,0.00,0.70,-0.70
            2024-03-01,B1,fee,,,USD,0.00,0.50,-0.50

            """, format: .generic)
        var detector = DuplicateLineDetector()
        #expect(parsed.map { detector.isRepeat($0) } == [false, false, true])
    }

    @Test func fileIdentityUsesTheShellsHash() {
        let bytes = Array("abc".utf8)
        let identity = SettlementFileIdentity(format: .generic, bytes: bytes) { input in
            [UInt8(input.count), 0xAB, 0x0F]
        }
        #expect(identity.digestHex == "03ab0f")
        #expect(identity.key == "generic:03ab0f")
        #expect(SettlementFileIdentity(format: .adyenSDR, digest: [0xFF]).key == "adyen-sdr:ff")
    }
}
