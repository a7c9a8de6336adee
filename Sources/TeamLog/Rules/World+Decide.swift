/// Deciding: check an op against the state and turn it into an event, or reject it with the exact code.
extension World {
    /// Validates `op` against the current state. `now` is the processor's clock, used only when the op
    /// has no `ts`; event time never goes backwards (a smaller time is raised to the last event's).
    /// Nothing changes here: the caller applies the event.
    public func decide(_ op: Op, now: Int64) -> Result<Event, Rejection> {
        let ts = max(op.ts ?? now, lastTs)
        do {
            if let deadline = derived.syncDeadline, ts >= deadline, op.body.channel != nil {
                // Only channel ops read what members sync changes (channel rosters).
                // Members sync is due before this op: decide against the state after it (as `apply` will).
                var synced = self
                var scratch: [Output] = []
                synced.runMembersSync(at: ts, seq: lastSeq + 1, into: &scratch)
                try synced.check(op, ts: ts)
            } else {
                try check(op, ts: ts)
            }
        } catch {
            return .failure(error)
        }
        var accepted = op
        accepted.ts = ts
        return .success(Event(seq: lastSeq + 1, ts: ts, op: accepted))
    }

    private func check(_ op: Op, ts: Int64) throws(Rejection) {
        let actor = op.actor
        switch op.body {
        case .teamCreate(let c):
            if teams.index(forKey: c.team) != nil { throw Rejection(.teamExists, "team \(c.team) already exists") }
            let count = 1 + c.members.filter { $0 != actor }.count
            let limit = config.maxMembers(c.kind)
            if count > limit {
                throw Rejection(.teamFull, "\(count) members exceed the \(c.kind.rawValue) limit of \(limit)")
            }

        case .teamInvite(let id, let targets):
            let team = try liveTeam(id)
            let role = try memberRole(team, actor)
            if !role.isAdmin && team.inviteMode != .all {
                throw Rejection(.notPermitted, "only the owner and managers may invite to \(id) (inviteMode manager)")
            }
            for target in targets where team.isMember(target) {
                throw Rejection(.alreadyMember, "\(target) is already a member of \(id)")
            }
            if team.beInviteMode == .noConsent { try checkRoom(team, adding: targets.count) }

        case .teamAcceptInvite(let id, let inviter):
            let team = try liveTeam(id)
            if team.isMember(actor) { throw Rejection(.alreadyMember, "\(actor) is already a member of \(id)") }
            guard team.invites[actor]?.contains(inviter) == true else {
                throw Rejection(.noInvitation, "\(actor) has no pending invitation from \(inviter) to \(id)")
            }
            try checkRoom(team, adding: 1)

        case .teamRejectInvite(let id, let inviter):
            let team = try liveTeam(id)
            guard team.invites[actor]?.contains(inviter) == true else {
                throw Rejection(.noInvitation, "\(actor) has no pending invitation from \(inviter) to \(id)")
            }

        case .teamApply(let id, _):
            let team = try liveTeam(id)
            if team.isMember(actor) { throw Rejection(.alreadyMember, "\(actor) is already a member of \(id)") }
            switch team.joinMode {
            case .private: throw Rejection(.notPermitted, "\(id) is private: members join by invitation only")
            case .free: try checkRoom(team, adding: 1)
            case .apply: break
            }

        case .teamApproveApply(let id, let applicant):
            let team = try liveTeam(id)
            try requireAdmin(team, actor, "approve applications")
            if team.isMember(applicant) { throw Rejection(.alreadyMember, "\(applicant) is already a member of \(id)") }
            guard team.applications[applicant] != nil else {
                throw Rejection(.noApplication, "\(applicant) has no pending application to \(id)")
            }
            try checkRoom(team, adding: 1)

        case .teamRejectApply(let id, let applicant):
            let team = try liveTeam(id)
            try requireAdmin(team, actor, "reject applications")
            guard team.applications[applicant] != nil else {
                throw Rejection(.noApplication, "\(applicant) has no pending application to \(id)")
            }

        case .teamKick(let id, let targets):
            let team = try liveTeam(id)
            let role = try memberRole(team, actor)
            if !role.isAdmin { throw Rejection(.notPermitted, "only the owner and managers may kick from \(id)") }
            for target in targets {
                if target == actor { throw Rejection(.notPermitted, "\(actor) cannot kick themself; leave instead") }
                guard let member = team.member(target) else {
                    throw Rejection(.notMember, "\(target) is not a member of \(id)")
                }
                if role == .manager && member.role != .normal {
                    throw Rejection(
                        .notPermitted, "a manager may kick normal members only; \(target) is \(member.role.rawValue)")
                }
            }

        case .teamLeave(let id):
            let team = try liveTeam(id)
            let role = try memberRole(team, actor)
            if role == .owner {
                throw Rejection(.ownerCannotLeave, "\(actor) owns \(id): transfer ownership or dismiss the team first")
            }

        case .teamUpdate(let id, let fields):
            let team = try liveTeam(id)
            let role = try memberRole(team, actor)
            if fields.touchesModes && !role.isAdmin {
                throw Rejection(.notPermitted, "only the owner and managers may change the modes of \(id)")
            }
            if !role.isAdmin && team.updateInfoMode != .all {
                throw Rejection(.notPermitted, "only the owner and managers may update \(id) (updateInfoMode manager)")
            }

        case .teamMuteAll(let id, _):
            let team = try liveTeam(id)
            try requireAdmin(team, actor, "mute all members")

        case .teamDismiss(let id):
            let team = try liveTeam(id)
            try requireOwner(team, actor, "dismiss the team")

        case .teamTransferOwner(let id, let target, _):
            let team = try liveTeam(id)
            try requireOwner(team, actor, "transfer ownership")
            if target == actor { throw Rejection(.notPermitted, "\(actor) already owns \(id)") }
            guard team.isMember(target) else { throw Rejection(.notMember, "\(target) is not a member of \(id)") }

        case .teamAddManagers(let id, let targets), .teamRemoveManagers(let id, let targets):
            let team = try liveTeam(id)
            try requireOwner(team, actor, "change managers")
            for target in targets {
                guard let member = team.member(target) else {
                    throw Rejection(.notMember, "\(target) is not a member of \(id)")
                }
                if member.role == .owner { throw Rejection(.notPermitted, "\(target) is the owner of \(id)") }
            }

        case .teamMuteMember(let id, let target, _, _):
            let team = try liveTeam(id)
            let role = try memberRole(team, actor)
            if !role.isAdmin { throw Rejection(.notPermitted, "only the owner and managers may mute members of \(id)") }
            if target == actor { throw Rejection(.notPermitted, "\(actor) cannot mute themself") }
            guard let member = team.member(target) else {
                throw Rejection(.notMember, "\(target) is not a member of \(id)")
            }
            if role == .manager && member.role != .normal {
                throw Rejection(
                    .notPermitted, "a manager may mute normal members only; \(target) is \(member.role.rawValue)")
            }

        case .memberSetNotify(let id, _):
            let team = try liveTeam(id)
            _ = try memberRole(team, actor)

        case .messageSend, .messageRead, .messageReceipt, .messageModify:
            try checkMessageOp(op, ts: ts)

        case .clientLogin, .clientLogout, .clockTick, .channelCreate, .channelJoin, .channelInvite,
            .channelCancelInvite, .channelReject, .channelAccept, .channelLeave, .channelClose, .channelControl:
            try checkSignalingOp(op)

        case .membersSync:
            throw Rejection(.notPermitted, "membersSync is the system's own event, not an op")
        }
    }

