public import TeamLog

/// The stored form of the projections: one LMDB record per `ProjectionKey`, in a few tables.
///
/// The same functions encode what `apply` changed (the incremental write) and the whole state (what
/// the audit compares), so the stored and the replayed projections are byte-comparable.
public enum ProjectionTable: String, Sendable, CaseIterable, Hashable {
    case teams, members, pastMembers, invites, applications
    case messages, convs, counted, own, directed, userConvs, receipts, receiptReads, presence, channels, offline

    /// The table's place in `allCases` (a switch: no hashing of the table per record on the paths that sort
    /// or route records).
    @inline(__always)
    var rank: Int {
        switch self {
        case .teams: 0
        case .members: 1
        case .pastMembers: 2
        case .invites: 3
        case .applications: 4
        case .messages: 5
        case .convs: 6
        case .counted: 7
        case .own: 8
        case .directed: 9
        case .userConvs: 10
        case .receipts: 11
        case .receiptReads: 12
        case .presence: 13
        case .channels: 14
        case .offline: 15
        }
    }
}

/// Keys join ids with a 0x00 byte: ids never hold control characters, so keys sort by team, then user,
/// and a team's records form one prefix range.
public enum ProjectionCodec {
    /// Projection record version byte.
    static let version: UInt8 = 1

    /// Appends the record of a changed key to `out`: its table, its key bytes and its current value bytes,
    /// or a deletion when the state no longer holds it.
    static func append(_ key: ProjectionKey, in world: World, to out: inout RecordBuffer) {
        switch key {
        case .team(let id):
            out.append(.teams, key: { $0.raw(id.utf8) }) { w in
                guard let t = world.teams[id] else { return false }
                encodeTeam(t, into: &w)
                return true
            }
        case .member(let team, let user):
            out.append(.members, key: { writePairKey(team, user, &$0) }) { w in
                guard let m = world.teams[team]?.member(user) else { return false }
                encodeMember(m, into: &w)
                return true
            }
        case .pastMembers(let team, let user):
            out.append(.pastMembers, key: { writePairKey(team, user, &$0) }) { w in
                guard let memberships = world.teams[team]?.past[user] else { return false }
                w.u8(version)
                w.varint(UInt64(memberships.count))
                for m in memberships {
                    w.varint(m.joinSeq)
                    w.varint(m.leaveSeq)
                    w.varint(UInt64(m.slot))
                }
                return true
            }
        case .invite(let team, let invitee):
            out.append(.invites, key: { writePairKey(team, invitee, &$0) }) { w in
                guard let list = world.teams[team]?.invites[invitee] else { return false }
                w.u8(version)
                w.strings(list)
                return true
            }
        case .application(let team, let applicant):
            out.append(.applications, key: { writePairKey(team, applicant, &$0) }) { w in
                guard let message = world.teams[team]?.applications[applicant] else { return false }
                w.u8(version)
                w.string(message)
                return true
            }
        case .message(let id):
            out.append(.messages, key: { $0.raw(id.utf8) }) { w in
                guard let m = world.messages[id] else { return false }
                encodeMessage(m, into: &w)
                return true
            }
        case .conv(let key):
            out.append(.convs, key: { key.append(to: &$0.bytes) }) { w in
                guard let conv = world.convs[key] else { return false }
                w.u8(version)
                writeRef(conv.last, &w)
                return true
            }
        case .counted(let conv, let seq, _):
            out.append(.counted, key: { writeSeqKey(conv, nil, seq, &$0) }) { writeOrdinal(key, in: world, &$0) }
        case .own(let conv, let user, let seq, _):
            out.append(.own, key: { writeSeqKey(conv, user, seq, &$0) }) { writeOrdinal(key, in: world, &$0) }
        case .directed(let conv, let user, let seq, _):
            out.append(.directed, key: { writeSeqKey(conv, user, seq, &$0) }) { writeOrdinal(key, in: world, &$0) }
        case .userConv(let user, let key):
            out.append(.userConvs, key: { writeUserConvKey(user, key, &$0) }) { w in
                guard let uc = world.userConvs[user]?[key] else { return false }
                w.u8(version)
                w.varint(uc.readSeq)
                w.varint(uc.joinSeq)
                w.varint(uc.leaveSeq.map { $0 + 1 } ?? 0)
                writeRef(uc.last, &w)
                return true
            }
        case .receipt(let id):
            out.append(.receipts, key: { $0.raw(id.utf8) }) { w in
                guard let r = world.receipts[id] else { return false }
                w.u8(version)
                w.varint(UInt64(r.receiverCount))
                w.bool(r.directedReceivers != nil)
                if let directed = r.directedReceivers { w.strings(directed) }
                w.varint(UInt64(r.readCount))
                return true
            }
        case .receiptRead(let id, let user, _):
            // Looked up rather than taken from the key: the audit asks with keys read back from the store.
            out.append(.receiptReads, key: { writePairKey(id, user, &$0) }) { w in
                guard let ordinal = world.receipts[id]?.ordinal(of: user) else { return false }
                w.u8(version)
                w.varint(ordinal)
                return true
            }
        case .presence(let user):
            out.append(.presence, key: { $0.raw(user.utf8) }) { w in
                guard let p = world.presence[user] else { return false }
                w.u8(version)
                w.strings(p.devices)
                w.bool(p.offlineSince != nil)
                if let since = p.offlineSince { w.zigzag(since) }
                return true
            }
        case .channel(let id):
            out.append(.channels, key: { $0.raw(id.utf8) }) { w in
                guard let c = world.channels[id] else { return false }
                encodeChannel(c, into: &w)
                return true
            }
        case .offline(let user):
            out.append(.offline, key: { $0.raw(user.utf8) }) { w in
                guard let queue = world.offlineQueues[user] else { return false }
                w.u8(version)
                w.varint(UInt64(queue.count))
                for s in queue {
                    w.varint(s.seq)
                    w.string(s.channel)
                    w.u8(EventCodec.index(s.event))
                    w.string(s.from)
                    w.optionalString(s.requestId)
                    w.optionalString(s.pushText)
                }
                return true
            }
        }
    }

