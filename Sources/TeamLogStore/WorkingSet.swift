import LMDB
public import TeamLog

/// The store's side of the working set (docs/store-design.md §5): before an op is decided (or a logged
/// event re-applied) every unit its footprint names is made resident, loaded from the projection
/// environment when it is not; after each checkpoint, clean units beyond the budget are evicted.
///
/// - A unit not resident is either unknown to the process, or was evicted after every change to it was in
///   a committed checkpoint, so the projection environment holds its current value: loading it from the
///   last committed snapshot is exact. (Units are never deleted, only their records within a team.)
/// - Every unit an op reads or changes is in its footprint, so the seq of the last op whose footprint
///   named a unit bounds its last change: a unit is clean when that seq is at or before the committed
///   checkpoint. Debug builds check after every op that each changed record's unit was named. That seq
///   is kept in the unit's own value (`ResidencyStamp`), so naming a resident unit is the one probe that
///   finds it; a unit the op loads or creates is stamped before the next op (`unstamped`).
/// - Eviction is least recently named first, by epochs: an epoch is the ops between two checkpoints. A
///   unit joins the queue (`clock`) the first time it is named in an epoch, tagged with it (an entry from
///   an earlier epoch is then stale). A sweep pops from the front the entries of epochs the committed
///   checkpoint covers — every unit still tagged with such an epoch is clean — evicting live ones and
///   dropping stale ones, down to three quarters of the budget, and stops at the first entry of a later
///   epoch: it visits what it evicts plus stale entries (each made once by a naming), never the dirty or
///   recently named units.
struct WorkingSet {
    /// The budget for the resident state's estimated size (`World.residentBytesEstimate`).
    var budgetBytes: Int
    /// Units the last op named that were not resident before it (loaded, created, or neither), with the
    /// op's seq (the op's, or the next one for a rejected op): stamped before the next op or sweep.
    var unstamped: [(ResidentKey, UInt64)] = []
    /// Tracked units, each with the epoch in which it was first named (`epoch` at the time), in that order:
    /// epochs never decrease along the queue. An entry whose unit was named in a later epoch since is stale.
    var clock = FIFO<(ResidentKey, UInt32)>()
    /// The open epoch and the ends of the closed ones the queue still has entries of.
    var epochs = Epochs()
    /// The open epoch: units named now are tagged with it.
    var epoch: UInt32 { epochs.open }
    /// The loader's read transaction, kept (reset) between loads with its reader slot.
    var snapshot: ReadSnapshot?
    /// Scratch for footprints.
    var keys: [ResidentKey] = []
    var missing: [ResidentKey] = []
    /// Views loaded without their running totals so far (`Store.completeTotals` looks for one only
    /// once there was one: a batch into a store that evicts nothing never pays for the probe).
    var viewsLoadedWithoutTotals = 0
    /// Counters for `status`, metrics and benchmarks.
    var stats = WorkingSetStats()
    /// Set for a scratch store, which starts empty and is written by this process alone: a unit its
    /// projection environment holds was resident here first, so a unit that is not resident and was
    /// never evicted does not exist, and is not looked up. A replay names a new id with almost every
    /// message (each looked up in the B-tree to rule out a duplicate, in a read transaction renewed for
    /// it); with this, only units that may have been evicted are.
    var onlyEvictedAreStored = false
    /// The units evicted so far, when `onlyEvictedAreStored` (made at the first eviction; a wholesale
    /// replay's messages are not in it: `mayBeStored`).
    var evicted: BloomFilter?
    /// Whether anything was evicted yet (a unit into `evicted`, or a wholesale replay's messages).
    var hasEvicted = false
    /// A sweep stopped at its step's limit with the state still over its target: it goes on at the next
    /// commit (`Store.continueEviction`).
    var sweepUnfinished = false
    /// Set for a projections-only replay (`Store.projectionsOnly`), which evicts wholesale
    /// (`evictWholesaleIfOverBudget`) instead of unit by unit: no `clock` is kept.
    var wholesale = false
    /// The next shard of the resident messages `walkMessages` looks at.
    var messageWalkShard = 0
    /// Ops in the last checkpoint interval (from one checkpoint's start to the next's).
    var lastIntervalOps = Int.max

    init(budgetBytes: Int) { self.budgetBytes = budgetBytes }

    /// The last seq of a closed epoch; `nil` for the open one.
    func end(ofEpoch e: UInt32) -> UInt64? { epochs.end(ofEpoch: e) }

    /// Whether the projection environment may hold `key`, for a store where only evicted units are stored
    /// (`onlyEvictedAreStored`): the Bloom filter of evicted units says so — or, in a wholesale replay,
    /// `key` is a message. A wholesale replay applies accepted events, whose footprints leave out the ids
    /// they make (`World.footprint(of:into:accepted:)`), so a message one names (a receipt's, a modify's)
    /// was stored by an earlier event: when it is not resident it was evicted, and it is looked up without
    /// asking the filter — which then need not hold the messages, most of what such a replay evicts (a
    /// cache miss in 16 MiB each: 1.8% of a 5M-event audit's applying thread).
    @inline(__always)
    func mayBeStored(_ key: ResidentKey) -> Bool {
        if wholesale, case .message = key { return true }
        return evicted?.mayContain(key.evictionUnit) ?? false
    }

