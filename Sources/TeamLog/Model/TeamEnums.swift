/// A member's role; exactly one `owner` while a team exists.
public enum Role: String, Sendable, Hashable, CaseIterable {
    case owner, manager, normal

    /// Owner or manager: the roles that administer a team.
    public var isAdmin: Bool { self != .normal }
}

/// A member's alert mode for a team (NIM `NIMTeamNotifyState`); it never changes receiving or unread.
public enum NotifyState: String, Sendable, Hashable, CaseIterable {
    case all, managerOnly, none
}

/// `team` (up to 2,000 members) or `superTeam` (up to 200,000).
public enum TeamKind: String, Sendable, Hashable, CaseIterable {
    case team, superTeam
}

/// Who may join without an invitation.
public enum JoinMode: String, Sendable, Hashable, CaseIterable {
    case free, apply, `private`
}

/// Who may invite.
public enum InviteMode: String, Sendable, Hashable, CaseIterable {
    case manager, all
}

/// Whether invitees must consent.
public enum BeInviteMode: String, Sendable, Hashable, CaseIterable {
    case needConsent, noConsent
}

/// Who may update the team's information fields.
public enum UpdateInfoMode: String, Sendable, Hashable, CaseIterable {
    case manager, all
}
