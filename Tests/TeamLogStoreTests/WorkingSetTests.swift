import LMDB
import TeamLog
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

/// Issue 11 §3 and §4: the writer holds a bounded working set. Open loads no team, conversation, message
/// or tally; an op loads what its footprint names; clean units beyond `cacheBytes` are evicted after each
/// checkpoint. Nothing of that may change an answer or a stored byte.
@Suite struct WorkingSetTests {
    /// The mixed workload (team ops, team and p2p messages, directed ones, receipts, reads, signaling),
    /// small enough for a test.
    static func mixedLines(count: Int, seed: UInt64) -> [String] {
        var w = MixedWorkload(options: .init(seed: seed, users: 400, teams: 30, maxTeam: 120))
        return (0..<count).map { _ in w.next() }
    }

    /// Every answer the queries give for the ids the lines name: teams, unread per user, receipts and
    /// messages.
    static func answers(_ store: Store, _ lines: [String]) throws -> [String: String] {
        var teams: Set<String> = []
        var users: Set<String> = []
        var messages: Set<String> = []
        for line in lines {
            guard let value = try? JSONParser.parse(Array(line.utf8)) else { continue }
            if let t = value["team"]?.stringValue { teams.insert(t) }
            if let a = value["actor"]?.stringValue { users.insert(a) }
            if let m = value["messageId"]?.stringValue { messages.insert(m) }
            if value["to"]?["type"]?.stringValue != "p2p", let t = value["to"]?["id"]?.stringValue { teams.insert(t) }
        }
        var out: [String: String] = [:]
        for t in teams { out["team \(t)"] = try store.teamView(Id(t))?.jsonString ?? "none" }
        for u in users { out["unread \(u)"] = try store.unreadView(Id(u)).jsonString }
        for m in messages {
            out["receipts \(m)"] = try store.receiptsView(Id(m))?.jsonString ?? "none"
            out["message \(m)"] = try store.messageView(Id(m))?.jsonString ?? "none"
        }
        return out
    }

    /// Checkpoints both stores and expects the same stored records, table by table.
    static func expectSameStoredProjections(_ x: Store, _ y: Store) throws {
        try x.checkpointNow()
        try y.checkpointNow()
        let a = try x.readProjections { txn in try x.storedProjections(in: txn) }
        let b = try y.readProjections { txn in try y.storedProjections(in: txn) }
        for table in ProjectionTable.allCases {
            #expect(a[table]!.map(\.0) == b[table]!.map(\.0) && a[table]!.map(\.1) == b[table]!.map(\.1), "\(table)")
        }
    }

    /// A history many times the budget: the store that evicts after every checkpoint gives the same
    /// records, the same stored bytes and the same answers as one that keeps everything, and a fresh
    /// replay agrees (audit).
    @Test func aHistoryManyTimesTheBudgetAnswersLikeAFreshReplay() throws {
        let lines = Self.mixedLines(count: 6_000, seed: 5)
        let roomy = try StoreHarness(batchSize: 64)
        let tight = try StoreHarness(batchSize: 64, cacheBytes: 32 << 10, checkpointOps: 200)
        let roomyRecords = try roomy.feed(lines)
        let tightRecords = try tight.feed(lines)
        #expect(roomyRecords == tightRecords, "the records of a tight working set differ")
        #expect(roomyRecords.filter { $0["kind"]?.stringValue == "event" }.count > 5_000)

        let stats = tight.store.workingSetStats
        // Sweeps run as checkpoints finish, so how many depends on the checkpointer thread's pace (a loaded
        // machine has fewer): these are floors that any eviction at all passes.
        #expect(stats.evictions > 500, "\(stats)")
        #expect(stats.loads > 100, "evicted units must come back when needed: \(stats)")
        #expect(stats.sweeps > 2, "\(stats)")
        let roomyStats = roomy.store.workingSetStats
        #expect(roomyStats.evictions == 0 && roomyStats.loads == 0, "\(roomyStats)")
        // The resident estimate of the roomy store is the history's; the tight one stays near its budget
        // (what the last checkpoint could not evict is at most the ops since it).
        #expect(roomyStats.residentBytes > 20 * stats.budgetBytes, "\(roomyStats)")

        try Self.expectSameStoredProjections(roomy.store, tight.store)
        #expect(try Self.answers(roomy.store, lines) == Self.answers(tight.store, lines))
        let report = try tight.store.audit()
        #expect(report.ok, "\(report.tables.compactMap(\.difference))")
    }