    /// Remembers an evicted unit in `evicted`, made at the first eviction (16 MiB).
    mutating func noteEvicted(_ key: ResidentKey) {
        hasEvicted = true
        if evicted == nil { evicted = BloomFilter(bits: 1 << 27) }
        evicted!.insert(key)
    }

    /// Queues a unit that was just stamped at a seq of the open epoch, when its previous stamp was not in it
    /// (0: it became resident since).
    @inline(__always)
    mutating func named(_ key: ResidentKey, previous: UInt64) {
        if previous <= epochs.openStart { clock.append((key, epochs.open)) }
    }

    /// Closes the open epoch at `seq` (the seq a checkpoint starting now covers).
    mutating func closeEpoch(at seq: UInt64) {
        guard seq > epochs.openStart else { return }  // nothing named since the last close
        epochs.ends.append(seq)
        epochs.open += 1
        epochs.openStart = seq
    }

    /// Forgets the ends of epochs no queued entry has any more.
    mutating func trimEpochs() {
        let oldest = clock.first?.1 ?? epochs.open
        guard oldest > epochs.first else { return }
        epochs.ends.removeFirst(Int(oldest - epochs.first))
        epochs.first = oldest
    }

    func isLive(epoch e: UInt32, stamp: UInt64) -> Bool { epochs.isLive(epoch: e, stamp: stamp) }
}

/// The working set's epochs: the open one, and the last seq of each closed one from `first` on.
struct Epochs {
    /// The open epoch: units named now are tagged with it.
    var open: UInt32 = 0
    /// The last seq of each closed epoch from `first` on (the open one has none yet).
    var ends: [UInt64] = []
    var first: UInt32 = 0
    /// The last seq of the last closed epoch (0 before any): a stamp above it is in the open epoch.
    var openStart: UInt64 = 0

    /// The last seq of a closed epoch; `nil` for the open one.
    func end(ofEpoch e: UInt32) -> UInt64? {
        e < open ? ends[Int(e - first)] : nil
    }

    /// Whether a queue entry may be the current one of its unit, given the unit's stamp: stamped within
    /// the entry's epoch, or at the seq right after its end (an op rejected just before the close stamps
    /// `lastSeq + 1`, and naming it again at that seq in the next epoch does not queue it again).
    /// Otherwise a later naming in a later epoch queued the unit again, and the entry is stale.
    func isLive(epoch e: UInt32, stamp: UInt64) -> Bool {
        guard stamp > 0 else { return false }
        guard let end = end(ofEpoch: e) else { return true }
        return stamp <= end + 1
    }
}

/// What the working set did since the store opened.
public struct WorkingSetStats: Sendable, Equatable {
    /// Footprint units found resident.
    public var hits = 0
    /// Units looked up in the projection environment (found or not).
    public var lookups = 0
    /// Of those, units found and loaded.
    public var loads = 0
    /// Units evicted.
    public var evictions = 0
    /// Sweeps run (checkpoints at which the resident state was over budget).
    public var sweeps = 0
    /// The resident state's estimated size, in bytes (filled in by `Store.workingSetStats`).
    public var residentBytes = 0
    /// The budget, in bytes.
    public var budgetBytes = 0

    /// Hits over hits and lookups (1 when nothing was asked).
    public var hitRatio: Double {
        hits + lookups == 0 ? 1 : Double(hits) / Double(hits + lookups)
    }
}

/// A first-in first-out queue in chunks of `chunkSize` entries, read from the front chunk's `head`. The
/// working set's queue holds an entry per unit named in each epoch — millions in a long run — and as one
/// array it stalled the writer's thread whenever it grew (doubling: a copy of every entry) or compacted
/// its head (a move of half of them); here no operation touches more than a chunk, and filtering out
/// entries runs in steps (`startCompaction`, `compact(chunks:keep:)`), in order.
struct FIFO<Element> {
    static var chunkSize: Int { 4_096 }

    /// Every chunk holds at least one entry (the first: past `head`).
    private var chunks: [[Element]] = []
    private var head = 0
    /// Entries queued.
    private(set) var count = 0
    /// A compaction pass: the chunks in `compactNext..<compactEnd` are still to be filtered.
    private var compactNext = 0
    private var compactEnd = 0

    var first: Element? { chunks.isEmpty ? nil : chunks[0][head] }  // not `chunks.first`: a copy of the chunk

