/// The whole projected state: what replaying the log from seq 1 rebuilds.
///
/// Pure value: `decide` reads it, `apply` changes it, nothing here does I/O. Every change marks the
/// projection records it touched in `dirty`, so the store can write exactly those in the same transaction.
///
/// The projected tables are readable everywhere and written only in this module: by `apply`, and by the
/// store through the entry points made for it (`restore…` from its tables, `adopt…` and `evict` for the
/// working set), so no other module can change a table behind the change set or the derived indexes.
public struct World: Sendable {
    /// Limits and timings.
    public var config: Config
    /// Teams by id, dismissed ones included.
    public internal(set) var teams: [Id: TeamState] = [:]
    /// Seq of the last applied event (0 for an empty log).
    public internal(set) var lastSeq: UInt64 = 0
    /// Time of the last applied event in ms.
    public internal(set) var lastTs: Int64 = 0
    /// Conversations by key.
    public internal(set) var convs: [ConvKey: ConvState] = [:]
    /// Each user's conversations.
    public internal(set) var userConvs: [Id: UserConvs] = [:]
    /// Messages and tips by id (sharded: the table grows with the traffic, see `ShardedDictionary`).
    public internal(set) var messages = ShardedDictionary<Id, StoredMessage>()
    /// Receipt tallies by message id (sharded, likewise).
    public internal(set) var receipts = ShardedDictionary<Id, ReceiptState>()
    /// How many user conversations `userConvs` holds (kept for the working set's size estimate).
    public internal(set) var userConvCount = 0
    /// How many receipt readers the tallies in `receipts` know (likewise).
    public internal(set) var residentReaders = 0
    /// Online devices per user (sorted) and when they went offline.
    public internal(set) var presence: [Id: Presence] = [:]
    /// Signaling channels by id.
    public internal(set) var channels: [Id: ChannelState] = [:]
    /// Stored offline notifications per user, in order.
    public internal(set) var offlineQueues: [Id: [StoredSignal]] = [:]
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
    /// Work counters for benchmarks (not state: never stored or compared).
    public var stats = FanOutStats()
    /// Scratch buffers of the fan-out core.
    var fanOut = FanOut()
    /// The actor of the event being applied (for tips).
    var currentActor: Id = ""

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

    /// Puts back changes set aside before the ones recorded since.
    public mutating func restoreChanges(_ earlier: ChangeSet) {
        var all = earlier
        all.append(changes)
        changes = all
    }

    /// Read-only views of the derived indexes.
    public var userTeams: [Id: SmallIdSet] { derived.userTeams }
    public var userChannels: [Id: Set<Id>] { derived.userChannels }
    public var syncDeadline: Int64? { derived.syncDeadline }
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

/// How much fan-out work applying events did: messages and tips fanned out, per-member decisions
/// (receive + alert, one per member of the conversation), and deliveries (receivers).
public struct FanOutStats: Sendable, Equatable {
    public internal(set) var messages = 0
    public var memberDecisions = 0
    public var deliveries = 0
    public init() {}
}
