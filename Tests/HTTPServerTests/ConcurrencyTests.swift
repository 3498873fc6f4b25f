import Foundation
import Synchronization
import Testing
@testable import HTTPServer

/// A handler that blocks until released, to hold workers busy deterministically.
final class Gate: Sendable {
    let semaphore = DispatchSemaphore(value: 0)
    func release(_ count: Int = 1) { for _ in 0..<count { semaphore.signal() } }
}

@Suite struct ConcurrencyTests {
    @Test func fullWorkerQueueAnswers503WithRetryAfter() throws {
        let gate = Gate()
        let test = try TestServer({
            $0.workerThreads = 1
            $0.workerQueueMax = 1
            $0.retryAfterSeconds = 7
        }, extraRoutes: { router in
            router.add("GET", "/block") { _ in
                gate.semaphore.wait()
                return .text("done")
            }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let running = try test.client()
        try running.send("GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually { test.server.stats.workersBusy == 1 })
        let queued = try test.client()
        try queued.send("GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually { test.server.stats.queueDepth == 1 })

        let rejected = try test.client().roundTrip("GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(rejected.status == 503)
        #expect(rejected.json?["code"] as? String == "server_busy")
        #expect(rejected.header("Retry-After") == "7")

        gate.release(2)
        #expect(try running.readResponse().text == "done")
        #expect(try queued.readResponse().text == "done")
        // Inline routes never need a worker.
        #expect(try test.client().roundTrip("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").status == 200)
    }

    @Test func handlerPastItsDeadlineGets503AndTheLateResultIsDropped() throws {
        let gate = Gate()
        let finished = Atomic<Int>(0)
        let test = try TestServer({
            $0.workerThreads = 1
            $0.handlerDeadlineMilliseconds = 200
        }, extraRoutes: { router in
            router.add("GET", "/slow") { _ in
                gate.semaphore.wait()
                finished.wrappingAdd(1, ordering: .relaxed)
                return .text("late")
            }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let client = try test.client()
        let response = try client.roundTrip("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(response.status == 503)
        #expect(response.json?["code"] as? String == "handler_deadline_exceeded")
        #expect(response.header("Retry-After") != nil)
        gate.release()
        #expect(eventually { finished.load(ordering: .relaxed) == 1 && test.server.stats.workersBusy == 0 })
        // The connection stays usable and carries no stale "late" body.
        let next = try client.roundTrip("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(next.text == "ok")
    }

    @Test func gracefulShutdownFinishesInFlightAndRefusesNewConnections() throws {
        let gate = Gate()
        let test = try TestServer({ $0.workerThreads = 2 }, extraRoutes: { router in
            router.add("GET", "/block") { _ in
                gate.semaphore.wait()
                return .text("finished")
            }
        })
        let port = test.port
        let client = try test.client()
        try client.send("GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually { test.server.stats.workersBusy == 1 })

        let drained = Atomic<Int>(-1)
        let shutdownThread = Thread {
            drained.store(test.server.shutdown(drainDeadlineMilliseconds: 20_000) ? 1 : 0, ordering: .relaxed)
        }
        shutdownThread.start()
        // Once draining, a new request is refused (before that, this unknown path is a 404; once stopped,
        // the connection is refused); only then is the in-flight handler allowed to finish. The probe must
        // not hit /block, whose handler would hold the drain.
        #expect(eventually {
            guard let fresh = try? RawClient(port: port),
                let r = try? fresh.roundTrip("GET /no-such-route HTTP/1.1\r\nHost: t\r\n\r\n") else { return true }
            return r.status == 503 && r.json?["code"] as? String == "server_shutting_down"
                && r.header("Connection")?.lowercased() == "close"
        })
        gate.release()
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.text == "finished")
        #expect(eventually(timeoutSeconds: 25) { drained.load(ordering: .relaxed) != -1 })
        #expect(drained.load(ordering: .relaxed) == 1)
        #expect(test.server.stats.inFlight == 0)
        #expect((try? RawClient(port: port)) == nil)
    }

    @Test func shutdownPastTheDeadlineAnswersWaitingRequestsAndReturnsFalse() throws {
        let gate = Gate()
        let test = try TestServer({ $0.workerThreads = 1 }, extraRoutes: { router in
            router.add("GET", "/block") { _ in
                gate.semaphore.wait()
                return .text("finished")
            }
        })
        let client = try test.client()
        try client.send("GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually { test.server.stats.workersBusy == 1 })
        let drained = test.server.shutdown(drainDeadlineMilliseconds: 100)
        #expect(drained == false)
        // The waiting request was resumed with a 503 before the daemon stopped; the bytes may or may not
        // have left before the socket closed, so a missing response is tolerated but a wrong one is not.
        let response = try? client.readResponse()
        #expect(response == nil || response?.json?["code"] as? String == "server_shutting_down")
        gate.release()
    }

    @Test func clientsAbortingWhileQueuedDoNotBreakTheServer() throws {
        let gate = Gate()
        let test = try TestServer({
            $0.workerThreads = 1
            $0.workerQueueMax = 64
        }, extraRoutes: { router in
            router.add("GET", "/block") { _ in
                gate.semaphore.wait()
                return .text("finished")
            }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        for _ in 0..<20 {
            let client = try test.client()
            try client.send("GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        }  // each client is closed here, with its request queued or running
        #expect(eventually { test.server.stats.queueDepth + test.server.stats.workersBusy == 20 })
        gate.release(20)
        #expect(eventually { test.server.stats.inFlight == 0 })
        #expect(try test.client().roundTrip("GET /v1/items/after HTTP/1.1\r\nHost: t\r\n\r\n").status == 200)
    }

    @Test func startFailsWithBindFailedWhenThePortIsTaken() throws {
        let test = try TestServer()
        defer { test.server.shutdown(drainDeadlineMilliseconds: 2_000) }
        var configuration = HTTPServerConfiguration()
        configuration.port = test.port
        let second = HTTPServer(configuration: configuration, router: Router())
        let error = #expect(throws: HTTPServerError.self) { try second.start() }
        #expect(error?.code == "bind_failed")
        // The message names the address and the cause (EADDRINUSE), not just "could not listen".
        #expect(error?.message == "127.0.0.1:\(test.port) is already in use by another process.")
    }

    @Test func invalidConfigurationIsRefused() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.workerThreads = 0
        let server = HTTPServer(configuration: configuration, router: Router())
        let error = #expect(throws: HTTPServerError.self) { try server.start() }
        #expect(error?.code == "invalid_configuration")
    }
}

