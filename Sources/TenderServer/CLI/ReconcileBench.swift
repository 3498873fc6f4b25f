import Foundation
import Reconciliation

/// `tender bench reconcile FILE` (scripts/bench-reconcile.sh's file; no database): one stage of a
/// settlement import on the calling thread, for callgrind and CPU time per line. Stages add up:
/// `csv` (records), `lines` (+ format parsing), `parser` (+ line JSON and batch digests: the parser
/// thread's work), `match` (+ matching against generated payments and the item chunks' JSON).
enum ReconcileBench {
    static let help = """
        usage: tender bench reconcile FILE [--stage csv|lines|parser|match] [--format generic|adyen-sdr]
                                           [--payments N]
        Prints lines, CPU seconds and lines per CPU second of the stage. --payments N generates the
        recorded payments the benchmark's ledger holds (pay_<24 digits>, psp_N, 1000 + N % 9000 USD).
        """

    static func run(_ argv: [String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["stage", "format", "payments"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(1)
        let stage = args.value("stage") ?? "parser"
        guard ["csv", "lines", "parser", "match"].contains(stage) else {
            throw UsageError(message: "--stage must be csv, lines, parser or match")
        }
        guard let format = SettlementReportFormat(rawValue: args.value("format") ?? "generic") else {
            throw UsageError(message: "--format must be generic or adyen-sdr")
        }
        guard let payments = Int(args.value("payments") ?? "100000"), payments >= 0 else {
            throw UsageError(message: "--payments must be a whole number")
        }
        guard let data = FileManager.default.contents(atPath: args.positionals[0]) else {
            throw TenderError("file_unreadable", "cannot open \(args.positionals[0])")
        }
        let source = ByteArraySource([UInt8](data), chunkBytes: ReconcileCommand.chunkBytes)
        let recorded = stage == "match" ? generatedPayments(payments) : []
        let started = BenchCommands.threadCPUSeconds()
        let lines = try measure(stage, format: format, source: source, payments: recorded)
        let seconds = BenchCommands.threadCPUSeconds() - started
        Console.out(String(format: "reconcile_bench stage=%@ lines=%d cpu_s=%.3f lines_per_cpu_s=%.0f",
                           stage, lines, seconds, Double(lines) / max(seconds, 1e-9)))
        return .success
    }

    private static func measure(_ stage: String, format: SettlementReportFormat, source: ByteArraySource,
                                payments: [RecordedPayment]) throws -> Int {
        var lines = 0
        switch stage {
        case "csv":
            var csv = CSVReader(source: source)
            while try csv.next() != nil { lines += 1 }
            return max(lines - 1, 0)
        case "lines":
            var reader = SettlementLineReader(format: format, source: source)
            while try reader.next() != nil { lines += 1 }
            return lines
        default:
            break
        }
        var parser = ParserStage(reader: SettlementLineReader(format: format, source: source),
                                 batchLines: SettlementReportStore.flushLines)
        var reconciler = Reconciler(payments: payments, collectsEffects: false)
        var writer = ItemChunkWriter(reportId: "sr_bench")
        var written = 0
        while true {
            var batch = parser.newBatch()
            try parser.fill(&batch)
            lines += batch.lines.count
            if stage == "match" {
                for line in batch.lines { reconciler.add(line) }
                try writer.add(items: reconciler.drain().items, lines: batch) { _, chunk in written += chunk.json.text.utf8.count }
            }
            if batch.lines.count < SettlementReportStore.flushLines { break }
        }
        for hasher in parser.finishDigests().values { _ = hasher.finalize() }
        return lines
    }

    private static func generatedPayments(_ count: Int) -> [RecordedPayment] {
        let createdAt = Date(timeIntervalSince1970: 1_709_251_200)
        return (1...max(count, 1)).map { g in
            let digits = String(g)
            return RecordedPayment(paymentId: "pay_" + String(repeating: "0", count: max(0, 24 - digits.count)) + digits,
                                   processorReference: "psp_\(g)", amountMinor: Int64(1000 + g % 9000),
                                   currencyCode: "USD", status: .pending, createdAt: createdAt)
        }
    }
}
