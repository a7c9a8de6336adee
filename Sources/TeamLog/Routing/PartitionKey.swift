/// Where an op goes when the log is split into partitions (`teamlog route`, `serve --nats`).
///
/// Every op that reads or changes a piece of state must land on the partition that owns it, and the
/// owners are chosen so no op needs two of them:
/// - a **team** owns its record, roster, conversation, messages and receipts: team ops, `member.setNotify`
///   and `message.*` on a team or superTeam conversation go by the team id;
/// - a **p2p conversation** goes by the unordered pair of its users, so both sides land on one partition;
/// - a **channel** owns its signaling: `channel.*` go by the channel id;
/// - **presence and time** are needed everywhere (status messages and signaling read who is online; a
///   tick advances every partition's clock): `client.login`, `client.logout` and `clock.tick` go to every
///   partition (`.broadcast`);
/// - `message.modify` names only a message id: the router looks up the partition that holds the message
///   (`.byMessage`).
///
/// A key is hashed over its bytes (an id is its UTF-8 bytes) by the deployment's `PartitionScheme` and
/// reduced modulo the partition count: stable across processes, machines and releases, so a router
/// restarted with the same count sends every key where it went before. Changing the count or the scheme
/// moves keys: a re-partitioning is a new deployment fed from the partitions' logs (`teamlog log` of each,
/// merged by `teamlog merge-logs`), not a live operation.
public enum PartitionKey: Sendable, Equatable {
    /// Owned by one key's partition.
    case key([UInt8])
    /// Sent to every partition.
    case broadcast
    /// Owned by the partition holding this message.
    case byMessage(Id)

    /// The key of `op`.
    public static func of(_ op: Op) -> PartitionKey {
        switch op.body {
        case .clientLogin, .clientLogout, .clockTick, .membersSync:
            return .broadcast
        case .messageModify(let messageId, _):
            return .byMessage(messageId)
        case .messageSend(let m):
            return conversation(m.to, actor: op.actor)
        case .messageRead(let to, _), .messageReceipt(let to, _):
            return conversation(to, actor: op.actor)
        default:
            if let team = op.body.team { return .key(teamKey(team)) }
            if let channel = op.body.channel { return .key(channelKey(channel)) }
            return .broadcast  // not reached: every other op names a team or a channel
        }
    }

    /// A conversation's key: its team's, or the pair of users for p2p.
    public static func conversation(_ to: Conversation, actor: Id) -> PartitionKey {
        guard to.kind == .p2p else { return .key(teamKey(to.id)) }
        let a = Array(actor.utf8)
        let b = Array(to.id.utf8)
        let (low, high) = a.lexicographicallyPrecedes(b) ? (a, b) : (b, a)
        return .key([0x70, 0x3A] + low + [0] + high)  // "p:" low NUL high
    }

    /// The key of a team (its ops, conversation and messages): `t:` and the id.
    public static func teamKey(_ team: Id) -> [UInt8] { tagged(0x74, team) }

    /// The key of a signaling channel: `c:` and the id.
    public static func channelKey(_ channel: Id) -> [UInt8] { tagged(0x63, channel) }

    /// The partition (0..<count) of a key under `scheme`.
    public static func partition(of key: [UInt8], count: Int, scheme: PartitionScheme) -> Int {
        precondition(count > 0, "a partition count is positive")
        return Int(scheme.hash(key) % UInt64(count))
    }

    /// The partition of a message id for a `message.modify` whose message no partition is known to hold
    /// (it is rejected there as `noSuchMessage`, once).
    public static func fallbackPartition(of messageId: Id, count: Int, scheme: PartitionScheme) -> Int {
        partition(of: tagged(0x6D, messageId), count: count, scheme: scheme)  // "m"
    }

    /// 64-bit FNV-1a.
    public static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// MurmurHash3's 64-bit finalizer (`fmix64`): a bijection in which every input bit reaches every
    /// output bit.
    public static func fmix64(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33
        h = h &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h = h &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }

    private static func tagged(_ tag: UInt8, _ id: Id) -> [UInt8] {
        [tag, 0x3A] + Array(id.utf8)
    }
}

/// How keys map to partitions: part of a deployment's data (a partition's store holds the keys it was
/// given), so a deployment keeps the scheme it was created with. `teamlog route` and `serve --nats`
/// record it, with the partition count, in the description of the op stream they create; a stream that
/// records none predates the record and is version 1 (docs/nats.md, *The partitioning*).
public enum PartitionScheme: Int, Sendable, CaseIterable, CustomStringConvertible {
    /// Version 1: 64-bit FNV-1a modulo N. FNV-1a ends with a multiply by an odd prime, so `hash mod 2^k`
    /// depends only on each byte's low k bits: at N = 2, 4, 8 … keys that differ only in their bytes' high
    /// bits land together (300 p2p pairs `x<i>`/`y<i>` all on partition 0 of 2).
    case fnv1a = 1
    /// Version 2: FNV-1a finished with `fmix64`, modulo N: every bit of the key reaches the low bits, so
    /// keys spread at any N. What new deployments use.
    case fnv1aMix64 = 2

    /// The scheme of new deployments.
    public static let current = PartitionScheme.fnv1aMix64

    /// The 64-bit hash whose remainder modulo N is the partition.
    public func hash(_ key: [UInt8]) -> UInt64 {
        switch self {
        case .fnv1a: PartitionKey.fnv1a(key)
        case .fnv1aMix64: PartitionKey.fmix64(PartitionKey.fnv1a(key))
        }
    }

    public var description: String {
        switch self {
        case .fnv1a: "1 (FNV-1a)"
        case .fnv1aMix64: "2 (FNV-1a + fmix64)"
        }
    }
}
