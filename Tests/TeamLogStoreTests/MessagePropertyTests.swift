import LMDB
import TeamLog
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

/// Seeded random mixes of team ops and messages through a real store, checked against a naive model
/// kept by the test from the op lines it fed and the membership before and after each op:
/// receivers, unread, last messages and receipt tallies; the LMDB queries against the model; replay, `--at`
/// (a scratch store) and audit.
@Suite struct MessagePropertyTests {
    static let users = (0..<40).map { Id("u\($0)") }
    static let small: Config = {
        var c = Config()
        c.teamMaxMembers = 25
        c.superTeamMaxMembers = 40
        return c
    }()

    /// What the test sent in one `message.send`, as the model reads it.
    struct Send {
        var sender: Id
        var id: Id
        var kind: Conversation.Kind
        var target: Id
        var directed: [Id]?
        var needReceipt = false
        var isCounted: Bool?
        var isPersisted: Bool?
        var status = false
        var disableUpdateLast = false
        var disableNotification = false
        var mentions: [Id] = []

        var counts: Bool { (isCounted ?? true) && (isPersisted ?? true) && !status }
        var stored: Bool { (isPersisted ?? true) && !status }
    }

    /// The kinds of line the mix produces (the model applies each when it was accepted).
    enum Line {
        case team(String)
        case send(Send)
        case read(user: Id, key: ConvKey, upTo: UInt64?)
        case receipt(user: Id, team: Id, ids: [Id])
        case login(Id, Id)
        case logout(Id, Id)
        case modify(user: Id, id: Id)

        var text: String {
            switch self {
            case .team(let line): return line
            case .send(let s):
                var pairs: [(String, JSONValue)] = [
                    ("op", .string("message.send")), ("actor", .string(s.sender)),
                    ("to", .object([("type", .string(s.kind.rawValue)), ("id", .string(s.target))])),
                    ("messageId", .string(s.id)),
                    ("content", .object([("type", .string("text")), ("text", .string("x"))])),
                ]
                if let d = s.directed { pairs.append(("directedUserIds", .array(d.map { .string($0) }))) }
                if s.needReceipt { pairs.append(("needReceipt", .bool(true))) }
                if let c = s.isCounted { pairs.append(("isCounted", .bool(c))) }
                if let p = s.isPersisted { pairs.append(("isPersisted", .bool(p))) }
                if s.status { pairs.append(("isStatusMessage", .bool(true))) }
                if s.disableUpdateLast { pairs.append(("disableUpdateLastMessage", .bool(true))) }
                if s.disableNotification { pairs.append(("disableNotification", .bool(true))) }
                if !s.mentions.isEmpty { pairs.append(("mentions", .array(s.mentions.map { .string($0) }))) }
                return JSONValue.object(pairs).jsonString
            case .read(let user, let key, let upTo):
                let conv = key.conversation(for: user).json
                if let upTo { return op("message.read", user, ["to": conv, "upTo": upTo]) }
                return op("message.read", user, ["to": conv])
            case .receipt(let user, let team, let ids):
                return op(
                    "message.receipt", user,
                    ["to": JSONValue.object([("type", .string("team")), ("id", .string(team))]), "messageIds": ids])
            case .login(let user, let device): return op("client.login", user, ["device": device])
            case .logout(let user, let device): return op("client.logout", user, ["device": device])
            case .modify(let user, let id):
                return op(
                    "message.modify", user, ["messageId": id, "content": JSONValue.object([("type", .string("text"))])])
            }
        }
    }

    /// The naive model: per user and conversation, the seqs of counted messages they received, their
    /// latest join, read position and last message; receipt tallies; online devices.
    struct Model {
        var received: [Id: [ConvKey: [UInt64]]] = [:]
        var joinSeq: [Id: [ConvKey: UInt64]] = [:]
        var readSeq: [Id: [ConvKey: UInt64]] = [:]
        var last: [Id: [ConvKey: (seq: UInt64, id: Id)]] = [:]
        /// Conversations each user has (a team once joined; p2p once a stored message was sent in it).
        var convs: [Id: Set<ConvKey>] = [:]
        var receipts: [Id: (receivers: [Id], read: [Id])] = [:]
        var online: [Id: Set<Id>] = [:]

        func unread(_ user: Id, _ key: ConvKey) -> Int {
            let base = max(readSeq[user]?[key] ?? 0, joinSeq[user]?[key] ?? 0)
            return (received[user]?[key] ?? []).filter { $0 > base }.count
        }