    /// Open loads none of the teams, conversations, messages or tallies, whatever the history; the first
    /// op on a team loads its roster (and the units it names) and decides exactly as before the reopen.
    @Test func openLoadsNothingAndTheFirstOpLoadsItsFootprint() throws {
        let h = try StoreHarness()
        try h.feed(TeamWorkloadProbe.lines(count: 2_000, seed: 8))
        try h.feed([
            op("team.create", "own", ["team": "wt", "members": ["a", "b", "c"]]),
            op("message.send", "a", ["to": Msg.team("wt"), "messageId": "w1",
                "content": Msg.content("text", "hi"), "needReceipt": true]),
        ])
        let before = try h.store.loadAllProjections()
        try h.reopen()
        #expect(h.store.replayedAtOpen == 0)
        let w = h.store.world
        #expect(w.teams.isEmpty && w.convs.isEmpty && w.userConvs.isEmpty && w.messages.isEmpty && w.receipts.isEmpty)
        #expect(h.store.workingSetStats.lookups == 0)

        let records = try h.feed(
            op("message.receipt", "b", ["to": Msg.team("wt"), "messageIds": ["w1"]]))
        #expect(records.first?["kind"]?.stringValue == "event", "\(records)")
        #expect(Set(h.store.world.teams.keys) == ["wt"], "only the team the op names is loaded")
        #expect(h.store.world.teams["wt"] == before.teams["wt"])
        #expect(h.store.world.messages["w1"] == before.messages["w1"])
        #expect(h.store.world.receipts["w1"]?.readCount == 1)
        // A repeat is known from the store after another reopen: counted once.
        try h.reopen()
        try h.feed(op("message.receipt", "b", ["to": Msg.team("wt"), "messageIds": ["w1"]]))
        try h.feed(op("message.receipt", "c", ["to": Msg.team("wt"), "messageIds": ["w1"]]))
        let receipts = try #require(try h.store.receiptsView("w1"))
        #expect(receipts["readUsers"] == .array([.string("b"), .string("c")]), "\(receipts.jsonString)")
        // A reused message id is found in the store, not in memory.
        try h.reopen()
        let again = try h.feed(
            op("message.send", "a", ["to": Msg.team("wt"), "messageId": "w1",
                "content": Msg.content("text", "again")]))
        #expect(again.first?["code"]?.stringValue == "duplicateMessageId", "\(again)")
        #expect(try h.store.audit().ok)
    }

    /// A team the store does not have names a conversation nobody has: creating it looks up the team and
    /// its tip's id, not a user conversation per member (each a miss in the B-tree). A re-used team id is
    /// still found (and rejected) however much was evicted, and the new team's views answer as usual.
    @Test func aNewTeamLooksUpNoneOfItsMembersViews() throws {
        let h = try StoreHarness()
        let members = (0..<300).map { "m\($0)" }
        let before = h.store.workingSetStats.lookups
        let records = try h.feed(op("team.create", "own", ["team": "big", "members": members]))
        #expect(records.first?["kind"]?.stringValue == "event", "\(records)")
        let created = h.store.workingSetStats.lookups - before
        #expect(created <= 3, "the team, its tip's id: \(created) lookups")
        #expect(h.store.world.userConvCount == 301)
        // Not probed, but still stamped at the create's seq once it committed: the views it made are in
        // the sweeps' queue and can be evicted later (a view left unstamped would stay resident for good).
        let conv = ConvKey(team: "big", kind: .team)
        let seq = h.store.world.lastSeq
        let stamped = (["own"] + members).filter { h.store.world.stamp(of: .userConv(Id($0), conv)) == seq }
        #expect(stamped.count == 301, "the create's views are stamped at its seq \(seq)")

        try h.reopen()  // nothing resident: the team must be looked up, found, and the create rejected
        let again = try h.feed(op("team.create", "own", ["team": "big", "members": ["m1"]]))
        #expect(again.first?["code"]?.stringValue == "teamExists", "\(again)")
        let sent = try h.feed(op("message.send", "m7", ["to": Msg.team("big"), "messageId": "b1",
            "content": Msg.content("text", "hi")]))
        #expect(sent.first?["kind"]?.stringValue == "event", "\(sent)")
        #expect(try h.store.teamView("big")?["members"]?.arrayValue?.count == 301)
        #expect(try h.store.audit().ok)
    }

