import TeamLog
import TestSupport
import Testing

/// One table per op of SPEC §1.1: permitted and rejected cases with the exact code.
@Suite struct TeamRuleTests {
    static let small: Config = {
        var c = Config()
        c.teamMaxMembers = 5
        c.superTeamMaxMembers = 7
        return c
    }()

    static let needConsent =
        baseTeam + [
            op(
                "team.update", "own",
                ["team": "t1", "fields": ["beInviteMode": "needConsent"] as KeyValuePairs<String, Any>])
        ]
    static let freeJoin =
        baseTeam + [
            op("team.update", "own", ["team": "t1", "fields": ["joinMode": "free"] as KeyValuePairs<String, Any>])
        ]
    static let privateJoin =
        baseTeam + [
            op("team.update", "own", ["team": "t1", "fields": ["joinMode": "private"] as KeyValuePairs<String, Any>])
        ]
    static let inviteAll =
        baseTeam + [
            op("team.update", "own", ["team": "t1", "fields": ["inviteMode": "all"] as KeyValuePairs<String, Any>])
        ]
    static let updateAll =
        baseTeam + [
            op("team.update", "own", ["team": "t1", "fields": ["updateInfoMode": "all"] as KeyValuePairs<String, Any>])
        ]
    static let dismissed = baseTeam + [op("team.dismiss", "own", ["team": "t1"])]
    static let applied = baseTeam + [op("team.apply", "x", ["team": "t1", "message": "hi"])]
    static let invited = needConsent + [op("team.invite", "mgr", ["team": "t1", "targets": ["x"]])]

    static let create: [RuleCase] = [
        RuleCase("create a new team", [], op("team.create", "own", ["team": "t9", "members": ["a"]]), nil),
        RuleCase("create an existing id", baseTeam, op("team.create", "x", ["team": "t1"]), .teamExists),
        RuleCase("create over a dismissed id", dismissed, op("team.create", "x", ["team": "t1"]), .teamExists),
        RuleCase(
            "create with members over the team limit", [],
            op("team.create", "own", ["team": "t9", "members": ["a", "b", "c", "d", "e"]]), .teamFull, config: small),
        RuleCase(
            "create at the team limit", [], op("team.create", "own", ["team": "t9", "members": ["a", "b", "c", "d"]]),
            nil, config: small),
        RuleCase(
            "superTeam has its own limit", [],
            op("team.create", "own", ["team": "t9", "kind": "superTeam", "members": ["a", "b", "c", "d", "e", "f"]]),
            nil, config: small),
        RuleCase(
            "superTeam over its limit", [],
            op(
                "team.create", "own",
                ["team": "t9", "kind": "superTeam", "members": ["a", "b", "c", "d", "e", "f", "g"]]), .teamFull,
            config: small),
    ]

    static let invite: [RuleCase] = [
        RuleCase("owner invites", baseTeam, op("team.invite", "own", ["team": "t1", "targets": ["x"]]), nil),
        RuleCase("manager invites", baseTeam, op("team.invite", "mgr", ["team": "t1", "targets": ["x", "y"]]), nil),
        RuleCase(
            "normal member invites under inviteMode manager", baseTeam,
            op("team.invite", "a", ["team": "t1", "targets": ["x"]]), .notPermitted),
        RuleCase(
            "normal member invites under inviteMode all", inviteAll,
            op("team.invite", "a", ["team": "t1", "targets": ["x"]]), nil),
        RuleCase(
            "non-member invites", inviteAll, op("team.invite", "z", ["team": "t1", "targets": ["x"]]), .notMember),
        RuleCase(
            "invite an existing member", baseTeam, op("team.invite", "own", ["team": "t1", "targets": ["x", "a"]]),
            .alreadyMember),
        RuleCase(
            "invite to an unknown team", baseTeam, op("team.invite", "own", ["team": "nope", "targets": ["x"]]),
            .noSuchTeam),
        RuleCase(
            "invite to a dismissed team", dismissed, op("team.invite", "own", ["team": "t1", "targets": ["x"]]),
            .dismissed),
        RuleCase(
            "noConsent invite past the limit", baseTeam,
            op("team.invite", "own", ["team": "t1", "targets": ["x", "y"]]), .teamFull, config: small),
        RuleCase(
            "needConsent invite does not use room", needConsent,
            op("team.invite", "own", ["team": "t1", "targets": ["x", "y", "z"]]), nil, config: small),
        RuleCase(
            "invite with no targets", baseTeam, op("team.invite", "own", ["team": "t1", "targets": [String]()]),
            .badField),
    ]

