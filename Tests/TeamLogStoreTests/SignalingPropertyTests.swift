import LMDB
import TeamLog
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

/// One generated signaling op, with its fields kept for the model.
private struct SigOp {
    var name: String
    var actor: String
    var ts: Int64
    var device: String?
    var channel: String?
    var kind: String?
    var target: String?
    var inviter: String?
    var requestId: String?
    var offline: Bool?
    var pushText: String?

    var line: String {
        var pairs: [(String, JSONValue)] = [("op", .string(name)), ("actor", .string(actor)), ("ts", .int(ts))]
        let optional: [(String, String?)] = [
            ("device", device), ("channel", channel), ("kind", kind), ("target", target), ("inviter", inviter),
            ("requestId", requestId), ("pushText", pushText),
        ]
        for (key, value) in optional { if let value { pairs.append((key, .string(value))) } }
        if let offline { pairs.append(("offline", .bool(offline))) }
        if name == "channel.control" { pairs.append(("data", .string("d"))) }
        return JSONValue.object(pairs).jsonString
    }
}

/// A naive model of SPEC §1.3, written from the rules and nothing else: it predicts each op's rejection
/// code, and for accepted ones every `signal` and the `login` record, in order.
private struct SignalingModel {
    struct Invite: Equatable {
        var target: String
        var inviter: String
        var requestId: String
        var offline: Bool
    }

    struct Channel {
        var kind = "audio"
        var closed = false
        var members: [(user: String, joined: Int64)] = []
        var invites: [Invite] = []
        func isMember(_ u: String) -> Bool { members.contains { $0.user == u } }
    }

    static let timeout: Int64 = 120_000
    var devices: [String: Set<String>] = [:]
    /// When the user's last device went offline (absent: online now, or never online).
    var offlineSince: [String: Int64] = [:]
    var channels: [String: Channel] = [:]
    var lastTs: Int64 = 0

    func online(_ u: String) -> Bool { !(devices[u] ?? []).isEmpty }
    func sortedDevices(_ u: String) -> [String] { (devices[u] ?? []).sorted() }

    func deadline(_ u: String, joined: Int64) -> Int64? {
        if online(u) { return nil }
        return max(joined, offlineSince[u] ?? joined) + Self.timeout
    }

    /// Removes every member due at `ts`; returns the membersSync signals (channel, to, members).
    mutating func membersSync(at ts: Int64) -> [(channel: String, to: String, members: [String])] {
        var out: [(String, String, [String])] = []
        for id in channels.keys.sorted() where !channels[id]!.closed {
            let before = channels[id]!.members
            let kept = before.filter { m in deadline(m.user, joined: m.joined).map { $0 > ts } ?? true }
            guard kept.count != before.count else { continue }
            channels[id]!.members = kept
            for m in kept { out.append((id, m.user, kept.map(\.user))) }
        }
        return out
    }

    /// The code the op gets against the state after members sync at its time, or nil when accepted.
    func decide(_ op: SigOp) -> RejectionCode? {
        var m = self
        _ = m.membersSync(at: max(op.ts, lastTs))
        return m.check(op)
    }

    private func check(_ op: SigOp) -> RejectionCode? {
        if op.name.hasPrefix("client.") || op.name == "clock.tick" { return nil }
        let id = op.channel!
        if op.name == "channel.create" {
            guard let c = channels[id] else { return nil }
            return c.closed ? .closed : .notPermitted
        }
        guard let c = channels[id] else { return .noSuchChannel }
        if c.closed { return .closed }
        switch op.name {
        case "channel.join": return c.isMember(op.actor) ? .alreadyMember : nil
        case "channel.invite":
            if !c.isMember(op.actor) { return .notMember }
            return c.isMember(op.target!) ? .alreadyMember : nil
        case "channel.cancelInvite":
            return c.invites.contains(
                Invite(target: op.target!, inviter: op.actor, requestId: op.requestId!, offline: true))
                || c.invites.contains(
                    Invite(target: op.target!, inviter: op.actor, requestId: op.requestId!, offline: false))
                ? nil : .noInvitation
        case "channel.reject", "channel.accept":
            return c.invites.contains {
                $0.target == op.actor && $0.inviter == op.inviter! && $0.requestId == op.requestId!
            }
                ? nil : .noInvitation
        case "channel.leave", "channel.close": return c.isMember(op.actor) ? nil : .notMember
        case "channel.control":
            if !c.isMember(op.actor) { return .notMember }
            if let t = op.target, !c.isMember(t) { return .notMember }
            return nil
        default: fatalError("unknown op \(op.name)")
        }
    }

