// Opaque, signed, scope-bound history tokens (docs/finance-store.md §5.4–5.5, docs/reliability-security.md §4,
// docs/finance-feed.md).
//
// Layout v2 (issued now; big-endian), then base64url without padding after the prefix "hst2.":
//   [0] version = 2 · [1] key id · [2] resource · [3..<7] epoch · [7..<15] feed position
//   [15..<23] issued-at seconds · [23..<31] scope tag = MAC("scope" ‖ scope)[0..<8] · [31...] MAC(all before)
// Layout v1 (still read, "hst1.": the change-log (xid, seq) the horizon reader issued before the feed):
//   [0] version = 1 · [1] key id · [2] resource · [3..<7] epoch · [7..<15] xid · [15..<23] seq
//   [23..<31] issued-at seconds · [31..<39] scope tag = MAC("scope" ‖ scope)[0..<8] · [39...] MAC(all before)
// The scope itself (merchant, resource, account) is not in the token: the tag proves it, so a token
// leaks no merchant id, and a genuine token presented on another scope is told apart from a forgery.

/// Which FinanceKit history stream a token belongs to.
public enum HistoryResource: UInt8, Sendable, CaseIterable {
    /// `accountHistory(since:)`.
    case accounts = 1
    /// `accountBalanceHistory(forAccountID:since:)`.
    case accountBalances = 2
    /// `transactionHistory(forAccountID:since:)`.
    case transactions = 3

    /// The `scope_kind` column value in the change log.
    public var scopeKind: String {
        switch self {
        case .accounts: "accounts"
        case .accountBalances: "account_balances"
        case .transactions: "transactions"
        }
    }
}

/// One token stream: a merchant's accounts, or one account's balances or transactions.
public struct HistoryScope: Hashable, Sendable {
    /// Tender merchant id.
    public let merchantID: String
    /// Resource kind.
    public let resource: HistoryResource
    /// The account for balances and transactions; nil for accounts.
    public let accountID: FinanceID?

    /// Creates a scope; balances and transactions need `accountID`, accounts take none.
    public init(merchantID: String, resource: HistoryResource, accountID: FinanceID?) throws(FinanceError) {
        guard (resource == .accounts) == (accountID == nil) else {
            throw FinanceError(.queryParameterInvalid, field: "accountID",
                               detail: resource == .accounts ? "not allowed" : "required")
        }
        self.merchantID = merchantID
        self.resource = resource
        self.accountID = accountID
    }

    /// Canonical bytes, length-prefixed so that no two scopes share an encoding.
    var canonicalBytes: [UInt8] {
        Array("tender.finance.history-scope.v1".utf8) + BigEndian.bytes(UInt32(truncatingIfNeeded: merchantID.utf8.count))
            + Array(merchantID.utf8) + [resource.rawValue] + (accountID.map { [1] + $0.bytes } ?? [0])
    }
}

/// A resume position in the change log: everything at or before it (in `(xid, seq)` order, within
/// `epoch`) has been delivered, and no row at or before it can still appear (it was below the horizon).
public struct HistoryPosition: Hashable, Comparable, Sendable {
    /// Bumped on logical restore (xid counter not carried); older tokens become invalid.
    public let epoch: UInt32
    /// `xid8` of the last delivered row's writing transaction.
    public let xid: UInt64
    /// Identity `seq` of the last delivered row.
    public let seq: Int64

    /// Creates a position.
    public init(epoch: UInt32, xid: UInt64, seq: Int64) {
        self.epoch = epoch
        self.xid = xid
        self.seq = seq
    }

    /// Before every row of `epoch`: a catch-up from the beginning (no `since`).
    public static func origin(epoch: UInt32) -> HistoryPosition { HistoryPosition(epoch: epoch, xid: 0, seq: 0) }

    /// Change-log order: epoch, then xid, then seq.
    public static func < (lhs: HistoryPosition, rhs: HistoryPosition) -> Bool {
        (lhs.epoch, lhs.xid, lhs.seq) < (rhs.epoch, rhs.xid, rhs.seq)
    }
}

/// A resume position in the commit-ordered feed (`finance_feed.position`): every feed row of the scope
/// at or before it has been delivered. Positions are assigned by one writer in commit order, so no row
/// at or before a position the reader has seen can still appear.
public struct FeedPosition: Hashable, Comparable, Sendable {
    /// The change-log epoch (bumped by an operator to invalidate every token).
    public let epoch: UInt32
    /// `finance_feed.position` of the last delivered row (0: before every row).
    public let position: Int64

    /// Creates a position.
    public init(epoch: UInt32, position: Int64) {
        self.epoch = epoch
        self.position = position
    }

    /// Before every row of `epoch`: a catch-up from the beginning (no `since`).
    public static func origin(epoch: UInt32) -> FeedPosition { FeedPosition(epoch: epoch, position: 0) }