    mutating func append(_ item: Element) {
        // A pass covers the entries queued when it started: not one appended since to its last chunk.
        if chunks.isEmpty || chunks[chunks.count - 1].count >= Self.chunkSize || compactEnd == chunks.count {
            var chunk: [Element] = []
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        chunks[chunks.count - 1].append(item)
        count += 1
    }

    mutating func popFirst() -> Element? {
        guard !chunks.isEmpty else { return nil }
        let item = chunks[0][head]
        head += 1
        count -= 1
        if head == chunks[0].count { removeChunk(at: 0) }
        return item
    }

    private mutating func removeChunk(at index: Int) {
        chunks.remove(at: index)
        if index == 0 { head = 0 }
        if compactNext > index { compactNext -= 1 }
        if compactEnd > index { compactEnd -= 1 }
    }

    /// Whether a compaction pass is under way.
    var isCompacting: Bool { compactNext < compactEnd }

    /// Starts a pass over the entries queued now (unless one is under way); what is appended since is not
    /// in it.
    mutating func startCompaction() {
        guard !isCompacting else { return }
        compactNext = 0
        compactEnd = chunks.count
    }

    /// Filters the next `n` chunks of the pass: keeps the entries `keep` accepts, in order.
    mutating func compact(chunks n: Int, keep: (Element) -> Bool) {
        for _ in 0..<n where isCompacting {
            let i = compactNext
            let start = i == 0 ? head : 0
            let kept = chunks[i][start...].filter(keep)
            count -= chunks[i].count - start - kept.count
            if kept.isEmpty {
                removeChunk(at: i)
            } else {
                chunks[i] = kept
                if i == 0 { head = 0 }
                compactNext += 1
            }
        }
    }

    /// Every entry, front to back (for tests).
    var elements: [Element] { chunks.enumerated().flatMap { i, chunk in chunk[(i == 0 ? head : 0)...] } }

    /// The entries of each chunk (for tests).
    var chunkCounts: [Int] { chunks.map(\.count) }
}

extension Store {
    /// The working set's counters, with the resident state's estimated size now.
    public var workingSetStats: WorkingSetStats {
        var stats = workingSet.stats
        stats.residentBytes = world.residentBytesEstimate
        stats.budgetBytes = workingSet.budgetBytes
        return stats
    }

    /// Makes every unit that deciding and applying `op` touch resident (see `WorkingSet`).
    ///
    /// Works on the state in place (`inout`): a non-mutating call on the stored `world` copies the whole
    /// struct (every dictionary retained and released), which at several calls per op was a tenth of a
    /// batch ingest.
    func prefetch(_ op: Op) throws {
        // A wholesale replay that has evicted nothing yet has every unit it ever made resident (its
        // store started empty): nothing to look up, nor to stamp (it keeps no recency).
        if workingSet.wholesale && workingSet.onlyEvictedAreStored && !workingSet.hasEvicted { return }
        // The scratch buffers leave `workingSet` for the call, which changes its other fields meanwhile.
        var keys: [ResidentKey] = []
        var missing: [ResidentKey] = []
        swap(&keys, &workingSet.keys)
        swap(&missing, &workingSet.missing)
        defer {
            swap(&keys, &workingSet.keys)
            swap(&missing, &workingSet.missing)
        }
        try prefetch(op, in: &world, keys: &keys, missing: &missing)
    }

    private func prefetch(_ op: Op, in world: inout World, keys: inout [ResidentKey], missing: inout [ResidentKey])
        throws
    {
        let seq = world.lastSeq + 1
        if !workingSet.unstamped.isEmpty { stampUnstamped(in: &world) }
        keys.removeAll(keepingCapacity: true)
        // A wholesale replay's events are accepted ops: the ids they make are new, not looked for.
        let accepted = workingSet.wholesale
        world.footprint(of: op, into: &keys, accepted: accepted)
        guard !keys.isEmpty else { return }
        // Teams first: their rosters name the rest of a team op's footprint.
        missing.removeAll(keepingCapacity: true)
        for key in keys {
            if case .team = key, !name(key, seq: seq, in: &world) { missing.append(key) }
        }
        let teamsLooked = !missing.isEmpty
        if teamsLooked {
            try load(missing, totals: op.numbersViews, into: &world)
            if !workingSet.wholesale { for key in missing { workingSet.unstamped.append((key, seq)) } }
            keys.removeAll(keepingCapacity: true)
            world.footprint(of: op, into: &keys, accepted: accepted)
        }
        missing.removeAll(keepingCapacity: true)
        // A create of a team the store does not have (looked up above): its conversation and every view of
        // it are new too (a team is never deleted, and nothing else makes its conversation), so they are
        // known to be missing without a probe each — up to 2,000 per create, a cache miss apiece.
        var newConv: ConvKey?
        if case .teamCreate(let create) = op.body, !world.isResident(.team(create.team)) {
            newConv = ConvKey(team: create.team, kind: create.kind)
        }
        for key in keys {
            if case .team = key {
                // stamped (or looked up and queued) above; a team op names one team
                workingSet.stats.hits += 1
                continue
            }
            if let newConv, key.names(newConv) {
                missing.append(key)
            } else if name(key, seq: seq, in: &world) {
                workingSet.stats.hits += 1
            } else {
                missing.append(key)
            }
        }
        if op.numbersViews { try completeTotals(keys, in: &world) }
        if missing.isEmpty { return }
        if let newConv {
            // Only the tip's id is looked up — not a 2,000-member team's 2,000 user conversations (4–6 ms of
            // a stream's writer). They stay in `missing`: the views apply makes are stamped below.
            try load(missing.filter { !$0.names(newConv) }, totals: false, into: &world)
        } else {
            try load(missing, totals: op.numbersViews, into: &world)
        }
        guard !workingSet.wholesale else { return }  // no per-unit bookkeeping
        for key in missing {
            if case .receiptRead = key { continue }  // part of its tally's unit
            workingSet.unstamped.append((key, seq))
        }
        // A modify's footprint names its message's team once the message is resident: a second round.
        if case .messageModify = op.body, !accepted {
            keys.removeAll(keepingCapacity: true)
            world.footprint(of: op, into: &keys, accepted: accepted)
            missing.removeAll(keepingCapacity: true)
            for key in keys where !name(key, seq: seq, in: &world) { missing.append(key) }
            if missing.isEmpty { return }
            try load(missing, totals: false, into: &world)
            for key in missing { workingSet.unstamped.append((key, seq)) }
        }
    }

