import Crypto
import FinanceStore

/// The pure part of applying a list of business events: their effects are replayed, in order, over the
/// postings the list touches as they were stored before it, and the rows to write are gathered.
///
/// Replaying in order is what makes a batch equal to the same events applied one by one: a status change
/// sees the postings inserted earlier in the batch, a second change of one posting starts from the first,
/// and a repeated event finds the posting the first one created. Only the final state of each posting
/// is written; balance deltas are summed per account (the sum of per-event deltas telescopes).
struct FinanceBatchPlan {
    /// A posting stored before the batch, with its legs.
    struct StoredPosting {
        /// Where its row is (`ctid`), read under the lock that keeps it there until the batch commits.
        let rowID: String
        /// `fingerprint(_:)` of the event that created it.
        let fingerprint: [UInt8]
        let posting: Posting
    }

    /// The net change of one FinanceKit account's balance.
    struct BalanceDelta {
        let currencyCode: String
        var bookedMinor: Int64 = 0
        var availableMinor: Int64 = 0
    }

    /// A posting as the batch has left it so far.
    private struct Slot {
        let fingerprint: [UInt8]
        var posting: Posting
        /// The stored row (`StoredPosting.rowID`), nil when the batch creates the posting (INSERT).
        let rowID: String?
        var isNew: Bool { rowID == nil }
    }

    let context: FinanceContext
    private var slots: [String: Slot] = [:]
    /// Keys of the postings the batch creates or moves, in the order of their first change.
    private var changedKeys: [String] = []
    private var changedKeySet: Set<String> = []
    /// Ledger accounts of the new postings, in order of first use.
    private(set) var ledgerAccounts: [LedgerAccount] = []
    private var ledgerAccountKeys: Set<String> = []
    /// The FinanceKit view of each exposed account of the new postings, opened on the first posting that
    /// uses it; written only for the accounts this batch turns out to create.
    private(set) var accountViews: [Account] = []
    private var balanceDeltas: [FinanceID: BalanceDelta] = [:]
    /// What happened to each event.
    private(set) var outcome = FinanceBatchOutcome()

    /// A plan over the postings stored before the batch (by key).
    init(context: FinanceContext, stored: [String: StoredPosting]) {
        self.context = context
        for (key, stored) in stored {
            slots[key] = Slot(fingerprint: stored.fingerprint, posting: stored.posting, rowID: stored.rowID)
        }
    }

    /// Every posting key the effects name (inserted or moved), each once, in first-seen order.
    static func postingKeys(of effects: [LedgerEffect]) -> [String] {
        var seen = Set<String>()
        var keys: [String] = []
        for effect in effects {
            switch effect {
            case .none: break
            case .insert(let postings):
                for posting in postings where seen.insert(posting.key).inserted { keys.append(posting.key) }
            case .transition(let key, _, _):
                if seen.insert(key).inserted { keys.append(key) }
            case .reverse(let key, let reversalKey, _):
                for key in [key, reversalKey] where seen.insert(key).inserted { keys.append(key) }
            }
        }
        return keys
    }

    /// Content of a posting that identifies its event (status and posted date excluded: they advance).
    static func fingerprint(_ p: Posting) -> [UInt8] {
        var text = "v1|\(p.key)|\(p.transactionType.rawValue)|\(p.transactionDate.secondsSinceEpoch)"
        text += "|\(p.transactionDescription.utf8.count):\(p.transactionDescription)"
        text += "|\(p.originalTransactionDescription.utf8.count):\(p.originalTransactionDescription)"
        for entry in p.entries {
            text += "|\(entry.account.key)|\(entry.account.currencyCode)|\(entry.side.rawValue)|\(entry.amountMinor)"
        }
        return Digest.sha256(text)
    }