    /// Feed order: epoch, then position.
    public static func < (lhs: FeedPosition, rhs: FeedPosition) -> Bool {
        (lhs.epoch, lhs.position) < (rhs.epoch, rhs.position)
    }
}

/// Where a verified token resumes: a feed position (v2), or a change-log position of a v1 token, which
/// the shell maps onto the feed exactly or refuses (docs/finance-feed.md, "Tokens across the change").
public enum HistoryResume: Hashable, Sendable {
    /// A v2 token.
    case feed(FeedPosition)
    /// A v1 token from the horizon reader.
    case changeLog(HistoryPosition)
}

/// A MAC key for history tokens: a one-byte id and the MAC function (HMAC-SHA256 in production).
public struct HistoryTokenKey: Sendable {
    /// Key id written into tokens, so old keys can verify during rotation.
    public let keyID: UInt8
    /// The MAC; must return the same length (16…64 bytes) for every input.
    public let mac: @Sendable ([UInt8]) -> [UInt8]

    /// Creates a key.
    public init(keyID: UInt8, mac: @escaping @Sendable ([UInt8]) -> [UInt8]) {
        self.keyID = keyID
        self.mac = mac
    }
}

/// Issues and verifies history tokens; pure (time, keys and epoch are parameters).
public struct HistoryTokenCodec: Sendable {
    /// The key that signs new tokens.
    public let signingKey: HistoryTokenKey
    /// Keys accepted when verifying (the signing key is always accepted); keep old ones ≥ retention.
    public let verificationKeys: [HistoryTokenKey]
    /// Token size, retention, write-transaction and skew bounds.
    public let limits: FinanceLimits

    static let prefix = "hst1."
    static let version: UInt8 = 1
    static let bodyCount = 39
    static let feedPrefix = "hst2."
    static let feedVersion: UInt8 = 2
    static let feedBodyCount = 31

    /// Creates a codec.
    public init(signingKey: HistoryTokenKey, verificationKeys: [HistoryTokenKey] = [], limits: FinanceLimits = FinanceLimits()) {
        self.signingKey = signingKey
        self.verificationKeys = verificationKeys
        self.limits = limits
    }

    /// A token for `position` in `scope`, issued at `now`.
    public func issue(scope: HistoryScope, position: HistoryPosition, now: FinanceTimestamp) -> String {
        var body: [UInt8] = [Self.version, signingKey.keyID, scope.resource.rawValue]
        body += BigEndian.bytes(position.epoch) + BigEndian.bytes(position.xid) + BigEndian.bytes(position.seq)
        body += BigEndian.bytes(now.secondsSinceEpoch)
        body += Array(signingKey.mac(Array("scope".utf8) + scope.canonicalBytes).prefix(8))
        let tag = signingKey.mac(Array("token".utf8) + body)
        precondition(tag.count >= 16 && tag.count <= 64, "history token MAC must return 16...64 bytes")
        return Self.prefix + Base64URL.encode(body + tag)
    }

    /// A v2 token for the feed `position` in `scope`, issued at `now`.
    public func issue(scope: HistoryScope, feedPosition position: FeedPosition, now: FinanceTimestamp) -> String {
        var body: [UInt8] = [Self.feedVersion, signingKey.keyID, scope.resource.rawValue]
        body += BigEndian.bytes(position.epoch) + BigEndian.bytes(position.position)
        body += BigEndian.bytes(now.secondsSinceEpoch)
        body += Array(signingKey.mac(Array("scope".utf8) + scope.canonicalBytes).prefix(8))
        let tag = signingKey.mac(Array("token".utf8) + body)
        precondition(tag.count >= 16 && tag.count <= 64, "history token MAC must return 16...64 bytes")
        return Self.feedPrefix + Base64URL.encode(body + tag)
    }

    /// Where a token of either version resumes, with the same checks as `verify` (a v2 token lives
    /// for the whole retention: every feed row it has not read was written after it was issued).
    public func resume(_ token: String, scope: HistoryScope, currentEpoch: UInt32,
                       now: FinanceTimestamp) throws(FinanceError) -> HistoryResume {
        guard token.hasPrefix(Self.feedPrefix) else {
            return .changeLog(try verify(token, scope: scope, currentEpoch: currentEpoch, now: now))
        }
        guard token.utf8.count <= limits.historyTokenBytesMax else { throw .tokenInvalid(.malformed) }
        guard let bytes = Base64URL.decode(String(token.dropFirst(Self.feedPrefix.count))), !bytes.isEmpty else {
            throw .tokenInvalid(.malformed)
        }
        guard bytes[0] == Self.feedVersion else { throw .tokenInvalid(.unsupportedVersion) }
        let body = try authenticatedBody(bytes, bodyCount: Self.feedBodyCount, scope: scope, scopeTagAt: 23)
        let position = FeedPosition(epoch: BigEndian.read(UInt32.self, body[3..<7]),
                                    position: Int64(bitPattern: BigEndian.read(UInt64.self, body[7..<15])))
        guard position.epoch == currentEpoch, position.position >= 0 else { throw .tokenInvalid(.epochChanged) }
        try checkAge(issuedAt: Int64(bitPattern: BigEndian.read(UInt64.self, body[15..<23])),
                     lifetime: limits.changeLogRetentionSeconds, now: now)
        return .feed(position)
    }