    /// Stamps `key` as named at `seq` when it is resident, queueing it for eviction sweeps when it became
    /// resident since it was last stamped; whether it is resident (a reader: whether it is known).
    @inline(__always)
    private func name(_ key: ResidentKey, seq: UInt64, in world: inout World) -> Bool {
        // A wholesale replay keeps no recency: whether the unit is resident is all it asks.
        if case .receiptRead = key { return world.isResident(key) }
        if workingSet.wholesale { return world.isResident(key) }
        guard let previous = world.stamp(key, seq: seq) else { return false }
        if queues(key, in: &world) { workingSet.named(key, previous: previous) }
        return true
    }

    /// Whether a resident unit joins the eviction sweeps' queue: all but the messages no receipt may name,
    /// which `walkCheckpointedMessages` drops instead (queued, each would leave a stale entry for the
    /// sweeps and compactions to probe: 3% of a writer's thread in compactions, measured).
    @inline(__always)
    private func queues(_ key: ResidentKey, in world: inout World) -> Bool {
        guard case .message(let id) = key else { return true }
        return world.residentMessageNeedsReceipt(id) ?? true
    }

    /// Stamps the units the last op loaded or created (`WorkingSet.unstamped`); forgets those it did not.
    private func stampUnstamped(in world: inout World) {
        for (key, seq) in workingSet.unstamped {
            guard let previous = world.stamp(key, seq: seq) else { continue }  // not found, not made
            if previous > seq {
                _ = world.stamp(key, seq: previous)  // never moves a stamp back
            } else if queues(key, in: &world) {
                workingSet.named(key, previous: previous)
            }
        }
        workingSet.unstamped.removeAll(keepingCapacity: true)
    }

    /// Looks `keys` up in one read snapshot of the projection environment and makes those found resident.
    /// A scratch store skips the units it never evicted (`WorkingSet.onlyEvictedAreStored`).
    /// `totals`: whether views are loaded with their running totals (`Op.numbersViews`).
    private func load(_ keys: [ResidentKey], totals: Bool, into world: inout World) throws {
        if workingSet.onlyEvictedAreStored && !keys.contains(where: { workingSet.mayBeStored($0) }) { return }
        var snapshot = workingSet.snapshot  // a local: the body changes `workingSet`
        defer { workingSet.snapshot = snapshot }
        try projectionEnv.read(reusing: &snapshot) { txn in
            for key in keys where !world.isResident(key) {
                if workingSet.onlyEvictedAreStored && !workingSet.mayBeStored(key) { continue }
                workingSet.stats.lookups += 1
                touchesSinceRelease += 1
                if try loadUnit(key, totals: totals, txn, into: &world) { workingSet.stats.loads += 1 }
            }
        }
        // A cold working set loads units all over the projection file (a new process's first batch read
        // ~500 MB of a 3M-op store's pages before its first commit): released as it goes.
        if touchesSinceRelease >= Self.writerReleaseInterval { releaseResidentPagesIfOverBudget() }
    }

    /// Loads one unit (or one reader of a resident tally); `false` when the store has none.
    private func loadUnit(_ key: ResidentKey, totals: Bool, _ txn: Transaction, into world: inout World) throws
        -> Bool
    {
        switch key {
        case .team(let id):
            guard let team = try loadTeam(id, txn) else { return false }
            touchesSinceRelease += team.memberCount / 32  // its roster's pages (~32 members a page)
            world.adoptTeam(team)
        case .conv(let conv):
            let bytes = conv.bytes
            guard let last = try value(.convs, bytes, txn, { try ProjectionCodec.decodeConvLast($0) }) else {
                return false
            }
            var state = ConvState()
            state.last = last
            state.countedTotal = UInt64(try ordinal(txn, .counted, bytes + [0], atOrBefore: .max))
            world.adoptConv(conv, state)
        case .userConv(let user, let conv):
            guard
                var uc = try value(
                    .userConvs, ProjectionCodec.userConvKey(user, conv), txn, { try ProjectionCodec.decodeUserConv($0) }
                )
            else { return false }
            if totals {
                (uc.ownTotal, uc.directedTotal) = try viewTotals(user, conv, txn)
            } else {
                (uc.ownTotal, uc.directedTotal) = (UserConv.unknownTotal, UserConv.unknownTotal)
                workingSet.viewsLoadedWithoutTotals += 1
            }
            world.adoptUserConv(user, conv, uc)
        case .message(let id):
            guard let message = try value(.messages, Array(id.utf8), txn, { try ProjectionCodec.decodeMessage($0) })
            else { return false }
            world.adoptMessage(id, message)
        case .receipt(let id):
            guard let tally = try value(.receipts, Array(id.utf8), txn, { try ProjectionCodec.decodeReceipt($0) })
            else { return false }
            world.adoptReceipt(id, tally)
        case .receiptRead(let id, let user):
            guard world.isResident(.receipt(id)),
                let ordinal = try value(
                    .receiptReads, ProjectionCodec.pairKey(id, user), txn, { try ProjectionCodec.decodeOrdinal($0) })
            else { return false }
            guard world.adoptReader(id, user, ordinal: ordinal) else {
                throw StoreError(
                    code: .corrupted, message: "receipt \(id)/\(user): stored ordinal \(ordinal) is out of range",
                    path: projectionEnv.path)
            }
        }
        return true
    }

