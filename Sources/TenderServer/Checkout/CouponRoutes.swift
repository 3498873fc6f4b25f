import Foundation
import HTTPServer
import Money
import PaymentRequest
import Postgres

/// Bounds on a merchant's pricing data (STYLE: a named limit on everything that grows).
public enum PricingDataLimits {
    /// Coupons one merchant may hold.
    public static let couponsPerMerchantMax = 1_000
    /// Rows in one merchant's tax table.
    public static let taxRatesMax = 500
    /// Characters in a coupon code (the `coupons.code` CHECK and `CheckoutLimits.identifierLengthMax`).
    public static let couponCodeLengthMax = 64
    /// Characters in a tax region (`tax_rates.region` CHECK).
    public static let regionLengthMax = 64
}

/// `POST /v1/coupons` body. Unknown fields are refused.
struct CouponInput: Decodable {
    let code: String
    let percentOff: String?
    let amountOff: String?
    let currencyCode: String?
    let expiresAt: String?
    let minimumSubtotal: String?

    static let schema = KeySchema.object(["code": .leaf, "percentOff": .leaf, "amountOff": .leaf,
                                          "currencyCode": .leaf, "expiresAt": .leaf, "minimumSubtotal": .leaf])
    enum CodingKeys: String, CodingKey { case code, percentOff, amountOff, currencyCode, expiresAt, minimumSubtotal }

    init(from decoder: any Decoder) throws {
        try Self.schema.refuseUnknownFields(decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        code = try c.decode(String.self, forKey: .code)
        percentOff = try c.decodeIfPresent(String.self, forKey: .percentOff)
        amountOff = try c.decodeIfPresent(String.self, forKey: .amountOff)
        currencyCode = try c.decodeIfPresent(String.self, forKey: .currencyCode)
        expiresAt = try c.decodeIfPresent(String.self, forKey: .expiresAt)
        minimumSubtotal = try c.decodeIfPresent(String.self, forKey: .minimumSubtotal)
    }
}

/// A coupon as the API shows it.
struct CouponView: Encodable {
    let code: String
    let percentOff: String?
    let amountOff: String?
    let currencyCode: String?
    let expiresAt: String?
    let minimumSubtotal: String?
    /// `active`, or `disabled` (kept but refused at checkout as an unknown code would be).
    let status: String

    init(_ coupon: Coupon, disabled: Bool = false) {
        status = disabled ? "disabled" : "active"
        code = coupon.code
        switch coupon.kind {
        case .percent(let basisPoints):
            percentOff = PercentText.format(basisPoints)
            amountOff = nil
        case .fixed(let amountMinor):
            percentOff = nil
            amountOff = coupon.currency?.formatAmount(amountMinor)
        }
        currencyCode = coupon.currency?.code
        expiresAt = coupon.expiresAtUnixSeconds.map { Timestamp(unixSeconds: $0).rfc3339 }
        minimumSubtotal = coupon.minimumSubtotalMinor.flatMap { minimum in coupon.currency?.formatAmount(minimum) }
    }
}

/// One row of `PUT /v1/tax-rates` and `GET /v1/tax-rates`.
struct TaxRateInput: Decodable {
    let countryCode: String
    let region: String?
    let rate: String
    let shippingTaxable: Bool?

    static let schema = KeySchema.object(["countryCode": .leaf, "region": .leaf, "rate": .leaf, "shippingTaxable": .leaf])
    enum CodingKeys: String, CodingKey { case countryCode, region, rate, shippingTaxable }

    init(from decoder: any Decoder) throws {
        try Self.schema.refuseUnknownFields(decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        countryCode = try c.decode(String.self, forKey: .countryCode)
        region = try c.decodeIfPresent(String.self, forKey: .region)
        rate = try c.decode(String.self, forKey: .rate)
        shippingTaxable = try c.decodeIfPresent(Bool.self, forKey: .shippingTaxable)
    }
}

/// A tax rate as the API shows it (`region` absent = the whole country).
struct TaxRateView: Encodable {
    let countryCode: String
    let region: String?
    let rate: String
    let shippingTaxable: Bool