    /// Applies an accepted op at event time `ts`; returns its expected records (JSON), members sync first.
    /// `queue` is the stored-signal queue recomputed from records, for the login's offline list.
    mutating func apply(_ op: SigOp, seq: UInt64, ts: Int64, queue: [String: [JSONValue]]) -> [JSONValue] {
        var out: [JSONValue] = membersSync(at: ts).map { s in
            Self.signal(seq, s.channel, "membersSync", to: s.to, devices: sortedDevices(s.to), members: s.members)
        }
        lastTs = max(lastTs, ts)
        let actor = op.actor
        func send(_ event: String, to: String, store: Bool = false, requestId: String? = nil) {
            let devices = sortedDevices(to)
            out.append(
                Self.signal(
                    seq, op.channel!, event, to: to, devices: devices, stored: devices.isEmpty && store,
                    from: actor, requestId: requestId))
        }
        func syncOthers(_ event: String) {
            let others = sortedDevices(actor).filter { $0 != op.device }
            if !others.isEmpty {
                out.append(
                    Self.signal(
                        seq, op.channel!, event, to: actor, devices: others, sync: true, from: actor,
                        requestId: op.requestId))
            }
        }
        func removeInvite(target: String, inviter: String) -> Invite {
            let i = channels[op.channel!]!.invites.firstIndex {
                $0.target == target && $0.inviter == inviter && $0.requestId == op.requestId!
            }!
            return channels[op.channel!]!.invites.remove(at: i)
        }
        switch op.name {
        case "client.login":
            devices[actor, default: []].insert(op.device!)
            offlineSince[actor] = nil
            let open = channels.keys.sorted().filter { !channels[$0]!.closed && channels[$0]!.isMember(actor) }
            out.append(
                .object([
                    ("kind", .string("login")), ("seq", .int(Int64(seq))), ("user", .string(actor)),
                    ("device", .string(op.device!)), ("offline", .array(queue[actor] ?? [])),
                    (
                        "channels",
                        .array(
                            open.map { id in
                                .object([
                                    ("channel", .string(id)), ("kind", .string(channels[id]!.kind)),
                                    ("members", .array(channels[id]!.members.map { .string($0.user) })),
                                ])
                            })
                    ),
                ]))
        case "client.logout":
            let was = online(actor)
            devices[actor]?.remove(op.device!)
            if was && !online(actor) { offlineSince[actor] = ts }
        case "clock.tick":
            break
        case "channel.create":
            var c = Channel()
            c.kind = op.kind ?? "audio"
            channels[op.channel!] = c
        case "channel.join":
            let others = channels[op.channel!]!.members.map(\.user)
            channels[op.channel!]!.members.append((actor, ts))
            channels[op.channel!]!.invites.removeAll { $0.target == actor }  // joining uses up invitations
            for u in others { send("join", to: u) }
        case "channel.invite":
            channels[op.channel!]!.invites.append(
                Invite(target: op.target!, inviter: actor, requestId: op.requestId!, offline: op.offline ?? false))
            send("invite", to: op.target!, store: op.offline ?? false, requestId: op.requestId)
        case "channel.cancelInvite":
            let invite = removeInvite(target: op.target!, inviter: actor)
            send("cancelInvite", to: op.target!, store: invite.offline, requestId: op.requestId)
        case "channel.reject":
            _ = removeInvite(target: actor, inviter: op.inviter!)
            send("reject", to: op.inviter!, requestId: op.requestId)
            syncOthers("reject")
        case "channel.accept":
            _ = removeInvite(target: actor, inviter: op.inviter!)
            let others = channels[op.channel!]!.members.map(\.user).filter { $0 != actor }
            if !channels[op.channel!]!.isMember(actor) {
                channels[op.channel!]!.members.append((actor, ts))
                channels[op.channel!]!.invites.removeAll { $0.target == actor }
            }
            send("accept", to: op.inviter!, requestId: op.requestId)
            for u in others { send("join", to: u) }
            syncOthers("accept")
        case "channel.leave":
            channels[op.channel!]!.members.removeAll { $0.user == actor }
            for m in channels[op.channel!]!.members { send("leave", to: m.user) }
        case "channel.close":
            channels[op.channel!]!.closed = true
            for m in channels[op.channel!]!.members { send("close", to: m.user) }
        case "channel.control":
            let targets = op.target.map { [$0] } ?? channels[op.channel!]!.members.map(\.user).filter { $0 != actor }
            for u in targets { send("control", to: u) }
        default:
            fatalError("unknown op \(op.name)")
        }
        return out
    }

