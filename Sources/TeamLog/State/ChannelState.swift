/// A signaling channel (a call): its members, pending invitations and whether it is closed.
public struct ChannelState: Sendable, Equatable {
    public var id: Id
    public var kind: ChannelKind
    public var ext: String?
    public var creator: Id
    public var createdSeq: UInt64
    /// Closed channels reject every later op with `closed`.
    public var closed = false
    /// Members in join order, with the event time they joined (members sync counts from there).
    public var members: [(user: Id, joinedTs: Int64)] = []
    /// Invitations not yet accepted, rejected or cancelled, in invitation order.
    public var invites: [PendingInvite] = []

    public init(id: Id, kind: ChannelKind, ext: String?, creator: Id, createdSeq: UInt64) {
        self.id = id
        self.kind = kind
        self.ext = ext
        self.creator = creator
        self.createdSeq = createdSeq
    }

    public func isMember(_ user: Id) -> Bool { members.contains { $0.user == user } }

    public var memberIds: [Id] { members.map(\.user) }

    public func invite(target: Id, inviter: Id, requestId: Id) -> PendingInvite? {
        invites.first { $0.target == target && $0.inviter == inviter && $0.requestId == requestId }
    }

    public static func == (a: ChannelState, b: ChannelState) -> Bool {
        a.id == b.id && a.kind == b.kind && a.ext == b.ext && a.creator == b.creator && a.createdSeq == b.createdSeq
            && a.closed == b.closed && a.members.map(\.user) == b.members.map(\.user)
            && a.members.map(\.joinedTs) == b.members.map(\.joinedTs) && a.invites == b.invites
    }
}

/// An invitation waiting for an answer.
public struct PendingInvite: Sendable, Equatable {
    public var target: Id
    public var inviter: Id
    public var requestId: Id
    /// The inviter asked to store it for an offline target (and its cancellation likewise).
    public var offline: Bool
    public var pushText: String?

    public init(target: Id, inviter: Id, requestId: Id, offline: Bool, pushText: String?) {
        self.target = target
        self.inviter = inviter
        self.requestId = requestId
        self.offline = offline
        self.pushText = pushText
    }
}

/// A notification stored for an offline user, delivered once at their next login.
public struct StoredSignal: Sendable, Equatable {
    public var seq: UInt64
    public var channel: Id
    public var event: SignalEvent
    public var from: Id
    public var requestId: Id?
    public var pushText: String?

    public init(seq: UInt64, channel: Id, event: SignalEvent, from: Id, requestId: Id?, pushText: String?) {
        self.seq = seq
        self.channel = channel
        self.event = event
        self.from = from
        self.requestId = requestId
        self.pushText = pushText
    }
}

/// A user's online devices and when they last went offline (members sync reads it).
public struct Presence: Sendable, Equatable {
    /// Online devices, sorted.
    public var devices: [Id] = []
    /// Event time the last device went offline, if the user was ever online and is offline now.
    public var offlineSince: Int64?

    public init() {}
}
