/// The input form of an op: what `OpParser` reads back to an equal op. Used to export the log as JSON
/// Lines that `teamlog ingest` accepts again, and by workload generators.
extension Op {
    /// The op as a JSON object with the SPEC field names.
    public var json: JSONValue {
        if case .membersSync = body {
            // No input op is a system sync: a `clock.tick` at its time runs the same sync at the same seq.
            return .object([("op", .string("clock.tick")), ("actor", .string("system")), ("ts", .int(ts ?? 0))])
        }
        var pairs: [(String, JSONValue)] = [("op", .string(name)), ("actor", .string(actor))]
        if let ts { pairs.append(("ts", .int(ts))) }
        if let opId { pairs.append(("opId", .string(opId))) }
        if let device { pairs.append(("device", .string(device))) }
        pairs += body.jsonFields
        return .object(pairs)
    }

    /// One JSON line (no newline).
    public var jsonLine: String { json.jsonString }
}

extension OpBody {
    private static func ids(_ list: [Id]) -> JSONValue { .array(list.map { .string($0) }) }

    /// The op-specific fields.
    var jsonFields: [(String, JSONValue)] {
        switch self {
        case .teamCreate(let c):
            var pairs: [(String, JSONValue)] = [("team", .string(c.team)), ("kind", .string(c.kind.rawValue))]
            if !c.name.isEmpty { pairs.append(("name", .string(c.name))) }
            if !c.members.isEmpty { pairs.append(("members", Self.ids(c.members))) }
            if !c.intro.isEmpty { pairs.append(("intro", .string(c.intro))) }
            if !c.announcement.isEmpty { pairs.append(("announcement", .string(c.announcement))) }
            if !c.avatar.isEmpty { pairs.append(("avatar", .string(c.avatar))) }
            pairs += [
                ("joinMode", .string(c.joinMode.rawValue)), ("inviteMode", .string(c.inviteMode.rawValue)),
                ("beInviteMode", .string(c.beInviteMode.rawValue)),
                ("updateInfoMode", .string(c.updateInfoMode.rawValue)), ("muted", .bool(c.muted)),
            ]
            return pairs
        case .teamInvite(let t, let targets): return [("team", .string(t)), ("targets", Self.ids(targets))]
        case .teamAcceptInvite(let t, let inviter): return [("team", .string(t)), ("inviter", .string(inviter))]
        case .teamRejectInvite(let t, let inviter): return [("team", .string(t)), ("inviter", .string(inviter))]
        case .teamApply(let t, let message):
            return [("team", .string(t))] + (message.map { [("message", JSONValue.string($0))] } ?? [])
        case .teamApproveApply(let t, let a): return [("team", .string(t)), ("applicant", .string(a))]
        case .teamRejectApply(let t, let a): return [("team", .string(t)), ("applicant", .string(a))]
        case .teamKick(let t, let targets): return [("team", .string(t)), ("targets", Self.ids(targets))]
        case .teamLeave(let t): return [("team", .string(t))]
        case .teamUpdate(let t, let f):
            return [("team", .string(t)), ("fields", .object(f.changedTags.map { ($0.tag, .string($0.value)) }))]
        case .teamMuteAll(let t, let muted): return [("team", .string(t)), ("muted", .bool(muted))]
        case .teamDismiss(let t): return [("team", .string(t))]
        case .teamTransferOwner(let t, let target, let leave):
            return [("team", .string(t)), ("target", .string(target)), ("leave", .bool(leave))]
        case .teamAddManagers(let t, let targets): return [("team", .string(t)), ("targets", Self.ids(targets))]
        case .teamRemoveManagers(let t, let targets): return [("team", .string(t)), ("targets", Self.ids(targets))]
        case .teamMuteMember(let t, let target, let muted, let until):
            var pairs: [(String, JSONValue)] = [
                ("team", .string(t)), ("target", .string(target)), ("muted", .bool(muted)),
            ]
            if let until { pairs.append(("until", .int(until))) }
            return pairs
        case .memberSetNotify(let t, let state): return [("team", .string(t)), ("state", .string(state.rawValue))]
        case .messageSend(let m):
            var pairs: [(String, JSONValue)] = [
                ("to", m.to.json), ("messageId", .string(m.messageId)), ("content", m.content),
            ]
            if m.needReceipt { pairs.append(("needReceipt", .bool(true))) }
            if let d = m.directedUserIds { pairs.append(("directedUserIds", Self.ids(d))) }
            if m.disableNotification { pairs.append(("disableNotification", .bool(true))) }
            if m.disableUpdateLastMessage { pairs.append(("disableUpdateLastMessage", .bool(true))) }
            if !m.isPersisted { pairs.append(("isPersisted", .bool(false))) }
            if !m.isCounted && m.isPersisted && !m.isStatusMessage { pairs.append(("isCounted", .bool(false))) }
            if m.isStatusMessage { pairs.append(("isStatusMessage", .bool(true))) }
            if !m.metadata.isEmpty {
                pairs.append(("metadata", .object(m.metadata.map { ($0.key, .string($0.value)) })))
            }
            if !m.mentions.isEmpty { pairs.append(("mentions", Self.ids(m.mentions))) }
            return pairs
        case .messageRead(let to, let upTo):
            return [("to", to.json)] + (upTo.map { [("upTo", JSONValue.int(Int64($0)))] } ?? [])
        case .messageReceipt(let to, let ids): return [("to", to.json), ("messageIds", Self.ids(ids))]
        case .messageModify(let id, let content): return [("messageId", .string(id)), ("content", content)]
        case .clientLogin, .clientLogout, .clockTick, .membersSync: return []
        case .channelCreate(let c, let kind, let ext):
            return [("channel", .string(c)), ("kind", .string(kind.rawValue))]
                + (ext.map { [("ext", JSONValue.string($0))] } ?? [])
        case .channelJoin(let c), .channelLeave(let c), .channelClose(let c): return [("channel", .string(c))]
        case .channelInvite(let i):
            var pairs: [(String, JSONValue)] = [
                ("channel", .string(i.channel)), ("target", .string(i.target)),
                ("requestId", .string(i.requestId)), ("offline", .bool(i.offline)),
            ]
            if let text = i.pushText { pairs.append(("pushText", .string(text))) }
            return pairs
        case .channelCancelInvite(let c, let target, let r):
            return [("channel", .string(c)), ("target", .string(target)), ("requestId", .string(r))]
        case .channelReject(let c, let inviter, let r), .channelAccept(let c, let inviter, let r):
            return [("channel", .string(c)), ("inviter", .string(inviter)), ("requestId", .string(r))]
        case .channelControl(let c, let target, let data):
            return [("channel", .string(c))] + (target.map { [("target", JSONValue.string($0))] } ?? []) + [
                ("data", .string(data))
            ]
        }
    }
}

extension Conversation {
    /// `{"type":…,"id":…}`.
    public var json: JSONValue { .object([("type", .string(kind.rawValue)), ("id", .string(id))]) }
}
