import Testing
@testable import Postgres

/// pgoutput protocol v1 messages built byte by byte from PostgreSQL's "Logical Replication Message
/// Formats", and WAL positions.
@Suite struct PgOutputTests {
    func u64(_ v: UInt64) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: v >> (UInt64($0) * 8)) } }
    func u32(_ v: UInt32) -> [UInt8] { (0..<4).reversed().map { UInt8(truncatingIfNeeded: v >> (UInt32($0) * 8)) } }
    func cstring(_ s: String) -> [UInt8] { Array(s.utf8) + [0] }

    @Test func beginCommitRelationAndInsertDecode() throws {
        let begin: [UInt8] = [UInt8(ascii: "B")] + u64(0x1_0000_00A0) + u64(12_345) + u32(777)
        #expect(try PgOutputMessage.parse(begin) == .begin(finalLSN: LogSequenceNumber(0x1_0000_00A0), commitMicroseconds: 12_345,
            xid: 777))
        let commit: [UInt8] = [UInt8(ascii: "C"), 0] + u64(0xA0) + u64(0xC8) + u64(99)
        #expect(try PgOutputMessage.parse(commit) == .commit(commitLSN: LogSequenceNumber(0xA0), endLSN: LogSequenceNumber(0xC8),
                                                             commitMicroseconds: 99))
        var relation: [UInt8] = [UInt8(ascii: "R")] + u32(16_400) + cstring("public") + cstring("finance_change") + [UInt8(ascii: "d"), 0,
            2]
        relation += [1] + cstring("seq") + u32(20) + u32(0xFFFF_FFFF)
        relation += [0] + cstring("op") + u32(25) + u32(0xFFFF_FFFF)
        #expect(try PgOutputMessage.parse(relation) == .relation(id: 16_400, namespace: "public", name: "finance_change",
                                                                 columns: ["seq", "op"]))
        let insert: [UInt8] = [UInt8(ascii: "I")] + u32(16_400) + [UInt8(ascii: "N"), 0, 3]
            + [UInt8(ascii: "t")] + u32(2) + Array("42".utf8) + [UInt8(ascii: "n")] + [UInt8(ascii: "t")] + u32(6)
                + Array("insért".utf8).prefix(6)
        #expect(try PgOutputMessage.parse(insert) == .insert(xid: nil, relationID: 16_400, values: ["42", nil,
            String(decoding: Array("insért".utf8).prefix(6), as: UTF8.self)]))
        #expect(try PgOutputMessage.parse([UInt8(ascii: "U"), 1, 2]) == .other(UInt8(ascii: "U")))
    }

    @Test func streamedTransactionsDecodeWithTheirXids() throws {
        #expect(try PgOutputMessage.parse([UInt8(ascii: "S")] + u32(900) + [1]) == .streamStart(xid: 900, firstSegment: true))
        #expect(try PgOutputMessage.parse([UInt8(ascii: "E")]) == .streamStop)
        let insert: [UInt8] = [UInt8(ascii: "I")] + u32(901) + u32(16_400) + [UInt8(ascii: "N"), 0, 1, UInt8(ascii: "t")] + u32(1) + [0x37]
        #expect(try PgOutputMessage.parse(insert, inStream: true) == .insert(xid: 901, relationID: 16_400, values: ["7"]))
        let relation: [UInt8] = [UInt8(ascii: "R")] + u32(901) + u32(16_400) + cstring("public") + cstring("t") + [UInt8(ascii: "d"), 0, 0]
        #expect(try PgOutputMessage.parse(relation, inStream: true) == .relation(id: 16_400, namespace: "public", name: "t", columns: []))
        let commit: [UInt8] = [UInt8(ascii: "c")] + u32(900) + [0] + u64(0x10) + u64(0x20) + u64(5)
        #expect(try PgOutputMessage.parse(commit) == .streamCommit(xid: 900, commitLSN: LogSequenceNumber(0x10),
                                                                   endLSN: LogSequenceNumber(0x20), commitMicroseconds: 5))
        #expect(try PgOutputMessage.parse([UInt8(ascii: "A")] + u32(900) + u32(901)) == .streamAbort(xid: 900, subxid: 901))
    }

    @Test func truncatedOrMalformedMessagesAreDecodeFailures() {
        let cases: [(String, [UInt8])] = [
            ("empty", []),
            ("short begin", [UInt8(ascii: "B"), 0, 0]),
            ("relation name without NUL", [UInt8(ascii: "R"), 0, 0, 0, 1] + Array("public".utf8)),
            ("insert value longer than the message", [UInt8(ascii: "I"), 0, 0, 0, 1, UInt8(ascii: "N"), 0, 1, UInt8(ascii: "t"), 0, 0, 0,
                9, 65]),
            ("insert without new tuple", [UInt8(ascii: "I"), 0, 0, 0, 1, UInt8(ascii: "K"), 0, 0]),
            ("unknown value kind", [UInt8(ascii: "I"), 0, 0, 0, 1, UInt8(ascii: "N"), 0, 1, UInt8(ascii: "x")]),
        ]
        for (name, bytes) in cases {
            var code: PostgresError.Code?
            do { _ = try PgOutputMessage.parse(bytes) } catch { code = error.code }
            #expect(code == .decodeFailed, "\(name)")
        }
    }

    @Test func logSequenceNumbersParseAndPrintLikePostgreSQL() {
        #expect(LogSequenceNumber(parsing: "16/B374D848")?.value == 0x16_B374_D848)
        #expect(LogSequenceNumber(parsing: "0/0") == .zero)
        #expect(LogSequenceNumber(0x16_B374_D848).description == "16/B374D848")
        #expect(LogSequenceNumber(parsing: "FFFFFFFF/FFFFFFFF")?.value == UInt64.max)
        for bad in ["", "16", "16/", "/1", "G/1", "1/2/3", "123456789/0"] {
            #expect(LogSequenceNumber(parsing: bad) == nil, "\(bad)")
        }
        #expect(LogSequenceNumber(1) < LogSequenceNumber(2))
    }
}