    /// Every projection key of the state (what a full comparison covers). Index entries are listed only
    /// from a replay's `indexJournal`: a writer's state keeps their totals, the entries are on disk.
    public static func allKeys(_ world: World) -> [ProjectionKey] {
        var keys: [ProjectionKey] = []
        for (id, team) in world.teams {
            keys.append(.team(id))
            keys += team.slots.compactMap { $0 }.map { .member(id, $0.user) }
            keys += team.invites.keys.map { .invite(id, $0) }
            keys += team.applications.keys.map { .application(id, $0) }
            keys += team.past.keys.map { .pastMembers(id, $0) }
        }
        keys += world.messages.keys.map { .message($0) }
        keys += world.convs.keys.map { .conv($0) }
        keys += world.indexJournal?.keys ?? []
        for (user, convs) in world.userConvs { keys += convs.keys.map { .userConv(user, $0) } }
        for (id, tally) in world.receipts {
            keys.append(.receipt(id))
            keys += tally.readers.map { .receiptRead(id, $0.key, ordinal: $0.value) }
        }
        keys += world.presence.keys.map { .presence($0) }
        keys += world.channels.keys.map { .channel($0) }
        keys += world.offlineQueues.keys.map { .offline($0) }
        return keys
    }

    /// Writes conversation, [0, user,] 0, big-endian seq: an append-only index key.
    static func writeSeqKey(_ conv: ConvKey, _ user: Id?, _ seq: UInt64, _ w: inout ByteWriter) {
        conv.append(to: &w.bytes)
        if let user {
            w.u8(0)
            w.raw(user.utf8)
        }
        w.u8(0)
        w.u64be(seq)
    }

    /// user, 0, conversation: a user-conversation record's key, built in one allocation.
    static func userConvKey(_ user: Id, _ conv: ConvKey) -> [UInt8] {
        var w = ByteWriter(capacity: user.utf8.count + 2 + conv.id.utf8.count)
        writeUserConvKey(user, conv, &w)
        return w.bytes
    }

    static func writeUserConvKey(_ user: Id, _ conv: ConvKey, _ w: inout ByteWriter) {
        w.raw(user.utf8)
        w.u8(0)
        conv.append(to: &w.bytes)
    }

