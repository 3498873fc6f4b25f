import Crypto
import Foundation

/// A verified token together with its decrypted payload.
public struct DecryptedPaymentToken: Sendable {
    /// Verified header data: transactionId, applicationData, publicKeyHash, signing time.
    public let token: VerifiedPaymentToken
    /// The decrypted, masked-by-default payload.
    public let paymentData: DecryptedPaymentData

    /// Pairs a verified token with its payload (each built only by the verifier and the decryptor).
    public init(token: VerifiedPaymentToken, paymentData: DecryptedPaymentData) {
        self.token = token
        self.paymentData = paymentData
    }
}

/// The one-call facade: parse within limits, verify every rule in order, then decrypt.
public final class ApplePayTokenDecryptor: Sendable {
    /// Parse limits.
    public let limits: TokenLimits
    /// The verification pipeline (with its chain cache).
    public let verifier: TokenVerifier
    /// The merchant-key side.
    public let decryptor: PaymentDataDecryptor

    /// Creates a decryptor trusting `trustedRoots` and decrypting with `merchantKeys`.
    public init(trustedRoots: [Certificate], merchantKeys: [MerchantKey], tokenAgeMaxSeconds: Int64,
                limits: TokenLimits = TokenLimits(), chainCacheEntriesMax: Int = 64) {
        self.limits = limits
        verifier = TokenVerifier(trustedRoots: trustedRoots, tokenAgeMaxSeconds: tokenAgeMaxSeconds,
                                 chainCacheEntriesMax: chainCacheEntriesMax)
        decryptor = PaymentDataDecryptor(merchantKeys: merchantKeys, limits: limits)
    }

    /// The embedded Apple Root CA – G3, checked against its pinned fingerprint.
    public static func appleRootCertificate() throws(TokenError) -> Certificate {
        let root: Certificate
        do { root = try Certificate(pem: AppleRootCA.g3PEM) } catch {
            throw TokenError(.trustedRootInvalid, "embedded Apple root does not parse")
        }
        guard hexEncoded(root.fingerprintSHA256).uppercased() == AppleRootCA.g3FingerprintSHA256Hex else {
            throw TokenError(.trustedRootInvalid, "embedded Apple root does not match its pin")
        }
        return root
    }

    /// Verifies only (no merchant key needed).
    public func verify(_ json: [UInt8], now: Date) throws(TokenError) -> VerifiedPaymentToken {
        try verifier.verify(UnverifiedPaymentToken(json: json, limits: limits), now: now)
    }

    /// Verifies then decrypts, returning the payload only.
    public func decrypt(_ json: [UInt8], now: Date) throws(TokenError) -> DecryptedPaymentData {
        try verifyAndDecrypt(json, now: now).paymentData
    }

    /// Verifies then decrypts, returning both the verified header data and the payload.
    public func verifyAndDecrypt(_ json: [UInt8], now: Date) throws(TokenError) -> DecryptedPaymentToken {
        let token = try verify(json, now: now)
        return DecryptedPaymentToken(token: token, paymentData: try decryptor.decrypt(token))
    }
}