    /// A view's running totals: the ordinals of its last `own` and `directed` index entries (one seek each).
    private func viewTotals(_ user: Id, _ conv: ConvKey, _ txn: Transaction) throws -> (UInt64, UInt64) {
        let prefix = conv.bytes + [0] + Array(user.utf8) + [0]
        return (
            UInt64(try ordinal(txn, .own, prefix, atOrBefore: .max)),
            UInt64(try ordinal(txn, .directed, prefix, atOrBefore: .max))
        )
    }

    /// Gives the resident views `keys` names that were loaded without their running totals those totals,
    /// before an op that numbers entries from them (`Op.numbersViews`). Every entry of such a view is in
    /// the stored index: it was loaded after its last change was checkpointed (a unit is evicted only
    /// then), and nothing numbers entries from a view without totals.
    private func completeTotals(_ keys: [ResidentKey], in world: inout World) throws {
        guard workingSet.viewsLoadedWithoutTotals > 0 else { return }
        // One probe per view (empty, the array allocates nothing).
        var lacking: [(Id, ConvKey)] = []
        for case .userConv(let user, let conv) in keys where world.lacksTotals(user, conv) {
            lacking.append((user, conv))
        }
        guard !lacking.isEmpty else { return }
        var snapshot = workingSet.snapshot
        defer { workingSet.snapshot = snapshot }
        try projectionEnv.read(reusing: &snapshot) { txn in
            for (user, conv) in lacking {
                let (own, directed) = try viewTotals(user, conv, txn)
                world.completeTotals(user, conv, own: own, directed: directed)
                workingSet.stats.lookups += 1
                touchesSinceRelease += 1
            }
        }
    }

    /// One record of `table`, decoded; `nil` when absent.
    private func value<T>(
        _ table: ProjectionTable, _ key: [UInt8], _ txn: Transaction,
        _ decode: (UnsafeRawBufferPointer) throws -> T
    ) throws -> T? {
        try key.withUnsafeBytes { k in
            try txn.withValue(pdbs.table(table), key: k) { value in try value.map(decode) }
        }
    }

    /// A team with its roster, pending requests and ended memberships, as stored; `nil` when absent.
    private func loadTeam(_ id: Id, _ txn: Transaction) throws -> TeamState? {
        guard var team = try value(.teams, Array(id.utf8), txn, { try ProjectionCodec.decodeTeam(id: id, $0).0 })
        else { return nil }
        let prefix = ProjectionCodec.prefix(id)
        func user(_ key: UnsafeRawBufferPointer) -> Id {
            Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
        }
        func each(_ table: ProjectionTable, _ body: (Id, UnsafeRawBufferPointer) throws -> Void) throws {
            try txn.forEach(pdbs.table(table), from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                try body(user(key), value)
                return true
            }
        }
        try each(.members) { user, value in team.restoreMember(try ProjectionCodec.decodeMember(user: user, value)) }
        try each(.pastMembers) { user, value in
            team.restorePast(user, try ProjectionCodec.decodePastMemberships(value))
        }
        try each(.invites) { user, value in team.invites[user] = try ProjectionCodec.decodeInviters(value) }
        try each(.applications) { user, value in team.applications[user] = try ProjectionCodec.decodeApplication(value)
        }
        return team
    }

    /// After a checkpoint is committed, as the next one starts: when the resident state is over budget,
    /// starts a sweep that evicts the least recently named clean units (by epoch: see `WorkingSet`) down to
    /// three quarters of the budget — a step of it now, the rest at the following commits
    /// (`continueEviction`); then closes the epoch at the seq the starting checkpoint covers. `ops`: the
    /// batch being committed, which sizes the step as at any commit.
    func evictIfOverBudget(ops: Int) {
        guard !workingSet.wholesale else { return }  // `evictWholesaleIfOverBudget` instead
        evictIfOverBudget(&world, steps: Self.evictionStep(ops: ops))
        workingSet.trimEpochs()
        workingSet.closeEpoch(at: world.lastSeq)
    }

    /// At a commit: the next step of a sweep that is not finished, if any. A sweep of a quarter of the
    /// budget visits ~10⁵ units (measured: 300–400 ms of the writer's thread at once, the stream's worst
    /// latencies); in steps, a batch of `n` ops pays for at most `1,024 + 8n` of them.
    func continueEviction(ops: Int) {
        guard !workingSet.wholesale, workingSet.sweepUnfinished || workingSet.clock.isCompacting else { return }
        evictIfOverBudget(&world, steps: Self.evictionStep(ops: ops))
        workingSet.trimEpochs()
    }

    /// Queue entries beyond twice the resident units at which a compaction pass starts (small in debug
    /// builds, so the tests' stores run through passes).
    #if DEBUG
        static let staleSlack = 64
    #else
        static let staleSlack = 65_536
    #endif