    static let acceptReject: [RuleCase] = [
        RuleCase(
            "accept a pending invitation", invited, op("team.acceptInvite", "x", ["team": "t1", "inviter": "mgr"]), nil),
        RuleCase(
            "accept from the wrong inviter", invited, op("team.acceptInvite", "x", ["team": "t1", "inviter": "own"]),
            .noInvitation),
        RuleCase(
            "accept without invitation", needConsent, op("team.acceptInvite", "y", ["team": "t1", "inviter": "mgr"]),
            .noInvitation),
        RuleCase(
            "accept as a member", invited, op("team.acceptInvite", "a", ["team": "t1", "inviter": "mgr"]),
            .alreadyMember),
        RuleCase(
            "accept into a full team",
            invited + [
                op("team.invite", "own", ["team": "t1", "targets": ["y"]]),
                op("team.acceptInvite", "y", ["team": "t1", "inviter": "own"]),
            ], op("team.acceptInvite", "x", ["team": "t1", "inviter": "mgr"]), .teamFull, config: small),
        RuleCase(
            "reject a pending invitation", invited, op("team.rejectInvite", "x", ["team": "t1", "inviter": "mgr"]), nil),
        RuleCase(
            "reject without invitation", invited, op("team.rejectInvite", "y", ["team": "t1", "inviter": "mgr"]),
            .noInvitation),
        RuleCase(
            "accept after rejecting", invited + [op("team.rejectInvite", "x", ["team": "t1", "inviter": "mgr"])],
            op("team.acceptInvite", "x", ["team": "t1", "inviter": "mgr"]), .noInvitation),
    ]

    static let apply: [RuleCase] = [
        RuleCase("apply to a free team", freeJoin, op("team.apply", "x", ["team": "t1"]), nil),
        RuleCase("apply to an apply team", baseTeam, op("team.apply", "x", ["team": "t1", "message": "please"]), nil),
        RuleCase("apply to a private team", privateJoin, op("team.apply", "x", ["team": "t1"]), .notPermitted),
        RuleCase("apply as a member", freeJoin, op("team.apply", "a", ["team": "t1"]), .alreadyMember),
        RuleCase(
            "apply to a full free team", freeJoin + [op("team.apply", "x", ["team": "t1"])],
            op("team.apply", "y", ["team": "t1"]), .teamFull, config: small),
        RuleCase("owner approves", applied, op("team.approveApply", "own", ["team": "t1", "applicant": "x"]), nil),
        RuleCase("manager approves", applied, op("team.approveApply", "mgr", ["team": "t1", "applicant": "x"]), nil),
        RuleCase(
            "normal member approves", applied, op("team.approveApply", "a", ["team": "t1", "applicant": "x"]),
            .notPermitted),
        RuleCase(
            "non-member approves", applied, op("team.approveApply", "z", ["team": "t1", "applicant": "x"]), .notMember),
        RuleCase(
            "approve without application", applied, op("team.approveApply", "own", ["team": "t1", "applicant": "y"]),
            .noApplication),
        RuleCase(
            "approve into a full team", applied + [op("team.invite", "own", ["team": "t1", "targets": ["y"]])],
            op("team.approveApply", "own", ["team": "t1", "applicant": "x"]), .teamFull, config: small),
        RuleCase(
            "manager rejects an application", applied, op("team.rejectApply", "mgr", ["team": "t1", "applicant": "x"]),
            nil),
        RuleCase(
            "normal member rejects an application", applied,
            op("team.rejectApply", "a", ["team": "t1", "applicant": "x"]), .notPermitted),
        RuleCase(
            "reject without application", applied, op("team.rejectApply", "own", ["team": "t1", "applicant": "y"]),
            .noApplication),
        RuleCase(
            "approve after rejection", applied + [op("team.rejectApply", "own", ["team": "t1", "applicant": "x"])],
            op("team.approveApply", "own", ["team": "t1", "applicant": "x"]), .noApplication),
    ]