    init(_ rule: TaxRule) {
        countryCode = rule.country.code
        region = rule.region
        rate = PercentText.format(rule.rateBasisPoints)
        shippingTaxable = rule.shippingTaxable
    }
}

extension TenderApp {
    func registerCouponRoutes(into router: inout Router) {
        router.add("POST", "/v1/coupons", guarded(authenticated { [self] request, merchant in
            try self.createCoupon(request, merchant: merchant)
        }))
        router.add("GET", "/v1/coupons", guarded(authenticated { [self] _, merchant in
            let coupons = try self.pool.withConnection { try CouponStore.all(merchantId: merchant.merchantId, on: $0) }
            return .json(["coupons": coupons.map { CouponView($0.coupon, disabled: $0.disabled) }])
        }))
        router.add("POST", "/v1/coupons/{code}/disable", guarded(authenticated { [self] request, merchant in
            let code = request.pathParameters["code"] ?? ""
            guard let coupon = try self.pool.withConnection({ try CouponStore.disable(merchantId: merchant.merchantId, code: code,
                on: $0) }) else {
                throw CouponStore.notFound
            }
            return .json(CouponView(coupon, disabled: true))
        }))
        router.add("DELETE", "/v1/coupons/{code}", guarded(authenticated { [self] request, merchant in
            let code = request.pathParameters["code"] ?? ""
            guard let deleted = try self.pool.withConnection({ try CouponStore.delete(merchantId: merchant.merchantId, code: code,
                on: $0) }) else {
                throw CouponStore.notFound
            }
            struct Deleted: Encodable { let code: String; let deleted: Bool }
            return .json(Deleted(code: deleted, deleted: true))
        }))
        router.add("PUT", "/v1/tax-rates", guarded(authenticated { [self] request, merchant in
            let rules = try Self.validatedTaxRules(try StrictBody<[TaxRateInput]>.decode(request.body))
            try self.pool.transaction { try TaxRateStore.replace(merchantId: merchant.merchantId, rules: rules, on: $0) }
            return .json(rules.map(TaxRateView.init))
        }))
        router.add("GET", "/v1/tax-rates", guarded(authenticated { [self] _, merchant in
            let rules = try self.pool.withConnection { try TaxRateStore.rules(merchantId: merchant.merchantId, on: $0) }
            return .json(rules.map(TaxRateView.init))
        }))
    }

    func createCoupon(_ request: HTTPRequest, merchant: Merchant) throws -> HTTPResponse {
        let input = try StrictBody<CouponInput>.decode(request.body)
        let coupon = try Self.validatedCoupon(input, merchant: merchant)
        let inserted = try pool.withConnection { conn in
            try CouponStore.insert(coupon, merchantId: merchant.merchantId, on: conn)
        }
        guard inserted else {
            throw CheckoutProblems.invalid("coupons_limit_reached", field: "code",
                                           "A merchant may hold at most \(PricingDataLimits.couponsPerMerchantMax) coupons.")
        }
        return .json(CouponView(coupon), status: 201)
    }

