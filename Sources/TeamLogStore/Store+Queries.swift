public import LMDB
public import TeamLog

/// Read-side queries (SPEC §5), answered from the stored projections in one read snapshot.
extension Store {
    /// `teamlog team TEAM`: the team and its members, or `nil` when there is no such team.
    public func teamView(_ id: String) throws -> JSONValue? {
        try env.read { txn in try teamView(id, in: txn) }
    }

    /// The team query inside a given snapshot.
    public func teamView(_ id: String, in txn: Transaction) throws -> JSONValue? {
        guard let (team, count) = try Array(id.utf8).withUnsafeBytes({ key in
            try txn.withValue(dbs.projection(.teams), key: key) { value -> (TeamState, Int)? in
                guard let value else { return nil }
                return try ProjectionCodec.decodeTeam(id: id, value)
            }
        }) else { return nil }
        let lastTs = try dbs.readMeta(txn).lastTs
        var members: [Member] = []
        let prefix = ProjectionCodec.prefix(id)
        try txn.forEach(dbs.projection(.members), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            let user = String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self)
            members.append(try ProjectionCodec.decodeMember(user: user, value))
            return true
        }
        members.sort { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }
        return Self.teamJSON(team, memberCount: count, members: members, now: lastTs)
    }

    /// The SPEC §5 shape of a team. `mutedUntil` is null when not muted or when the mute ended before
    /// `now` (the last event time), -1 for a mute with no end.
    public static func teamJSON(_ t: TeamState, memberCount: Int, members: [Member], now: Int64) -> JSONValue {
        .object([
            ("team", .string(t.id)), ("kind", .string(t.kind.rawValue)), ("name", .string(t.name)),
            ("intro", .string(t.intro)), ("announcement", .string(t.announcement)), ("avatar", .string(t.avatar)),
            ("owner", .string(t.owner)), ("joinMode", .string(t.joinMode.rawValue)),
            ("inviteMode", .string(t.inviteMode.rawValue)), ("beInviteMode", .string(t.beInviteMode.rawValue)),
            ("updateInfoMode", .string(t.updateInfoMode.rawValue)), ("muted", .bool(t.muted)),
            ("dismissed", .bool(t.dismissed)), ("memberCount", .int(Int64(memberCount))),
            ("members", .array(members.map { m in
                let muted: JSONValue = m.isMuted(at: now) ? .int(m.mutedUntil!) : .null
                return .object([
                    ("user", .string(m.user)), ("role", .string(m.role.rawValue)),
                    ("notify", .string(m.notify.rawValue)), ("mutedUntil", muted),
                ])
            })),
        ])
    }

    /// Seq and time of the last committed event.
    public func checkpoint() throws -> (seq: UInt64, ts: Int64) {
        let meta = try dbs.readMeta(env)
        return (meta.lastSeq, meta.lastTs)
    }
}