    static func signal(
        _ seq: UInt64, _ channel: String, _ event: String, to: String, devices: [String],
        stored: Bool = false, sync: Bool = false, members: [String]? = nil, from: String? = nil,
        requestId: String? = nil
    ) -> JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("kind", .string("signal")), ("seq", .int(Int64(seq))), ("channel", .string(channel)),
            ("event", .string(event)), ("to", .string(to)), ("devices", .array(devices.map { .string($0) })),
            ("stored", .bool(stored)), ("sync", .bool(sync)),
        ]
        if let members { pairs.append(("members", .array(members.map { .string($0) }))) }
        if let from { pairs.append(("from", .string(from))) }
        if let requestId { pairs.append(("requestId", .string(requestId))) }
        return .object(pairs)
    }
}

/// A seeded generator of signaling ops: users u0…u9 with 1–3 devices, channels c0…c4. It picks mostly
/// plausible ops from the model's state (members act, pending invitations get answered) and some at random.
private struct SignalingGenerator {
    var rng: SplitMix64
    var ts: Int64 = 1_000
    var requests = 0
    static let users = (0..<10).map { "u\($0)" }
    static let channelIds = (0..<5).map { "c\($0)" }

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    static func devices(_ user: String) -> [String] {
        let n = 1 + Int(user.dropFirst())! % 3
        return (0..<n).map { "d\($0)" }
    }

    mutating func user() -> String { Self.users.randomElement(using: &rng)! }
    mutating func device(_ user: String) -> String { Self.devices(user).randomElement(using: &rng)! }
    mutating func maybeDevice(_ user: String) -> String? { rng.chance(0.7) ? device(user) : nil }

