// FinanceKit's model with FinanceKit's names (docs/finance-store.md §1, JSON shape §5.1). Amounts are
// always positive; direction is `creditDebitIndicator`, read from the account's point of view.

/// FinanceKit `CreditDebitIndicator`: `credit` increases an asset or decreases a liability (Apple doc).
public enum CreditDebitIndicator: String, Codable, Sendable, CaseIterable {
    /// Money in on an asset; owing less on a liability.
    case credit
    /// Money out of an asset; owing more on a liability.
    case debit
}

/// FinanceKit `TransactionType`; raw values are the Swift case names, as in Tender's JSON (§5.1).
public enum TransactionType: String, Codable, Sendable, CaseIterable {
    /// A credit or debit adjustment.
    case adjustment
    /// A cash machine withdrawal or deposit.
    case atm
    /// An eBill or eCheck payment.
    case billPayment
    /// A cheque.
    case check
    /// A deposit by the payer into the payee's bank account.
    case deposit
    /// A payment to a third party on agreed dates.
    case directDebit
    /// A direct deposit.
    case directDeposit
    /// A dividend.
    case dividend
    /// A fee or charge levied by the account provider.
    case fee
    /// Interest.
    case interest
    /// A loan drawdown or repayment.
    case loan
    /// A card payment at a point of sale (Apple Pay payments).
    case pointOfSale
    /// A refund.
    case refund
    /// A fixed amount on a specified date.
    case standingOrder
    /// A transfer between accounts.
    case transfer
    /// A value that does not map to a known type.
    case unknown
    /// A withdrawal of funds by another party.
    case withdrawal
}

/// FinanceKit `TransactionStatus`: authorized/pending → booked | rejected (bank-statement practice, §1.3).
public enum TransactionStatus: String, Codable, Sendable, CaseIterable {
    /// Authorized, not yet settled.
    case authorized
    /// Submitted, not yet settled.
    case pending
    /// Settled on the account.
    case booked
    /// Informational only.
    case memo
    /// Never settled (voided, expired, failed).
    case rejected
}

/// Asset or liability: the only two account kinds FinanceKit exposes (§1.1).
public enum AccountKind: String, Codable, Sendable, CaseIterable {
    /// Funds held for the merchant (processor balance, bank account).
    case asset
    /// Amounts the merchant owes (fees invoiced later).
    case liability
}

/// FinanceKit `CurrencyAmount`: a non-negative amount in minor units plus its ISO 4217 code.
///
/// JSON: `{"amount":"100.00","currencyCode":"EUR"}` with exactly the currency's digits (openapi.yaml).
public struct CurrencyAmount: Hashable, Sendable, Codable {
    /// Amount in minor units; never negative (direction lives in `creditDebitIndicator`).
    public let amountMinor: Int64
    /// ISO 4217 code.
    public let currencyCode: String

    /// Validates the currency and that the amount is not negative.
    public init(amountMinor: Int64, currencyCode: String) throws(FinanceError) {
        _ = try FinanceCurrency(code: currencyCode)
        guard amountMinor >= 0 else { throw FinanceError(.amountInvalid, field: "amount", detail: "negative") }
        self.amountMinor = amountMinor
        self.currencyCode = currencyCode
    }

    /// The decimal string of `amountMinor` with the currency's digits.
    public var decimalString: String {
        // The initialiser proved the code is known; the fallback keeps this total.
        (try? FinanceCurrency(code: currencyCode))?.formatAmount(amountMinor) ?? String(amountMinor)
    }

    private enum CodingKeys: String, CodingKey { case amount, currencyCode }

    /// Decodes and parses the decimal string exactly.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let code = try container.decode(String.self, forKey: .currencyCode)
        let text = try container.decode(String.self, forKey: .amount)
        let currency = try FinanceCurrency(code: code)
        self.amountMinor = try currency.parseAmount(text)
        self.currencyCode = code
    }

    /// Encodes `amount` as a decimal string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(decimalString, forKey: .amount)
        try container.encode(currencyCode, forKey: .currencyCode)
    }
}