    /// Checks a coupon request and reports every problem at once.
    static func validatedCoupon(_ input: CouponInput, merchant: Merchant) throws -> Coupon {
        var errors = FieldErrors()
        let code = CouponStore.normalized(input.code)
        if code.isEmpty || code.count > PricingDataLimits.couponCodeLengthMax
            || !code.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || $0 == 0x2d || $0 == 0x5f }) {
            errors.add("coupon_code_invalid", "code", "1-64 characters of A-Z, 0-9, - and _.")
        }
        var currency: Currency?
        if let text = input.currencyCode {
            if let parsed = try? Currency(code: text) {
                if merchant.currencies.contains(parsed.code) { currency = parsed } else {
                    errors.add("currency_not_enabled", "currencyCode", "The merchant does not charge in this currency.")
                }
            } else {
                errors.add("currency_unknown", "currencyCode", "Not an active ISO 4217 currency.")
            }
        }
        var kind: Coupon.Kind?
        switch (input.percentOff, input.amountOff) {
        case (nil, nil):
            errors.add("discount_missing", "percentOff", "Give percentOff or amountOff.")
        case (.some, .some):
            errors.add("discount_ambiguous", "amountOff", "Give percentOff or amountOff, not both.")
        case (let percent?, nil):
            if let basisPoints = PercentText.basisPoints(percent), basisPoints > 0 {
                kind = .percent(basisPoints: basisPoints)
            } else {
                errors.add("percent_off_invalid", "percentOff", "A decimal percent above 0 and at most 100, e.g. \"12.5\".")
            }
        case (nil, let amount?):
            if input.currencyCode == nil {
                errors.add("currency_required", "currencyCode", "amountOff needs currencyCode.")
            } else if let currency {
                do {
                    let minor = try currency.parseAcceptedAmount(amount)
                    if minor > 0 { kind = .fixed(amountMinor: minor) } else {
                        errors.add("amount_off_invalid", "amountOff", "amountOff must be above zero.")
                    }
                } catch {
                    errors.add(error.code.rawValue, "amountOff", "A decimal string with exactly the currency's digits.")
                }
            }
        }
        var expiresAt: Int64?
        if let text = input.expiresAt {
            if let timestamp = Timestamp(rfc3339: text) { expiresAt = timestamp.unixSeconds } else {
                errors.add("expires_at_invalid", "expiresAt", "An RFC 3339 time such as 2026-01-31T00:00:00Z.")
            }
        }
        var minimum: Int64?
        if let text = input.minimumSubtotal {
            if input.currencyCode == nil {
                errors.add("currency_required", "currencyCode", "minimumSubtotal needs currencyCode.")
            } else if let currency {
                do { minimum = try currency.parseAcceptedAmount(text) } catch {
                    errors.add(error.code.rawValue, "minimumSubtotal", "A decimal string with exactly the currency's digits.")
                }
            }
        }
        guard errors.list.isEmpty, let kind else {
            throw ProblemCatalogue.requestNotAcceptable(code: errors.list.first?.code ?? "coupon_invalid",
                              detail: "The coupon is not valid.", errors: errors.list)
        }
        return Coupon(code: code, kind: kind, currency: currency, expiresAtUnixSeconds: expiresAt,
                      minimumSubtotalMinor: minimum)
    }

    /// Checks a whole tax table; every problem is reported at once.
    static func validatedTaxRules(_ inputs: [TaxRateInput]) throws -> [TaxRule] {
        guard inputs.count <= PricingDataLimits.taxRatesMax else {
            throw CheckoutProblems.invalid("tax_rates_too_many", field: "",
                                           "At most \(PricingDataLimits.taxRatesMax) tax rates.")
        }
        var errors = FieldErrors()
        var rules: [TaxRule] = []
        var seen: Set<String> = []
        for (i, input) in inputs.enumerated() {
            errors.prefix = "[\(i)]."
            let country = try? Country(code: input.countryCode)
            if country == nil { errors.add("country_unknown", "countryCode", "An ISO 3166-1 alpha-2 code such as US.") }
            let region = input.region.map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
            // Counted as sent and in code points, as openapi.yaml's maxLength and the column's CHECK
            // (length(region) <= 64) count: 64 characters of several scalars each would break the CHECK.
            if let raw = input.region, raw.unicodeScalars.count > PricingDataLimits.regionLengthMax {
                errors.add("region_invalid", "region", "At most \(PricingDataLimits.regionLengthMax) characters.")
            }
            let basisPoints = PercentText.basisPoints(input.rate)
            if basisPoints == nil { errors.add("rate_invalid", "rate", "A decimal percent from 0 to 100, e.g. \"8.25\".") }
            if let country {
                if !seen.insert(country.code + "|" + (region?.lowercased() ?? "")).inserted {
                    errors.add("tax_rate_duplicate", "countryCode", "This country and region appear twice.")
                }
                if let basisPoints {
                    rules.append(TaxRule(country: country, region: region, rateBasisPoints: basisPoints,
                                         shippingTaxable: input.shippingTaxable ?? false))
                }
            }
        }
        if let first = errors.list.first {
            throw ProblemCatalogue.requestNotAcceptable(code: first.code,
                              detail: "The tax table is not valid.", errors: errors.list)
        }
        return rules
    }
}