        /// The unread query as the model would answer it (counts and last messages from the model; the
        /// shape and order are the query's, whose exact text MessageQueryTests checks).
        func view(_ user: Id) -> JSONValue {
            World.unreadJSON(
                user: user,
                rows: (convs[user] ?? []).map { key in
                    (
                        key: key, unread: unread(user, key), readSeq: readSeq[user]?[key] ?? 0,
                        last: last[user]?[key].map { MessageRef(seq: $0.seq, messageId: $0.id) }
                    )
                })
        }
    }

    static func key(_ team: TeamState) -> ConvKey { ConvKey(team: team.id, kind: team.kind) }

    /// Generates the next line against the live state (only to make plausible ops; the model never reads it).
    static func next(
        _ rng: inout SplitMix64, _ world: World, _ teamLines: inout ArraySlice<String>, _ i: Int,
        _ receiptIds: [Id], _ sentIds: [Id]
    ) -> Line {
        let live = world.teams.values.filter { !$0.dismissed }.sorted { $0.id < $1.id }
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 30 || live.isEmpty, let line = teamLines.popFirst() { return .team(line) }
        let user = users.randomElement(using: &rng)!
        switch roll {
        case 30..<62:
            guard let team = live.randomElement(using: &rng) else { return .login(user, "d0") }
            let members = team.memberIds
            var s = Send(
                sender: rng.chance(0.92) ? members.randomElement(using: &rng)! : user, id: "m\(i)",
                kind: team.kind == .team ? .team : .superTeam, target: team.id)
            if rng.chance(0.03), let old = sentIds.randomElement(using: &rng) { s.id = old }
            if rng.chance(0.25) {
                var d = members.filter { _ in rng.chance(0.25) }
                if d.isEmpty || rng.chance(0.1) { d.append(rng.chance(0.5) ? s.sender : user) }
                s.directed = d
            }
            s.needReceipt = rng.chance(0.3)
            if rng.chance(0.12) { s.isCounted = rng.chance(0.3) }
            if rng.chance(0.1) { s.isPersisted = false }
            s.status = rng.chance(0.1)
            s.disableUpdateLast = rng.chance(0.12)
            s.disableNotification = rng.chance(0.1)
            if rng.chance(0.2) {
                s.mentions = members.filter { _ in rng.chance(0.2) } + (rng.chance(0.3) ? [user] : [])
            }
            return .send(s)
        case 62..<70:
            var peer = users.randomElement(using: &rng)!
            if peer == user { peer = rng.chance(0.5) ? "u0" : "u1" }  // and sometimes still oneself: badField
            var s = Send(sender: user, id: "m\(i)", kind: .p2p, target: peer)
            if rng.chance(0.15) { s.directed = [[peer], [user, peer], [user]].randomElement(using: &rng)! }
            if rng.chance(0.05) { s.directed = [peer, "u39x"] }  // notMember
            if rng.chance(0.12) { s.isCounted = rng.chance(0.3) }
            if rng.chance(0.1) { s.isPersisted = false }
            s.status = rng.chance(0.15)
            s.disableUpdateLast = rng.chance(0.12)
            s.needReceipt = rng.chance(0.2)
            return .send(s)
        case 70..<82:
            let keys = Array((world.userConvs[user] ?? [:]).keys).sorted()
            let key: ConvKey
            if let k = keys.randomElement(using: &rng), rng.chance(0.85) {
                key = k
            } else if let team = live.randomElement(using: &rng) {
                key = Self.key(team)
            } else {
                key = ConvKey(p2p: user, "u7")
            }
            let upTo: UInt64? = rng.chance(0.4) ? nil : UInt64.random(in: 0...(world.lastSeq + 3), using: &rng)
            return .read(user: user, key: key, upTo: upTo)
        case 82..<92:
            guard let id = receiptIds.randomElement(using: &rng) else { return .login(user, "d0") }
            var ids = [id]
            if rng.chance(0.2), let other = receiptIds.randomElement(using: &rng) { ids.append(other) }
            // Mostly a plausible receiver: a directed receiver, or a member of the message's team now.
            let plausible =
                world.receipts[id]?.directedReceivers
                ?? world.messages[id].flatMap { world.teams[$0.conv.id]?.memberIds } ?? []
            let actor = rng.chance(0.8) ? plausible.randomElement(using: &rng) ?? user : user
            // The message's own team, or now and then another one (noSuchMessage).
            let team =
                rng.chance(0.95) ? world.messages[id]?.conv.id ?? "t0" : live.randomElement(using: &rng)?.id ?? "t0"
            return .receipt(user: actor, team: team, ids: ids)
        case 92..<98:
            let device: Id = rng.chance(0.5) ? "d0" : "d1"
            return rng.chance(0.55) ? .login(user, device) : .logout(user, device)
        default:
            let id = sentIds.randomElement(using: &rng) ?? "m0"
            return .modify(user: rng.chance(0.8) ? world.messages[id]?.sender ?? user : user, id: id)
        }
    }

