import Foundation
import Postgres
import Testing
@testable import TenderServer

@Suite struct MigrationFileTests {
    @Test(arguments: ["1_init.sql", "0001-init.sql", "0001_Init.sql", "abcd_init.sql", "0000_zero.sql", "0001.sql"])
    func badNamesAreRefused(name: String) {
        #expect { _ = try MigrationFile.parse(fileName: name, bytes: []) } throws: {
            ($0 as? MigrationError)?.code == .nameInvalid
        }
    }

    @Test func checksumFollowsContent() throws {
        let a = try MigrationFile.parse(fileName: "0001_a.sql", bytes: Array("SELECT 1;".utf8))
        let b = try MigrationFile.parse(fileName: "0001_a.sql", bytes: Array("SELECT 2;".utf8))
        #expect(a.version == 1 && a.name == "a")
        #expect(a.checksum != b.checksum)
        #expect(a.checksum.count == 64)
    }

    @Test func projectMigrationsLoad() throws {
        let files = try MigrationFile.load(directory: TestEnvironment.migrationsDirectory)
        #expect(!files.isEmpty)
        #expect(files.map(\.version) == files.map(\.version).sorted())
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct MigrationTests {
    func scratch(_ files: [(String, String)]) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tender-mig-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for (name, sql) in files {
            try sql.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
        }
        return dir
    }

    @Test func rerunAppliesNothing() throws {
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: try TestEnvironment.freshDatabase("mig_rerun")))
        defer { pool.close() }
        let dir = try scratch([("0001_a.sql", "CREATE TABLE a (id int);"), ("0002_b.sql", "CREATE TABLE b (id int);")])
        let first = try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).migrate()
        #expect(first.map(\.version) == [1, 2])
        let second = try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).migrate()
        #expect(second.isEmpty)
        #expect(try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).status().pending.isEmpty)
    }

    @Test func changedAppliedFileIsRefused() throws {
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: try TestEnvironment.freshDatabase("mig_changed")))
        defer { pool.close() }
        let dir = try scratch([("0001_a.sql", "CREATE TABLE a (id int);")])
        try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).migrate()
        try "CREATE TABLE a (id bigint);".write(toFile: dir + "/0001_a.sql", atomically: true, encoding: .utf8)
        try "CREATE TABLE c (id int);".write(toFile: dir + "/0002_c.sql", atomically: true, encoding: .utf8)
        #expect { try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).migrate() } throws: {
            ($0 as? MigrationError)?.code == .appliedFileChanged
        }
        let c = try pool.query("SELECT to_regclass('c') IS NULL AS absent")
        #expect(try c.first?.decode("absent", as: Bool.self) == true)
    }

    @Test func failingMigrationLeavesNothingBehind() throws {
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: try TestEnvironment.freshDatabase("mig_fail")))
        defer { pool.close() }
        let dir = try scratch([("0001_a.sql", "CREATE TABLE a (id int); SELECT no_such_function();")])
        #expect { try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).migrate() } throws: {
            ($0 as? MigrationError)?.code == .failed
        }
        let a = try pool.query("SELECT to_regclass('a') IS NULL AS absent")
        #expect(try a.first?.decode("absent", as: Bool.self) == true)
        #expect(try Migrator(pool: pool, files: try MigrationFile.load(directory: dir)).status().pending.count == 1)
    }

    @Test func concurrentCLIRunsApplyEachFileOnce() throws {
        let url = try TestEnvironment.freshDatabase("mig_race")
        // Each migration appends one row; a second application would add a second row or fail.
        let dir = try scratch([
            ("0001_log.sql", "CREATE TABLE applied_log (version int NOT NULL);"),
            ("0002_two.sql", "INSERT INTO applied_log VALUES (2); SELECT pg_sleep(0.2);"),
            ("0003_three.sql", "INSERT INTO applied_log VALUES (3);"),
        ])
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": dir]
        let results = Results()
        let group = DispatchGroup()
        for _ in 0..<3 {
            group.enter()
            DispatchQueue.global().async {
                results.add(try? runTender(["migrate"], environment: env))
                group.leave()
            }
        }
        group.wait()
        #expect(results.all.count == 3)
        #expect(results.all.allSatisfy { $0?.status == 0 })
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
        defer { pool.close() }
        let rows = try pool.query("SELECT version FROM applied_log ORDER BY version").rows.map { try $0.decode("version", as: Int.self) }
        #expect(rows == [2, 3])
        let recorded = try pool.query("SELECT count(*)::int AS n FROM tender_schema_migrations")
        #expect(try recorded.first?.decode("n", as: Int.self) == 3)
    }
}

final class Results: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [ProcessResult?] = []
    func add(_ r: ProcessResult?) { lock.lock(); items.append(r); lock.unlock() }
    var all: [ProcessResult?] { lock.lock(); defer { lock.unlock() }; return items }
}
