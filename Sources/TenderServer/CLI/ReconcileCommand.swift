import Crypto
import Foundation
import HTTPServer
import Observability
import Postgres
import Reconciliation
import Time

/// `tender reconcile`: imports a settlement report file and prints the report summary as JSON.
enum ReconcileCommand {
    private static let lagMax = TenderConfiguration.reconciliationSettlementLagSecondsMax
    static let help = """
        usage: tender reconcile --merchant-id ID --format generic|adyen-sdr FILE [--supersede]
                                [--amount-tolerance-minor N] [--settlement-lag-seconds N]
        Imports a processor settlement report (streamed, never loaded whole), reconciles it against
        the merchant's recorded payments and refunds, and prints the report summary as JSON with
        sorted keys. The same file again prints the same report and applies nothing. A batch already
        imported with other content is refused unless --supersede imports it as a new revision.
          --amount-tolerance-minor N  largest |settled − recorded| still matched, in minor units
                                      (0...\(TenderConfiguration.reconciliationAmountToleranceMinorMax); default 0, exact)
          --settlement-lag-seconds N  how long a recorded payment may be absent from settlements before
                                      it is missing_in_settlement (0...\(lagMax); default 604800)
        The two override TENDER_RECON_AMOUNT_TOLERANCE_MINOR and TENDER_RECON_SETTLEMENT_LAG_SECONDS.
        Exit 0 on success; 1 when the file is invalid (stderr names the code, line and column) or
        a batch conflicts; 64 for a bad flag.
        """

    /// Flags overriding a matching rule of the environment, with the variable each replaces.
    static let ruleFlags = [("amount-tolerance-minor", "TENDER_RECON_AMOUNT_TOLERANCE_MINOR"),
                            ("settlement-lag-seconds", "TENDER_RECON_SETTLEMENT_LAG_SECONDS")]

    /// Bytes read from the file at a time.
    static let chunkBytes = 1 << 20

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        let args = try Arguments(argv, options: ["merchant-id", "format", "amount-tolerance-minor", "settlement-lag-seconds"],
                                 flags: ["supersede"])
        if args.wantsHelp { Console.out(help); return .success }
        try args.expectPositionals(1)
        let merchantId = try args.required("merchant-id")
        let formatText = try args.required("format")
        guard let format = SettlementReportFormat(rawValue: formatText) else {
            throw UsageError(message: "--format must be generic or adyen-sdr")
        }
        let path = args.positionals[0]
        var overrides: [String: String] = [:]
        for (flag, variable) in ruleFlags {
            if let value = args.value(flag) {
                // An empty value would silently mean "the default"; a flag given must say something.
                guard !value.isEmpty else { throw UsageError(message: "--\(flag) needs a value") }
                overrides[variable] = value
            }
        }
        let configuration: TenderConfiguration
        let pool: PostgresPool
        do {
            (configuration, pool) = try TenderCLI.openDatabase(environment, overrides: overrides)
        } catch let error as ConfigurationError {
            // A bad flag is a usage mistake named after the flag, not the variable it replaces.
            if overrides[error.variable] != nil, let flag = ruleFlags.first(where: { $0.1 == error.variable })?.0 {
                throw UsageError(message: "--\(flag): \(error.reason)")
            }
            throw error
        }
        defer { pool.close() }
        guard try pool.query("SELECT 1 FROM merchants WHERE merchant_id = $1", [merchantId]).first != nil else {
            throw TenderError("merchant_not_found", "no merchant \(merchantId)")
        }
        // First pass: the file's SHA-256 (its identity, docs/finance-store.md §4.5), chunk by chunk.
        let hasher = SHA256Hasher()
        var hashing = ObservedSource(try FileChunkSource(path: path, chunkBytes: chunkBytes)) { hasher.update($0) }
        while hashing.nextChunk() != nil {}
        let digest = hexEncoded(hasher.finalize())

        let logger = Logger(format: configuration.logFormat)
        var store = SettlementReportStore(pool: pool, sink: FinanceSettlementSink(
            processor: configuration.processor.rawValue, logger: logger),
            configuration: configuration.reconciliation)
        store.onReportStored = { reportId, seconds in
            logger.info("settlement report stored; applying its effects",
                        [("report_id", reportId), ("import_ms", String(Int64(seconds * 1000)))])
        }
        do {
            let outcome = try store.importReport(
                merchantId: merchantId, format: format, fileSHA256: digest,
                source: try FileChunkSource(path: path, chunkBytes: chunkBytes),
                supersede: args.flag("supersede"), now: Clock.system.now())
            // Phase timings on stderr (the report on stdout stays byte-identical across runs).
            logger.info("settlement report imported", [
                ("report_id", outcome.report.id), ("created", String(outcome.created)),
                ("lines", String(outcome.report.lineCount)),
                ("import_ms", String(Int64(outcome.importSeconds * 1000))),
                ("ledger_ms", String(Int64(outcome.ledgerSeconds * 1000))),
                ("effects_ms", String(Int64(outcome.effectsSeconds * 1000))),
                ("effects_applied", String(outcome.effectsApplied)),
            ])
            Console.out(String(decoding: try JSONCoding.encoder.encode(outcome.report), as: UTF8.self))
            return .success
        } catch SettlementImportError.invalidFile(let error) {
            Console.err("tender reconcile: error settlement_file_invalid: \(error.code.rawValue)"
                + " at line \(error.line), column \(error.column)")
            return .failure
        } catch SettlementImportError.batchConflict(let batchId, let reportId) {
            Console.err("tender reconcile: error settlement_batch_conflict: batch \(batchId) was imported by \(reportId)"
                + " with other content (use --supersede)")
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
