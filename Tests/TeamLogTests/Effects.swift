import TeamLog
import TestSupport
import Testing

/// What an accepted op of SPEC §1 must have done, read from the op itself: the rule tables call this for
/// every accepted row, so "accepted" always means "accepted and did what the SPEC says".
func expectEffects(
    of line: String, before: World, after: World, outputs: [Output], _ name: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    func check(_ ok: Bool, _ what: String) {
        #expect(ok, "\(name): \(what)", sourceLocation: sourceLocation)
    }
    guard case .success(let op) = OpParser.parse(line: line) else {
        check(false, "not parsed")
        return
    }
    let actor = op.actor
    let seq = before.lastSeq + 1
    check(after.lastSeq == seq, "stored as seq \(seq) (got \(after.lastSeq))")
    let tips = outputs.compactMap { if case .tip(let t) = $0 { t } else { nil } }
    let notices = outputs.compactMap { if case .notice(let n) = $0 { n } else { nil } }
    let deliveries = outputs.compactMap { if case .delivery(let d) = $0 { d } else { nil } }
    let signals = outputs.compactMap { if case .signal(let s) = $0 { s } else { nil } }
    func tipped(_ nim: String?) {
        check(tips.count >= 1 && tips.allSatisfy { $0.seq == seq }, "a tip at seq \(seq)")
        if let nim { check(tips.first?.nim?.operationType == nim, "NIM operationType \(nim)") }
    }

    switch op.body {
    // MARK: Teams (SPEC §1.1)
    case .teamCreate(let c):
        let team = after.teams[c.team]
        check(team?.owner == actor && team?.kind == c.kind && team?.name == c.name, "team \(c.team) created")
        check(team?.memberIds == [actor] + c.members.filter { $0 != actor }, "owner, then the members given")
        check(c.members.filter { $0 != actor }.allSatisfy { team?.member($0)?.role == .normal }, "members normal")
        tipped(nil)
    case .teamInvite(let id, let targets):
        if before.teams[id]?.beInviteMode == .noConsent {
            check(targets.allSatisfy { after.teams[id]?.member($0)?.role == .normal }, "targets joined")
            tipped("invite")
        } else {
            check(targets.allSatisfy { after.teams[id]?.invites[$0]?.contains(actor) == true }, "invitations pending")
            check(targets.allSatisfy { !(after.teams[id]?.isMember($0) ?? true) }, "nobody joined yet")
            check(notices.map(\.to) == targets && notices.allSatisfy { $0.type == .teamInvite }, "invite notices")
            check(tips.isEmpty, "no tip")
        }
    case .teamAcceptInvite(let id, _):
        check(after.teams[id]?.isMember(actor) == true && after.teams[id]?.invites[actor] == nil, "joined")
        tipped("acceptInvitation")
    case .teamRejectInvite(let id, let inviter):
        check(after.teams[id]?.invites[actor]?.contains(inviter) != true, "invitation dropped")
        check(notices.map(\.to) == [inviter] && notices.first?.type == .teamInviteRejected, "inviter notified")
    case .teamApply(let id, let message):
        if before.teams[id]?.joinMode == .free {
            check(after.teams[id]?.isMember(actor) == true, "joined")
            tipped("applyPass")
        } else {
            check(after.teams[id]?.applications[actor] == (message ?? ""), "application pending")
            check(notices.map(\.to) == before.teams[id]?.admins && !notices.isEmpty, "the admins notified")
        }
    case .teamApproveApply(let id, let applicant):
        check(after.teams[id]?.isMember(applicant) == true, "applicant joined")
        check(after.teams[id]?.applications[applicant] == nil, "application used up")
        tipped("applyPass")
    case .teamRejectApply(let id, let applicant):
        check(after.teams[id]?.applications[applicant] == nil, "application dropped")
        check(notices.map(\.to) == [applicant] && notices.first?.type == .teamApplyRejected, "applicant notified")
    case .teamKick(let id, let targets):
        check(targets.allSatisfy { !(after.teams[id]?.isMember($0) ?? true) }, "targets left")
        tipped("kick")
    case .teamLeave(let id):
        check(after.teams[id]?.isMember(actor) == false, "actor left")
        tipped("leave")
    case .teamUpdate(let id, let f):
        let t = after.teams[id]
        check(f.name.map { $0 == t?.name } ?? true, "name")
        check(f.intro.map { $0 == t?.intro } ?? true, "intro")
        check(f.announcement.map { $0 == t?.announcement } ?? true, "announcement")
        check(f.avatar.map { $0 == t?.avatar } ?? true, "avatar")
        check(f.joinMode.map { $0 == t?.joinMode } ?? true, "joinMode")
        check(f.inviteMode.map { $0 == t?.inviteMode } ?? true, "inviteMode")
        check(f.beInviteMode.map { $0 == t?.beInviteMode } ?? true, "beInviteMode")
        check(f.updateInfoMode.map { $0 == t?.updateInfoMode } ?? true, "updateInfoMode")
        check(f.ext.map { $0 == t?.ext } ?? true, "ext")
        tipped("update")
    case .teamMuteAll(let id, let muted):
        check(after.teams[id]?.muted == muted, "team mute \(muted)")
        tipped("update")
    case .teamDismiss(let id):
        // The roster is kept as it was, read as ended at the dismissal: nobody is in the team's index.
        check(after.teams[id]?.dismissed == true, "dismissed")
        check(after.teams[id]?.slots == before.teams[id]?.slots, "the roster as at the dismissal")
        check(after.userTeams.values.allSatisfy { !$0.contains(id) }, "nobody left")
        tipped("dismiss")
    case .teamTransferOwner(let id, let target, let leave):
        let t = after.teams[id]
        check(t?.owner == target && t?.member(target)?.role == .owner, "target owns")
        check(leave ? t?.isMember(actor) == false : t?.member(actor)?.role == .normal, "old owner normal or gone")
        tipped("transferOwner")
    case .teamAddManagers(let id, let targets), .teamRemoveManagers(let id, let targets):
        let role: Role
        if case .teamAddManagers = op.body { role = .manager } else { role = .normal }
        check(targets.allSatisfy { after.teams[id]?.member($0)?.role == role }, "targets \(role)")
        tipped(role == .manager ? "addManager" : "removeManager")
    case .teamMuteMember(let id, let target, let muted, let until):
        check(after.teams[id]?.member(target)?.mutedUntil == (muted ? until ?? -1 : nil), "member mute")
        tipped("mute")
    case .memberSetNotify(let id, let state):
        check(after.teams[id]?.member(actor)?.notify == state, "notify \(state)")
        check(tips.isEmpty, "no tip")

    // MARK: Messages (SPEC §1.2, §2)
    case .messageSend(let m):
        let stored = after.messages[m.messageId]
        check(stored?.seq == seq && stored?.sender == actor && stored?.stored == m.isStored, "message recorded")
        check(stored?.content == (m.isStored ? m.content : .null), "content kept when stored")
        check(
            deliveries.count == 1 && deliveries.first?.messageId == m.messageId
                && !(deliveries.first?.receivers.contains(actor) ?? true), "one delivery, never to the sender")
        let teamMessage = m.to.kind != .p2p
        check((after.receipts[m.messageId] != nil) == (m.needReceipt && m.isStored && teamMessage), "receipt tally")
        if let receivers = deliveries.first?.receivers, let key = stored?.conv {
            // Every receiver gains one counted message (their unread moves by one), the sender none.
            for user in receivers {
                let counted = received(after, user, key) - received(before, user, key)
                check(counted == (m.counts ? 1 : 0), "\(user)'s unread moves by \(m.counts ? 1 : 0)")
            }
            check(received(after, actor, key) == received(before, actor, key), "the sender's own message never counts")
        }
    case .messageRead(let to, let upTo):
        let key = ConvKey(to, actor: actor)
        if let was = before.userConvs[actor]?[key] {
            let position = max(was.readSeq, min(upTo ?? (seq - 1), seq - 1))
            check(after.userConvs[actor]?[key]?.readSeq == position, "read position \(position)")
        } else {
            check(after.userConvs[actor]?[key] == nil, "no conversation made by reading")
        }
    case .messageReceipt(_, let ids):
        check(ids.allSatisfy { after.receipts[$0]?.ordinal(of: actor) != nil }, "receipts marked read")
    case .messageModify(let id, let content):
        let message = after.messages[id]
        check(message?.content == content && message?.hasChanged == true && message?.modifiedBy == actor, "modified")
        check(outputs.isEmpty, "no output")
    case .clientLogin:
        check(after.devices(of: actor).contains(op.device ?? ""), "device online")
    case .clientLogout:
        check(!after.devices(of: actor).contains(op.device ?? ""), "device offline")

    // MARK: Signaling (SPEC §1.3)
    case .clockTick:
        check(after.lastTs == max(op.ts ?? before.lastTs, before.lastTs), "event time moved")
    case .channelCreate(let id, let kind, _):
        let c = after.channels[id]
        check(c?.kind == kind && c?.creator == actor && c?.closed == false && c?.members.isEmpty == true, "created")
    case .channelJoin(let id):
        check(after.channels[id]?.isMember(actor) == true, "joined")
        check(signals.filter { $0.event == .join }.map(\.to) == before.channels[id]?.memberIds, "join to the others")
    case .channelInvite(let i):
        let pending = after.channels[i.channel]?.invite(target: i.target, inviter: actor, requestId: i.requestId)
        check(pending != nil, "pending")
        check(signals.map(\.event) == [.invite] && signals.first?.to == i.target, "invite to the target")
    case .channelCancelInvite(let id, let target, let requestId):
        check(after.channels[id]?.invite(target: target, inviter: actor, requestId: requestId) == nil, "cancelled")
        check(signals.map(\.event) == [.cancelInvite] && signals.first?.to == target, "cancelInvite to the target")
    case .channelReject(let id, let inviter, let requestId):
        check(after.channels[id]?.invite(target: actor, inviter: inviter, requestId: requestId) == nil, "dropped")
        check(signals.first?.event == .reject && signals.first?.to == inviter, "reject to the inviter")
    case .channelAccept(let id, let inviter, let requestId):
        check(after.channels[id]?.isMember(actor) == true, "joined")
        check(after.channels[id]?.invite(target: actor, inviter: inviter, requestId: requestId) == nil, "used up")
        check(signals.first?.event == .accept && signals.first?.to == inviter, "accept to the inviter")
    case .channelLeave(let id):
        check(after.channels[id]?.isMember(actor) == false, "left")
    case .channelClose(let id):
        check(after.channels[id]?.closed == true, "closed")
        check(signals.filter { $0.event == .close }.map(\.to) == before.channels[id]?.memberIds, "close to everyone")
    case .channelControl(let id, let target, _):
        let to = target.map { [$0] } ?? (before.channels[id]?.memberIds.filter { $0 != actor } ?? [])
        check(signals.filter { $0.event == .control }.map(\.to) == to, "control to \(to)")
    case .membersSync:
        check(false, "not an input op")
    }
}

/// Counted messages `user` has received in a conversation so far, from the running totals that number the
/// unread index entries: broadcasts − their own + individually received. A message at the newest seq
/// moves a receiver's unread exactly as it moves this.
private func received(_ world: World, _ user: Id, _ key: ConvKey) -> Int {
    let uc = world.userConvs[user]?[key]
    return Int(world.convs[key]?.countedTotal ?? 0) - Int(uc?.ownTotal ?? 0) + Int(uc?.directedTotal ?? 0)
}
