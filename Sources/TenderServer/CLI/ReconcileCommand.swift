import Crypto
import Foundation
import Observability
import Reconciliation

/// `tender reconcile`: imports a settlement report file and prints the report summary as JSON.
enum ReconcileCommand {
    static let help = """
        usage: tender reconcile --merchant-id ID --format generic|adyen-sdr FILE [--supersede]
        Imports a processor settlement report (streamed, never loaded whole), reconciles it against
        the merchant's recorded payments and refunds, and prints the report summary as JSON with
        sorted keys. The same file again prints the same report and applies nothing. A batch already
        imported with other content is refused unless --supersede imports it as a new revision.
        Exit 0 on success; 1 when the file is invalid (stderr names the code, line and column) or
        a batch conflicts.
        """

    /// Bytes read from the file at a time.
    static let chunkBytes = 1 << 20

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["merchant-id", "format"], flags: ["supersede"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(1)
        let merchantId = try args.required("merchant-id")
        let formatText = try args.required("format")
        guard let format = SettlementReportFormat(rawValue: formatText) else {
            throw UsageError(message: "--format must be generic or adyen-sdr")
        }
        let path = args.positionals[0]
        let (configuration, pool) = try TenderCLI.openDatabase(environment)
        defer { pool.close() }
        guard try pool.query("SELECT 1 FROM merchants WHERE merchant_id = $1", [merchantId]).first != nil else {
            throw TenderError("merchant_not_found", "no merchant \(merchantId)")
        }
        // First pass: the file's SHA-256 (its identity, finance-store.md §4.5), chunk by chunk.
        let hasher = SHA256Hasher()
        var hashing = ObservedSource(try FileChunkSource(path: path, chunkBytes: chunkBytes)) { hasher.update($0) }
        while hashing.nextChunk() != nil {}
        let digest = hexEncoded(hasher.finalize())

        let logger = Logger(format: configuration.logFormat)
        let store = SettlementReportStore(pool: pool, sink: FinanceSettlementSink(
            processor: configuration.processor.rawValue, logger: logger))
        do {
            let outcome = try store.importReport(
                merchantId: merchantId, format: format, fileSHA256: digest,
                source: try FileChunkSource(path: path, chunkBytes: chunkBytes),
                supersede: args.flag("supersede"), now: Date())
            // Phase timings on stderr (the report on stdout stays byte-identical across runs).
            logger.info("settlement report imported", [
                ("report_id", outcome.report.id), ("created", String(outcome.created)),
                ("lines", String(outcome.report.lineCount)),
                ("import_ms", String(Int64(outcome.importSeconds * 1000))),
                ("ledger_ms", String(Int64(outcome.ledgerSeconds * 1000))),
                ("effects_ms", String(Int64(outcome.effectsSeconds * 1000))),
                ("effects_applied", String(outcome.effectsApplied)),
            ])
            Console.out(String(decoding: try outcome.report.jsonBytes(), as: UTF8.self))
            return .success
        } catch SettlementImportError.invalidFile(let error) {
            Console.err("tender reconcile: error settlement_file_invalid: \(error.code.rawValue) at line \(error.line), column \(error.column)")
            return .failure
        } catch SettlementImportError.batchConflict(let batchId, let reportId) {
            Console.err("tender reconcile: error settlement_batch_conflict: batch \(batchId) was imported by \(reportId) with other content (use --supersede)")
            return .failure
        }
    }
}

/// A file read in fixed-size chunks; an unreadable file stops the command with `file_unreadable`.
struct FileChunkSource: ByteChunkSource, Sendable {
    private let handle: FileHandle
    private let chunkBytes: Int

    init(path: String, chunkBytes: Int) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw TenderError("file_unreadable", "cannot open \(path)")
        }
        self.handle = handle
        self.chunkBytes = chunkBytes
    }

    mutating func nextChunk() -> ArraySlice<UInt8>? {
        // A read error ends the stream; the reader then sees a truncated file and the digest differs.
        guard let data = try? handle.read(upToCount: chunkBytes), !data.isEmpty else { return nil }
        return [UInt8](data)[...]
    }
}
