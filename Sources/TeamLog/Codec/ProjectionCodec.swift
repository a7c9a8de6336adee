/// The stored form of the projections: one LMDB record per `ProjectionKey`, in a few tables.
///
/// The same functions encode what `apply` changed (the incremental write) and the whole state (what
/// the audit compares), so the stored and the replayed projections are byte-comparable.
public enum ProjectionTable: String, Sendable, CaseIterable, Hashable {
    case teams, members, invites, applications
}

/// Keys join ids with a 0x00 byte: ids never hold control characters, so keys sort by team, then user,
/// and a team's records form one prefix range.
public enum ProjectionCodec {
    /// Projection record version byte.
    static let version: UInt8 = 1

    /// The table, key bytes and current value bytes (`nil`: the record must be deleted) of a changed key.
    public static func record(_ key: ProjectionKey, in world: World) -> (ProjectionTable, [UInt8], [UInt8]?) {
        switch key {
        case .team(let id):
            return (.teams, Array(id.utf8), world.teams[id].map(encodeTeam))
        case .member(let team, let user):
            return (.members, pairKey(team, user), world.teams[team]?.member(user).map(encodeMember))
        case .invite(let team, let invitee):
            let value = world.teams[team]?.invites[invitee].map { list -> [UInt8] in
                var w = ByteWriter()
                w.u8(version)
                w.strings(list)
                return w.bytes
            }
            return (.invites, pairKey(team, invitee), value)
        case .application(let team, let applicant):
            let value = world.teams[team]?.applications[applicant].map { message -> [UInt8] in
                var w = ByteWriter()
                w.u8(version)
                w.string(message)
                return w.bytes
            }
            return (.applications, pairKey(team, applicant), value)
        }
    }

    /// Every record of the state, table by table, keys in byte order (as LMDB stores them).
    public static func allRecords(_ world: World) -> [ProjectionTable: [([UInt8], [UInt8])]] {
        var out: [ProjectionTable: [([UInt8], [UInt8])]] = [:]
        for table in ProjectionTable.allCases { out[table] = [] }
        for (id, team) in world.teams {
            var keys: [ProjectionKey] = [.team(id)]
            keys += team.slots.compactMap { $0 }.map { .member(id, $0.user) }
            keys += team.invites.keys.map { .invite(id, $0) }
            keys += team.applications.keys.map { .application(id, $0) }
            for key in keys {
                let (table, k, v) = record(key, in: world)
                if let v { out[table]!.append((k, v)) }
            }
        }
        for table in ProjectionTable.allCases {
            out[table]!.sort { $0.0.lexicographicallyPrecedes($1.0) }
        }
        return out
    }

    /// Restores one stored record into `world` (used when opening a store).
    public static func restore(_ table: ProjectionTable, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
                               into world: inout World) throws(DecodeError) {
        var r = ByteReader(value)
        let v = try r.u8()
        guard v == version else { throw DecodeError("\(table.rawValue): unknown record version \(v)") }
        switch table {
        case .teams:
            let id = String(decoding: key, as: UTF8.self)
            world.teams[id] = try decodeTeam(id: id, &r)
        case .members:
            let (team, user) = try splitKey(key)
            let member = try decodeMember(user: user, &r)
            guard world.teams[team] != nil else { throw DecodeError("member \(user) of unknown team \(team)") }
            world.teams[team]!.restoreMember(member)
        case .invites:
            let (team, invitee) = try splitKey(key)
            guard world.teams[team] != nil else { throw DecodeError("invitation to unknown team \(team)") }
            world.teams[team]!.invites[invitee] = try r.strings()
        case .applications:
            let (team, applicant) = try splitKey(key)
            guard world.teams[team] != nil else { throw DecodeError("application to unknown team \(team)") }
            world.teams[team]!.applications[applicant] = try r.string()
        }
        try r.expectEnd()
    }

    // MARK: Keys

    /// `a` 0x00 `b`.
    public static func pairKey(_ a: String, _ b: String) -> [UInt8] {
        var key = Array(a.utf8)
        key.append(0)
        key.append(contentsOf: b.utf8)
        return key
    }

    /// The prefix of every pair key starting with `a`.
    public static func prefix(_ a: String) -> [UInt8] {
        var key = Array(a.utf8)
        key.append(0)
        return key
    }