    mutating func next(_ model: SignalingModel) -> SigOp {
        ts += Int64.random(in: 0...3_000, using: &rng)
        // Now and then an older time, which the processor raises to the last event's.
        let opTs = rng.chance(0.03) && ts > 20_000 ? ts - 10_000 : ts
        var op = SigOp(name: "", actor: user(), ts: opTs)
        let open = Self.channelIds.filter { model.channels[$0].map { !$0.closed } ?? false }
        let openWithMembers = open.filter { !model.channels[$0]!.members.isEmpty }
        let invites = open.flatMap { id in model.channels[id]!.invites.map { (id, $0) } }
        let plausible = rng.chance(0.85)
        /// A member of an open channel as the actor (when any and plausible).
        func memberActor() {
            if plausible, let id = openWithMembers.randomElement(using: &rng) {
                op.channel = id
                op.actor = model.channels[id]!.members.randomElement(using: &rng)!.user
            } else {
                op.channel = Self.channelIds.randomElement(using: &rng)!
            }
        }
        let roll = Double.random(in: 0..<1, using: &rng)
        switch roll {
        case ..<0.10:
            op.name = "client.login"
            op.device = device(op.actor)
        case ..<0.18:
            op.name = "client.logout"
            let online = Self.users.filter { model.online($0) }
            if plausible, let u = online.randomElement(using: &rng) {
                op.actor = u
                op.device = model.devices[u]!.sorted().randomElement(using: &rng)!
            } else {
                op.device = device(op.actor)
            }
        case ..<0.22:
            op.name = "clock.tick"
            op.actor = "sys"
            ts += Int64.random(in: 0...200_000, using: &rng)
            op.ts = ts
        case ..<0.27:
            op.name = "channel.create"
            op.channel = Self.channelIds.randomElement(using: &rng)!
            op.kind = ["audio", "video", "custom", nil].randomElement(using: &rng)!
        case ..<0.39:
            op.name = "channel.join"
            op.channel =
                (plausible ? open.randomElement(using: &rng) : nil) ?? Self.channelIds.randomElement(using: &rng)!
            op.device = maybeDevice(op.actor)
        case ..<0.55:
            op.name = "channel.invite"
            memberActor()
            op.target = user()
            requests += 1
            op.requestId = "q\(requests)"
            op.offline = [true, false, nil].randomElement(using: &rng)!
            op.pushText = rng.chance(0.3) ? "ring \(requests)" : nil
        case ..<0.61:
            op.name = "channel.cancelInvite"
            if plausible, let (id, i) = invites.randomElement(using: &rng).map({ ($0.0, $0.1) }) {
                (op.channel, op.actor, op.target, op.requestId) = (id, i.inviter, i.target, i.requestId)
            } else {
                (op.channel, op.target, op.requestId) = (
                    Self.channelIds.randomElement(using: &rng)!, user(), "q\(requests)"
                )
            }
        case ..<0.78:
            op.name = rng.chance(0.4) ? "channel.reject" : "channel.accept"
            if plausible, let (id, i) = invites.randomElement(using: &rng) {
                (op.channel, op.actor, op.inviter, op.requestId) = (id, i.target, i.inviter, i.requestId)
            } else {
                (op.channel, op.inviter, op.requestId) = (
                    Self.channelIds.randomElement(using: &rng)!, user(), "q\(requests)"
                )
            }
            op.device = maybeDevice(op.actor)
        case ..<0.85:
            op.name = "channel.leave"
            memberActor()
        case ..<0.87:
            op.name = "channel.close"
            memberActor()
            if open.count <= 2 && plausible { op.channel = "c-none" }  // keep some channels alive
        default:
            op.name = "channel.control"
            memberActor()
            if rng.chance(0.5) {
                let members = model.channels[op.channel!]?.members.map(\.user) ?? []
                op.target = (plausible ? members.randomElement(using: &rng) : nil) ?? user()
            }
        }
        return op
    }
}

/// Checks a run's records against the model and the invariants of SPEC §1.3 and §4, line by line.
private struct SignalingChecker {
    var model = SignalingModel()
    /// Every op fed so far; record `line` L is `ops[L - 1]`.
    var ops: [SigOp] = []
    /// Stored notifications per user, recomputed from `signal` records with `stored: true`.
    var queues: [String: [JSONValue]] = [:]
    /// Channels a `close` signal was seen for.
    var closedSeen: Set<String> = []
    var problems: [String] = []
    var accepted = 0
    var rejected = 0
    var logins = 0
    var storedSignals = 0
    var deliveredOffline = 0
    var membersSyncs = 0
    /// Seq of the last stored event (an accepted op's, or a system members sync's).
    var lastSeq: UInt64 = 0
    /// `membersSync` signals of a system event: they precede the `rejected` record of the op that moved
    /// time to the deadline (SPEC §1.3: the removal is stored whether or not that op is accepted).
    var systemSignals: [JSONValue] = []

    mutating func problem(_ text: String) {
        if problems.count < 8 { problems.append(text) }
    }

