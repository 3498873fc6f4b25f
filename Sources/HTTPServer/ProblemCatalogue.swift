/// One entry of Tender's problem catalogue: a stable code with its one status, title and generic detail
/// (RFC 9457). Routes build problems from these (`HTTPProblem(.sessionExpired)`), adding a more precise
/// detail or field errors where they know more; the same code never carries two titles.
public struct ProblemType: Sendable, Hashable {
    /// Stable snake_case code (`type` is `HTTPProblem.typeBase` + code).
    public let code: String
    /// HTTP status.
    public let status: Int
    /// Short summary, the same for every occurrence of the code.
    public let title: String
    /// Generic explanation used when a route has nothing more precise.
    public let detail: String

    /// A catalogue entry; codes outside `ProblemCatalogue.all` are for families such as rule codes.
    public init(_ code: String, _ status: Int, _ title: String, _ detail: String) {
        self.code = code
        self.status = status
        self.title = title
        self.detail = detail
    }
}

extension HTTPProblem {
    /// The catalogue's problem, optionally with a precise detail, field errors, extras and headers.
    public init(_ type: ProblemType, detail: String? = nil, errors: [FieldError] = [],
                extra: [String: JSONValue] = [:], headers: HTTPHeaders = HTTPHeaders()) {
        self.init(status: type.status, code: type.code, title: type.title, detail: detail ?? type.detail,
                  errors: errors, extra: extra, headers: headers)
    }

    /// `400 unknown_field` naming the first unknown member (sorted), as every strict body decoder refuses it.
    public static func unknownField(_ field: String) -> HTTPProblem {
        HTTPProblem(.unknownField, detail: "The request body has a member this endpoint does not accept.",
                    errors: [.init(field: field, code: ProblemType.unknownField.code, message: "This field is not accepted.")])
    }
}

// The catalogue, by area. Every code a route returns with a fixed status is here.
extension ProblemType {
    // Request bodies (JSONCoding and the strict decoders).
    public static let malformedJSON = ProblemType("malformed_json", 400, "Malformed JSON",
                                                  "The request body is not valid JSON for this endpoint.")
    public static let jsonTooDeep = ProblemType("json_too_deep", 400, "JSON too deep",
                                                "The request body nests arrays or objects too deeply.")
    public static let duplicateField = ProblemType("duplicate_field", 400, "Duplicate field",
                                                   "The request body has a field Tender refuses.")
    public static let nulCharacter = ProblemType("nul_character", 400, "NUL character",
                                                 "The request body has a field Tender refuses.")
    public static let invalidUnicodeEscape = ProblemType("invalid_unicode_escape", 400, "Invalid Unicode escape",
                                                         "The request body has a field Tender refuses.")
    public static let unknownField = ProblemType("unknown_field", 400, "Unknown field",
                                                 "The request body has a member this endpoint does not accept.")
    public static let unsupportedMediaType = ProblemType("unsupported_media_type", 415, "Unsupported media type",
                                                         "The request body's content type is not accepted here.")
    public static let parameterInvalid = ProblemType("parameter_invalid", 400, "Invalid parameter",
                                                     "A query parameter has an invalid value.")
    public static let invalidQuery = ProblemType("invalid_query", 400, "Invalid query",
                                                 "A query parameter has an invalid value.")
    /// A pricing or request rule refused the request (the rule's own code; see `requestNotAcceptable`).
    public static let requestNotAcceptableTitle = "Request not acceptable"

    // The server and the edge.
    public static let routeNotFound = ProblemType("route_not_found", 404, "Not found", "No route matches this path.")
    public static let methodNotAllowed = ProblemType("method_not_allowed", 405, "Method not allowed",
                                                     "This path does not accept this method.")
    public static let bodyTooLarge = ProblemType("body_too_large", 413, "Request body too large",
                                                 "The request body exceeds the size limit.")
    public static let serverBusy = ProblemType("server_busy", 503, "Server busy",
                                               "The server is at capacity; retry shortly.")
    public static let tooManyStreams = ProblemType("too_many_streams", 503, "Too many streams",
                                                   "The server holds as many streams as it allows; retry shortly.")
    public static let serverShuttingDown = ProblemType("server_shutting_down", 503, "Server shutting down",
                                                       "The server is shutting down; retry on another instance.")
    public static let handlerDeadlineExceeded = ProblemType("handler_deadline_exceeded", 503, "Handler deadline exceeded",
                                                            "The request took too long; retry shortly.")
    public static let internalError = ProblemType("internal_error", 500, "Internal error",
                                                  "The server could not complete the request.")

