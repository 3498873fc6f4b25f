import Foundation
import Glibc
import Testing
@testable import Postgres

/// Every database test lives under this suite: serialized because one test restarts PostgreSQL,
/// which would break statements running concurrently in sibling tests.
@Suite(.serialized, .enabled(if: TestDatabase.url != nil,
                             "TENDER_TEST_DATABASE_URL is not set (make test sets it)"))
struct PostgresIntegration {}

enum TestDatabase {
    static let url: String? = {
        guard let value = ProcessInfo.processInfo.environment["TENDER_TEST_DATABASE_URL"], !value.isEmpty
        else { return nil }
        return value
    }()

    static let restartCommand: String? = {
        guard let value = ProcessInfo.processInfo.environment["TENDER_TEST_PG_RESTART"], !value.isEmpty
        else { return nil }
        return value
    }()

    static func configuration(_ adjust: (inout PostgresConfiguration) -> Void = { _ in }) -> PostgresConfiguration {
        var configuration = PostgresConfiguration(connectionString: url ?? "")
        configuration.applicationName = "tender-tests"
        adjust(&configuration)
        return configuration
    }

    /// A deferred constraint trigger on `table` that kills its own backend inside COMMIT, so the client
    /// never learns whether the commit happened.
    static func killBackendAtCommit(of table: String, pool: PostgresPool) throws {
        try pool.withConnection { connection in
            try connection.simpleQuery(SQL(unsafeSQL: """
                CREATE FUNCTION \(table)_die() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(1); RETURN NULL; END $$;
                CREATE CONSTRAINT TRIGGER \(table)_die AFTER INSERT ON \(table)
                  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION \(table)_die();
                """))
        }
    }

    /// A table name unique to one test run, so tests never share rows.
    static func tableName(_ prefix: String) -> String {
        prefix + "_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
    }

    /// Runs the restart command through /bin/sh (it may carry arguments and environment) and waits.
    /// posix_spawn + waitpid rather than Foundation.Process, whose exit monitoring can stall
    /// inside the test runner.
    static func restart(_ command: String) {
        var pid: pid_t = 0
        let words: [String] = ["sh", "-c", command]
        let copies: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let arguments = copies + [nil]
        let spawned = posix_spawn(&pid, "/bin/sh", nil, nil, arguments, environ)
        #expect(spawned == 0, "could not start the restart command")
        guard spawned == 0 else { return }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        #expect(status == 0, "restart command failed with wait status \(status)")
    }
}

/// Asserts `body` throws a PostgresError with `code` and returns it for further checks.
@discardableResult
func expectPostgresError(_ code: PostgresError.Code, sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws -> Void) -> PostgresError? {
    do {
        try body()
        Issue.record("expected PostgresError \(code.rawValue), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as PostgresError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected PostgresError \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Runs `body` on `count` real threads at once and waits for all of them.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.start()
    }
    group.wait()
}

/// Starts `body` on one thread; `join()` waits for it.
final class BackgroundThread: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> Void) {
        let done = self.done
        Thread {
            body()
            done.signal()
        }.start()
    }

    func join() { done.wait() }
}

/// Polls `condition` every 10 ms until it holds or `timeoutSeconds` pass.
func eventually(timeoutSeconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeoutSeconds)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return condition()
}

struct TestFailure: Error, Equatable {
    let marker: String
}