    /// Consumes the records of one `feed` (the lines are already in `ops`).
    mutating func check(_ records: [JSONValue]) {
        var expected: [JSONValue] = []
        var op: SigOp?
        func flush(_ checker: inout SignalingChecker) {
            if !expected.isEmpty {
                checker.problem("line \(op?.line ?? "?"): missing records \(expected.map(\.jsonString))")
            }
            expected = []
        }
        for record in records {
            let kind = record["kind"]?.stringValue ?? "?"
            switch kind {
            case "rejected", "event":
                flush(&self)
                let line = Int(record["line"]?.intValue ?? 0)
                let current = ops[line - 1]
                op = current
                let predicted = model.decide(current)
                if kind == "rejected" {
                    rejected += 1
                    let due = model.membersSync(at: max(current.ts, model.lastTs))
                    if !due.isEmpty {
                        lastSeq += 1
                        model.lastTs = max(model.lastTs, current.ts)
                    }
                    let expectedSync = due.map { s in
                        SignalingModel.signal(
                            lastSeq, s.channel, "membersSync", to: s.to, devices: model.sortedDevices(s.to),
                            members: s.members)
                    }
                    if expectedSync.map(\.jsonString) != systemSignals.map(\.jsonString) {
                        problem(
                            "\(current.line): rejected after the system signals \(systemSignals.map(\.jsonString)), expected \(expectedSync.map(\.jsonString))"
                        )
                    }
                    systemSignals = []
                    let code = record["code"]?.stringValue
                    if code != predicted?.rawValue {
                        problem(
                            "\(current.line): rejected \(code ?? "?"), the model says \(predicted?.rawValue ?? "accepted")"
                        )
                    }
                    continue
                }
                accepted += 1
                if !systemSignals.isEmpty {
                    problem("\(current.line): system signals before an accepted op: \(systemSignals.map(\.jsonString))")
                    systemSignals = []
                }
                lastSeq = UInt64(record["seq"]?.intValue ?? 0)
                if let predicted { problem("\(current.line): accepted, the model says \(predicted.rawValue)") }
                let ts = record["ts"]?.intValue ?? 0
                if ts != max(current.ts, model.lastTs) {
                    problem("\(current.line): ts \(ts), expected \(max(current.ts, model.lastTs))")
                }
                expected = model.apply(current, seq: UInt64(record["seq"]?.intValue ?? 0), ts: ts, queue: queues)
            case "signal":
                if record["event"]?.stringValue == "membersSync" { membersSyncs += 1 }
                if record["event"]?.stringValue == "close", let c = record["channel"]?.stringValue {
                    closedSeen.insert(c)
                }
                if record["stored"] == .bool(true) {
                    storedSignals += 1
                    if record["devices"] != .array([]) { problem("stored signal with devices: \(record.jsonString)") }
                    var entry: [(String, JSONValue)] = [
                        ("seq", record["seq"]!), ("channel", record["channel"]!), ("event", record["event"]!),
                        ("from", record["from"] ?? .null),
                    ]
                    if let r = record["requestId"] { entry.append(("requestId", r)) }
                    if record["event"]?.stringValue == "invite", let text = op?.pushText {
                        entry.append(("pushText", .string(text)))
                    }
                    queues[record["to"]!.stringValue!, default: []].append(.object(entry))
                }
                if expected.isEmpty && record["event"]?.stringValue == "membersSync" {
                    systemSignals.append(record)  // a system event's, checked at the rejection that follows
                    continue
                }
                expectNext(record, &expected, op)
            case "login":
                logins += 1
                let user = record["user"]?.stringValue ?? "?"
                // Exactly what was stored for the user since their previous login, then nothing.
                let offline = record["offline"]?.arrayValue ?? []
                if offline != queues[user] ?? [] {
                    problem(
                        "login of \(user) at seq \(record["seq"]?.intValue ?? 0): offline \(JSONValue.array(offline).jsonString), queued since the last login \(JSONValue.array(queues[user] ?? []).jsonString)"
                    )
                }
                deliveredOffline += offline.count
                queues[user] = nil
                for c in record["channels"]?.arrayValue ?? [] {
                    let id = c["channel"]?.stringValue ?? "?"
                    if closedSeen.contains(id) { problem("login of \(user) lists closed channel \(id)") }
                    if c["members"]?.arrayValue?.contains(.string(user)) != true {
                        problem("login of \(user) lists \(id) without them as a member")
                    }
                }
                expectNext(record, &expected, op)
            default:
                problem("unexpected record \(record.jsonString)")
            }
        }
        flush(&self)
        if !systemSignals.isEmpty { problem("system signals without a rejection: \(systemSignals.map(\.jsonString))") }
    }