    /// Writes an index record's value: version, then its ordinal. A replay with a journal answers for any
    /// key (the audit asks for keys read back from the store, whose ordinal is not in their bytes);
    /// otherwise the key carries it, as `apply` made it. `false`: no such entry.
    static func writeOrdinal(_ key: ProjectionKey, in world: World, _ w: inout ByteWriter) -> Bool {
        let ordinal: UInt64?
        if let journal = world.indexJournal {
            ordinal = journal.ordinal(of: key)
        } else {
            switch key {
            case .counted(_, _, let n), .own(_, _, _, let n), .directed(_, _, _, let n): ordinal = n
            default: ordinal = nil
            }
        }
        guard let ordinal, ordinal > 0 else { return false }
        w.u8(version)
        w.varint(ordinal)
        return true
    }

    static func writeRef(_ ref: MessageRef?, _ w: inout ByteWriter) {
        w.bool(ref != nil)
        if let ref {
            w.varint(ref.seq)
            w.string(ref.messageId)
        }
    }

    static func readRef(_ r: inout ByteReader) throws(DecodeError) -> MessageRef? {
        guard try r.bool() else { return nil }
        return MessageRef(seq: try r.varint(), messageId: try r.id())
    }

    public static func encodeMessage(_ m: StoredMessage, into w: inout ByteWriter) {
        w.u8(version)
        w.varint(m.seq)
        w.zigzag(m.ts)
        w.varint(UInt64(1 + m.conv.id.utf8.count))  // the length of `m.conv.bytes`, written in place
        m.conv.append(to: &w.bytes)
        w.string(m.sender)
        var flags: UInt8 = 0
        if m.isTip { flags |= 1 }
        if m.stored { flags |= 2 }
        if m.needReceipt { flags |= 4 }
        if m.hasChanged { flags |= 8 }
        if m.directedUserIds != nil { flags |= 16 }
        if m.modifiedBy != nil { flags |= 32 }
        w.u8(flags)
        if m.stored { w.string(m.content.jsonString) }
        if let d = m.directedUserIds { w.strings(d) }
        if let by = m.modifiedBy {
            w.string(by)
            w.zigzag(m.modifiedTs ?? 0)
        }
    }

    public static func encodeChannel(_ c: ChannelState, into w: inout ByteWriter) {
        w.u8(version)
        w.u8(EventCodec.index(c.kind))
        w.optionalString(c.ext)
        w.string(c.creator)
        w.varint(c.createdSeq)
        w.bool(c.closed)
        w.varint(UInt64(c.members.count))
        for m in c.members {
            w.string(m.user)
            w.zigzag(m.joinedTs)
        }
        w.varint(UInt64(c.invites.count))
        for i in c.invites {
            w.string(i.target)
            w.string(i.inviter)
            w.string(i.requestId)
            w.bool(i.offline)
            w.optionalString(i.pushText)
        }
    }

    static func decodeChannel(id: Id, _ r: inout ByteReader) throws(DecodeError) -> ChannelState {
        let kind: ChannelKind = try EventCodec.value(&r)
        let ext = try r.optionalString()
        var c = ChannelState(id: id, kind: kind, ext: ext, creator: try r.id(), createdSeq: try r.varint())
        c.closed = try r.bool()
        let members = try r.count()
        for _ in 0..<members { c.members.append((try r.id(), try r.zigzag())) }
        let invites = try r.count()
        for _ in 0..<invites {
            c.invites.append(
                PendingInvite(
                    target: try r.id(), inviter: try r.id(), requestId: try r.id(), offline: try r.bool(),
                    pushText: try r.optionalString()))
        }
        return c
    }

