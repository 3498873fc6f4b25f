import Crypto
import Foundation
import Reconciliation

/// A batch of parsed lines, with each line's stored JSON (`"l":{…}`) already encoded by the parser
/// thread: `lineJSON[lineEnds[i-1]..<lineEnds[i]]` is line i's.
struct ParsedBatch {
    var lines: [SettlementLine] = []
    var lineJSON = RowJSON(capacity: 0)
    var lineEnds: [Int] = []

    func encodedLine(_ index: Int) -> ArraySlice<UInt8> {
        lineJSON.bytes[(index == 0 ? 0 : lineEnds[index - 1])..<lineEnds[index]]
    }
}

/// Parses a settlement file on a thread of its own while the caller matches and stores the lines:
/// reading (CSV, amounts, natural keys, batch digests) and matching + storing cost about the same,
/// so on two cores an import takes about half as long. The queue between them holds at most
/// `depthMax` batches, so memory stays flat however long the file is.
final class ParsedLinePipeline<Source: ByteChunkSource & Sendable>: @unchecked Sendable {
    /// Batches of parsed lines waiting for the consumer: enough for the parser to run ahead while the
    /// consumer reads the ledger (a few seconds for a million recorded payments), bounded all the same.
    static var depthMax: Int { 48 }

    // Everything below is guarded by `condition`; the reader and the source belong to the parser
    // thread alone from `start()` on (the caller hands them over and never touches them again).
    private let condition = NSCondition()
    private var batches: [ParsedBatch] = []
    private var finished = false
    private var failure: ReconciliationError?
    private var cancelled = false
    private var threadDone = false
    private var digests: [String: SHA256Hasher] = [:]
    private var reader: SettlementLineReader<Source>?
    private let batchLines: Int

    init(format: SettlementReportFormat, source: Source, batchLines: Int) {
        reader = SettlementLineReader(format: format, source: source)
        self.batchLines = batchLines
    }

    /// Starts the parser thread.
    func start() {
        let thread = Thread { [self] in self.run() }
        thread.name = "tender-csv-parse"
        thread.start()
    }

    /// The next batch in file order, nil at the end; throws the file's first error.
    func next() throws(ReconciliationError) -> ParsedBatch? {
        condition.lock()
        defer { condition.unlock() }
        while batches.isEmpty && !finished { condition.wait() }
        if !batches.isEmpty {
            let batch = batches.removeFirst()
            condition.broadcast()
            return batch
        }
        if let failure { throw failure }
        return nil
    }

    /// Each batch's SHA-256 over its lines' canonical content, once `next()` returned nil.
    func batchDigests() -> [String: SHA256Hasher] {
        condition.lock()
        defer { condition.unlock() }
        return digests
    }

    /// Stops the parser (if still running) and waits for its thread to end: call before returning,
    /// on every path, so that no thread outlives the import.
    func stop() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        while !threadDone { condition.wait() }
        condition.unlock()
    }

    private func run() {
        guard let reader else { return }
        self.reader = nil
        var stage = ParserStage(reader: reader, batchLines: batchLines)
        var done = false
        while !done {
            var batch = stage.newBatch()
            var error: ReconciliationError?
            do {
                try stage.fill(&batch)
            } catch let failure {
                error = failure
            }
            done = batch.lines.count < batchLines || error != nil
            condition.lock()
            while batches.count >= Self.depthMax && !cancelled { condition.wait() }
            if cancelled {
                done = true
            } else if !batch.lines.isEmpty {
                batches.append(batch)
            }
            if done {
                finished = true
                failure = error
                self.digests = stage.finishDigests()
            }
            condition.broadcast()
            condition.unlock()
        }
        condition.lock()
        threadDone = true
        condition.broadcast()
        condition.unlock()
    }
}

/// The parser thread's work, one batch at a time: read and validate lines, encode each line's stored
/// JSON and feed its canonical content to its batch's digest (`tender bench reconcile` runs it alone).
struct ParserStage<Source: ByteChunkSource> {
    private var reader: SettlementLineReader<Source>
    private let batchLines: Int
    private var digests: [String: SHA256Hasher] = [:]
    private var digestBatch = ""
    private var digest = SHA256Hasher()
    /// Canonical content of `digestBatch`'s latest lines not yet fed to `digest`: the hasher is
    /// updated once per batch run or 64 KiB, not once per line (the digest is the same).
    private var undigested: [UInt8] = []
    private static var undigestedBytesMax: Int { 1 << 16 }

    init(reader: SettlementLineReader<Source>, batchLines: Int) {
        self.reader = reader
        self.batchLines = batchLines
    }

    /// An empty batch with room for `batchLines` lines.
    func newBatch() -> ParsedBatch {
        var batch = ParsedBatch()
        batch.lines.reserveCapacity(batchLines)
        batch.lineEnds.reserveCapacity(batchLines)
        batch.lineJSON = RowJSON(capacity: batchLines * 320)
        return batch
    }

    /// Adds lines to `batch` up to `batchLines`; fewer only at the end of the file. Throws the file's
    /// first error, with the lines before it left in `batch`.
    mutating func fill(_ batch: inout ParsedBatch) throws(ReconciliationError) {
        while batch.lines.count < batchLines, let line = try reader.next() {
            if line.batchId != digestBatch || digests.isEmpty {
                feedDigest()
                if let known = digests[line.batchId] {
                    digest = known
                } else {
                    digest = SHA256Hasher()
                    digests[line.batchId] = digest
                }
                digestBatch = line.batchId
            }
            SettlementReportStore.appendCanonicalContent(line, to: &undigested)
            if undigested.count >= Self.undigestedBytesMax { feedDigest() }
            batch.lineJSON.line(line)
            batch.lineEnds.append(batch.lineJSON.bytes.count)
            batch.lines.append(line)
        }
    }

    /// Each batch's SHA-256 over its lines' canonical content, once the file has been read.
    mutating func finishDigests() -> [String: SHA256Hasher] {
        feedDigest()
        return digests
    }

    private mutating func feedDigest() {
        digest.update(undigested)
        undigested.removeAll(keepingCapacity: true)
    }
}
