import TeamLog
import TeamLogNATS
import TeamLogRuntime
import Testing

/// The router's plan (issue 13: partitioning) without a server: where each op goes, what is broadcast,
/// `ts` stamping, publish ids, and that nothing is dropped.
@Suite struct RoutePlannerTests {
    func plan(_ planner: inout RoutePlanner, _ line: String, number: Int = 1, now: Int64 = 99) throws
        -> [RoutePlanner.Planned]
    {
        try planner.plan(.text(number: number, bytes: Array(line.utf8)), now: now)
    }

    @Test func aTeamsOpsAndMessagesShareOnePartition() throws {
        var planner = RoutePlanner(partitions: 8, scheme: .current)
        var seen: Set<Int> = []
        for line in [
            #"{"op":"team.create","actor":"a","ts":1,"team":"T"}"#,
            #"{"op":"team.invite","actor":"a","ts":2,"team":"T","targets":["b"]}"#,
            #"{"op":"member.setNotify","actor":"b","ts":3,"team":"T","state":"none"}"#,
            #"{"op":"message.send","actor":"a","ts":4,"to":{"type":"team","id":"T"},"messageId":"m","content":{"type":"text","text":"x"}}"#,
            #"{"op":"message.read","actor":"b","ts":5,"to":{"type":"team","id":"T"}}"#,
            #"{"op":"message.receipt","actor":"b","ts":6,"to":{"type":"team","id":"T"},"messageIds":["m"]}"#,
        ] {
            let planned = try plan(&planner, line)
            #expect(planned.count == 1)
            seen.insert(planned[0].partition)
        }
        #expect(seen.count == 1)
        #expect(seen.first == PartitionKey.partition(of: PartitionKey.teamKey(Id("T")), count: 8, scheme: .current))
    }

