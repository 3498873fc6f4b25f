import ApplePayToken
import Crypto
import Foundation
import Time
#if canImport(Glibc)
import Glibc
#endif

/// `tender bench tokens` (hidden from usage; run by scripts/bench-tokens.sh): tokens per second on
/// one core for decryption alone, full verification with the chain cache, and without it.
/// `tender bench payments` (scripts/bench-payments.sh): see `PaymentsBench`.
enum BenchCommands {
    static let help = """
        usage: tender bench tokens [--seconds N] [--count N]
               tender bench payments --database-url URL [--seconds N] [--count-max N] [--clients N]
               tender bench reconcile FILE [--stage csv|lines|parser|match] [--payments N]
        tokens: prints Apple Pay token throughput on one thread: decrypt only, full verification with the
        verified-chain cache, and full verification without it (sandbox-minted EC_v1 tokens); beside them
        Tender's own ECDH and CMS signature check alone. --count N instead runs exactly N cached full
        verifications and prints nothing else (a fixed workload for callgrind; N = 0 gives the setup).
        payments: end-to-end payments/s through the HTTP API (tender bench payments --help).
        reconcile: CPU per line of one settlement import stage, no database (tender bench reconcile --help).
        """

    static func run(_ argv: [String], environment: [String: String]) throws -> ExitCode {
        guard let sub = argv.first, sub != "--help", sub != "-h" else { Console.out(help); return argv.isEmpty ? .usage : .success }
        if sub == "payments" { return try PaymentsBench.run(Array(argv.dropFirst()), environment: environment) }
        if sub == "reconcile" { return try ReconcileBench.run(Array(argv.dropFirst())) }
        guard sub == "tokens" else { throw UsageError(message: "unknown subcommand \(sub)") }
        let args = try Arguments(Array(argv.dropFirst()), options: ["seconds", "count"])
        if args.wantsHelp { Console.out(help); return .success }
        guard let seconds = Double(args.value("seconds") ?? "2"), seconds > 0, seconds <= 60 else {
            throw UsageError(message: "--seconds must be in 0...60")
        }
        let now = Clock.system.now()
        let authority = try SandboxAuthority.create(validFrom: now.addingTimeInterval(-86_400))
        let merchant = try authority.makeMerchantKey(merchantIdentifier: SandboxCommands.sandboxMerchantId,
                                                     validFrom: now.addingTimeInterval(-86_400))
        let token = try authority.mintToken(
            SandboxTokenRequest(amountMinor: 1498, currencyCodeNumeric: "840", applicationData: Array("bench".utf8), signingTime: now),
            for: merchant)
        let roots = [authority.root]
        let cached = ApplePayTokenDecryptor(trustedRoots: roots, merchantKeys: [merchant], tokenAgeMaxSeconds: 3_600)
        let uncached = ApplePayTokenDecryptor(trustedRoots: roots, merchantKeys: [merchant], tokenAgeMaxSeconds: 3_600,
                                              chainCacheEntriesMax: 0)
        let verified = try cached.verify(token, now: now)
        if let count = args.value("count") {
            guard let count = Int(count), count >= 0 else { throw UsageError(message: "--count must be a whole number") }
            for _ in 0..<count { _ = try cached.verifyAndDecrypt(token, now: now) }
            return .success
        }
        let unverified = try UnverifiedPaymentToken(json: token)
        guard let ephemeral = unverified.ephemeralPublicKey, let view = CMSDetachedSignatureView(der: unverified.signature),
              let signer = try? CMSSignerKey(certificate: authority.leaf)
        else { throw UsageError(message: "the sandbox token is not EC_v1 with a detached CMS signature") }
        let signedContent = unverified.signedContent

        let decryptOnly = try measure(seconds) { _ = try cached.decryptor.decrypt(verified) }
        let withCache = try measure(seconds) { _ = try cached.verifyAndDecrypt(token, now: now) }
        let withoutCache = try measure(seconds) { _ = try uncached.verifyAndDecrypt(token, now: now) }
        let ecdhOnly = try measure(seconds) { _ = try ECDH.sharedSecret(privateKey: merchant.privateKey, peerSPKI: ephemeral) }
        let cmsOnly = try measure(seconds) { _ = view.verify(content: signedContent, signer: signer) }
        let parseOnly = try measure(seconds) { _ = try UnverifiedPaymentToken(json: token) }
        Console.out(String(format: "tokens_per_second decrypt_only %.0f", decryptOnly))
        Console.out(String(format: "tokens_per_second full_verification_chain_cache %.0f", withCache))
        Console.out(String(format: "tokens_per_second full_verification_no_cache %.0f", withoutCache))
        Console.out(String(format: "operations_per_second ecdh_only %.0f", ecdhOnly))
        Console.out(String(format: "operations_per_second cms_signature_check_only %.0f", cmsOnly))
        Console.out(String(format: "operations_per_second token_json_parse_only %.0f", parseOnly))
        return .success
    }

    /// Runs `body` repeatedly for about `seconds` of this thread's CPU time and returns calls per CPU
    /// second: the divisor `openssl speed` uses by default (user CPU time), so that the two figures compare
    /// on a machine other processes share, where wall time measures the neighbours.
    static func measure(_ seconds: Double, _ body: () throws -> Void) throws -> Double {
        for _ in 0..<50 { try body() }
        let start = threadCPUSeconds()
        var calls = 0
        while true {
            for _ in 0..<100 { try body() }
            calls += 100
            let elapsed = threadCPUSeconds() - start
            if elapsed >= seconds { return Double(calls) / elapsed }
        }
    }

    /// CPU seconds this thread has used (CLOCK_THREAD_CPUTIME_ID).
    static func threadCPUSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
