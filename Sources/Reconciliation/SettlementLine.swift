// The common shape every settlement format is parsed into (docs/finance-store.md §4, openapi.yaml).
import Time

/// Settlement report formats Tender imports (`POST /v1/settlement-reports?format=`).
public enum SettlementReportFormat: String, Sendable, Codable, CaseIterable {
    /// Tender's own CSV (openapi.yaml).
    case generic
    /// Adyen's Settlement details report (docs/finance-store.md §4.1).
    case adyenSDR = "adyen-sdr"
}

/// What a settlement line is, independent of the processor's wording (openapi.yaml `type`).
public enum SettlementLineType: String, Sendable, Codable, CaseIterable {
    /// A captured payment settled to the merchant (Adyen `Settled`).
    case payment
    /// A refund (or a refund reversal, which carries a positive amount).
    case refund
    /// A processor fee not tied to one payment.
    case fee
    /// Funds taken back by a dispute.
    case chargeback
    /// Funds returned after a dispute was won.
    case chargebackReversal = "chargeback_reversal"
    /// Any other balance correction.
    case adjustment
    /// Funds sent from the processor balance to the merchant's bank.
    case payout
    /// A processor type Tender does not know (Adyen adds journal types over time): reported as an
    /// `adjustment` item with reason `journal_type_unknown`, counted in its batch, never booked.
    case unknown
}

/// A calendar date `YYYY-MM-DD` (proleptic Gregorian), the settlement's booking date.
public struct SettlementDate: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Year, 1...9999.
    public let year: Int
    /// Month, 1...12.
    public let month: Int
    /// Day of month, valid for the month and year.
    public let day: Int

    /// Parses exactly `YYYY-MM-DD`; nil for any other shape or an impossible date.
    public init?(_ text: Substring) {
        self.init(utf8: Array(text.utf8)[...])
    }

    /// Parses exactly `YYYY-MM-DD` from its UTF-8 bytes; nil for any other shape or an impossible date.
    public init?(utf8 bytes: ArraySlice<UInt8>) {
        let start = bytes.startIndex
        guard bytes.count == 10, bytes[start + 4] == UInt8(ascii: "-"), bytes[start + 7] == UInt8(ascii: "-"),
              let year = Self.number(bytes[start..<(start + 4)]), let month = Self.number(bytes[(start + 5)..<(start + 7)]),
              let day = Self.number(bytes[(start + 8)..<(start + 10)]),
              year >= 1, CivilCalendar.isValid(year: Int64(year), month: Int64(month), day: Int64(day))
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses exactly `YYYY-MM-DD`.
    public init?(_ text: String) { self.init(Substring(text)) }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// `YYYY-MM-DD`.
    public var description: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(10)
        appendText(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `YYYY-MM-DD` (the `description`) to `bytes`.
    public func appendText(to bytes: inout [UInt8]) {
        // year is 1...9999, month and day two digits: the fields are always 4, 2 and 2 digits wide.
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value / divisor % 10))
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(day, 2)
    }

    /// Days since 1970-01-01 (Time's civil calendar).
    public var daysSinceEpoch: Int {
        Int(CivilCalendar.days(year: Int64(year), month: Int64(month), day: Int64(day)))
    }

    /// Noon UTC of this date as Unix seconds, so the date survives any display time zone.
    public var noonUnixSeconds: Int64 {
        Int64(daysSinceEpoch) * 86_400 + 43_200
    }

    public static func < (lhs: SettlementDate, rhs: SettlementDate) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }

    /// Decodes from `YYYY-MM-DD`.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let date = SettlementDate(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "not YYYY-MM-DD"))
        }
        self = date
    }

    /// Encodes as `YYYY-MM-DD`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// One settlement event, parsed and validated, in the processor-balance view.