    /// Units a sweep step may visit for a batch of `ops` ops: more than a batch can make resident (a few
    /// units per op), so a sweep finishes while the working set grows.
    static func evictionStep(ops: Int) -> Int { 1_024 + 8 * ops }

    /// Works on the state in place, as `prefetch` does (a non-mutating call on the stored `world` copies it).
    /// Visits at most `steps` entries of the queue; sets `sweepUnfinished` when it stopped for that alone.
    private func evictIfOverBudget(_ world: inout World, steps: Int) {
        stampUnstamped(in: &world)
        // Units named in many epochs, or named and never made, leave stale entries behind; drop them when
        // they outnumber the resident units (a store under its budget never sweeps).
        let residentUnits =
            world.teams.count + world.convs.count + world.userConvCount + world.messages.count + world.receipts.count
        // In steps of the sweep's size too (a pass visits every entry: ~10⁶ stamp probes at once).
        if workingSet.clock.count > 2 * residentUnits + Self.staleSlack { workingSet.clock.startCompaction() }
        if workingSet.clock.isCompacting {
            let epochs = workingSet.epochs
            workingSet.clock.compact(chunks: max(1, steps / FIFO<(ResidentKey, UInt32)>.chunkSize)) { key, e in
                epochs.isLive(epoch: e, stamp: inPlace(&world, { $0.stamp(of: key) }) ?? 0)
            }
            workingSet.trimEpochs()
        }
        let budget = workingSet.budgetBytes
        var estimate = world.residentBytesEstimate
        if !workingSet.sweepUnfinished {
            guard estimate > budget else { return }
            workingSet.stats.sweeps += 1
        }
        workingSet.sweepUnfinished = false
        let clean = checkpoint.seq
        let target = budget / 4 * 3
        // Over the budget a step visits its full size; between the budget and the target, a quarter of it.
        // The first sweep of a growing store has ~10⁵ units to evict down to the target: at full steps it
        // took 3–4 ms of every 5–6 ms commit cycle for ~0.3 s, the stream's worst latencies at ~1M ops
        // (BENCHMARKS, tenth session). Below the budget nothing is urgent; if the working set grows back
        // over it faster than the quarter steps evict, full steps resume.
        let limit = estimate > budget ? steps : max(256, steps / 4)
        // The messages no receipt may name are not queued (`queues`): their shards first, with at most half
        // the step (a shard is walked whole). (The estimate less what they took, not `residentBytesEstimate`
        // again: that walks every team.) The queue's sweep below keeps at least a quarter of the step: when
        // the walk could take all of it, the resident messages that asked for receipts (which the walk must
        // look at and leave, as their tallies are the queue's to evict) used the whole step once they
        // outnumbered it, the queue was never swept again, and a long-running writer's working set grew
        // without bound (its estimate 2.6× the budget after 9.2M ops in one process, twenty-fourth session).
        let messageBytes = world.residentMessageBytesEstimate
        let walked = walkMessages(&world, shards: ShardedDictionary<Id, StoredMessage>.shardCount, visits: limit / 2)
        estimate -= messageBytes - world.residentMessageBytesEstimate
        if walked >= limit / 2 && estimate > target { workingSet.sweepUnfinished = true }
        let queueLimit = max(limit / 4, limit - walked)
        var visited = 0
        while estimate > target, let (key, e) = workingSet.clock.first {
            guard let end = workingSet.end(ofEpoch: e), end <= clean else { break }  // not all clean
            if visited >= queueLimit {
                workingSet.sweepUnfinished = true  // the rest at the next commits
                break
            }
            visited += 1
            _ = workingSet.clock.popFirst()
            // Gone (evicted wholesale, a state replaced since), or named in a later epoch: stale.
            guard let named = world.stamp(of: key), workingSet.isLive(epoch: e, stamp: named) else { continue }
            if named > clean {
                // Named right after the epoch's end (see `isLive`), not yet checkpointed: queued again.
                workingSet.clock.append((key, workingSet.epoch))
                continue
            }
            estimate -= world.evict(key)
            if workingSet.onlyEvictedAreStored { workingSet.noteEvicted(key) }
            workingSet.stats.evictions += 1
        }
        workingSet.trimEpochs()
    }

    /// The writer's messages once a committed checkpoint holds them, a few shards at each commit: once
    /// the resident messages take an eighth of the budget, a message no receipt may name (`needReceipt`:
    /// its tally stays with it) whose last naming is in the committed checkpoint is dropped by a walk of
    /// its shard, not left to the sweeps. Nothing but a modify (or a duplicate id, looked up anyway) names
    /// an old message again, and the sweeps evict a unit with a hash probe for its stamp and another to
    /// remove it, both cache misses on a unit cold by definition: with one message per op, a sweep of a
    /// stream's working set took 30–50% of the writer's thread for ~3 s each time the state reached its
    /// budget (BENCHMARKS, sixteenth session). Such messages are not queued for the sweeps (`queues`), so
    /// they leave no stale entries there; a sweep walks their shards too (`evictIfOverBudget`).
    ///
    /// `ops`: the batch's, which sets how many of the 256 shards a step walks — all of them once per
    /// checkpoint interval (`lastIntervalOps`, at most `checkpointOps`, at least 256), at least one a
    /// commit. Not while a sweep is under way (its steps walk them), nor for `close`.
    func walkCheckpointedMessages(ops: Int) {
        guard !workingSet.wholesale, !closing, !workingSet.sweepUnfinished,
            world.residentMessageBytesEstimate > workingSet.budgetBytes / 8
        else { return }
        // At least 256 ops: checkpoints close together (explicit ones, a writer answering queries) would
        // otherwise make every commit walk every shard.
        let interval = max(256, min(options.checkpointOps, workingSet.lastIntervalOps))
        let count = ShardedDictionary<Id, StoredMessage>.shardCount
        walkMessages(&world, shards: min(count, max(1, (count * ops + interval - 1) / interval)), visits: .max)
    }

