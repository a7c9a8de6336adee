import TeamLog

/// The benchmark workload: team operations (from `TeamWorkload`, whose exact model it shares) plus, mostly,
/// messages — some directed, some with receipts, some status messages, mentions — reads, receipts and
/// signaling, over teams with Zipf-distributed sizes from 3 up to a few supergroups of `maxTeam` members.
///
/// Messages are generated against the model's rosters but not applied to it (they never change a
/// roster), so generating stays cheap; a few are rejected (muted senders, stale receipts), as in a feed.
public struct MixedWorkload {
    public struct Options: Sendable {
        public var seed: UInt64 = 42
        public var users: Int = 250_000
        /// Live teams kept by the team-op generator.
        public var teams: Int = 200
        /// Size of the largest supergroup; two more at a quarter and a sixteenth of it.
        public var maxTeam: Int = 200_000
        /// Share of lines that are message traffic (send, read, receipt, signaling); the rest team ops.
        public var messageShare: Double = 0.9
        public var startTs: Int64 = 1_767_225_600_000
        public init() {}

        /// The options with these sizes (tests make small workloads this way).
        public init(seed: UInt64, users: Int, teams: Int, maxTeam: Int) {
            self.seed = seed
            self.users = users
            self.teams = teams
            self.maxTeam = maxTeam
        }
    }

    public let options: Options
    private var rng: SplitMix64
    private var teamOps: TeamWorkload
    private var setup: [Op] = []
    private var count = 0
    private var messageCount = 0
    private var recentReceipts: [(id: Id, team: Id, sender: Id)] = []
    private var channelCount = 0
    private var openChannels:
        [(id: Id, members: [Id], invites: [(target: Id, inviter: Id, requestId: Id)])] = []

    public init(options: Options = Options()) {
        self.options = options
        rng = SplitMix64(seed: options.seed ^ 0x5EED)
        var t = TeamWorkload.Options()
        t.seed = options.seed
        t.users = max(options.users, options.maxTeam + 1)
        t.teams = options.teams
        t.maxInitialMembers = min(options.maxTeam, 5_000)
        t.startTs = options.startTs
        t.meanStepMs = 5
        var config = Config()
        config.superTeamMaxMembers = max(config.superTeamMaxMembers, options.maxTeam + 1)
        teamOps = TeamWorkload(options: t, config: config)
        // A few supergroups up front: created with a first chunk, grown by invitations of 20,000.
        guard options.messageShare > 0 else { return }
        for (i, size) in [options.maxTeam, options.maxTeam / 4, options.maxTeam / 16].enumerated() where size >= 3 {
            let id: Id = "sg\(i)"
            var c = TeamCreate(team: id)
            c.kind = .superTeam
            c.name = "Supergroup \(i)"
            c.joinMode = .free
            let owner: Id = "u\(i)"
            var next = 0
            func take(_ n: Int) -> [Id] {
                var out: [Id] = []
                while out.count < n && next < size {
                    if "u\(next)" != owner { out.append("u\(next)") }
                    next += 1
                }
                return out
            }
            c.members = take(min(size - 1, 20_000))
            setup.append(Op(actor: owner, body: .teamCreate(c)))
            while next < size {
                setup.append(Op(actor: owner, body: .teamInvite(team: id, targets: take(20_000))))
            }
        }
    }

    /// The next line.
    public mutating func next() -> String {
        count += 1
        var op: Op
        if !setup.isEmpty {
            op = setup.removeFirst()
            op.ts = teamOps.tick()
            op.opId = "g\(options.seed)-\(count)"
            teamOps.observe(op)
            return op.jsonLine
        }
        guard rng.chance(options.messageShare) else { return teamOps.next() }
        let ts = teamOps.tick()
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 78, let m = send() {
            op = m
        } else if roll < 90, let r = read() {
            op = r
        } else if roll < 94, let r = receipt() {
            op = r
        } else if let s = signaling() {
            op = s
        } else {
            return teamOps.next()
        }
        op.ts = ts
        op.opId = "g\(options.seed)-\(count)"
        switch op.body {
        case .clientLogin, .clientLogout, .channelCreate, .channelJoin, .channelInvite, .channelAccept, .channelReject,
            .channelLeave, .channelClose:
            teamOps.observe(op)  // presence and channels change the model; messages do not
        default:
            break
        }
        return op.jsonLine
    }

    // MARK: Pieces

    private mutating func liveTeam() -> TeamState? {
        let teams = teamOps.model.teams
        guard !teams.isEmpty else { return nil }
        // Supergroups get a share of traffic by name; others uniformly.
        if rng.chance(0.15), let sg = teams["sg\(Int.random(in: 0..<3, using: &rng))"], !sg.dismissed { return sg }
        for _ in 0..<8 {
            let id: Id = "t\(Int.random(in: 0..<max(1, teamOps.createdTeams), using: &rng))"
            if let t = teams[id], !t.dismissed, t.memberCount > 1 { return t }
        }
        return nil
    }

