// libFuzzer entry point for Apple Pay token and CMS parsing (STYLE.md: parsers get a fuzz target).
// Built outside SwiftPM by scripts/fuzz.sh with -sanitize=fuzzer,address, together with the Crypto,
// Money and ApplePayToken sources. Every input goes through three parsers: the token JSON (and, when
// it parses, the whole verification pipeline against the pinned Apple root), CMS SignedData DER and
// X.509 DER. Any outcome is fine except a crash, a sanitizer report or a hang.
import ApplePayToken
import Crypto
import Foundation

/// The verification clock: the gala-2023 vector's signing time, so seeds reach the deep checks.
let fuzzClock = Date(timeIntervalSince1970: 1_630_522_986)
let fuzzVerifier: TokenVerifier? = {
    guard let root = try? ApplePayTokenDecryptor.appleRootCertificate() else { return nil }
    return TokenVerifier(trustedRoots: [root], tokenAgeMaxSeconds: 300)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func tokenFuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    if let token = try? UnverifiedPaymentToken(json: bytes), let verifier = fuzzVerifier {
        _ = try? verifier.verify(token, now: fuzzClock)
    }
    _ = try? CMSSignedData(der: bytes)
    _ = try? Certificate(der: bytes)
    return 0
}