/// FinanceKit `AccountCreditInformation` (liabilities only).
public struct AccountCreditInformation: Hashable, Sendable, Codable {
    /// The credit limit, if any.
    public var creditLimit: CurrencyAmount?
    /// The minimum next payment, if known.
    public var minimumNextPaymentAmount: CurrencyAmount?
    /// When the next payment is due, if known.
    public var nextPaymentDueDate: FinanceTimestamp?
    /// The overdue amount, if any.
    public var overduePaymentAmount: CurrencyAmount?

    /// Creates credit information; every field is optional in FinanceKit.
    public init(creditLimit: CurrencyAmount? = nil, minimumNextPaymentAmount: CurrencyAmount? = nil,
                nextPaymentDueDate: FinanceTimestamp? = nil, overduePaymentAmount: CurrencyAmount? = nil) {
        self.creditLimit = creditLimit
        self.minimumNextPaymentAmount = minimumNextPaymentAmount
        self.nextPaymentDueDate = nextPaymentDueDate
        self.overduePaymentAmount = overduePaymentAmount
    }

    private enum CodingKeys: String, CodingKey {
        case creditLimit, minimumNextPaymentAmount, nextPaymentDueDate, overduePaymentAmount
    }

    /// Encodes absent fields as explicit `null`, so every client sees one shape.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(creditLimit, forKey: .creditLimit)
        try container.encode(minimumNextPaymentAmount, forKey: .minimumNextPaymentAmount)
        try container.encode(nextPaymentDueDate, forKey: .nextPaymentDueDate)
        try container.encode(overduePaymentAmount, forKey: .overduePaymentAmount)
    }
}

/// FinanceKit `Account`, flattened with `kind` (§5.1): `creditInformation` is present iff a liability.
public struct Account: Identifiable, Hashable, Sendable, Codable {
    /// Unique account id.
    public let id: FinanceID
    /// Asset or liability.
    public let kind: AccountKind
    /// Human name ("Adyen EUR balance").
    public var displayName: String
    /// Optional longer description.
    public var accountDescription: String?
    /// Who holds the account (processor or bank).
    public var institutionName: String
    /// ISO 4217 code of every amount on the account.
    public let currencyCode: String
    /// When the account was opened (first use), if known.
    public var openingDate: FinanceTimestamp?
    /// Liability details; nil for assets.
    public var creditInformation: AccountCreditInformation?

    /// Creates an account; a liability without credit information gets an empty one (FinanceKit's shape).
    public init(id: FinanceID, kind: AccountKind, displayName: String, accountDescription: String? = nil,
                institutionName: String, currencyCode: String, openingDate: FinanceTimestamp? = nil,
                creditInformation: AccountCreditInformation? = nil) {
        self.id = id
        self.kind = kind
        self.displayName = displayName
        self.accountDescription = accountDescription
        self.institutionName = institutionName
        self.currencyCode = currencyCode
        self.openingDate = openingDate
        self.creditInformation = kind == .liability ? (creditInformation ?? AccountCreditInformation()) : nil
    }

    private enum CodingKeys: String, CodingKey {
        case id, kind, displayName, accountDescription, institutionName, currencyCode, openingDate, creditInformation
    }

