/// Limits and timings of a processor; part of the store, so a replay uses the same values.
public struct Config: Sendable, Equatable {
    /// Most members of a `team`.
    public var teamMaxMembers: Int = 2_000
    /// Most members of a `superTeam`.
    public var superTeamMaxMembers: Int = 200_000
    /// Members sync: a channel member with no online device for this long (ms) is removed.
    public var membersSyncTimeoutMs: Int64 = 120_000

    public init() {}

    /// The member limit of a team kind.
    public func maxMembers(_ kind: TeamKind) -> Int {
        kind == .team ? teamMaxMembers : superTeamMaxMembers
    }
}
