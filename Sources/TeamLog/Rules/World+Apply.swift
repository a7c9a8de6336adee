/// Applying: change the state by an accepted event. No validation and no clock: replaying the log calls
/// exactly this, so the same log always rebuilds the same state.
extension World {
    /// Applies `event` (which `decide` accepted against this state) and appends its outputs to `out`.
    public mutating func apply(_ event: Event, into out: inout [Output]) {
        var uncounted = FanOutStats()
        apply(event, into: &out, counting: &uncounted)
    }

    /// Applies `event` as `apply(_:into:)` does and adds its fan-out work to `stats` (the caller's: work
    /// counters are not state, and only benchmarks read them).
    public mutating func apply(_ event: Event, into out: inout [Output], counting stats: inout FanOutStats) {
        // Counted in the workspace during the call, where the fan-out runs; swapped, not copied.
        swap(&stats, &workspace.stats)
        defer { swap(&stats, &workspace.stats) }
        precondition(event.seq == lastSeq + 1, "event \(event.seq) applied after \(lastSeq)")
        if let deadline = derived.syncDeadline, event.ts >= deadline {
            runMembersSync(at: event.ts, seq: event.seq, into: &out)
        }
        lastSeq = event.seq
        lastTs = max(lastTs, event.ts)
        let seq = event.seq
        let actor = event.op.actor
        workspace.actor = actor

        switch event.op.body {
        case .teamCreate(let c):
            var team = TeamState(id: c.team, kind: c.kind, owner: actor, seq: seq, ts: event.ts)
            team.name = c.name
            team.intro = c.intro
            team.announcement = c.announcement
            team.avatar = c.avatar
            team.joinMode = c.joinMode
            team.inviteMode = c.inviteMode
            team.beInviteMode = c.beInviteMode
            team.updateInfoMode = c.updateInfoMode
            team.muted = c.muted
            // Online bits set as each member is added (presence is not changed by a team op), not looked
            // up again per member afterwards: a team.create adds its members by the thousand.
            let joined = c.members.filter { $0 != actor }
            team.reserveMembers(1 + joined.count)
            team.addMember(actor, role: .owner, joinSeq: seq, online: isOnline(actor))
            for user in joined { team.addMember(user, role: .normal, joinSeq: seq, online: isOnline(user)) }
            teams[c.team] = team
            touch(.team(c.team))
            let key = ConvKey(team: c.team, kind: team.kind)
            for user in [actor] + joined {
                touchAppended(.member(c.team, user))
                // The team is new (`teamExists`), so no view of its conversation, nor the team in anyone's
                // list, can exist yet: added without looking for them.
                joinedConversation(user, team: c.team, key: key, seq: seq, newTeam: true)
            }
            tip(
                c.team, seq, nim: nil, zim: TipFactory.zim("GROUP_CREATED", 1, actor, joined),
                text: "\(actor) created \(TipFactory.teamName(team))", into: &out)

        case .teamInvite(let id, let targets):
            if teams[id]!.beInviteMode == .noConsent {
                join(id, targets, seq: seq)
                tip(
                    id, seq, nim: TipFactory.nim("invite", actor, targets),
                    zim: TipFactory.zim("GROUP_INVITED", 4, actor, targets),
                    text: "\(actor) invited \(TipFactory.list(targets)) to \(name(id))", into: &out)
            } else {
                for target in targets {
                    var inviters = teams[id]!.invites[target] ?? []
                    if !inviters.contains(actor) { inviters.append(actor) }
                    teams[id]!.invites[target] = inviters
                    touch(.invite(id, target))
                    out.append(.notice(Notice(seq: seq, to: target, type: .teamInvite, team: id, from: actor)))
                }
            }

        case .teamAcceptInvite(let id, let inviter):
            join(id, [actor], seq: seq)
            tip(
                id, seq, nim: TipFactory.nim("acceptInvitation", actor, [actor]),
                zim: TipFactory.zim("GROUP_INVITED", 4, inviter, [actor]),
                text: "\(actor) accepted \(inviter)'s invitation and joined \(name(id))", into: &out)

        case .teamRejectInvite(let id, let inviter):
            var inviters = teams[id]!.invites[actor] ?? []
            inviters.removeAll { $0 == inviter }
            teams[id]!.invites[actor] = inviters.isEmpty ? nil : inviters
            touch(.invite(id, actor))
            out.append(.notice(Notice(seq: seq, to: inviter, type: .teamInviteRejected, team: id, from: actor)))

        case .teamApply(let id, let message):
            if teams[id]!.joinMode == .free {
                join(id, [actor], seq: seq)
                tip(
                    id, seq, nim: TipFactory.nim("applyPass", actor, [actor]),
                    zim: TipFactory.zim("GROUP_JOINED", 3, actor, [actor]),
                    text: "\(actor) joined \(name(id))", into: &out)
            } else {
                teams[id]!.applications[actor] = message ?? ""
                touch(.application(id, actor))
                for admin in teams[id]!.admins {
                    out.append(.notice(Notice(seq: seq, to: admin, type: .teamApply, team: id, from: actor)))
                }
            }

        case .teamApproveApply(let id, let applicant):
            join(id, [applicant], seq: seq)
            tip(
                id, seq, nim: TipFactory.nim("applyPass", actor, [applicant]),
                zim: TipFactory.zim("GROUP_JOINED", 3, actor, [applicant]),
                text: "\(actor) approved \(applicant) to join \(name(id))", into: &out)

        case .teamRejectApply(let id, let applicant):
            teams[id]!.applications[applicant] = nil
            touch(.application(id, applicant))
            out.append(.notice(Notice(seq: seq, to: applicant, type: .teamApplyRejected, team: id, from: actor)))

        case .teamKick(let id, let targets):
            leave(id, targets, seq: seq)
            tip(
                id, seq, nim: TipFactory.nim("kick", actor, targets),
                zim: TipFactory.zim("GROUP_KICKED_OUT", 6, actor, targets),
                text: "\(actor) removed \(TipFactory.list(targets)) from \(name(id))", removed: targets, into: &out)

        case .teamLeave(let id):
            leave(id, [actor], seq: seq)
            tip(
                id, seq, nim: TipFactory.nim("leave", actor, [actor]),
                zim: TipFactory.zim("GROUP_LEFT", 5, actor, [actor]),
                text: "\(actor) left \(name(id))", removed: [actor], into: &out)

        case .teamUpdate(let id, let fields):
            var team = teams[id]!
            if let v = fields.name { team.name = v }
            if let v = fields.intro { team.intro = v }
            if let v = fields.announcement { team.announcement = v }
            if let v = fields.avatar { team.avatar = v }
            if let v = fields.joinMode { team.joinMode = v }
            if let v = fields.inviteMode { team.inviteMode = v }
            if let v = fields.beInviteMode { team.beInviteMode = v }
            if let v = fields.updateInfoMode { team.updateInfoMode = v }
            if let v = fields.ext { team.ext = v }
            teams[id] = team
            touch(.team(id))
            tip(
                id, seq, nim: TipFactory.nim("update", actor, [], fields.changedTags.map { ($0.tag, $0.value) }),
                zim: TipFactory.zimUpdate(fields, actor: actor),
                text: TipFactory.updateText(fields, actor: actor, team: name(id)), into: &out)

        case .teamMuteAll(let id, let muted):
            teams[id]!.muted = muted
            touch(.team(id))
            var info = ZIMChangeInfo("GROUP_MUTE_CHANGED", 5)
            info.groupMuted = muted
            tip(
                id, seq, nim: TipFactory.nim("update", actor, [], [("muteMode", muted ? "1" : "0")]),
                zim: TipFactory.zim("GROUP_INFO_CHANGED", 7, actor, [], info),
                text: "\(actor) \(muted ? "muted" : "unmuted") all members", into: &out)

        case .teamDismiss(let id):
            // O(1) records, whatever the team's size: the roster stays as it was at the dismissal (its
            // member records, each view of the conversation) and is read as ended there — every later op
            // on the team is `dismissed`, so nothing can extend what a member sees. Only the resident
            // user → teams index and the online bits (presence stops updating them) change per member,
            // in memory. A leave of every member wrote 3 records per member and loaded every view: a
            // 200,000-member superTeam held the writer over a second.
            let removed = wantsDeliveries ? teams[id]!.memberIds : []
            let removedCount = teams[id]!.memberCount
            for case let member? in teams[id]!.slots {
                if let index = derived.userTeams.index(forKey: member.user) {
                    derived.userTeams.values[index].remove(id)
                    if derived.userTeams.values[index].isEmpty { derived.userTeams.remove(at: index) }
                }
            }
            for invitee in teams[id]!.invites.keys { touch(.invite(id, invitee)) }
            for applicant in teams[id]!.applications.keys { touch(.application(id, applicant)) }
            teams[id]!.invites = [:]
            teams[id]!.applications = [:]
            teams[id]!.dismiss()
            touch(.team(id))
            tip(
                id, seq, nim: TipFactory.nim("dismiss", actor, []),
                zim: TipFactory.zim("GROUP_DISMISSED", 2, actor, []),
                text: "\(actor) dismissed \(name(id))", removed: removed, removedCount: removedCount, into: &out)

        case .teamTransferOwner(let id, let target, let leaving):
            teams[id]!.updateMember(target) { $0.role = .owner }
            teams[id]!.updateMember(actor) { $0.role = .normal }
            teams[id]!.owner = target
            touch(.team(id))
            touch(.member(id, target))
            touch(.member(id, actor))
            var info = ZIMChangeInfo("GROUP_OWNER_TRANSFERRED", 10)
            info.memberRole = TipFactory.zimRole(.owner)
            tip(
                id, seq, nim: TipFactory.nim("transferOwner", actor, [target]),
                zim: TipFactory.zim("GROUP_MEMBER_INFO_CHANGED", 8, actor, [target], info),
                text: "\(actor) transferred the ownership of \(name(id)) to \(target)", into: &out)
            if leaving {
                leave(id, [actor], seq: seq)
                tip(
                    id, seq, index: 1, nim: TipFactory.nim("leave", actor, [actor]),
                    zim: TipFactory.zim("GROUP_LEFT", 5, actor, [actor]),
                    text: "\(actor) left \(name(id))", removed: [actor], into: &out)
            }

        case .teamAddManagers(let id, let targets), .teamRemoveManagers(let id, let targets):
            let adding: Bool
            if case .teamAddManagers = event.op.body { adding = true } else { adding = false }
            for target in targets {
                teams[id]!.updateMember(target) { $0.role = adding ? .manager : .normal }
                touch(.member(id, target))
            }
            var info = ZIMChangeInfo("GROUP_MEMBER_ROLE_CHANGED", 11)
            info.memberRole = TipFactory.zimRole(adding ? .manager : .normal)
            let verb =
                adding
                ? "added \(TipFactory.list(targets)) as managers of"
                : "removed \(TipFactory.list(targets)) from the managers of"
            tip(
                id, seq, nim: TipFactory.nim(adding ? "addManager" : "removeManager", actor, targets),
                zim: TipFactory.zim("GROUP_MEMBER_INFO_CHANGED", 8, actor, targets, info),
                text: "\(actor) \(verb) \(name(id))", into: &out)

        case .teamMuteMember(let id, let target, let muted, let until):
            let value: Int64? = muted ? (until ?? -1) : nil
            teams[id]!.updateMember(target) { $0.mutedUntil = value }
            touch(.member(id, target))
            var info = ZIMChangeInfo("GROUP_MEMBER_MUTE_CHANGED", 12)
            info.muteExpiredTime = value ?? 0
            tip(
                id, seq, nim: TipFactory.nim("mute", actor, [target]),
                zim: TipFactory.zim("GROUP_MEMBER_INFO_CHANGED", 8, actor, [target], info),
                text: "\(actor) \(muted ? "muted" : "unmuted") \(target)", into: &out)

        case .memberSetNotify(let id, let state):
            teams[id]!.updateMember(actor) { $0.notify = state }
            touch(.member(id, actor))

        case .messageSend, .messageRead, .messageReceipt, .messageModify:
            applyMessageOp(event, into: &out)

        case .clientLogin, .clientLogout, .clockTick, .channelCreate, .channelJoin, .channelInvite,
            .channelCancelInvite, .channelReject, .channelAccept, .channelLeave, .channelClose, .channelControl:
            applySignalingOp(event, into: &out)

        case .membersSync:
            break  // the sync it records ran above, as it does before any event at or past a deadline
        }
    }

