// FinanceKit's TransactionQuery / AccountQuery as query-string parameters (openapi.yaml,
// docs/finance-store.md §5.2): parsed with stable errors, applied in memory, and described as SQL
// fragments so the PostgreSQL shell pushes the same filter, order, limit and offset into one statement.

/// One decoded query-string pair (percent-decoding is the HTTP shell's job).
public struct QueryPair: Hashable, Sendable {
    /// Parameter name.
    public let name: String
    /// Decoded value.
    public let value: String

    /// Creates a pair.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// Sort direction.
public enum SortDirection: String, Sendable, Hashable {
    /// Ascending.
    case asc
    /// Descending.
    case desc
}

/// Transaction fields a client may sort by (a whitelist: SQL column names come from here only).
public enum TransactionSortField: String, Sendable, Hashable, CaseIterable {
    /// `transaction_date`.
    case transactionDate
    /// `posted_date` (nulls last in both directions).
    case postedDate
    /// `amount_minor`.
    case amount
    /// `id`: always the final tie-breaker, so the order is total and offsets are stable.
    case id

    /// The column in the shell's `finance_transaction` table.
    public var column: String {
        switch self {
        case .transactionDate: "transaction_date"
        case .postedDate: "posted_date"
        case .amount: "amount_minor"
        case .id: "id"
        }
    }
}

/// One sort key.
public struct TransactionSort: Hashable, Sendable {
    /// Field.
    public let field: TransactionSortField
    /// Direction.
    public let direction: SortDirection

    /// Creates a sort key.
    public init(_ field: TransactionSortField, _ direction: SortDirection) {
        self.field = field
        self.direction = direction
    }
}

/// A value bound to a `$n` placeholder of an `SQLPlan`.
public enum SQLBinding: Hashable, Sendable {
    /// `uuid`.
    case uuid(FinanceID)
    /// `text`.
    case text(String)
    /// `text[]`.
    case textArray([String])
    /// `int2[]`.
    case int16Array([Int16])
    /// `timestamptz`, sent as RFC 3339 text.
    case timestamp(FinanceTimestamp)
}

/// A filter, order and page expressed as SQL fragments built only from fixed text and `$n` placeholders.
public struct SQLPlan: Hashable, Sendable {
    /// `AND`-joined conditions (`"TRUE"` when none), to follow the shell's own `merchant_id = $1`.
    public let whereSQL: String
    /// Comma-joined `ORDER BY` items, ending with `id`.
    public let orderBySQL: String
    /// Values for the placeholders, in order.
    public let bindings: [SQLBinding]
    /// `LIMIT`.
    public let limit: Int
    /// `OFFSET`.
    public let offset: Int
}

/// FinanceKit `TransactionQuery` over HTTP: AND across parameters, any-of within a list.
public struct TransactionQuery: Hashable, Sendable {
    /// `accountID=`: one account.
    public var accountID: FinanceID?
    /// `status=a,b`: any of these (FinanceKit `predicate(forStatuses:)`); empty = any.
    public var statuses: [TransactionStatus] = []
    /// `transactionType=a,b` (`predicate(forTransactionTypes:)`); empty = any.
    public var transactionTypes: [TransactionType] = []
    /// `merchantCategoryCode=5812,5814` (`predicate(forMerchantCategoryCodes:)`); empty = any.
    public var merchantCategoryCodes: [Int16] = []
    /// `creditDebitIndicator=credit|debit`.
    public var creditDebitIndicator: CreditDebitIndicator?
    /// `transactionDateFrom=` RFC 3339, inclusive.
    public var transactionDateFrom: FinanceTimestamp?
    /// `transactionDateTo=` RFC 3339, exclusive.
    public var transactionDateTo: FinanceTimestamp?
    /// `sort=transactionDate:desc,id:asc`; `id` is appended ascending when absent.
    public var sort: [TransactionSort] = [TransactionSort(.transactionDate, .desc), TransactionSort(.id, .asc)]
    /// `limit=`: 1…`queryLimitMax`, default `queryLimitDefault`.
    public var limit: Int
    /// `offset=`: 0…`queryOffsetMax`.
    public var offset: Int = 0

