/// One line of `teamlog ingest` output (SPEC §4), in log order.
public enum Record: Sendable, Equatable {
    /// A line that was not stored.
    case rejected(line: Int, opId: Id?, code: RejectionCode, reason: String)
    /// A line whose `opId` was already accepted, with the original seq.
    case duplicate(line: Int, opId: Id, seq: UInt64)
    /// An accepted op.
    case event(line: Int, seq: UInt64, ts: Int64, op: String)
    /// What applying an event produced.
    case output(Output)

    /// Every `kind` a record can have (a NATS partition publishes each on a subject of its own).
    public static let kinds = ["rejected", "duplicate", "event", "tip", "delivery", "notice", "signal", "login"]

    /// The record's `kind` field: one of `kinds`.
    public var kind: String {
        switch self {
        case .rejected: "rejected"
        case .duplicate: "duplicate"
        case .event: "event"
        case .output(.tip): "tip"
        case .output(.delivery): "delivery"
        case .output(.notice): "notice"
        case .output(.signal): "signal"
        case .output(.login): "login"
        }
    }

    /// The record as one line of JSON (no newline), keys in the SPEC's order.
    public func write(into w: inout JSONWriter) {
        switch self {
        case .rejected(let line, let opId, let code, let reason):
            w.writeRaw("{\"kind\":\"rejected\",\"line\":")
            w.writeInt(Int64(line))
            w.writeRaw(",\"opId\":")
            if let opId { w.writeString(opId) } else { w.writeRaw("null") }
            w.writeRaw(",\"code\":")
            w.writeString(code.rawValue)
            w.writeRaw(",\"reason\":")
            w.writeString(reason)
            w.writeRaw("}")
        case .duplicate(let line, let opId, let seq):
            w.writeRaw("{\"kind\":\"duplicate\",\"line\":")
            w.writeInt(Int64(line))
            w.writeRaw(",\"opId\":")
            w.writeString(opId)
            w.writeRaw(",\"seq\":")
            w.writeInt(Int64(seq))
            w.writeRaw("}")
        case .event(let line, let seq, let ts, let op):
            w.writeRaw("{\"kind\":\"event\",\"line\":")
            w.writeInt(Int64(line))
            w.writeRaw(",\"seq\":")
            w.writeInt(Int64(seq))
            w.writeRaw(",\"ts\":")
            w.writeInt(ts)
            w.writeRaw(",\"op\":")
            w.writeString(op)
            w.writeRaw("}")
        case .output(.tip(let tip)):
            w.write(tip.json)
        case .output(.delivery(let d)):
            w.writeRaw("{\"kind\":\"delivery\",\"seq\":")
            w.writeInt(Int64(d.seq))
            w.writeRaw(",\"to\":")
            w.write(d.to.json)
            w.writeRaw(",\"messageId\":")
            w.writeString(d.messageId)
            // Three walks of the lists, none copied (a team's are bitsets over its roster).
            w.writeRaw(",\"receivers\":")
            Self.writeReceivers(of: d, into: &w) { _ in true }
            w.writeRaw(",\"alerted\":")
            Self.writeReceivers(of: d, into: &w) { $0 == nil }
            w.writeRaw(",\"silenced\":{")
            var first = true
            d.forEachReceiver { user, reason in
                guard let reason else { return }
                if !first { w.writeRaw(",") }
                first = false
                w.writeString(user)
                w.writeRaw(":")
                w.writeString(reason.rawValue)
            }
            w.writeRaw("}}")
        case .output(.signal(let sig)):
            w.write(sig.json)
        case .output(.login(let login)):
            w.write(
                .object([
                    ("kind", .string("login")), ("seq", .int(Int64(login.seq))), ("user", .string(login.user)),
                    ("device", .string(login.device)), ("offline", .array(login.offline.map(\.json))),
                    ("channels", .array(login.channels.map(\.summaryJSON))),
                ]))
        case .output(.notice(let n)):
            w.write(
                .object([
                    ("kind", .string("notice")), ("seq", .int(Int64(n.seq))), ("to", .string(n.to)),
                    ("type", .string(n.type.rawValue)), ("team", .string(n.team)), ("from", .string(n.from)),
                ]))
        }
    }

    /// Writes the receivers of `d` that `include` picks (by their silence reason) as a JSON array of ids.
    private static func writeReceivers(
        of d: Delivery, into w: inout JSONWriter, where include: (SilenceReason?) -> Bool
    ) {
        w.writeRaw("[")
        var first = true
        d.forEachReceiver { user, reason in
            guard include(reason) else { return }
            if !first { w.writeRaw(",") }
            first = false
            w.writeString(user)
        }
        w.writeRaw("]")
    }

