/// The state decide reads and apply changes: the projected tables (`projected`, what replaying the log
/// from seq 1 rebuilds), the indexes derived from them, the records changed since the store last took
/// them, and settings.
///
/// Pure value: nothing here does I/O. Every change marks the projection records it touched in `changes`,
/// so the store can write exactly those at its next checkpoint.
///
/// The projected tables are readable everywhere and written only in this module: by `apply`, and by the
/// store through the entry points made for it (`restore…` from its tables, `adopt…` and `evict` for the
/// working set), so no other module can change a table behind the change set or the derived indexes.
public struct World: Sendable {
    /// Limits and timings.
    public var config: Config
    /// The projected tables, as one value (see `Projections`); each is forwarded below, read and changed
    /// in place.
    public internal(set) var projected = Projections()
    /// Sizes the working set's estimate counts (`residentBytesEstimate`), kept as the tables change.
    public internal(set) var residentCounts = ResidentCounts()
    /// Indexes derived from the tables above (user → teams, user → channels, the members-sync queue).
    public internal(set) var derived = DerivedIndexes()
    /// The records changed since the store last took them.
    public internal(set) var changes = ChangeSet()
    /// Build `delivery` outputs with user lists (off for replays and `--emit events|none`: the fan-out,
    /// counting and projections are the same either way).
    public var wantsDeliveries: Bool = true
    /// The unread index entries applied, kept only by replays that compare or rebuild the index tables
    /// (`audit`, `repair`); `nil` for the writer, whose entries live on disk (see `IndexJournal`).
    public var indexJournal: IndexJournal?
    /// What `apply` works in (see `Workspace`): not state.
    var workspace = Workspace()

    public init(config: Config = Config()) {
        self.config = config
    }

    /// Marks a record as changed.
    @inline(__always)
    mutating func touch(_ key: ProjectionKey) { changes.touch(key) }

    /// Adds an entry to an unread index (`counted`, `own`, `directed`): written to disk by the store,
    /// and kept in the journal when there is one.
    @inline(__always)
    mutating func indexed(_ key: ProjectionKey) {
        changes.touch(key)
        indexJournal?.record(key)
    }

    /// Marks a record of a join, or a record with a new key (a message, a tip, a receipt tally), as
    /// changed without hashing it (see `ChangeSet.appended`).
    @inline(__always)
    mutating func touchAppended(_ key: ProjectionKey) { changes.touchAppended(key) }

    /// Forgets which records changed (after the store wrote them, or after a replay or restore).
    public mutating func clearChanges() { changes.removeAll() }

    /// Whether `apply` records changed records (off for replays that write nothing).
    public var tracksChanges: Bool {
        get { changes.isTracking }
        set { changes.isTracking = newValue }
    }

    /// Takes the changes recorded so far out of the state (which goes on recording from none), for a
    /// caller that looks at one op's changes alone and puts the earlier ones back with `restoreChanges`.
    public mutating func setAsideChanges() -> ChangeSet {
        var earlier = ChangeSet()
        earlier.isTracking = changes.isTracking
        swap(&earlier, &changes)
        return earlier
    }

    /// Puts back changes set aside before the ones recorded since, appending the later ones to `earlier`
    /// in place (it is left empty): a copy of the set-aside changes for every op — a debug build's check
    /// of each op's footprint — made a 60,000-op request quadratic (35 s in a debug build).
    public mutating func restoreChanges(_ earlier: inout ChangeSet) {
        earlier.append(changes)
        swap(&changes, &earlier)
        earlier = ChangeSet()
    }

    /// Read-only views of the derived indexes.
    public var userTeams: [Id: SmallIdSet] { derived.userTeams }
    public var userChannels: [Id: Set<Id>] { derived.userChannels }
    public var syncDeadline: Int64? { derived.syncDeadline }
}

