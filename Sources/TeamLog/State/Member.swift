/// One member of a team, as the team projection stores it.
public struct Member: Sendable, Equatable {
    // Stored in this order so the one-byte fields share padding (48 bytes a member, not 56).
    /// The seq of the event that made them a member (messages before it never count for them).
    public var joinSeq: UInt64
    /// Member mute: `nil` not muted, `-1` muted with no end, otherwise muted until this event time (ms).
    public var mutedUntil: Int64?
    /// Dense index of the member inside its team, reused after leaves (lowest free first).
    public var slot: Int32
    /// The user id.
    public var user: Id
    /// Owner, manager or normal.
    public var role: Role
    /// The member's alert mode for this team.
    public var notify: NotifyState

    public init(
        user: Id, role: Role, notify: NotifyState = .all, mutedUntil: Int64? = nil, joinSeq: UInt64, slot: Int32
    ) {
        self.user = user
        self.role = role
        self.notify = notify
        self.mutedUntil = mutedUntil
        self.joinSeq = joinSeq
        self.slot = slot
    }

    /// Whether the member mute is in force at event time `ts` (a mute ends at its `until`).
    public func isMuted(at ts: Int64) -> Bool {
        guard let mutedUntil else { return false }
        return mutedUntil == -1 || ts < mutedUntil
    }
}