/// Field errors collected while validating, so a client sees every problem at once.
struct FieldErrors {
    var list: [HTTPProblem.FieldError] = []
    /// Prepended to each field (e.g. `[3].` for an array element).
    var prefix = ""

    mutating func add(_ code: String, _ field: String, _ message: String) {
        list.append(HTTPProblem.FieldError(field: prefix + field, code: code, message: message))
    }
}

/// Coupons in PostgreSQL. Codes are case-insensitive: stored and looked up in ASCII uppercase.
enum CouponStore {
    /// ASCII-only uppercasing: Unicode case mapping would turn codes the format refuses (`ı`, `ﬀ`)
    /// into valid ones (`I`, `FF`).
    static func normalized(_ code: String) -> String {
        String(decoding: code.utf8.map { $0 >= 0x61 && $0 <= 0x7a ? $0 - 0x20 : $0 }, as: UTF8.self)
    }

    /// Inserts a coupon; false when the merchant is at `couponsPerMerchantMax`; 409 `coupon_exists` for a taken code.
    static func insert(_ c: Coupon, merchantId: String, on conn: PostgresConnection) throws -> Bool {
        let percent: Int64?
        let amount: Int64?
        switch c.kind {
        case .percent(let bp): (percent, amount) = (bp, nil)
        case .fixed(let minor): (percent, amount) = (nil, minor)
        }
        let parameters: [any PostgresEncodable] = [
            merchantId, c.code, percent == nil ? "fixed" : "percent", percent, amount, c.currency?.code,
            c.expiresAtUnixSeconds, c.minimumSubtotalMinor, PricingDataLimits.couponsPerMerchantMax,
        ]
        let result: PostgresResult
        do {
            result = try conn.query("""
                INSERT INTO coupons (merchant_id, code, kind, percent_basis_points, amount_minor, currency_code,
                                     expires_at, minimum_subtotal_minor)
                SELECT $1, $2, $3, $4, $5, $6, to_timestamp($7::bigint), $8
                WHERE (SELECT count(*) FROM coupons WHERE merchant_id = $1) < $9
                RETURNING 1 AS inserted
                """, parameters)
        } catch {
            guard error.isUniqueViolation else { throw error }
            throw HTTPProblem(.couponExists,
                              detail: "A coupon with this code already exists.")
        }
        return result.first != nil
    }

    static let columns: SQL = """
        SELECT code, kind, percent_basis_points, amount_minor, currency_code,
               extract(epoch FROM expires_at)::bigint AS expires_unix, minimum_subtotal_minor, disabled_at IS NOT NULL AS disabled
        FROM coupons WHERE merchant_id = $1 ORDER BY code
        """

    static let notFound = HTTPProblem(.couponNotFound, detail: "No such coupon.")

    /// Disables the coupon (idempotent); nil when the merchant has no such code.
    static func disable(merchantId: String, code: String, on conn: PostgresConnection) throws -> Coupon? {
        let normalized = normalized(code)
        guard !normalized.isEmpty, normalized.count <= PricingDataLimits.couponCodeLengthMax else { return nil }
        return try conn.query("""
            UPDATE coupons SET disabled_at = coalesce(disabled_at, now()) WHERE merchant_id = $1 AND code = $2
            RETURNING code, kind, percent_basis_points, amount_minor, currency_code,
                      extract(epoch FROM expires_at)::bigint AS expires_unix, minimum_subtotal_minor
            """, [merchantId, normalized]).first.map(decode)
    }