    /// Walks the resident messages' shards from `messageWalkShard` on, dropping each message no receipt
    /// may name whose last naming is in the committed checkpoint, until `shards` shards are walked or
    /// `visits` messages looked at (a shard is walked whole); the messages it looked at. Works on the
    /// state in place, as `evictIfOverBudget` does (its caller's `inout` access to `world` is open).
    @discardableResult
    private func walkMessages(_ world: inout World, shards: Int, visits: Int) -> Int {
        stampUnstamped(in: &world)  // a message the last op made is stamped (0 until then)
        let count = ShardedDictionary<Id, StoredMessage>.shardCount
        let upTo = checkpoint.seq
        var shard = workingSet.messageWalkShard
        var walked = 0
        var visited = 0
        while walked < min(shards, count) && visited < visits {
            visited += world.messages.count(inShard: shard)
            workingSet.stats.evictions += world.evictMessages(
                inShards: shard..<(shard + 1),
                where: { _, message in message.stamp.seq > 0 && message.stamp.seq <= upTo && !message.needReceipt },
                evicted: { id in if workingSet.onlyEvictedAreStored { workingSet.noteEvicted(.message(id)) } })
            walked += 1
            shard = shard + 1 == count ? 0 : shard + 1
        }
        workingSet.messageWalkShard = shard
        return visited
    }

    /// A projections-only replay's eviction (`WorkingSet.wholesale`): when the resident state is over
    /// budget, checkpoints everything applied (waiting for it, so every unit is clean) and evicts every
    /// unit — but the teams while their rosters take at most half the budget, as every team op reloads
    /// its whole roster — remembering them in `WorkingSet.evicted`.
    ///
    /// A writer evicts unit by unit, the least recently named first (`evictIfOverBudget`), which costs a
    /// FIFO of every resident unit and sweeps over it (and, when this was written, a `[ResidentKey:
    /// UInt64]` update for every unit every op names: a quarter of an audit's replay thread and ~100
    /// bytes per resident unit, perf, 1M events). A
    /// replay waits for nobody, so the occasional reload of a hot unit after a wholesale eviction (one
    /// B-tree lookup each; a few per 256 MiB of new state) costs far less than tracking recency.
    func evictWholesaleIfOverBudget() throws {
        precondition(workingSet.wholesale)
        let budget = workingSet.budgetBytes
        guard world.residentBytesEstimate > budget else { return }
        finishCheckpoint()
        startCheckpoint(after: nil)
        finishCheckpoint()
        if let lastCheckpointError { throw lastCheckpointError }
        workingSet.stats.sweeps += 1
        var teamBytes = 0
        for id in world.teams.keys { teamBytes += world.residentBytesEstimate(of: .team(id)) }
        var units = 0
        if teamBytes > budget / 2 {
            // Team by team: a roster's members leave the derived indexes with it.
            for id in Array(world.teams.keys) {
                world.evict(.team(id))
                workingSet.noteEvicted(.team(id))
                units += 1
            }
        }
        world.evictAllConversations { key in
            workingSet.noteEvicted(key)
            units += 1
        }
        workingSet.stats.evictions += world.messages.count + units  // messages: see `mayBeStored`
        if !world.messages.isEmpty { workingSet.hasEvicted = true }
        world.evictAllMessages()
        Allocator.releaseFreedPages()
    }

    /// A wholesale replay's messages once a committed checkpoint holds them: dropped at the start of the
    /// next checkpoint rather than kept until the state is over budget — unless a receipt may still name
    /// them (`needReceipt`: their tallies stay with them) or a modify changed them since (`dirty`). Nothing
    /// else reads an old message, and at 320 bytes each they were 40% of the budget at every wholesale
    /// eviction of a 5M-event audit (~250,000 resident), which left the user conversations a tenth of it:
    /// they were evicted and reloaded from the scratch store once every three events.
    /// (The writer's `walkCheckpointedMessages` asks the message's stamp instead: a replay keeps none, and
    /// a writer's `dirty` set is emptied at every commit, before the checkpoint holding it is committed.)
    func evictCheckpointedMessages() {
        precondition(workingSet.wholesale && inFlightCheckpoint == nil)
        let upTo = checkpoint.seq  // committed: a failed checkpoint left it where it was
        let dirty = world.changes.dirty
        let evicted = world.evictMessages(
            where: { id, message in
                message.seq <= upTo && !message.needReceipt && (dirty.isEmpty || !dirty.contains(.message(id)))
            },
            evicted: { _ in })  // not noted: see `WorkingSet.mayBeStored`
        workingSet.stats.evictions += evicted
        if evicted > 0 { workingSet.hasEvicted = true }
    }