    /// Messages leave the writer's working set once a committed checkpoint holds them (a walk of their
    /// shards at each commit, not the sweeps): those asking for receipts stay for their receipts, the
    /// uncheckpointed ones stay, and an old one is found again in the store for a modify, a duplicate id
    /// and the queries — the same answers and stored bytes as a store that keeps everything.
    @Test func checkpointedMessagesLeaveBeforeTheSweeps() throws {
        // A budget whose eighth 40 messages pass, and far more than the teams, views and tallies need.
        let budget = 320 * 40 * 8
        let h = try StoreHarness(batchSize: 10, cacheBytes: budget, checkpointOps: 1_000_000)
        let roomy = try StoreHarness(batchSize: 10)
        var lines = [op("team.create", "own", ["team": "wm", "members": ["a", "b", "c"]])]
        for i in 0..<300 {
            var fields: KeyValuePairs<String, Any> = ["to": Msg.team("wm"), "messageId": "n\(i)",
                "content": Msg.content("text", "hi \(i)")]
            if i % 50 == 0 {
                fields = ["to": Msg.team("wm"), "messageId": "n\(i)", "content": Msg.content("text", "hi \(i)"),
                    "needReceipt": true]
            }
            lines.append(op("message.send", ["a", "b", "c"][i % 3], fields))
        }
        for harness in [h, roomy] { try harness.feed(lines) }
        try h.store.checkpointNow()
        // 32 commits of 10 ops: a commit walks 256 × 10 / 301 (the last interval's ops) → 9 of the 256 shards.
        let more = (300..<620).map { i in
            op("message.send", "a", ["to": Msg.team("wm"), "messageId": "n\(i)", "content": Msg.content("text", "x")])
        }
        for harness in [h, roomy] { try harness.feed(more) }
        try h.store.commit()
        let resident = Set(h.store.world.messages.keys.map(\.string))
        #expect(!resident.contains("n1") && !resident.contains("n299"), "checkpointed messages are dropped")
        #expect(resident.isSuperset(of: ["n0", "n50", "n250"]), "those asking for receipts stay: \(resident.sorted())")
        #expect(resident.isSuperset(of: (300..<620).map { "n\($0)" }), "the uncheckpointed ones stay")
        #expect(h.store.workingSetStats.evictions >= 290, "\(h.store.workingSetStats)")

        let after = [
            op("message.modify", "b", ["messageId": "n1", "content": Msg.content("text", "edited")]),
            op("message.send", "c", ["to": Msg.team("wm"), "messageId": "n2", "content": Msg.content("text", "again")]),
            op("message.receipt", "b", ["to": Msg.team("wm"), "messageIds": ["n50"]]),
        ]
        let records = try h.feed(after)
        #expect(records == (try roomy.feed(after)), "the same records")
        #expect(records.first?["kind"]?.stringValue == "event", "\(records)")
        #expect(records[1]["code"]?.stringValue == "duplicateMessageId", "\(records)")
        for id in ["n1", "n2", "n50", "n299"] {
            #expect(try h.store.messageView(Id(id)) == roomy.store.messageView(Id(id)), "\(id)")
        }
        try Self.expectSameStoredProjections(h.store, roomy.store)
        #expect(try h.store.audit().ok)
    }

    /// Eviction keeps units whose changes are not in a committed checkpoint: with a budget of zero and
    /// no checkpoint due, everything an op changed stays resident, and a checkpoint then frees it.
    @Test func dirtyUnitsStayUntilTheirCheckpoint() throws {
        let h = try StoreHarness(cacheBytes: 0, checkpointOps: 1_000_000)
        try h.feed([
            op("team.create", "own", ["team": "d1", "members": ["a", "b"]]),
            op("message.send", "a", ["to": Msg.team("d1"), "messageId": "x1",
                "content": Msg.content("text", "hi")]),
        ])
        #expect(h.store.world.teams["d1"] != nil && h.store.world.messages["x1"] != nil)
        try h.store.checkpointNow()  // writes them; the sweep at the next checkpoint may evict them
        try h.feed(op("message.send", "b", ["to": Msg.p2p("a"), "messageId": "p1",
            "content": Msg.content("text", "yo")]))
        try h.store.checkpointNow()
        #expect(h.store.world.teams["d1"] == nil && h.store.world.messages["x1"] == nil, "clean units are evicted")
        #expect(h.store.world.messages["p1"] != nil, "the unit changed after the checkpoint that swept stays")
        #expect(try h.store.teamView("d1")?["members"]?.arrayValue?.count == 3)
        #expect(try h.store.audit().ok)
    }

