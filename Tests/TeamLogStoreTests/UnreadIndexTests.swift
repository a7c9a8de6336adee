import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

/// Unread counts from the index ordinals (issue 11 §5): each `counted`/`own`/`directed` entry carries its
/// running ordinal, so a count over any seq range is two cursor seeks, however many messages it spans;
/// the writer keeps only running totals.
@Suite struct UnreadIndexTests {
    /// Team `t1` (own, a, b, c) and `messages` counted messages from `a`: every fifth directed to `c` only,
    /// the rest to everyone; then `b` reads up to the middle.
    static func store(messages: Int) throws -> StoreHarness {
        let h = try StoreHarness(batchSize: 4_096)
        try h.feed(op("team.create", "own", ["team": "t1", "members": ["a", "b", "c"]]))  // seq 1
        var lines: [String] = []
        for i in 0..<messages {
            lines.append(
                i % 5 == 4 ? Msg.send("a", "m\(i)", ["directedUserIds": ["c"]]) : Msg.send("a", "m\(i)"))
        }
        try h.feed(lines)  // seqs 2 ... messages + 1
        try h.feed(Msg.read("b", upTo: messages / 2 + 1))
        return h
    }

    /// The unread view of `user` and the cursor moves it took, in one read transaction.
    static func measured(_ h: StoreHarness, _ user: Id) throws -> (view: JSONValue, moves: Int) {
        try h.store.readProjections { txn in
            let before = txn.cursorMoves
            let view = try h.store.unreadView(user, in: h.store.storedSnapshot(txn))
            return (view, txn.cursorMoves - before)
        }
    }

    @Test func unreadIsTwoSeeksPerIndexWhateverTheBacklog() throws {
        let small = try Self.store(messages: 10)
        let big = try Self.store(messages: 6_000)
        let broadcasts = 6_000 - 6_000 / 5
        // b read half the broadcasts; c read nothing and gets every message; a sent them all.
        let (b, bMoves) = try Self.measured(big, "b")
        let (c, cMoves) = try Self.measured(big, "c")
        let (a, aMoves) = try Self.measured(big, "a")
        #expect(b["total"]?.intValue == Int64(broadcasts - (3_000 - 3_000 / 5)))
        #expect(c["total"]?.intValue == 6_000)
        #expect(a["total"]?.intValue == 0)
        try MessageQueryTests.checkUnread(big, ["own", "a", "b", "c"])

        // One conversation each: a walk of two user-conversation records at most, then per index the ordinal
        // at each end of the range, a seek and at most one step back each: 3 indexes × 2 ends × 2 moves.
        let bound = 2 + 3 * 2 * 2
        for (user, moves) in [("b", bMoves), ("c", cMoves), ("a", aMoves)] {
            #expect(moves <= bound, "\(user): \(moves) cursor moves for one conversation of 6,000 messages")
            let smallMoves = try Self.measured(small, Id(user)).moves
            #expect(moves == smallMoves, "\(user): the cost does not grow with messages")
        }
        // The counter does count every step: reading the entries between the two ends (what a count by
        // scanning would do) takes thousands of moves, so the bound above is a real one.
        let counted = try big.store.projectionEnv.openHandle("p.counted", create: false)
        let scanned = try big.store.readProjections { txn in
            var entries = 0
            try txn.forEach(counted) { _, _ in
                entries += 1
                return true
            }
            return (entries, txn.cursorMoves)
        }
        #expect(scanned.0 == broadcasts && scanned.1 > broadcasts)
    }

    /// The writer's state holds running totals only: the same few integers after 6,000 messages as after
    /// 10, and after a reopen (restored from the last index entries) the same totals and answers.
    @Test func residentStateIsCountersThatSurviveAReopen() throws {
        let h = try Self.store(messages: 600)
        let key = ConvKey(team: "t1", kind: .team)
        #expect(h.store.world.convs[key]?.countedTotal == 480)
        #expect(h.store.world.userConvs["a"]?[key]?.ownTotal == 480)
        #expect(h.store.world.userConvs["c"]?[key]?.directedTotal == 120)
        #expect(h.store.world.userConvs["b"]?[key]?.directedTotal == 0)
        #expect(h.store.world.indexJournal == nil, "a writer keeps no index entries in memory")
        let convs = h.store.world.convs
        let userConvs = h.store.world.userConvs
        let views = try ["own", "a", "b", "c"].map { try h.store.unreadView($0) }
        try h.reopen()
        // Nothing is resident after a reopen; the totals come back, from the last index entries, when an
        // op needs them (and the full load restores them the same way).
        #expect(h.store.world.convs.isEmpty && h.store.world.userConvs.isEmpty)
        let stored = try h.store.loadAllProjections()
        #expect(stored.convs == convs)
        #expect(stored.userConvs == userConvs)
        #expect(try ["own", "a", "b", "c"].map { try h.store.unreadView($0) } == views)
        // Numbering goes on from the restored totals.
        try h.feed(Msg.send("b", "after", ["directedUserIds": ["c"]]))
        #expect(h.store.world.userConvs["c"]?[key]?.directedTotal == 121)
        #expect(h.store.world.userConvs["b"]?[key]?.ownTotal == 0)
        #expect(h.store.world.convs[key]?.countedTotal == 480)
        #expect(try h.store.audit().ok)
        try MessageQueryTests.checkUnread(h, ["own", "a", "b", "c"])
    }

    /// A view loaded for an op that numbers nothing from it (a read, a leave) is loaded without its
    /// running totals — its record alone, not two index seeks more — and gets them, from the index, once
    /// a send numbers an entry from it: the numbering goes on where it was.
    @Test func aViewIsLoadedWithItsTotalsOnlyForASend() throws {
        let h = try Self.store(messages: 600)
        let key = ConvKey(team: "t1", kind: .team)
        try h.reopen()
        try h.feed([Msg.read("a"), Msg.read("c")])
        #expect(h.store.world.userConvs["a"]?[key]?.hasTotals == false)
        #expect(h.store.world.userConvs["c"]?[key]?.hasTotals == false)
        #expect(h.store.world.userConvs["c"]?[key]?.joinSeq == 1, "the record itself is loaded")
        // a's broadcast numbers a's own entry: a's totals are read first (480 own broadcasts so far);
        // c's directed one numbers c's directed entry (120 so far).
        try h.feed([Msg.send("a", "after"), Msg.send("b", "to-c", ["directedUserIds": ["c"]])])
        #expect(h.store.world.userConvs["a"]?[key]?.ownTotal == 481)
        #expect(h.store.world.userConvs["a"]?[key]?.directedTotal == 0)
        #expect(h.store.world.userConvs["c"]?[key]?.directedTotal == 121)
        #expect(h.store.world.invariantViolations().isEmpty, "\(h.store.world.invariantViolations())")
        let report = try h.store.audit()
        #expect(report.ok, "\(report.tables.compactMap(\.difference))")
        try MessageQueryTests.checkUnread(h, ["own", "a", "b", "c"])
    }
}
