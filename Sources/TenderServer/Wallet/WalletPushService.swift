import Crypto
import Foundation
import HTTPClient
import Observability
import Postgres

/// Sends the APNs pushes owed for order and pass updates (`wallet_pushes`), per Apple's "Sending
/// notification requests to APNs": `POST {TENDER_APNS_URL}/3/device/{pushToken}` over HTTP/2, the type
/// identity's certificate as TLS client certificate, `apns-topic` = the type identifier, body `{}`.
/// A 410 removes the registration; other failures retry with backoff up to `pushAttemptsMax`.
///
/// Several nodes share `wallet_pushes`: a pass claims due pushes with `FOR UPDATE SKIP LOCKED`, leasing
/// each for `leaseMilliseconds` (its `attempts` after the claim is the lease's token). A push is sent only
/// while its lease outlasts one APNs call plus `recordMarginMilliseconds`; the rest of a slow batch is
/// handed back at once, so no other node claims a push whose lease ran out while this one still sends it.
final class WalletPushService: Sendable {
    let pool: PostgresPool
    let keys: KeyStore
    let configuration: WalletConfiguration
    let logger: Logger
    let client = HTTPClient()
    /// Pushes claimed per pass.
    let batchMax: Int
    /// How long a claimed push is this node's; at least twice one call plus the record margin.
    let leaseMilliseconds: Int
    static let batchMaxDefault = 100
    static let leaseMillisecondsDefault = 60_000
    /// Time left in a lease after the last call's deadline, for recording its outcome.
    static let recordMarginMilliseconds = 1_000

    init(pool: PostgresPool, keys: KeyStore, configuration: WalletConfiguration, logger: Logger,
         batchMax: Int = WalletPushService.batchMaxDefault, leaseMilliseconds: Int = WalletPushService.leaseMillisecondsDefault) {
        self.pool = pool
        self.keys = keys
        self.configuration = configuration
        self.logger = logger
        self.batchMax = max(1, batchMax)
        self.leaseMilliseconds = max(leaseMilliseconds, 2 * (configuration.pushTimeoutMilliseconds + Self.recordMarginMilliseconds))
    }

    struct Push: Sendable {
        let pushId: Int64
        let kind: WalletObjectKind
        let typeIdentifier: String
        let deviceIdentifier: String
        let objectIdentifier: String
        let pushToken: String
        let attempts: Int
    }

    /// What one APNs call came to.
    enum Outcome: Equatable {
        case delivered
        /// 410: the device token is no longer valid for the topic.
        case gone
        case failed(String)
    }

    /// The service `tender serve` runs: a pass, then a short pause when nothing was due.
    func service(now: @escaping @Sendable () -> Date) -> ThreadService {
        ThreadService(name: "wallet-push") { [self] thread in
            while !thread.isStopping {
                let sent = (try? runOnce(now: now())) ?? 0
                if sent == 0 { _ = thread.pause(milliseconds: 500) }
            }
        }
    }

    /// Claims the due pushes, sends each while its lease allows, records its outcome and hands back what
    /// the lease no longer covers; returns how many were tried.
    @discardableResult
    func runOnce(now: Date) throws -> Int {
        let claimedAt = ContinuousClock.now
        let claimed = try pool.query("""
            UPDATE wallet_pushes SET attempts = attempts + 1, next_attempt_at = $1::timestamptz + $2::bigint * interval '1 millisecond'
            WHERE push_id IN (SELECT push_id FROM wallet_pushes WHERE next_attempt_at <= $1 ORDER BY next_attempt_at
                              LIMIT $3 FOR UPDATE SKIP LOCKED)
            RETURNING push_id, kind, type_identifier, device_identifier, object_identifier, push_token, attempts
            """, [now, leaseMilliseconds, batchMax]).rows.map { row -> Push in
            let kind: String = try row.decode("kind")
            return Push(pushId: try row.decode("push_id"), kind: WalletObjectKind(rawValue: kind) ?? .order,
                        typeIdentifier: try row.decode("type_identifier"), deviceIdentifier: try row.decode("device_identifier"),
                        objectIdentifier: try row.decode("object_identifier"), pushToken: try row.decode("push_token"),
                        attempts: Int(try row.decode("attempts") as Int32))
        }
        // The last moment a call may start: its timeout and the record margin must still fit in the lease.
        let sendBy = claimedAt + .milliseconds(leaseMilliseconds - configuration.pushTimeoutMilliseconds - Self.recordMarginMilliseconds)
        var identities: [String: TLSClientIdentity?] = [:]
        for (index, push) in claimed.enumerated() {
            if identities[push.typeIdentifier] == nil {
                identities[push.typeIdentifier] = try? clientIdentity(kind: push.kind, typeIdentifier: push.typeIdentifier)
            }
            guard ContinuousClock.now <= sendBy else {
                try release(Array(claimed[index...]), now: now)
                logger.info("wallet pushes handed back before their lease ran out", [("count", String(claimed.count - index))])
                return index
            }
            let outcome = identities[push.typeIdentifier].flatMap { $0 }.map { send(push, identity: $0) }
                ?? .failed("no active identity for the topic")
            try record(push, outcome: outcome, now: now)
        }
        return claimed.count
    }