    // MARK: Roster changes

    private func name(_ id: Id) -> String { TipFactory.teamName(teams[id]!) }

    /// Adds users as normal members; a join clears their pending invitations and application.
    private mutating func join(_ id: Id, _ users: [Id], seq: UInt64) {
        guard !users.isEmpty else { return }
        touch(.team(id))
        let key = ConvKey(team: id, kind: teams[id]!.kind)
        for user in users {
            teams[id]!.addMember(user, role: .normal, joinSeq: seq, online: isOnline(user))
            touchAppended(.member(id, user))
            joinedConversation(user, team: id, key: key, seq: seq)
            if teams[id]!.invites.removeValue(forKey: user) != nil { touch(.invite(id, user)) }
            if teams[id]!.applications.removeValue(forKey: user) != nil { touch(.application(id, user)) }
        }
    }

    /// Removes members, keeping their ended memberships and freezing their views of the conversation.
    private mutating func leave(_ id: Id, _ users: [Id], seq: UInt64) {
        guard !users.isEmpty else { return }
        touch(.team(id))  // its member count: once, not per member (a dismiss names 2,000)
        let key = ConvKey(team: id, kind: teams[id]!.kind)
        let shared = convs[key]?.last
        for user in users {
            leftConversation(user, team: id, key: key, shared: shared, seq: seq)
            teams[id]!.removeMember(user, at: seq)
            // Listed, not hashed into the dirty set: a user leaves once per op (a 200,000-member dismiss
            // spent a fifth of its 1.3 s inserting 600,000 keys into that set and growing it).
            touchAppended(.member(id, user))
            touchAppended(.pastMembers(id, user))
        }
    }

    /// Appends a tip, stored in the team conversation and delivered to the members after the op (the
    /// actor included) plus `removed`.
    /// `removedCount`: how many were removed, when `removed` is not listed (a dismissal lists them only for
    /// the deliveries).
    private mutating func tip(
        _ id: Id, _ seq: UInt64, index: Int = 0, nim: NIMTipView?, zim: ZIMTipView?, text: String,
        removed: [Id] = [], removedCount: Int? = nil, into out: inout [Output]
    ) {
        let messageId = Self.tipId(seq: seq, index: index)
        let tip = Tip(seq: seq, team: id, messageId: messageId, nim: nim, zim: zim, text: text)
        out.append(.tip(tip))
        deliverTip(
            tip, actor: workspace.actor, ts: lastTs, removed: removed, removedCount: removedCount ?? removed.count,
            into: &out)
    }
}