    /// Every parameter name this query accepts.
    public static let parameterNames: Set<String> = [
        "accountID", "status", "transactionType", "merchantCategoryCode", "creditDebitIndicator",
        "transactionDateFrom", "transactionDateTo", "sort", "limit", "offset",
    ]

    /// A query with no filter and the default limit.
    public init(limits: FinanceLimits = FinanceLimits()) {
        self.limit = limits.queryLimitDefault
    }

    /// Parses query-string pairs; unknown, repeated, empty or out-of-range values are
    /// `query_parameter_invalid` naming the parameter (a typo never silently widens a query).
    public static func parse(_ pairs: [QueryPair], limits: FinanceLimits = FinanceLimits()) throws(FinanceError) -> TransactionQuery {
        var query = TransactionQuery(limits: limits)
        for (name, value) in try QueryParsing.unique(pairs, allowed: parameterNames) {
            switch name {
            case "accountID": query.accountID = try QueryParsing.id(name, value)
            case "status": query.statuses = try QueryParsing.list(name, value, limits) { TransactionStatus(rawValue: $0) }
            case "transactionType":
                query.transactionTypes = try QueryParsing.list(name, value, limits) { TransactionType(rawValue: $0) }
            case "merchantCategoryCode":
                query.merchantCategoryCodes = try QueryParsing.list(name, value, limits) { text in
                    guard text.utf8.count <= 4, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                    return Int16(text)
                }
            case "creditDebitIndicator":
                guard let indicator = CreditDebitIndicator(rawValue: value) else { throw QueryParsing.invalid(name) }
                query.creditDebitIndicator = indicator
            case "transactionDateFrom": query.transactionDateFrom = try QueryParsing.timestamp(name, value)
            case "transactionDateTo": query.transactionDateTo = try QueryParsing.timestamp(name, value)
            case "sort": query.sort = try parseSort(value, limits)
            case "limit": query.limit = try QueryParsing.integer(name, value, 1...limits.queryLimitMax)
            case "offset": query.offset = try QueryParsing.integer(name, value, 0...limits.queryOffsetMax)
            default: throw QueryParsing.invalid(name)
            }
        }
        if let from = query.transactionDateFrom, let to = query.transactionDateTo, from > to {
            throw QueryParsing.invalid("transactionDateTo", "before transactionDateFrom")
        }
        return query
    }

    private static func parseSort(_ value: String, _ limits: FinanceLimits) throws(FinanceError) -> [TransactionSort] {
        let items = value.split(separator: ",", omittingEmptySubsequences: false)
        guard items.count <= limits.querySortKeysMax else { throw QueryParsing.invalid("sort", "too many keys") }
        var keys: [TransactionSort] = []
        for item in items {
            let parts = item.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, let field = TransactionSortField(rawValue: String(parts[0])),
                  !keys.contains(where: { $0.field == field }) else { throw QueryParsing.invalid("sort") }
            var direction = SortDirection.asc
            if parts.count == 2 {
                guard let parsed = SortDirection(rawValue: String(parts[1])) else { throw QueryParsing.invalid("sort") }
                direction = parsed
            }
            keys.append(TransactionSort(field, direction))
        }
        if !keys.contains(where: { $0.field == .id }) { keys.append(TransactionSort(.id, .asc)) }
        return keys
    }

    /// True when `transaction` passes every filter.
    public func matches(_ transaction: Transaction) -> Bool {
        if let accountID, transaction.accountID != accountID { return false }
        if !statuses.isEmpty, !statuses.contains(transaction.status) { return false }
        if !transactionTypes.isEmpty, !transactionTypes.contains(transaction.transactionType) { return false }
        if !merchantCategoryCodes.isEmpty {
            guard let code = transaction.merchantCategoryCode, merchantCategoryCodes.contains(code) else { return false }
        }
        if let creditDebitIndicator, transaction.creditDebitIndicator != creditDebitIndicator { return false }
        if let transactionDateFrom, transaction.transactionDate < transactionDateFrom { return false }
        if let transactionDateTo, transaction.transactionDate >= transactionDateTo { return false }
        return true
    }

