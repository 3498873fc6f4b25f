import Testing
@testable import FinanceStore

let keyA = HistoryTokenKey(keyID: 1) { testHash(key: Array("key-a".utf8), $0) }
let keyB = HistoryTokenKey(keyID: 2) { testHash(key: Array("key-b".utf8), $0) }

@Suite struct HistoryTokenTests {
    let codec = HistoryTokenCodec(signingKey: keyA)
    let account = makeContext().identity.id("account", "psp:adyen:EUR")
    var scope: HistoryScope { get throws { try HistoryScope(merchantID: "m_1", resource: .transactions, accountID: account) } }
    let position = HistoryPosition(epoch: 3, xid: 1_234_567, seq: 89)

    func rejection(_ token: String, scope: HistoryScope, epoch: UInt32 = 3, now: FinanceTimestamp = ts(0),
                   codec: HistoryTokenCodec? = nil) -> FinanceError.TokenRejection? {
        let error = financeError { _ = try (codec ?? self.codec).verify(token, scope: scope, currentEpoch: epoch, now: now) }
        #expect(error?.code == .historyTokenInvalid)
        return error?.tokenRejection
    }

    @Test func roundTrip() throws {
        let token = codec.issue(scope: try scope, position: position, now: ts(0))
        #expect(token.hasPrefix("hst1."))
        #expect(!token.contains("m_1"))
        #expect(try codec.verify(token, scope: try scope, currentEpoch: 3, now: ts(60)) == position)
        // A rotated-out key still verifies while kept in verificationKeys.
        let rotated = HistoryTokenCodec(signingKey: keyB, verificationKeys: [keyA])
        #expect(try rotated.verify(token, scope: try scope, currentEpoch: 3, now: ts(60)) == position)
        #expect(rejection(token, scope: try scope, codec: HistoryTokenCodec(signingKey: keyB)) == .unknownKey)
    }

    @Test func everyBitFlipIsRefused() throws {
        let token = codec.issue(scope: try scope, position: position, now: ts(0))
        let bytes = try #require(Base64URL.decode(String(token.dropFirst(5))))
        for index in bytes.indices {
            var flipped = bytes
            flipped[index] ^= 0x01
            let reason = rejection("hst1." + Base64URL.encode(flipped), scope: try scope)
            let expected: FinanceError.TokenRejection = index == 0 ? .unsupportedVersion : (index == 1 ? .unknownKey : .forged)
            #expect(reason == expected, "byte \(index)")
        }
    }

    @Test func foreignScopesAreRefused() throws {
        let token = codec.issue(scope: try scope, position: position, now: ts(0))
        let other = makeContext().identity.id("account", "psp:stripe:EUR")
        let scopes = [
            try HistoryScope(merchantID: "m_2", resource: .transactions, accountID: account),
            try HistoryScope(merchantID: "m_1", resource: .transactions, accountID: other),
            try HistoryScope(merchantID: "m_1", resource: .accountBalances, accountID: account),
            try HistoryScope(merchantID: "m_1", resource: .accounts, accountID: nil),
        ]
        for foreign in scopes { #expect(rejection(token, scope: foreign) == .foreignScope) }
        #expect(financeError { _ = try HistoryScope(merchantID: "m_1", resource: .transactions, accountID: nil) }?.field
                == "accountID")
    }

    @Test func expiryEpochAndClockAreChecked() throws {
        let token = codec.issue(scope: try scope, position: position, now: ts(0))
        let lifetime = FinanceLimits().changeLogRetentionSeconds - FinanceLimits().writeTransactionMaxSeconds
        #expect(try codec.verify(token, scope: try scope, currentEpoch: 3, now: ts(lifetime)) == position)
        #expect(rejection(token, scope: try scope, now: ts(lifetime + 1)) == .expired)
        #expect(rejection(token, scope: try scope, epoch: 4) == .epochChanged)
        #expect(try codec.verify(token, scope: try scope, currentEpoch: 3, now: ts(-300)) == position)
        #expect(rejection(token, scope: try scope, now: ts(-301)) == .issuedInFuture)
    }

    @Test func malformedAndOtherVersionsAreRefused() throws {
        let token = codec.issue(scope: try scope, position: position, now: ts(0))
        #expect(rejection("hst2." + token.dropFirst(5), scope: try scope) == .unsupportedVersion)
        for bad in ["", "hst1.", "hst1.!!!!", "abc", "hst1." + token.dropFirst(5).dropLast(3), "hst1" + token.dropFirst(5),
                    token + "A"] {
            #expect(rejection(bad, scope: try scope) == .malformed, "\(bad)")
        }
        // A validly signed body of another version is still refused by version.
        var body = try #require(Base64URL.decode(String(token.dropFirst(5)))).prefix(HistoryTokenCodec.bodyCount)
        body[0] = 2
        let resigned = Array(body) + keyA.mac(Array("token".utf8) + Array(body))
        #expect(rejection("hst1." + Base64URL.encode(resigned), scope: try scope) == .unsupportedVersion)
        // Size limit: at the boundary the size check passes (and the body fails), just past it is refused first.
        let limits = FinanceLimits()
        #expect(rejection(String(repeating: "A", count: limits.historyTokenBytesMax + 1), scope: try scope) == .malformed)
        #expect(token.utf8.count < limits.historyTokenBytesMax)
    }
}