    /// Un-claims pushes this pass will not send: due at once for any node, the attempt not counted. Only
    /// a push still under this claim (same `attempts`) is touched.
    func release(_ pushes: [Push], now: Date) throws {
        _ = try pool.execute("""
            UPDATE wallet_pushes p SET attempts = p.attempts - 1, next_attempt_at = $3
              FROM unnest($1::bigint[], $2::int[]) AS c(push_id, attempts)
             WHERE p.push_id = c.push_id AND p.attempts = c.attempts
            """, [PGArray.text(pushes.map { String($0.pushId) }), PGArray.text(pushes.map { String($0.attempts) }), now])
    }

    func clientIdentity(kind: WalletObjectKind, typeIdentifier: String) throws -> TLSClientIdentity? {
        guard let identity = try keys.walletIdentity(kind: kind.identityKind, typeIdentifier: typeIdentifier) else { return nil }
        let pem = KeyStore.pemBytes(label: "PRIVATE KEY", der: try identity.signing.privateKey.pkcs8DER())
        var keyBytes = pem.withUnsafeBytes { Array($0) }
        return TLSClientIdentity(certificatePEM: Array(identity.signing.certificate.pem.utf8),
                                 privateKeyPEM: SecretPEM(zeroingSource: &keyBytes))
    }

    func send(_ push: Push, identity: TLSClientIdentity) -> Outcome {
        var options = HTTPClientOptions()
        options.http2 = true
        options.clientIdentity = identity
        options.caFile = configuration.apnsCAFile
        options.totalTimeoutMilliseconds = configuration.pushTimeoutMilliseconds
        let token = push.pushToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let request = HTTPClientRequest(method: "POST", url: "\(configuration.apnsURL)/3/device/\(token)",
                                        headers: [("apns-topic", push.typeIdentifier), ("content-type", "application/json")],
                                        body: Array("{}".utf8))
        do {
            let response = try client.send(request, options: options)
            switch response.status {
            case 200: return .delivered
            case 410: return .gone
            default: return .failed("APNs status \(response.status)")
            }
        } catch {
            return .failed("\(error)")
        }
    }

    func record(_ push: Push, outcome: Outcome, now: Date) throws {
        switch outcome {
        case .delivered:
            _ = try pool.execute("DELETE FROM wallet_pushes WHERE push_id = $1 AND attempts = $2", [push.pushId, push.attempts])
        case .gone:
            let removed = try pool.transaction { conn -> Int in
                _ = try conn.execute("DELETE FROM wallet_pushes WHERE push_id = $1 AND attempts = $2", [push.pushId, push.attempts])
                return try conn.execute("""
                    DELETE FROM wallet_registrations
                    WHERE kind = $1 AND device_identifier = $2 AND type_identifier = $3 AND object_identifier = $4 AND push_token = $5
                    """, [push.kind.rawValue, push.deviceIdentifier, push.typeIdentifier, push.objectIdentifier, push.pushToken])
            }
            if removed > 0 {
                logger.info("wallet registration removed after APNs 410", [("kind", push.kind.rawValue), ("topic", push.typeIdentifier)])
            }
        case .failed(let reason):
            guard push.attempts < configuration.pushAttemptsMax else {
                _ = try pool.execute("DELETE FROM wallet_pushes WHERE push_id = $1 AND attempts = $2", [push.pushId, push.attempts])
                logger.warning("wallet push dropped after retries", [("topic", push.typeIdentifier), ("reason", reason)])
                return
            }
            let delay = min(configuration.pushBackoffMaxMilliseconds,
                            configuration.pushBackoffMilliseconds << min(push.attempts - 1, 20))
            _ = try pool.execute("""
                UPDATE wallet_pushes SET next_attempt_at = $2::timestamptz + $3::bigint * interval '1 millisecond', last_error = $4
                WHERE push_id = $1 AND attempts = $5
                """, [push.pushId, now, delay, String(reason.prefix(256)), push.attempts])
            logger.warning("wallet push failed; will retry", [("topic", push.typeIdentifier), ("reason", String(reason.prefix(256)))])
        }
    }
}