    @Test(arguments: [11, 12, 13, 14, 15] as [UInt64])
    func unreadReceiptsAndQueriesMatchANaiveModel(seed: UInt64) throws {
        let h = try StoreHarness(config: Self.small)
        // Odd seeds feed every line to a second store too, whose working set is 8 KiB and checkpointed
        // every 30 ops (nearly everything evicted and loaded again): the same records and answers.
        let tight =
            seed % 2 == 1 ? try StoreHarness(config: Self.small, cacheBytes: 8 << 10, checkpointOps: 30) : nil
        var rng = SplitMix64(seed: seed)
        var teamLines = ArraySlice(
            TeamWorkloadProbe.lines(count: 700, seed: seed, users: 40, teams: 8, invalidShare: 0.05, config: Self.small)
        )
        var model = Model()
        var receiptIds: [Id] = []
        var sentIds: [Id] = []
        var accepted = 0
        var counts: [String: Int] = [:]
        let total = 1_800

        for i in 0..<total {
            let line = Self.next(&rng, h.store.world, &teamLines, i, receiptIds, sentIds)
            let before = h.store.world.teams
            let records = try h.feed(line.text)
            if let tight {
                let same = try tight.feed(line.text) == records
                #expect(same, "seed \(seed) step \(i): a tight working set answers \(line.text) otherwise")
                if !same { return }
            }
            guard let event = records.first(where: { $0["kind"]?.stringValue == "event" }) else { continue }
            accepted += 1
            let seq = UInt64(event["seq"]!.intValue!)
            let deliveries = records.filter { $0["kind"]?.stringValue == "delivery" }
            let after = h.store.world.teams

            switch line {
            case .team(let text):
                counts["team", default: 0] += 1
                guard let id = (try? JSONParser.parse(Array(text.utf8)))?["team"]?.stringValue.map({ Id($0) }), let now = after[id]
                else { break }
                let old = before[id]
                let oldMembers = Set(old?.memberIds ?? [])
                let newMembers = now.memberIds
                for user in newMembers where !oldMembers.contains(user) {
                    model.joinSeq[user, default: [:]][Self.key(now)] = seq
                    model.convs[user, default: []].insert(Self.key(now))
                }
                // A tip reaches the members after the op and the removed ones; it becomes everyone's last.
                let removed = oldMembers.subtracting(newMembers)
                let tipDeliveries = deliveries.filter { $0["messageId"]?.stringValue?.hasPrefix("tip-") == true }
                for d in tipDeliveries {
                    let receivers = (d["receivers"]?.arrayValue ?? []).compactMap { $0.stringValue.map { Id($0) } }
                    let tipId = d["messageId"]!.stringValue!
                    let expected = Set(newMembers).union(removed)
                    if tipId.contains(".") {
                        #expect(Set(receivers) == expected, "\(text): \(tipId) receivers")
                    } else {
                        #expect(
                            Set(receivers).isSubset(of: Set(newMembers).union(oldMembers)),
                            "\(text): \(tipId) receivers")
                        #expect(Set(receivers).isSuperset(of: Set(newMembers)), "\(text): \(tipId) receivers")
                    }
                    for user in receivers { model.last[user, default: [:]][Self.key(now)] = (seq, Id(tipId)) }
                }

            case .send(let s):
                counts[s.kind == .p2p ? "p2p" : "send", default: 0] += 1
                sentIds.append(s.id)
                let key: ConvKey
                let expectedReceivers: [Id]
                var seers: [Id]
                if s.kind == .p2p {
                    key = ConvKey(p2p: s.sender, s.target)
                    let reaches =
                        (s.directed?.contains(s.target) ?? true)
                        && (!s.status || !(model.online[s.target] ?? []).isEmpty)
                    expectedReceivers = reaches ? [s.target] : []
                    seers = s.directed == nil ? [s.sender, s.target] : [s.sender] + expectedReceivers
                    if s.stored {  // SPEC §2: a message that is not stored creates no conversation
                        model.convs[s.sender, default: []].insert(key)
                        // nor, for the peer, one it does not receive (directed to the sender alone)
                        if reaches { model.convs[s.target, default: []].insert(key) }
                    }
                } else {
                    let team = try #require(before[s.target])
                    key = Self.key(team)
                    let roster = team.slots.compactMap { $0 }.sorted { $0.slot < $1.slot }.map(\.user)
                    expectedReceivers = roster.filter { u in
                        u != s.sender && (s.directed?.contains(u) ?? true)
                            && (!s.status || !(model.online[u] ?? []).isEmpty)
                    }
                    seers = s.directed == nil ? roster : [s.sender] + expectedReceivers
                }
                let d = try #require(deliveries.first, "\(line.text): no delivery")
                let receivers = (d["receivers"]?.arrayValue ?? []).compactMap { $0.stringValue.map { Id($0) } }
                #expect(receivers == expectedReceivers, "\(line.text)")
                #expect(d["messageId"]?.stringValue == s.id.string)
                if s.counts {
                    for user in receivers { model.received[user, default: [:]][key, default: []].append(seq) }
                }
                if s.stored && !s.disableUpdateLast {
                    for user in seers { model.last[user, default: [:]][key] = (seq, s.id) }
                }
                if s.stored && s.needReceipt && s.kind != .p2p {
                    model.receipts[s.id] = (receivers, [])
                    receiptIds.append(s.id)
                }

            case .read(let user, let key, let upTo):
                counts["read", default: 0] += 1
                // SPEC §2: reading a conversation with no stored message creates none (and moves nothing).
                guard model.convs[user]?.contains(key) == true else { break }
                let position = min(upTo ?? (seq - 1), seq - 1)
                model.readSeq[user, default: [:]][key] = max(model.readSeq[user]?[key] ?? 0, position)

            case .receipt(let user, _, let ids):
                counts["receipt", default: 0] += 1
                for id in ids {
                    guard var tally = model.receipts[id] else {
                        Issue.record("\(line.text): accepted for \(id), which has no tally in the model")
                        continue
                    }
                    #expect(tally.receivers.contains(user), "\(line.text): accepted from a non-receiver")
                    if !tally.read.contains(user) { tally.read.append(user) }
                    model.receipts[id] = tally
                }

            case .login(let user, let device): model.online[user, default: []].insert(device)
            case .logout(let user, let device): model.online[user, default: []].remove(device)
            case .modify: counts["modify", default: 0] += 1
            }

            if i % 50 == 49 {
                let violations = h.store.world.invariantViolations()
                #expect(violations.isEmpty, "seed \(seed) step \(i): \(violations.prefix(3))")
            }
            if i % 600 == 599 || i == total - 1 {
                try Self.compare(h, model, seed: seed, step: i)
                if let tight { try Self.compare(tight, model, seed: seed, step: i) }
            }
        }
        #expect(accepted > 900, "seed \(seed): only \(accepted) accepted")
        for (kind, least) in [("team", 250), ("send", 200), ("p2p", 80), ("read", 100), ("receipt", 50), ("modify", 5)]
        {
            #expect((counts[kind] ?? 0) >= least, "seed \(seed): too few accepted \(kind): \(counts)")
        }
        #expect(model.receipts.values.contains { !$0.read.isEmpty }, "no receipt was ever counted")