    /// Decodes, enforcing "credit information iff liability".
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let kind = try c.decode(AccountKind.self, forKey: .kind)
        let credit = try c.decodeIfPresent(AccountCreditInformation.self, forKey: .creditInformation)
        if kind == .asset && credit != nil {
            throw DecodingError.dataCorruptedError(forKey: .creditInformation, in: c,
                                                   debugDescription: "asset accounts carry no creditInformation")
        }
        self.init(id: try c.decode(FinanceID.self, forKey: .id), kind: kind,
                  displayName: try c.decode(String.self, forKey: .displayName),
                  accountDescription: try c.decodeIfPresent(String.self, forKey: .accountDescription),
                  institutionName: try c.decode(String.self, forKey: .institutionName),
                  currencyCode: try c.decode(String.self, forKey: .currencyCode),
                  openingDate: try c.decodeIfPresent(FinanceTimestamp.self, forKey: .openingDate),
                  creditInformation: credit)
    }

    /// Encodes absent optionals as explicit `null` (§5.1 shows `"accountDescription":null`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(kind, forKey: .kind)
        try c.encode(displayName, forKey: .displayName)
        try c.encode(accountDescription, forKey: .accountDescription)
        try c.encode(institutionName, forKey: .institutionName)
        try c.encode(currencyCode, forKey: .currencyCode)
        try c.encode(openingDate, forKey: .openingDate)
        try c.encode(creditInformation, forKey: .creditInformation)
    }
}

/// FinanceKit `Balance`: a positive amount, when it was computed, and whether it is credit or debit.
public struct Balance: Hashable, Sendable, Codable {
    /// Positive amount.
    public let amount: CurrencyAmount
    /// When Tender computed the balance.
    public let asOfDate: FinanceTimestamp
    /// `credit` when an asset holds funds; `debit` when overdrawn or when a liability is owed.
    public let creditDebitIndicator: CreditDebitIndicator

    /// Creates a balance.
    public init(amount: CurrencyAmount, asOfDate: FinanceTimestamp, creditDebitIndicator: CreditDebitIndicator) {
        self.amount = amount
        self.asOfDate = asOfDate
        self.creditDebitIndicator = creditDebitIndicator
    }
}

/// FinanceKit `CurrentBalance`: available, booked, or both; JSON omits the absent side (§5.1).
public enum CurrentBalance: Hashable, Sendable, Codable {
    /// Only the available balance.
    case available(Balance)
    /// Only the booked balance.
    case booked(Balance)
    /// Both.
    case availableAndBooked(available: Balance, booked: Balance)

    /// The available side, if present.
    public var available: Balance? {
        switch self {
        case .available(let balance), .availableAndBooked(let balance, _): balance
        case .booked: nil
        }
    }

    /// The booked side, if present.
    public var booked: Balance? {
        switch self {
        case .booked(let balance), .availableAndBooked(_, let balance): balance
        case .available: nil
        }
    }

    private enum CodingKeys: String, CodingKey { case available, booked }

    /// Decodes `{available?, booked?}`; neither present is an error.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        switch (try c.decodeIfPresent(Balance.self, forKey: .available),
                try c.decodeIfPresent(Balance.self, forKey: .booked)) {
        case let (available?, booked?): self = .availableAndBooked(available: available, booked: booked)
        case let (available?, nil): self = .available(available)
        case let (nil, booked?): self = .booked(booked)
        case (nil, nil):
            throw DecodingError.dataCorruptedError(forKey: .available, in: c,
                                                   debugDescription: "currentBalance needs available or booked")
        }
    }

    /// Encodes the present sides only.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(available, forKey: .available)
        try c.encodeIfPresent(booked, forKey: .booked)
    }
}

/// FinanceKit `AccountBalance`: one account's balance at a point in time.
public struct AccountBalance: Identifiable, Hashable, Sendable, Codable {
    /// Balance id (stable per account, so history reports changes as updates).
    public let id: FinanceID
    /// The account it belongs to.
    public let accountID: FinanceID
    /// Available and/or booked.
    public let currentBalance: CurrentBalance

    /// Creates a balance record.
    public init(id: FinanceID, accountID: FinanceID, currentBalance: CurrentBalance) {
        self.id = id
        self.accountID = accountID
        self.currentBalance = currentBalance
    }

    /// The currency of the balance (both sides share it).
    public var currencyCode: String {
        (currentBalance.available ?? currentBalance.booked)?.amount.currencyCode ?? ""
    }
}

