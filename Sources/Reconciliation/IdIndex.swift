// A compact id → position index for the recorded ledger (a million payments per merchant): open
// addressing over 64-bit FNV-1a hashes of the ids' UTF-8, positions as Int32. Building and probing it
// costs a fraction of a `[String: Int]`, whose per-call hasher seeding dominated an import's profile.

/// Maps ids to positions in an array the caller owns; the first position recorded for an id wins.
/// A hash match is confirmed against the id itself (`idAt`), so colliding hashes never confuse two ids.
struct IdIndex {
    private var hashes: [UInt64]
    private var positions: [Int32]
    private let mask: Int

    /// An index with room for `capacity` ids at a load factor of at most one half.
    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        hashes = Array(repeating: 0, count: size)
        positions = Array(repeating: -1, count: size)
        mask = size - 1
    }

    /// Records `position` for `id` unless the id is already there.
    mutating func insert(_ id: String, position: Int, idAt: (Int) -> String?) {
        let hash = Self.hash(id)
        var slot = Int(truncatingIfNeeded: hash) & mask
        while positions[slot] >= 0 {
            if hashes[slot] == hash, idAt(Int(positions[slot])) == id { return }
            slot = (slot + 1) & mask
        }
        hashes[slot] = hash
        positions[slot] = Int32(position)
    }

    /// The position recorded for `id`, if any.
    func position(of id: String, idAt: (Int) -> String?) -> Int? {
        let hash = Self.hash(id)
        var slot = Int(truncatingIfNeeded: hash) & mask
        while positions[slot] >= 0 {
            if hashes[slot] == hash, idAt(Int(positions[slot])) == id { return Int(positions[slot]) }
            slot = (slot + 1) & mask
        }
        return nil
    }

    /// FNV-1a, 64-bit, over the UTF-8 bytes, with a final avalanche so that the low bits (the slot)
    /// depend on every byte.
    static func hash(_ id: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let done: Bool? = id.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            return true
        }
        if done == nil {
            for byte in id.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        }
        hash ^= hash >> 33
        hash = hash &* 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        return hash
    }
}
