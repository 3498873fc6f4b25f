import Crypto
import HTTPClient

/// The key store serves merchant validation its mutual-TLS identity: the merchant's active
/// merchant-identity certificate and key, unsealed for one call.
extension KeyStore: MerchantIdentityProviding {
    public func identity(merchantId: String) throws -> TLSClientIdentity? {
        guard let stored = try activeIdentity(merchantId: merchantId) else { return nil }
        var keyBytes = stored.privateKeyPEM.unsafeRevealedCopy()
        return TLSClientIdentity(certificatePEM: Array(stored.certificatePEM.utf8),
                                 privateKeyPEM: SecretPEM(zeroingSource: &keyBytes))
    }
}
