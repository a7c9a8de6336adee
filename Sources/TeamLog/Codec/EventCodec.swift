/// The log's value encoding: a version byte, then the event in `ByteWriter`'s compact format.
///
/// Op tags are stable forever (the log is permanent): add new ones, never renumber.
public enum EventCodec {
    /// The encoding version written by this build.
    public static let version: UInt8 = 1

    /// Encodes an event (its seq is the log key, not part of the value).
    public static func encode(_ event: Event, into w: inout ByteWriter) {
        let op = event.op
        w.u8(version)
        w.varint(UInt64(event.ts))
        w.u8((op.opId != nil ? 1 : 0) | (op.device != nil ? 2 : 0))
        w.string(op.actor)
        if let opId = op.opId { w.string(opId) }
        if let device = op.device { w.string(device) }
        encodeBody(op.body, into: &w)
    }

    /// Encodes an event to a fresh array.
    public static func encode(_ event: Event) -> [UInt8] {
        var w = ByteWriter()
        encode(event, into: &w)
        return w.bytes
    }

    /// Decodes the value stored under `seq`.
    public static func decode(seq: UInt64, _ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> Event {
        var r = ByteReader(bytes)
        let v = try r.u8()
        guard v == version else { throw DecodeError("event \(seq): unknown encoding version \(v)") }
        let ts = try r.varint()
        guard ts <= UInt64(Int64.max) else { throw DecodeError("event \(seq): time out of range") }
        let flags = try r.u8()
        let actor = try r.id()
        let opId = flags & 1 != 0 ? try r.id() : nil
        let device = flags & 2 != 0 ? try r.id() : nil
        let body = try decodeBody(&r)
        try r.expectEnd()
        // An accepted op's time is the event time (`decide` resolves it), so it is stored once.
        let op = Op(actor: actor, ts: Int64(ts), opId: opId, device: device, body: body)
        return Event(seq: seq, ts: Int64(ts), op: op)
    }

    /// The bytes of the opId of the event encoded in `bytes` (borrowed from them), or `nil` when its op
    /// had none — read from the event's header alone, without decoding its body (the audit's check of the
    /// opId index, at every event of the log).
    public static func opIdBytes(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> UnsafeRawBufferPointer? {
        var r = ByteReader(bytes)
        let v = try r.u8()
        guard v == version else { throw DecodeError("unknown encoding version \(v)") }
        _ = try r.varint()
        let flags = try r.u8()
        _ = try r.stringBytes()  // the actor
        return flags & 1 != 0 ? try r.stringBytes() : nil
    }

    /// Decodes from an array.
    public static func decode(seq: UInt64, _ bytes: [UInt8]) throws(DecodeError) -> Event {
        do {
            return try bytes.withUnsafeBytes { try decode(seq: seq, $0) }
        } catch let e as DecodeError { throw e } catch { throw DecodeError("\(error)") }
    }

    // MARK: Bodies

    private static func encodeBody(_ body: OpBody, into w: inout ByteWriter) {
        switch body {
        case .teamCreate(let c):
            w.u8(1)
            w.string(c.team)
            w.u8(c.kind == .team ? 0 : 1)
            w.string(c.name)
            w.strings(c.members)
            w.string(c.intro)
            w.string(c.announcement)
            w.string(c.avatar)
            w.u8(index(c.joinMode))
            w.u8(index(c.inviteMode))
            w.u8(index(c.beInviteMode))
            w.u8(index(c.updateInfoMode))
            w.bool(c.muted)
        case .teamInvite(let t, let targets): w.u8(2); w.string(t); w.strings(targets)
        case .teamAcceptInvite(let t, let inviter): w.u8(3); w.string(t); w.string(inviter)
        case .teamRejectInvite(let t, let inviter): w.u8(4); w.string(t); w.string(inviter)
        case .teamApply(let t, let message): w.u8(5); w.string(t); w.optionalString(message)
        case .teamApproveApply(let t, let a): w.u8(6); w.string(t); w.string(a)
        case .teamRejectApply(let t, let a): w.u8(7); w.string(t); w.string(a)
        case .teamKick(let t, let targets): w.u8(8); w.string(t); w.strings(targets)
        case .teamLeave(let t): w.u8(9); w.string(t)
        case .teamUpdate(let t, let f):
            w.u8(10)
            w.string(t)
            w.optionalString(f.name)
            w.optionalString(f.intro)
            w.optionalString(f.announcement)
            w.optionalString(f.avatar)
            w.u8(f.joinMode.map { index($0) + 1 } ?? 0)
            w.u8(f.inviteMode.map { index($0) + 1 } ?? 0)
            w.u8(f.beInviteMode.map { index($0) + 1 } ?? 0)
            w.u8(f.updateInfoMode.map { index($0) + 1 } ?? 0)
            w.optionalString(f.ext)
        case .teamMuteAll(let t, let muted): w.u8(11); w.string(t); w.bool(muted)
        case .teamDismiss(let t): w.u8(12); w.string(t)
        case .teamTransferOwner(let t, let target, let leave): w.u8(13); w.string(t); w.string(target); w.bool(leave)
        case .teamAddManagers(let t, let targets): w.u8(14); w.string(t); w.strings(targets)
        case .teamRemoveManagers(let t, let targets): w.u8(15); w.string(t); w.strings(targets)
        case .teamMuteMember(let t, let target, let muted, let until):
            w.u8(16)
            w.string(t)
            w.string(target)
            w.bool(muted)
            w.zigzag(until ?? -1)
        case .memberSetNotify(let t, let state): w.u8(17); w.string(t); w.u8(index(state))
        case .messageSend(let m):
            w.u8(32)
            conversation(m.to, into: &w)
            w.string(m.messageId)
            w.string(m.content.jsonString)
            var flags: UInt8 = 0
            if m.needReceipt { flags |= 1 }
            if m.disableNotification { flags |= 2 }
            if m.disableUpdateLastMessage { flags |= 4 }
            if m.isCounted { flags |= 8 }
            if m.isPersisted { flags |= 16 }
            if m.isStatusMessage { flags |= 32 }
            if m.directedUserIds != nil { flags |= 64 }
            w.u8(flags)
            if let d = m.directedUserIds { w.strings(d) }
            w.varint(UInt64(m.metadata.count))
            for (k, v) in m.metadata {
                w.string(k)
                w.string(v)
            }
            w.strings(m.mentions)
        case .messageRead(let to, let upTo):
            w.u8(33)
            conversation(to, into: &w)
            w.varint(upTo.map { $0 + 1 } ?? 0)
        case .messageReceipt(let to, let ids): w.u8(34); conversation(to, into: &w); w.strings(ids)
        case .messageModify(let id, let content): w.u8(35); w.string(id); w.string(content.jsonString)
        case .clientLogin: w.u8(36)
        case .clientLogout: w.u8(37)
        case .channelCreate(let c, let kind, let ext): w.u8(64); w.string(c); w.u8(index(kind)); w.optionalString(ext)
        case .channelJoin(let c): w.u8(65); w.string(c)
        case .channelInvite(let i):
            w.u8(66)
            w.string(i.channel)
            w.string(i.target)
            w.string(i.requestId)
            w.bool(i.offline)
            w.optionalString(i.pushText)
        case .channelCancelInvite(let c, let t, let r): w.u8(67); w.string(c); w.string(t); w.string(r)
        case .channelReject(let c, let i, let r): w.u8(68); w.string(c); w.string(i); w.string(r)
        case .channelAccept(let c, let i, let r): w.u8(69); w.string(c); w.string(i); w.string(r)
        case .channelLeave(let c): w.u8(70); w.string(c)
        case .channelClose(let c): w.u8(71); w.string(c)
        case .channelControl(let c, let t, let d): w.u8(72); w.string(c); w.optionalString(t); w.string(d)
        case .clockTick: w.u8(73)
        case .membersSync: w.u8(74)
        }
    }

    private static func decodeBody(_ r: inout ByteReader) throws(DecodeError) -> OpBody {
        let tag = try r.u8()
        switch tag {
        case 1:
            var c = TeamCreate(team: try r.id())
            c.kind = try r.u8() == 0 ? .team : .superTeam
            c.name = try r.string()
            c.members = try r.ids()
            c.intro = try r.string()
            c.announcement = try r.string()
            c.avatar = try r.string()
            c.joinMode = try value(&r)
            c.inviteMode = try value(&r)
            c.beInviteMode = try value(&r)
            c.updateInfoMode = try value(&r)
            c.muted = try r.bool()
            return .teamCreate(c)
        case 2: return .teamInvite(team: try r.id(), targets: try r.ids())
        case 3: return .teamAcceptInvite(team: try r.id(), inviter: try r.id())
        case 4: return .teamRejectInvite(team: try r.id(), inviter: try r.id())
        case 5: return .teamApply(team: try r.id(), message: try r.optionalString())
        case 6: return .teamApproveApply(team: try r.id(), applicant: try r.id())
        case 7: return .teamRejectApply(team: try r.id(), applicant: try r.id())
        case 8: return .teamKick(team: try r.id(), targets: try r.ids())
        case 9: return .teamLeave(team: try r.id())
        case 10:
            let t = try r.id()
            var f = TeamFields()
            f.name = try r.optionalString()
            f.intro = try r.optionalString()
            f.announcement = try r.optionalString()
            f.avatar = try r.optionalString()
            f.joinMode = try optionalValue(&r)
            f.inviteMode = try optionalValue(&r)
            f.beInviteMode = try optionalValue(&r)
            f.updateInfoMode = try optionalValue(&r)
            f.ext = try r.optionalString()
            return .teamUpdate(team: t, fields: f)
        case 11: return .teamMuteAll(team: try r.id(), muted: try r.bool())
        case 12: return .teamDismiss(team: try r.id())
        case 13: return .teamTransferOwner(team: try r.id(), target: try r.id(), leave: try r.bool())
        case 14: return .teamAddManagers(team: try r.id(), targets: try r.ids())
        case 15: return .teamRemoveManagers(team: try r.id(), targets: try r.ids())
        case 16:
            let t = try r.id()
            let target = try r.id()
            let muted = try r.bool()
            let until = try r.zigzag()
            return .teamMuteMember(team: t, target: target, muted: muted, until: until == -1 ? nil : until)
        case 17: return .memberSetNotify(team: try r.id(), state: try value(&r))
        case 32:
            var m = MessageSend(to: try conversation(&r), messageId: try r.id(), content: try json(&r))
            let flags = try r.u8()
            m.needReceipt = flags & 1 != 0
            m.disableNotification = flags & 2 != 0
            m.disableUpdateLastMessage = flags & 4 != 0
            m.isCounted = flags & 8 != 0
            m.isPersisted = flags & 16 != 0
            m.isStatusMessage = flags & 32 != 0
            if flags & 64 != 0 { m.directedUserIds = try r.ids() }
            let n = try r.count()
            for _ in 0..<n { m.metadata.append((try r.string(), try r.string())) }
            m.mentions = try r.ids()
            return .messageSend(m)
        case 33:
            let to = try conversation(&r)
            let upTo = try r.varint()
            return .messageRead(to: to, upTo: upTo == 0 ? nil : upTo - 1)
        case 34: return .messageReceipt(to: try conversation(&r), messageIds: try r.ids())
        case 35: return .messageModify(messageId: try r.id(), content: try json(&r))
        case 36: return .clientLogin
        case 37: return .clientLogout
        case 64: return .channelCreate(channel: try r.id(), kind: try value(&r), ext: try r.optionalString())
        case 65: return .channelJoin(channel: try r.id())
        case 66:
            var i = ChannelInvite(channel: try r.id(), target: try r.id(), requestId: try r.id())
            i.offline = try r.bool()
            i.pushText = try r.optionalString()
            return .channelInvite(i)
        case 67: return .channelCancelInvite(channel: try r.id(), target: try r.id(), requestId: try r.id())
        case 68: return .channelReject(channel: try r.id(), inviter: try r.id(), requestId: try r.id())
        case 69: return .channelAccept(channel: try r.id(), inviter: try r.id(), requestId: try r.id())
        case 70: return .channelLeave(channel: try r.id())
        case 71: return .channelClose(channel: try r.id())
        case 72: return .channelControl(channel: try r.id(), target: try r.optionalId(), data: try r.string())
        case 73: return .clockTick
        case 74: return .membersSync
        default: throw DecodeError("unknown op tag \(tag)")
        }
    }

    // MARK: Shared pieces

    static func conversation(_ c: Conversation, into w: inout ByteWriter) {
        w.u8(index(c.kind))
        w.string(c.id)
    }

    static func conversation(_ r: inout ByteReader) throws(DecodeError) -> Conversation {
        let kind: Conversation.Kind = try value(&r)
        return Conversation(kind, try r.id())
    }

    static func json(_ r: inout ByteReader) throws(DecodeError) -> JSONValue {
        let text = try r.string()
        do { return try JSONParser.parse(text) } catch {
            throw DecodeError("stored content is not JSON: \(error.message)")
        }
    }

    // MARK: Enums as their case index

    // Inlinable: the store's schema encodes the domain's enums with these, and an unspecialized generic
    // across the module boundary cost a tenth of a batch ingest.
    @inlinable
    public static func index<E: CaseIterable & Equatable>(_ v: E) -> UInt8 {
        UInt8(E.allCases.firstIndex(of: v).map { E.allCases.distance(from: E.allCases.startIndex, to: $0) } ?? 0)
    }

    @inlinable
    public static func value<E: CaseIterable>(_ r: inout ByteReader) throws(DecodeError) -> E {
        let i = Int(try r.u8())
        guard i < E.allCases.count else { throw DecodeError("enum index \(i) out of range for \(E.self)") }
        return E.allCases[E.allCases.index(E.allCases.startIndex, offsetBy: i)]
    }

    static func optionalValue<E: CaseIterable>(_ r: inout ByteReader) throws(DecodeError) -> E? {
        let i = Int(try r.u8())
        if i == 0 { return nil }
        guard i - 1 < E.allCases.count else { throw DecodeError("enum index \(i) out of range for \(E.self)") }
        return E.allCases[E.allCases.index(E.allCases.startIndex, offsetBy: i - 1)]
    }
}
