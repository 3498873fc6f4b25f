// Reconciliation: settlement report parsing and matching (pure; the shell does all I/O).

/// The one error type of the Reconciliation module: a stable machine code plus where and why.
///
/// `line` and `column` are 1-based positions in the file as a text editor shows them: `line` counts
/// physical lines (LF), `column` counts bytes from the start of that line (a leading UTF-8 BOM is not
/// counted). Field-level errors point at the first byte of the offending field.
public struct ReconciliationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Stable machine codes; tests and clients rely on the raw values.
    public enum Code: String, Sendable, Codable, CaseIterable {
        case csvUnterminatedQuote = "csv_unterminated_quote"
        case csvBareQuote = "csv_bare_quote"
        case csvTextAfterClosingQuote = "csv_text_after_closing_quote"
        case csvBareCarriageReturn = "csv_bare_carriage_return"
        case csvLineTooLong = "csv_line_too_long"
        case csvFieldTooLong = "csv_field_too_long"
        case csvTooManyFields = "csv_too_many_fields"
        case csvTooManyLines = "csv_too_many_lines"
        case csvInvalidUTF8 = "csv_invalid_utf8"
        case csvWrongColumnCount = "csv_wrong_column_count"
        case csvEmpty = "csv_empty"
        case headerInvalid = "header_invalid"
        case amountInvalid = "amount_invalid"
        case amountWrongDecimals = "amount_wrong_decimals"
        case amountOverflow = "amount_overflow"
        case currencyUnknown = "currency_unknown"
        case typeUnknown = "type_unknown"
        case dateInvalid = "date_invalid"
        case fieldRequired = "field_required"
    }

    /// What went wrong, as a stable code.
    public let code: Code
    /// 1-based physical line of the error.
    public let line: Int
    /// 1-based byte column of the error within `line`.
    public let column: Int
    /// Name of the column (header name) involved, when the error concerns one field.
    public let field: String?
    /// The limit that was exceeded, for limit errors.
    public let limit: Int?

    /// Creates an error; `field` and `limit` add context but never the offending value itself.
    public init(_ code: Code, line: Int, column: Int, field: String? = nil, limit: Int? = nil) {
        self.code = code
        self.line = line
        self.column = column
        self.field = field
        self.limit = limit
    }

    /// `code at line:column (field)`: safe to show, carries no file content.
    public var description: String {
        var text = "\(code.rawValue) at \(line):\(column)"
        if let field { text += " (\(field))" }
        if let limit { text += " limit \(limit)" }
        return text
    }
}