    /// Strict "a before b" under `sort` (nulls last in both directions, as the SQL plan says).
    public func orderedBefore(_ a: Transaction, _ b: Transaction) -> Bool {
        for key in sort {
            let order: Int = switch key.field {
            case .transactionDate: compare(a.transactionDate, b.transactionDate)
            case .amount: compare(a.transactionAmount.amountMinor, b.transactionAmount.amountMinor)
            case .id: compare(a.id, b.id)
            case .postedDate:
                switch (a.postedDate, b.postedDate) {
                case let (x?, y?): compare(x, y)
                case (nil, nil): 0
                case (nil, _): 2   // nulls last regardless of direction
                case (_, nil): -2
                }
            }
            if order == 0 { continue }
            if order == 2 { return false }
            if order == -2 { return true }
            return key.direction == .asc ? order < 0 : order > 0
        }
        return false
    }

    /// Filters, sorts and pages in memory: the reference the SQL plan must agree with.
    public func apply(to transactions: [Transaction]) -> [Transaction] {
        let sorted = transactions.filter(matches).sorted(by: orderedBefore)
        guard offset < sorted.count else { return [] }
        return Array(sorted[offset..<min(sorted.count, offset + limit)])
    }

    /// The same query as SQL fragments over `finance_transaction`; placeholders start at `firstParameter`.
    public func sqlPlan(firstParameter: Int) -> SQLPlan {
        var conditions: [String] = []
        var bindings: [SQLBinding] = []
        func bind(_ fragment: String, _ value: SQLBinding) {
            conditions.append(fragment.replacingPlaceholder(with: firstParameter + bindings.count))
            bindings.append(value)
        }
        if let accountID { bind("account_id = $?", .uuid(accountID)) }
        if !statuses.isEmpty { bind("status = ANY($?::text[])", .textArray(statuses.map(\.rawValue))) }
        if !transactionTypes.isEmpty {
            bind("transaction_type = ANY($?::text[])", .textArray(transactionTypes.map(\.rawValue)))
        }
        if !merchantCategoryCodes.isEmpty { bind("merchant_category_code = ANY($?::int2[])", .int16Array(merchantCategoryCodes)) }
        if let creditDebitIndicator { bind("credit_debit_indicator = $?", .text(creditDebitIndicator.rawValue)) }
        if let transactionDateFrom { bind("transaction_date >= $?::timestamptz", .timestamp(transactionDateFrom)) }
        if let transactionDateTo { bind("transaction_date < $?::timestamptz", .timestamp(transactionDateTo)) }
        let order = sort.map { key in
            "\(key.field.column) \(key.direction == .asc ? "ASC" : "DESC")\(key.field == .postedDate ? " NULLS LAST" : "")"
        }
        return SQLPlan(whereSQL: conditions.isEmpty ? "TRUE" : conditions.joined(separator: " AND "),
                       orderBySQL: order.joined(separator: ", "), bindings: bindings, limit: limit, offset: offset)
    }

    private func compare<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a == b ? 0 : 1) }
}

/// FinanceKit `AccountQuery` over HTTP: `kind`, `currencyCode`, `limit`, `offset`; ordered by
/// display name then id.
public struct AccountQuery: Hashable, Sendable {
    /// `kind=asset|liability`.
    public var kind: AccountKind?
    /// `currencyCode=EUR`.
    public var currencyCode: String?
    /// `limit=`.
    public var limit: Int
    /// `offset=`.
    public var offset: Int = 0

    /// Every parameter name this query accepts.
    public static let parameterNames: Set<String> = ["kind", "currencyCode", "limit", "offset"]

    /// A query with no filter and the default limit.
    public init(limits: FinanceLimits = FinanceLimits()) {
        self.limit = limits.queryLimitDefault
    }

    /// Parses query-string pairs with the same rules as `TransactionQuery.parse`.
    public static func parse(_ pairs: [QueryPair], limits: FinanceLimits = FinanceLimits()) throws(FinanceError) -> AccountQuery {
        var query = AccountQuery(limits: limits)
        for (name, value) in try QueryParsing.unique(pairs, allowed: parameterNames) {
            switch name {
            case "kind":
                guard let kind = AccountKind(rawValue: value) else { throw QueryParsing.invalid(name) }
                query.kind = kind
            case "currencyCode":
                guard (try? FinanceCurrency(code: value)) != nil else { throw QueryParsing.invalid(name) }
                query.currencyCode = value
            case "limit": query.limit = try QueryParsing.integer(name, value, 1...limits.queryLimitMax)
            case "offset": query.offset = try QueryParsing.integer(name, value, 0...limits.queryOffsetMax)
            default: throw QueryParsing.invalid(name)
            }
        }
        return query
    }

