/// Signaling channels (SPEC §1.3, NIM signaling): calls, invitations, online/offline/multi-device
/// notifications, login sync and members sync.
extension World {
    // MARK: Deciding

    func checkSignalingOp(_ op: Op) throws(Rejection) {
        let actor = op.actor
        switch op.body {
        case .clientLogin, .clientLogout:
            if op.device == nil { throw Rejection(.missingField, "missing field \"device\"") }
        case .clockTick:
            break
        case .channelCreate(let id, _, _):
            if let channel = channels[id] {
                if channel.closed { throw Rejection(.closed, "channel \(id) was closed") }
                throw Rejection(.notPermitted, "channel \(id) already exists")
            }
        case .channelJoin(let id):
            let channel = try openChannel(id)
            if channel.isMember(actor) { throw Rejection(.alreadyMember, "\(actor) is already in channel \(id)") }
        case .channelInvite(let i):
            let channel = try openChannel(i.channel)
            try requireChannelMember(channel, actor)
            if channel.isMember(i.target) {
                throw Rejection(.alreadyMember, "\(i.target) is already in channel \(i.channel)")
            }
        case .channelCancelInvite(let id, let target, let requestId):
            let channel = try openChannel(id)
            guard channel.invite(target: target, inviter: actor, requestId: requestId) != nil else {
                throw Rejection(.noInvitation, "no pending invitation \(requestId) from \(actor) to \(target) in \(id)")
            }
        case .channelReject(let id, let inviter, let requestId), .channelAccept(let id, let inviter, let requestId):
            let channel = try openChannel(id)
            guard channel.invite(target: actor, inviter: inviter, requestId: requestId) != nil else {
                throw Rejection(
                    .noInvitation, "no pending invitation \(requestId) from \(inviter) to \(actor) in \(id)")
            }
        case .channelLeave(let id), .channelClose(let id):
            try requireChannelMember(try openChannel(id), actor)
        case .channelControl(let id, let target, _):
            let channel = try openChannel(id)
            try requireChannelMember(channel, actor)
            if let target, !channel.isMember(target) {
                throw Rejection(.notMember, "\(target) is not in channel \(id)")
            }
        default:
            preconditionFailure("not a signaling op: \(op.name)")
        }
    }

    private func openChannel(_ id: Id) throws(Rejection) -> ChannelState {
        guard let channel = channels[id] else { throw Rejection(.noSuchChannel, "no channel \(id)") }
        if channel.closed { throw Rejection(.closed, "channel \(id) was closed") }
        return channel
    }

    private func requireChannelMember(_ channel: ChannelState, _ user: Id) throws(Rejection) {
        if !channel.isMember(user) { throw Rejection(.notMember, "\(user) is not in channel \(channel.id)") }
    }

    // MARK: Applying