    /// A modify decides whether its message's team was dismissed (SPEC §1.1: every later op on it is
    /// `dismissed` but a read), and names only the message: with both evicted, the message is loaded, then
    /// its team (a second round of the prefetch) — the same answer as a store that keeps everything.
    @Test func aModifyOfAnEvictedMessageFindsItsTeamDismissed() throws {
        let h = try StoreHarness(cacheBytes: 0, checkpointOps: 1_000_000)
        let roomy = try StoreHarness()
        let lines = [
            op("team.create", "own", ["team": "d2", "members": ["a", "b"]]),
            op("message.send", "a", ["to": Msg.team("d2"), "messageId": "y1", "content": Msg.content("text", "hi")]),
            op("team.dismiss", "own", ["team": "d2"]),
        ]
        for harness in [h, roomy] { try harness.feed(lines) }
        try h.store.checkpointNow()
        try h.feed(op("client.login", "z", ["device": "d"]))
        try h.store.checkpointNow()
        #expect(h.store.world.teams["d2"] == nil && h.store.world.messages["y1"] == nil, "both evicted")
        let modify = op("message.modify", "a", ["messageId": "y1", "content": Msg.content("text", "late")])
        let records = try h.feed(modify)
        #expect(records.first?["code"]?.stringValue == "dismissed", "\(records)")
        _ = try roomy.feed(op("client.login", "z", ["device": "d"]))
        #expect(records == (try roomy.feed(modify)), "the same records")
        #expect(try h.store.messageView("y1") == roomy.store.messageView("y1"))
    }

    /// A 32 KiB working set, checkpointed only when asked (`checkpointNow`), without fsync.
    static var tinyBudgetExplicitCheckpoints: Store.Options {
        var options = Store.Options()
        options.noSync = true
        options.cacheBytes = 32 << 10
        options.checkpointOps = 1 << 40
        options.checkpointMs = 1 << 40
        return options
    }

    /// A sweep is spread over commits: a checkpoint starts it with a step sized by the batch committed
    /// (`1,024 + 8 × ops` queue entries at most), and each following commit takes the next step, without
    /// waiting for another checkpoint, until the resident state is down to three quarters of the budget.
    /// (One sweep at once took 300–400 ms of the writer's thread in a stream: its worst latencies.)
    @Test func aSweepIsSpreadOverTheFollowingCommits() throws {
        let dir = TemporaryDirectory()
        let options = Self.tinyBudgetExplicitCheckpoints
        let store = try Store(path: dir.child("s"), options: options)
        let lines = Self.mixedLines(count: 4_000, seed: 11)
        var ops = lines.compactMap { try? OpParser.parse(line: $0).get() }[...]
        func submitOne() throws {
            guard let op = ops.popFirst() else { throw StoreError("the workload ran out") }
            _ = try store.submit(op, now: 0)
        }
        for _ in 0..<3_000 { try submitOne() }
        try store.commit()
        try store.checkpointNow()  // every unit resident now is clean once this checkpoint is committed
        let before = store.workingSetStats  // over budget with nothing clean yet: nothing evicted
        #expect(before.evictions == 0, "\(before)")
        try submitOne()
        try store.commit()
        try store.checkpointNow()  // the sweep starts: a step for one op
        let first = store.workingSetStats
        #expect(first.sweeps == before.sweeps + 1, "\(first)")
        #expect(first.evictions > 0 && first.evictions <= 1_024 + 8, "\(first)")
        #expect(first.residentBytes > first.budgetBytes / 4 * 3, "one step cannot have finished it: \(first)")
        var previous = first.evictions
        var commits = 0
        while store.workingSetStats.residentBytes > first.budgetBytes / 4 * 3 && commits < 200 {
            try submitOne()
            try store.commit()
            commits += 1
            let now = store.workingSetStats
            #expect(now.sweeps == first.sweeps, "no new sweep without a checkpoint: \(now)")
            #expect(now.evictions - previous <= 1_024 + 8, "one step per commit: \(now)")
            previous = now.evictions
        }
        let last = store.workingSetStats
        #expect(commits >= 2, "the sweep took \(commits) more commits: \(last)")
        #expect(last.evictions > first.evictions, "\(last)")
        #expect(last.residentBytes <= last.budgetBytes, "\(last)")
        try store.checkpointNow()
        #expect(try store.audit().ok)
    }