///
/// Sign convention: `grossMinor` and `netMinor` are signed from the processor balance's point of view
/// (money owed to the merchant grows = positive): a payment is positive, a refund, fee, chargeback
/// or payout negative. `feeMinor` is the processor's charge on this line, positive for a cost.
public struct SettlementLine: Sendable, Equatable, Codable {
    /// 1-based physical line where the record starts in the file.
    public var lineNumber: Int
    /// Identity of the line within its provider (docs/finance-store.md §4.5 point 3).
    public var naturalKey: String
    /// Identity of the settlement batch (Adyen: merchant account + batch number).
    public var batchId: String
    /// Booking date of the settlement; becomes the payment's `postedDate`.
    public var settlementDate: SettlementDate
    /// Normalized type.
    public var type: SettlementLineType
    /// The provider's own type word (`payment`, `Settled`, `MerchantPayout`…).
    public var journalType: String
    /// Tender payment id (generic `payment_id`, Adyen `Merchant Reference`).
    public var paymentId: String?
    /// Tender refund id when the provider carries one (Adyen `Modification Merchant Reference`).
    public var refundId: String?
    /// Processor's reference (generic `processor_reference`, Adyen `Psp Reference`).
    public var processorReference: String?
    /// Processor's payment-method variant (Adyen `visa_applepay`…), nil when not reported.
    public var paymentMethodVariant: String?
    /// Currency of `grossMinor` (ISO 4217).
    public var currencyCode: String
    /// Signed gross amount in minor units of `currencyCode`.
    public var grossMinor: Int64
    /// Currency of `feeMinor` and `netMinor` (differs from `currencyCode` only on FX lines).
    public var netCurrencyCode: String
    /// Processor fee on this line, in minor units of `netCurrencyCode`, positive for a cost.
    public var feeMinor: Int64
    /// Signed net amount in minor units of `netCurrencyCode`.
    public var netMinor: Int64
    /// For a line without any reference (batch-level fees, adjustments, payouts written without one):
    /// its 1-based position among its batch's unreferenced lines of the same type and net currency.
    /// That position, not the amounts, is what identifies it across revisions of the batch.
    public var batchLevelOrdinal: Int?

    /// A line from its fields (the readers build lines; the shell rebuilds stored ones).
    public init(lineNumber: Int, naturalKey: String, batchId: String, settlementDate: SettlementDate,
                type: SettlementLineType, journalType: String, paymentId: String?, refundId: String?,
                processorReference: String?, paymentMethodVariant: String?, currencyCode: String, grossMinor: Int64,
                netCurrencyCode: String, feeMinor: Int64, netMinor: Int64, batchLevelOrdinal: Int? = nil) {
        self.lineNumber = lineNumber
        self.naturalKey = naturalKey
        self.batchId = batchId
        self.settlementDate = settlementDate
        self.type = type
        self.journalType = journalType
        self.paymentId = paymentId
        self.refundId = refundId
        self.processorReference = processorReference
        self.paymentMethodVariant = paymentMethodVariant
        self.currencyCode = currencyCode
        self.grossMinor = grossMinor
        self.netCurrencyCode = netCurrencyCode
        self.feeMinor = feeMinor
        self.netMinor = netMinor
        self.batchLevelOrdinal = batchLevelOrdinal
    }

    /// The line's identity for finance-store effects: its natural key, or for an unreferenced line
    /// its batch, type, net currency and position, so a corrected amount supersedes the line it
    /// corrects instead of adding to it.
    public var effectIdentity: String {
        guard let batchLevelOrdinal else { return naturalKey }
        let format = naturalKey.prefix { $0 != "|" }
        return Reconciliation.naturalKey(["slot", String(format), batchId, journalType, netCurrencyCode,
                                          String(batchLevelOrdinal)])
    }

    /// True when the processor reports the payment as made with Apple Pay.
    public var isApplePay: Bool {
        paymentMethodVariant?.hasSuffix("applepay") ?? false
    }

    /// Same settlement content, ignoring where in the file it sits.
    public func hasSameContent(as other: SettlementLine) -> Bool {
        var normalized = other
        normalized.lineNumber = lineNumber
        return normalized == self
    }
}

/// Joins key parts so that no two different part lists give the same key.
func naturalKey(_ parts: [String]) -> String {
    // Fast path: no part holds an escaped character, so the key is the parts joined.
    if !parts.contains(where: { part in part.utf8.contains { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "|") } }) {
        return parts.joined(separator: "|")
    }
    var key = ""
    for (index, part) in parts.enumerated() {
        if index > 0 { key += "|" }
        for scalar in part.unicodeScalars {
            switch scalar {
            case "%": key += "%25"
            case "|": key += "%7C"
            default: key.unicodeScalars.append(scalar)
            }
        }
    }
    return key
}
