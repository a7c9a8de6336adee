import TeamLog
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
        var planner = RoutePlanner(partitions: 8)
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
        #expect(seen.first == PartitionKey.partition(of: PartitionKey.teamKey(Id("T")), count: 8))
    }

    @Test func bothSidesOfAP2PConversationShareOnePartition() throws {
        var planner = RoutePlanner(partitions: 16)
        for (a, b) in [("alice", "bob"), ("u1", "u2000"), ("x", "y")] {
            let there = try plan(
                &planner,
                #"{"op":"message.send","actor":"\#(a)","ts":1,"to":{"type":"p2p","id":"\#(b)"},"messageId":"m-\#(a)","content":{"type":"text","text":"x"}}"#)
            let back = try plan(&planner, #"{"op":"message.read","actor":"\#(b)","ts":2,"to":{"type":"p2p","id":"\#(a)"}}"#)
            #expect(there[0].partition == back[0].partition)
        }
    }

    @Test func presenceAndTimeGoEverywhereWithDistinctIds() throws {
        var planner = RoutePlanner(partitions: 3)
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
        var planner = RoutePlanner(partitions: 5)
        let a = try plan(&planner, #"{"op":"channel.create","actor":"a","ts":1,"channel":"C","kind":"audio","opId":"o1"}"#)
        let b = try plan(&planner, #"{"op":"channel.join","actor":"a","ts":2,"channel":"C"}"#)
        #expect(a[0].partition == b[0].partition)
        #expect(a[0].msgId == "o1")
        #expect(b[0].msgId == nil)
    }

    @Test func aMissingTsIsStampedAndAGivenOneKept() throws {
        var planner = RoutePlanner(partitions: 2)
        let stamped = try plan(&planner, #"{"op":"clock.tick","actor":"a"}"#, now: 1234)
        let value = try JSONParser.parse(stamped[0].data)
        #expect(value["ts"]?.intValue == 1234)
        #expect(stamped[0].data == stamped[1].data)  // every partition sees the same time
        let kept = try plan(&planner, #"{"op":"clock.tick","actor":"a","ts":7}"#, now: 1234)
        #expect(try JSONParser.parse(kept[0].data)["ts"]?.intValue == 7)
    }

    @Test func whatDoesNotParseGoesToPartitionZeroUnchanged() throws {
        var planner = RoutePlanner(partitions: 4)
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
        var planner = RoutePlanner(partitions: 7, recentCapacity: 2)
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
        #expect(try plan(&planner, modify("none"))[0].partition == PartitionKey.fallbackPartition(of: Id("none"), count: 7))
        #expect(asked == [Id("old"), Id("none")])
        // A locate that cannot tell (a partition did not answer): no plan, the error — not the fallback.
        struct Unanswered: Error {}
        planner.locate = { _ in throw Unanswered() }
        #expect(throws: Unanswered.self) { try plan(&planner, modify("older")) }
        #expect(try plan(&planner, modify("m2"))[0].partition == sentTo["m2"], "a remembered one needs no answer")
    }

    @Test func keysHashStablyAndSpread() throws {
        // FNV-1a 64 of "a" (a published test vector): the partition function must never change.
        #expect(PartitionKey.fnv1a(Array("a".utf8)) == 0xaf63_dc4c_8601_ec8c)
        var counts = Array(repeating: 0, count: 4)
        for i in 0..<4_000 { counts[PartitionKey.partition(of: PartitionKey.teamKey(Id("team-\(i)")), count: 4)] += 1 }
        #expect(counts.allSatisfy { $0 > 800 && $0 < 1_200 }, "\(counts)")
    }
}
