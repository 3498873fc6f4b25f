import Foundation
import Testing
import Reconciliation

/// Draining items and effects while lines stream in must not change what the run finds.
@Suite struct DrainTests {
    @Test(arguments: [1, 2, 5])
    func drainedRunEqualsOneShotRun(every: Int) throws {
        let lines = try lines(ReconcilerTests.report(), format: .generic)
        let oneShot = Reconciler.reconcile(lines: lines, payments: ReconcilerTests.payments,
                                           refunds: ReconcilerTests.refunds, now: ReconcilerTests.now)
        var reconciler = Reconciler(payments: ReconcilerTests.payments, refunds: ReconcilerTests.refunds)
        var items: [ReconciliationItem] = []
        var effects: [FinanceEffect] = []
        for (index, line) in lines.enumerated() {
            reconciler.add(line)
            if (index + 1) % every == 0 {
                #expect(reconciler.pendingCount > 0)
                let drained = reconciler.drain()
                items += drained.items
                effects += drained.effects
                #expect(reconciler.pendingCount == 0)
            }
        }
        let rest = reconciler.drain()
        let finished = reconciler.report(now: ReconcilerTests.now)
        #expect(items + rest.items + finished.items == oneShot.items)
        #expect(effects + rest.effects + finished.effects == oneShot.effects)
        #expect(finished.counts == oneShot.counts)
        #expect(finished.batches == oneShot.batches)
        #expect(finished.lineCount == oneShot.lineCount)
        // After a full drain only the recorded items absent from the file are left to list.
        #expect(finished.items.allSatisfy { $0.lineNumber == nil })
    }
}
