import Foundation
import Postgres
@testable import TenderServer

/// Makes the next COMMIT that wrote an event fail: a deferred constraint trigger on `events` raises at
/// commit, after the change and its event were both written inside the transaction. Each test runs on
/// a database of its own, so the trigger touches no other test.
enum ForcedCommitFailure {
    static func install(_ pool: PostgresPool) throws {
        try pool.withConnection { conn in
            try conn.simpleQuery("""
                CREATE FUNCTION test_fail_event_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'forced failure at commit'; END $$;
                CREATE CONSTRAINT TRIGGER test_fail_event_commit AFTER INSERT ON events
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail_event_commit();
                """)
        }
    }

    static func remove(_ pool: PostgresPool) throws {
        try pool.withConnection { conn in
            try conn.simpleQuery("""
                DROP TRIGGER test_fail_event_commit ON events;
                DROP FUNCTION test_fail_event_commit();
                """)
        }
    }
}

/// Stored events of a merchant as rows, oldest first.
struct StoredEvent {
    let eventId: String
    let type: String
    let objectId: String
    let body: String

    /// `data.object` of the stored body.
    func object() throws -> [String: Any] {
        let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        return ((json?["data"] as? [String: Any])?["object"] as? [String: Any]) ?? [:]
    }

    static func all(_ pool: PostgresPool, objectId: String? = nil) throws -> [StoredEvent] {
        try pool.query("""
            SELECT event_id, event_type, object_id, body FROM events
             WHERE ($1::text IS NULL OR object_id = $1) ORDER BY seq
            """, [objectId]).rows.map {
            StoredEvent(eventId: try $0.decode("event_id"), type: try $0.decode("event_type"),
                        objectId: try $0.decode("object_id"), body: try $0.decode("body"))
        }
    }
}

/// Parses a JSON object (test side only).
func jsonObject(_ bytes: [UInt8]) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]) ?? [:]
}

/// True when two JSON values are equal as JSON (key order aside).
func sameJSON(_ a: Any, _ b: Any) -> Bool {
    let options: JSONSerialization.WritingOptions = [.sortedKeys]
    guard let x = try? JSONSerialization.data(withJSONObject: a, options: options),
          let y = try? JSONSerialization.data(withJSONObject: b, options: options) else { return false }
    return x == y
}