    static let kickLeave: [RuleCase] = [
        RuleCase("owner kicks a manager", baseTeam, op("team.kick", "own", ["team": "t1", "targets": ["mgr"]]), nil),
        RuleCase("owner kicks normals", baseTeam, op("team.kick", "own", ["team": "t1", "targets": ["a", "b"]]), nil),
        RuleCase("manager kicks a normal", baseTeam, op("team.kick", "mgr", ["team": "t1", "targets": ["a"]]), nil),
        RuleCase(
            "manager kicks the owner", baseTeam, op("team.kick", "mgr", ["team": "t1", "targets": ["own"]]),
            .notPermitted),
        RuleCase(
            "manager kicks a manager", baseTeam + [op("team.addManagers", "own", ["team": "t1", "targets": ["a"]])],
            op("team.kick", "mgr", ["team": "t1", "targets": ["b", "a"]]), .notPermitted),
        RuleCase("normal kicks", baseTeam, op("team.kick", "a", ["team": "t1", "targets": ["b"]]), .notPermitted),
        RuleCase(
            "owner kicks self", baseTeam, op("team.kick", "own", ["team": "t1", "targets": ["own"]]), .notPermitted),
        RuleCase(
            "kick a non-member", baseTeam, op("team.kick", "own", ["team": "t1", "targets": ["a", "zz"]]), .notMember),
        RuleCase("non-member kicks", baseTeam, op("team.kick", "zz", ["team": "t1", "targets": ["a"]]), .notMember),
        RuleCase("normal leaves", baseTeam, op("team.leave", "a", ["team": "t1"]), nil),
        RuleCase("manager leaves", baseTeam, op("team.leave", "mgr", ["team": "t1"]), nil),
        RuleCase("owner leaves", baseTeam, op("team.leave", "own", ["team": "t1"]), .ownerCannotLeave),
        RuleCase("non-member leaves", baseTeam, op("team.leave", "zz", ["team": "t1"]), .notMember),
        RuleCase("leave a dismissed team", dismissed, op("team.leave", "a", ["team": "t1"]), .dismissed),
    ]

    static let update: [RuleCase] = [
        RuleCase(
            "manager renames", baseTeam,
            op("team.update", "mgr", ["team": "t1", "fields": ["name": "New"] as KeyValuePairs<String, Any>]), nil),
        RuleCase(
            "normal renames under updateInfoMode manager", baseTeam,
            op("team.update", "a", ["team": "t1", "fields": ["name": "New"] as KeyValuePairs<String, Any>]),
            .notPermitted),
        RuleCase(
            "normal renames under updateInfoMode all", updateAll,
            op(
                "team.update", "a",
                ["team": "t1", "fields": ["name": "New", "intro": "x"] as KeyValuePairs<String, Any>]), nil),
        RuleCase(
            "normal changes a mode under updateInfoMode all", updateAll,
            op("team.update", "a", ["team": "t1", "fields": ["joinMode": "free"] as KeyValuePairs<String, Any>]),
            .notPermitted),
        RuleCase(
            "manager changes a mode", baseTeam,
            op("team.update", "mgr", ["team": "t1", "fields": ["inviteMode": "all"] as KeyValuePairs<String, Any>]), nil
        ),
        RuleCase(
            "update with no fields", baseTeam,
            op("team.update", "own", ["team": "t1", "fields": [:] as KeyValuePairs<String, Any>]), .missingField),
        RuleCase(
            "update an unknown field", baseTeam,
            op("team.update", "own", ["team": "t1", "fields": ["owner": "a"] as KeyValuePairs<String, Any>]), .badField),
        RuleCase(
            "update with a bad mode value", baseTeam,
            op("team.update", "own", ["team": "t1", "fields": ["joinMode": "open"] as KeyValuePairs<String, Any>]),
            .badField),
        RuleCase(
            "non-member updates", updateAll,
            op("team.update", "zz", ["team": "t1", "fields": ["name": "x"] as KeyValuePairs<String, Any>]), .notMember),
        RuleCase("manager mutes all", baseTeam, op("team.muteAll", "mgr", ["team": "t1", "muted": true]), nil),
        RuleCase("normal mutes all", baseTeam, op("team.muteAll", "a", ["team": "t1", "muted": true]), .notPermitted),
    ]