    private mutating func member(_ team: TeamState) -> Member {
        while true {
            if let m = team.slots[Int.random(in: 0..<team.slots.count, using: &rng)] { return m }
        }
    }

    private mutating func send() -> Op? {
        messageCount += 1
        let id: Id = "m\(options.seed)-\(messageCount)"
        let content = JSONValue.object([("type", .string("text")), ("text", .string("message \(messageCount)"))])
        if rng.chance(0.03) {
            let a: Id = "u\(Int.random(in: 0..<options.users, using: &rng))"
            let b: Id = "u\(Int.random(in: 0..<options.users, using: &rng))"
            guard a != b else { return nil }
            return Op(
                actor: a, body: .messageSend(MessageSend(to: Conversation(.p2p, b), messageId: id, content: content)))
        }
        guard let team = liveTeam() else { return nil }
        // Senders as a real client would be allowed: not muted, an admin when the team is muted.
        func allowed(_ m: Member) -> Bool { m.mutedUntil == nil && (!team.muted || m.role.isAdmin) }
        var sender = team.muted ? team.member(team.owner)! : member(team)
        for _ in 0..<8 where !allowed(sender) { sender = member(team) }
        var m = MessageSend(
            to: Conversation(team.kind == .team ? .team : .superTeam, team.id), messageId: id, content: content)
        if rng.chance(0.08) {
            m.directedUserIds = (0..<Int.random(in: 1...3, using: &rng)).map { _ in member(team).user }
        }
        if team.memberCount <= 500 && rng.chance(0.08) {
            m.needReceipt = true
            recentReceipts.append((id, team.id, sender.user))
            if recentReceipts.count > 64 { recentReceipts.removeFirst() }
        }
        if rng.chance(0.03) {
            m.isStatusMessage = true
            m.isPersisted = false
            m.isCounted = false
        }
        if rng.chance(0.1) { m.mentions = [member(team).user] }
        if rng.chance(0.05) { m.disableNotification = true }
        if rng.chance(0.03) { m.isCounted = false }
        if rng.chance(0.02) { m.disableUpdateLastMessage = true }
        return Op(actor: sender.user, body: .messageSend(m))
    }

    private mutating func read() -> Op? {
        guard let team = liveTeam() else { return nil }
        return Op(
            actor: member(team).user,
            body: .messageRead(to: Conversation(team.kind == .team ? .team : .superTeam, team.id), upTo: nil))
    }

    private mutating func receipt() -> Op? {
        guard let r = recentReceipts.randomElement(using: &rng), let team = teamOps.model.teams[r.team], !team.dismissed
        else { return nil }
        let reader = member(team)
        guard reader.user != r.sender else { return nil }
        return Op(actor: reader.user, body: .messageReceipt(to: Conversation(.team, r.team), messageIds: [r.id]))
    }

    private mutating func signaling() -> Op? {
        let user: Id = "u\(Int.random(in: 0..<min(options.users, 5_000), using: &rng))"
        let device: Id = rng.chance(0.7) ? "phone" : "pad"
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<4:
            return Op(
                actor: user, device: device,
                body: teamOps.model.devices(of: user).contains(device) ? .clientLogout : .clientLogin)
        case 4:
            channelCount += 1
            let id: Id = "c\(options.seed)-\(channelCount)"
            // Calls end: the oldest open channel is closed by one of its members before a new one starts.
            if openChannels.count >= 32, let oldest = openChannels.first, let closer = oldest.members.first {
                openChannels.removeFirst()
                channelCount -= 1
                return Op(actor: closer, body: .channelClose(channel: oldest.id))
            }
            if openChannels.count >= 32 { openChannels.removeFirst() }
            openChannels.append((id, [], []))
            return Op(actor: user, body: .channelCreate(channel: id, kind: .audio, ext: nil))
        default:
            guard !openChannels.isEmpty else { return nil }
            let i = Int.random(in: 0..<openChannels.count, using: &rng)
            let channel = openChannels[i]
            if channel.members.isEmpty || rng.chance(0.3) {
                openChannels[i].members.append(user)
                return Op(actor: user, device: device, body: .channelJoin(channel: channel.id))
            }
            let inviter = channel.members.randomElement(using: &rng)!
            if let invite = channel.invites.first {
                openChannels[i].invites.removeFirst()
                openChannels[i].members.append(invite.target)
                return Op(
                    actor: invite.target, device: device,
                    body: .channelAccept(channel: channel.id, inviter: invite.inviter, requestId: invite.requestId))
            }
            var inv = ChannelInvite(channel: channel.id, target: user, requestId: Id("r\(count)"))
            inv.offline = rng.chance(0.5)
            openChannels[i].invites.append((user, inviter, inv.requestId))
            return Op(actor: inviter, body: .channelInvite(inv))
        }
    }
}
