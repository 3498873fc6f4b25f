import Foundation
import HTTPServer
import Postgres

/// Limits of `GET /v1/events`, the same as the payments list's.
enum EventPaging {
    /// Page size when `limit` is absent.
    static let limitDefault = 20
    /// Largest accepted `limit`.
    static let limitMax = 100
}

/// Reads of the outbox table (migrations/0015) for the events API. Bodies come back as stored.
enum EventStore {
    /// True for an id `EventOutbox` could have minted (`evt_` + 24 of [a-z0-9]).
    static func isEventId(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 28, utf8.starts(with: Array("evt_".utf8)) else { return false }
        return utf8.dropFirst(4).allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) }
    }

    /// The stored body of the merchant's event `eventId`, or nil (unknown, or another merchant's).
    static func body(merchantId: String, eventId: String, on conn: PostgresConnection) throws -> String? {
        try conn.query("SELECT body FROM events WHERE merchant_id = $1 AND event_id = $2",
                       [merchantId, eventId]).first.map { try $0.decode("body") }
    }

    /// True when `eventId` is one of the merchant's events.
    static func exists(merchantId: String, eventId: String, on conn: PostgresConnection) throws -> Bool {
        try conn.query("SELECT 1 AS found FROM events WHERE merchant_id = $1 AND event_id = $2",
                       [merchantId, eventId]).first != nil
    }

    /// Up to `limit` stored bodies of the merchant's events, newest first (commit order of the outbox
    /// sequence), optionally of one type, after event `startingAfter`.
    static func page(merchantId: String, type: EventType?, startingAfter: String?, limit: Int,
                     on conn: PostgresConnection) throws -> [String] {
        try conn.query("""
            SELECT body FROM events
             WHERE merchant_id = $1
               AND ($2::text IS NULL OR event_type = $2)
               AND ($3::text IS NULL OR seq < (SELECT seq FROM events WHERE event_id = $3 AND merchant_id = $1))
             ORDER BY seq DESC
             LIMIT $4
            """, [merchantId, type?.rawValue, startingAfter, limit]).rows.map { try $0.decode("body") }
    }
}

extension TenderApp {
    /// `GET /v1/events` and `GET /v1/events/{id}` (CONTRACT §6, openapi.yaml).
    func registerEventRoutes(into router: inout Router) {
        router.add("GET", "/v1/events", guarded(authenticated { [self] request, merchant in
            try self.listEvents(request, merchantId: merchant.merchantId)
        }))
        router.add("GET", "/v1/events/{id}", guarded(authenticated { [self] request, merchant in
            let id = request.pathParameters["id"] ?? ""
            guard EventStore.isEventId(id),
                  let body = try pool.withConnection({ try EventStore.body(merchantId: merchant.merchantId, eventId: id, on: $0) })
            else { throw EventProblems.notFound }
            return Self.eventJSON(Array(body.utf8))
        }))
    }

    /// One page, newest first, as `{"data":[…],"hasMore":bool}` with each event's stored bytes verbatim.
    func listEvents(_ request: HTTPRequest, merchantId: String) throws -> HTTPResponse {
        let limit = try EventProblems.limit(request)
        var type: EventType?
        if let text = request.queryValue("type") {
            guard let parsed = EventType(rawValue: text) else {
                let names = EventType.allCases.map(\.rawValue).joined(separator: ", ")
                throw EventProblems.invalidQuery("type", "type must be one of \(names).")
            }
            type = parsed
        }
        let after = request.queryValue("startingAfter")
        let bodies: [String] = try pool.withConnection { conn in
            if let after {
                guard EventStore.isEventId(after), try EventStore.exists(merchantId: merchantId, eventId: after, on: conn) else {
                    throw EventProblems.invalidQuery("startingAfter", "startingAfter is not one of your events.")
                }
            }
            // One row more than asked tells whether another page exists.
            return try EventStore.page(merchantId: merchantId, type: type, startingAfter: after, limit: limit + 1, on: conn)
        }
        var out: [UInt8] = Array(#"{"data":["#.utf8)
        for (index, body) in bodies.prefix(limit).enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: body.utf8)
        }
        out.append(contentsOf: (bodies.count > limit ? #"],"hasMore":true}"# : #"],"hasMore":false}"#).utf8)
        return Self.eventJSON(out)
    }

    static func eventJSON(_ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }
}

/// Problems of the events API, with the payments list's codes and shapes.
enum EventProblems {
    static let notFound = HTTPProblem(status: 404, code: "event_not_found", title: "Not found", detail: "No such event.")

    static func invalidQuery(_ field: String, _ detail: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: "invalid_query", title: "Invalid query", detail: detail,
                    errors: [.init(field: field, code: "invalid_value", message: detail)])
    }

    /// `limit`: `EventPaging.limitDefault` when absent, 400 `invalid_query` outside 1...`limitMax`.
    static func limit(_ request: HTTPRequest) throws(HTTPProblem) -> Int {
        guard let raw = request.queryValue("limit") else { return EventPaging.limitDefault }
        guard raw.utf8.count <= 9, let value = Int(raw), (1...EventPaging.limitMax).contains(value) else {
            throw invalidQuery("limit", "limit must be 1-\(EventPaging.limitMax).")
        }
        return value
    }
}
