/// One input operation, validated for shape (not yet against state).
public struct Op: Sendable, Equatable {
    /// The user performing it.
    public var actor: String
    /// Event time in ms, when the input gave one.
    public var ts: Int64?
    /// Idempotency key.
    public var opId: String?
    /// The actor's device that performed the op.
    public var device: String?
    /// What to do.
    public var body: OpBody

    public init(actor: String, ts: Int64? = nil, opId: String? = nil, device: String? = nil, body: OpBody) {
        self.actor = actor
        self.ts = ts
        self.opId = opId
        self.device = device
        self.body = body
    }

    /// The op name as written in the input (`team.create`, …).
    public var name: String { body.name }
}

/// The fields of `team.create`.
public struct TeamCreate: Sendable, Equatable {
    public var team: String
    public var kind: TeamKind = .team
    public var name: String = ""
    public var members: [String] = []
    public var intro: String = ""
    public var announcement: String = ""
    public var avatar: String = ""
    public var joinMode: JoinMode = .apply
    public var inviteMode: InviteMode = .manager
    public var beInviteMode: BeInviteMode = .noConsent
    public var updateInfoMode: UpdateInfoMode = .manager
    public var muted: Bool = false

    public init(team: String) { self.team = team }
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
    case teamInvite(team: String, targets: [String])
    case teamAcceptInvite(team: String, inviter: String)
    case teamRejectInvite(team: String, inviter: String)
    case teamApply(team: String, message: String?)
    case teamApproveApply(team: String, applicant: String)
    case teamRejectApply(team: String, applicant: String)
    case teamKick(team: String, targets: [String])
    case teamLeave(team: String)
    case teamUpdate(team: String, fields: TeamFields)
    case teamMuteAll(team: String, muted: Bool)
    case teamDismiss(team: String)
    case teamTransferOwner(team: String, target: String, leave: Bool)
    case teamAddManagers(team: String, targets: [String])
    case teamRemoveManagers(team: String, targets: [String])
    case teamMuteMember(team: String, target: String, muted: Bool, until: Int64?)
    case memberSetNotify(team: String, state: NotifyState)
    case messageSend(MessageSend)
    case messageRead(to: Conversation, upTo: UInt64?)
    case messageReceipt(to: Conversation, messageIds: [String])
    case messageModify(messageId: String, content: JSONValue)
    /// The op's `device` comes online.
    case clientLogin
    /// The op's `device` goes offline.
    case clientLogout
    case channelCreate(channel: String, kind: ChannelKind, ext: String?)
    case channelJoin(channel: String)
    case channelInvite(ChannelInvite)
    case channelCancelInvite(channel: String, target: String, requestId: String)
    case channelReject(channel: String, inviter: String, requestId: String)
    case channelAccept(channel: String, inviter: String, requestId: String)
    case channelLeave(channel: String)
    case channelClose(channel: String)
    case channelControl(channel: String, target: String?, data: String)
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
    public var team: String? {
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
    public var channel: String? {
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
