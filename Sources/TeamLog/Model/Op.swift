/// One input operation, validated for shape (not yet against state).
public struct Op: Sendable, Equatable {
    /// The user performing it.
    public var actor: Id
    /// Event time in ms, when the input gave one.
    public var ts: Int64?
    /// Idempotency key.
    public var opId: Id?
    /// The actor's device that performed the op.
    public var device: Id?
    /// What to do.
    public var body: OpBody

    public init(actor: Id, ts: Int64? = nil, opId: Id? = nil, device: Id? = nil, body: OpBody) {
        self.actor = actor
        self.ts = ts
        self.opId = opId
        self.device = device
        self.body = body
    }

    /// The op name as written in the input (`team.create`, …).
    public var name: String { body.name }

    /// A `message.read` whose `upTo` names a seq: a position in its log's numbering, which another log
    /// made from it (a partial export ingested elsewhere, a re-partitioned deployment) does not share.
    public var readsUpToASeq: Bool {
        if case .messageRead(_, let upTo?) = body { return upTo > 0 }
        return false
    }
}

/// The fields of `team.create`.
public struct TeamCreate: Sendable, Equatable {
    public var team: Id
    public var kind: TeamKind = .team
    public var name: String = ""
    public var members: [Id] = []
    public var intro: String = ""
    public var announcement: String = ""
    public var avatar: String = ""
    public var joinMode: JoinMode = .apply
    public var inviteMode: InviteMode = .manager
    public var beInviteMode: BeInviteMode = .noConsent
    public var updateInfoMode: UpdateInfoMode = .manager
    public var muted: Bool = false

    public init(team: Id) { self.team = team }
}

/// The fields `team.update` may change; `nil` means unchanged. Order of the stored properties is the
/// order tags are reported in tips.
public struct TeamFields: Sendable, Equatable {
    public var name: String?
    public var intro: String?
    public var announcement: String?
    public var avatar: String?
    public var joinMode: JoinMode?
    public var inviteMode: InviteMode?
    public var beInviteMode: BeInviteMode?
    public var updateInfoMode: UpdateInfoMode?
    public var ext: String?

    public init() {}

    /// True when no field is set.
    public var isEmpty: Bool { changedTags.isEmpty }

    /// True when a mode field (owner/manager only) is set.
    public var touchesModes: Bool {
        joinMode != nil || inviteMode != nil || beInviteMode != nil || updateInfoMode != nil
    }

    /// The changed tags with their new values as text, in a fixed order.
    public var changedTags: [(tag: String, value: String)] {
        var out: [(String, String)] = []
        if let name { out.append(("name", name)) }
        if let intro { out.append(("intro", intro)) }
        if let announcement { out.append(("announcement", announcement)) }
        if let avatar { out.append(("avatar", avatar)) }
        if let joinMode { out.append(("joinMode", joinMode.rawValue)) }
        if let inviteMode { out.append(("inviteMode", inviteMode.rawValue)) }
        if let beInviteMode { out.append(("beInviteMode", beInviteMode.rawValue)) }
        if let updateInfoMode { out.append(("updateInfoMode", updateInfoMode.rawValue)) }
        if let ext { out.append(("ext", ext)) }
        return out
    }
}

/// Every operation of SPEC §1 that teamlog accepts.
public enum OpBody: Sendable, Equatable {
    case teamCreate(TeamCreate)
    case teamInvite(team: Id, targets: [Id])
    case teamAcceptInvite(team: Id, inviter: Id)
    case teamRejectInvite(team: Id, inviter: Id)
    case teamApply(team: Id, message: String?)
    case teamApproveApply(team: Id, applicant: Id)
    case teamRejectApply(team: Id, applicant: Id)
    case teamKick(team: Id, targets: [Id])
    case teamLeave(team: Id)
    case teamUpdate(team: Id, fields: TeamFields)
    case teamMuteAll(team: Id, muted: Bool)
    case teamDismiss(team: Id)
    case teamTransferOwner(team: Id, target: Id, leave: Bool)
    case teamAddManagers(team: Id, targets: [Id])
    case teamRemoveManagers(team: Id, targets: [Id])
    case teamMuteMember(team: Id, target: Id, muted: Bool, until: Int64?)
    case memberSetNotify(team: Id, state: NotifyState)
    case messageSend(MessageSend)
    case messageRead(to: Conversation, upTo: UInt64?)
    case messageReceipt(to: Conversation, messageIds: [Id])
    case messageModify(messageId: Id, content: JSONValue)
    /// The op's `device` comes online.
    case clientLogin
    /// The op's `device` goes offline.
    case clientLogout
    case channelCreate(channel: Id, kind: ChannelKind, ext: String?)
    case channelJoin(channel: Id)
    case channelInvite(ChannelInvite)
    case channelCancelInvite(channel: Id, target: Id, requestId: Id)
    case channelReject(channel: Id, inviter: Id, requestId: Id)
    case channelAccept(channel: Id, inviter: Id, requestId: Id)
    case channelLeave(channel: Id)
    case channelClose(channel: Id)
    case channelControl(channel: Id, target: Id?, data: String)
    /// Advances event time only (members sync).
    case clockTick
    /// The system's own event, never an input op: the members sync that came due when event time reached
    /// a deadline and the op that moved time was rejected (SPEC §1.3: a removal is stored once event
    /// time reaches it). Its actor is empty; applying it runs the sync and nothing else.
    case membersSync

