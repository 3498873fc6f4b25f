import Foundation
import Observability
import Postgres
import Synchronization
import Testing
@testable import TenderServer

/// A service that records its calls in a shared journal; `late` makes its stop miss the deadline.
final class JournalService: Service {
    let name: String
    let journal: Journal
    let late: Bool
    let failsToStart: Bool

    init(_ name: String, journal: Journal, late: Bool = false, failsToStart: Bool = false) {
        self.name = name
        self.journal = journal
        self.late = late
        self.failsToStart = failsToStart
    }

    func start() throws {
        if failsToStart { throw TenderError("start_failed", name) }
        journal.entries.withLock { $0.append("start \(name)") }
    }

    func stop(deadline: ContinuousClock.Instant) -> Bool {
        journal.entries.withLock { $0.append("stop \(name)") }
        return !late
    }
}

/// Shares one journal between services (a Mutex is not copyable, so a box holds it).
final class Journal: Sendable {
    let entries = Mutex<[String]>([])
    var list: [String] { entries.withLock { $0 } }
}

/// A flag threads share.
final class Flag: Sendable {
    let value = Atomic<Bool>(false)
}

/// The names of this process's threads (`/proc/self/task/*/comm`, at most 15 bytes each).
func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

@Suite struct ServiceGroupTests {
    @Test func startsInOrderStopsInReverseAndReportsTheLateOne() throws {
        let journal = Journal()
        let lines = LogCapture()
        let group = ServiceGroup(logger: Logger(format: .text, sink: { lines.append($0) }))
        for (name, late) in [("first", false), ("second", true), ("third", false)] {
            try group.start(JournalService(name, journal: journal, late: late))
        }
        #expect(group.names == ["first", "second", "third"])
        let late = group.stopAll(timeoutMilliseconds: 1_000)
        #expect(late == ["second"])
        #expect(journal.list == ["start first", "start second", "start third", "stop third", "stop second", "stop first"])
        #expect(group.names.isEmpty)
        #expect(lines.all.contains { $0.contains("WARNING service did not stop in time service=second") })
        #expect(lines.all.contains { $0.contains("INFO service stopped service=first") })
        // Stopping again stops nothing twice.
        #expect(group.stopAll(timeoutMilliseconds: 1_000).isEmpty)
        #expect(journal.list.count == 6)
    }

    @Test func aFailedStartStopsWhatAlreadyRunsInReverse() throws {
        let journal = Journal()
        let group = ServiceGroup(logger: .silent)
        let services: [any Service] = [JournalService("a", journal: journal), JournalService("b", journal: journal),
                                       JournalService("c", journal: journal, failsToStart: true),
                                       JournalService("d", journal: journal)]
        #expect(throws: TenderError.self) { try group.start(services, stoppingWithinMilliseconds: 1_000) }
        #expect(journal.list == ["start a", "start b", "stop b", "stop a"])
        #expect(group.names.isEmpty)
    }

    @Test func threadServiceStopsWithinTheDeadlineOrSaysItDidNot() throws {
        let quick = ThreadService(name: "quick") { loop in while loop.pause(milliseconds: 10_000) {} }
        try quick.start()
        let started = ContinuousClock.now
        #expect(quick.stop(deadline: .now.advanced(by: .seconds(5))))
        #expect(quick.isFinished)
        #expect(ContinuousClock.now - started < .seconds(1))

        let release = Flag()
        let stubborn = ThreadService(name: "stubborn") { _ in while !release.value.load(ordering: .acquiring) { usleep(1_000) } }
        try stubborn.start()
        #expect(!stubborn.stop(deadline: .now.advanced(by: .milliseconds(100))))
        release.value.store(true, ordering: .releasing)
        #expect(stubborn.stop(deadline: .now.advanced(by: .seconds(5))))
    }
}

