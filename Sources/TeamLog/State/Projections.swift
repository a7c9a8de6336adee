/// What the log projects: every table a replay from seq 1 rebuilds and the store writes at checkpoints,
/// and nothing else — no derived index, no change tracking, no bookkeeping of the working set (a unit's
/// `ResidencyStamp` compares equal to every other), no scratch buffer. Two states that applied the same
/// events are `==`; the property tests compare a replay with the state it replays this way.
///
/// A value: `World` holds one (`World.projected`) and forwards each table, so decide and apply read and
/// write the tables in place. The tables are written only in this module (`apply`, and the store's
/// `restore…`, `adopt…` and `evict…` entry points on `World`), never behind the change set.
public struct Projections: Sendable, Equatable {
    /// Teams by id, dismissed ones included.
    public internal(set) var teams: [Id: TeamState] = [:]
    /// Seq of the last applied event (0 for an empty log).
    public internal(set) var lastSeq: UInt64 = 0
    /// Time of the last applied event in ms.
    public internal(set) var lastTs: Int64 = 0
    /// Conversations by key.
    public internal(set) var convs: [ConvKey: ConvState] = [:]
    /// Each user's conversations (sharded: one entry per user with a resident view, so a `Dictionary`
    /// here grew by doubling all at once — a 2,000-member team's views loaded into a table of 200,000
    /// users stopped the stream's writer for ~13 ms, BENCHMARKS seventeenth session).
    public internal(set) var userConvs = ShardedDictionary<Id, UserConvs>()
    /// Messages and tips by id (sharded: the table grows with the traffic, see `ShardedDictionary`).
    public internal(set) var messages = ShardedDictionary<Id, StoredMessage>()
    /// Receipt tallies by message id (sharded, likewise).
    public internal(set) var receipts = ShardedDictionary<Id, ReceiptState>()
    /// Online devices per user (sorted) and when they went offline.
    public internal(set) var presence: [Id: Presence] = [:]
    /// Signaling channels by id.
    public internal(set) var channels: [Id: ChannelState] = [:]
    /// Stored offline notifications per user, in order.
    public internal(set) var offlineQueues: [Id: [StoredSignal]] = [:]

    public init() {}
}
