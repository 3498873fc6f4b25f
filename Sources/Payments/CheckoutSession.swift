// The checkout session as payments, checkout and merchant validation see it: its status and the
// rules that follow from it at a given time.

/// `checkout_sessions.status`.
public enum CheckoutSessionStatus: String, Sendable, CaseIterable, Codable {
    /// Accepts updates and a payment until it expires.
    case open
    /// A payment succeeded.
    case paid
    /// Past its expiry (marked by a reader that found it so).
    case expired
    /// Canceled by the merchant.
    case canceled
}

/// Why a session refuses an update or a payment.
public enum SessionRefusal: String, Sendable, Equatable, CaseIterable {
    /// A payment of it already succeeded.
    case alreadyPaid = "session_already_paid"
    /// Not open any more.
    case notOpen = "session_not_open"
    /// Past its expiry.
    case expired = "session_expired"
}

/// A checkout session's state at one instant: status and expiry.
public struct CheckoutSessionState: Sendable, Equatable {
    /// The stored status.
    public var status: CheckoutSessionStatus
    /// `expires_at` in Unix milliseconds.
    public var expiresAtMilliseconds: Int64

    /// Creates a state.
    public init(status: CheckoutSessionStatus, expiresAtMilliseconds: Int64) {
        self.status = status
        self.expiresAtMilliseconds = expiresAtMilliseconds
    }

    /// True once `nowMilliseconds` reached the expiry (`expires_at <= now`).
    public func isPastExpiry(atMilliseconds nowMilliseconds: Int64) -> Bool { expiresAtMilliseconds <= nowMilliseconds }

    /// Whether the session accepts a payment at `nowMilliseconds` (rules 31, 58): nil when it does. A
    /// paid session says so; an expired status, or an open one past its expiry, is `expired` (the sweeper
    /// marks overdue sessions, so both mean the same to a client); a canceled one `notOpen`.
    public func paymentRefusal(atMilliseconds nowMilliseconds: Int64) -> SessionRefusal? {
        switch status {
        case .paid: .alreadyPaid
        case .open: isPastExpiry(atMilliseconds: nowMilliseconds) ? .expired : nil
        case .expired: .expired
        case .canceled: .notOpen
        }
    }

    /// Whether the session accepts updates (and merchant validation) at `nowMilliseconds`: nil when it
    /// does; `expired` for an expired status or an open session past its expiry; `notOpen` otherwise.
    public func updateRefusal(atMilliseconds nowMilliseconds: Int64) -> SessionRefusal? {
        switch status {
        case .open: isPastExpiry(atMilliseconds: nowMilliseconds) ? .expired : nil
        case .expired: .expired
        case .paid, .canceled: .notOpen
        }
    }
}
