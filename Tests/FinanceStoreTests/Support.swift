@testable import FinanceStore

/// A small deterministic PRNG (SplitMix64) so property and simulation tests replay from a seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A test-only keyed 32-byte hash (FNV-1a lanes); production injects HMAC-SHA256 and SHA-256.
func testHash(key: [UInt8], _ input: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    for lane in UInt64(0)..<4 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 ^ (lane &* 0x1000_0000_01B3)
        for byte in key + [0xFF] + input {
            h ^= UInt64(byte)
            h = h &* 0x100_0000_01B3
        }
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        out += BigEndian.bytes(h)
    }
    return out
}

let testDigest: @Sendable ([UInt8]) -> [UInt8] = { testHash(key: [], $0) }

func makeContext(merchant: String = "m_1") -> FinanceContext {
    FinanceContext(identity: FinanceIdentity(merchantID: merchant, digest: testDigest),
                   merchantName: "Our Shop", merchantCategoryCode: 5812)
}

func ts(_ seconds: Int64) -> FinanceTimestamp { FinanceTimestamp(secondsSinceEpoch: 1_770_000_000 + seconds) }

func eur(_ minor: Int64, _ processor: String = "adyen") -> EventMoney {
    EventMoney(amountMinor: minor, currencyCode: "EUR", processor: processor)
}

/// Runs `body` and returns the FinanceError it throws, or nil.
func financeError(_ body: () throws -> Void) -> FinanceError? {
    do { try body(); return nil } catch { return error as? FinanceError ?? FinanceError(.valueInvalid, detail: "not a FinanceError") }
}
