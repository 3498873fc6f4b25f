/// Column names of one result, shared by its rows.
final class PostgresColumns: Sendable {
    let names: [String]
    let indexByName: [String: Int]

    init(names: [String]) {
        self.names = names
        var index: [String: Int] = [:]
        for (position, name) in names.enumerated() where index[name] == nil { index[name] = position }
        self.indexByName = index
    }
}

/// One result row in text format; decode columns by name or position.
public struct PostgresRow: Sendable {
    let columns: PostgresColumns
    let values: [String?]

    /// The result's column names in order.
    public var columnNames: [String] { columns.names }

    /// Decodes a non-NULL column; NULL, a missing column or a type mismatch throw `decode_failed`
    /// naming the column and the expected type.
    public func decode<T: PostgresDecodable>(_ column: String, as: T.Type = T.self) throws(PostgresError) -> T {
        guard let value = try decodeIfPresent(column, as: T.self) else {
            throw PostgresError(code: .decodeFailed,
                                message: "column \"\(column)\" is NULL, expected \(T.self)", column: column)
        }
        return value
    }

    /// Decodes a column, returning `nil` for SQL NULL.
    public func decodeIfPresent<T: PostgresDecodable>(_ column: String, as: T.Type = T.self) throws(PostgresError) -> T? {
        guard let index = columns.indexByName[column] else {
            throw PostgresError(code: .decodeFailed,
                                message: "no column \"\(column)\" in result, expected \(T.self)", column: column)
        }
        guard let text = values[index] else { return nil }
        return try T.decode(postgresText: text, column: column)
    }

    /// Decodes a non-NULL column by zero-based position.
    public func decode<T: PostgresDecodable>(_ index: Int, as: T.Type = T.self) throws(PostgresError) -> T {
        guard let value = try decodeIfPresent(index, as: T.self) else {
            let name = columns.names[index]
            throw PostgresError(code: .decodeFailed,
                                message: "column \"\(name)\" is NULL, expected \(T.self)", column: name)
        }
        return value
    }

    /// Decodes a column by zero-based position, returning `nil` for SQL NULL.
    public func decodeIfPresent<T: PostgresDecodable>(_ index: Int, as: T.Type = T.self) throws(PostgresError) -> T? {
        guard values.indices.contains(index) else {
            throw PostgresError(code: .decodeFailed,
                                message: "no column at position \(index) (result has \(values.count)), expected \(T.self)",
                                column: String(index))
        }
        guard let text = values[index] else { return nil }
        return try T.decode(postgresText: text, column: columns.names[index])
    }
}

/// The rows and affected-row count of one statement.
public struct PostgresResult: Sendable {
    /// Rows returned (empty for commands without RETURNING).
    public let rows: [PostgresRow]
    /// Rows inserted/updated/deleted/selected as reported by the command tag (0 when none).
    public let affectedRows: Int
    /// The first row, if any.
    public var first: PostgresRow? { rows.first }
}