    // MARK: Shared checks, in the order every team op applies them

    /// The team, when it exists and is not dismissed.
    func liveTeam(_ id: Id) throws(Rejection) -> TeamState {
        guard let team = teams[id] else { throw Rejection(.noSuchTeam, "no team \(id)") }
        if team.dismissed { throw Rejection(.dismissed, "team \(id) was dismissed") }
        return team
    }

    /// The role of `user`, who must be a member.
    func memberRole(_ team: TeamState, _ user: Id) throws(Rejection) -> Role {
        guard let member = team.member(user) else {
            throw Rejection(.notMember, "\(user) is not a member of \(team.id)")
        }
        return member.role
    }

    func requireAdmin(_ team: TeamState, _ user: Id, _ what: String) throws(Rejection) {
        if try !memberRole(team, user).isAdmin {
            throw Rejection(.notPermitted, "only the owner and managers may \(what) in \(team.id)")
        }
    }

    func requireOwner(_ team: TeamState, _ user: Id, _ what: String) throws(Rejection) {
        if try memberRole(team, user) != .owner {
            throw Rejection(.notPermitted, "only the owner may \(what) of \(team.id)")
        }
    }

    func checkRoom(_ team: TeamState, adding: Int) throws(Rejection) {
        let limit = config.maxMembers(team.kind)
        if team.memberCount + adding > limit {
            throw Rejection(
                .teamFull,
                "\(team.id) has \(team.memberCount) members; adding \(adding) passes the \(team.kind.rawValue) limit of \(limit)"
            )
        }
    }
}