@Suite(.serialized, .enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct ServeLifecycleTests {
    /// Every service of `serve`, in start order.
    static let services = ["log-flush", "finance-ingest", "finance-hub", "settlement-effects", "checkout-expiry",
                           "resolver", "webhooks", "wallet-push", "http"]

    @Test func serveStartsEveryServiceInOrderAndStopsThemInReverseOnSIGTERM() throws {
        let url = try TestEnvironment.freshDatabase("life_serve")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
                   "TENDER_LOG_FORMAT": "text", "TENDER_SHUTDOWN_DRAIN_MS": "2000"]
        #expect(try runTender(["migrate"], environment: env).status == 0)
        defer {
            let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: url))
            pool.dropFeedSlots()
            pool.close()
        }
        let port = freePort()
        let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("tender-serve-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: logFile) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestEnvironment.tenderBinary)
        process.arguments = ["serve", "--listen", "127.0.0.1:\(port)"]
        var full = ProcessInfo.processInfo.environment
        full["TENDER_DATA_DIR"] = FileManager.default.temporaryDirectory.appendingPathComponent("tender-life-\(UUID().uuidString)").path
        for (k, v) in env { full[k] = v }
        process.environment = full
        process.standardError = try FileHandle(forWritingTo: logFile)
        try process.run()
        // Every service has started once `listening` is logged (readiness also waits for the finance feed,
        // which a loaded machine may keep behind for a while; this test is about the services).
        var ready = false
        for _ in 0..<600 where !ready {
            ready = ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "").contains(" INFO listening ")
            if !ready { usleep(50_000) }
        }
        #expect(ready)
        #expect(try RawHTTPClient(port: port, timeoutSeconds: 10).request("GET", "/healthz").status == 200)
        let signalled = ContinuousClock.now
        kill(process.processIdentifier, SIGTERM)
        // Within the deadline: the drain (2 s) and the services' grace (10 s), plus 3 s for the process to
        // close its pool and exit on a loaded machine (no service may be late: checked in the log below).
        var exited = false
        while ContinuousClock.now - signalled < .milliseconds(2_000 + ServeCommand.servicesStopMilliseconds + 3_000) {
            if !process.isRunning { exited = true; break }
            usleep(20_000)
        }
        if !exited { process.terminate() }
        process.waitUntilExit()
        #expect(exited)
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)

        let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        let lines = log.split(separator: "\n").map(String.init)
        func order(_ message: String) -> [String] {
            lines.compactMap { line -> String? in
                guard line.contains(" INFO \(message) service=") else { return nil }
                return line.components(separatedBy: " service=").last?.split(separator: " ").first.map(String.init)
            }
        }
        #expect(order("service started") == Self.services, "\(log)")
        #expect(order("service stopped") == Self.services.reversed(), "\(log)")
        #expect(!log.contains("did not stop in time"))
        #expect(lines.last?.contains("INFO stopped late=") == true, "\(log)")
    }

    @Test func noSettlementEffectsThreadRunsAfterStop() throws {
        let s = try RunningServer(prefix: "life_effects")
        defer { s.stop() }
        let (_, key) = try s.merchantWithKey()
        // A report whose last effects step failed: pending work for the service.
        try ForcedCommitFailure.install(s.pool)
        let csv = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"
            + "2024-03-02,B9,fee,,,USD,0.00,1.25,1.25\n"
        _ = try RawHTTPClient(port: s.port).request("POST", "/v1/settlement-reports?format=generic",
                                                    headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "text/csv")],
                                                    body: Array(csv.utf8))
        try ForcedCommitFailure.remove(s.pool)
        #expect(try s.pool.query("SELECT 1 FROM settlement_reports WHERE finish_pending").rows.count == 1)

        let service = s.app.settlementEffects
        try service.start()
        var done = false
        for _ in 0..<200 where !done {
            done = try s.pool.query("SELECT 1 FROM settlement_reports WHERE finish_pending").rows.isEmpty
            if !done { usleep(25_000) }
        }
        #expect(done)
        // Between passes the thread waits; it is there until stopped. Its own thread, by kernel id: other
        // tests in this process run effects services of their own under the same name.
        let task = "/proc/self/task/\(service.osThreadID)"
        #expect(service.osThreadID > 0 && FileManager.default.fileExists(atPath: task))
        #expect((try? String(contentsOfFile: task + "/comm", encoding: .utf8))?.hasPrefix("tender-settleme") == true)
        #expect(service.stop(deadline: .now.advanced(by: .seconds(5))))
        #expect(service.isFinished)
        // `stop` returns once the loop has returned; the OS thread ends right after (a few ms at most).
        var gone = false
        for _ in 0..<100 where !gone {
            gone = !FileManager.default.fileExists(atPath: task)
            if !gone { usleep(10_000) }
        }
        #expect(gone)
        #expect(try StoredEvent.all(s.pool).map(\.type) == ["settlement_report.completed"])
    }
}
