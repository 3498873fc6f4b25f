import Foundation
import Postgres
import Testing
@testable import TenderServer

private func tenderCode(_ body: () throws -> Void) -> String? {
    do { try body(); return nil } catch let e as TenderError { return e.code } catch { return "\(error)" }
}

/// Merchants and API keys managed from the command line, never with SQL.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct ManagementCLITests {
    static func environment() throws -> [String: String] {
        let env = ["TENDER_DATABASE_URL": try TestEnvironment.freshDatabase("cli_mgmt"),
                   "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory]
        #expect(try runTender(["migrate"], environment: env).status == 0)
        return env
    }

    @Test func merchantsListAndUpdate() throws {
        let env = try Self.environment()
        for id in ["merchant.b.example", "merchant.a.example"] {
            let added = try runTender(["merchants", "add", "--merchant-id", id, "--display-name", "Shop", "--domain", "localhost",
                                       "--country", "US", "--currencies", "USD"], environment: env)
            #expect(added.status == 0, "\(added.stderr)")
        }
        let listed = try #require(try jsonObject(try runTender(["merchants", "list"],
            environment: env).stdout)["merchants"] as? [[String: Any]])
        #expect(listed.compactMap { $0["merchantId"] as? String } == ["merchant.a.example", "merchant.b.example"])

        // The sandbox domain becomes the real one; the country and the untouched fields stay.
        let updated = try runTender(["merchants", "update", "--merchant-id", "merchant.a.example", "--domain",
            "Shop.Example.com,www.example.com",
                                     "--display-name", "Example Shop"], environment: env)
        #expect(updated.status == 0, "\(updated.stderr)")
        let merchant = try jsonObject(updated.stdout)
        #expect(merchant["domains"] as? [String] == ["shop.example.com", "www.example.com"])
        #expect(merchant["displayName"] as? String == "Example Shop")
        #expect(merchant["currencies"] as? [String] == ["USD"])
        let again = try #require(try jsonObject(try runTender(["merchants", "list"],
            environment: env).stdout)["merchants"] as? [[String: Any]])
        #expect(again.first?["domains"] as? [String] == ["shop.example.com", "www.example.com"])
        #expect(again.last?["domains"] as? [String] == ["localhost"])

        let badDomain = try runTender(["merchants", "update", "--merchant-id", "merchant.a.example", "--domain", "bad domain"],
            environment: env)
        #expect(badDomain.status == 1 && badDomain.stderr.contains("domain_invalid"))
        let badCurrency = try runTender(["merchants", "update", "--merchant-id", "merchant.a.example", "--currencies", "usd"],
            environment: env)
        #expect(badCurrency.status == 1 && badCurrency.stderr.contains("currency_invalid"))
        let unknown = try runTender(["merchants", "update", "--merchant-id", "merchant.nobody", "--display-name", "X"], environment: env)
        #expect(unknown.status == 1 && unknown.stderr.contains("merchant_not_found"))
        let nothing = try runTender(["merchants", "update", "--merchant-id", "merchant.a.example"], environment: env)
        #expect(nothing.status == ExitCode.usage.rawValue)
    }

    @Test func apiKeysListAndRevoke() throws {
        let env = try Self.environment()
        let merchantId = "merchant.keys.example"
        #expect(try runTender(["merchants", "add", "--merchant-id", merchantId, "--display-name", "Shop", "--domain", "localhost",
                               "--country", "US", "--currencies", "USD"], environment: env).status == 0)
        let created = try jsonObject(try runTender(["api-keys", "create", "--merchant-id", merchantId], environment: env).stdout)
        let secret = try #require(created["apiKey"] as? String)
        let keyId = try #require(created["keyId"] as? String)
        #expect(secret.hasPrefix("tk_\(keyId)_"))
        let pool = PostgresPool(configuration: PostgresConfiguration(connectionString: try #require(env["TENDER_DATABASE_URL"])))
        defer { pool.close() }
        let store = MerchantStore(pool: pool)

        let before = try #require(try jsonObject(try runTender(["api-keys", "list", "--merchant-id", merchantId],
            environment: env).stdout)["apiKeys"] as? [[String: Any]])
        #expect(before.count == 1 && before.first?["keyId"] as? String == keyId && before.first?["status"] as? String == "active")
        #expect(before.first?["lastUsedAt"] == nil)
        // A use is recorded; the listing never shows the secret.
        #expect(try store.authenticate(bearer: secret)?.merchantId == merchantId)
        let used = try runTender(["api-keys", "list", "--merchant-id", merchantId], environment: env)
        #expect(!used.stdout.contains(String(secret.suffix(64))))
        let usedKeys = try #require(try jsonObject(used.stdout)["apiKeys"] as? [[String: Any]])
        #expect(usedKeys.first?["lastUsedAt"] is String)

        let revoked = try runTender(["api-keys", "revoke", "--key-id", keyId], environment: env)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(try jsonObject(revoked.stdout)["status"] as? String == "revoked")
        #expect(try store.authenticate(bearer: secret) == nil)
        let twice = try runTender(["api-keys", "revoke", "--key-id", keyId], environment: env)
        #expect(twice.status == 1 && twice.stderr.contains("api_key_already_revoked"))
        let unknown = try runTender(["api-keys", "revoke", "--key-id", "zzzzzzzzzzzzzzzz"], environment: env)
        #expect(unknown.status == 1 && unknown.stderr.contains("api_key_not_found"))
        let noMerchant = try runTender(["api-keys", "list", "--merchant-id", "merchant.nobody"], environment: env)
        #expect(noMerchant.status == 1 && noMerchant.stderr.contains("merchant_not_found"))
    }

    @Test func lastUseIsWrittenAtMostOncePerResolution() throws {
        let pool = try TestEnvironment.migratedPool("apikey_use")
        defer { pool.close() }
        let store = MerchantStore(pool: pool)
        try store.add(try Merchant.validated(merchantId: "merchant.use", displayName: "Use", domains: ["localhost"],
                                             countryCode: "US", currencies: ["USD"]))
        let key = try store.createAPIKey(merchantId: "merchant.use")
        _ = try store.authenticate(bearer: key.secret)
        let first = try #require(try store.apiKeys(merchantId: "merchant.use").first?.lastUsedAt)
        _ = try store.authenticate(bearer: key.secret)
        #expect(try store.apiKeys(merchantId: "merchant.use").first?.lastUsedAt == first)
        // Once the recorded use is older than the resolution, the next use moves it.
        _ = try pool.execute("UPDATE api_keys SET last_used_at = now() - interval '61 seconds'")
        _ = try store.authenticate(bearer: key.secret)
        let moved = try #require(try store.apiKeys(merchantId: "merchant.use").first?.lastUsedAt)
        #expect(moved > first.addingTimeInterval(-61) && Date().timeIntervalSince(moved) < 30)
        // A wrong secret for a real key id records nothing.
        _ = try pool.execute("UPDATE api_keys SET last_used_at = NULL")
        let forged = "tk_\(key.keyId)_" + String(repeating: "0", count: 64)
        #expect(try store.authenticate(bearer: forged) == nil)
        #expect(try store.apiKeys(merchantId: "merchant.use").first?.lastUsedAt == nil)
        #expect(tenderCode { _ = try store.revokeAPIKey(keyId: "nokey") } == "api_key_not_found")
    }
}