    /// Key id, MAC and scope tag of a decoded token; returns the body.
    private func authenticatedBody(_ bytes: [UInt8], bodyCount: Int, scope: HistoryScope,
                                   scopeTagAt tagStart: Int) throws(FinanceError) -> [UInt8] {
        guard bytes.count > bodyCount else { throw .tokenInvalid(.malformed) }
        guard let key = ([signingKey] + verificationKeys).first(where: { $0.keyID == bytes[1] }) else {
            throw .tokenInvalid(.unknownKey)
        }
        let body = Array(bytes[0..<bodyCount])
        let expected = key.mac(Array("token".utf8) + body)
        guard bytes.count - bodyCount == expected.count else { throw .tokenInvalid(.malformed) }
        guard constantTimeEqual(expected, Array(bytes[bodyCount...])) else { throw .tokenInvalid(.forged) }
        let scopeTag = Array(key.mac(Array("scope".utf8) + scope.canonicalBytes).prefix(8))
        guard body[2] == scope.resource.rawValue, constantTimeEqual(scopeTag, Array(body[tagStart..<(tagStart + 8)])) else {
            throw .tokenInvalid(.foreignScope)
        }
        return body
    }

    /// Refuses a token issued in the future (beyond the skew) or older than `lifetime`.
    private func checkAge(issuedAt: Int64, lifetime: Int64, now: FinanceTimestamp) throws(FinanceError) {
        let (latest, overflowA) = now.secondsSinceEpoch.addingReportingOverflow(limits.clockSkewMaxSeconds)
        guard overflowA || issuedAt <= latest else { throw .tokenInvalid(.issuedInFuture) }
        let (age, overflowB) = now.secondsSinceEpoch.subtractingReportingOverflow(issuedAt)
        guard !overflowB, age <= lifetime else { throw .tokenInvalid(.expired) }
    }

    /// The position a v1 token resumes from, or `history_token_invalid` with a log-only sub-reason.
    ///
    /// Checks, cheapest first: size, prefix and version, base64url and length, key id, MAC (forged),
    /// scope (foreign), epoch (restore), issue time (future; older than retention → expired).
    public func verify(_ token: String, scope: HistoryScope, currentEpoch: UInt32,
                       now: FinanceTimestamp) throws(FinanceError) -> HistoryPosition {
        guard token.utf8.count <= limits.historyTokenBytesMax else { throw .tokenInvalid(.malformed) }
        guard token.hasPrefix(Self.prefix) else {
            // "hst<digits>." is a token of another version; anything else is not a token at all.
            let head = token.utf8.prefix { $0 != UInt8(ascii: ".") }
            let isOtherVersion = token.hasPrefix("hst") && head.count > 3 && head.count < token.utf8.count
                && head.dropFirst(3).allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            throw .tokenInvalid(isOtherVersion ? .unsupportedVersion : .malformed)
        }
        guard let bytes = Base64URL.decode(String(token.dropFirst(Self.prefix.count))), !bytes.isEmpty else {
            throw .tokenInvalid(.malformed)
        }
        guard bytes[0] == Self.version else { throw .tokenInvalid(.unsupportedVersion) }
        let body = try authenticatedBody(bytes, bodyCount: Self.bodyCount, scope: scope, scopeTagAt: 31)
        let position = HistoryPosition(epoch: BigEndian.read(UInt32.self, body[3..<7]),
                                       xid: BigEndian.read(UInt64.self, body[7..<15]),
                                       seq: Int64(bitPattern: BigEndian.read(UInt64.self, body[15..<23])))
        guard position.epoch == currentEpoch else { throw .tokenInvalid(.epochChanged) }
        // Rows this token has not read may have been written up to writeTransactionMaxSeconds before it
        // was issued; they stay in the log for changeLogRetentionSeconds (§5.4), so the token lives for
        // the difference, and never past it: nothing is silently reset.
        try checkAge(issuedAt: Int64(bitPattern: BigEndian.read(UInt64.self, body[23..<31])),
                     lifetime: limits.changeLogRetentionSeconds - limits.writeTransactionMaxSeconds, now: now)
        return position
    }

    private func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
