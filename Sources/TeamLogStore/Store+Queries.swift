public import LMDB
public import TeamLog

/// Read-side queries (SPEC §5), answered from the stored projections in one read snapshot.
extension Store {
    /// `teamlog team TEAM`: the team and its members, or `nil` when there is no such team.
    public func teamView(_ id: Id) throws -> JSONValue? {
        try readProjections { txn in try teamView(id, in: txn) }
    }

    /// The team query inside a given snapshot.
    public func teamView(_ id: Id, in txn: Transaction) throws -> JSONValue? {
        guard
            let (team, count) = try Array(id.utf8).withUnsafeBytes({ key in
                try txn.withValue(pdbs.table(.teams), key: key) { value -> (TeamState, Int)? in
                    guard let value else { return nil }
                    return try ProjectionCodec.decodeTeam(id: id, value)
                }
            })
        else { return nil }
        let lastTs = try pdbs.readCheckpoint(txn).ts
        var members: [Member] = []
        let prefix = ProjectionCodec.prefix(id)
        try txn.forEach(pdbs.table(.members), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            let user = Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
            members.append(try ProjectionCodec.decodeMember(user: user, value))
            return true
        }
        members.sort { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }
        return team.json(memberCount: count, members: members, now: lastTs)
    }

    /// Seq and time of the last committed event (the log's head).
    public func head() throws -> (seq: UInt64, ts: Int64) {
        let meta = try dbs.readMeta(env)
        return (meta.lastSeq, meta.lastTs)
    }
}
