import Crypto
import Foundation
import Testing
@testable import ApplePayToken

/// Replays every input in `crashers/` (written by scripts/fuzz.sh, plus hand-made regressions) through
/// the parsers the fuzz target drives: none may crash, and none may verify.
@Suite struct CrasherReplayTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("crashers")

    static func inputs() throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !["README.md", ".keep"].contains($0.lastPathComponent) }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test func folderHoldsTheRegressionInputs() throws {
        #expect(try Self.inputs().count >= 3)
    }

    @Test func everyCrasherIsRefusedCleanly() throws {
        let verifier = TokenVerifier(trustedRoots: [try Vectors.appleRoot()], tokenAgeMaxSeconds: 300)
        let clock = try Vectors.date(VectorTests.galaTime)
        for url in try Self.inputs() {
            let bytes = Array(try Data(contentsOf: url))
            #expect(throws: TokenError.self, "\(url.lastPathComponent) must not verify") {
                _ = try verifier.verify(try UnverifiedPaymentToken(json: bytes), now: clock)
            }
            #expect(throws: CryptoError.self) { _ = try CMSSignedData(der: bytes) }
            #expect(throws: CryptoError.self) { _ = try Certificate(der: bytes) }
        }
    }
}
