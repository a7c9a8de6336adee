/// A personal system notification (pending invitations and applications and their rejections): not a tip.
public struct Notice: Sendable, Equatable {
    /// The kinds of SPEC §4.
    public enum Kind: String, Sendable {
        case teamInvite, teamInviteRejected, teamApply, teamApplyRejected
    }

    public var seq: UInt64
    public var to: Id
    public var type: Kind
    public var team: Id
    public var from: Id
}