        // Reopen: the LMDB queries still answer the same; the replayed projections equal the stored ones.
        let views = try Self.users.map { try h.store.unreadView($0) }
        try h.reopen()
        #expect(
            try Self.users.map { try h.store.unreadView($0) } == views, "seed \(seed): unread changed across a reopen")
        try Self.compare(h, model, seed: seed, step: total)
        if let tight {
            try Self.compare(tight, model, seed: seed, step: total)
            let stats = tight.store.workingSetStats
            #expect(stats.evictions > 1_000 && stats.loads > 100, "the tight store must evict and reload: \(stats)")
            #expect(try tight.store.audit().ok)
        }
        let replay = try h.store.replay()
        #expect(replay.problem == nil)
        #expect(replay.events == accepted)
        let rebuilt = ProjectionCodec.allRecords(replay.world)
        let stored = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }
        for table in ProjectionTable.allCases {
            let s = stored[table] ?? []
            let r = rebuilt[table] ?? []
            let same = s.map(\.0) == r.map(\.0) && s.map(\.1) == r.map(\.1)
            #expect(same, "seed \(seed) \(table): \(s.count) stored vs \(r.count) replayed records differ")
        }
        let all = try h.store.loadAllProjections()
        #expect(replay.world.receipts == all.receipts)
        #expect(replay.world.userConvs == all.userConvs)
        let report = try h.store.audit()
        #expect(report.ok, "\(report.tables.compactMap(\.difference)) \(String(describing: report.chainProblem))")
    }

    /// `--at SEQ` answers from a scratch store replayed up to SEQ: every unread, receipts, team and channel
    /// answer recorded live at three points of a random mix equals the scratch store's at that seq.
    @Test(arguments: [21, 22] as [UInt64])
    func answersAtASeqEqualTheLiveAnswersThen(seed: UInt64) throws {
        let h = try StoreHarness(config: Self.small)
        var rng = SplitMix64(seed: seed)
        var teamLines = ArraySlice(
            TeamWorkloadProbe.lines(count: 400, seed: seed, users: 40, teams: 8, invalidShare: 0.05, config: Self.small)
        )
        var receiptIds: [Id] = []
        var sentIds: [Id] = []
        var snapshots: [(seq: UInt64, answers: [String: JSONValue?])] = []
        func answers(_ store: Store) throws -> [String: JSONValue?] {
            var out: [String: JSONValue?] = [:]
            for user in Self.users { out["unread \(user)"] = try store.unreadView(user) }
            for id in receiptIds { out["receipts \(id)"] = try store.receiptsView(id) }
            for team in h.store.world.teams.keys { out["team \(team)"] = try store.teamView(team) }
            return out
        }
        for i in 0..<900 {
            let line = Self.next(&rng, h.store.world, &teamLines, i, receiptIds, sentIds)
            try h.feed(line.text)
            if case .send(let s) = line {
                sentIds.append(s.id)
                if h.store.world.receipts[s.id] != nil && !receiptIds.contains(s.id) { receiptIds.append(s.id) }
            }
            if i % 300 == 299 { snapshots.append((h.store.world.lastSeq, try answers(h.store))) }
        }
        #expect(snapshots.count == 3 && snapshots[0].seq > 100)
        for (seq, live) in snapshots {
            let scratch = try h.store.replayIntoScratch(upTo: seq)
            defer { scratch.remove() }
            #expect(scratch.problem == nil && UInt64(scratch.events) == seq)
            let replayed = try answers(scratch.store)
            for (query, answer) in live {
                // Receipts of messages sent after `seq` have no tally yet at `seq`.
                let expected = replayed[query] ?? nil
                #expect(answer == expected, "seed \(seed) at \(seq): \(query)")
            }
            #expect(live.values.contains { ($0?["total"]?.intValue ?? 0) > 0 }, "some unread to compare")
        }
    }

    /// The store's answers against the model, for every user and tally.
    static func compare(_ h: StoreHarness, _ model: Model, seed: UInt64, step: Int) throws {
        let world = try h.store.loadAllProjections()
        let everyone = Set(users).union(world.userConvs.keys).sorted()
        for user in everyone {
            let view = try h.store.unreadView(user)
            let naive = model.view(user)
            #expect(
                view == naive,
                "seed \(seed) step \(step): \(user)\n store \(view.jsonString)\n model \(naive.jsonString)")
            for row in view["conversations"]?.arrayValue ?? [] {
                #expect((row["unread"]?.intValue ?? -1) >= 0)
            }
            if view != naive { return }  // one report per run is enough
        }
        for (id, tally) in world.receipts {
            let m = try #require(model.receipts[id], "\(id): a tally the model does not know")
            let readers = tally.readersInOrder
            #expect(Set(readers).isSubset(of: Set(m.receivers)), "\(id): read outside the receivers")
            #expect(tally.readCount + tally.unreadCount == m.receivers.count, "\(id): read + unread != receivers")
            #expect(!tally.complete || readers.count == tally.readCount, "\(id): a receipt counted twice")
            let expected: JSONValue = .object([
                ("messageId", .string(id)), ("read", .int(Int64(m.read.count))),
                ("unread", .int(Int64(m.receivers.count - m.read.count))),
                ("readUsers", .array(m.read.map { .string($0) })),
                ("unreadUsers", .array(m.receivers.filter { !m.read.contains($0) }.map { .string($0) })),
            ])
            #expect(try h.store.receiptsView(id) == expected, "seed \(seed) step \(step): receipts of \(id)")
        }
        #expect(world.receipts.count == model.receipts.count)
    }
}
