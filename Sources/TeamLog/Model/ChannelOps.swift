/// A signaling channel's kind.
public enum ChannelKind: String, Sendable, Hashable, CaseIterable {
    case audio, video, custom
}

/// Notification events, named as NIM's `NIMSignalingEventType`, plus the periodic members sync.
public enum SignalEvent: String, Sendable, Hashable, CaseIterable {
    case close, join, invite, cancelInvite, reject, accept, leave, control, membersSync
}

/// The fields of `channel.invite`.
public struct ChannelInvite: Sendable, Equatable {
    public var channel: Id
    public var target: Id
    public var requestId: Id
    /// Store the invitation for an offline target until it logs in.
    public var offline: Bool = false
    public var pushText: String?

    public init(channel: Id, target: Id, requestId: Id) {
        self.channel = channel
        self.target = target
        self.requestId = requestId
    }
}
