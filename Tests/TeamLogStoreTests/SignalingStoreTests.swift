import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

/// Signaling op lines (SPEC §1.3) for store tests; `nil` fields are left out.
private enum Call {
    static func line(_ name: String, _ actor: String, _ fields: [(String, Any?)]) -> String {
        var pairs: [(String, JSONValue)] = [("op", .string(name)), ("actor", .string(actor))]
        for (key, value) in fields { if let value { pairs.append((key, jsonValue(value))) } }
        return JSONValue.object(pairs).jsonString
    }

    static func create(_ actor: String, _ channel: String = "c1", kind: String? = nil, ts: Int? = nil) -> String {
        line("channel.create", actor, [("channel", channel), ("kind", kind), ("ts", ts)])
    }
    static func join(_ actor: String, _ channel: String = "c1", device: String? = nil, ts: Int? = nil) -> String {
        line("channel.join", actor, [("channel", channel), ("device", device), ("ts", ts)])
    }
    static func invite(
        _ actor: String, _ target: String, _ requestId: String, channel: String = "c1", offline: Bool? = nil,
        pushText: String? = nil, ts: Int? = nil
    ) -> String {
        line(
            "channel.invite", actor,
            [
                ("channel", channel), ("target", target), ("requestId", requestId),
                ("offline", offline), ("pushText", pushText), ("ts", ts),
            ])
    }
    static func cancel(_ actor: String, _ target: String, _ requestId: String, channel: String = "c1", ts: Int? = nil)
        -> String
    {
        line(
            "channel.cancelInvite", actor,
            [("channel", channel), ("target", target), ("requestId", requestId), ("ts", ts)])
    }
    static func accept(
        _ actor: String, _ inviter: String, _ requestId: String, channel: String = "c1",
        device: String? = nil, ts: Int? = nil
    ) -> String {
        line(
            "channel.accept", actor,
            [
                ("channel", channel), ("inviter", inviter), ("requestId", requestId),
                ("device", device), ("ts", ts),
            ])
    }
    static func leave(_ actor: String, _ channel: String = "c1", ts: Int? = nil) -> String {
        line("channel.leave", actor, [("channel", channel), ("ts", ts)])
    }
    static func close(_ actor: String, _ channel: String = "c1", ts: Int? = nil) -> String {
        line("channel.close", actor, [("channel", channel), ("ts", ts)])
    }
    static func login(_ user: String, _ device: String, ts: Int? = nil, opId: String? = nil) -> String {
        line("client.login", user, [("device", device), ("ts", ts), ("opId", opId)])
    }
    static func logout(_ user: String, _ device: String, ts: Int? = nil) -> String {
        line("client.logout", user, [("device", device), ("ts", ts)])
    }
    static func tick(_ ts: Int) -> String { line("clock.tick", "sys", [("ts", ts)]) }
    static func control(_ actor: String, _ channel: String = "c1", ts: Int? = nil, opId: String? = nil) -> String {
        line("channel.control", actor, [("channel", channel), ("data", "x"), ("ts", ts), ("opId", opId)])
    }
}

extension Array where Element == JSONValue {
    /// The records of one kind.
    fileprivate func kind(_ k: String) -> [JSONValue] { filter { $0["kind"]?.stringValue == k } }
}