    /// Decodes a stored channel record on its own (queries).
    public static func decodeChannel(id: Id, _ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> ChannelState {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let c = try decodeChannel(id: id, &r)
        try r.expectEnd()
        return c
    }

    /// Decodes a stored message record on its own (queries).
    public static func decodeMessage(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> StoredMessage {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let m = try decodeMessage(&r)
        try r.expectEnd()
        return m
    }

    static func decodeMessage(_ r: inout ByteReader) throws(DecodeError) -> StoredMessage {
        let seq = try r.varint()
        let ts = try r.zigzag()
        let convBytes = Array(try r.raw(try r.count()))
        guard let conv = ConvKey(bytes: convBytes) else { throw DecodeError("bad conversation key in message") }
        let sender = try r.id()
        let flags = try r.u8()
        var content = JSONValue.null
        if flags & 2 != 0 {
            let text = try r.string()
            do { content = try JSONParser.parse(text) } catch { throw DecodeError("stored content is not JSON") }
        }
        var m = StoredMessage(
            seq: seq, ts: ts, conv: conv, sender: sender, content: content, isTip: flags & 1 != 0,
            stored: flags & 2 != 0)
        m.needReceipt = flags & 4 != 0
        m.hasChanged = flags & 8 != 0
        if flags & 16 != 0 { m.directedUserIds = try r.ids() }
        if flags & 32 != 0 {
            m.modifiedBy = try r.id()
            m.modifiedTs = try r.zigzag()
        }
        return m
    }

    /// Every record of the state, table by table, keys in byte order (as LMDB stores them).
    public static func allRecords(_ world: World) -> [ProjectionTable: [([UInt8], [UInt8])]] {
        var out: [ProjectionTable: [([UInt8], [UInt8])]] = [:]
        for table in ProjectionTable.allCases { out[table] = [] }
        var buffer = RecordBuffer()
        for key in allKeys(world) { append(key, in: world, to: &buffer) }
        for index in 0..<buffer.count {
            let (table, k, v) = buffer.record(index)
            if let v { out[table]!.append((k, v)) }
        }
        for table in ProjectionTable.allCases {
            out[table]!.sort { $0.0.lexicographicallyPrecedes($1.0) }
        }
        return out
    }

    /// Restores one stored record into `world` (used when opening a store). An index record restores only
    /// its conversation's (or user conversation's) running total: entries under one prefix come in seq
    /// order and must be numbered 1, 2, 3, …
    public static func restore(
        _ table: ProjectionTable, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
        into world: inout World
    ) throws(DecodeError) {
        var r = ByteReader(value)
        let v = try r.u8()
        guard v == version else { throw DecodeError("\(table.rawValue): unknown record version \(v)") }
        switch table {
        case .teams:
            let id = Id(String(decoding: key, as: UTF8.self))
            world.restoreTeam(try decodeTeam(id: id, &r))
        case .members:
            let (team, user) = try splitKey(key)
            let member = try decodeMember(user: user, &r)
            guard world.restoreInTeam(team, { $0.restoreMember(member) }) else {
                throw DecodeError("member \(user) of unknown team \(team)")
            }
        case .pastMembers:
            let (team, user) = try splitKey(key)
            let past = try readPastMemberships(&r)
            guard world.restoreInTeam(team, { $0.restorePast(user, past) }) else {
                throw DecodeError("past membership of unknown team \(team)")
            }
        case .invites:
            let (team, invitee) = try splitKey(key)
            let inviters = try r.ids()
            guard world.restoreInTeam(team, { $0.invites[invitee] = inviters }) else {
                throw DecodeError("invitation to unknown team \(team)")
            }
        case .applications:
            let (team, applicant) = try splitKey(key)
            let text = try r.string()
            guard world.restoreInTeam(team, { $0.applications[applicant] = text }) else {
                throw DecodeError("application to unknown team \(team)")
            }
        case .messages:
            world.restoreMessage(Id(String(decoding: key, as: UTF8.self)), try decodeMessage(&r))
        case .convs:
            guard let conv = ConvKey(bytes: key) else { throw DecodeError("bad conversation key") }
            let last = try readRef(&r)
            world.restoreConv(conv) { $0.last = last }
        case .counted, .own, .directed:
            let (conv, user, _) = try splitSeqKey(key, hasUser: table != .counted)
            let ordinal = try r.varint()
            let total: UInt64
            switch table {
            case .counted: total = world.convs[conv]?.countedTotal ?? 0
            case .own: total = world.userConvs[user]?[conv]?.ownTotal ?? 0
            default: total = world.userConvs[user]?[conv]?.directedTotal ?? 0
            }
            guard ordinal == total + 1 else {
                throw DecodeError("\(table.rawValue) ordinal \(ordinal) after \(total)")
            }
            switch table {
            case .counted: world.restoreConv(conv) { $0.countedTotal = ordinal }
            case .own: world.restoreUserConv(user, conv) { $0.ownTotal = ordinal }
            default: world.restoreUserConv(user, conv) { $0.directedTotal = ordinal }
            }
        case .userConvs:
            guard let zero = key.firstIndex(of: 0), let conv = ConvKey(bytes: key[(zero + 1)...]) else {
                throw DecodeError("bad userConvs key")
            }
            let user = Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[..<zero]), as: UTF8.self))
            // Merged: the running totals come from the `own` and `directed` records, in whichever table order.
            let readSeq = try r.varint()
            let joinSeq = try r.varint()
            let leave = try r.varint()
            let last = try readRef(&r)
            world.restoreUserConv(user, conv) { uc in
                uc.readSeq = readSeq
                uc.joinSeq = joinSeq
                uc.leaveSeq = leave == 0 ? nil : leave - 1
                uc.last = last
            }
        case .receipts:
            world.restoreReceipt(Id(String(decoding: key, as: UTF8.self)), try readReceipt(&r))
        case .receiptReads:
            let (id, user) = try splitKey(key)
            let ordinal = try r.varint()
            guard let restored = world.restoreRead(id, user, ordinal: ordinal) else {
                throw DecodeError("receipt for unknown tally \(id)")
            }
            guard restored else {
                throw DecodeError("receipt \(id)/\(user): ordinal \(ordinal) out of range or taken")
            }
        case .presence:
            var p = Presence()
            p.devices = try r.ids()
            p.offlineSince = try r.bool() ? try r.zigzag() : nil
            world.restorePresence(Id(String(decoding: key, as: UTF8.self)), p)
        case .channels:
            let id = Id(String(decoding: key, as: UTF8.self))
            world.restoreChannel(try decodeChannel(id: id, &r))
        case .offline:
            let n = try r.count()
            var queue: [StoredSignal] = []
            for _ in 0..<n {
                queue.append(
                    StoredSignal(
                        seq: try r.varint(), channel: try r.id(), event: try EventCodec.value(&r),
                        from: try r.id(),
                        requestId: try r.optionalId(), pushText: try r.optionalString()))
            }
            world.restoreOfflineQueue(Id(String(decoding: key, as: UTF8.self)), queue)
        }
        try r.expectEnd()
    }

    // MARK: Keys

    /// `a` 0x00 `b`.
    public static func pairKey(_ a: Id, _ b: Id) -> [UInt8] {
        var w = ByteWriter(capacity: a.utf8.count + 1 + b.utf8.count)
        writePairKey(a, b, &w)
        return w.bytes
    }

    static func writePairKey(_ a: Id, _ b: Id, _ w: inout ByteWriter) {
        w.raw(a.utf8)
        w.u8(0)
        w.raw(b.utf8)
    }

    /// The prefix of every pair key starting with `a`.
    public static func prefix(_ a: Id) -> [UInt8] {
        var key = Array(a.utf8)
        key.append(0)
        return key
    }

    /// conv 0 [user 0] seq(8, big-endian).
    static func splitSeqKey(_ key: UnsafeRawBufferPointer, hasUser: Bool) throws(DecodeError) -> (
        ConvKey, Id, UInt64
    ) {
        guard key.count > 9 else { throw DecodeError("index key too short") }
        let seq = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: key.count - 8, as: UInt64.self))
        let head = key[..<(key.count - 9)]
        guard key[key.count - 9] == 0 else { throw DecodeError("index key without separator") }
        if !hasUser {
            guard let conv = ConvKey(bytes: head) else { throw DecodeError("bad conversation key") }
            return (conv, "", seq)
        }
        guard let zero = head.firstIndex(of: 0), let conv = ConvKey(bytes: head[..<zero]) else {
            throw DecodeError("bad index key")
        }
        return (conv, Id(String(decoding: UnsafeRawBufferPointer(rebasing: head[(zero + 1)...]), as: UTF8.self)), seq)
    }

    static func splitKey(_ key: UnsafeRawBufferPointer) throws(DecodeError) -> (Id, Id) {
        guard let zero = key.firstIndex(of: 0) else { throw DecodeError("key without separator") }
        return (
            Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[..<zero]), as: UTF8.self)),
            Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[(zero + 1)...]), as: UTF8.self))
        )
    }

    // MARK: Teams

    public static func encodeTeam(_ t: TeamState, into w: inout ByteWriter) {
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
    }

    static func decodeTeam(id: Id, _ r: inout ByteReader) throws(DecodeError) -> TeamState {
        var count = 0
        return try decodeTeam(id: id, &r, memberCount: &count)
    }

    static func decodeTeam(id: Id, _ r: inout ByteReader, memberCount: inout Int) throws(DecodeError) -> TeamState {
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
        let owner = try r.id()
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
    public static func decodeTeam(id: Id, _ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> (TeamState, Int) {
        var r = ByteReader(bytes)
        _ = try r.u8()
        var count = 0
        let t = try decodeTeam(id: id, &r, memberCount: &count)
        try r.expectEnd()
        return (t, count)
    }

    // MARK: Receipts and past memberships

    static func readReceipt(_ r: inout ByteReader) throws(DecodeError) -> ReceiptState {
        let count = try r.varint()
        let directed = try r.bool() ? try r.ids() : nil
        let read = try r.varint()
        guard count <= UInt64(Int32.max), read <= count else { throw DecodeError("receipt counts out of range") }
        return ReceiptState(receiverCount: Int(count), directedReceivers: directed, readCount: Int(read))
    }

    static func readPastMemberships(_ r: inout ByteReader) throws(DecodeError) -> [PastMembership] {
        var memberships: [PastMembership] = []
        for _ in 0..<(try r.count()) {
            let join = try r.varint()
            let leave = try r.varint()
            let slot = try r.varint()
            guard slot < UInt64(Int32.max), join < leave else { throw DecodeError("bad past membership") }
            memberships.append(PastMembership(joinSeq: join, leaveSeq: leave, slot: Int32(slot)))
        }
        return memberships
    }

    /// Decodes a stored receipt tally on its own (queries): counts and directed receivers, no reader known.
    public static func decodeReceipt(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> ReceiptState {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let tally = try readReceipt(&r)
        try r.expectEnd()
        return tally
    }

    /// Decodes a stored past-memberships record on its own (queries).
    public static func decodePastMemberships(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> [PastMembership] {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let memberships = try readPastMemberships(&r)
        try r.expectEnd()
        return memberships
    }

    /// Decodes an index record's value on its own (queries): its ordinal.
    public static func decodeOrdinal(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> UInt64 {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let ordinal = try r.varint()
        try r.expectEnd()
        return ordinal
    }

    // MARK: Members

    public static func encodeMember(_ m: Member, into w: inout ByteWriter) {
        w.u8(version)
        w.u8(EventCodec.index(m.role))
        w.u8(EventCodec.index(m.notify))
        w.bool(m.mutedUntil != nil)
        if let until = m.mutedUntil { w.zigzag(until) }
        w.varint(m.joinSeq)
        w.varint(UInt64(m.slot))
    }

    static func decodeMember(user: Id, _ r: inout ByteReader) throws(DecodeError) -> Member {
        let role: Role = try EventCodec.value(&r)
        let notify: NotifyState = try EventCodec.value(&r)
        let mutedUntil = try r.bool() ? try r.zigzag() : nil
        let joinSeq = try r.varint()
        let slot = try r.varint()
        guard slot < UInt64(Int32.max) else { throw DecodeError("member slot out of range") }
        return Member(
            user: user, role: role, notify: notify, mutedUntil: mutedUntil, joinSeq: joinSeq, slot: Int32(slot))
    }

    /// Decodes a stored member record on its own (queries).
    public static func decodeMember(user: Id, _ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> Member {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let m = try decodeMember(user: user, &r)
        try r.expectEnd()
        return m
    }
}

/// Runs `change` on a value in place (lets a `default:` subscript be looked up once and mutated).
@inline(__always)
private func modifying<T>(_ value: inout T, _ change: (inout T) -> Void) { change(&value) }

// MARK: Single records, for the working set's loader

extension ProjectionCodec {
    /// Decodes a stored conversation record on its own: its last message.
    static func decodeConvLast(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> MessageRef? {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let last = try readRef(&r)
        try r.expectEnd()
        return last
    }

    /// Decodes a stored user-conversation record on its own (its running totals are not in it).
    static func decodeUserConv(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> UserConv {
        var r = ByteReader(bytes)
        _ = try r.u8()
        var uc = UserConv()
        uc.readSeq = try r.varint()
        uc.joinSeq = try r.varint()
        let leave = try r.varint()
        uc.leaveSeq = leave == 0 ? nil : leave - 1
        uc.last = try readRef(&r)
        try r.expectEnd()
        return uc
    }

    /// Decodes a stored invitation list on its own.
    static func decodeInviters(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> [Id] {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let inviters = try r.ids()
        try r.expectEnd()
        return inviters
    }

    /// Decodes a stored application on its own: its message.
    static func decodeApplication(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> String {
        var r = ByteReader(bytes)
        _ = try r.u8()
        let message = try r.string()
        try r.expectEnd()
        return message
    }
}