    static let ownership: [RuleCase] = [
        RuleCase("owner dismisses", baseTeam, op("team.dismiss", "own", ["team": "t1"]), nil),
        RuleCase("manager dismisses", baseTeam, op("team.dismiss", "mgr", ["team": "t1"]), .notPermitted),
        RuleCase("dismiss twice", dismissed, op("team.dismiss", "own", ["team": "t1"]), .dismissed),
        RuleCase("owner transfers", baseTeam, op("team.transferOwner", "own", ["team": "t1", "target": "a"]), nil),
        RuleCase(
            "owner transfers and leaves", baseTeam,
            op("team.transferOwner", "own", ["team": "t1", "target": "mgr", "leave": true]), nil),
        RuleCase(
            "manager transfers", baseTeam, op("team.transferOwner", "mgr", ["team": "t1", "target": "a"]), .notPermitted
        ),
        RuleCase(
            "transfer to a non-member", baseTeam, op("team.transferOwner", "own", ["team": "t1", "target": "zz"]),
            .notMember),
        RuleCase(
            "transfer to self", baseTeam, op("team.transferOwner", "own", ["team": "t1", "target": "own"]),
            .notPermitted),
        RuleCase(
            "owner adds managers", baseTeam, op("team.addManagers", "own", ["team": "t1", "targets": ["a", "b"]]), nil),
        RuleCase(
            "manager adds managers", baseTeam, op("team.addManagers", "mgr", ["team": "t1", "targets": ["a"]]),
            .notPermitted),
        RuleCase(
            "add a non-member as manager", baseTeam,
            op("team.addManagers", "own", ["team": "t1", "targets": ["a", "zz"]]), .notMember),
        RuleCase(
            "add the owner as manager", baseTeam, op("team.addManagers", "own", ["team": "t1", "targets": ["own"]]),
            .notPermitted),
        RuleCase(
            "owner removes a manager", baseTeam, op("team.removeManagers", "own", ["team": "t1", "targets": ["mgr"]]),
            nil),
        RuleCase(
            "manager removes a manager", baseTeam,
            op("team.removeManagers", "mgr", ["team": "t1", "targets": ["mgr"]]), .notPermitted),
        RuleCase(
            "remove the owner from managers", baseTeam,
            op("team.removeManagers", "own", ["team": "t1", "targets": ["own"]]), .notPermitted),
    ]

    static let mute: [RuleCase] = [
        RuleCase(
            "owner mutes a manager", baseTeam,
            op("team.muteMember", "own", ["team": "t1", "target": "mgr", "muted": true]), nil),
        RuleCase(
            "manager mutes a normal until a time", baseTeam,
            op("team.muteMember", "mgr", ["team": "t1", "target": "a", "muted": true, "until": 5_000]), nil),
        RuleCase(
            "manager mutes a manager", baseTeam + [op("team.addManagers", "own", ["team": "t1", "targets": ["a"]])],
            op("team.muteMember", "mgr", ["team": "t1", "target": "a", "muted": true]), .notPermitted),
        RuleCase(
            "manager mutes the owner", baseTeam,
            op("team.muteMember", "mgr", ["team": "t1", "target": "own", "muted": true]), .notPermitted),
        RuleCase(
            "owner mutes self", baseTeam, op("team.muteMember", "own", ["team": "t1", "target": "own", "muted": true]),
            .notPermitted),
        RuleCase(
            "normal mutes", baseTeam, op("team.muteMember", "a", ["team": "t1", "target": "b", "muted": true]),
            .notPermitted),
        RuleCase(
            "mute a non-member", baseTeam, op("team.muteMember", "own", ["team": "t1", "target": "zz", "muted": true]),
            .notMember),
        RuleCase(
            "member sets own notify", baseTeam, op("member.setNotify", "a", ["team": "t1", "state": "managerOnly"]), nil
        ),
        RuleCase(
            "non-member sets notify", baseTeam, op("member.setNotify", "zz", ["team": "t1", "state": "none"]),
            .notMember),
        RuleCase(
            "bad notify state", baseTeam, op("member.setNotify", "a", ["team": "t1", "state": "some"]), .badField),
    ]

    /// Runs a case (`RuleCase.check`).
    func check(_ c: RuleCase) throws { try c.check() }

    @Test(arguments: create) func teamCreate(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: invite) func teamInvite(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: acceptReject) func invitations(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: apply) func applications(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: kickLeave) func kickAndLeave(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: update) func updates(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: ownership) func ownershipAndManagers(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: mute) func muteAndNotify(_ c: RuleCase) throws { try check(c) }
}