    mutating func expectNext(_ record: JSONValue, _ expected: inout [JSONValue], _ op: SigOp?) {
        guard let first = expected.first else {
            problem("\(op?.line ?? "?"): unexpected \(record.jsonString)")
            return
        }
        expected.removeFirst()
        if first.jsonString != record.jsonString {
            problem("\(op?.line ?? "?"):\n  got      \(record.jsonString)\n  expected \(first.jsonString)")
        }
    }

    /// The store's state after a commit: channels as the model has them, and no member of an open channel
    /// offline for the timeout or longer at the last event's time.
    mutating func checkState(_ world: World) {
        for violation in world.invariantViolations() { problem("invariant: \(violation)") }
        for (id, channel) in world.channels {
            guard let m = model.channels[id.string] else { problem("channel \(id) unknown to the model"); continue }
            if channel.closed != m.closed { problem("channel \(id): closed \(channel.closed), model \(m.closed)") }
            let got = channel.members.map { "\($0.user)@\($0.joinedTs)" }
            let want = m.members.map { "\($0.user)@\($0.joined)" }
            if got != want { problem("channel \(id): members \(got), model \(want)") }
            let invites = channel.invites.map { "\($0.target)<\($0.inviter)#\($0.requestId)/\($0.offline)" }
            let wantInvites = m.invites.map { "\($0.target)<\($0.inviter)#\($0.requestId)/\($0.offline)" }
            if invites != wantInvites { problem("channel \(id): invites \(invites), model \(wantInvites)") }
            guard !channel.closed else { continue }
            for member in channel.members where !model.online(member.user.string) {
                let since = max(member.joinedTs, model.offlineSince[member.user.string] ?? member.joinedTs)
                if world.lastTs - since >= SignalingModel.timeout {
                    problem("\(member.user) offline since \(since) is still in \(id) at \(world.lastTs)")
                }
            }
        }
        if world.channels.count != model.channels.count {
            problem("\(world.channels.count) channels, model \(model.channels.count)")
        }
        for user in SignalingGenerator.users where world.devices(of: Id(user)).map(\.string) != model.sortedDevices(user) {
            problem("\(user) online on \(world.devices(of: Id(user))), model \(model.sortedDevices(user))")
        }
        let pending = Dictionary(uniqueKeysWithValues: world.offlineQueues.map { ($0.key.string, $0.value.count) }).filter { $0.value > 0 }
        let recomputed = queues.mapValues(\.count).filter { $0.value > 0 }
        if pending != recomputed { problem("stored queues \(pending), recomputed from records \(recomputed)") }
    }
}

/// Random signaling sequences (seeded) on a real store, in small random batches: every record matches a
/// naive model of the rules; logins deliver exactly what was stored since the last one; no closed channel
/// is synced; nobody stays offline in a channel past the timeout; replay equals the stored projections;
/// and a reopen half-way changes nothing.
@Suite struct SignalingPropertyTests {
    private struct Run {
        var records: [String] = []
        var chunks: [[SigOp]] = []
    }

    static let opsPerRun = 800

    /// Generates and feeds `opsPerRun` ops in chunks of 1–8 lines, checking after each chunk.
    private static func generateAndFeed(seed: UInt64, into h: StoreHarness) throws -> (Run, SignalingChecker) {
        var gen = SignalingGenerator(seed: seed)
        var checker = SignalingChecker()
        var run = Run()
        while checker.ops.count < opsPerRun, checker.problems.isEmpty {
            let size = Int.random(in: 1...8, using: &gen.rng)
            let chunk = (0..<size).map { _ in gen.next(checker.model) }
            checker.ops += chunk
            run.chunks.append(chunk)
            let records = try h.feed(chunk.map(\.line))
            run.records += records.map(\.jsonString)
            checker.check(records)
            checker.checkState(h.store.world)
        }
        return (run, checker)
    }

