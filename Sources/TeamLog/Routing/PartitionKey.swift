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
/// A key is hashed with 64-bit FNV-1a over its bytes (an id is its UTF-8 bytes) and reduced modulo the
/// partition count: stable across processes, machines and releases, so a router restarted with the
/// same count sends every key where it went before. Changing the count moves keys: a re-partitioning is
/// a new deployment fed from the log (`teamlog log`), not a live operation.
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

    /// The partition (0..<count) of a key.
    public static func partition(of key: [UInt8], count: Int) -> Int {
        precondition(count > 0, "a partition count is positive")
        return Int(fnv1a(key) % UInt64(count))
    }

    /// The partition of a message id for a `message.modify` whose message no partition is known to hold
    /// (it is rejected there as `noSuchMessage`, once).
    public static func fallbackPartition(of messageId: Id, count: Int) -> Int {
        partition(of: tagged(0x6D, messageId), count: count)  // "m"
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

    private static func tagged(_ tag: UInt8, _ id: Id) -> [UInt8] {
        [tag, 0x3A] + Array(id.utf8)
    }
}