    mutating func applySignalingOp(_ event: Event, into out: inout [Output]) {
        let actor = event.op.actor
        let seq = event.seq
        let ts = event.ts
        let device = event.op.device
        switch event.op.body {
        case .clientLogin:
            setDevice(actor, device!, online: true, ts: ts)
            let queue = offlineQueues.removeValue(forKey: actor) ?? []
            if !queue.isEmpty { touch(.offline(actor)) }
            let open = (derived.userChannels[actor] ?? []).sorted().compactMap { channels[$0] }
            out.append(.login(Login(seq: seq, user: actor, device: device!, offline: queue, channels: open)))

        case .clientLogout:
            setDevice(actor, device!, online: false, ts: ts)

        case .clockTick:
            break

        case .channelCreate(let id, let kind, let ext):
            channels[id] = ChannelState(id: id, kind: kind, ext: ext, creator: actor, createdSeq: seq)
            touch(.channel(id))

        case .channelJoin(let id):
            let others = channels[id]!.memberIds
            joinChannel(id, actor, ts: ts)
            for user in others { signal(seq, id, .join, to: user, from: actor, into: &out) }

        case .channelInvite(let i):
            channels[i.channel]!.invites.append(
                PendingInvite(
                    target: i.target, inviter: actor, requestId: i.requestId, offline: i.offline, pushText: i.pushText))
            touch(.channel(i.channel))
            signal(
                seq, i.channel, .invite, to: i.target, from: actor, requestId: i.requestId, store: i.offline,
                pushText: i.pushText, into: &out)

        case .channelCancelInvite(let id, let target, let requestId):
            let invite = removeInvite(id, target: target, inviter: actor, requestId: requestId)
            signal(
                seq, id, .cancelInvite, to: target, from: actor, requestId: requestId, store: invite.offline, into: &out
            )

        case .channelReject(let id, let inviter, let requestId):
            removeInvite(id, target: actor, inviter: inviter, requestId: requestId)
            signal(seq, id, .reject, to: inviter, from: actor, requestId: requestId, into: &out)
            syncOtherDevices(seq, id, .reject, actor: actor, device: device, requestId: requestId, into: &out)

        case .channelAccept(let id, let inviter, let requestId):
            removeInvite(id, target: actor, inviter: inviter, requestId: requestId)
            let others = channels[id]!.memberIds.filter { $0 != actor }
            if !channels[id]!.isMember(actor) { joinChannel(id, actor, ts: ts) }
            signal(seq, id, .accept, to: inviter, from: actor, requestId: requestId, into: &out)
            for user in others { signal(seq, id, .join, to: user, from: actor, into: &out) }
            syncOtherDevices(seq, id, .accept, actor: actor, device: device, requestId: requestId, into: &out)

        case .channelLeave(let id):
            leaveChannel(id, actor)
            for user in channels[id]!.memberIds { signal(seq, id, .leave, to: user, from: actor, into: &out) }

        case .channelClose(let id):
            let members = channels[id]!.memberIds
            channels[id]!.closed = true
            for user in members {
                derived.userChannels[user]?.remove(id)
                if derived.userChannels[user]?.isEmpty == true { derived.userChannels[user] = nil }
            }
            touch(.channel(id))
            recomputeSyncDeadline()
            for user in members { signal(seq, id, .close, to: user, from: actor, into: &out) }

        case .channelControl(let id, let target, _):
            let targets = target.map { [$0] } ?? channels[id]!.memberIds.filter { $0 != actor }
            for user in targets { signal(seq, id, .control, to: user, from: actor, into: &out) }

        default:
            preconditionFailure("not a signaling op: \(event.op.name)")
        }
    }

    /// Emits a notification to `to`'s online devices; for an offline user it is stored for login when
    /// `store` (the inviter's `offline` switch), and otherwise only reported as not delivered.
    private mutating func signal(
        _ seq: UInt64, _ channel: Id, _ event: SignalEvent, to user: Id, from: Id, requestId: Id? = nil,
        store: Bool = false, pushText: String? = nil, members: [Id]? = nil, into out: inout [Output]
    ) {
        let devices = devices(of: user)
        let stored = devices.isEmpty && store
        if stored {
            offlineQueues[user, default: []].append(
                StoredSignal(
                    seq: seq, channel: channel, event: event, from: from, requestId: requestId, pushText: pushText))
            touch(.offline(user))
        }
        out.append(
            .signal(
                Signal(
                    seq: seq, channel: channel, event: event, to: user, devices: devices, stored: stored,
                    sync: false, from: from, requestId: requestId, members: members)))
    }

    /// Multi-device sync: the actor's other online devices learn of their own accept/reject.
    private func syncOtherDevices(
        _ seq: UInt64, _ channel: Id, _ event: SignalEvent, actor: Id, device: Id?, requestId: Id,
        into out: inout [Output]
    ) {
        let others = devices(of: actor).filter { $0 != device }
        guard !others.isEmpty else { return }
        out.append(
            .signal(
                Signal(
                    seq: seq, channel: channel, event: event, to: actor, devices: others, stored: false,
                    sync: true, from: actor, requestId: requestId, members: nil)))
    }

    @discardableResult
    private mutating func removeInvite(_ id: Id, target: Id, inviter: Id, requestId: Id)
        -> PendingInvite
    {
        let index = channels[id]!.invites.firstIndex {
            $0.target == target && $0.inviter == inviter && $0.requestId == requestId
        }!
        touch(.channel(id))
        return channels[id]!.invites.remove(at: index)
    }

    /// Joins a user; their pending invitations to this channel are used up (they are in the call now).
    private mutating func joinChannel(_ id: Id, _ user: Id, ts: Int64) {
        channels[id]!.members.append((user, ts))
        channels[id]!.invites.removeAll { $0.target == user }
        derived.userChannels[user, default: []].insert(id)
        touch(.channel(id))
        scheduleSync(user, channel: id, joinedTs: ts)
        recomputeSyncDeadline()
    }

    private mutating func leaveChannel(_ id: Id, _ user: Id) {
        channels[id]!.members.removeAll { $0.user == user }
        derived.userChannels[user]?.remove(id)
        if derived.userChannels[user]?.isEmpty == true { derived.userChannels[user] = nil }
        touch(.channel(id))
        recomputeSyncDeadline()
    }

