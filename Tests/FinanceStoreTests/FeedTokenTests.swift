import Testing
@testable import FinanceStore

/// v2 tokens (feed positions) and the feed page builder (docs/finance-feed.md).
@Suite struct FeedTokenTests {
    let codec = HistoryTokenCodec(signingKey: keyA)
    let account = makeContext().identity.id("account", "psp:adyen:EUR")
    var scope: HistoryScope { get throws { try HistoryScope(merchantID: "m_1", resource: .transactions, accountID: account) } }
    let position = FeedPosition(epoch: 3, position: 987_654)

    func rejection(_ token: String, scope: HistoryScope, epoch: UInt32 = 3, now: FinanceTimestamp = ts(0),
                   codec: HistoryTokenCodec? = nil) -> FinanceError.TokenRejection? {
        let error = financeError { _ = try (codec ?? self.codec).resume(token, scope: scope, currentEpoch: epoch, now: now) }
        #expect(error?.code == .historyTokenInvalid)
        return error?.tokenRejection
    }

    @Test func v2RoundTripsAndV1StillResumes() throws {
        let token = codec.issue(scope: try scope, feedPosition: position, now: ts(0))
        #expect(token.hasPrefix("hst2."))
        #expect(!token.contains("m_1"))
        #expect(try codec.resume(token, scope: try scope, currentEpoch: 3, now: ts(60)) == .feed(position))
        let rotated = HistoryTokenCodec(signingKey: keyB, verificationKeys: [keyA])
        #expect(try rotated.resume(token, scope: try scope, currentEpoch: 3, now: ts(60)) == .feed(position))
        let legacy = HistoryPosition(epoch: 3, xid: 77, seq: 5)
        let v1 = codec.issue(scope: try scope, position: legacy, now: ts(0))
        #expect(try codec.resume(v1, scope: try scope, currentEpoch: 3, now: ts(60)) == .changeLog(legacy))
    }

    @Test func everyBitFlipOfAV2TokenIsRefused() throws {
        let token = codec.issue(scope: try scope, feedPosition: position, now: ts(0))
        let bytes = try #require(Base64URL.decode(String(token.dropFirst(5))))
        for index in bytes.indices {
            var flipped = bytes
            flipped[index] ^= 0x01
            let reason = rejection("hst2." + Base64URL.encode(flipped), scope: try scope)
            let expected: FinanceError.TokenRejection = index == 0 ? .unsupportedVersion : (index == 1 ? .unknownKey : .forged)
            #expect(reason == expected, "byte \(index)")
        }
    }

    /// One row per rule, in the order the codec checks them.
    @Test func refusals() throws {
        let token = codec.issue(scope: try scope, feedPosition: position, now: ts(0))
        let otherAccount = try HistoryScope(merchantID: "m_1", resource: .transactions, accountID: FinanceID(high: 1, low: 2))
        let lifetime = codec.limits.changeLogRetentionSeconds
        let rows: [(String, FinanceError.TokenRejection?, () throws -> FinanceError.TokenRejection?)] = [
            ("too long", .malformed, { rejection("hst2." + String(repeating: "A", count: codec.limits.historyTokenBytesMax),
                scope: try scope) }),
            ("not base64url", .malformed, { rejection("hst2.!!!", scope: try scope) }),
            ("truncated", .malformed, { rejection(String(token.dropLast(4)), scope: try scope) }),
            ("other scope", .foreignScope, { rejection(token, scope: otherAccount) }),
            ("other epoch", .epochChanged, { rejection(token, scope: try scope, epoch: 4) }),
            ("from the future", .issuedInFuture,
             { rejection(codec.issue(scope: try scope, feedPosition: position, now: ts(codec.limits.clockSkewMaxSeconds + 1)),
                 scope: try scope) }),
            ("at the end of its life", nil, { rejection(token, scope: try scope, now: ts(lifetime)) }),
            ("past its life", .expired, { rejection(token, scope: try scope, now: ts(lifetime + 1)) }),
        ]
        for (name, expected, check) in rows {
            if let expected {
                #expect(try check() == expected, "\(name)")
            } else {
                #expect(try codec.resume(token, scope: try scope, currentEpoch: 3, now: ts(lifetime)) == .feed(position), "\(name)")
            }
        }
    }

    func row(_ position: Int64, _ op: ChangeOperation, _ entity: UInt64, _ payload: String?) -> FeedLogRow<String> {
        FeedLogRow(position: FeedPosition(epoch: 1, position: position), operation: op, entityID: FinanceID(high: 0, low: entity),
                   payload: payload)
    }

    @Test func feedPagesDeduplicateAndPointAfterTheirLastRow() throws {
        let rows = [row(4, .insert, 1, "1/v2"), row(5, .update, 2, "2/v1"), row(7, .update, 1, "1/v2"),
                    row(9, .delete, 3, nil), row(10, .insert, 4, nil)]
        let page = try HistoryPageBuilder.build(feedRows: rows, after: FeedPosition(epoch: 1, position: 3), pageSize: 5,
                                                scope: try scope, codec: codec, now: ts(0))
        #expect(page.inserted == ["1/v2"])
        #expect(page.updated == ["2/v1"])
        #expect(page.deleted == [FinanceID(high: 0, low: 3)])
        #expect(page.newPosition == FeedPosition(epoch: 1, position: 10))
        #expect(!page.hasMore)
        #expect(try codec.resume(page.newToken, scope: try scope, currentEpoch: 1, now: ts(1)) == .feed(page.newPosition))

        let cut = try HistoryPageBuilder.build(feedRows: rows, after: FeedPosition(epoch: 1, position: 3), pageSize: 2,
                                               scope: try scope, codec: codec, now: ts(0))
        #expect(cut.hasMore && cut.newPosition.position == 5)
        let empty = try HistoryPageBuilder.build(feedRows: [FeedLogRow<String>](), after: FeedPosition(epoch: 1, position: 8),
                                                 pageSize: 2, scope: try scope, codec: codec, now: ts(0))
        #expect(empty.newPosition.position == 8 && !empty.hasMore && empty.inserted.isEmpty)
    }

    @Test func feedRowsOutOfOrderAreRefused() throws {
        for (name, rows) in [("not after the token", [row(3, .insert, 1, "x")]),
                             ("descending", [row(5, .insert, 1, "x"), row(4, .insert, 2, "y")]),
                             ("other epoch", [FeedLogRow(position: FeedPosition(epoch: 2, position: 9), operation: .insert,
                                                         entityID: FinanceID(high: 0, low: 1), payload: "x")])] {
            let error = financeError {
                _ = try HistoryPageBuilder.build(feedRows: rows, after: FeedPosition(epoch: 1, position: 3), pageSize: 5,
                                                 scope: try scope, codec: codec, now: ts(0))
            }
            #expect(error?.code == .changeLogInvalid, "\(name)")
        }
    }
}
