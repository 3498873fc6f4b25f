/// One Server-Sent Event, rendered per the HTML Standard §9.2.5 "Parsing an event stream".
public struct SSEEvent: Sendable, Equatable {
    /// The `id` field (becomes the client's Last-Event-ID); nil omits it.
    public let id: String?
    /// The `event` field (the event type); nil means the default "message".
    public let event: String?
    /// The payload; line breaks become several `data:` lines, which the client joins with LF.
    public let data: String
    /// The `retry` field: the client's reconnection delay; nil omits it.
    public let retryMilliseconds: Int?

    /// Creates an event; throws `HTTPServerError` `invalid_sse_field` when `id` holds CR, LF or NUL, `event`
    /// holds CR or LF (either would inject fields or events), or `retryMilliseconds` is negative.
    public init(id: String? = nil, event: String? = nil, data: String,
                retryMilliseconds: Int? = nil) throws(HTTPServerError) {
        // §9.2.5: a field ends at CR or LF, so one inside a value would start a new field; an id holding
        // NUL is ignored by the client, which would silently break resumption.
        if let id, id.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
            throw HTTPServerError(code: "invalid_sse_field", message: "The event id contains CR, LF or NUL.")
        }
        if let event, event.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) {
            throw HTTPServerError(code: "invalid_sse_field", message: "The event type contains CR or LF.")
        }
        if let retryMilliseconds, retryMilliseconds < 0 {
            throw HTTPServerError(code: "invalid_sse_field", message: "The retry delay is negative.")
        }
        self.id = id
        self.event = event
        self.data = data
        self.retryMilliseconds = retryMilliseconds
    }

    /// The event's bytes on the wire: its fields, LF-terminated, then the blank line that dispatches it.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        if let id { Self.appendField("id", Array(id.utf8), to: &out) }
        if let event { Self.appendField("event", Array(event.utf8), to: &out) }
        if let retryMilliseconds { Self.appendField("retry", Array(String(retryMilliseconds).utf8), to: &out) }
        for line in Self.lines(of: data) { Self.appendField("data", line, to: &out) }
        out.append(0x0A)
        return out
    }

    /// A comment block (`: text` lines then a blank line), which clients ignore: a heartbeat that keeps
    /// proxies from timing the connection out and lets the server notice a client that went away.
    public static func comment(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        for line in lines(of: text) {
            out.append(contentsOf: Array(": ".utf8))
            out.append(contentsOf: line)
            out.append(0x0A)
        }
        out.append(0x0A)
        return out
    }

    private static func appendField(_ name: String, _ value: [UInt8], to out: inout [UInt8]) {
        out.append(contentsOf: Array(name.utf8))
        // §9.2.5: one space after the colon is stripped by the client, so a value starting with a space survives.
        out.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
        out.append(contentsOf: value)
        out.append(0x0A)
    }

    /// Splits on CRLF, CR or LF, the three line endings of §9.2.5; an empty text is one empty line.
    private static func lines(of text: String) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        var current: [UInt8] = []
        var previousWasCR = false
        for byte in text.utf8 {
            if byte == 0x0A && previousWasCR {
                previousWasCR = false
                continue
            }
            previousWasCR = byte == 0x0D
            if byte == 0x0D || byte == 0x0A {
                lines.append(current)
                current = []
            } else {
                current.append(byte)
            }
        }
        lines.append(current)
        return lines
    }
}

extension HTTPRequest {
    /// The `Last-Event-ID` header a reconnecting EventSource sends (HTML Standard §9.2.4): resume after it.
    public var lastEventID: String? { headers["Last-Event-ID"] }
}
