/// A signaling notification to one user (SPEC §4 `signal`).
public struct Signal: Sendable, Equatable {
    public var seq: UInt64
    public var channel: String
    public var event: SignalEvent
    public var to: String
    /// The user's online devices it went to (for a multi-device sync: the actor's other devices).
    public var devices: [String]
    /// Stored for delivery at the user's next login.
    public var stored: Bool
    /// A multi-device sync of the actor's own `accept`/`reject`.
    public var sync: Bool
    /// Who caused it.
    public var from: String
    public var requestId: String?
    /// For `membersSync`: the member list after the removal.
    public var members: [String]?
}

/// A login: the stored offline notifications delivered once, and the channels the user is still in.
public struct Login: Sendable, Equatable {
    public var seq: UInt64
    public var user: String
    public var device: String
    public var offline: [StoredSignal]
    public var channels: [ChannelState]
}
