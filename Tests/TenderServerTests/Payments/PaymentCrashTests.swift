import Foundation
import Payments
import Testing
@testable import TenderServer
#if canImport(Glibc)
import Glibc
#endif

/// A `tender serve` child process (posix_spawn + waitpid: Foundation.Process can stall in the test runner).
final class ServeProcess {
    let pid: pid_t
    let port: Int

    init(environment extra: [String: String], logFile: String) throws {
        port = try Self.freePort()
        var env = ProcessInfo.processInfo.environment
        for (k, v) in extra { env[k] = v }
        env["TENDER_LISTEN"] = "127.0.0.1:\(port)"
        let words = ["sh", "-c", "exec \"$0\" serve 2>>\"$1\"", TestEnvironment.tenderBinary, logFile]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child: pid_t = 0
        guard posix_spawn(&child, "/bin/sh", nil, nil, argv, envp) == 0 else { throw TenderError("test_spawn", "posix_spawn failed") }
        pid = child
        // Ready when /healthz answers.
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if let client = try? RawHTTPClient(port: port, timeoutSeconds: 2), (try? client.request("GET", "/healthz"))?.status == 200 {
                return
            }
            usleep(50_000)
        }
        throw TenderError("test_spawn", "tender serve did not become ready")
    }

    /// Waits for the process to end, at most `timeoutSeconds` (then it is killed, so a test never hangs);
    /// returns the raw wait status.
    func wait(timeoutSeconds: Double = 30) -> Int32 {
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while true {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { return status }
            if r < 0 && errno != EINTR { return -1 }
            if Date() >= deadline {
                kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                return -1
            }
            usleep(20_000)
        }
    }

    /// SIGTERM, then wait.
    func stop() -> Int32 {
        kill(pid, SIGTERM)
        return wait()
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw TenderError("test_port", "no free port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"), .serialized)
struct PaymentCrashTests {
    /// Reviewer's test 7: `kill -9` at every recovery point, restart, retry the same key → exactly one charge.
    @Test(arguments: CrashHook.Point.allCases)
    func killedAtRecoveryPointThenRetriedCompletesOnce(_ point: CrashHook.Point) throws {
        let h = try PaymentsHarness(prefix: "pay_crash")
        defer { h.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tender-crash-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PaymentsHarness.authority.root.pem.write(toFile: dir + "/root.pem", atomically: true, encoding: .utf8)
        try h.merchantKeys[0].certificate.pem.write(toFile: dir + "/merchant.pem", atomically: true, encoding: .utf8)
        try h.merchantKeys[0].privateKey.unsafePKCS8PEM().write(toFile: dir + "/merchant-key.pem", atomically: true, encoding: .utf8)
        let database = try #require(try h.pool.query("SELECT current_database() AS d").first?.decode("d", as: String.self))
        // The server finds the merchant's processing key in its key store, sealed under this master key.
        for key in h.merchantKeys {
            _ = try KeyStore(pool: h.pool, masterKeyFile: dir + "/master.key").importKey(
                merchantId: h.merchantId, certificatePEM: key.certificate.pem,
                privateKey: try key.privateKey.unsafePKCS8PEM(), kind: .processing)
        }
        var environment = [
            "TENDER_DATABASE_URL": TestEnvironment.url(database: database),
            "TENDER_APPLE_ROOTS": dir + "/root.pem",
            "TENDER_MASTER_KEY_FILE": dir + "/master.key",
            "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
            "TENDER_PAYMENTS_KEY_LOCK_MS": "1000",
            "TENDER_PAYMENTS_RESOLVER_INTERVAL_MS": "200",
            "TENDER_DB_POOL_SIZE": "4",
        ]
        let logFile = dir + "/server.log"
        let s = try h.session(totalMinor: 1_099)
        let token = try h.token(for: s, pan: "4111111111113377", cryptogram: "Q3Jhc2hUZXN0Q3J5cHRvZ3JhbQ==")

        environment[CrashHook.variable] = point.rawValue
        let doomed = try ServeProcess(environment: environment, logFile: logFile)
        let lost = try? h.pay(s, token: token, key: "crash-key", client: try RawHTTPClient(port: doomed.port))
        let status = doomed.wait()
        #expect(lost == nil, "the response should have been lost with the process")
        #expect(status & 0x7f == SIGKILL, "wait status \(status)")

        environment[CrashHook.variable] = nil
        let revived = try ServeProcess(environment: environment, logFile: logFile)
        var statuses: [Int] = []
        var final: RawResponse?
        let started = Date()
        while Date().timeIntervalSince(started) < 15 {
            let r = try h.pay(s, token: token, key: "crash-key", client: try RawHTTPClient(port: revived.port))
            statuses.append(r.status)
            if r.status == 200 { final = r; break }
            usleep(200_000)
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(revived.stop() == 0)
        let response = try #require(final)
        let paymentId = try #require(response.payment?["id"] as? String)
        #expect(response.payment?["status"] as? String == "succeeded")
        let charges = try h.simulatorCharges(paymentId: paymentId)
        let calls = try h.simulatorCalls(paymentId: paymentId)
        let live = try h.scalar("SELECT count(*)::bigint AS n FROM payments WHERE session_id = $1 AND status <> 'failed'", [s.sessionId])
        let allCharges = try h.scalar("SELECT count(*)::bigint AS n FROM simulator_authorizations", [])
        print("measure crash \(point.rawValue): retry statuses = \(statuses), processor charges per key = \(charges), "
              + "calls with that key = \(calls), payments = \(live), all charges = \(allCharges), "
              + "time to complete = \(String(format: "%.2f", elapsed)) s")
        #expect(charges == 1)
        #expect(allCharges == 1)
        #expect(live == 1)
        #expect(try h.scalar("SELECT count(*)::bigint AS n FROM checkout_sessions WHERE session_id = $1 AND status = 'paid'",
                             [s.sessionId]) == 1)
        // Card data never reached the logs of either process.
        let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        #expect(!log.contains("4111111111113377"))
        #expect(!log.contains("Q3Jhc2hUZXN0Q3J5cHRvZ3JhbQ=="))
    }
}
