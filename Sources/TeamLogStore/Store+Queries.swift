public import TeamLog

/// Read-side queries (SPEC §5), answered from the stored projections in one read snapshot.
extension Store {
    /// `teamlog team TEAM`: the team and its members, or `nil` when there is no such team.
    public func teamView(_ id: Id) throws -> JSONValue? {
        try readCommitted { try teamView(id, in: $0) }
    }

    /// The team query inside a given snapshot.
    public func teamView(_ id: Id, in snapshot: ProjectionSnapshot) throws -> JSONValue? {
        guard
            let (team, count) = try snapshot.value(
                .teams, Array(id.utf8), { try ProjectionCodec.decodeTeam(id: id, $0) })
        else { return nil }
        // A dismissed team keeps the member records it had at the dismissal, ended there: it has none.
        if team.dismissed { return team.json(memberCount: 0, members: [], now: snapshot.ts) }
        var members: [Member] = []
        let prefix = ProjectionCodec.prefix(id)
        try snapshot.forEach(.members, prefix: prefix) { key, value in
            let user = Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
            members.append(try ProjectionCodec.decodeMember(user: user, value))
        }
        members.sort { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }
        return team.json(memberCount: count, members: members, now: snapshot.ts)
    }

    /// Seq and time of the last committed event (the log's head).
    public func head() throws -> (seq: UInt64, ts: Int64) {
        let meta = try dbs.readMeta(env)
        return (meta.lastSeq, meta.lastTs)
    }
}
