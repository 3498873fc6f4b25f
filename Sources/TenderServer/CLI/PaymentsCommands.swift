import Foundation
import Payments
import Postgres

/// `tender payments needs-operator|release|settle-refund`: the operator's side of outcomes Tender could not record,
/// and of refunds a processor accepted and confirmed later.
enum PaymentsCommands {
    static let help = """
        usage: tender payments needs-operator
               tender payments release --payment-id ID | --refund-id ID
               tender payments settle-refund --refund-id ID (--succeeded | --declined CODE)

        needs-operator  lists the payments and refunds whose processor outcome could not be recorded
                        TENDER_PAYMENTS_RECORD_ATTEMPTS_MAX times: they stay pending, the resolver leaves
                        them alone, and GET shows needsOperator. Prints JSON with the processor's answer.
        release         after the cause is fixed, hands one back to the resolver, which re-sends it with
                        its own processor key (the processor answers as before) and records the outcome.
        settle-refund   records the processor's later answer for a refund it accepted (status pending with
                        a processorReference, e.g. Adyen's "received"; docs/processor-adyen.md): --succeeded
                        (as Adyen's REFUND notification with success=true) books it in the ledger,
                        --declined CODE (snake_case, at most 64) fails it and frees its amount.
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        switch sub {
        case "needs-operator":
            let args = try Arguments(Array(argv.dropFirst()), options: [])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            struct Item: Encodable {
                let kind: String; let id: String; let merchantId: String; let amountMinor: Int64; let currencyCode: String
                let unrecordedOutcome: String?; let recordFailures: Int; let needsOperatorAt: Date
            }
            let rows = try pool.query("""
                SELECT 'payment' AS kind, payment_id AS id, merchant_id, amount_minor, currency_code, unrecorded_outcome,
                       record_failures, needs_operator_at FROM payments WHERE needs_operator_at IS NOT NULL
                UNION ALL
                SELECT 'refund', refund_id, merchant_id, amount_minor, currency_code, unrecorded_outcome,
                       record_failures, needs_operator_at FROM refunds WHERE needs_operator_at IS NOT NULL
                ORDER BY needs_operator_at
                """).rows.map { row in
                Item(kind: try row.decode("kind"), id: try row.decode("id"), merchantId: try row.decode("merchant_id"),
                     amountMinor: try row.decode("amount_minor"), currencyCode: try row.decode("currency_code"),
                     unrecordedOutcome: try row.decodeIfPresent("unrecorded_outcome"), recordFailures: try row.decode("record_failures"),
                     needsOperatorAt: try row.decode("needs_operator_at"))
            }
            struct Output: Encodable { let items: [Item] }
            KeysCommands.printJSON(Output(items: rows))
            return .success
        case "release":
            let args = try Arguments(Array(argv.dropFirst()), options: ["payment-id", "refund-id"])
            if args.wantsHelp { Console.out(help); return .success }
            try args.expectPositionals(0)
            let paymentId = args.value("payment-id"), refundId = args.value("refund-id")
            guard (paymentId == nil) != (refundId == nil) else { throw UsageError(message: "give exactly one of --payment-id and --refund-id") }
            let (_, pool) = try TenderCLI.openDatabase(environment)
            defer { pool.close() }
            let sql: SQL = paymentId != nil ? """
                UPDATE payments SET needs_operator_at = NULL, record_failures = 0, next_resolve_at = now(), updated_at = now()
                WHERE payment_id = $1 AND needs_operator_at IS NOT NULL AND status = 'pending'
                """ : """
                UPDATE refunds SET needs_operator_at = NULL, record_failures = 0, next_resolve_at = now(), updated_at = now()
                WHERE refund_id = $1 AND needs_operator_at IS NOT NULL AND status = 'pending'
                """
            let id = paymentId ?? refundId ?? ""
            guard try pool.execute(sql, [id]) == 1 else {
                throw TenderError("not_waiting_for_operator", "\(id) is not a pending payment or refund marked for an operator")
            }
            struct Output: Encodable { let id: String; let released: Bool }
            KeysCommands.printJSON(Output(id: id, released: true))
            return .success
        case "settle-refund":
            return try settleRefund(Array(argv.dropFirst()), environment: environment)
        default:
            throw UsageError(message: "unknown subcommand \(sub)")
        }
    }

    static func settleRefund(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["refund-id", "declined"], flags: ["succeeded"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(0)
        let refundId = try args.required("refund-id")
        let confirmation: RefundConfirmation
        switch (args.flag("succeeded"), args.value("declined")) {
        case (true, nil):
            confirmation = .succeeded
        case (false, let code?):
            let snake = code.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f }
            guard (1...64).contains(code.utf8.count), snake else {
                throw UsageError(message: "--declined takes a snake_case code of at most 64 characters")
            }
            confirmation = .declined(code: code)
        default:
            throw UsageError(message: "give exactly one of --succeeded and --declined CODE")
        }
        let (configuration, pool) = try TenderCLI.openDatabase(environment)
        defer { pool.close() }
        guard let refund = try PaymentsService.settleAcceptedRefund(refundId, as: confirmation, pool: pool,
                                                                    subscribers: [FinancePaymentSink(processor: configuration.processor.rawValue)])
        else {
            throw TenderError("refund_not_accepted", "\(refundId) is not a pending refund accepted by the processor")
        }
        struct Output: Encodable { let id: String; let status: String; let processorReference: String?; let declineCode: String? }
        KeysCommands.printJSON(Output(id: refund.refundId, status: refund.status.rawValue, processorReference: refund.processorReference,
                                      declineCode: refund.declineCode))
        return .success
    }
}