    /// Applies one event's effect to the plan, with the single-event rules: a known posting with the same
    /// fingerprint is a replay, with another one `event_conflict`; a status change of an unknown posting is
    /// `posting_not_found` (or counted, under `.skip`); a forbidden change is `status_transition_invalid`.
    mutating func apply(_ effect: LedgerEffect, missingPostings: MissingPostingPolicy) throws(FinanceError) {
        switch effect {
        case .none:
            outcome.withoutEffect += 1
        case .insert(let postings):
            // Every posting of the event is checked before any is taken, as the event's own statement would.
            var fresh: [(posting: Posting, fingerprint: [UInt8])] = []
            for posting in postings {
                let fingerprint = Self.fingerprint(posting)
                if let slot = slots[posting.key] {
                    guard constantTimeEqual(slot.fingerprint, fingerprint) else {
                        throw FinanceError(.eventConflict, detail: posting.key)
                    }
                } else {
                    fresh.append((posting, fingerprint))
                }
            }
            if fresh.isEmpty { outcome.replayed += 1; return }
            for (posting, fingerprint) in fresh { try insert(posting, fingerprint: fingerprint) }
            outcome.applied += 1
        case let .reverse(key, reversalKey, at):
            guard let slot = slots[key] else {
                guard missingPostings == .skip else { throw FinanceError(.postingNotFound, detail: key) }
                outcome.missingPostings += 1
                return
            }
            switch slot.posting.status {
            case .booked: try apply(.insert([slot.posting.reversed(key: reversalKey, at: at)]), missingPostings: missingPostings)
            case .authorized, .pending: try apply(.transition(postingKey: key, status: .rejected, at: at), missingPostings: missingPostings)
            case .rejected, .memo: outcome.replayed += 1
            }
        case let .transition(key, status, at):
            guard let slot = slots[key] else {
                guard missingPostings == .skip else { throw FinanceError(.postingNotFound, detail: key) }
                outcome.missingPostings += 1
                return
            }
            guard let next = try slot.posting.transitioned(to: status, at: at) else {
                outcome.replayed += 1  // already there
                return
            }
            for transaction in slot.posting.transactions(context: context) { try addDelta(transaction, sign: -1) }
            for transaction in next.transactions(context: context) { try addDelta(transaction, sign: 1) }
            slots[key]?.posting = next
            markChanged(key)
            outcome.applied += 1
        }
    }

    private mutating func insert(_ posting: Posting, fingerprint: [UInt8]) throws(FinanceError) {
        slots[posting.key] = Slot(fingerprint: fingerprint, posting: posting, rowID: nil)
        markChanged(posting.key)
        for entry in posting.entries where ledgerAccountKeys.insert(entry.account.key).inserted {
            ledgerAccounts.append(entry.account)
            if let view = entry.account.financeAccount(identity: context.identity, openingDate: posting.transactionDate) {
                accountViews.append(view)
            }
        }
        for transaction in posting.transactions(context: context) { try addDelta(transaction, sign: 1) }
    }

    private mutating func markChanged(_ key: String) {
        if changedKeySet.insert(key).inserted { changedKeys.append(key) }
    }

    private mutating func addDelta(_ t: Transaction, sign: Int64) throws(FinanceError) {
        let (booked, available) = balanceContribution(t)
        var delta = balanceDeltas[t.accountID] ?? BalanceDelta(currencyCode: t.transactionAmount.currencyCode)
        delta.bookedMinor = try Self.add(delta.bookedMinor, sign * booked)
        delta.availableMinor = try Self.add(delta.availableMinor, sign * available)
        balanceDeltas[t.accountID] = delta
    }

    private static func add(_ a: Int64, _ b: Int64) throws(FinanceError) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard !overflow else { throw FinanceError(.amountOverflow, detail: "balance") }
        return sum
    }

    // MARK: What to write

    /// True when the batch changes anything (otherwise nothing is written and nobody is notified).
    var hasChanges: Bool { !changedKeys.isEmpty }

    /// Postings created by the batch, in their final state, in creation order.
    var newPostings: [Posting] { changedKeys.compactMap { slots[$0].flatMap { $0.isNew ? $0.posting : nil } } }

    /// The fingerprint of a posting of the batch.
    func fingerprint(of key: String) -> [UInt8] { slots[key]?.fingerprint ?? [] }

    /// Postings stored before the batch whose status changed, in their final state, with their row ids.
    var movedPostings: [(rowID: String, posting: Posting)] {
        changedKeys.compactMap { key in slots[key].flatMap { slot in slot.rowID.map { ($0, slot.posting) } } }
    }

    /// Every changed posting's FinanceKit transactions in their final state, in order of first change;
    /// `isNew` when the posting was created by the batch.
    var changedTransactions: [(transaction: Transaction, postingKey: String, isNew: Bool)] {
        changedKeys.flatMap { key -> [(transaction: Transaction, postingKey: String, isNew: Bool)] in
            guard let slot = slots[key] else { return [] }
            return slot.posting.transactions(context: context).map { ($0, key, slot.isNew) }
        }
    }

    /// Net balance changes in account-id order: the lock order every writer of `finance_balance` keeps.
    var balanceChanges: [(accountID: FinanceID, delta: BalanceDelta)] {
        balanceDeltas.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