    // Infrastructure and readiness.
    public static let databaseUnavailable = ProblemType("database_unavailable", 503, "Service unavailable",
                                                        "The database is unavailable; retry shortly.")
    public static let transactionOutcomeUnknown = ProblemType(
        "transaction_outcome_unknown", 503, "Service unavailable",
        "The outcome of the change is unknown; retry with the same Idempotency-Key.")
    public static let migrationsPending = ProblemType("migrations_pending", 503, "Not ready",
                                                      "The database schema is not up to date.")

    // Authentication and idempotency.
    public static let unauthorized = ProblemType("unauthorized", 401, "Unauthorized",
                                                 "A valid API key or client secret is required.")
    public static let idempotencyKeyInvalid = ProblemType("idempotency_key_invalid", 400, "Invalid Idempotency-Key",
                                                          "Idempotency-Key must be 1 to 255 printable ASCII characters.")
    public static let idempotencyKeyMissing = ProblemType("idempotency_key_missing", 400, "Idempotency-Key required",
                                                          "This request needs an Idempotency-Key header.")
    public static let idempotencyKeyReused = ProblemType("idempotency_key_reused", 422, "Idempotency-Key reused",
                                                         "This Idempotency-Key was used with a different request.")
    public static let idempotencyKeyInProgress = ProblemType("idempotency_key_in_progress", 409, "Request in progress",
                                                             "A request with this Idempotency-Key is still running.")

    // Resources.
    public static let notFound = ProblemType("not_found", 404, "Not found", "No such resource.")
    public static let sessionNotFound = ProblemType("session_not_found", 404, "Not found", "No such checkout session.")
    public static let sessionNotOpen = ProblemType("session_not_open", 409, "Checkout session not open",
                                                   "The checkout session is not open.")
    public static let sessionExpired = ProblemType("session_expired", 410, "Checkout session expired",
                                                   "The checkout session has expired.")
    public static let couponNotFound = ProblemType("coupon_not_found", 404, "Not found", "No such coupon.")
    public static let couponExists = ProblemType("coupon_exists", 409, "Coupon exists",
                                                 "A coupon with this code already exists.")
    public static let payoutReversed = ProblemType("payout_reversed", 409, "Payout reversed",
                                                   "A corrected settlement took this payout back; it cannot arrive.")
    public static let settlementBatchConflict = ProblemType("settlement_batch_conflict", 409, "Batch already imported",
                                                            "A batch of this report was already imported.")
    public static let settlementFileInvalid = ProblemType("settlement_file_invalid", 422, "Invalid settlement file",
                                                          "The settlement file cannot be read.")
    public static let domainAssociationNotConfigured = ProblemType(
        "domain_association_not_configured", 404, "Not found", "No domain-association file is configured.")
    public static let initiativeContextInvalid = ProblemType("initiative_context_invalid", 400, "Invalid initiative context",
                                                             "initiativeContext is not one of the merchant's domains.")
    public static let demoNotBootstrapped = ProblemType("demo_not_bootstrapped", 503, "Demo not bootstrapped",
                                                        "Run `tender sandbox bootstrap` first.")
    public static let notSandboxMerchant = ProblemType("not_sandbox_merchant", 403, "Not the sandbox merchant",
                                                       "Only the sandbox merchant may use this endpoint.")

    // Merchant validation (rules 40-45).
    public static let validationURLInvalid = ProblemType("validation_url_invalid", 400, "Invalid validation URL",
                                                         "validationURL is not an Apple Pay gateway payment-session URL.")
    public static let merchantDomainMissing = ProblemType("merchant_domain_missing", 409, "Merchant has no domain",
                                                          "The merchant has no registered domain for Apple Pay on the web.")
    public static let merchantDisplayNameInvalid = ProblemType("merchant_display_name_invalid", 409, "Merchant display name invalid",
                                                               "The merchant's display name must be 1 to 64 characters.")
    public static let merchantIdentityMissing = ProblemType(
        "merchant_identity_missing", 409, "Merchant identity missing",
        "The merchant has no Merchant Identity certificate; import one with `tender keys import --kind identity`.")
    public static let merchantIdentityUnavailable = ProblemType("merchant_identity_unavailable", 500, "Merchant identity unavailable",
                                                                "The merchant's identity certificate could not be loaded.")
    public static let merchantValidationFailed = ProblemType("merchant_validation_failed", 502, "Merchant validation failed",
                                                             "Apple Pay refused the merchant validation request.")
    public static let merchantValidationTimeout = ProblemType("merchant_validation_timeout", 504, "Merchant validation timed out",
                                                              "Apple Pay did not answer in time; the shopper may retry.")
    public static let merchantValidationTLSFailed = ProblemType(
        "merchant_validation_tls_failed", 502, "Merchant validation TLS failure",
        "The secure connection to Apple Pay could not be established.")
    public static let merchantValidationUnreachable = ProblemType("merchant_validation_unreachable", 502, "Apple Pay unreachable",
                                                                  "Apple Pay's gateway could not be reached.")
    public static let merchantValidationInvalidResponse = ProblemType(
        "merchant_validation_invalid_response", 502, "Invalid merchant session",
        "Apple Pay's answer was not a merchant session object.")

