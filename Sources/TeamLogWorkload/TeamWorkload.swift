public import TeamLog

/// A seeded, realistic stream of team operations, as JSON lines.
///
/// It keeps its own exact model (`World`, with `decide`/`apply`) so almost every op it writes is valid
/// against the state the processor will have; a small share is deliberately invalid (wrong actor, bad
/// field, malformed JSON) so rejections appear as they do in real feeds.
public struct TeamWorkload {
    /// Sizes and mix.
    public struct Options: Sendable {
        public var seed: UInt64 = 42
        /// Distinct users.
        public var users: Int = 2_000
        /// Teams to create over the run.
        public var teams: Int = 100
        /// Largest initial team (Zipf-distributed sizes from 3).
        public var maxInitialMembers: Int = 500
        /// Share of supergroups.
        public var superTeamShare: Double = 0.05
        /// Share of ops that are invalid on purpose.
        public var invalidShare: Double = 0.02
        /// Start time (ms) and mean step between ops.
        public var startTs: Int64 = 1_767_225_600_000
        public var meanStepMs: Int64 = 250
        /// Give every op an `opId`.
        public var opIds: Bool = true
        public init() {}
    }

    public let options: Options
    private var rng: SplitMix64
    /// The exact model of the state after every op written so far.
    public private(set) var model: World
    private var ts: Int64
    private var count = 0
    private var teamIds: [Id] = []
    private var dismissedCount = 0

    public init(options: Options = Options(), config: Config = Config()) {
        self.options = options
        rng = SplitMix64(seed: options.seed)
        model = World(config: config)
        model.wantsDeliveries = false
        ts = options.startTs
    }

    private func user(_ i: Int) -> Id { "u\(i)" }

    private mutating func randomUser() -> Id { user(Int.random(in: 0..<options.users, using: &rng)) }

    /// Teams created so far (ids `t0`, `t1`, …).
    public var createdTeams: Int { teamIds.count }

    /// Applies an op to the model when it is accepted (for ops a composing workload writes itself).
    public mutating func observe(_ op: Op) {
        if case .success(let event) = model.decide(op, now: op.ts ?? ts) {
            var scratch: [Output] = []
            model.apply(event, into: &scratch)
            if case .teamDismiss = op.body { dismissedCount += 1 }
        }
    }

    /// Advances the workload clock and returns the time of the next op.
    public mutating func tick() -> Int64 {
        ts += Int64.random(in: 0...(2 * options.meanStepMs), using: &rng)
        return ts
    }

    /// The next line of the workload.
    public mutating func next() -> String {
        count += 1
        ts += Int64.random(in: 0...(2 * options.meanStepMs), using: &rng)
        if rng.chance(options.invalidShare / 4) { return malformed() }
        var op = pick()
        op.ts = ts
        if options.opIds { op.opId = "op-\(options.seed)-\(count)" }
        if rng.chance(options.invalidShare) { op.actor = randomUser() }  // likely not permitted
        if case .success(let event) = model.decide(op, now: ts) {
            var scratch: [Output] = []
            model.apply(event, into: &scratch)
            if case .teamDismiss = op.body { dismissedCount += 1 }
        }
        return op.jsonLine
    }