    /// Debug check after an op: every record it changed (`changes`, set apart from the batch's) belongs
    /// to a unit its footprint named.
    func footprintViolations(of changes: ChangeSet, seq: UInt64) -> [String] {
        if !workingSet.wholesale { stampUnstamped(in: &world) }
        var problems: [String] = []
        for key in Array(changes.dirty) + changes.appended {
            guard let unit = key.residentUnit else { continue }
            if let named = world.stamp(of: unit), named >= seq { continue }
            problems.append("\(key) changed at \(seq) outside the op's footprint")
        }
        return problems
    }
}

extension ProjectionKey {
    /// The working-set unit a record belongs to (`nil`: an always-resident table).
    var residentUnit: ResidentKey? {
        switch self {
        case .team(let id), .member(let id, _), .pastMembers(let id, _), .invite(let id, _), .application(let id, _):
            .team(id)
        case .message(let id): .message(id)
        case .conv(let key), .counted(let key, _, _): .conv(key)
        case .own(let key, let user, _, _), .directed(let key, let user, _, _), .userConv(let user, let key):
            .userConv(user, key)
        case .receipt(let id), .receiptRead(let id, _, _): .receipt(id)
        case .presence, .channel, .offline: nil
        }
    }
}

extension Store {
    /// Every stored projection record, loaded into a fresh state as of the checkpoint (this writer's own
    /// ops are checkpointed first): the whole projected state, whatever is resident. O(state) — for tests,
    /// tools and debugging, never on a line's path.
    public func loadAllProjections() throws -> World {
        var all = World(config: world.config)
        try readProjections { txn in
            let checkpoint = try pdbs.readCheckpoint(txn)
            try pdbs.loadProjections(txn, into: &all)
            all.restorePosition(seq: checkpoint.seq, ts: checkpoint.ts)
        }
        all.finishRestore()
        return all
    }
}

extension ResidentKey {
    /// The unit whose eviction may have left this key's records stored and not resident: a reader is
    /// part of its tally.
    var evictionUnit: ResidentKey {
        if case .receiptRead(let id, _) = self { return .receipt(id) }
        return self
    }

    /// Whether this is `conv`'s shared record or one user's view of it.
    func names(_ conv: ConvKey) -> Bool {
        switch self {
        case .conv(let key), .userConv(_, let key): key == conv
        default: false
        }
    }
}

/// A Bloom filter of resident keys: `mayContain` is true for every key inserted, and for a small share of
/// the others (`BloomFilterTests`: 0.03% measured at one key per 32 bits, 2.5% at one per 8).
/// 16 MiB at 2^27 bits. *Blocked*: a key's four bits lie in one 64-byte block (one cache line) chosen by
/// its `hashValue`, so an insert or a lookup misses the cache once, not four times — the four probes
/// spread over 16 MiB were 5.4% of an audit's applying thread (perf, 1M events). The hash is seeded per
/// process: which keys are false positives varies between runs, what they cost (a lookup that finds
/// nothing) changes no result.
struct BloomFilter {
    private var words: [UInt64]
    /// Blocks less one (a block: 8 words, 512 bits).
    private let blockMask: Int

    /// `bits`: a power of two, at least one block.
    init(bits: Int) {
        precondition(bits >= 512 && bits & (bits - 1) == 0)
        words = Array(repeating: 0, count: bits / 64)
        blockMask = bits / 512 - 1
    }

    /// The first word of the key's block and its four bit positions in the block (9 bits each, from
    /// the hash's bits above those that picked the block: up to 2^18 blocks use 18 + 36 of its 64 bits).
    @inline(__always)
    private func probes(_ key: ResidentKey) -> (base: Int, bits: UInt64) {
        let h = UInt64(bitPattern: Int64(key.hashValue))
        let base = Int(truncatingIfNeeded: h) & blockMask &* 8
        return (base, h >> 28)
    }

    mutating func insert(_ key: ResidentKey) {
        let (base, bits) = probes(key)
        words.withUnsafeMutableBufferPointer { w in
            for i in 0..<4 {
                let bit = Int(truncatingIfNeeded: bits >> UInt64(9 * i)) & 511
                w[base + bit >> 6] |= 1 << UInt64(bit & 63)
            }
        }
    }

    func mayContain(_ key: ResidentKey) -> Bool {
        let (base, bits) = probes(key)
        return words.withUnsafeBufferPointer { w in
            for i in 0..<4 {
                let bit = Int(truncatingIfNeeded: bits >> UInt64(9 * i)) & 511
                if w[base + bit >> 6] & (1 << UInt64(bit & 63)) == 0 { return false }
            }
            return true
        }
    }
}

/// Runs `read` on `world` in place. A non-mutating call on a `World` that is a class's stored property, or
/// that a closure captured, copies the whole state first — every table retained, then released (seen in
/// the writer's profile as `outlined init with copy of World`: ~1.5% of its thread in `decide` and the
/// working set's loads); through `inout` the call borrows it where it lies.
@inline(__always)
func inPlace<R>(_ world: inout World, _ read: (borrowing World) throws -> R) rethrows -> R {
    try read(world)
}
