import Foundation
import Synchronization
import Testing
@testable import HTTPServer

/// Streams handed to producers, and what their onClose callbacks reported.
final class StreamLog: Sendable {
    let streams = Mutex<[HTTPStream]>([])
    let closeReasons = Mutex<[HTTPStreamCloseReason]>([])

    /// A producer that keeps the stream and records its close.
    var producer: @Sendable (HTTPStream) -> Void {
        { [self] stream in
            stream.onClose { reason in self.closeReasons.withLock { $0.append(reason) } }
            streams.withLock { $0.append(stream) }
        }
    }

    var count: Int { streams.withLock { $0.count } }
    func stream(_ index: Int) -> HTTPStream? { streams.withLock { index < $0.count ? $0[index] : nil } }
    var reasons: [HTTPStreamCloseReason] { closeReasons.withLock { $0 } }
}

private let streamRequest = "GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n"

@Suite struct StreamingTests {
    @Test func eventsSentFromAnotherThreadArriveInOrderWithChunkedFraming() throws {
        let log = StreamLog()
        let test = try TestServer(extraRoutes: { router in
            router.add("GET", "/events") { request in
                let after = request.lastEventID ?? "none"
                let events = try [
                    SSEEvent(id: "42", event: "tick", data: "after \(after)"),
                    SSEEvent(id: "43", data: "two\nlines"),
                    SSEEvent(id: "44", event: "tick", data: "three"),
                ]
                return .eventStream { stream in
                    log.producer(stream)
                    let sender = Thread {
                        for event in events {
                            usleep(30_000)
                            _ = stream.send(event)
                        }
                        stream.close()
                    }
                    sender.start()
                }
            }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let client = try test.client()
        try client.send("GET /events HTTP/1.1\r\nHost: t\r\nLast-Event-ID: 41\r\n\r\n")
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(head.header("Transfer-Encoding")?.lowercased() == "chunked")
        #expect(head.header("Content-Length") == nil)
        #expect(head.header("Content-Type") == "text/event-stream; charset=utf-8")
        #expect(head.header("Cache-Control") == "no-cache")
        #expect(head.header("X-Request-Id") != nil)

        var body: [UInt8] = []
        while let chunk = try client.readChunk() { body += chunk }
        let expected = "id: 42\nevent: tick\ndata: after 41\n\n"
            + "id: 43\ndata: two\ndata: lines\n\n"
            + "id: 44\nevent: tick\ndata: three\n\n"
        #expect(String(decoding: body, as: UTF8.self) == expected)
        #expect(eventually { log.reasons == [.closedByProducer] && test.server.stats.openStreams == 0 })
        // The chunked body ended cleanly, so the keep-alive connection serves the next request.
        #expect(try client.roundTrip("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").text == "ok")
    }

    @Test func heartbeatsFromAnInlineRouteOutliveTheHandlerDeadline() throws {
        let log = StreamLog()
        let test = try TestServer({ $0.handlerDeadlineMilliseconds = 50 }, extraRoutes: { router in
            router.add("GET", "/events", inline: true) { _ in .eventStream(producer: log.producer) }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let client = try test.client()
        try client.send(streamRequest)
        #expect(try client.readHead().status == 200)
        #expect(eventually { log.count == 1 })
        let stream = try #require(log.stream(0))
        // Several deadline periods pass while idle: a stream is not a handler past its deadline.
        usleep(300_000)
        #expect(stream.send(SSEEvent.comment("ping")))
        #expect(try client.readEvents(1) == ": ping\n\n")
        #expect(stream.send(SSEEvent.comment("ping")))
        #expect(try client.readEvents(1) == ": ping\n\n")
        stream.close()
        #expect(try client.readChunk() == nil)
        #expect(stream.send(SSEEvent.comment("late")) == false)
    }

    @Test func clientDisconnectFailsSendAndFiresOnCloseOnce() throws {
        let log = StreamLog()
        let test = try TestServer(extraRoutes: { router in
            router.add("GET", "/events") { _ in .eventStream(producer: log.producer) }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let client = try test.client()
        try client.send(streamRequest)
        #expect(try client.readHead().status == 200)
        #expect(eventually { log.count == 1 })
        let stream = try #require(log.stream(0))
        #expect(stream.send(SSEEvent.comment("hello")))
        #expect(try client.readEvents(1) == ": hello\n\n")
        client.disconnect()

        // A suspended connection cannot see the client leave; heartbeats wake it and the write fails.
        #expect(eventually { !stream.send(SSEEvent.comment("ping")) })
        #expect(eventually { log.reasons == [.clientGone] })
        #expect(stream.closeReason == .clientGone)
        #expect(stream.isOpen == false)
        stream.close()
        #expect(stream.send(SSEEvent.comment("ping")) == false)
        #expect(log.reasons == [.clientGone])
        #expect(eventually { test.server.stats.openStreams == 0 && test.server.stats.inFlight == 0 })
    }

    @Test func twoHundredIdleStreamsPinNoWorker() throws {
        let log = StreamLog()
        let subscribers = 200
        let test = try TestServer({
            $0.workerThreads = 2
            $0.connectionsPerIPMax = 400
        }, extraRoutes: { router in
            router.add("GET", "/events") { _ in .eventStream(producer: log.producer) }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 10_000) }
        var clients: [RawClient] = []
        for _ in 0..<subscribers {
            let client = try test.client()
            try client.send(streamRequest)
            #expect(try client.readHead().status == 200)
            clients.append(client)
        }
        #expect(eventually { log.count == subscribers && test.server.stats.openStreams == subscribers })
        #expect(test.server.stats.workersBusy == 0)

        // Ordinary worker routes still complete while every subscriber stays connected.
        for index in 0..<20 {
            let response = try test.client().roundTrip("GET /v1/items/\(index) HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(response.status == 200)
            #expect(response.json?["id"] as? String == String(index))
        }
        // Every idle stream wakes up for a broadcast.
        for index in 0..<subscribers {
            let stream = try #require(log.stream(index))
            #expect(stream.send(try SSEEvent(id: "7", data: "all")))
        }
        for client in clients {
            #expect(try client.readEvents(1) == "id: 7\ndata: all\n\n")
        }
        #expect(test.server.stats.openStreams == subscribers)
    }

    @Test func slowReaderPastTheBufferLimitIsClosed() throws {
        let log = StreamLog()
        let limit = 65_536
        let test = try TestServer({ $0.streamBufferBytesMax = limit }, extraRoutes: { router in
            router.add("GET", "/events") { _ in .eventStream(producer: log.producer) }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let client = try RawClient(port: test.port, receiveBufferBytes: 4_096)
        try client.send(streamRequest)
        #expect(try client.readHead().status == 200)
        #expect(eventually { log.count == 1 })
        let stream = try #require(log.stream(0))
        #expect(stream.bufferBytesMax == limit)

        // The client reads nothing more: once the kernel buffers fill, our buffer grows to the limit.
        let block = [UInt8](repeating: UInt8(ascii: "x"), count: 8_192)
        var accepted = 0
        #expect(eventually {
            if stream.send(block) {
                accepted += 1
                return false
            }
            return true
        })
        #expect(accepted > 0)
        #expect(stream.closeReason == .bufferOverflow)
        #expect(stream.bufferedBytes == 0)
        #expect(eventually { log.reasons == [.bufferOverflow] && test.server.stats.openStreams == 0 })
        #expect(try test.client().roundTrip("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").text == "ok")
    }

    @Test func aSendOfExactlyTheBufferLimitFitsAndOneByteMoreOverflows() throws {
        let log = StreamLog()
        let limit = 1_000
        let test = try TestServer({ $0.streamBufferBytesMax = limit }, extraRoutes: { router in
            router.add("GET", "/events") { _ in .stream(status: 200, producer: log.producer) }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let atLimit = try test.client()
        try atLimit.send(streamRequest)
        #expect(try atLimit.readHead().status == 200)
        let pastLimit = try test.client()
        try pastLimit.send(streamRequest)
        #expect(try pastLimit.readHead().status == 200)
        #expect(eventually { log.count == 2 })
        let first = try #require(log.stream(0))
        let second = try #require(log.stream(1))

        // A fresh stream has nothing buffered, so these outcomes do not depend on timing.
        let full = [UInt8](repeating: UInt8(ascii: "a"), count: limit)
        #expect(first.send(full))
        var received: [UInt8] = []
        while received.count < limit, let chunk = try atLimit.readChunk() { received += chunk }
        #expect(received == full)

        #expect(second.send([UInt8](repeating: UInt8(ascii: "b"), count: limit + 1)) == false)
        #expect(second.closeReason == .bufferOverflow)
        // The overflow cuts the connection instead of ending the body cleanly.
        #expect(pastLimit.waitForClose())
        #expect(first.isOpen)
    }

    @Test func shutdownEndsOpenStreamsAndDrainsWithinTheDeadline() throws {
        let log = StreamLog()
        let test = try TestServer(extraRoutes: { router in
            router.add("GET", "/events") { _ in .eventStream(producer: log.producer) }
        })
        var clients: [RawClient] = []
        for _ in 0..<3 {
            let client = try test.client()
            try client.send(streamRequest)
            #expect(try client.readHead().status == 200)
            clients.append(client)
        }
        #expect(eventually { log.count == 3 })
        let buffered = try #require(log.stream(0))
        #expect(buffered.send(SSEEvent.comment("last words")))

        let drained = Atomic<Int>(-1)
        let shutdownThread = Thread {
            drained.store(test.server.shutdown(drainDeadlineMilliseconds: 10_000) ? 1 : 0, ordering: .relaxed)
        }
        shutdownThread.start()
        #expect(eventually(timeoutSeconds: 15) { drained.load(ordering: .relaxed) != -1 })
        #expect(drained.load(ordering: .relaxed) == 1)
        #expect(log.reasons == [.serverShutdown, .serverShutdown, .serverShutdown])
        #expect(test.server.stats.openStreams == 0)
        // Bytes buffered before the shutdown still went out, then the last chunk.
        #expect(try clients[0].readEvents(1) == ": last words\n\n")
        for client in clients {
            #expect(try client.readChunk() == nil)
        }
    }

    @Test func streamsPastTheLimitGet503TooManyStreams() throws {
        let log = StreamLog()
        let test = try TestServer({
            $0.streamsMax = 2
            $0.retryAfterSeconds = 3
        }, extraRoutes: { router in
            router.add("GET", "/events") { _ in .eventStream(producer: log.producer) }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        var open: [RawClient] = []
        for _ in 0..<2 {
            let client = try test.client()
            try client.send(streamRequest)
            #expect(try client.readHead().status == 200)
            open.append(client)
        }
        #expect(eventually { test.server.stats.openStreams == 2 })

        let refused = try test.client().roundTrip(streamRequest)
        #expect(refused.status == 503)
        #expect(refused.json?["code"] as? String == "too_many_streams")
        #expect(refused.header("Retry-After") == "3")
        #expect(log.count == 2)  // the refused stream's producer never ran

        // Closing one frees a slot.
        log.stream(0)?.close()
        #expect(try open[0].readChunk() == nil)
        #expect(eventually { test.server.stats.openStreams == 1 })
        let again = try test.client()
        try again.send(streamRequest)
        #expect(try again.readHead().status == 200)
        #expect(eventually { log.count == 3 && test.server.stats.openStreams == 2 })
    }

    @Test func aStreamReturnedPastTheHandlerDeadlineIsNeverStarted() throws {
        let log = StreamLog()
        let gate = Gate()
        let returned = Atomic<Int>(0)
        let test = try TestServer({ $0.handlerDeadlineMilliseconds = 100 }, extraRoutes: { router in
            router.add("GET", "/events") { _ in
                gate.semaphore.wait()
                returned.wrappingAdd(1, ordering: .relaxed)
                return .eventStream(producer: log.producer)
            }
        })
        defer { test.server.shutdown(drainDeadlineMilliseconds: 5_000) }
        let client = try test.client()
        let response = try client.roundTrip(streamRequest)
        #expect(response.status == 503)
        #expect(response.json?["code"] as? String == "handler_deadline_exceeded")
        gate.release()
        #expect(eventually { returned.load(ordering: .relaxed) == 1 && test.server.stats.workersBusy == 0 })
        #expect(log.count == 0)
        #expect(test.server.stats.openStreams == 0)
        #expect(try client.roundTrip("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").text == "ok")
    }

    @Test(arguments: [("streamsMax", -1), ("streamBufferBytesMax", 0)])
    func streamLimitsOutOfRangeAreRefused(field: String, value: Int) throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        if field == "streamsMax" { configuration.streamsMax = value } else { configuration.streamBufferBytesMax = value }
        let server = HTTPServer(configuration: configuration, router: Router())
        let error = #expect(throws: HTTPServerError.self) { try server.start() }
        #expect(error?.code == "invalid_configuration")
        #expect(error?.message.contains(field) == true)
    }
}

@Suite struct SSEEventTests {
    @Test func fieldsRenderInOrderWithOneSpaceAfterTheColon() throws {
        let event = try SSEEvent(id: "17", event: "payout.updated", data: "{\"a\":1}", retryMilliseconds: 5_000)
        #expect(String(decoding: event.encoded, as: UTF8.self)
            == "id: 17\nevent: payout.updated\nretry: 5000\ndata: {\"a\":1}\n\n")
    }

    @Test func dataWithAnyLineEndingBecomesSeveralDataLines() throws {
        let event = try SSEEvent(data: "a\nb\r\nc\rd")
        #expect(String(decoding: event.encoded, as: UTF8.self) == "data: a\ndata: b\ndata: c\ndata: d\n\n")
        let trailing = try SSEEvent(data: "x\n")
        #expect(String(decoding: trailing.encoded, as: UTF8.self) == "data: x\ndata: \n\n")
        let leadingSpace = try SSEEvent(data: " padded")
        #expect(String(decoding: leadingSpace.encoded, as: UTF8.self) == "data:  padded\n\n")
    }

    @Test func emptyDataStillDispatches() throws {
        // "data: " yields an empty data buffer plus LF, which the client dispatches as an empty message.
        #expect(String(decoding: try SSEEvent(data: "").encoded, as: UTF8.self) == "data: \n\n")
    }

    @Test(arguments: ["1\n2", "1\r", "a\u{0}b"])
    func idWithALineBreakOrNulIsRejected(id: String) {
        let error = #expect(throws: HTTPServerError.self) { try SSEEvent(id: id, data: "x") }
        #expect(error?.code == "invalid_sse_field")
    }

    @Test(arguments: ["tick\ndata: forged", "tick\r"])
    func eventTypeWithALineBreakIsRejected(type: String) {
        let error = #expect(throws: HTTPServerError.self) { try SSEEvent(event: type, data: "x") }
        #expect(error?.code == "invalid_sse_field")
    }

    @Test func negativeRetryIsRejected() {
        let error = #expect(throws: HTTPServerError.self) { try SSEEvent(data: "x", retryMilliseconds: -1) }
        #expect(error?.code == "invalid_sse_field")
        #expect((try? SSEEvent(data: "x", retryMilliseconds: 0)) != nil)
    }

    @Test func commentsAreColonLinesEndedByABlankLine() {
        #expect(String(decoding: SSEEvent.comment("ping"), as: UTF8.self) == ": ping\n\n")
        #expect(String(decoding: SSEEvent.comment("two\nlines"), as: UTF8.self) == ": two\n: lines\n\n")
    }

    @Test func lastEventIDIsReadFromTheRequestHeader() {
        let request = HTTPRequest(method: "GET", path: "/events", headers: HTTPHeaders([("last-event-id", "99")]))
        #expect(request.lastEventID == "99")
        #expect(HTTPRequest(method: "GET", path: "/events").lastEventID == nil)
    }
}
