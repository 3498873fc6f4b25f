/// The messages of PostgreSQL's built-in `pgoutput` plugin, protocol version 2 with `streaming 'on'`,
/// that Tender reads (PostgreSQL docs, "Logical Replication Message Formats"). Pure: bytes in, values out.
///
/// A transaction larger than `logical_decoding_work_mem` arrives while it is still running, in blocks
/// between `streamStart` and `streamStop`, and ends with `streamCommit` or `streamAbort`; inside a block
/// every data message carries the (sub)transaction's xid.
public enum PgOutputMessage: Equatable, Sendable {
    /// `B`: a transaction starts; its commit record will be at `finalLSN`.
    case begin(finalLSN: LogSequenceNumber, commitMicroseconds: Int64, xid: UInt32)
    /// `C`: the transaction committed at `commitLSN`; `endLSN` is just past its commit record.
    case commit(commitLSN: LogSequenceNumber, endLSN: LogSequenceNumber, commitMicroseconds: Int64)
    /// `R`: the columns of a relation, sent before its first change in a session.
    case relation(id: UInt32, namespace: String, name: String, columns: [String])
    /// `I`: a new row; values in text form (nil for NULL), in the relation's column order; `xid` inside
    /// a stream block (the writing subtransaction's, or the top-level one's).
    case insert(xid: UInt32?, relationID: UInt32, values: [String?])
    /// `S`: a block of an in-progress transaction starts.
    case streamStart(xid: UInt32, firstSegment: Bool)
    /// `E`: the block ends.
    case streamStop
    /// `c`: a streamed transaction committed.
    case streamCommit(xid: UInt32, commitLSN: LogSequenceNumber, endLSN: LogSequenceNumber, commitMicroseconds: Int64)
    /// `A`: a streamed transaction (`subxid == xid`) or one of its subtransactions rolled back.
    case streamAbort(xid: UInt32, subxid: UInt32)
    /// Any other message (update, delete, truncate, type, origin, logical message): not published here.
    case other(UInt8)

    /// Microseconds between 1970-01-01 and 2000-01-01, the protocol's epoch.
    public static let postgresEpochOffsetMicroseconds: Int64 = 946_684_800_000_000

    /// Decodes one message (`inStream`: between `streamStart` and `streamStop`, where data messages
    /// carry an xid); throws `decode_failed` on a truncated or malformed one.
    public static func parse(_ bytes: [UInt8], inStream: Bool = false) throws(PostgresError) -> PgOutputMessage {
        var reader = Reader(bytes: bytes)
        switch try reader.byte() {
        case UInt8(ascii: "S"):
            return .streamStart(xid: try reader.u32(), firstSegment: try reader.byte() == 1)
        case UInt8(ascii: "E"):
            return .streamStop
        case UInt8(ascii: "c"):
            let xid = try reader.u32()
            _ = try reader.byte()
            return .streamCommit(xid: xid, commitLSN: LogSequenceNumber(try reader.u64()), endLSN: LogSequenceNumber(try reader.u64()),
                                 commitMicroseconds: Int64(bitPattern: try reader.u64()))
        case UInt8(ascii: "A"):
            return .streamAbort(xid: try reader.u32(), subxid: try reader.u32())
        case UInt8(ascii: "B"):
            return .begin(finalLSN: LogSequenceNumber(try reader.u64()), commitMicroseconds: Int64(bitPattern: try reader.u64()),
                          xid: try reader.u32())
        case UInt8(ascii: "C"):
            _ = try reader.byte()
            return .commit(commitLSN: LogSequenceNumber(try reader.u64()), endLSN: LogSequenceNumber(try reader.u64()),
                           commitMicroseconds: Int64(bitPattern: try reader.u64()))
        case UInt8(ascii: "R"):
            if inStream { _ = try reader.u32() }
            let id = try reader.u32()
            let namespace = try reader.string()
            let name = try reader.string()
            _ = try reader.byte()
            let count = Int(try reader.u16())
            var columns: [String] = []
            for _ in 0..<count {
                _ = try reader.byte()
                columns.append(try reader.string())
                _ = try reader.u32()
                _ = try reader.u32()
            }
            return .relation(id: id, namespace: namespace, name: name, columns: columns)
        case UInt8(ascii: "I"):
            let xid = inStream ? try reader.u32() : nil
            let id = try reader.u32()
            guard try reader.byte() == UInt8(ascii: "N") else { throw Reader.malformed }
            let count = Int(try reader.u16())
            var values: [String?] = []
            values.reserveCapacity(count)
            for _ in 0..<count {
                switch try reader.byte() {
                case UInt8(ascii: "n"), UInt8(ascii: "u"): values.append(nil)
                case UInt8(ascii: "t"):
                    let length = Int(try reader.u32())
                    values.append(String(decoding: try reader.take(length), as: UTF8.self))
                default: throw Reader.malformed
                }
            }
            return .insert(xid: xid, relationID: id, values: values)
        case let kind:
            return .other(kind)
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        static let malformed = PostgresError(code: .decodeFailed, message: "malformed pgoutput message")

        mutating func take(_ count: Int) throws(PostgresError) -> ArraySlice<UInt8> {
            guard count >= 0, bytes.count - offset >= count else { throw Self.malformed }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }

        mutating func byte() throws(PostgresError) -> UInt8 { try take(1).first ?? 0 }

        mutating func integer(_ width: Int) throws(PostgresError) -> UInt64 {
            try take(width).reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func u16() throws(PostgresError) -> UInt16 { UInt16(try integer(2)) }
        mutating func u32() throws(PostgresError) -> UInt32 { UInt32(try integer(4)) }
        mutating func u64() throws(PostgresError) -> UInt64 { try integer(8) }

        mutating func string() throws(PostgresError) -> String {
            guard let end = bytes[offset...].firstIndex(of: 0) else { throw Self.malformed }
            defer { offset = end + 1 }
            return String(decoding: bytes[offset..<end], as: UTF8.self)
        }
    }
}