    /// The record as a JSON line (no newline).
    public var jsonLine: String {
        var w = JSONWriter()
        write(into: &w)
        return w.string
    }
}

extension Tip {
    /// `{"kind":"tip","seq","team","messageId","nim","zim","text"}`.
    public var json: JSONValue {
        .object([
            ("kind", .string("tip")), ("seq", .int(Int64(seq))), ("team", .string(team)),
            ("messageId", .string(messageId)), ("nim", nim?.json ?? .null), ("zim", zim?.json ?? .null),
            ("text", .string(text)),
        ])
    }
}

extension NIMTipView {
    /// NIM's field names: `operationType`, `sourceID`, `targetIDs`, and `attachment` for updates.
    public var json: JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("operationType", .string(operationType)), ("sourceID", .string(sourceID)),
            ("targetIDs", .array(targetIDs.map { .string($0) })),
        ]
        if let attachment { pairs.append(("attachment", .object(attachment.map { ($0.tag, .string($0.value)) }))) }
        return .object(pairs)
    }
}

extension ZIMTipView {
    /// ZIM's names: `event` with `eventValue`, the operated and target users, and `changeInfo` when set.
    public var json: JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("event", .string(event)), ("eventValue", .int(Int64(eventValue))),
            ("operatedUserID", .string(operatedUserID)), ("targetUserIDs", .array(targetUserIDs.map { .string($0) })),
        ]
        if let changeInfo { pairs.append(("changeInfo", changeInfo.json)) }
        return .object(pairs)
    }
}

extension ZIMChangeInfo {
    /// Only the fields its type names, as ZIM assigns them.
    public var json: JSONValue {
        var pairs: [(String, JSONValue)] = [("type", .string(type)), ("typeValue", .int(Int64(typeValue)))]
        if let groupDataFlag { pairs.append(("groupDataFlag", .int(Int64(groupDataFlag)))) }
        if let groupName { pairs.append(("groupName", .string(groupName))) }
        if let groupNotice { pairs.append(("groupNotice", .string(groupNotice))) }
        if let groupAvatarUrl { pairs.append(("groupAvatarUrl", .string(groupAvatarUrl))) }
        if let groupMuted {
            pairs.append(
                (
                    "groupMutedInfo",
                    .object([
                        ("mode", .string(groupMuted ? "all" : "none")), ("expiredTime", .int(groupMuted ? -1 : 0)),
                    ])
                ))
        }
        if let memberRole { pairs.append(("memberRole", .int(Int64(memberRole)))) }
        if let muteExpiredTime { pairs.append(("muteExpiredTime", .int(muteExpiredTime))) }
        return .object(pairs)
    }
}

extension Signal {
    /// `{"kind":"signal","seq","channel","event","to","devices","stored","sync"}`, then `members` for
    /// `membersSync`, and `from` / `requestId` when known.
    public var json: JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("kind", .string("signal")), ("seq", .int(Int64(seq))), ("channel", .string(channel)),
            ("event", .string(event.rawValue)), ("to", .string(to)), ("devices", .array(devices.map { .string($0) })),
            ("stored", .bool(stored)), ("sync", .bool(sync)),
        ]
        if let members { pairs.append(("members", .array(members.map { .string($0) }))) }
        if !from.isEmpty { pairs.append(("from", .string(from))) }
        if let requestId { pairs.append(("requestId", .string(requestId))) }
        return .object(pairs)
    }
}

extension StoredSignal {
    /// A stored notification as delivered at login.
    public var json: JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("seq", .int(Int64(seq))), ("channel", .string(channel)), ("event", .string(event.rawValue)),
            ("from", .string(from)),
        ]
        if let requestId { pairs.append(("requestId", .string(requestId))) }
        if let pushText { pairs.append(("pushText", .string(pushText))) }
        return .object(pairs)
    }
}

extension ChannelState {
    /// The channel as the login sync lists it: id, kind and members.
    public var summaryJSON: JSONValue {
        .object([
            ("channel", .string(id)), ("kind", .string(kind.rawValue)),
            ("members", .array(memberIds.map { .string($0) })),
        ])
    }

    /// `teamlog channel` (SPEC §5).
    public var json: JSONValue {
        .object([
            ("channel", .string(id)), ("kind", .string(kind.rawValue)), ("closed", .bool(closed)),
            ("members", .array(memberIds.map { .string($0) })),
            (
                "pendingInvites",
                .array(
                    invites.map { i in
                        .object([
                            ("target", .string(i.target)), ("inviter", .string(i.inviter)),
                            ("requestId", .string(i.requestId)),
                        ])
                    })
            ),
        ])
    }
}