    /// Deletes the coupon (its code may be created again); the deleted code, or nil when there was none.
    /// Sessions already priced with it keep their price: they store the priced checkout, not a reference.
    static func delete(merchantId: String, code: String, on conn: PostgresConnection) throws -> String? {
        let normalized = normalized(code)
        guard !normalized.isEmpty, normalized.count <= PricingDataLimits.couponCodeLengthMax else { return nil }
        return try conn.query("DELETE FROM coupons WHERE merchant_id = $1 AND code = $2 RETURNING code",
                              [merchantId, normalized]).first?.decode("code")
    }

    /// The coupon for a code the shopper typed, or nil.
    static func find(merchantId: String, code: String, on conn: PostgresConnection) throws -> Coupon? {
        let normalized = normalized(code)
        guard !normalized.isEmpty, normalized.count <= PricingDataLimits.couponCodeLengthMax else { return nil }
        guard let row = try conn.query("""
            SELECT code, kind, percent_basis_points, amount_minor, currency_code,
                   extract(epoch FROM expires_at)::bigint AS expires_unix, minimum_subtotal_minor
            FROM coupons WHERE merchant_id = $1 AND code = $2 AND disabled_at IS NULL
            """, [merchantId, normalized]).first else { return nil }
        return try decode(row)
    }

    /// All of a merchant's coupons (at most `couponsPerMerchantMax`), disabled ones flagged.
    static func all(merchantId: String, on conn: PostgresConnection) throws -> [(coupon: Coupon, disabled: Bool)] {
        try conn.query(columns, [merchantId]).rows.map { (try decode($0), try $0.decode("disabled")) }
    }

    static func decode(_ row: PostgresRow) throws -> Coupon {
        let kindText: String = try row.decode("kind")
        let kind: Coupon.Kind = kindText == "percent"
            ? .percent(basisPoints: try row.decode("percent_basis_points"))
            : .fixed(amountMinor: try row.decode("amount_minor"))
        let currency = try row.decodeIfPresent("currency_code", as: String.self).flatMap { try? Currency(code: $0) }
        return Coupon(code: try row.decode("code"), kind: kind, currency: currency,
                      expiresAtUnixSeconds: try row.decodeIfPresent("expires_unix"),
                      minimumSubtotalMinor: try row.decodeIfPresent("minimum_subtotal_minor"))
    }
}

/// Tax rates in PostgreSQL; region `''` is the whole country.
enum TaxRateStore {
    /// Replaces the merchant's table (inside the caller's transaction).
    static func replace(merchantId: String, rules: [TaxRule], on conn: PostgresConnection) throws {
        _ = try conn.execute("DELETE FROM tax_rates WHERE merchant_id = $1", [merchantId])
        for rule in rules {
            _ = try conn.execute("""
                INSERT INTO tax_rates (merchant_id, country_code, region, rate_basis_points, shipping_taxable)
                VALUES ($1, $2, $3, $4, $5)
                """, [merchantId, rule.country.code, rule.region ?? "", rule.rateBasisPoints, rule.shippingTaxable])
        }
    }

    /// The merchant's rules, ordered by country then region.
    static func rules(merchantId: String, on conn: PostgresConnection) throws -> [TaxRule] {
        try conn.query("""
            SELECT country_code, region, rate_basis_points, shipping_taxable FROM tax_rates
            WHERE merchant_id = $1 ORDER BY country_code, region
            """, [merchantId]).rows.map { row in
            let region: String = try row.decode("region")
            return TaxRule(country: try Country(code: try row.decode("country_code")),
                           region: region.isEmpty ? nil : region,
                           rateBasisPoints: try row.decode("rate_basis_points"),
                           shippingTaxable: try row.decode("shipping_taxable"))
        }
    }
}