/// Signaling end to end on a real LMDB store: the `signal` and `login` records of SPEC §4, the offline
/// queue surviving reopens and delivered once, members sync at its exact boundary, and `teamlog channel`.
@Suite struct SignalingStoreTests {
    func expectAuditOK(_ h: StoreHarness, _ note: Comment = "", sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let report = try h.store.audit()
        #expect(
            report.ok,
            "\(note) \(report.tables.compactMap(\.difference)) \(String(describing: report.chainProblem)) \(String(describing: report.checkpointProblem))",
            sourceLocation: sourceLocation)
    }

    /// The seed's story: a call to someone offline, stored; they log in on a phone (the invite arrives with
    /// the login), then on a tablet (nothing left), and accept on the phone: the caller gets `accept` and
    /// `join`, the tablet a multi-device sync `accept`.
    @Test func workedExample() throws {
        let h = try StoreHarness()
        try h.feed([
            Call.login("caller", "desk", ts: 1_000),
            Call.create("caller", kind: "video", ts: 1_000),
            Call.join("caller", device: "desk", ts: 1_000),
        ])
        let invite = try h.feed(
            Call.invite("caller", "callee", "r1", offline: true, pushText: "incoming call", ts: 2_000))
        #expect(
            invite.map(\.jsonString) == [
                #"{"kind":"event","line":4,"seq":4,"ts":2000,"op":"channel.invite"}"#,
                #"{"kind":"signal","seq":4,"channel":"c1","event":"invite","to":"callee","devices":[],"stored":true,"sync":false,"from":"caller","requestId":"r1"}"#,
            ])
        #expect(
            try h.store.channelView("c1")?.jsonString
                == #"{"channel":"c1","kind":"video","closed":false,"members":["caller"],"pendingInvites":[{"target":"callee","inviter":"caller","requestId":"r1"}]}"#
        )

        let phone = try h.feed(Call.login("callee", "phone", ts: 3_000))
        #expect(
            phone.map(\.jsonString) == [
                #"{"kind":"event","line":5,"seq":5,"ts":3000,"op":"client.login"}"#,
                #"{"kind":"login","seq":5,"user":"callee","device":"phone","offline":[{"seq":4,"channel":"c1","event":"invite","from":"caller","requestId":"r1","pushText":"incoming call"}],"channels":[]}"#,
            ])
        let tablet = try h.feed(Call.login("callee", "tablet", ts: 4_000))
        #expect(
            tablet.kind("login").map(\.jsonString) == [
                #"{"kind":"login","seq":6,"user":"callee","device":"tablet","offline":[],"channels":[]}"#
            ])
        try expectAuditOK(h, "before accepting")

        let accept = try h.feed(Call.accept("callee", "caller", "r1", device: "phone", ts: 5_000))
        #expect(
            accept.map(\.jsonString) == [
                #"{"kind":"event","line":7,"seq":7,"ts":5000,"op":"channel.accept"}"#,
                #"{"kind":"signal","seq":7,"channel":"c1","event":"accept","to":"caller","devices":["desk"],"stored":false,"sync":false,"from":"callee","requestId":"r1"}"#,
                #"{"kind":"signal","seq":7,"channel":"c1","event":"join","to":"caller","devices":["desk"],"stored":false,"sync":false,"from":"callee"}"#,
                #"{"kind":"signal","seq":7,"channel":"c1","event":"accept","to":"callee","devices":["tablet"],"stored":false,"sync":true,"from":"callee","requestId":"r1"}"#,
            ])
        #expect(
            try h.store.channelView("c1")?.jsonString
                == #"{"channel":"c1","kind":"video","closed":false,"members":["caller","callee"],"pendingInvites":[]}"#)
        try expectAuditOK(h, "after accepting")

        // A later login on a third device lists the call, and nothing offline.
        let pc = try h.feed(Call.login("callee", "pc", ts: 6_000))
        #expect(
            pc.kind("login").map(\.jsonString) == [
                #"{"kind":"login","seq":8,"user":"callee","device":"pc","offline":[],"channels":[{"channel":"c1","kind":"video","members":["caller","callee"]}]}"#
            ])
        try h.reopen()
        try expectAuditOK(h, "after reopen")
    }

    /// The offline queue is stored in LMDB: it survives a reopen, is delivered by the first login after it,
    /// and is gone for every later login, across another reopen too.
    @Test func queueIsDeliveredExactlyOnceAcrossReopens() throws {
        let h = try StoreHarness(batchSize: 2)
        try h.feed([
            Call.login("a", "ad", ts: 1_000),
            Call.create("a", ts: 1_000),
            Call.join("a", device: "ad", ts: 1_000),
            Call.invite("a", "x", "r1", offline: true, pushText: "p1", ts: 1_100),
            Call.invite("a", "y", "r2", offline: true, ts: 1_200),
            Call.cancel("a", "x", "r1", ts: 1_250),
            Call.invite("a", "x", "r3", offline: false, ts: 1_300),
        ])
        let queued = h.store.world.offlineQueues
        #expect(queued["x"]?.map(\.event) == [.invite, .cancelInvite])
        #expect(queued["y"]?.map(\.requestId) == ["r2"])
        try expectAuditOK(h, "queued")

        try h.reopen()
        #expect(h.store.world.offlineQueues == queued, "the queue is read back from LMDB")
        #expect(
            try h.store.channelView("c1")?["pendingInvites"]?.jsonString
                == #"[{"target":"y","inviter":"a","requestId":"r2"},{"target":"x","inviter":"a","requestId":"r3"}]"#)
        let first = try h.feed(Call.login("x", "xp", ts: 2_000))
        #expect(
            first.kind("login").map(\.jsonString) == [
                #"{"kind":"login","seq":8,"user":"x","device":"xp","offline":[{"seq":4,"channel":"c1","event":"invite","from":"a","requestId":"r1","pushText":"p1"},{"seq":6,"channel":"c1","event":"cancelInvite","from":"a","requestId":"r1"}],"channels":[]}"#
            ])
        #expect(h.store.world.offlineQueues["x"] == nil)
        try expectAuditOK(h, "after the first login")

        try h.reopen()
        #expect(h.store.world.offlineQueues["x"] == nil, "the delivered queue stays deleted on disk")
        let second = try h.feed(Call.login("x", "xt", ts: 3_000))
        #expect(second.kind("login").first?["offline"] == .array([]))
        try h.feed([Call.logout("x", "xt", ts: 4_000), Call.logout("x", "xp", ts: 4_000)])
        try h.reopen()
        let third = try h.feed(Call.login("x", "xp", ts: 5_000))
        #expect(third.kind("login").first?["offline"] == .array([]))
        // y's queue was untouched by x's logins.
        let y = try h.feed(Call.login("y", "yd", ts: 6_000))
        #expect(y.kind("login").first?["offline"]?.arrayValue?.map { $0["requestId"]?.stringValue } == ["r2"])
        let offlineRecords = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }[.offline] ?? []
        #expect(offlineRecords.isEmpty, "every queue was delivered")
        try expectAuditOK(h, "at the end")
    }

    /// A login repeated with the same `opId` is a duplicate: it delivers nothing again.
    @Test func duplicateLoginDeliversNothing() throws {
        let h = try StoreHarness()
        try h.feed([
            Call.create("a", ts: 1_000), Call.join("a", ts: 1_000),
            Call.invite("a", "x", "r1", offline: true, ts: 1_000),
        ])
        let line = Call.login("x", "xp", ts: 2_000, opId: "L1")
        let first = try h.feed(line)
        #expect(first.kind("login").first?["offline"]?.arrayValue?.count == 1)
        try h.reopen()
        let again = try h.feed(line)
        #expect(again.map { $0["kind"]?.stringValue } == ["duplicate"])
        try expectAuditOK(h)
    }

    // MARK: Members sync at the boundary

    /// `a` joins at 1 000 and never comes online; `b` is online throughout.
    static let syncPrefix = [
        Call.login("b", "bd", ts: 1_000), Call.create("b", ts: 1_000), Call.join("a", ts: 1_000),
        Call.join("b", device: "bd", ts: 1_000),
    ]

    @Test func membersSyncAt119And120Seconds() throws {
        // 119.999 s after a's join: nothing, and a reopen keeps the pending deadline.
        let early = try StoreHarness(batchSize: 3)
        try early.feed(Self.syncPrefix)
        let quiet = try early.feed(Call.tick(1_000 + 119_999))
        #expect(quiet.map { $0["kind"]?.stringValue } == ["event"])
        #expect(try early.store.channelView("c1")?["members"] == .array([.string("a"), .string("b")]))
        try expectAuditOK(early, "119.999 s")
        try early.reopen()
        #expect(early.store.world.syncDeadline == 121_000, "the deadline is rebuilt on open")
        let late = try early.feed(Call.tick(1_000 + 120_000))
        #expect(
            late.kind("signal").map(\.jsonString) == [
                #"{"kind":"signal","seq":6,"channel":"c1","event":"membersSync","to":"b","devices":["bd"],"stored":false,"sync":false,"members":["b"]}"#
            ])
        #expect(try early.store.channelView("c1")?["members"] == .array([.string("b")]))
        try expectAuditOK(early, "removed after reopen")

        // A separate store reaching 120 s at once.
        let direct = try StoreHarness()
        try direct.feed(Self.syncPrefix)
        let removal = try direct.feed(Call.tick(1_000 + 120_000))
        #expect(
            removal.map(\.jsonString) == [
                #"{"kind":"event","line":5,"seq":5,"ts":121000,"op":"clock.tick"}"#,
                #"{"kind":"signal","seq":5,"channel":"c1","event":"membersSync","to":"b","devices":["bd"],"stored":false,"sync":false,"members":["b"]}"#,
            ])
        #expect(try direct.store.channelView("c1")?["members"] == .array([.string("b")]))
        try expectAuditOK(direct, "120 s")
        try direct.reopen()
        #expect(direct.store.world.channels == early.store.world.channels, "the same removal either way")
        try expectAuditOK(direct, "120 s after reopen")
    }

    @Test func aRemovedMembersLeaveAtTheDeadlineIsNotMember() throws {
        let h = try StoreHarness()
        try h.feed(Self.syncPrefix)
        let rejected = try h.feed(Call.leave("a", ts: 121_000))
        #expect(
            rejected.map(\.jsonString) == [
                #"{"kind":"signal","seq":5,"channel":"c1","event":"membersSync","to":"b","devices":["bd"],"stored":false,"sync":false,"members":["b"]}"#,
                #"{"kind":"rejected","line":5,"opId":null,"code":"notMember","reason":"a is not in channel c1"}"#,
            ])
        #expect(
            try h.store.channelView("c1")?["members"] == .array([.string("b")]),
            "the removal the decision saw is stored, though the op was rejected")
        let accepted = try h.feed(Call.leave("b", ts: 121_000))
        #expect(accepted.map { $0["kind"]?.stringValue } == ["event"], "nobody is left to tell")
        #expect(accepted.first?["seq"] == .int(6))
        #expect(try h.store.channelView("c1")?["members"] == .array([]))
        try expectAuditOK(h)
    }

    // MARK: Members sync stored whatever the op that reaches it (issue 10 §5)

    /// alice and bob in `c1`; bob's only device goes offline at 2 000, so he is due at 122 000.
    static let dueAt122 = [
        Call.login("alice", "a1", ts: 1_000), Call.login("bob", "b1", ts: 1_000, opId: "bob-login"),
        Call.create("alice", kind: "audio", ts: 1_001), Call.join("alice", ts: 1_002), Call.join("bob", ts: 1_003),
        Call.logout("bob", "b1", ts: 2_000),
    ]
    static let aliceNotified =
        #"{"kind":"signal","seq":7,"channel":"c1","event":"membersSync","to":"alice","devices":["a1"],"stored":false,"sync":false,"members":["alice"]}"#

    /// Ops rejected by `decide` at the deadline, channel ops or not: the removal is a system event of its
    /// own (seq 7, the op's time), its `membersSync` goes out before the rejection, and nothing else.
    @Test(arguments: [
        (Call.control("bob", ts: 122_000), "notMember"),
        (Call.join("alice", ts: 122_000), "alreadyMember"),
        (Call.line("team.leave", "bob", [("team", "nope"), ("ts", 122_000)]), "noSuchTeam"),
        (
            #"{"op":"message.send","actor":"bob","to":{"type":"p2p","id":"bob"},"messageId":"m1","content":{"type":"text"},"ts":122000}"#,
            "badField"
        ),
    ])
    func rejectedOpAtTheDeadlineStoresTheRemoval(line: String, code: String) throws {
        let h = try StoreHarness()
        try h.feed(Self.dueAt122)
        let records = try h.feed(line)
        #expect(records.count == 2)
        #expect(records.first?.jsonString == Self.aliceNotified)
        #expect(records.last?["kind"]?.stringValue == "rejected" && records.last?["code"]?.stringValue == code)
        #expect(try h.store.channelView("c1")?["members"] == .array([.string("alice")]))
        #expect(h.store.world.lastSeq == 7 && h.store.world.lastTs == 122_000)
        let stored = try #require(try h.store.event(at: 7))
        #expect(stored.op.body == .membersSync && stored.op.actor == "" && stored.ts == 122_000)
        try expectAuditOK(h)
        // Decisions and queries agree from here on: bob is out, and nothing is removed twice.
        let again = try h.feed(Call.control("bob", ts: 123_000))
        #expect(again.map { $0["code"]?.stringValue } == ["notMember"])
        let next = try h.feed(Call.control("alice", ts: 124_000))
        #expect(next.map(\.jsonString) == [#"{"kind":"event","line":9,"seq":8,"ts":124000,"op":"channel.control"}"#])
        try h.reopen()
        #expect(try h.store.channelView("c1")?["members"] == .array([.string("alice")]))
        try expectAuditOK(h, "after reopen")
    }

    /// A line rejected for its shape moves no time, so it stores nothing (not even a due removal).
    @Test func shapeRejectionAtTheDeadlineStoresNothing() throws {
        let h = try StoreHarness()
        try h.feed(Self.dueAt122)
        let records = try h.feed(Call.line("channel.control", "bob", [("ts", 122_000)]))
        #expect(records.map { $0["code"]?.stringValue } == ["missingField"])
        #expect(try h.store.channelView("c1")?["members"] == .array([.string("alice"), .string("bob")]))
        #expect(h.store.world.lastSeq == 6)
    }

    /// The accepted op that reaches the deadline carries the removal in its own event, as before.
    @Test func acceptedOpAtTheDeadlineCarriesTheRemoval() throws {
        let h = try StoreHarness()
        try h.feed(Self.dueAt122)
        let records = try h.feed(Call.control("alice", ts: 122_000))
        #expect(
            records.map(\.jsonString) == [
                #"{"kind":"event","line":7,"seq":7,"ts":122000,"op":"channel.control"}"#, Self.aliceNotified,
            ])
        #expect(try h.store.channelView("c1")?["members"] == .array([.string("alice")]))
        #expect(try h.store.event(at: 7)?.op.body == .channelControl(channel: "c1", target: nil, data: "x"))
        try expectAuditOK(h)
    }

    /// A duplicate changes nothing and moves no time: bob is still listed, and decisions agree with that.
    @Test func duplicateAtTheDeadlineMovesNoTime() throws {
        let h = try StoreHarness()
        try h.feed(Self.dueAt122 + [Call.control("alice", ts: 2_500, opId: "ctl")])
        let dup = try h.feed([
            Call.login("bob", "b1", ts: 122_000, opId: "bob-login"), Call.control("alice", ts: 200_000, opId: "ctl"),
        ])
        #expect(dup.map(\.jsonString) == [
            #"{"kind":"duplicate","line":8,"opId":"bob-login","seq":2}"#,
            #"{"kind":"duplicate","line":9,"opId":"ctl","seq":7}"#,
        ])
        #expect(try h.store.channelView("c1")?["members"] == .array([.string("alice"), .string("bob")]))
        #expect(h.store.world.lastSeq == 7 && h.store.world.lastTs == 2_500)
        let stillIn = try h.feed(Call.control("bob", ts: 3_000))
        #expect(stillIn.map { $0["kind"]?.stringValue } == ["event", "signal"], "bob is a member, as listed")
        // A re-sent rejected opId is answered from memory, not decided: no time moves either.
        try h.feed(Call.control("carol", ts: 4_000, opId: "bad"))
        let before = h.store.world.lastSeq
        let resent = try h.feed(Call.control("carol", ts: 122_000, opId: "bad"))
        #expect(resent.map { $0["kind"]?.stringValue } == ["rejected"])
        #expect(h.store.world.lastSeq == before)
        #expect(try h.store.channelView("c1")?["members"] == .array([.string("alice"), .string("bob")]))
        try expectAuditOK(h)
    }

    // MARK: teamlog channel

    @Test func channelViewShape() throws {
        let h = try StoreHarness()
        try h.feed([
            Call.create("own", "c1", ts: 1_000), Call.create("own", "c2", kind: "custom", ts: 1_000),
            Call.join("a", ts: 1_000), Call.join("b", ts: 1_000),
            Call.invite("a", "x", "r1", ts: 1_000), Call.invite("b", "y", "r2", offline: true, ts: 1_000),
            Call.join("a", "c2", ts: 1_000), Call.close("a", "c2", ts: 1_000),
        ])
        let view = try #require(try h.store.channelView("c1"))
        guard case .object(let pairs) = view else { Issue.record("not an object"); return }
        #expect(pairs.map(\.0) == ["channel", "kind", "closed", "members", "pendingInvites"])
        #expect(view["kind"]?.stringValue == "audio")
        #expect(view["closed"] == .bool(false))
        #expect(view["members"] == .array([.string("a"), .string("b")]))
        let invites = try #require(view["pendingInvites"]?.arrayValue)
        guard case .object(let first) = invites[0] else { Issue.record("not an object"); return }
        #expect(first.map(\.0) == ["target", "inviter", "requestId"])
        #expect(
            invites.map(\.jsonString) == [
                #"{"target":"x","inviter":"a","requestId":"r1"}"#, #"{"target":"y","inviter":"b","requestId":"r2"}"#,
            ])
        #expect(
            try h.store.channelView("c2")?.jsonString
                == #"{"channel":"c2","kind":"custom","closed":true,"members":["a"],"pendingInvites":[]}"#)
        #expect(try h.store.channelView("nope") == nil)
        try h.reopen()
        #expect(try h.store.channelView("c1") == view)
        try expectAuditOK(h)
    }

    /// Every record of a signaling run is in log order and the store audits clean, in a mixed scenario
    /// with closes, leaves and controls split over small batches.
    @Test func mixedScenarioAuditsClean() throws {
        let h = try StoreHarness(batchSize: 2)
        let records = try h.feed([
            Call.login("a", "ap", ts: 1_000), Call.login("a", "at", ts: 1_000), Call.login("b", "bd", ts: 1_000),
            Call.create("a", ts: 1_000), Call.join("a", device: "ap", ts: 1_000), Call.join("b", ts: 1_000),
            Call.invite("b", "a", "bad", ts: 1_000),
            Call.invite("a", "c", "r1", offline: true, ts: 2_000), Call.invite("b", "c", "r2", ts: 2_000),
            Call.login("c", "cd", ts: 3_000), Call.accept("c", "b", "r2", device: "cd", ts: 3_000),
            Call.line("channel.control", "c", [("channel", "c1"), ("data", "mute"), ("ts", 4_000)]),
            Call.logout("a", "ap", ts: 5_000), Call.logout("a", "at", ts: 5_000),
            Call.tick(125_000), Call.close("b", ts: 125_000), Call.join("z", ts: 125_000),
        ])
        #expect(records.kind("rejected").map { $0["code"]?.stringValue } == ["alreadyMember", "closed"])
        let seqs = records.compactMap { $0["seq"]?.intValue }
        #expect(seqs == seqs.sorted(), "records are in log order")
        let syncs = records.kind("signal").filter { $0["event"]?.stringValue == "membersSync" }
        #expect(syncs.map { $0["to"]?.stringValue } == ["b", "c"])
        #expect(syncs.allSatisfy { $0["members"] == .array([.string("b"), .string("c")]) })
        let closes = records.kind("signal").filter { $0["event"]?.stringValue == "close" }
        #expect(closes.map { $0["to"]?.stringValue } == ["b", "c"])
        #expect(h.store.world.offlineQueues.isEmpty, "c's stored invite went out with c's login")
        try expectAuditOK(h)
        try h.reopen()
        try expectAuditOK(h, "after reopen")
    }
}