/// FinanceKit `Transaction`: one positive movement on one account.
public struct Transaction: Identifiable, Hashable, Sendable, Codable {
    /// Stable id: status changes update this same id.
    public let id: FinanceID
    /// The account it belongs to.
    public let accountID: FinanceID
    /// Positive amount in the account's currency.
    public let transactionAmount: CurrencyAmount
    /// Shopper-side amount when a different currency was charged.
    public var foreignCurrencyAmount: CurrencyAmount?
    /// Processor exchange rate as an exact decimal string (never a float).
    public var foreignCurrencyExchangeRate: String?
    /// Direction from the account's point of view.
    public let creditDebitIndicator: CreditDebitIndicator
    /// Human label.
    public var transactionDescription: String
    /// Raw source text (event kind and reference).
    public var originalTransactionDescription: String
    /// ISO 18245 merchant category code.
    public var merchantCategoryCode: Int16?
    /// The merchant's trading name.
    public var merchantName: String?
    /// When it was booked on the account; nil until booked.
    public var postedDate: FinanceTimestamp?
    /// When it happened.
    public let transactionDate: FinanceTimestamp
    /// FinanceKit transaction type.
    public let transactionType: TransactionType
    /// FinanceKit status.
    public var status: TransactionStatus

    /// Creates a transaction view.
    public init(id: FinanceID, accountID: FinanceID, transactionAmount: CurrencyAmount,
                foreignCurrencyAmount: CurrencyAmount? = nil, foreignCurrencyExchangeRate: String? = nil,
                creditDebitIndicator: CreditDebitIndicator, transactionDescription: String,
                originalTransactionDescription: String, merchantCategoryCode: Int16? = nil,
                merchantName: String? = nil, postedDate: FinanceTimestamp? = nil,
                transactionDate: FinanceTimestamp, transactionType: TransactionType, status: TransactionStatus) {
        self.id = id
        self.accountID = accountID
        self.transactionAmount = transactionAmount
        self.foreignCurrencyAmount = foreignCurrencyAmount
        self.foreignCurrencyExchangeRate = foreignCurrencyExchangeRate
        self.creditDebitIndicator = creditDebitIndicator
        self.transactionDescription = transactionDescription
        self.originalTransactionDescription = originalTransactionDescription
        self.merchantCategoryCode = merchantCategoryCode
        self.merchantName = merchantName
        self.postedDate = postedDate
        self.transactionDate = transactionDate
        self.transactionType = transactionType
        self.status = status
    }

    private enum CodingKeys: String, CodingKey {
        case id, accountID, transactionAmount, foreignCurrencyAmount, foreignCurrencyExchangeRate,
             creditDebitIndicator, transactionDescription, originalTransactionDescription,
             merchantCategoryCode, merchantName, postedDate, transactionDate, transactionType, status
    }

    /// Encodes absent optionals as explicit `null`, one shape for every client.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(accountID, forKey: .accountID)
        try c.encode(transactionAmount, forKey: .transactionAmount)
        try c.encode(foreignCurrencyAmount, forKey: .foreignCurrencyAmount)
        try c.encode(foreignCurrencyExchangeRate, forKey: .foreignCurrencyExchangeRate)
        try c.encode(creditDebitIndicator, forKey: .creditDebitIndicator)
        try c.encode(transactionDescription, forKey: .transactionDescription)
        try c.encode(originalTransactionDescription, forKey: .originalTransactionDescription)
        try c.encode(merchantCategoryCode, forKey: .merchantCategoryCode)
        try c.encode(merchantName, forKey: .merchantName)
        try c.encode(postedDate, forKey: .postedDate)
        try c.encode(transactionDate, forKey: .transactionDate)
        try c.encode(transactionType, forKey: .transactionType)
        try c.encode(status, forKey: .status)
    }
}
