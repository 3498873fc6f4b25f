import Crypto
import Foundation
import Observability
import HTTPServer
import Payments
import Postgres

/// The business outcomes Tender reports (CONTRACT §6). Raw values are the wire names.
public enum EventType: String, CaseIterable, Sendable, Codable {
    case paymentSucceeded = "payment.succeeded"
    case paymentDeclined = "payment.declined"
    case paymentFailed = "payment.failed"
    case refundSucceeded = "refund.succeeded"
    case refundFailed = "refund.failed"
    case checkoutSessionExpired = "checkout_session.expired"
    case settlementReportCompleted = "settlement_report.completed"
    /// The FinanceKit background-delivery doorbell (webhook deliveries only; coalesced per endpoint).
    case financeChangesAvailable = "finance.changes_available"
}

/// An event as stored and delivered: `{"id","type","createdAt","data":{"object":…}}`.
struct EventEnvelope<Object: Encodable>: Encodable {
    struct DataField: Encodable { let object: Object }
    let id: String
    let type: String
    let createdAt: String
    let data: DataField
}

/// Writes events into the outbox table inside the caller's open transaction, so the event commits with the
/// change it reports or not at all. Consumers (the events API, webhook delivery) read the table; nothing is
/// delivered from memory.
enum EventOutbox {
    /// Largest stored event body; a resource view is far smaller.
    static let bodyBytesMax = 1_048_576

    /// Appends one event of `type` about `objectId`, whose `data.object` is `object` exactly as its GET
    /// returns it. Returns the new event id. Must run inside a transaction on `conn`.
    @discardableResult
    static func append<Object: Encodable>(_ type: EventType, objectId: String, object: Object,
                                          merchantId: String, on conn: PostgresConnection, now: Date) throws -> String {
        let event = try Row(type, objectId: objectId, object: object, now: now)
        _ = try conn.execute("""
            INSERT INTO events (event_id, merchant_id, event_type, object_id, created_at, body)
            VALUES ($1, $2, $3, $4, $5, $6)
            """, [event.eventId, merchantId, event.type.rawValue, event.objectId, event.createdAt, event.body])
        wakeDelivery(merchantId: merchantId, on: conn)
        return event.eventId
    }

    /// One event row before it is written: for a statement that writes it as part of a larger change (the
    /// payment outcome's), which then calls `wakeDelivery`.
    struct Row {
        let eventId: String
        let type: EventType
        let objectId: String
        let createdAt: Date
        /// The stored JSON (`EventEnvelope`).
        let body: String

        init<Object: Encodable>(_ type: EventType, objectId: String, object: Object, now: Date) throws {
            eventId = PrefixedIdentifier.event.mint(randomBytes: SecureRandom.bytes)
            let envelope = EventEnvelope(id: eventId, type: type.rawValue, createdAt: RFC3339.string(from: now),
                                         data: .init(object: object))
            let bytes = try JSONBytesEncoder.bytes(envelope)  // JSONCoding.encoder's bytes, without Foundation's boxing
            precondition(bytes.count <= EventOutbox.bodyBytesMax, "an event body outgrew its limit")
            self.type = type
            self.objectId = objectId
            createdAt = now
            body = String(decoding: bytes, as: UTF8.self)
        }
    }

    /// The notification that wakes delivery on any node, sent after COMMIT, not inside it: a NOTIFY in the
    /// transaction would make every event-writing commit wait for the one before it (`notifyAfterCommit`).
    static func wakeDelivery(merchantId: String, on conn: PostgresConnection) {
        conn.notifyAfterCommit(channel: "tender_events", payload: merchantId)
    }
}