    /// The op name as written in the input.
    public var name: String {
        switch self {
        case .teamCreate: "team.create"
        case .teamInvite: "team.invite"
        case .teamAcceptInvite: "team.acceptInvite"
        case .teamRejectInvite: "team.rejectInvite"
        case .teamApply: "team.apply"
        case .teamApproveApply: "team.approveApply"
        case .teamRejectApply: "team.rejectApply"
        case .teamKick: "team.kick"
        case .teamLeave: "team.leave"
        case .teamUpdate: "team.update"
        case .teamMuteAll: "team.muteAll"
        case .teamDismiss: "team.dismiss"
        case .teamTransferOwner: "team.transferOwner"
        case .teamAddManagers: "team.addManagers"
        case .teamRemoveManagers: "team.removeManagers"
        case .teamMuteMember: "team.muteMember"
        case .memberSetNotify: "member.setNotify"
        case .messageSend: "message.send"
        case .messageRead: "message.read"
        case .messageReceipt: "message.receipt"
        case .messageModify: "message.modify"
        case .clientLogin: "client.login"
        case .clientLogout: "client.logout"
        case .channelCreate: "channel.create"
        case .channelJoin: "channel.join"
        case .channelInvite: "channel.invite"
        case .channelCancelInvite: "channel.cancelInvite"
        case .channelReject: "channel.reject"
        case .channelAccept: "channel.accept"
        case .channelLeave: "channel.leave"
        case .channelClose: "channel.close"
        case .channelControl: "channel.control"
        case .clockTick: "clock.tick"
        case .membersSync: "membersSync"
        }
    }

    /// The team the op acts on, for team ops.
    public var team: Id? {
        switch self {
        case .teamCreate(let c): c.team
        case .teamInvite(let t, _), .teamAcceptInvite(let t, _), .teamRejectInvite(let t, _), .teamApply(let t, _),
            .teamApproveApply(let t, _), .teamRejectApply(let t, _), .teamKick(let t, _), .teamLeave(let t),
            .teamUpdate(let t, _), .teamMuteAll(let t, _), .teamDismiss(let t), .teamTransferOwner(let t, _, _),
            .teamAddManagers(let t, _), .teamRemoveManagers(let t, _), .teamMuteMember(let t, _, _, _),
            .memberSetNotify(let t, _):
            t
        case .messageSend(let m): m.to.kind == .p2p ? nil : m.to.id
        case .messageRead(let to, _), .messageReceipt(let to, _): to.kind == .p2p ? nil : to.id
        case .messageModify, .clientLogin, .clientLogout, .clockTick, .membersSync: nil
        case .channelCreate, .channelJoin, .channelInvite, .channelCancelInvite, .channelReject, .channelAccept,
            .channelLeave, .channelClose, .channelControl:
            nil
        }
    }

    /// The channel a signaling op acts on.
    public var channel: Id? {
        switch self {
        case .channelCreate(let c, _, _), .channelJoin(let c), .channelCancelInvite(let c, _, _),
            .channelReject(let c, _, _), .channelAccept(let c, _, _), .channelLeave(let c), .channelClose(let c),
            .channelControl(let c, _, _):
            c
        case .channelInvite(let i): i.channel
        default: nil
        }
    }
}