    /// A long-running writer's working set stays near its budget: a sweep's walk of the resident messages
    /// (which must leave those that asked for receipts to the queue) does not use the visits the queue's
    /// sweep needs. Counted against one limit, the walk took the whole step once more messages were
    /// resident than a step visits, the queue was never swept again, and the working set grew with the
    /// history (a 10M-op writer's estimate reached 2.6× its budget).
    @Test func sweepsKeepALongRunsWorkingSetNearItsBudget() throws {
        let dir = TemporaryDirectory()
        var options = Store.Options()
        options.noSync = true
        options.cacheBytes = 32 << 10
        options.checkpointOps = 2_000  // ~1,400 messages resident at each sweep: more than its 1,104 visits
        options.checkpointMs = 1 << 40
        let store = try Store(path: dir.child("s"), options: options)
        defer { store.close() }
        var peaks: [Int] = []
        var queued: [Int] = []  // resident units the queue's sweep evicts: conversations, views, tallies
        for (n, line) in Self.mixedLines(count: 30_000, seed: 17).enumerated() {
            guard let op = try? OpParser.parse(line: line).get() else { continue }
            _ = try store.submit(op, now: 0)
            if (n + 1) % 10 == 0 { try store.commit() }
            if (n + 1) % 2_500 == 0 {
                peaks.append(store.workingSetStats.residentBytes)
                queued.append(store.world.convs.count + store.world.userConvCount + store.world.receipts.count)
            }
        }
        try store.commit()
        let stats = store.workingSetStats
        #expect(stats.evictions > 0, "\(stats)")
        // At so small a budget the units an interval names (all dirty until its checkpoint) are most of
        // the working set: it saw-tooths with the checkpoints, but does not grow from one to the next.
        #expect(peaks.suffix(4).max()! <= peaks.prefix(4).max()! * 3 / 2, "flat, not growing: \(peaks)")
        #expect(queued.suffix(4).max()! <= queued.prefix(4).max()! * 3 / 2, "flat, not growing: \(queued)")
        #expect(try store.audit().ok)
    }

    /// `close` checkpoints what was committed (the next open replays nothing) but evicts nothing for it:
    /// the state is about to be freed. (Its step used to be sized by every op since the last checkpoint:
    /// a 279 ms sweep at the end of a 400,000-op `ingest`.)
    @Test func closingEvictsNothing() throws {
        let dir = TemporaryDirectory()
        let options = Self.tinyBudgetExplicitCheckpoints
        let store = try Store(path: dir.child("s"), options: options)
        let ops = Self.mixedLines(count: 3_000, seed: 12).compactMap { try? OpParser.parse(line: $0).get() }
        for op in ops.dropLast() { _ = try store.submit(op, now: 0) }
        try store.commit()
        try store.checkpointNow()  // everything resident is clean once this is committed
        let before = store.workingSetStats
        #expect(before.evictions == 0 && before.residentBytes > before.budgetBytes, "\(before)")
        _ = try store.submit(ops.last!, now: 0)
        try store.commit()  // drops a few checkpointed messages (`walkCheckpointedMessages`)
        let seq = store.world.lastSeq
        let beforeClose = store.workingSetStats
        store.close()  // a checkpoint over budget, with every unit clean
        let after = store.workingSetStats
        #expect(after.evictions == beforeClose.evictions && after.sweeps == before.sweeps, "\(after)")
        let reopened = try Store(path: dir.child("s"), options: options)
        defer { reopened.close() }
        #expect(reopened.world.lastSeq == seq)
        #expect(try reopened.status().checkpointSeq == seq, "the next open replays nothing")
        #expect(try reopened.audit().ok)
    }
}
