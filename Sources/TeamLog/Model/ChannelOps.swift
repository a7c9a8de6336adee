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
    public var channel: String
    public var target: String
    public var requestId: String
    /// Store the invitation for an offline target until it logs in.
    public var offline: Bool = false
    public var pushText: String?

    public init(channel: String, target: String, requestId: String) {
        self.channel = channel
        self.target = target
        self.requestId = requestId
    }
}
