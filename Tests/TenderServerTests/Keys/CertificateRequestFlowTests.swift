import ApplePayToken
import Crypto
import Foundation
import Postgres
import Testing
@testable import TenderServer

/// The stored-error code of `body`, or nil when it succeeds.
private func tenderCode(_ body: () throws -> Void) -> String? {
    do { try body(); return nil } catch let e as TenderError { return e.code } catch { return "\(error)" }
}

/// `tender keys csr` then Apple's certificate: the key never leaves Tender and is paired by its public key.
@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CertificateRequestFlowTests {
    @Test func processingRequestThenAppleCertificateDecryptsTokens() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let (pending, request) = try f.store.makeCertificateRequest(merchantId: KeyFixture.merchantId, kind: .processing)
        let requested = try CertificateRequest.verifiedPublicKey(der: request.der)
        #expect(requested.kind == .ecP256)
        #expect(pending.publicKeyHash == Data(Digest.sha256(requested.spkiDER)).base64EncodedString())
        #expect(try f.store.pendingRequests(merchantId: KeyFixture.merchantId) == [pending])
        // Pending keys are sealed like stored ones: no PKCS#8 body in the row.
        let sealed: [UInt8] = try #require(try f.pool.query("SELECT private_key_sealed FROM merchant_key_requests WHERE key_id = $1",
                                                           [pending.keyId]).first).decode("private_key_sealed")
        #expect(sealed.count > 64)

        // What Apple's portal does with the CSR: a certificate for that public key, handed out as DER.
        let certificate = try f.authority.issueMerchantCertificate(merchantIdentifier: KeyFixture.merchantId, publicKey: requested,
                                                                   validFrom: f.now.addingTimeInterval(-3_600))
        let info = try f.store.importCertificate(merchantId: KeyFixture.merchantId, certificate: certificate.der, kind: nil)
        #expect(info.keyId == pending.keyId && info.kind == .processing && info.status == "active")
        #expect(info.publicKeyHash == pending.publicKeyHash)
        #expect(try f.store.pendingRequests(merchantId: KeyFixture.merchantId).isEmpty)

        // A token for that certificate decrypts with the key Tender made.
        let loaded = try #require(try f.store.activeProcessingKeys(merchantId: KeyFixture.merchantId).first)
        let token = try f.authority.mintToken(SandboxTokenRequest(amountMinor: 1498, currencyCodeNumeric: "840",
                                                                  applicationData: Array("s".utf8), signingTime: f.now),
                                              for: try MerchantKey(certificate: certificate, privateKey: loaded.privateKey))
        let result = try f.service().verifyAndDecrypt(tokenJSON: token, merchantId: KeyFixture.merchantId, now: f.now)
        #expect(result.paymentData.transactionAmountMinor == 1498)

        // The same certificate again: the request is used up.
        #expect(tenderCode { _ = try f.store.importCertificate(merchantId: KeyFixture.merchantId, certificate: certificate.der, kind: nil) }
                == "key_request_not_found")
    }

    @Test func certificateIsPairedOnlyWithItsOwnMerchantAndKind() throws {
        let other = "merchant.com.example.other"
        let f = try KeyFixture(merchants: [KeyFixture.merchantId, other])
        defer { f.pool.close() }
        let (_, request) = try f.store.makeCertificateRequest(merchantId: KeyFixture.merchantId, kind: .processing)
        let key = try CertificateRequest.verifiedPublicKey(der: request.der)
        let certificate = try f.authority.issueMerchantCertificate(merchantIdentifier: KeyFixture.merchantId, publicKey: key,
                                                                   validFrom: f.now.addingTimeInterval(-3_600))
        #expect(tenderCode { _ = try f.store.importCertificate(merchantId: other, certificate: certificate.der,
            kind: nil) } == "key_request_mismatch")
        #expect(tenderCode { _ = try f.store.importCertificate(merchantId: KeyFixture.merchantId, certificate: certificate.der,
            kind: .identity) }
                == "key_request_mismatch")
        // A certificate for a key Tender never made.
        let stranger = try f.merchantKey()
        #expect(tenderCode { _ = try f.store.importCertificate(merchantId: KeyFixture.merchantId, certificate: stranger.certificate.der,
            kind: nil) }
                == "key_request_not_found")
        #expect(tenderCode { _ = try f.store.importCertificate(merchantId: KeyFixture.merchantId, certificate: [0x30, 0x03, 0x02, 0x01,
            0x00], kind: nil) }
                == "certificate_invalid")
        #expect(tenderCode { _ = try f.store.makeCertificateRequest(merchantId: "merchant.unknown",
            kind: .processing) } == "merchant_not_found")
        // The refusals left the request pending.
        #expect(try f.store.pendingRequests(merchantId: KeyFixture.merchantId).count == 1)
    }

    @Test func identityRequestIsRSA2048AndBecomesTheMutualTLSKey() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let (pending, request) = try f.store.makeCertificateRequest(merchantId: KeyFixture.merchantId, kind: .identity)
        let requested = try CertificateRequest.verifiedPublicKey(der: request.der)
        #expect(requested.kind == .rsa(bits: 2_048))
        let caKey = try PrivateKey.generateP256()
        let certificate = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "merchant.com.example.keys", serialNumber: 9, notBefore: f.now.addingTimeInterval(-60),
                                notAfter: f.now.addingTimeInterval(86_400), isCertificateAuthority: false),
            subjectKey: requested, issuer: nil, issuerKey: caKey)
        let info = try f.store.importCertificate(merchantId: KeyFixture.merchantId, certificate: Array(certificate.pem.utf8),
            kind: .identity)
        #expect(info.kind == .identity && info.keyId == pending.keyId && info.publicKeyHash == nil)
        let identity = try #require(try f.store.activeIdentity(merchantId: KeyFixture.merchantId))
        #expect(identity.keyId == pending.keyId)
        #expect(identity.certificatePEM == certificate.pem)
    }

    @Test func derCertificateImportsWithItsKeyFile() throws {
        let f = try KeyFixture()
        defer { f.pool.close() }
        let key = try f.merchantKey()
        let info = try f.store.importKey(merchantId: KeyFixture.merchantId, certificate: key.certificate.der,
                                         privateKey: try key.privateKey.unsafePKCS8PEM(), kind: .processing)
        #expect(info.publicKeyHash == key.publicKeyHashBase64)
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct CertificateRequestCLITests {
    @Test func csrThenImportOfAppleDERCertificateFromTheCommandLine() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let url = try TestEnvironment.freshDatabase("cli_csr")
        let env = ["TENDER_DATABASE_URL": url, "TENDER_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
                   "TENDER_MASTER_KEY_FILE": dir.file("master.key")]
        #expect(try runTender(["migrate"], environment: env).status == 0)
        let merchantId = "merchant.com.example.csr"
        #expect(try runTender(["merchants", "add", "--merchant-id", merchantId, "--display-name", "CSR", "--domain", "shop.example",
                               "--country", "US", "--currencies", "USD"], environment: env).status == 0)
        let made = try runTender(["keys", "csr", "--merchant-id", merchantId, "--kind", "processing", "--out", dir.path], environment: env)
        #expect(made.status == 0, "\(made.stderr)")
        let out = try jsonObject(made.stdout)
        let path = try #require(out["certificateSigningRequest"] as? String)
        #expect(path == dir.file("\(merchantId).processing.certSigningRequest"))
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        let block = try #require(try PEM.blocks(in: pem).first)
        #expect(block.label == "CERTIFICATE REQUEST")
        #expect(!pem.contains("PRIVATE KEY"))
        // A second csr into the same directory does not overwrite the first.
        let again = try runTender(["keys", "csr", "--merchant-id", merchantId, "--kind", "processing", "--out", dir.path], environment: env)
        #expect(again.status == 1 && again.stderr.contains("file_exists"))
        let badKind = try runTender(["keys", "csr", "--merchant-id", merchantId, "--kind", "signing", "--out", dir.path], environment: env)
        #expect(badKind.status == ExitCode.usage.rawValue)

        let listed = try jsonObject(try runTender(["keys", "list", "--merchant-id", merchantId], environment: env).stdout)
        let pending = try #require(listed["pendingRequests"] as? [[String: Any]])
        #expect(pending.count == 1 && pending.first?["keyId"] as? String == out["keyId"] as? String)

        // Apple's portal answers with a DER .cer for the requested key.
        let authority = try SandboxAuthority.create(validFrom: Date().addingTimeInterval(-3_600))
        let certificate = try authority.issueMerchantCertificate(merchantIdentifier: merchantId,
                                                                 publicKey: try CertificateRequest.verifiedPublicKey(der: block.der),
                                                                 validFrom: Date().addingTimeInterval(-3_600))
        _ = FileManager.default.createFile(atPath: dir.file("apple_pay.cer"), contents: Data(certificate.der))
        let imported = try runTender(["keys", "import", "--merchant-id", merchantId, "--certificate", dir.file("apple_pay.cer")],
            environment: env)
        #expect(imported.status == 0, "\(imported.stderr)")
        let importedOut = try jsonObject(imported.stdout)
        #expect(importedOut["publicKeyHash"] as? String == out["publicKeyHash"] as? String)
        #expect(importedOut["keyId"] as? String == out["keyId"] as? String)
        let unknown = try runTender(["keys", "import", "--merchant-id", merchantId, "--certificate", dir.file("apple_pay.cer")],
            environment: env)
        #expect(unknown.status == 1 && unknown.stderr.contains("key_request_not_found"))
    }
}