    private static func expectReplayEqualsStored(_ h: StoreHarness, _ note: String) throws {
        let replay = try h.store.replay()
        #expect(replay.problem == nil, "\(note): \(String(describing: replay.problem))")
        let rebuilt = ProjectionCodec.allRecords(replay.world)
        let stored = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }
        for table in ProjectionTable.allCases {
            let s = stored[table] ?? []
            let r = rebuilt[table] ?? []
            let same = s.map(\.0) == r.map(\.0) && s.map(\.1) == r.map(\.1)
            #expect(same, "\(note): \(table): \(s.count) stored vs \(r.count) replayed records differ")
        }
        let live = h.store.world
        #expect(replay.world.channels == live.channels, "\(note): replayed channels differ")
        #expect(replay.world.offlineQueues == live.offlineQueues, "\(note): replayed queues differ")
        #expect(replay.world.presence == live.presence, "\(note): replayed presence differs")
        #expect(replay.world.syncDeadline == live.syncDeadline, "\(note): replayed members-sync deadline differs")
        #expect(
            replay.world.userChannels.filter { !$0.value.isEmpty } == live.userChannels.filter { !$0.value.isEmpty },
            "\(note): replayed user → channels index differs")
        let report = try h.store.audit()
        #expect(
            report.ok,
            "\(note): \(report.tables.compactMap(\.difference)) \(String(describing: report.chainProblem)) \(String(describing: report.checkpointProblem))"
        )
    }

    @Test(arguments: [11, 22, 33, 44, 55] as [UInt64])
    func randomSequencesMatchTheModelAndReplay(seed: UInt64) throws {
        let batch = 1 + Int(seed % 5)
        let h = try StoreHarness(batchSize: batch)
        let (run, checker) = try Self.generateAndFeed(seed: seed, into: h)
        #expect(checker.problems.isEmpty, "seed \(seed):\n\(checker.problems.joined(separator: "\n"))")
        guard checker.problems.isEmpty else { return }
        // The mix must exercise what it claims to.
        let stats =
            "accepted \(checker.accepted), rejected \(checker.rejected), logins \(checker.logins), stored \(checker.storedSignals), delivered \(checker.deliveredOffline), membersSync \(checker.membersSyncs)"
        #expect(checker.accepted > 400 && checker.rejected > 40, "\(stats)")
        #expect(
            checker.logins > 40 && checker.storedSignals > 10 && checker.deliveredOffline > 5
                && checker.membersSyncs > 5, "\(stats)")
        try Self.expectReplayEqualsStored(h, "seed \(seed)")

        // The same chunks into a fresh store, reopened half-way: the same records, bytes and chain.
        let b = try StoreHarness(batchSize: batch)
        var records: [String] = []
        let half = run.chunks.count / 2
        for (i, chunk) in run.chunks.enumerated() {
            if i == half {
                try Self.expectReplayEqualsStored(b, "seed \(seed) before the reopen")
                try b.reopen()
            }
            records += try b.feed(chunk.map(\.line)).map(\.jsonString)
        }
        let firstDiff = zip(records, run.records).enumerated().first { $0.element.0 != $0.element.1 }
        #expect(
            records.count == run.records.count && firstDiff == nil,
            "seed \(seed): records differ after a reopen at chunk \(half): \(firstDiff.map { "#\($0.offset)\n  \($0.element.0)\n  \($0.element.1)" } ?? "count \(records.count) vs \(run.records.count)")"
        )
        let pa = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }
        let pb = try b.store.readProjections { txn in try b.store.storedProjections(in: txn) }
        for table in ProjectionTable.allCases {
            let same = pa[table]!.map(\.0) == pb[table]!.map(\.0) && pa[table]!.map(\.1) == pb[table]!.map(\.1)
            #expect(same, "seed \(seed): \(table) differs with a reopen half-way")
        }
        #expect(h.store.lastHash == b.store.lastHash)
        #expect(h.store.world.syncDeadline == b.store.world.syncDeadline)
        try Self.expectReplayEqualsStored(b, "seed \(seed) with a reopen")
    }
}
