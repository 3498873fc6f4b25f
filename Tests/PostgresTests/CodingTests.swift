import Foundation
import Testing
@testable import Postgres

extension PostgresIntegration {
    @Suite struct Coding {
        @Test func everyTypeRoundTripsThroughATable() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let table = TestDatabase.tableName("roundtrip")
            try pool.withConnection { connection in
                try connection.simpleQuery(SQL(unsafeSQL: """
                    CREATE TABLE \(table) (
                      id int4 PRIMARY KEY, s text, i int8, i64 int8, i32 int4, b bool, bytes bytea,
                      at timestamptz, u uuid)
                    """))
            }
            let at = Date(timeIntervalSince1970: 1_709_251_198.123456)  // 2024-02-29T23:59:58.123456Z
            let uuid = UUID()
            let bytes: [UInt8] = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x5c, 0x27]
            let text = "grüße 'quoted' \\ back\\slash"
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (id, s, i, i64, i32, b, bytes, at, u)"
                + " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
            let inserted = try pool.execute(insert,
                [Int32(1), text, Int.min, Int64.max, Int32.min, true, bytes, at, uuid])
            #expect(inserted == 1)
            let nulls: [any PostgresEncodable] = [Int32(2), String?.none, Int?.none, Int64?.none, Int32?.none,
                                                  Bool?.none, [UInt8]?.none, Date?.none, UUID?.none]
            try pool.execute(insert, nulls)

