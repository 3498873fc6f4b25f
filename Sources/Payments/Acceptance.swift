// The refusal rules of a payment request: one pure function over what the shell read (the session
// under its row lock, the token verification's result, the shipping contact's check).

/// What the shell read of a checkout session for a payment, under the session row's lock.
public struct PaymentSessionSnapshot: Sendable, Equatable {
    /// Status and expiry of the session.
    public var session: CheckoutSessionState
    /// The session's total in minor units (what the token's `transactionAmount` must equal).
    public var totalMinor: Int64
    /// ISO 4217 numeric code of the session's currency (`"978"`), as Apple writes `currencyCode`.
    public var currencyNumericCode: String
    /// Lowercase hex SHA-256 of the session's `applicationData` (the token binding, Apple step 6).
    public var applicationDataSHA256Hex: String
    /// True when the latest request offered `supportsEMV` (rule 55).
    public var supportsEMV: Bool

    /// Creates a snapshot.
    public init(session: CheckoutSessionState, totalMinor: Int64, currencyNumericCode: String,
                applicationDataSHA256Hex: String, supportsEMV: Bool) {
        self.session = session
        self.totalMinor = totalMinor
        self.currencyNumericCode = currencyNumericCode
        self.applicationDataSHA256Hex = applicationDataSHA256Hex
        self.supportsEMV = supportsEMV
    }
}

/// What verification and decryption of the token established, without card data.
public struct VerifiedTokenFacts: Sendable, Equatable {
    /// `header.applicationData` (hex), if present.
    public var applicationDataHex: String?
    /// Decrypted `currencyCode` (ISO 4217 numeric).
    public var currencyCodeNumeric: String
    /// Decrypted `transactionAmount` in minor units.
    public var transactionAmountMinor: Int64
    /// True when the payment data type is `EMV`.
    public var isEMV: Bool
    /// The network from the DPAN's BIN and the unsigned claim (`PaymentNetwork.resolve`).
    public var network: Result<String, PaymentFailure>

    /// Creates the facts; `dpan` is read for its scheme only and not kept.
    public init(applicationDataHex: String?, currencyCodeNumeric: String, transactionAmountMinor: Int64, isEMV: Bool,
                claimedNetwork: String?, dpan: String) {
        self.init(applicationDataHex: applicationDataHex, currencyCodeNumeric: currencyCodeNumeric,
                  transactionAmountMinor: transactionAmountMinor, isEMV: isEMV,
                  network: PaymentNetwork.resolve(claimed: claimedNetwork, dpan: dpan))
    }

    /// Creates the facts with the network already resolved.
    public init(applicationDataHex: String?, currencyCodeNumeric: String, transactionAmountMinor: Int64, isEMV: Bool,
                network: Result<String, PaymentFailure>) {
        self.applicationDataHex = applicationDataHex
        self.currencyCodeNumeric = currencyCodeNumeric
        self.transactionAmountMinor = transactionAmountMinor
        self.isEMV = isEMV
        self.network = network
    }
}

/// The token's verification result: facts, or the token error's stable code.
public enum TokenVerification: Sendable, Equatable {
    /// Verified and decrypted.
    case verified(VerifiedTokenFacts)
    /// Refused by the verifier or decryptor (`TokenError.Code` raw value).
    case rejected(tokenErrorCode: String)
}

/// The shipping contact given at authorization, re-validated against the session (rule 53).
public enum ContactCheck: Sendable, Equatable {
    /// No shipping contact in the request.
    case notGiven
    /// Serviceable at the session's total.
    case serviceable
    /// Not serviceable, or it changes the total.
    case notServiceable
}

/// Why a payment is refused before any processor call: the stored failure, the HTTP status and code.
public struct PaymentRefusal: Sendable, Equatable {
    /// Stored as `failure_code`.
    public let failure: PaymentFailure
    /// HTTP status of the problem.
    public let status: Int
    /// Problem code (stable).
    public let code: String
    /// Problem detail (no card data).
    public let detail: String
    /// The token error's code, for `tokenRejected`.
    public let tokenErrorCode: String?

    init(_ failure: PaymentFailure, _ status: Int, _ code: String, _ detail: String, tokenErrorCode: String? = nil) {
        self.failure = failure
        self.status = status
        self.code = code
        self.detail = detail
        self.tokenErrorCode = tokenErrorCode
    }
}