    // Payments and refunds.
    public static let sessionAlreadyPaid = ProblemType("session_already_paid", 409, "Payment refused",
                                                       "The checkout session is already paid.")
    public static let sessionPaymentInProgress = ProblemType("session_payment_in_progress", 409, "Payment refused",
                                                             "A payment for this checkout session is in progress.")
    public static let tokenRejected = ProblemType("token_rejected", 422, "Payment refused",
                                                  "The Apple Pay token was rejected.")
    public static let tokenReplayed = ProblemType("token_replayed", 409, "Payment refused",
                                                  "This Apple Pay token was already used.")
    public static let applicationDataMismatch = ProblemType("application_data_mismatch", 422, "Payment refused",
                                                            "The token was not made for this checkout session.")
    public static let currencyMismatch = ProblemType("currency_mismatch", 422, "Payment refused",
                                                     "The token's currency differs from the session's.")
    public static let amountMismatch = ProblemType("amount_mismatch", 422, "Payment refused",
                                                   "The token's amount differs from the session's total.")
    public static let shippingContactInvalid = ProblemType("shipping_contact_invalid", 422, "Payment refused",
                                                           "The shipping contact is not acceptable.")
    public static let emvNotRequested = ProblemType("emv_not_requested", 422, "Payment refused",
                                                    "The token carries EMV data the session did not request.")
    public static let paymentNotRefundable = ProblemType("payment_not_refundable", 409, "Not refundable",
                                                         "The payment cannot be refunded.")
}

/// Every fixed-status code Tender answers with, for lookups and the uniqueness test.
public enum ProblemCatalogue {
    public static let all: [ProblemType] = [
        .malformedJSON, .jsonTooDeep, .duplicateField, .nulCharacter, .invalidUnicodeEscape, .unknownField,
        .unsupportedMediaType, .parameterInvalid, .invalidQuery,
        .routeNotFound, .methodNotAllowed, .bodyTooLarge, .serverBusy, .tooManyStreams, .serverShuttingDown,
        .handlerDeadlineExceeded, .internalError,
        .databaseUnavailable, .transactionOutcomeUnknown, .migrationsPending,
        .unauthorized, .idempotencyKeyInvalid, .idempotencyKeyMissing, .idempotencyKeyReused, .idempotencyKeyInProgress,
        .notFound, .sessionNotFound, .sessionNotOpen, .sessionExpired, .couponNotFound, .couponExists, .payoutReversed,
        .settlementBatchConflict, .settlementFileInvalid, .domainAssociationNotConfigured, .initiativeContextInvalid,
        .demoNotBootstrapped, .notSandboxMerchant,
        .validationURLInvalid, .merchantDomainMissing, .merchantDisplayNameInvalid, .merchantIdentityMissing,
        .merchantIdentityUnavailable, .merchantValidationFailed, .merchantValidationTimeout, .merchantValidationTLSFailed,
        .merchantValidationUnreachable, .merchantValidationInvalidResponse,
        .sessionAlreadyPaid, .sessionPaymentInProgress, .tokenRejected, .tokenReplayed, .applicationDataMismatch,
        .currencyMismatch, .amountMismatch, .shippingContactInvalid, .emvNotRequested, .paymentNotRefundable,
    ]

    /// The entry for `code`, if it is a catalogued one.
    public static func type(code: String) -> ProblemType? {
        byCode[code]
    }

    private static let byCode: [String: ProblemType] = Dictionary(all.map { ($0.code, $0) }) { first, _ in first }

    /// A rule's refusal (checkout pricing, request validation, coupons): the rule's own code and message.
    public static func requestNotAcceptable(code: String, status: Int = 422, detail: String,
                                            errors: [HTTPProblem.FieldError] = [],
                                            extra: [String: JSONValue] = [:]) -> HTTPProblem {
        HTTPProblem(status: status, code: code, title: ProblemType.requestNotAcceptableTitle, detail: detail,
                    errors: errors, extra: extra)
    }
}
