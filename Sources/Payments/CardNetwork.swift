/// The card scheme of a DPAN, read from its leading digits (the issuer identification number,
/// ISO/IEC 7812-1). The DPAN comes from the decrypted, Apple-signed payment data; the
/// `paymentMethod.network` Apple Pay JS hands over beside the token is signed by nobody, so the
/// network Tender stores and sends the processor is derived from the DPAN, never taken from it.
public enum CardScheme: String, Sendable, CaseIterable {
    case visa = "Visa"
    case masterCard = "MasterCard"
    case amex = "AmEx"
    case discover = "Discover"
    case jcb = "JCB"
    case chinaUnionPay = "ChinaUnionPay"

    /// The scheme whose published IIN ranges hold `dpan`, or nil for a number outside all of them.
    public static func of(dpan: String) -> CardScheme? {
        let digits = Array(dpan.utf8)
        guard digits.count >= 12, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        func prefix(_ count: Int) -> Int { digits.prefix(count).reduce(0) { $0 * 10 + Int($1 - 0x30) } }
        switch prefix(1) {
        case 4: return .visa
        case 5 where (51...55).contains(prefix(2)): return .masterCard
        case 2 where (2221...2720).contains(prefix(4)): return .masterCard
        case 3 where [34, 37].contains(prefix(2)): return .amex
        case 3 where (3528...3589).contains(prefix(4)): return .jcb
        case 6 where prefix(4) == 6011 || (644...649).contains(prefix(3)) || prefix(2) == 65: return .discover
        case 6 where prefix(2) == 62: return .chinaUnionPay
        default: return nil
        }
    }

    /// The scheme a `paymentMethod.network` value names (Apple Pay JS spellings, any case), or nil
    /// for a domestic or co-badged network (Cartes Bancaires, mada, eftpos, Interac, Maestro…) whose
    /// cards carry another scheme's numbers.
    public static func named(_ network: String) -> CardScheme? {
        switch network.lowercased() {
        case "visa", "electron", "vpay": .visa
        case "mastercard": .masterCard
        case "amex", "americanexpress": .amex
        case "discover": .discover
        case "jcb": .jcb
        case "chinaunionpay", "unionpay": .chinaUnionPay
        default: nil
        }
    }

    /// Discover and UnionPay accept each other's cards (the 622126–622925 co-brand range among them).
    func accepts(_ other: CardScheme) -> Bool {
        self == other || Set([self, other]) == [.discover, .chinaUnionPay]
    }
}

/// The network of one payment, as stored and sent to the processor.
public enum PaymentNetwork {
    /// Longest network name stored (the `payments.network` column's limit).
    public static let nameBytesMax = 32

    /// The DPAN's scheme when its BIN names one; a claimed network naming a different scheme is
    /// `.networkMismatch` (a Visa DPAN presented as AmEx). A number outside every known range keeps a
    /// claimed domestic network (letters and digits only), or `unknown`; it never takes a claimed
    /// major scheme, which its digits would have to show.
    public static func resolve(claimed: String?, dpan: String) -> Result<String, PaymentFailure> {
        let binScheme = CardScheme.of(dpan: dpan)
        if let claimed, let claimedScheme = CardScheme.named(claimed) {
            guard let binScheme, claimedScheme.accepts(binScheme) else { return .failure(.networkMismatch) }
        }
        if let binScheme { return .success(binScheme.rawValue) }
        let domestic = String((claimed ?? "").unicodeScalars
            .filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }
            .prefix(nameBytesMax).map(Character.init))
        return .success(domestic.isEmpty ? "unknown" : domestic)
    }
}