@Suite(.enabled(if: TestEnvironment.hasDatabase, "needs TENDER_TEST_DATABASE_URL (make test)"))
struct DomainAssociationTests {
    @Test func configuredFileIsServedVerbatim() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let content = Data((0..<3_000).map { _ in UInt8.random(in: 0x30...0x39) })
        _ = FileManager.default.createFile(atPath: dir.file("association"), contents: content)
        let s = try RunningServer(prefix: "srv_domain", environment: ["TENDER_DOMAIN_ASSOCIATION_FILE": dir.file("association")])
        defer { s.stop() }
        let r = try RawHTTPClient(port: s.port).request("GET", "/.well-known/apple-developer-merchantid-domain-association")
        #expect(r.status == 200)
        #expect(r.body == Array(content))
    }

    @Test func unconfiguredIsAProblem404AndUnreadableIsAConfigurationError() throws {
        let s = try RunningServer(prefix: "srv_nodomain")
        defer { s.stop() }
        let r = try RawHTTPClient(port: s.port).request("GET", "/.well-known/apple-developer-merchantid-domain-association")
        #expect(r.status == 404)
        #expect(try r.json()["code"] as? String == "domain_association_not_configured")
        let error = try #require(throws: ConfigurationError.self) {
            try TenderConfiguration.load(environment: ["TENDER_DOMAIN_ASSOCIATION_FILE": "/nonexistent/association"])
        }
        #expect(error.variable == "TENDER_DOMAIN_ASSOCIATION_FILE")
    }
}
