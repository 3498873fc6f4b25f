import Testing
@testable import FinanceStore

/// A pure model of PostgreSQL's xid/sequence/commit behaviour, and readers paging over it.
struct SimulatedDatabase {
    struct ChangeRow { let xid: UInt64; let seq: Int64; let op: ChangeOperation; let entity: UInt64 }
    struct Writer { let xid: UInt64; var rows: [ChangeRow] = []; var writes: [UInt64: String?] = [:] }

    var nextXid: UInt64 = 100
    var nextSeq: Int64 = 1
    var running: [UInt64: Writer] = [:]
    var committedRows: [ChangeRow] = []
    var entities: [UInt64: String] = [:]       // committed current state
    var locked: Set<UInt64> = []               // row locks held by running writers

    /// `pg_snapshot_xmin(pg_current_snapshot())`: the oldest running xid, or the next xid when idle.
    var horizon: UInt64 { running.keys.min() ?? nextXid }

    mutating func begin() -> UInt64 {
        defer { nextXid += 1 }
        running[nextXid] = Writer(xid: nextXid)
        return nextXid
    }

    /// Writes entity `entity` in `xid` (taking its row lock); false when another writer holds it.
    mutating func write(_ xid: UInt64, entity: UInt64, state: String?) -> Bool {
        guard var writer = running[xid], writer.writes[entity] != nil || !locked.contains(entity) else { return false }
        locked.insert(entity)
        let exists = writer.writes[entity].map { $0 != nil } ?? (entities[entity] != nil)
        let op: ChangeOperation = state == nil ? .delete : (exists ? .update : .insert)
        if state == nil && !exists { return false }
        writer.rows.append(ChangeRow(xid: xid, seq: nextSeq, op: op, entity: entity))
        writer.writes[entity] = .some(state)
        nextSeq += 1   // sequences are taken at INSERT and never given back
        running[xid] = writer
        return true
    }

    mutating func finish(_ xid: UInt64, commit: Bool) {
        guard let writer = running.removeValue(forKey: xid) else { return }
        for entity in writer.writes.keys { locked.remove(entity) }
        guard commit else { return }
        committedRows += writer.rows
        for (entity, state) in writer.writes { entities[entity] = state }
    }

    /// `ChangeFeedSQL.readPage` in one snapshot: rows after `position` and below the horizon, joined
    /// to the current committed state.
    func readPage(after position: HistoryPosition, limit: Int) -> ([ChangeLogRow<String>], UInt64) {
        let h = horizon
        let rows = committedRows
            .filter { ($0.xid, $0.seq) > (position.xid, position.seq) && $0.xid < h }
            .sorted { ($0.xid, $0.seq) < ($1.xid, $1.seq) }
            .prefix(limit)
            .map { row in
                ChangeLogRow(position: HistoryPosition(epoch: 1, xid: row.xid, seq: row.seq), operation: row.op,
                             entityID: FinanceID(high: 0, low: row.entity), payload: entities[row.entity])
            }
        return (Array(rows), h)
    }
}

@Suite struct OutOfOrderCommitTests {
    let codec = HistoryTokenCodec(signingKey: keyA)

    /// Writers commit in random order while a reader pages with the horizon rule, is killed at random
    /// (keeping only its durable copy and token, committed together) and resumed from the token. After
    /// the last commit the reader drains: its copy equals the committed state.
    @Test(arguments: Array(UInt64(1)...UInt64(40)))
    func consumerConvergesToTheCommittedState(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var db = SimulatedDatabase()
        let scope = try HistoryScope(merchantID: "m_1", resource: .accounts, accountID: nil)
        var durableCopy: [FinanceID: String] = [:]
        var durableToken: String? = nil
        var deliveries = 0
        var now = ts(0)

        func readerStep(pageSize: Int) throws -> Bool {
            let position = try durableToken.map { try codec.verify($0, scope: scope, currentEpoch: 1, now: now) }
                ?? .origin(epoch: 1)
            let (rows, horizon) = db.readPage(after: position, limit: pageSize + 1)
            let page = try HistoryPageBuilder.build(rows: rows, after: position, horizon: horizon, pageSize: pageSize,
                                                    scope: scope, codec: codec, now: now)
            // Apply upserts/deletes and the token together (FinanceKit guidance: commit before the token).
            for state in page.inserted + page.updated {
                // States are "<entity>/v<n>": the entity number is the id.
                let id = FinanceID(high: 0, low: UInt64(state.split(separator: "/")[0]) ?? 0)
                durableCopy[id] = state
            }
            for id in page.deleted { durableCopy[id] = nil }
            deliveries += page.inserted.count + page.updated.count + page.deleted.count
            durableToken = page.newToken
            return page.hasMore
        }

        var writersLeft = 60
        var version = 0
        while writersLeft > 0 || !db.running.isEmpty {
            now = FinanceTimestamp(secondsSinceEpoch: now.secondsSinceEpoch + 1)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0, 1:
                guard writersLeft > 0 else { continue }
                _ = db.begin()
                writersLeft -= 1
            case 2, 3, 4:
                guard let xid = db.running.keys.randomElement(using: &rng) else { continue }
                let entity = UInt64.random(in: 1...25, using: &rng)
                version += 1
                let delete = Int.random(in: 0..<8, using: &rng) == 0
                _ = db.write(xid, entity: entity, state: delete ? nil : "\(entity)/v\(version)")
            case 5, 6:
                guard let xid = db.running.keys.randomElement(using: &rng) else { continue }
                db.finish(xid, commit: Int.random(in: 0..<10, using: &rng) != 0)
            case 7:
                // Killed: in-memory state is gone; the durable copy and token survive.
                continue
            default:
                _ = try readerStep(pageSize: Int.random(in: 1...4, using: &rng))
            }
        }
        var rounds = 0
        while try readerStep(pageSize: 3) { rounds += 1; try #require(rounds < 10_000) }
        let committed = Dictionary(uniqueKeysWithValues: db.entities.map { (FinanceID(high: 0, low: $0.key), $0.value) })
        #expect(durableCopy == committed)
        #expect(deliveries >= committed.count)
    }

    /// The same schedule read with a plain sequence cursor (`seq > last`, no horizon) loses rows for some
    /// seeds: evidence that the simulation really commits out of order.
    @Test func aSequenceCursorLosesRowsInTheSameSimulation() {
        var lostSomewhere = false
        for seed in UInt64(1)...40 {
            var rng = SplitMix64(seed: seed)
            var db = SimulatedDatabase()
            var lastSeq: Int64 = 0
            var seen: Set<Int64> = []
            for _ in 0..<600 {
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: _ = db.begin()
                case 1, 2:
                    if let xid = db.running.keys.randomElement(using: &rng) {
                        _ = db.write(xid, entity: UInt64.random(in: 1...25, using: &rng), state: "s")
                    }
                case 3, 4:
                    if let xid = db.running.keys.randomElement(using: &rng) { db.finish(xid, commit: true) }
                default:
                    for row in db.committedRows.filter({ $0.seq > lastSeq }).sorted(by: { $0.seq < $1.seq }) {
                        seen.insert(row.seq)
                        lastSeq = row.seq
                    }
                }
            }
            for xid in db.running.keys { db.finish(xid, commit: true) }
            for row in db.committedRows where row.seq > lastSeq { seen.insert(row.seq) }
            if Set(db.committedRows.map(\.seq)) != seen { lostSomewhere = true }
        }
        #expect(lostSomewhere)
    }
}