/// The projected tables, forwarded to `projected` so decide and apply read and write them in place (a
/// `_modify` yields the table itself: no copy of a dictionary for a change of one entry).
extension World {
    /// Teams by id, dismissed ones included.
    public internal(set) var teams: [Id: TeamState] {
        @inlinable get { projected.teams }
        _modify { yield &projected.teams }
        set { projected.teams = newValue }
    }
    /// Seq of the last applied event (0 for an empty log).
    public internal(set) var lastSeq: UInt64 {
        @inlinable get { projected.lastSeq }
        _modify { yield &projected.lastSeq }
        set { projected.lastSeq = newValue }
    }
    /// Time of the last applied event in ms.
    public internal(set) var lastTs: Int64 {
        @inlinable get { projected.lastTs }
        _modify { yield &projected.lastTs }
        set { projected.lastTs = newValue }
    }
    /// Conversations by key.
    public internal(set) var convs: [ConvKey: ConvState] {
        @inlinable get { projected.convs }
        _modify { yield &projected.convs }
        set { projected.convs = newValue }
    }
    /// Each user's conversations.
    public internal(set) var userConvs: ShardedDictionary<Id, UserConvs> {
        @inlinable get { projected.userConvs }
        _modify { yield &projected.userConvs }
        set { projected.userConvs = newValue }
    }
    /// Messages and tips by id.
    public internal(set) var messages: ShardedDictionary<Id, StoredMessage> {
        @inlinable get { projected.messages }
        _modify { yield &projected.messages }
        set { projected.messages = newValue }
    }
    /// Receipt tallies by message id.
    public internal(set) var receipts: ShardedDictionary<Id, ReceiptState> {
        @inlinable get { projected.receipts }
        _modify { yield &projected.receipts }
        set { projected.receipts = newValue }
    }
    /// Online devices per user (sorted) and when they went offline.
    public internal(set) var presence: [Id: Presence] {
        @inlinable get { projected.presence }
        _modify { yield &projected.presence }
        set { projected.presence = newValue }
    }
    /// Signaling channels by id.
    public internal(set) var channels: [Id: ChannelState] {
        @inlinable get { projected.channels }
        _modify { yield &projected.channels }
        set { projected.channels = newValue }
    }
    /// Stored offline notifications per user, in order.
    public internal(set) var offlineQueues: [Id: [StoredSignal]] {
        @inlinable get { projected.offlineQueues }
        _modify { yield &projected.offlineQueues }
        set { projected.offlineQueues = newValue }
    }

    /// How many user conversations `userConvs` holds (kept for the working set's size estimate).
    public internal(set) var userConvCount: Int {
        get { residentCounts.userConvs }
        set { residentCounts.userConvs = newValue }
    }
    /// How many receipt readers the tallies in `receipts` know (likewise).
    public internal(set) var residentReaders: Int {
        get { residentCounts.readers }
        set { residentCounts.readers = newValue }
    }
}

/// Sizes of resident tables that a walk would otherwise count (`World.residentBytesEstimate` reads them
/// after every op): derived from the tables like the indexes in `DerivedIndexes`, and checked against them
/// by `World.derivedIndexViolations()`.
public struct ResidentCounts: Sendable, Equatable {
    /// User conversations over every user's `UserConvs`.
    public internal(set) var userConvs = 0
    /// Readers over every receipt tally.
    public internal(set) var readers = 0

    public init() {}
}

/// What `apply` works in: the fan-out core's bitsets, kept only so the next call does not allocate them
/// again, the actor of the event being applied, and the caller's work counters for the call. Never state — not projected, compared or stored —
/// and internal to the domain (as GRDB's statement caches are internal types of its `Database`).
struct Workspace: Sendable {
    /// Scratch buffers of the fan-out core.
    var fanOut = FanOut()
    /// The actor of the event being applied (for tips).
    var actor: Id = ""
    /// The counters passed to `apply(_:into:counting:)`, for the call's duration.
    var stats = FanOutStats()
}

/// How much fan-out work applying events did: messages and tips fanned out, per-member decisions
/// (receive + alert, one per member of the conversation), and deliveries (receivers). Kept by the caller
/// and passed to `World.apply(_:into:counting:)`; benchmarks report them.
public struct FanOutStats: Sendable, Equatable {
    public internal(set) var messages = 0
    public internal(set) var memberDecisions = 0
    public internal(set) var deliveries = 0
    public init() {}
}

extension World {
    /// Rebuilds what is derived rather than stored, after loading projections: the user → teams index
    /// and the online bits of every roster.
    public mutating func finishRestore() {
        derived = DerivedIndexes()
        for (id, team) in teams where !team.dismissed {
            for member in team.slots.compactMap({ $0 }) {
                derived.userTeams[member.user, default: []].insert(id)
                if isOnline(member.user) { teams[id]!.setOnline(member.user, true) }
            }
        }
        for (id, channel) in channels where !channel.closed {
            for (user, joined) in channel.members {
                derived.userChannels[user, default: []].insert(id)
                scheduleSync(user, channel: id, joinedTs: joined)
            }
        }
        recomputeSyncDeadline()
        userConvCount = userConvs.values.reduce(0) { $0 + $1.count }
        residentReaders = receipts.values.reduce(0) { $0 + $1.readers.count }
        clearChanges()
    }
}

extension World {
    /// Whether `user` has an online device.
    public func isOnline(_ user: Id) -> Bool { !(presence[user]?.devices.isEmpty ?? true) }

    /// A user's online devices.
    public func devices(of user: Id) -> [Id] { presence[user]?.devices ?? [] }
}
