import Testing
@testable import Reconciliation

@Suite struct IdIndexTests {
    @Test func findsEveryIdAndNothingElseAndTheFirstPositionWins() {
        let ids = (0..<20_000).map { "pay_\(String($0, radix: 36))_\($0 % 7)" }
        var index = IdIndex(capacity: ids.count + 1)
        for (position, id) in ids.enumerated() { index.insert(id, position: position) { ids[$0] } }
        // A repeated id keeps its first position.
        let all = ids + [ids[42]]
        index.insert(ids[42], position: ids.count) { all[$0] }
        for (position, id) in ids.enumerated() {
            #expect(index.position(of: id) { all[$0] } == position)
        }
        #expect(index.position(of: "pay_absent") { all[$0] } == nil)
        #expect(index.position(of: ids[1] + "x") { all[$0] } == nil)
        #expect(index.position(of: "") { all[$0] } == nil)
    }

    @Test func aHashMatchIsConfirmedAgainstTheId() {
        // Two positions that claim the same id text are told apart by the id, never by the hash alone.
        var index = IdIndex(capacity: 4)
        let ids = ["a", "b", "c"]
        for (position, id) in ids.enumerated() { index.insert(id, position: position) { ids[$0] } }
        // An accessor that disagrees with what was inserted makes every lookup miss rather than lie.
        #expect(index.position(of: "a") { _ in "z" } == nil)
        #expect(index.position(of: "c") { ids[$0] } == 2)
    }
}