/// HTTP management: revocation seen by a running server, coupons, refunds read back, report listing.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct ManagementHTTPTests {
    @Test func keyRevokedByAnotherProcessIsRefusedOnTheNextRequest() throws {
        let s = try RunningServer(prefix: "srv_revoke")
        defer { s.stop() }
        let (_, key) = try s.merchantWithKey()
        let keyId = try #require(APIKeyFormat.parse(key)?.keyId)
        let client = try RawHTTPClient(port: s.port)
        #expect(try client.request("GET", "/v1/merchant", headers: [("Authorization", "Bearer \(key)")]).status == 200)
        let revoked = try runTender(["api-keys", "revoke", "--key-id", keyId],
                                    environment: ["TENDER_DATABASE_URL": s.pool.configuration.connectionString])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        let refused = try client.request("GET", "/v1/merchant", headers: [("Authorization", "Bearer \(key)")])
        #expect(refused.status == 401)
        #expect(try refused.json()["code"] as? String == "unauthorized")
    }

    @Test func couponsDisableAndDelete() throws {
        let s = try RunningServer(prefix: "srv_coupons")
        defer { s.stop() }
        let (merchant, key) = try s.merchantWithKey()
        let auth = [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json")]
        let client = try RawHTTPClient(port: s.port)
        let created = try client.request("POST", "/v1/coupons", headers: auth, body: Array(#"{"code":"save10","percentOff":"10"}"#.utf8))
        #expect(created.status == 201, "\(created.text)")
        #expect(try created.json()["status"] as? String == "active")
        #expect(try s.pool.withConnection { try CouponStore.find(merchantId: merchant.merchantId, code: "SAVE10", on: $0) } != nil)

        let disabled = try client.request("POST", "/v1/coupons/SAVE10/disable", headers: auth)
        #expect(disabled.status == 200, "\(disabled.text)")
        #expect(try disabled.json()["status"] as? String == "disabled")
        // A disabled coupon is kept and listed but no longer applies at checkout.
        let listed = try #require(try client.request("GET", "/v1/coupons", headers: auth).json()["coupons"] as? [[String: Any]])
        #expect(listed.count == 1 && listed.first?["status"] as? String == "disabled")
        #expect(try s.pool.withConnection { try CouponStore.find(merchantId: merchant.merchantId, code: "SAVE10", on: $0) } == nil)
        #expect(try client.request("POST", "/v1/coupons/SAVE10/disable", headers: auth).status == 200)

        // Another merchant cannot touch it.
        let (_, otherKey) = try s.merchantWithKey()
        let foreign = try client.request("DELETE", "/v1/coupons/SAVE10", headers: [("Authorization", "Bearer \(otherKey)")])
        #expect(foreign.status == 404)
        #expect(try foreign.json()["code"] as? String == "coupon_not_found")

        let deleted = try client.request("DELETE", "/v1/coupons/save10", headers: auth)
        #expect(deleted.status == 200, "\(deleted.text)")
        #expect(try deleted.json()["deleted"] as? Bool == true)
        let gone = try client.request("DELETE", "/v1/coupons/SAVE10", headers: auth)
        #expect(gone.status == 404)
        #expect(try gone.json()["code"] as? String == "coupon_not_found")
        #expect(try client.request("POST", "/v1/coupons/NOPE/disable", headers: auth).status == 404)
        // The code is free again.
        let recreated = try client.request("POST", "/v1/coupons", headers: auth, body: Array(#"{"code":"SAVE10","percentOff":"5"}"#.utf8))
        #expect(recreated.status == 201, "\(recreated.text)")
    }

    @Test func refundsReadBackAndAmountRefunded() throws {
        let h = try PaymentsHarness(prefix: "pay_refund_list")
        defer { h.stop() }
        let checkout = try h.session(totalMinor: 1_099, currencyCode: "EUR")
        let paid = try h.pay(checkout, token: try h.token(for: checkout), key: "pay-1")
        #expect(paid.status == 200, "\(paid.text)")
        let paymentId = try #require(try paid.json()["payment"] as? [String: Any])["id"] as? String ?? ""
        #expect(try (paid.json()["payment"] as? [String: Any])?["amountRefunded"] as? String == "0.00")

        // Two refunds succeed; one (amount ending 13, the simulator's refund decline) is declined.
        for (amount, key) in [("2.00", "r-1"), ("3.00", "r-2"), ("0.13", "r-3")] {
            let r = try h.refund(paymentId, amount: amount, key: key)
            #expect(r.status == 200, "\(r.text)")
        }
        let payment = try h.get("/v1/payments/\(paymentId)").json()
        #expect(payment["amountRefunded"] as? String == "5.00")
        #expect(payment["amountRefundedMinor"] as? Int == 500)
        let listedPayment = try #require(try h.get("/v1/payments").json()["data"] as? [[String: Any]])
        #expect(listedPayment.first?["amountRefunded"] as? String == "5.00")

        let page = try h.get("/v1/payments/\(paymentId)/refunds").json()
        let refunds = try #require(page["data"] as? [[String: Any]])
        #expect(refunds.compactMap { $0["amount"] as? String } == ["0.13", "3.00", "2.00"])
        #expect(refunds.compactMap { $0["status"] as? String } == ["declined", "succeeded", "succeeded"])
        #expect(page["hasMore"] as? Bool == false)
        // Pages: newest first, then after the last one seen.
        let first = try h.get("/v1/payments/\(paymentId)/refunds?limit=2").json()
        #expect((first["data"] as? [[String: Any]])?.count == 2 && first["hasMore"] as? Bool == true)
        let lastSeen = try #require((first["data"] as? [[String: Any]])?.last?["id"] as? String)
        let second = try h.get("/v1/payments/\(paymentId)/refunds?limit=2&startingAfter=\(lastSeen)").json()
        #expect((second["data"] as? [[String: Any]])?.compactMap { $0["amount"] as? String } == ["2.00"])

        let unknown = try h.get("/v1/payments/pay_" + String(repeating: "a", count: 24) + "/refunds")
        #expect(unknown.status == 404)
        #expect(try unknown.json()["code"] as? String == "payment_not_found")
        let badLimit = try h.get("/v1/payments/\(paymentId)/refunds?limit=0")
        #expect(badLimit.status == 400)
        let badCursor = try h.get("/v1/payments/\(paymentId)/refunds?startingAfter=re_" + String(repeating: "b", count: 24))
        #expect(badCursor.status == 400)
        // Another merchant's key sees no such payment.
        let other = try h.app.merchants.createAPIKey(merchantId: try h.otherMerchant())
        #expect(try h.get("/v1/payments/\(paymentId)/refunds", bearer: other.secret).status == 404)
    }

    @Test func settlementReportsListNewestFirstAndMerchantScoped() throws {
        let h = try PaymentsHarness(prefix: "recon_list", settlement: true)
        defer { h.stop() }
        let header = "settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"
        var ids: [String] = []
        for day in 1...3 {
            let csv = header + "2026-01-0\(day),B\(day),fee,,,EUR,0.00,0.\(day)0,0.\(day)0\n"
            let r = try RawHTTPClient(port: h.port).request("POST", "/v1/settlement-reports?format=generic",
                                                            headers: [("Authorization", "Bearer \(h.apiKey)"), ("Content-Type",
                                                                "text/csv")],
                                                            body: Array(csv.utf8))
            #expect(r.status == 201, "\(r.text)")
            ids.append(try #require(try r.json()["id"] as? String))
        }
        let all = try h.get("/v1/settlement-reports").json()
        #expect((all["data"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ids.reversed())
        #expect(all["hasMore"] as? Bool == false)
        let first = try h.get("/v1/settlement-reports?limit=2").json()
        #expect((first["data"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[2], ids[1]])
        #expect(first["hasMore"] as? Bool == true)
        let rest = try h.get("/v1/settlement-reports?limit=2&startingAfter=\(ids[1])").json()
        #expect((rest["data"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[0]])
        #expect(rest["hasMore"] as? Bool == false)

        let other = try h.app.merchants.createAPIKey(merchantId: try h.otherMerchant())
        let foreign = try h.get("/v1/settlement-reports", bearer: other.secret).json()
        #expect((foreign["data"] as? [[String: Any]])?.isEmpty == true)
        let foreignCursor = try h.get("/v1/settlement-reports?startingAfter=\(ids[0])", bearer: other.secret)
        #expect(foreignCursor.status == 400)
        #expect(try foreignCursor.json()["code"] as? String == "parameter_invalid")
        #expect(try h.get("/v1/settlement-reports?limit=101").status == 400)
    }
}

extension PaymentsHarness {
    /// Registers a second merchant on the harness's database and returns its id.
    func otherMerchant() throws -> String {
        let id = "merchant.other.\(UUID().uuidString.prefix(8).lowercased())"
        try app.merchants.add(try Merchant.validated(merchantId: id, displayName: "Other", domains: ["other.test"],
                                                     countryCode: "US", currencies: ["EUR"]))
        return id
    }
}