@Suite struct HistoryPageTests {
    let codec = HistoryTokenCodec(signingKey: keyA)
    var scope: HistoryScope { get throws { try HistoryScope(merchantID: "m_1", resource: .accounts, accountID: nil) } }

    func id(_ n: UInt64) -> FinanceID { FinanceID(high: 0, low: n) }
    func row(_ xid: UInt64, _ seq: Int64, _ op: ChangeOperation, _ entity: UInt64, _ payload: String?) -> ChangeLogRow<String> {
        ChangeLogRow(position: HistoryPosition(epoch: 1, xid: xid, seq: seq), operation: op, entityID: id(entity), payload: payload)
    }

    @Test func dedupKeepsEachEntityOnceWithItsLatestState() throws {
        let rows = [
            // Payloads are each entity's current state, joined at read time.
            row(10, 1, .insert, 1, "a2"), row(10, 2, .update, 1, "a2"),   // insert+update → inserted once
            row(11, 3, .insert, 2, nil), row(12, 4, .delete, 2, nil),     // insert+delete → omitted
            row(12, 5, .update, 3, "c3"), row(13, 6, .update, 3, "c3"),   // update+update → updated once
            row(13, 7, .update, 4, nil), row(14, 8, .delete, 4, nil),     // update+delete → deleted
            row(14, 9, .delete, 5, "e2"), row(15, 10, .insert, 5, "e2"),  // delete+insert → updated
        ]
        let page = try HistoryPageBuilder.build(rows: rows, after: .origin(epoch: 1), horizon: 100, pageSize: 10,
                                                scope: try scope, codec: codec, now: ts(0))
        #expect(page.inserted == ["a2"])
        #expect(page.updated == ["c3", "e2"])
        #expect(page.deleted == [id(4)])
        #expect(!page.hasMore)
        #expect(page.newPosition == HistoryPosition(epoch: 1, xid: 15, seq: 10))
        #expect(try codec.verify(page.newToken, scope: try scope, currentEpoch: 1, now: ts(1)) == page.newPosition)
    }

    @Test func pageSizeHorizonAndHasMore() throws {
        let rows = (1...4).map { row(UInt64(10 + $0), Int64($0), .insert, UInt64($0), "e\($0)") }
        // Exactly pageSize eligible rows: no more.
        var page = try HistoryPageBuilder.build(rows: Array(rows.prefix(3)), after: .origin(epoch: 1), horizon: 100,
                                                pageSize: 3, scope: try scope, codec: codec, now: ts(0))
        #expect(page.inserted == ["e1", "e2", "e3"] && !page.hasMore)
        // One past pageSize: hasMore, and the extra row is not delivered.
        page = try HistoryPageBuilder.build(rows: rows, after: .origin(epoch: 1), horizon: 100, pageSize: 3,
                                            scope: try scope, codec: codec, now: ts(0))
        #expect(page.inserted == ["e1", "e2", "e3"] && page.hasMore)
        #expect(page.newPosition.seq == 3)
        // Rows at or above the horizon are never delivered, and do not count as "more".
        page = try HistoryPageBuilder.build(rows: rows, after: .origin(epoch: 1), horizon: 13, pageSize: 3,
                                            scope: try scope, codec: codec, now: ts(0))
        #expect(page.inserted == ["e1", "e2"] && !page.hasMore)
        // Nothing new: the token keeps the position.
        page = try HistoryPageBuilder.build(rows: [ChangeLogRow<String>](), after: HistoryPosition(epoch: 1, xid: 9, seq: 9),
                                            horizon: 13, pageSize: 3, scope: try scope, codec: codec, now: ts(0))
        #expect(page.newPosition == HistoryPosition(epoch: 1, xid: 9, seq: 9) && page.inserted.isEmpty)
    }

    @Test func rowsOutOfOrderOrBehindTheTokenAreRefused() throws {
        let cases: [[ChangeLogRow<String>]] = [
            [row(11, 2, .insert, 1, "a"), row(10, 3, .insert, 2, "b")],
            [row(5, 1, .insert, 1, "a")],                       // not after the token position
            [row(11, 1, .insert, 1, "a"), row(11, 1, .update, 1, "a")],  // repeated position
        ]
        for rows in cases {
            let error = financeError {
                _ = try HistoryPageBuilder.build(rows: rows, after: HistoryPosition(epoch: 1, xid: 5, seq: 1), horizon: 100,
                                                 pageSize: 10, scope: try scope, codec: codec, now: ts(0))
            }
            #expect(error?.code == .changeLogInvalid)
        }
    }

    @Test func preEncodedPayloadsRenderAsOneJSONBody() throws {
        let rows = [ChangeLogRow<[UInt8]>(position: HistoryPosition(epoch: 1, xid: 10, seq: 1), operation: .insert,
                                          entityID: id(1), payload: Array("{\"id\":1}".utf8)),
                    ChangeLogRow<[UInt8]>(position: HistoryPosition(epoch: 1, xid: 10, seq: 2), operation: .delete,
                                          entityID: id(2), payload: nil)]
        let page = try HistoryPageBuilder.build(rows: rows, after: .origin(epoch: 1), horizon: 11, pageSize: 5,
                                                scope: try scope, codec: codec, now: ts(0))
        #expect(String(decoding: page.jsonBody(), as: UTF8.self) == "{\"inserted\":[{\"id\":1}],\"updated\":[],\"deleted\":"
            + "[\"00000000-0000-0000-0000-000000000002\"],\"newToken\":\"\(page.newToken)\",\"hasMore\":false}")
    }
}