/// The rules of `POST /v1/checkout-sessions/{id}/payments`.
public enum PaymentAcceptance {
    /// The first rule the request breaks, or nil when the payment may be inserted. Precedence:
    /// 1. session paid → 409 `session_already_paid` (rule 31)
    /// 2. session canceled → 409 `session_not_open`
    /// 3. session expired: marked by the sweeper, or open but past its expiry → 410 `session_expired` (rule 58)
    /// 4. token refused by verification or decryption → 422 `token_rejected` (Apple steps 1–4)
    /// 5. `applicationData` not this session's → 422 `application_data_mismatch` (Apple step 6)
    /// 6. currency differs → 422 `currency_mismatch` (Apple step 6)
    /// 7. amount differs from the total → 422 `amount_mismatch` (Apple step 6)
    /// 8. shipping contact not serviceable at the total → 422 `shipping_contact_invalid` (rule 53)
    /// 9. EMV data the request did not offer → 422 `emv_not_requested` (rule 55)
    /// 10. claimed network contradicts the DPAN → 422 `payment_network_mismatch`
    ///
    /// Then the insert decides, atomically with the unique constraints (`refusalAfterConflict`):
    /// 11. transactionId already used → 409 `token_replayed` (Apple step 5)
    /// 12. another payment of the session pending or succeeded → 409 `session_payment_in_progress`
    ///
    /// `contact` is evaluated only when rules 1–7 pass (it reads the session's latest checkout).
    /// `nowMilliseconds` is the database's clock (Unix milliseconds), so every node judges expiry alike.
    public static func firstRefusal(session: PaymentSessionSnapshot, nowMilliseconds: Int64, token: TokenVerification,
                                    contact: () throws -> ContactCheck) rethrows -> PaymentRefusal? {
        switch session.session.paymentRefusal(atMilliseconds: nowMilliseconds) {
        case .alreadyPaid?:
            return PaymentRefusal(.sessionNotPayable, 409, "session_already_paid", "The checkout session is already paid.")
        case .notOpen?:
            return PaymentRefusal(.sessionNotPayable, 409, "session_not_open", "The checkout session is not open.")
        case .expired?:
            return PaymentRefusal(.sessionNotPayable, 410, "session_expired", "The checkout session has expired.")
        case nil:
            break
        }
        let facts: VerifiedTokenFacts
        switch token {
        case .rejected(let code):
            return PaymentRefusal(.tokenRejected, 422, "token_rejected", "The payment token could not be verified.",
                                  tokenErrorCode: code)
        case .verified(let verified):
            facts = verified
        }
        guard facts.applicationDataHex?.lowercased() == session.applicationDataSHA256Hex else {
            return PaymentRefusal(.applicationDataMismatch, 422, "application_data_mismatch",
                                  "The payment token was not issued for this checkout session.")
        }
        guard facts.currencyCodeNumeric == session.currencyNumericCode else {
            return PaymentRefusal(.currencyMismatch, 422, "currency_mismatch",
                                  "The payment token's currency differs from the checkout session's.")
        }
        guard facts.transactionAmountMinor == session.totalMinor else {
            return PaymentRefusal(.amountMismatch, 422, "amount_mismatch",
                                  "The payment token's amount differs from the checkout session's total.")
        }
        if try contact() == .notServiceable {
            return PaymentRefusal(.shippingContactInvalid, 422, "shipping_contact_invalid",
                                  "The shipping contact cannot be served at this total.")
        }
        if facts.isEMV && !session.supportsEMV {
            return PaymentRefusal(.emvNotRequested, 422, "emv_not_requested",
                                  "The payment token carries EMV data, which this checkout session did not request.")
        }
        if case .failure(let failure) = facts.network {
            return PaymentRefusal(failure, 422, failure.rawValue, "The payment method's network differs from the card's.")
        }
        return nil
    }

    /// Rules 11–12: the insert found a conflict; `transactionIdSeen` when the transactionId is already stored.
    public static func refusalAfterConflict(transactionIdSeen: Bool) -> PaymentRefusal {
        transactionIdSeen
            ? PaymentRefusal(.tokenReplayed, 409, "token_replayed", "This payment token was already used.")
            : PaymentRefusal(.sessionPaymentInProgress, 409, "session_payment_in_progress",
                             "Another payment of this checkout session is in progress or succeeded.")
    }
}
