// PaymentRequest: the Apple Pay JS payment request model and its validation (pure, no I/O).
import Money
