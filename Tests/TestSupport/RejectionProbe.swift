public import TeamLog
import TeamLogStore

/// What a rejected op left behind in a real store: the rule tables' check that a rejection stores nothing.
///
/// `decide` cannot mutate the world it reads and a pure test machine never applies a rejected op, so a
/// check on the machine could never fail; this one runs the case through `Store.submit` on LMDB.
public struct RejectionResidue: CustomStringConvertible, Sendable {
    /// The store's answer (`nil`: it accepted the op).
    public var rejection: Rejection?
    /// Whether a system members-sync event was stored before the rejection (SPEC §1.3).
    public var storedMembersSync = false
    /// Events and opIds waiting for the next commit.
    public var pending = 0
    /// Projection records marked changed.
    public var changedRecords = 0
    /// Projection records (encoded from the state) that differ from before the op.
    public var differingRecords = 0
    /// Whether the last seq or the event time moved.
    public var movedLog = false

    /// Nothing pending, nothing marked or changed, the log where it was.
    public var isClean: Bool {
        rejection != nil && !storedMembersSync && pending == 0 && changedRecords == 0 && differingRecords == 0
            && !movedLog
    }

    public var description: String {
        "rejection \(rejection.map { "\($0.code)" } ?? "none"), members sync \(storedMembersSync), pending \(pending), "
            + "changed records \(changedRecords), differing records \(differingRecords), log moved \(movedLog)"
    }

    /// Feeds `setup` into a fresh store (each line must be accepted) and commits, then submits `line`
    /// with the clock at `now` and reports what it left.
    public static func probe(setup: [String], line: String, config: Config = Config(), now: Int64) throws
        -> RejectionResidue
    {
        let directory = TemporaryDirectory("rejection")
        var options = Store.Options()
        options.config = config
        options.noSync = true
        options.verifyChainAtOpen = false
        let store = try Store(path: directory.child("store"), options: options)
        defer { store.close() }
        for text in setup {
            guard case .success(let op) = OpParser.parse(line: text), case .accepted = try store.submit(op, now: now)
            else { throw ProbeError(line: text) }
        }
        try store.checkpointNow()  // the setup's changes written: what is marked after the op is the op's
        let before = ProjectionCodec.allRecords(store.world)
        // The running totals of the unread indexes are in no record of a writer's state: compared apart.
        let (convsBefore, userConvsBefore) = (store.world.convs, store.world.userConvs)
        let (seq, ts) = (store.world.lastSeq, store.world.lastTs)
        var residue = RejectionResidue()
        switch OpParser.parse(line: line) {
        case .failure(let rejection):
            residue.rejection = rejection
        case .success(let op):
            switch try store.submit(op, now: now) {
            case .rejected(let rejection): residue.rejection = rejection
            case .rejectedAfterSync(let rejection, _, _):
                residue.rejection = rejection
                residue.storedMembersSync = true
            case .accepted, .duplicate, .rejectedBefore: return residue
            }
        }
        residue.pending = store.pendingCount
        residue.changedRecords = store.world.changes.dirty.count + store.world.changes.appended.count
        let after = ProjectionCodec.allRecords(store.world)
        for (table, records) in after {
            let old = before[table] ?? []
            let same = old.count == records.count && zip(old, records).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            if !same { residue.differingRecords += max(1, abs(old.count - records.count)) }
        }
        if store.world.convs != convsBefore || store.world.userConvs != userConvsBefore {
            residue.differingRecords += 1
        }
        residue.movedLog = store.world.lastSeq != seq || store.world.lastTs != ts
        return residue
    }
}

/// A setup line of a probe that the store did not accept.
public struct ProbeError: Error, CustomStringConvertible {
    public var line: String
    public var description: String { "setup line not accepted: \(line)" }
}