    @Test func bothSidesOfAP2PConversationShareOnePartition() throws {
        var planner = RoutePlanner(partitions: 16, scheme: .current)
        for (a, b) in [("alice", "bob"), ("u1", "u2000"), ("x", "y")] {
            let there = try plan(
                &planner,
                #"{"op":"message.send","actor":"\#(a)","ts":1,"to":{"type":"p2p","id":"\#(b)"},"messageId":"m-\#(a)","content":{"type":"text","text":"x"}}"#)
            let back = try plan(&planner, #"{"op":"message.read","actor":"\#(b)","ts":2,"to":{"type":"p2p","id":"\#(a)"}}"#)
            #expect(there[0].partition == back[0].partition)
        }
    }

    @Test func presenceAndTimeGoEverywhereWithDistinctIds() throws {
        var planner = RoutePlanner(partitions: 3, scheme: .current)
        for line in [
            #"{"op":"client.login","actor":"a","ts":1,"device":"d","opId":"L1"}"#,
            #"{"op":"client.logout","actor":"a","ts":2,"device":"d"}"#,
            #"{"op":"clock.tick","actor":"a","ts":3}"#,
        ] {
            let planned = try plan(&planner, line)
            #expect(planned.map(\.partition) == [0, 1, 2])
        }
        #expect(try plan(&planner, #"{"op":"client.login","actor":"a","ts":1,"device":"d","opId":"L1"}"#).map(\.msgId) == ["L1#0", "L1#1", "L1#2"])
    }

    @Test func aChannelsSignalingSharesOnePartitionAndIdsAreTheOpIds() throws {
        var planner = RoutePlanner(partitions: 5, scheme: .current)
        let a = try plan(&planner, #"{"op":"channel.create","actor":"a","ts":1,"channel":"C","kind":"audio","opId":"o1"}"#)
        let b = try plan(&planner, #"{"op":"channel.join","actor":"a","ts":2,"channel":"C"}"#)
        #expect(a[0].partition == b[0].partition)
        #expect(a[0].msgId == "o1")
        #expect(b[0].msgId == nil)
    }

    @Test func aMissingTsIsStampedAndAGivenOneKept() throws {
        var planner = RoutePlanner(partitions: 2, scheme: .current)
        let stamped = try plan(&planner, #"{"op":"clock.tick","actor":"a"}"#, now: 1234)
        let value = try JSONParser.parse(stamped[0].data)
        #expect(value["ts"]?.intValue == 1234)
        #expect(stamped[0].data == stamped[1].data)  // every partition sees the same time
        let kept = try plan(&planner, #"{"op":"clock.tick","actor":"a","ts":7}"#, now: 1234)
        #expect(try JSONParser.parse(kept[0].data)["ts"]?.intValue == 7)
    }

    @Test func whatDoesNotParseGoesToPartitionZeroUnchanged() throws {
        var planner = RoutePlanner(partitions: 4, scheme: .current)
        for bad in ["{oops", #"{"op":"team.fly","actor":"a"}"#, #"{"op":"team.create","actor":"a"}"#] {
            let planned = try plan(&planner, bad, number: 9)
            #expect(planned == [RoutePlanner.Planned(partition: 0, data: Array(bad.utf8), msgId: nil, line: 9)])
        }
        // An op that fails its checks but whose opId can be read is published under it (a re-run of the
        // router is de-duplicated for it too: it added a second `rejected` record).
        let invalid = #"{"op":"team.invite","actor":"a","team":"t","targets":[],"opId":"g-4"}"#
        #expect(
            try plan(&planner, invalid, number: 4)
                == [RoutePlanner.Planned(partition: 0, data: Array(invalid.utf8), msgId: "g-4", line: 4)])
        #expect(try plan(&planner, "   ").isEmpty)  // a blank line is no op, as in `ingest`
        let long = try planner.plan(.tooLong(number: 4, length: 2_000_000), now: 0)
        #expect(long == [RoutePlanner.Planned(partition: 0, data: [], msgId: nil, line: 4, tooLongLength: 2_000_000)])
    }

    @Test func modifyFollowsItsMessage() throws {
        var asked: [Id] = []
        var planner = RoutePlanner(partitions: 7, scheme: .current, recentCapacity: 2)
        planner.locate = { id in
            asked.append(id)
            return id == Id("old") ? 5 : nil
        }
        var sentTo: [String: Int] = [:]
        for (i, team) in ["A", "B", "C"].enumerated() {
            let planned = try plan(
                &planner,
                #"{"op":"message.send","actor":"a","ts":1,"to":{"type":"team","id":"\#(team)"},"messageId":"m\#(i)","content":{"type":"text","text":"x"}}"#)
            sentTo["m\(i)"] = planned[0].partition
        }
        let modify = { (id: String) in #"{"op":"message.modify","actor":"a","ts":2,"messageId":"\#(id)","content":{"type":"text","text":"y"}}"# }
        // Remembered (the capacity keeps the last two).
        #expect(try plan(&planner, modify("m2"))[0].partition == sentTo["m2"])
        #expect(try plan(&planner, modify("m1"))[0].partition == sentTo["m1"])
        #expect(asked.isEmpty)
        // Forgotten or never seen: asked; nobody holds it: the fallback partition.
        #expect(try plan(&planner, modify("old"))[0].partition == 5)
        #expect(try plan(&planner, modify("none"))[0].partition == PartitionKey.fallbackPartition(of: Id("none"), count: 7, scheme: .current))
        #expect(asked == [Id("old"), Id("none")])
        // A locate that cannot tell (a partition did not answer): no plan, the error — not the fallback.
        struct Unanswered: Error {}
        planner.locate = { _ in throw Unanswered() }
        #expect(throws: Unanswered.self) { try plan(&planner, modify("older")) }
        #expect(try plan(&planner, modify("m2"))[0].partition == sentTo["m2"], "a remembered one needs no answer")
    }

    @Test func keysHashStablyAndSpread() throws {
        // FNV-1a 64 of "a" (a published test vector), and each scheme's hash of it: a deployment's keys
        // stay where they went, so neither function may ever change.
        #expect(PartitionKey.fnv1a(Array("a".utf8)) == 0xaf63_dc4c_8601_ec8c)
        #expect(PartitionScheme.fnv1a.hash(Array("a".utf8)) == 0xaf63_dc4c_8601_ec8c)
        #expect(PartitionScheme.fnv1aMix64.hash(Array("a".utf8)) == PartitionKey.fmix64(0xaf63_dc4c_8601_ec8c))
        #expect(PartitionKey.fmix64(0xaf63_dc4c_8601_ec8c) == Self.fmix64Vector)
        #expect(PartitionScheme.current == .fnv1aMix64)
        for scheme in PartitionScheme.allCases {
            var counts = Array(repeating: 0, count: 3)
            for i in 0..<3_000 {
                counts[PartitionKey.partition(of: PartitionKey.teamKey(Id("team-\(i)")), count: 3, scheme: scheme)] += 1
            }
            #expect(counts.allSatisfy { $0 > 850 && $0 < 1_150 }, "\(scheme): \(counts)")
        }
    }

    /// fmix64 of FNV-1a("a"), computed outside Swift (Python, MurmurHash3's finalizer by its constants).
    static let fmix64Vector: UInt64 = 0x82a2_a958_a9be_ce5b

    /// Scheme 1 at a power-of-two N: `hash mod 2^k` sees only each byte's low k bits, so the p2p pairs
    /// `x<i>`/`y<i>` (the same digits on both sides) all land on one partition of 2 — a deployment's
    /// whole p2p load on one machine. Scheme 2, what new deployments get, spreads them at every N.
    @Test func theCurrentSchemeSpreadsKeysAtAPowerOfTwo() throws {
        let pairs = (0..<4_000).map { i in
            PartitionKey.conversation(Conversation(.p2p, Id("y\(i)")), actor: Id("x\(i)"))
        }
        func counts(_ n: Int, _ scheme: PartitionScheme) -> [Int] {
            var counts = Array(repeating: 0, count: n)
            for case .key(let key) in pairs { counts[PartitionKey.partition(of: key, count: n, scheme: scheme)] += 1 }
            return counts
        }
        #expect(counts(2, .fnv1a).filter { $0 > 0 }.count == 1, "scheme 1's weakness, as docs/nats.md describes it")
        for n in [2, 4, 8, 16] {
            let spread = counts(n, .current)
            let mean = Double(pairs.count) / Double(n)
            #expect(spread.allSatisfy { abs(Double($0) - mean) < mean * 0.15 }, "N = \(n): \(spread)")
        }
        // Team ids that differ only in a high bit of one byte ("A" 0x41 / "a" 0x61, at N = 4: bit 5).
        var teams = Array(repeating: 0, count: 4)
        for i in 0..<2_000 {
            for letter in ["A", "a"] {
                teams[PartitionKey.partition(of: PartitionKey.teamKey(Id("\(letter)\(i)")), count: 4, scheme: .current)] += 1
            }
        }
        #expect(teams.allSatisfy { $0 > 850 && $0 < 1_150 }, "\(teams)")
    }

    /// The op stream's record of its deployment: written by a new stream, read back, a stream from before
    /// the record read as scheme 1 with any count, a newer scheme and another count refused.
    @Test func theDeploymentsPartitioningIsRecordedAndChecked() throws {
        let made = Partitioning(scheme: .current, partitions: 4)
        #expect(made.recorded == "teamlog ops; partitioning 2; partitions 4")
        #expect(try Partitioning(recorded: made.recorded) == made)
        let legacy = try Partitioning(recorded: nil)
        #expect(legacy == Partitioning(scheme: .fnv1a, partitions: nil))
        #expect(try Partitioning(recorded: "made by hand") == legacy)
        try legacy.check(partitions: 7)
        try made.check(partitions: 4)
        #expect { try made.check(partitions: 3) } throws: { error in
            guard let error = error as? ClusterError else { return false }
            return error.permanent && error.description.contains("has 4 partitions, not 3")
        }
        #expect { try Partitioning(recorded: "teamlog ops; partitioning 9; partitions 2") } throws: { error in
            (error as? ClusterError)?.description.contains("partitioning 9") == true
        }
        #expect(throws: ClusterError.self) { try Partitioning(recorded: "teamlog ops; partitions x") }
    }
}
