import Crypto
import Foundation
import Postgres

/// A migration problem; `code` is stable.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case directoryUnreadable = "migrations_dir_unreadable"
        case nameInvalid = "migration_name_invalid"
        case duplicateVersion = "migration_duplicate_version"
        case appliedFileChanged = "migration_changed"
        case appliedFileMissing = "migration_missing"
        case failed = "migration_failed"
        case pending = "migrations_pending"
    }
    public let code: Code
    public let detail: String
    public var description: String { "\(code.rawValue): \(detail)" }
}

/// One forward-only SQL file, `NNNN_name.sql`.
public struct MigrationFile: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String
    /// SHA-256 hex of the file's bytes; an applied file whose checksum changes is refused.
    public let checksum: String

    /// Loads every `NNNN_name.sql` in `directory`, sorted by version.
    public static func load(directory: String) throws(MigrationError) -> [MigrationFile] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw MigrationError(code: .directoryUnreadable, detail: directory)
        }
        var files: [MigrationFile] = []
        for fileName in names.sorted() where fileName.hasSuffix(".sql") {
            guard let data = FileManager.default.contents(atPath: directory + "/" + fileName) else {
                throw MigrationError(code: .directoryUnreadable, detail: fileName)
            }
            files.append(try parse(fileName: fileName, bytes: Array(data)))
        }
        var seen = Set<Int>()
        for f in files where !seen.insert(f.version).inserted {
            throw MigrationError(code: .duplicateVersion, detail: "version \(f.version)")
        }
        return files.sorted { $0.version < $1.version }
    }

    /// Parses a file name and its contents.
    public static func parse(fileName: String, bytes: [UInt8]) throws(MigrationError) -> MigrationFile {
        let stem = fileName.dropLast(4)
        let parts = stem.split(separator: "_", maxSplits: 1)
        guard parts.count == 2, parts[0].count == 4, parts[0].allSatisfy({ $0.isASCII && $0.isNumber }),
              let version = Int(parts[0]), version > 0,
              parts[1].allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else {
            throw MigrationError(code: .nameInvalid, detail: "\(fileName) (expected NNNN_lower_snake.sql)")
        }
        guard let sql = String(validating: bytes, as: UTF8.self) else {
            throw MigrationError(code: .nameInvalid, detail: "\(fileName) is not UTF-8")
        }
        return MigrationFile(version: version, name: String(parts[1]), sql: sql, checksum: hexEncoded(Digest.sha256(bytes)))
    }
}

/// What the database has against what the files say.
public struct MigrationStatus: Sendable {
    public var applied: [Int: String]
    public var pending: [MigrationFile]
}

/// Applies migrations forward-only, each in its own transaction, under a transaction-scoped advisory
/// lock so that several nodes starting at once apply each file exactly once. Holding no session-level
/// lock keeps it safe behind a transaction-mode pooler.
public struct Migrator: Sendable {
    /// Advisory lock key shared by every Tender node ("TENDER" in ASCII).
    static let lockKey: Int64 = 0x54_45_4E_44_45_52
    public let pool: PostgresPool
    public let files: [MigrationFile]

    public init(pool: PostgresPool, files: [MigrationFile]) {
        self.pool = pool
        self.files = files
    }

    /// Compares applied migrations with the files; refuses changed or missing applied files.
    public func status() throws -> MigrationStatus {
        let applied = try readApplied()
        try verify(applied: applied)
        return MigrationStatus(applied: applied.mapValues { $0.name },
                               pending: files.filter { applied[$0.version] == nil })
    }

    /// Applies what is pending; returns the files it applied (empty when another node did the work).
    @discardableResult
    public func migrate() throws -> [MigrationFile] {
        var done: [MigrationFile] = []
        for file in files {
            let appliedHere: Bool = try pool.transaction { conn in
                _ = try conn.query("SELECT pg_advisory_xact_lock($1)", [Self.lockKey])
                try Self.ensureTable(conn)
                let applied = try Self.readApplied(conn)
                try verify(applied: applied)
                if applied[file.version] != nil { return false }
                do {
                    try conn.simpleQuery(SQL(unsafeSQL: file.sql))
                } catch {
                    throw MigrationError(code: .failed, detail: "\(file.version)_\(file.name): \(error)")
                }
                _ = try conn.execute(
                    "INSERT INTO tender_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    [file.version, file.name, file.checksum])
                return true
            }
            if appliedHere { done.append(file) }
        }
        return done
    }

    private func verify(applied: [Int: (name: String, checksum: String)]) throws(MigrationError) {
        let byVersion = Dictionary(uniqueKeysWithValues: files.map { ($0.version, $0) })
        for (version, record) in applied.sorted(by: { $0.key < $1.key }) {
            guard let file = byVersion[version] else {
                throw MigrationError(code: .appliedFileMissing, detail: "\(version)_\(record.name) is applied but its file is gone")
            }
            guard file.checksum == record.checksum else {
                throw MigrationError(code: .appliedFileChanged, detail: "\(version)_\(file.name) changed after it was applied")
            }
        }
    }

    private func readApplied() throws -> [Int: (name: String, checksum: String)] {
        try pool.withConnection { conn in
            let exists = try conn.query("SELECT to_regclass('tender_schema_migrations') IS NOT NULL AS present")
            guard try exists.first?.decode("present", as: Bool.self) == true else { return [:] }
            return try Self.readApplied(conn)
        }
    }

    private static func readApplied(_ conn: PostgresConnection) throws -> [Int: (name: String, checksum: String)] {
        var out: [Int: (name: String, checksum: String)] = [:]
        for row in try conn.query("SELECT version, name, checksum FROM tender_schema_migrations").rows {
            out[try row.decode("version", as: Int.self)] = (try row.decode("name"), try row.decode("checksum"))
        }
        return out
    }

    private static func ensureTable(_ conn: PostgresConnection) throws {
        try conn.simpleQuery("""
            CREATE TABLE IF NOT EXISTS tender_schema_migrations (
                version     integer PRIMARY KEY,
                name        text NOT NULL,
                checksum    text NOT NULL,
                applied_at  timestamptz NOT NULL DEFAULT now()
            )
            """)
    }
}
