/// A signaling notification to one user (SPEC §4 `signal`).
public struct Signal: Sendable, Equatable {
    public var seq: UInt64
    public var channel: Id
    public var event: SignalEvent
    public var to: Id
    /// The user's online devices it went to (for a multi-device sync: the actor's other devices).
    public var devices: [Id]
    /// Stored for delivery at the user's next login.
    public var stored: Bool
    /// A multi-device sync of the actor's own `accept`/`reject`.
    public var sync: Bool
    /// Who caused it.
    public var from: Id
    public var requestId: Id?
    /// For `membersSync`: the member list after the removal.
    public var members: [Id]?
}

/// A login: the stored offline notifications delivered once, and the channels the user is still in.
public struct Login: Sendable, Equatable {
    public var seq: UInt64
    public var user: Id
    public var device: Id
    public var offline: [StoredSignal]
    public var channels: [ChannelState]
}