    static func splitKey(_ key: UnsafeRawBufferPointer) throws(DecodeError) -> (String, String) {
        guard let zero = key.firstIndex(of: 0) else { throw DecodeError("key without separator") }
        return (String(decoding: UnsafeRawBufferPointer(rebasing: key[..<zero]), as: UTF8.self),
                String(decoding: UnsafeRawBufferPointer(rebasing: key[(zero + 1)...]), as: UTF8.self))
    }

    // MARK: Teams

    public static func encodeTeam(_ t: TeamState) -> [UInt8] {
        var w = ByteWriter(capacity: 96)
        w.u8(version)
        w.u8(EventCodec.index(t.kind))
        w.string(t.name)
        w.string(t.intro)
        w.string(t.announcement)
        w.string(t.avatar)
        w.string(t.ext)
        w.u8(EventCodec.index(t.joinMode))
        w.u8(EventCodec.index(t.inviteMode))
        w.u8(EventCodec.index(t.beInviteMode))
        w.u8(EventCodec.index(t.updateInfoMode))
        w.bool(t.muted)
        w.bool(t.dismissed)
        w.string(t.owner)
        w.varint(t.createdSeq)
        w.zigzag(t.createdTs)
        w.varint(UInt64(t.memberCount))
        return w.bytes
    }

    static func decodeTeam(id: String, _ r: inout ByteReader) throws(DecodeError) -> TeamState {
        var count = 0
        return try decodeTeam(id: id, &r, memberCount: &count)
    }

    static func decodeTeam(id: String, _ r: inout ByteReader, memberCount: inout Int) throws(DecodeError) -> TeamState {
        let kind: TeamKind = try EventCodec.value(&r)
        let name = try r.string()
        let intro = try r.string()
        let announcement = try r.string()
        let avatar = try r.string()
        let ext = try r.string()
        let joinMode: JoinMode = try EventCodec.value(&r)
        let inviteMode: InviteMode = try EventCodec.value(&r)
        let beInviteMode: BeInviteMode = try EventCodec.value(&r)
        let updateInfoMode: UpdateInfoMode = try EventCodec.value(&r)
        let muted = try r.bool()
        let dismissed = try r.bool()
        let owner = try r.string()
        let createdSeq = try r.varint()
        let createdTs = try r.zigzag()
        memberCount = Int(try r.varint())  // derived; stored for queries that read only this record
        var t = TeamState(id: id, kind: kind, owner: owner, seq: createdSeq, ts: createdTs)
        t.name = name
        t.intro = intro
        t.announcement = announcement
        t.avatar = avatar
        t.ext = ext
        t.joinMode = joinMode
        t.inviteMode = inviteMode
        t.beInviteMode = beInviteMode
        t.updateInfoMode = updateInfoMode
        t.muted = muted
        t.dismissed = dismissed
        return t
    }

    /// Decodes a stored team record on its own (queries): the team without roster, and its member count.
    public static func decodeTeam(id: String, _ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> (TeamState, Int) {
        var r = ByteReader(bytes)
        _ = try r.u8()
        var count = 0
        let t = try decodeTeam(id: id, &r, memberCount: &count)
        try r.expectEnd()
        return (t, count)
    }

    // MARK: Members

    public static func encodeMember(_ m: Member) -> [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.u8(version)
        w.u8(EventCodec.index(m.role))
        w.u8(EventCodec.index(m.notify))
        w.bool(m.mutedUntil != nil)
        if let until = m.mutedUntil { w.zigzag(until) }
        w.varint(m.joinSeq)
        w.varint(UInt64(m.slot))
        return w.bytes
    }

    static func decodeMember(user: String, _ r: inout ByteReader) throws(DecodeError) -> Member {
        let role: Role = try EventCodec.value(&r)
        let notify: NotifyState = try EventCodec.value(&r)
        let mutedUntil = try r.bool() ? try r.zigzag() : nil
        let joinSeq = try r.varint()
        let slot = try r.varint()
        guard slot < UInt64(Int32.max) else { throw DecodeError("member slot out of range") }
        return Member(user: user, role: role, notify: notify, mutedUntil: mutedUntil, joinSeq: joinSeq, slot: Int32(slot))
    }

    /// Decodes a stored member record on its own (queries).
    public static func decodeMember(user: String, _ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> Member {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let m = try decodeMember(user: user, &r)
        try r.expectEnd()
        return m
    }
}
