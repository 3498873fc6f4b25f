// ApplePayToken: UnverifiedPaymentToken -> VerifiedPaymentToken -> DecryptedPaymentData.
import Crypto
import Money