    /// Device online/offline: updates presence, the online bits of the user's teams, and members sync.
    private mutating func setDevice(_ user: Id, _ device: Id, online: Bool, ts: Int64) {
        var p = presence[user] ?? Presence()
        let wasOnline = !p.devices.isEmpty
        if online {
            if !p.devices.contains(device) {
                p.devices.append(device)
                p.devices.sort()
            }
            p.offlineSince = nil
        } else {
            p.devices.removeAll { $0 == device }
            if p.devices.isEmpty && wasOnline { p.offlineSince = ts }
        }
        presence[user] = p
        touch(.presence(user))
        let isOnline = !p.devices.isEmpty
        if wasOnline != isOnline {
            for id in derived.userTeams[user] ?? [] { teams[id]!.setOnline(user, isOnline) }
            if !isOnline {
                for id in derived.userChannels[user] ?? [] {
                    if let joined = channels[id]!.members.first(where: { $0.user == user })?.joinedTs {
                        scheduleSync(user, channel: id, joinedTs: joined)
                    }
                }
            }
            if derived.userChannels[user] != nil { recomputeSyncDeadline() }
        }
    }

    // MARK: Members sync

    /// When a channel member who is offline gets removed: the configured time after the later of their
    /// join and the moment their last device went offline. Online members never expire.
    func syncDeadline(_ user: Id, joinedTs: Int64) -> Int64? {
        guard !isOnline(user) else { return nil }
        let since = max(joinedTs, presence[user]?.offlineSince ?? joinedTs)
        let (deadline, overflow) = since.addingReportingOverflow(config.membersSyncTimeoutMs)
        return overflow ? .max : deadline  // event times near Int64.max saturate instead of trapping
    }

    /// Queues the members-sync deadline of one channel member, if they are offline.
    mutating func scheduleSync(_ user: Id, channel: Id, joinedTs: Int64) {
        guard let deadline = syncDeadline(user, joinedTs: joinedTs) else { return }
        derived.syncQueue.push(SyncQueue.Entry(deadline: deadline, channel: channel, user: user))
    }

    /// Whether a queued entry still describes a member's current deadline.
    private func isCurrent(_ e: SyncQueue.Entry) -> Bool {
        guard let channel = channels[e.channel], !channel.closed,
            let member = channel.members.first(where: { $0.user == e.user })
        else { return false }
        return syncDeadline(e.user, joinedTs: member.joinedTs) == e.deadline
    }

    /// Drops stale entries from the top of the queue and publishes the earliest live deadline.
    mutating func recomputeSyncDeadline() {
        while let top = derived.syncQueue.top, !isCurrent(top) { derived.syncQueue.pop() }
        derived.syncDeadline = derived.syncQueue.top?.deadline
    }

    /// The system `membersSync` event that stores the removals due at event time `ts` (raised to the last
    /// event's time, as `decide` does), or `nil` when nobody is due. The store appends it when an op that
    /// moves time that far is rejected, so decisions (which already saw the sync) and the stored state
    /// never disagree; an accepted op carries the sync in its own event instead.
    public func dueMembersSync(at ts: Int64) -> Event? {
        let ts = max(ts, lastTs)
        guard let deadline = derived.syncDeadline, ts >= deadline else { return nil }
        return Event(seq: lastSeq + 1, ts: ts, op: Op(actor: "", ts: ts, body: .membersSync))
    }

    /// Removes every channel member whose deadline is at or before `ts`; the remaining members get
    /// `membersSync` with the new member list. Runs before the event at `ts`, so replay repeats it.
    mutating func runMembersSync(at ts: Int64, seq: UInt64, into out: inout [Output]) {
        var expired: [Id: [Id]] = [:]
        while let top = derived.syncQueue.top, top.deadline <= ts {
            derived.syncQueue.pop()
            if isCurrent(top), !(expired[top.channel]?.contains(top.user) ?? false) {
                expired[top.channel, default: []].append(top.user)
            }
        }
        for id in expired.keys.sorted() {
            let gone = channels[id]!.members.map(\.user).filter { expired[id]!.contains($0) }
            for user in gone { leaveChannel(id, user) }
            let remaining = channels[id]!.memberIds
            for user in remaining {
                signal(seq, id, .membersSync, to: user, from: "", members: remaining, into: &out)
            }
        }
        recomputeSyncDeadline()
    }
}
