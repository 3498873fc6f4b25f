import Foundation
import Postgres

/// What a registration follows.
enum WalletObjectKind: String, Sendable {
    case order, pass

    /// The identity kind that signs for (and pushes about) this kind of object.
    var identityKind: MerchantKeyKind { self == .order ? .orderType : .passType }
}

/// Devices following orders and passes (`wallet_registrations`), as Apple's web services register them.
enum WalletRegistrations {
    /// Registers `device` for the object; true when new (201), false when it existed (200, token refreshed).
    static func register(kind: WalletObjectKind, device: String, typeIdentifier: String, objectIdentifier: String,
                         pushToken: String, on conn: PostgresConnection, now: Date) throws -> Bool {
        let inserted = try conn.query("""
            INSERT INTO wallet_registrations (kind, device_identifier, type_identifier, object_identifier, push_token, created_at)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (kind, device_identifier, type_identifier, object_identifier) DO NOTHING
            RETURNING 1 AS inserted
            """, [kind.rawValue, device, typeIdentifier, objectIdentifier, pushToken, now]).first != nil
        if !inserted {
            _ = try conn.execute("""
                UPDATE wallet_registrations SET push_token = $5
                WHERE kind = $1 AND device_identifier = $2 AND type_identifier = $3 AND object_identifier = $4
                """, [kind.rawValue, device, typeIdentifier, objectIdentifier, pushToken])
        }
        return inserted
    }

    /// Removes a registration; true when there was one.
    static func unregister(kind: WalletObjectKind, device: String, typeIdentifier: String, objectIdentifier: String,
                           on conn: PostgresConnection) throws -> Bool {
        try conn.execute("""
            DELETE FROM wallet_registrations
            WHERE kind = $1 AND device_identifier = $2 AND type_identifier = $3 AND object_identifier = $4
            """, [kind.rawValue, device, typeIdentifier, objectIdentifier]) > 0
    }

    /// Identifiers of the objects `device` follows that changed after tag `since` (all when nil), and the
    /// newest tag among them. Tags are `modified_seq` values as decimal strings: opaque to Wallet.
    static func changed(kind: WalletObjectKind, device: String, typeIdentifier: String, since: Int64?,
                        on conn: PostgresConnection) throws -> (identifiers: [String], tag: Int64) {
        let rows = kind == .order
            ? try conn.query("""
                SELECT o.order_identifier AS identifier, o.modified_seq FROM wallet_registrations r
                JOIN wallet_orders o ON o.order_type_identifier = r.type_identifier AND o.order_identifier = r.object_identifier
                WHERE r.kind = 'order' AND r.device_identifier = $1 AND r.type_identifier = $2 AND o.modified_seq > $3
                ORDER BY o.modified_seq LIMIT 1000
                """, [device, typeIdentifier, since ?? -1])
            : try conn.query("""
                SELECT p.serial_number AS identifier, p.modified_seq FROM wallet_registrations r
                JOIN wallet_passes p ON p.pass_type_identifier = r.type_identifier AND p.serial_number = r.object_identifier
                WHERE r.kind = 'pass' AND r.device_identifier = $1 AND r.type_identifier = $2 AND p.modified_seq > $3
                ORDER BY p.modified_seq LIMIT 1000
                """, [device, typeIdentifier, since ?? -1])
        var identifiers: [String] = []
        var tag: Int64 = since ?? 0
        for row in rows.rows {
            identifiers.append(try row.decode("identifier"))
            tag = max(tag, try row.decode("modified_seq"))
        }
        return (identifiers, tag)
    }
}

/// APNs pushes owed (`wallet_pushes`): written in the transaction of the change, sent by `WalletPushService`.
enum WalletPushQueue {
    /// One push per device registered for the object.
    static func enqueue(kind: WalletObjectKind, merchantId: String, typeIdentifier: String, objectIdentifier: String,
                        on conn: PostgresConnection, now: Date) throws {
        _ = try conn.execute("""
            INSERT INTO wallet_pushes (kind, merchant_id, type_identifier, device_identifier, object_identifier, push_token,
                                       next_attempt_at, created_at)
            SELECT kind, $2, type_identifier, device_identifier, object_identifier, push_token, $5, $5
            FROM wallet_registrations WHERE kind = $1 AND type_identifier = $3 AND object_identifier = $4
            """, [kind.rawValue, merchantId, typeIdentifier, objectIdentifier, now])
        conn.notifyAfterCommit(channel: "tender_wallet_pushes", payload: typeIdentifier)
    }
}
