// Idempotent re-import (docs/finance-store.md §4.5): file identity, line identity, revision differences.

/// Identity of an imported file: its format and the digest of its raw bytes (§4.5 point 1).
public struct SettlementFileIdentity: Sendable, Hashable, Codable {
    /// Format the bytes were imported as.
    public let format: SettlementReportFormat
    /// Lower-case hex of the digest the shell computed (SHA-256 by contract).
    public let digestHex: String

    /// Identity from a digest computed by the shell, e.g. incrementally through `ObservedSource`.
    public init(format: SettlementReportFormat, digest: [UInt8]) {
        let hexDigits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(digest.count * 2)
        for byte in digest {
            hex.append(hexDigits[Int(byte >> 4)])
            hex.append(hexDigits[Int(byte & 0x0F)])
        }
        self.format = format
        self.digestHex = String(decoding: hex, as: UTF8.self)
    }

    /// Identity of bytes already in memory; `hash` is the shell's SHA-256 (Reconciliation has no crypto).
    public init(format: SettlementReportFormat, bytes: [UInt8], hash: ([UInt8]) -> [UInt8]) {
        self.init(format: format, digest: hash(bytes))
    }

    /// `format:hex`, the value to store under a unique constraint.
    public var key: String { "\(format.rawValue):\(digestHex)" }
}

/// How a superseding revision of a batch differs from the revision it replaces (§4.5 point 2).
public struct RevisionDiff: Sendable, Equatable, Codable {
    /// A line present in both revisions with different content.
    public struct Change: Sendable, Equatable, Codable {
        /// The line as the old revision had it.
        public let old: SettlementLine
        /// The line as the new revision has it.
        public let new: SettlementLine
    }

    /// Lines only in the new revision, by natural key.
    public let added: [SettlementLine]
    /// Lines only in the old revision, by natural key.
    public let removed: [SettlementLine]
    /// Lines in both whose content differs (their position in the file is not content).
    public let changed: [Change]

    /// True when the revisions carry the same lines.
    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }

    /// Compares by natural key; a key repeated inside one revision counts once (its first line),
    /// as the repeat is a `duplicate`. Output is ordered by natural key for a stable report.
    public init(old: [SettlementLine], new: [SettlementLine]) {
        var oldByKey: [String: SettlementLine] = [:]
        for line in old where oldByKey[line.naturalKey] == nil { oldByKey[line.naturalKey] = line }
        var newByKey: [String: SettlementLine] = [:]
        for line in new where newByKey[line.naturalKey] == nil { newByKey[line.naturalKey] = line }
        var added: [SettlementLine] = []
        var changed: [Change] = []
        for (key, line) in newByKey {
            if let previous = oldByKey[key] {
                if !previous.hasSameContent(as: line) { changed.append(Change(old: previous, new: line)) }
            } else {
                added.append(line)
            }
        }
        let removed = oldByKey.filter { newByKey[$0.key] == nil }.map(\.value)
        self.added = added.sorted { $0.naturalKey < $1.naturalKey }
        self.removed = removed.sorted { $0.naturalKey < $1.naturalKey }
        self.changed = changed.sorted { $0.new.naturalKey < $1.new.naturalKey }
    }
}

/// Finds lines whose natural key already appeared earlier in the same file (§4.5 point 3).
///
/// Keeps 16 bytes per distinct key instead of the key itself, so a million-line file costs
/// 16 MB here rather than a heap string per line: two SipHash values of the key under the process's
/// random seed, with different prefixes. Keyed hashing means a crafted file cannot aim for a
/// collision; an accidental one among n keys has probability about n²/2¹²⁹.
public struct DuplicateLineDetector: Sendable {
    private struct Fingerprint: Hashable, Sendable {
        var high: Int
        var low: Int
    }

    private var seen: Set<Fingerprint> = []

    /// An empty detector.
    public init() {}

    /// Records `line`; true when its natural key was seen before (the line is then a `duplicate`).
    public mutating func isRepeat(_ line: SettlementLine) -> Bool {
        !seen.insert(Self.fingerprint(line.naturalKey)).inserted
    }

    private static func fingerprint(_ key: String) -> Fingerprint {
        var first = Hasher()
        first.combine(UInt8(1))
        first.combine(key)
        var second = Hasher()
        second.combine(UInt8(2))
        second.combine(key)
        return Fingerprint(high: first.finalize(), low: second.finalize())
    }
}