    /// Lines that fail before the state is consulted.
    private mutating func malformed() -> String {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: return "{\"op\":\"team.create\",\"actor\":"
        case 1: return "{\"op\":\"team.fly\",\"actor\":\"u1\"}"
        case 2: return "{\"op\":\"team.leave\",\"actor\":\"u1\"}"
        case 3: return "{\"op\":\"team.muteAll\",\"actor\":\"u1\",\"team\":\"t0\",\"muted\":\"yes\"}"
        default: return "{\"op\":\"team.leave\",\"actor\":\"\",\"team\":\"t0\"}"
        }
    }

    private mutating func randomTeam() -> TeamState? {
        guard !teamIds.isEmpty else { return nil }
        let start = Int.random(in: 0..<teamIds.count, using: &rng)
        for i in 0..<teamIds.count {
            let id = teamIds[(start + i) % teamIds.count]
            if let t = model.teams[id], !t.dismissed { return t }
        }
        return nil
    }

    private mutating func member(of team: TeamState, where filter: (Member) -> Bool = { _ in true }) -> Member? {
        let candidates = team.slots.lazy.compactMap { $0 }.filter(filter)
        guard !candidates.isEmpty else { return nil }
        let all = Array(candidates)
        return all[Int.random(in: 0..<all.count, using: &rng)]
    }

    private mutating func nonMembers(of team: TeamState, _ n: Int) -> [Id] {
        var out: [Id] = []
        for _ in 0..<(n * 3) where out.count < n {
            let u = randomUser()
            if !team.isMember(u) && !out.contains(u) { out.append(u) }
        }
        return out
    }

    /// Chooses a plausible op against the model.
    private mutating func pick() -> Op {
        let live = teamIds.count - dismissedCount
        let creating = live < options.teams && (live < 3 || rng.chance(0.08))
        guard !creating, let team = randomTeam() else { return create() }
        let admin = member(of: team) { $0.role.isAdmin }!
        let anyone = member(of: team)!
        let fallback = Op(actor: anyone.user, body: .memberSetNotify(team: team.id, state: .all))
        let roll = Int.random(in: 0..<100, using: &rng)
        let body: OpBody
        var actor = admin.user
        switch roll {
        case 0..<14:
            let targets = nonMembers(of: team, Int.random(in: 1...3, using: &rng))
            if targets.isEmpty { return fallback }
            body = .teamInvite(team: team.id, targets: targets)
        case 14..<22:
            // The smallest invitee, not `invites.first`: a dictionary's order changes with each process's
            // hash seed, and the same seed must give the same workload in every run.
            if let invitee = team.invites.keys.min(), let inviters = team.invites[invitee] {
                actor = invitee
                body =
                    rng.chance(0.8)
                    ? .teamAcceptInvite(team: team.id, inviter: inviters[0])
                    : .teamRejectInvite(team: team.id, inviter: inviters[0])
            } else {
                actor = nonMembers(of: team, 1).first ?? randomUser()
                body = .teamApply(team: team.id, message: rng.chance(0.5) ? "hi, let me in" : nil)
            }
        case 22..<32:
            actor = nonMembers(of: team, 1).first ?? randomUser()
            body = .teamApply(team: team.id, message: rng.chance(0.5) ? "hello from \(actor)" : nil)
        case 32..<40:
            if let applicant = team.applications.keys.sorted().first {
                body =
                    rng.chance(0.75)
                    ? .teamApproveApply(team: team.id, applicant: applicant)
                    : .teamRejectApply(team: team.id, applicant: applicant)
            } else {
                body = .memberSetNotify(team: team.id, state: NotifyState.allCases.randomElement(using: &rng)!)
                actor = anyone.user
            }
        case 40..<48:
            guard let target = member(of: team, where: { $0.role == .normal }) else { return fallback }
            body = .teamKick(team: team.id, targets: [target.user])
        case 48..<56:
            guard let leaver = member(of: team, where: { $0.role != .owner }) else { return fallback }
            actor = leaver.user
            body = .teamLeave(team: team.id)
        case 56..<66:
            var f = TeamFields()
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: f.name = "Team \(Int.random(in: 0..<1000, using: &rng))"
            case 1: f.announcement = "Standup at \(Int.random(in: 8...11, using: &rng))"
            case 2: f.intro = "We ship things"
            case 3: f.avatar = "https://img.example/\(team.id).png"
            case 4:
                f.name = "Renamed \(Int.random(in: 0..<100, using: &rng))"
                f.avatar = "https://img.example/\(team.id)-2.png"
            default: f.joinMode = JoinMode.allCases.randomElement(using: &rng)
            }
            body = .teamUpdate(team: team.id, fields: f)
        case 66..<70:
            body = .teamMuteAll(team: team.id, muted: !team.muted)
        case 70..<76:
            guard let target = member(of: team, where: { $0.role == .normal }) else { return fallback }
            let owner = team.member(team.owner)!
            actor = owner.user
            body =
                rng.chance(0.6)
                ? .teamAddManagers(team: team.id, targets: [target.user])
                : .teamRemoveManagers(
                    team: team.id, targets: [member(of: team) { $0.role == .manager }?.user ?? target.user])
        case 76..<84:
            guard let target = member(of: team, where: { $0.role == .normal }) else { return fallback }
            let muted = target.mutedUntil == nil
            body = .teamMuteMember(
                team: team.id, target: target.user, muted: muted,
                until: muted && rng.chance(0.5) ? ts + 3_600_000 : nil)
        case 84..<95:
            actor = anyone.user
            body = .memberSetNotify(team: team.id, state: NotifyState.allCases.randomElement(using: &rng)!)
        case 95..<98:
            guard let target = member(of: team, where: { $0.role != .owner }) else { return fallback }
            actor = team.owner
            body = .teamTransferOwner(team: team.id, target: target.user, leave: rng.chance(0.3))
        default:
            actor = team.owner
            body = rng.chance(0.05) ? .teamDismiss(team: team.id) : .teamMuteAll(team: team.id, muted: !team.muted)
        }
        return Op(actor: actor, body: body)
    }

    private mutating func create() -> Op {
        let id: Id = "t\(teamIds.count)"
        teamIds.append(id)
        var c = TeamCreate(team: id)
        c.kind = rng.chance(options.superTeamShare) ? .superTeam : .team
        c.name = "Team \(teamIds.count)"
        let limit = model.config.maxMembers(c.kind) - 1
        let size = min(limit, 2 + rng.zipf(max: options.maxInitialMembers))
        var members = Set<Id>()
        let owner = randomUser()
        while members.count < min(size, options.users - 1) {
            let u = randomUser()
            if u != owner { members.insert(u) }
        }
        c.members = members.sorted()
        c.joinMode = [.free, .apply, .apply, .private].randomElement(using: &rng)!
        c.inviteMode = rng.chance(0.3) ? .all : .manager
        c.beInviteMode = rng.chance(0.3) ? .needConsent : .noConsent
        c.updateInfoMode = rng.chance(0.2) ? .all : .manager
        c.announcement = rng.chance(0.5) ? "Welcome to \(c.name)" : ""
        return Op(actor: owner, body: .teamCreate(c))
    }
}