            let row = try #require(try pool.query(SQL(unsafeSQL: """
                SELECT s, i, i64, i32, b, bytes, at, u, encode(bytes, 'hex') AS bytes_hex,
                       extract(epoch FROM at)::numeric::text AS at_epoch, u::text AS u_text, false AS f
                FROM \(table) WHERE id = 1
                """)).first)
            #expect(try row.decode("s", as: String.self) == text)
            #expect(try row.decode("i", as: Int.self) == Int.min)
            #expect(try row.decode("i64", as: Int64.self) == Int64.max)
            #expect(try row.decode("i32", as: Int32.self) == Int32.min)
            #expect(try row.decode("b", as: Bool.self) == true)
            #expect(try row.decode("f", as: Bool.self) == false)
            #expect(try row.decode("bytes", as: [UInt8].self) == bytes)
            // The server's own view of what was stored, independent of our decoder.
            #expect(try row.decode("bytes_hex", as: String.self) == "00017f80ff5c27")
            #expect(try row.decode("at_epoch", as: String.self) == "1709251198.123456")
            #expect(try row.decode("u_text", as: String.self) == uuid.uuidString.lowercased())
            let decodedAt = try row.decode("at", as: Date.self)
            #expect(abs(decodedAt.timeIntervalSince1970 - 1_709_251_198.123456) < 0.000_000_5)
            #expect(try row.decode("u", as: UUID.self) == uuid)
            #expect(try row.decode(0, as: String.self) == text)

            let nullRow = try #require(try pool.query(SQL(unsafeSQL: "SELECT * FROM \(table) WHERE id = 2")).first)
            for column in ["s", "i", "i64", "i32", "b", "bytes", "at", "u"] {
                #expect(try nullRow.decodeIfPresent(column, as: String.self) == nil)
            }
            #expect(try nullRow.decodeIfPresent("at", as: Date.self) == nil)
            #expect(try nullRow.decodeIfPresent("bytes", as: [UInt8].self) == nil)
            #expect(try nullRow.decode("id", as: Int.self) == 2)
        }

        @Test func timestamptzDecodesUnderAnySessionTimeZone() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            for zone in ["Asia/Kathmandu", "America/St_Johns", "UTC", "Pacific/Kiritimati"] {
                let decoded = try pool.transaction { connection in
                    try connection.execute(SQL(unsafeSQL: "SET LOCAL TimeZone = '\(zone)'"))
                    let row = try #require(try connection.query(
                        "SELECT '1969-07-20 20:17:40.5+00'::timestamptz AS at, $1::timestamptz AS echoed",
                        [Date(timeIntervalSince1970: 1_709_251_198.000_001)]).first)
                    return (try row.decode("at", as: Date.self), try row.decode("echoed", as: Date.self))
                }
                #expect(decoded.0.timeIntervalSince1970 == -14_182_939.5, "zone \(zone)")
                #expect(abs(decoded.1.timeIntervalSince1970 - 1_709_251_198.000_001) < 0.000_000_5, "zone \(zone)")
            }
        }

        @Test func decodeMismatchNamesColumnAndExpectedType() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let row = try #require(try pool.query(
                "SELECT 'not a number'::text AS amount_minor, NULL::int8 AS missing, 'maybe'::text AS flag, 2147483648::int8 AS big").first)
            let mismatch = expectPostgresError(.decodeFailed) { _ = try row.decode("amount_minor", as: Int.self) }
            #expect(mismatch?.column == "amount_minor")
            #expect(mismatch?.message.contains("Int") == true)
            #expect(mismatch?.message.contains("not a number") == false, "decode errors must not echo values")
            let null = expectPostgresError(.decodeFailed) { _ = try row.decode("missing", as: Int64.self) }
            #expect(null?.column == "missing")
            #expect(null?.message.contains("Int64") == true)
            #expect(expectPostgresError(.decodeFailed) { _ = try row.decode("flag", as: Bool.self) }?.column == "flag")
            #expect(expectPostgresError(.decodeFailed) { _ = try row.decode("big", as: Int32.self) }?.column == "big")
            #expect(try row.decode("big", as: Int64.self) == 2_147_483_648)
            #expect(expectPostgresError(.decodeFailed) { _ = try row.decode("nope", as: String.self) }?.column == "nope")
            expectPostgresError(.decodeFailed) { _ = try row.decode(4, as: String.self) }
            expectPostgresError(.decodeFailed) { _ = try row.decode("amount_minor", as: Date.self) }
            expectPostgresError(.decodeFailed) { _ = try row.decode("amount_minor", as: UUID.self) }
            expectPostgresError(.decodeFailed) { _ = try row.decode("amount_minor", as: [UInt8].self) }
        }

        @Test func rawRowsReadValuesInPlace() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            try pool.withConnection { connection in
                var seen: [(String?, Int64, Bool)] = []
                let count = try connection.forEachRow("""
                    SELECT * FROM (VALUES ('pay_1', 0::int8, true), (NULL, -9223372036854775808, false),
                                          ('€ ü', 9223372036854775807, true), ('x', -42, false)) AS v(t, n, b)
                    """) { row in
                    seen.append((try row.string(0), try row.int64(1), try row.bool(2)))
                }
                #expect(count == 4)
                #expect(seen.map(\.0) == ["pay_1", nil, "€ ü", "x"])
                #expect(seen.map(\.1) == [0, Int64.min, Int64.max, -42])
                #expect(seen.map(\.2) == [true, false, true, false])
                // Wrong shapes are decode errors naming the column, never a guess.
                var columns: [String?] = []
                var nullText: String? = "unset"
                _ = try connection.forEachRow("""
                    SELECT 'maybe'::text AS b, NULL::int8 AS n, '12a'::text AS t, 99999999999999999999::numeric AS big
                    """) { row in
                    columns.append(expectPostgresError(.decodeFailed) { _ = try row.bool(0) }?.column)
                    columns.append(expectPostgresError(.decodeFailed) { _ = try row.int64(1) }?.column)
                    columns.append(expectPostgresError(.decodeFailed) { _ = try row.int64(2) }?.column)
                    columns.append(expectPostgresError(.decodeFailed) { _ = try row.int64(3) }?.column)
                    columns.append(expectPostgresError(.decodeFailed) { _ = try row.requiredString(1) }?.column)
                    columns.append(expectPostgresError(.decodeFailed) { _ = try row.string(4) }?.column)
                    nullText = try row.string(1)
                }
                #expect(columns == ["0", "1", "2", "3", "1", "4"])
                #expect(nullText == nil)
            }
        }

        @Test func parametersAreBoundNotInterpolated() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let table = TestDatabase.tableName("inject")
            try pool.execute(SQL(unsafeSQL: "CREATE TABLE \(table) (name text)"))
            let hostile = "x'); DROP TABLE \(table); -- $1 \\' \""
            try pool.execute(SQL(unsafeSQL: "INSERT INTO \(table) (name) VALUES ($1)"), [hostile])
            let rows = try pool.query(SQL(unsafeSQL: "SELECT name FROM \(table)")).rows
            #expect(rows.count == 1)
            #expect(try rows.first?.decode("name", as: String.self) == hostile)
            expectPostgresError(.queryFailed) {
                _ = try pool.execute(SQL(unsafeSQL: "INSERT INTO \(table) (name) VALUES ($1)"), ["nul\u{0}byte"])
            }
        }

        @Test func uniqueViolationExposesSQLStateAndConstraintButNotValues() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let table = TestDatabase.tableName("uniq")
            try pool.execute(SQL(unsafeSQL: "CREATE TABLE \(table) (email text CONSTRAINT \(table)_email_key UNIQUE)"))
            let insert = SQL(unsafeSQL: "INSERT INTO \(table) (email) VALUES ($1)")
            try pool.execute(insert, ["secret-value@example.com"])
            let error = expectPostgresError(.queryFailed) { _ = try pool.execute(insert, ["secret-value@example.com"]) }
            #expect(error?.sqlState == "23505")
            #expect(error?.isUniqueViolation == true)
            #expect(error?.constraint == "\(table)_email_key")
            #expect(error.map { !String(describing: $0).contains("secret-value") } == true)
        }

        @Test func dataErrorsWithholdServerTextThatEchoesValues() throws {
            let pool = PostgresPool(configuration: TestDatabase.configuration())
            defer { pool.close() }
            let error = expectPostgresError(.queryFailed) { _ = try pool.query("SELECT $1::int4", ["pan 4111111111111111"]) }
            #expect(error?.sqlState == "22P02")
            #expect(error.map { !String(describing: $0).contains("4111") } == true)
            let syntax = expectPostgresError(.queryFailed) { _ = try pool.query("SELEC 1") }
            #expect(syntax?.sqlState == "42601")
        }
    }
}

@Suite struct TimestampTextTests {
    @Test(arguments: [
        ("2024-02-29 23:59:58.123456+00", Int64(1_709_251_198_123_456)),
        ("2024-03-01 05:44:58.123456+05:45", Int64(1_709_251_198_123_456)),
        ("1969-07-20 16:47:40.5-03:30", Int64(-14_182_939_500_000)),
        ("1970-01-01 00:00:00+00", Int64(0)),
        ("1883-11-18 12:03:58-11:56:02", Int64(-2_717_625_600_000_000)),
        ("2024-02-29T23:59:58.1Z", Int64(1_709_251_198_100_000)),
    ])
    func parsesPostgresOutput(text: String, micros: Int64) {
        #expect(TimestampText.parse(text) == micros)
    }

    @Test(arguments: ["infinity", "2024-02-29 23:59:58", "2024-02-29 23:59:58+00 BC", "2024-13-01 00:00:00+00",
                      "2024-02-29 23:59:58.1234567+00", "", "2024-02-29 24:00:00+00"])
    func rejectsWhatIsNotATimestamptz(text: String) {
        #expect(TimestampText.parse(text) == nil)
    }

    @Test func formatsRFC3339UTCWithMicroseconds() {
        #expect(TimestampText.format(microsecondsSince1970: 1_709_251_198_123_456) == "2024-02-29T23:59:58.123456Z")
        #expect(TimestampText.format(microsecondsSince1970: -14_182_939_500_000) == "1969-07-20T20:17:40.500000Z")
        #expect(TimestampText.format(microsecondsSince1970: 0) == "1970-01-01T00:00:00.000000Z")
    }
}
