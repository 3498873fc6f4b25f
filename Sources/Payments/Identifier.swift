// Every Tender identifier: a type prefix and lowercase alphanumerics drawn uniformly from random bytes.

/// A prefixed identifier kind (`pay_…`, `re_…`, `cs_…`, `evt_…`, `sr_…`): mints and validates its ids.
public struct PrefixedIdentifier: Sendable, Equatable {
    /// The type prefix, e.g. `pay_`.
    public let prefix: String
    /// Characters after the prefix.
    public let randomCharacters: Int

    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// A kind with `randomCharacters` symbols after `prefix`.
    public init(prefix: String, randomCharacters: Int = 24) {
        self.prefix = prefix
        self.randomCharacters = randomCharacters
    }

    /// Payments.
    public static let payment = PrefixedIdentifier(prefix: "pay_")
    /// Refunds.
    public static let refund = PrefixedIdentifier(prefix: "re_")
    /// Checkout sessions.
    public static let checkoutSession = PrefixedIdentifier(prefix: "cs_")
    /// Events.
    public static let event = PrefixedIdentifier(prefix: "evt_")
    /// Settlement reports.
    public static let settlementReport = PrefixedIdentifier(prefix: "sr_")
    /// The key id inside an API key (`tk_<id>_<secret>`), without a prefix of its own.
    public static let apiKeyId = PrefixedIdentifier(prefix: "", randomCharacters: 16)

    /// Builds an id from random bytes by rejection sampling (uniform over 36 symbols). Returns nil when
    /// `randomBytes` ran out before enough symbols were drawn; callers pass plenty (e.g. 64 bytes).
    public func make(randomBytes: [UInt8]) -> String? {
        var out = [UInt8]()
        for byte in randomBytes where byte < 252 && out.count < randomCharacters {
            out.append(Self.alphabet[Int(byte) % 36])
        }
        guard out.count == randomCharacters else { return nil }
        return prefix + String(decoding: out, as: UTF8.self)
    }

    /// A fresh id, drawing from `randomBytes(64)` until one is complete.
    public func mint(randomBytes: (Int) -> [UInt8]) -> String {
        while true {
            if let id = make(randomBytes: randomBytes(64)) { return id }
        }
    }

    /// True when `text` is the prefix followed by exactly `randomCharacters` lowercase alphanumerics.
    public func isValid(_ text: String) -> Bool {
        guard text.hasPrefix(prefix) else { return false }
        let rest = Array(text.utf8.dropFirst(prefix.utf8.count))
        return rest.count == randomCharacters && rest.allSatisfy { Self.alphabet.contains($0) }
    }
}

/// The original spelling: `PaymentIdentifier.make(prefix:randomBytes:)` and `isValid(_:prefix:)`.
public enum PaymentIdentifier {
    /// Characters after the prefix.
    public static let randomCharacters = 24

    /// `PrefixedIdentifier(prefix:).make(randomBytes:)`.
    public static func make(prefix: String, randomBytes: [UInt8]) -> String? {
        PrefixedIdentifier(prefix: prefix).make(randomBytes: randomBytes)
    }

    /// `PrefixedIdentifier(prefix:).isValid(_:)`.
    public static func isValid(_ text: String, prefix: String) -> Bool {
        PrefixedIdentifier(prefix: prefix).isValid(text)
    }
}