    /// Filters, sorts (display name, then id) and pages in memory.
    public func apply(to accounts: [Account]) -> [Account] {
        let sorted = accounts
            .filter { (kind == nil || $0.kind == kind) && (currencyCode == nil || $0.currencyCode == currencyCode) }
            .sorted { ($0.displayName, $0.id) < ($1.displayName, $1.id) }
        guard offset < sorted.count else { return [] }
        return Array(sorted[offset..<min(sorted.count, offset + limit)])
    }

    /// The same query as SQL fragments over `finance_account`.
    ///
    /// `display_name` must use the "C" collation in the schema so SQL and Swift order names alike.
    public func sqlPlan(firstParameter: Int) -> SQLPlan {
        var conditions: [String] = []
        var bindings: [SQLBinding] = []
        if let kind {
            conditions.append("kind = $?".replacingPlaceholder(with: firstParameter + bindings.count))
            bindings.append(.text(kind.rawValue))
        }
        if let currencyCode {
            conditions.append("currency_code = $?".replacingPlaceholder(with: firstParameter + bindings.count))
            bindings.append(.text(currencyCode))
        }
        return SQLPlan(whereSQL: conditions.isEmpty ? "TRUE" : conditions.joined(separator: " AND "),
                       orderBySQL: "display_name ASC, id ASC", bindings: bindings, limit: limit, offset: offset)
    }
}

/// Shared query-string rules.
enum QueryParsing {
    static func invalid(_ name: String, _ detail: String = "") -> FinanceError {
        FinanceError(.queryParameterInvalid, field: String(name.prefix(64)), detail: detail)
    }

    /// Refuses unknown names, repeats and empty values; returns pairs in input order.
    static func unique(_ pairs: [QueryPair], allowed: Set<String>) throws(FinanceError) -> [(String, String)] {
        var seen: Set<String> = []
        var result: [(String, String)] = []
        for pair in pairs {
            guard allowed.contains(pair.name) else { throw invalid(pair.name, "unknown parameter") }
            guard seen.insert(pair.name).inserted else { throw invalid(pair.name, "repeated") }
            guard !pair.value.isEmpty else { throw invalid(pair.name, "empty") }
            result.append((pair.name, pair.value))
        }
        return result
    }

    static func list<T: Equatable>(_ name: String, _ value: String, _ limits: FinanceLimits,
                                   _ parse: (String) -> T?) throws(FinanceError) -> [T] {
        let items = value.split(separator: ",", omittingEmptySubsequences: false)
        guard items.count <= limits.queryListValuesMax else { throw invalid(name, "more than \(limits.queryListValuesMax) values") }
        var result: [T] = []
        for item in items {
            guard let parsed = parse(String(item)) else { throw invalid(name) }
            if !result.contains(parsed) { result.append(parsed) }
        }
        return result
    }

    static func integer(_ name: String, _ value: String, _ range: ClosedRange<Int>) throws(FinanceError) -> Int {
        // Digits only: no sign, no spaces, no leading '+'; at most 9 digits so Int cannot overflow.
        guard value.utf8.count <= 9, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let number = Int(value), range.contains(number) else {
            throw invalid(name, "outside \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    static func id(_ name: String, _ value: String) throws(FinanceError) -> FinanceID {
        do { return try FinanceID(parsing: value) } catch { throw invalid(name) }
    }

    static func timestamp(_ name: String, _ value: String) throws(FinanceError) -> FinanceTimestamp {
        do { return try FinanceTimestamp(parsing: value) } catch { throw invalid(name) }
    }
}

extension String {
    /// Replaces the single `$?` marker of a fixed fragment with `$n`.
    fileprivate func replacingPlaceholder(with index: Int) -> String {
        let parts = split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].hasSuffix("$") else { return self }
        return parts[0] + String(index) + parts[1]
    }
}
