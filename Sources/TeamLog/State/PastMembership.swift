/// One ended membership of a user in a team: from the seq of their join to the seq of their removal, and
/// the slot they held meanwhile.
///
/// The roster as of an earlier seq is the current members who joined before it plus the ended
/// memberships that span it: what a receipt is checked against (was the user a receiver of a message?)
/// and what the `receipts` query lists unread users from, in the slot order of the message's fan-out.
public struct PastMembership: Sendable, Equatable {
    /// Seq of the join (the user was a member after it).
    public var joinSeq: UInt64
    /// Seq of the removal (leave, kick, dismiss, ownership transfer with leave): no longer a member from it.
    public var leaveSeq: UInt64
    /// The slot held.
    public var slot: Int32

    public init(joinSeq: UInt64, leaveSeq: UInt64, slot: Int32) {
        self.joinSeq = joinSeq
        self.leaveSeq = leaveSeq
        self.slot = slot
    }

    /// Whether the user was a member when the event at `seq` was applied.
    public func spans(_ seq: UInt64) -> Bool { joinSeq < seq && seq < leaveSeq }
}
