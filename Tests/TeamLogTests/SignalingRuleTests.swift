import TeamLog
import TestSupport
import Testing

/// Op lines for the signaling ops of SPEC §1.3; `nil` fields are left out.
private enum Sig {
    static func line(_ name: String, _ actor: String, _ fields: [(String, Any?)]) -> String {
        var pairs: [(String, JSONValue)] = [("op", .string(name)), ("actor", .string(actor))]
        for (key, value) in fields { if let value { pairs.append((key, jsonValue(value))) } }
        return JSONValue.object(pairs).jsonString
    }

    static func create(_ actor: String = "own", _ channel: String = "c1", kind: String? = nil, ext: String? = nil)
        -> String
    {
        line("channel.create", actor, [("channel", channel), ("kind", kind), ("ext", ext)])
    }
    static func join(_ actor: String, _ channel: String = "c1", device: String? = nil, ts: Int? = nil) -> String {
        line("channel.join", actor, [("channel", channel), ("device", device), ("ts", ts)])
    }
    static func invite(
        _ actor: String, _ target: String, _ requestId: String = "r1", channel: String = "c1",
        offline: Bool? = nil, pushText: String? = nil, device: String? = nil
    ) -> String {
        line(
            "channel.invite", actor,
            [
                ("channel", channel), ("target", target), ("requestId", requestId),
                ("offline", offline), ("pushText", pushText), ("device", device),
            ])
    }
    static func cancel(_ actor: String, _ target: String, _ requestId: String = "r1", channel: String = "c1") -> String
    {
        line("channel.cancelInvite", actor, [("channel", channel), ("target", target), ("requestId", requestId)])
    }
    static func reject(
        _ actor: String, _ inviter: String, _ requestId: String = "r1", channel: String = "c1",
        device: String? = nil
    ) -> String {
        line(
            "channel.reject", actor,
            [("channel", channel), ("inviter", inviter), ("requestId", requestId), ("device", device)])
    }
    static func accept(
        _ actor: String, _ inviter: String, _ requestId: String = "r1", channel: String = "c1",
        device: String? = nil
    ) -> String {
        line(
            "channel.accept", actor,
            [("channel", channel), ("inviter", inviter), ("requestId", requestId), ("device", device)])
    }
    static func leave(_ actor: String, _ channel: String = "c1", ts: Int? = nil) -> String {
        line("channel.leave", actor, [("channel", channel), ("ts", ts)])
    }
    static func close(_ actor: String, _ channel: String = "c1") -> String {
        line("channel.close", actor, [("channel", channel)])
    }
    static func control(
        _ actor: String, _ target: String? = nil, channel: String = "c1", data: String? = "x",
        ts: Int? = nil
    ) -> String {
        line("channel.control", actor, [("channel", channel), ("target", target), ("data", data), ("ts", ts)])
    }
    static func login(_ user: String, _ device: String, ts: Int? = nil) -> String {
        line("client.login", user, [("device", device), ("ts", ts)])
    }
    static func logout(_ user: String, _ device: String, ts: Int? = nil) -> String {
        line("client.logout", user, [("device", device), ("ts", ts)])
    }
    static func tick(_ ts: Int) -> String { line("clock.tick", "sys", [("ts", ts)]) }
}

extension Machine {
    /// The `signal` outputs of the last accepted op, in order.
    fileprivate var emittedSignals: [Signal] { outputs.compactMap { if case .signal(let s) = $0 { s } else { nil } } }
    /// The `login` outputs of the last accepted op.
    fileprivate var emittedLogins: [Login] { outputs.compactMap { if case .login(let l) = $0 { l } else { nil } } }
}

/// Everything a signaling op can change, for "a rejected op changes nothing".
private struct SignalingSnapshot: Equatable {
    let channels: [Id: ChannelState]
    let presence: [Id: Presence]
    let queues: [Id: [StoredSignal]]
    let lastSeq: UInt64
    let lastTs: Int64

    init(_ w: World) {
        channels = w.channels
        presence = w.presence
        queues = w.offlineQueues
        lastSeq = w.lastSeq
        lastTs = w.lastTs
    }
}

/// One expected `signal` output: the fields SPEC §4 prints.
struct ExpectedSignal: Equatable, CustomStringConvertible {
    var event: SignalEvent
    var to: Id
    var devices: [Id]
    var stored = false
    var sync = false
    var from: Id
    var requestId: Id?

    init(
        _ event: SignalEvent, to: Id, _ devices: [Id] = [], stored: Bool = false, sync: Bool = false,
        from: Id, _ requestId: Id? = nil
    ) {
        self.event = event
        self.to = to
        self.devices = devices
        self.stored = stored
        self.sync = sync
        self.from = from
        self.requestId = requestId
    }

    init(_ s: Signal) {
        self.init(s.event, to: s.to, s.devices, stored: s.stored, sync: s.sync, from: s.from, s.requestId)
    }

    var description: String {
        "\(event.rawValue)→\(to)\(devices)\(stored ? " stored" : "")\(sync ? " sync" : "") from \(from)"
            + (requestId.map { " #\($0)" } ?? "")
    }
}

/// Setup lines, one op, and the exact signals it must produce.
struct SignalCase: CustomTestStringConvertible, Sendable {
    let name: String
    let setup: [String]
    let op: String
    let expect: [ExpectedSignal]

    init(_ name: String, _ setup: [String], _ op: String, _ expect: [ExpectedSignal]) {
        self.name = name
        self.setup = setup
        self.op = op
        self.expect = expect
    }

    var testDescription: String { name }
}

extension ExpectedSignal: Sendable {}

/// SPEC §1.3: one table per signaling op (accepted and every rejection code), one table of who gets
/// which notification on which devices, login sync and members sync on the pure `World`.
@Suite struct SignalingRuleTests {
    // MARK: Setups

    /// `c1` created by `own` (not a member), with members `a` and `b` (offline).
    static let members = [Sig.create(), Sig.join("a"), Sig.join("b")]
    /// `a` invited `x` with request `r1` (offline switch on).
    static let invited = members + [Sig.invite("a", "x", offline: true)]
    static let closed = members + [Sig.close("a")]
    /// `x` online on a phone and a tablet.
    static let xTwoDevices = [Sig.login("x", "phone"), Sig.login("x", "tablet")]
    /// `a` and `b` online on one device each.
    static let abOnline = [Sig.login("a", "ad"), Sig.login("b", "bd")]

    // MARK: Rule tables

    static let create: [RuleCase] = [
        RuleCase("create a new channel", [], Sig.create(), nil),
        RuleCase("create a video channel", [], Sig.create(kind: "video", ext: "{}"), nil),
        RuleCase("create a custom channel", [], Sig.create(kind: "custom"), nil),
        RuleCase("create with an unknown kind", [], Sig.create(kind: "screen"), .badField),
        RuleCase("create without channel", [], op("channel.create", "own"), .missingField),
        RuleCase("create an existing open id", members, Sig.create("z"), .notPermitted),
        RuleCase("the creator creates it again", members, Sig.create(), .notPermitted),
        RuleCase("create over a closed id", closed, Sig.create("z"), .closed),
    ]

    static let join: [RuleCase] = [
        RuleCase("join an open channel", members, Sig.join("x"), nil),
        RuleCase("the creator joins", members, Sig.join("own"), nil),
        RuleCase("join with a device", members, Sig.join("x", device: "phone"), nil),
        RuleCase("join an unknown channel", members, Sig.join("x", "nope"), .noSuchChannel),
        RuleCase("join a closed channel", closed, Sig.join("x"), .closed),
        RuleCase("join twice", members, Sig.join("a"), .alreadyMember),
        RuleCase("join without channel", members, op("channel.join", "x"), .missingField),
    ]

    static let invite: [RuleCase] = [
        RuleCase("a member invites", members, Sig.invite("a", "x"), nil),
        RuleCase(
            "a member invites with offline and pushText", members,
            Sig.invite("a", "x", offline: true, pushText: "call"), nil),
        RuleCase("the creator (not a member) invites", members, Sig.invite("own", "x"), .notMember),
        RuleCase("a stranger invites", members, Sig.invite("z", "x"), .notMember),
        RuleCase("invite a member", members, Sig.invite("a", "b"), .alreadyMember),
        RuleCase("invite oneself", members, Sig.invite("a", "a"), .alreadyMember),
        RuleCase("invite to an unknown channel", members, Sig.invite("a", "x", channel: "nope"), .noSuchChannel),
        RuleCase("invite to a closed channel", closed, Sig.invite("a", "x"), .closed),
        RuleCase("a stranger invites to a closed channel", closed, Sig.invite("z", "x"), .closed),
        RuleCase(
            "invite without target", members, op("channel.invite", "a", ["channel": "c1", "requestId": "r1"]),
            .missingField),
        RuleCase(
            "invite without requestId", members, op("channel.invite", "a", ["channel": "c1", "target": "x"]),
            .missingField),
        RuleCase(
            "invite with a non-bool offline", members,
            op("channel.invite", "a", ["channel": "c1", "target": "x", "requestId": "r1", "offline": "yes"]), .badField),
    ]

    static let cancelInvite: [RuleCase] = [
        RuleCase("the inviter cancels", invited, Sig.cancel("a", "x"), nil),
        RuleCase("cancel with another requestId", invited, Sig.cancel("a", "x", "r2"), .noInvitation),
        RuleCase("another member cancels", invited, Sig.cancel("b", "x"), .noInvitation),
        RuleCase("cancel for another target", invited, Sig.cancel("a", "y"), .noInvitation),
        RuleCase("cancel twice", invited + [Sig.cancel("a", "x")], Sig.cancel("a", "x"), .noInvitation),
        RuleCase(
            "cancel after the target rejected", invited + [Sig.reject("x", "a")], Sig.cancel("a", "x"), .noInvitation),
        RuleCase("cancel on an unknown channel", invited, Sig.cancel("a", "x", channel: "nope"), .noSuchChannel),
        RuleCase("cancel on a closed channel", invited + [Sig.close("b")], Sig.cancel("a", "x"), .closed),
        RuleCase(
            "cancel without requestId", invited, op("channel.cancelInvite", "a", ["channel": "c1", "target": "x"]),
            .missingField),
    ]

    static let reject: [RuleCase] = [
        RuleCase("the invitee rejects", invited, Sig.reject("x", "a"), nil),
        RuleCase("reject naming the wrong inviter", invited, Sig.reject("x", "b"), .noInvitation),
        RuleCase("reject with the wrong requestId", invited, Sig.reject("x", "a", "r2"), .noInvitation),
        RuleCase("someone else rejects", invited, Sig.reject("y", "a"), .noInvitation),
        RuleCase("reject twice", invited + [Sig.reject("x", "a")], Sig.reject("x", "a"), .noInvitation),
        RuleCase(
            "reject a cancelled invitation", invited + [Sig.cancel("a", "x")], Sig.reject("x", "a"), .noInvitation),
        RuleCase("reject on an unknown channel", invited, Sig.reject("x", "a", channel: "nope"), .noSuchChannel),
        RuleCase("reject on a closed channel", invited + [Sig.close("a")], Sig.reject("x", "a"), .closed),
        RuleCase(
            "reject without inviter", invited, op("channel.reject", "x", ["channel": "c1", "requestId": "r1"]),
            .missingField),
    ]

    static let accept: [RuleCase] = [
        RuleCase("the invitee accepts", invited, Sig.accept("x", "a"), nil),
        RuleCase("accept from a device", invited, Sig.accept("x", "a", device: "phone"), nil),
        RuleCase("accept naming the wrong inviter", invited, Sig.accept("x", "b"), .noInvitation),
        RuleCase("accept with the wrong requestId", invited, Sig.accept("x", "a", "r2"), .noInvitation),
        RuleCase("someone else accepts", invited, Sig.accept("y", "a"), .noInvitation),
        RuleCase("accept twice", invited + [Sig.accept("x", "a")], Sig.accept("x", "a"), .noInvitation),
        RuleCase("accept after rejecting", invited + [Sig.reject("x", "a")], Sig.accept("x", "a"), .noInvitation),
        RuleCase(
            "accept a cancelled invitation", invited + [Sig.cancel("a", "x")], Sig.accept("x", "a"), .noInvitation),
        RuleCase("accept on an unknown channel", invited, Sig.accept("x", "a", channel: "nope"), .noSuchChannel),
        RuleCase("accept on a closed channel", invited + [Sig.close("b")], Sig.accept("x", "a"), .closed),
        RuleCase(
            "accept without requestId", invited, op("channel.accept", "x", ["channel": "c1", "inviter": "a"]),
            .missingField),
    ]

    static let leaveCloseControl: [RuleCase] = [
        RuleCase("a member leaves", members, Sig.leave("a"), nil),
        RuleCase("the last member leaves", members + [Sig.leave("a")], Sig.leave("b"), nil),
        RuleCase("a stranger leaves", members, Sig.leave("z"), .notMember),
        RuleCase("the creator (not a member) leaves", members, Sig.leave("own"), .notMember),
        RuleCase("leave twice", members + [Sig.leave("a")], Sig.leave("a"), .notMember),
        RuleCase("leave an unknown channel", members, Sig.leave("a", "nope"), .noSuchChannel),
        RuleCase("leave a closed channel", closed, Sig.leave("b"), .closed),
        RuleCase("a member closes", members, Sig.close("b"), nil),
        RuleCase("a stranger closes", members, Sig.close("z"), .notMember),
        RuleCase("the creator (not a member) closes", members, Sig.close("own"), .notMember),
        RuleCase("close twice", closed, Sig.close("a"), .closed),
        RuleCase("close an unknown channel", members, Sig.close("a", "nope"), .noSuchChannel),
        RuleCase("control to all others", members, Sig.control("a"), nil),
        RuleCase("control to a member", members, Sig.control("a", "b"), nil),
        RuleCase("control without data", members, Sig.control("a", "b", data: nil), nil),
        RuleCase("control to a non-member", members, Sig.control("a", "z"), .notMember),
        RuleCase("control by a stranger", members, Sig.control("z", "a"), .notMember),
        RuleCase("control on a closed channel", closed, Sig.control("a", "b"), .closed),
        RuleCase("control on an unknown channel", members, Sig.control("a", channel: "nope"), .noSuchChannel),
    ]

    static let clients: [RuleCase] = [
        RuleCase("login", [], Sig.login("a", "phone"), nil),
        RuleCase("login again on the same device", [Sig.login("a", "phone")], Sig.login("a", "phone"), nil),
        RuleCase("login without device", [], op("client.login", "a"), .missingField),
        RuleCase("login with an empty device", [], op("client.login", "a", ["device": ""]), .badId),
        RuleCase("logout", [Sig.login("a", "phone")], Sig.logout("a", "phone"), nil),
        RuleCase("logout of a device never online", [], Sig.logout("a", "phone"), nil),
        RuleCase("logout without device", [Sig.login("a", "phone")], op("client.logout", "a"), .missingField),
        RuleCase("clock tick", [], Sig.tick(5_000), nil),
    ]

    /// Runs a case (`RuleCase.check`).
    func check(_ c: RuleCase) throws { try c.check() }

    @Test(arguments: create) func channelCreate(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: join) func channelJoin(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: invite) func channelInvite(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: cancelInvite) func channelCancelInvite(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: reject) func channelReject(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: accept) func channelAccept(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: leaveCloseControl) func channelLeaveCloseControl(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: clients) func clientsAndClock(_ c: RuleCase) throws { try check(c) }

    /// After `channel.close` every op on the channel is `closed`, whoever sends it.
    @Test(arguments: [
        Sig.join("x"), Sig.join("a"), Sig.invite("a", "x"), Sig.invite("z", "x"), Sig.leave("a"), Sig.leave("z"),
        Sig.close("b"), Sig.control("a"), Sig.control("z", "q"), Sig.create("z"), Sig.cancel("a", "x"),
        Sig.reject("x", "a"), Sig.accept("x", "a"),
    ])
    func everyOpOnAClosedChannelIsClosed(_ line: String) {
        var m = Machine()
        m.setup(Self.invited + [Sig.close("a")])
        #expect(m.run(line)?.code == .closed, "\(line)")
    }

    // MARK: Effects on the channel

    @Test func createRecordsKindAndTheCreatorIsNotAMember() throws {
        var m = Machine()
        m.setup([
            Sig.create("own", "c1"), Sig.create("own", "c2", kind: "video", ext: "e"),
            Sig.create("own", "c3", kind: "custom"),
        ])
        let c1 = try #require(m.world.channels["c1"])
        #expect(c1.kind == .audio, "kind defaults to audio")
        #expect(c1.memberIds.isEmpty, "the creator is not yet a member")
        #expect(!c1.closed)
        #expect(m.world.channels["c2"]?.kind == .video)
        #expect(m.world.channels["c2"]?.ext == "e")
        #expect(m.world.channels["c3"]?.kind == .custom)
        #expect(m.outputs.isEmpty, "create notifies nobody")
    }

    @Test func invitesArePendingUntilAnswered() throws {
        var m = Machine()
        m.setup(Self.members + [Sig.invite("a", "x", "r1"), Sig.invite("b", "x", "r2"), Sig.invite("a", "y", "r3")])
        #expect(
            m.world.channels["c1"]!.invites.map { [$0.target, $0.inviter, $0.requestId] } == [
                ["x", "a", "r1"], ["x", "b", "r2"], ["y", "a", "r3"],
            ])
        m.setup([Sig.reject("x", "b", "r2"), Sig.cancel("a", "y", "r3")])
        #expect(m.world.channels["c1"]!.invites.map(\.requestId) == ["r1"])
        m.setup([Sig.accept("x", "a", "r1")])
        #expect(m.world.channels["c1"]!.invites.isEmpty)
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b", "x"])
    }

    /// An invitee who joins on their own uses up their invitations: a later accept has none to answer,
    /// and membership is not duplicated.
    @Test func joiningUsesUpPendingInvitations() throws {
        var m = Machine()
        m.setup(Self.invited + [Sig.join("x")])
        #expect(m.world.channels["c1"]!.invites.isEmpty)
        #expect(m.run(Sig.accept("x", "a"))?.code == .noInvitation)
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b", "x"])
    }

    @Test func closeKeepsTheChannelAndItsMembers() throws {
        var m = Machine()
        m.setup(Self.members + [Sig.close("a")])
        let c = try #require(m.world.channels["c1"])
        #expect(c.closed)
        #expect(m.world.userChannels["a"]?.contains("c1") != true, "a closed channel is no longer one of a's channels")
    }

    // MARK: Who receives what

    static let online = Self.members + Self.abOnline

    static let deliveries: [SignalCase] = [
        SignalCase(
            "invite to an online target goes to all its devices, not stored",
            online + xTwoDevices, Sig.invite("a", "x", offline: true),
            [ExpectedSignal(.invite, to: "x", ["phone", "tablet"], from: "a", "r1")]),
        SignalCase(
            "invite to an offline target with offline:true is stored",
            online, Sig.invite("a", "x", offline: true, pushText: "call"),
            [ExpectedSignal(.invite, to: "x", stored: true, from: "a", "r1")]),
        SignalCase(
            "invite to an offline target with offline:false is not stored",
            online, Sig.invite("a", "x", offline: false),
            [ExpectedSignal(.invite, to: "x", from: "a", "r1")]),
        SignalCase(
            "invite without the offline switch is not stored",
            online, Sig.invite("a", "x"),
            [ExpectedSignal(.invite, to: "x", from: "a", "r1")]),
        SignalCase(
            "invite to a target whose devices all logged out is stored",
            online + xTwoDevices + [Sig.logout("x", "phone"), Sig.logout("x", "tablet")],
            Sig.invite("a", "x", offline: true),
            [ExpectedSignal(.invite, to: "x", stored: true, from: "a", "r1")]),
        SignalCase(
            "invite to a target with one device left goes to that device",
            online + xTwoDevices + [Sig.logout("x", "phone")], Sig.invite("a", "x", offline: true),
            [ExpectedSignal(.invite, to: "x", ["tablet"], from: "a", "r1")]),
        SignalCase(
            "cancel for an offline target of an offline:true invite is stored",
            online + [Sig.invite("a", "x", offline: true)], Sig.cancel("a", "x"),
            [ExpectedSignal(.cancelInvite, to: "x", stored: true, from: "a", "r1")]),
        SignalCase(
            "cancel for an offline target of an offline:false invite is not stored",
            online + [Sig.invite("a", "x", offline: false)], Sig.cancel("a", "x"),
            [ExpectedSignal(.cancelInvite, to: "x", from: "a", "r1")]),
        SignalCase(
            "cancel for an online target goes to its devices",
            online + [Sig.invite("a", "x", offline: true)] + xTwoDevices, Sig.cancel("a", "x"),
            [ExpectedSignal(.cancelInvite, to: "x", ["phone", "tablet"], from: "a", "r1")]),
        SignalCase(
            "reject: to the inviter, and a sync to the actor's other device",
            online + [Sig.invite("a", "x", offline: true)] + xTwoDevices, Sig.reject("x", "a", device: "phone"),
            [
                ExpectedSignal(.reject, to: "a", ["ad"], from: "x", "r1"),
                ExpectedSignal(.reject, to: "x", ["tablet"], sync: true, from: "x", "r1"),
            ]),
        SignalCase(
            "reject from the tablet syncs the phone",
            online + [Sig.invite("a", "x", offline: true)] + xTwoDevices, Sig.reject("x", "a", device: "tablet"),
            [
                ExpectedSignal(.reject, to: "a", ["ad"], from: "x", "r1"),
                ExpectedSignal(.reject, to: "x", ["phone"], sync: true, from: "x", "r1"),
            ]),
        SignalCase(
            "reject with one device online: no sync",
            online + [Sig.invite("a", "x", offline: true), Sig.login("x", "phone")],
            Sig.reject("x", "a", device: "phone"),
            [ExpectedSignal(.reject, to: "a", ["ad"], from: "x", "r1")]),
        SignalCase(
            "reject while offline: no sync, the inviter offline gets it unstored",
            members + [Sig.invite("a", "x", offline: true)], Sig.reject("x", "a"),
            [ExpectedSignal(.reject, to: "a", from: "x", "r1")]),
        SignalCase(
            "reject from three devices syncs the other two",
            online + [Sig.invite("a", "x")] + xTwoDevices + [Sig.login("x", "pc")], Sig.reject("x", "a", device: "pc"),
            [
                ExpectedSignal(.reject, to: "a", ["ad"], from: "x", "r1"),
                ExpectedSignal(.reject, to: "x", ["phone", "tablet"], sync: true, from: "x", "r1"),
            ]),
        SignalCase(
            "accept: to the inviter, join to the members, sync to the actor's other device",
            online + [Sig.invite("a", "x", offline: true)] + xTwoDevices, Sig.accept("x", "a", device: "phone"),
            [
                ExpectedSignal(.accept, to: "a", ["ad"], from: "x", "r1"),
                ExpectedSignal(.join, to: "a", ["ad"], from: "x"),
                ExpectedSignal(.join, to: "b", ["bd"], from: "x"),
                ExpectedSignal(.accept, to: "x", ["tablet"], sync: true, from: "x", "r1"),
            ]),
        SignalCase(
            "accept with one device online: no sync",
            online + [Sig.invite("a", "x"), Sig.login("x", "phone")], Sig.accept("x", "a", device: "phone"),
            [
                ExpectedSignal(.accept, to: "a", ["ad"], from: "x", "r1"),
                ExpectedSignal(.join, to: "a", ["ad"], from: "x"),
                ExpectedSignal(.join, to: "b", ["bd"], from: "x"),
            ]),
        SignalCase(
            "accept of an inviter who has left: accept still goes to the inviter, join to who remains",
            online + [Sig.invite("a", "x"), Sig.leave("a")], Sig.accept("x", "a"),
            [
                ExpectedSignal(.accept, to: "a", ["ad"], from: "x", "r1"),
                ExpectedSignal(.join, to: "b", ["bd"], from: "x"),
            ]),
        SignalCase(
            "join goes to every other member, not to the joiner",
            online + [Sig.login("x", "phone")], Sig.join("x", device: "phone"),
            [ExpectedSignal(.join, to: "a", ["ad"], from: "x"), ExpectedSignal(.join, to: "b", ["bd"], from: "x")]),
        SignalCase("the first joiner notifies nobody", [Sig.create()], Sig.join("a"), []),
        SignalCase(
            "join to offline members is not stored",
            members, Sig.join("x"),
            [ExpectedSignal(.join, to: "a", from: "x"), ExpectedSignal(.join, to: "b", from: "x")]),
        SignalCase(
            "leave goes to the remaining members",
            online + [Sig.join("x")], Sig.leave("a"),
            [ExpectedSignal(.leave, to: "b", ["bd"], from: "a"), ExpectedSignal(.leave, to: "x", from: "a")]),
        SignalCase(
            "close goes to every member, the closer included",
            online + [Sig.join("x")], Sig.close("b"),
            [
                ExpectedSignal(.close, to: "a", ["ad"], from: "b"), ExpectedSignal(.close, to: "b", ["bd"], from: "b"),
                ExpectedSignal(.close, to: "x", from: "b"),
            ]),
        SignalCase(
            "control with a target goes to the target only",
            online + [Sig.join("x")], Sig.control("a", "b"),
            [ExpectedSignal(.control, to: "b", ["bd"], from: "a")]),
        SignalCase(
            "control without a target goes to all other members",
            online + [Sig.join("x")], Sig.control("a"),
            [ExpectedSignal(.control, to: "b", ["bd"], from: "a"), ExpectedSignal(.control, to: "x", from: "a")]),
        SignalCase("control alone in a channel notifies nobody", [Sig.create(), Sig.join("a")], Sig.control("a"), []),
        SignalCase("login and logout notify nobody", online, Sig.logout("a", "ad"), []),
    ]

    @Test(arguments: deliveries)
    func delivery(_ c: SignalCase) {
        var m = Machine()
        m.setup(c.setup)
        let result = m.run(c.op)
        #expect(result == nil, "\(c.name): \(result.map { "\($0)" } ?? "")")
        let got = m.emittedSignals.map(ExpectedSignal.init)
        #expect(got == c.expect, "\(c.name)")
        #expect(m.emittedSignals.allSatisfy { $0.seq == m.world.lastSeq && $0.channel == "c1" && $0.members == nil })
    }

    @Test func storedQueueHoldsExactlyTheStoredSignals() throws {
        var m = Machine()
        m.setup(
            Self.online + [
                Sig.invite("a", "x", "r1", offline: true, pushText: "call me"),
                Sig.invite("b", "x", "r2", offline: false),
                Sig.cancel("a", "x", "r1"),
                Sig.cancel("b", "x", "r2"),
                Sig.invite("a", "x", "r3", offline: true),
            ])
        let queue = try #require(m.world.offlineQueues["x"])
        #expect(queue.map(\.event) == [.invite, .cancelInvite, .invite])
        #expect(queue.map(\.requestId) == ["r1", "r1", "r3"])
        #expect(queue.map(\.from) == ["a", "a", "a"])
        #expect(queue[0].pushText == "call me")
        #expect(queue[1].pushText == nil)
        #expect(queue.map(\.seq) == queue.map(\.seq).sorted())
        #expect(m.world.offlineQueues["a"] == nil && m.world.offlineQueues["b"] == nil)
    }

    // MARK: Login sync

    @Test func loginDeliversTheQueueOnceAndTheOpenChannels() throws {
        var m = Machine()
        m.setup(
            Self.online + [
                Sig.create("own", "c2", kind: "video"), Sig.join("x", "c2"), Sig.join("a", "c2"),
                Sig.create("own", "c0"), Sig.join("x", "c0"), Sig.join("a", "c0"), Sig.close("a", "c0"),
                Sig.create("own", "c3"), Sig.join("x", "c3"), Sig.leave("x", "c3"),
                Sig.invite("a", "x", "r1", offline: true, pushText: "call"),
                Sig.invite("b", "x", "r2", offline: true),
                Sig.cancel("b", "x", "r2"),
            ])
        #expect(m.run(Sig.login("x", "phone")) == nil)
        let login = try #require(m.emittedLogins.first)
        #expect(m.emittedLogins.count == 1)
        #expect(m.emittedSignals.isEmpty)
        #expect(login.user == "x" && login.device == "phone" && login.seq == m.world.lastSeq)
        #expect(login.offline.map(\.event) == [.invite, .invite, .cancelInvite])
        #expect(login.offline.map(\.requestId) == ["r1", "r2", "r2"])
        #expect(login.offline.map(\.pushText) == ["call", nil, nil])
        #expect(login.channels.map(\.id) == ["c2"], "closed c0 and left c3 are not synced")
        #expect(login.channels.first?.memberIds == ["x", "a"])
        #expect(m.world.offlineQueues["x"] == nil, "the queue is dropped once delivered")

        #expect(
            Record.output(.login(login)).jsonLine
                == #"{"kind":"login","seq":\#(login.seq),"user":"x","device":"phone","offline":[{"seq":\#(login.offline[0].seq),"channel":"c1","event":"invite","from":"a","requestId":"r1","pushText":"call"},{"seq":\#(login.offline[1].seq),"channel":"c1","event":"invite","from":"b","requestId":"r2"},{"seq":\#(login.offline[2].seq),"channel":"c1","event":"cancelInvite","from":"b","requestId":"r2"}],"channels":[{"channel":"c2","kind":"video","members":["x","a"]}]}"#
        )

        #expect(m.run(Sig.login("x", "tablet")) == nil)
        #expect(m.emittedLogins.first?.offline == [], "a second login gets nothing")
        #expect(m.emittedLogins.first?.channels.map(\.id) == ["c2"])
        #expect(m.run(Sig.logout("x", "tablet")) == nil)
        #expect(m.run(Sig.logout("x", "phone")) == nil)
        #expect(m.run(Sig.login("x", "phone")) == nil)
        #expect(m.emittedLogins.first?.offline == [], "logging out and in again gets nothing either")
    }

    @Test func loginWithNoChannelsListsNone() throws {
        var m = Machine()
        #expect(m.run(Sig.login("x", "phone")) == nil)
        let login = try #require(m.emittedLogins.first)
        #expect(login.offline.isEmpty && login.channels.isEmpty)
        #expect(
            Record.output(.login(login)).jsonLine
                == #"{"kind":"login","seq":1,"user":"x","device":"phone","offline":[],"channels":[]}"#)
    }

    @Test func loginListsChannelsInIdOrder() throws {
        var m = Machine()
        m.setup(["cb", "ca", "cc"].flatMap { [Sig.create("own", $0), Sig.join("x", $0)] })
        #expect(m.run(Sig.login("x", "phone")) == nil)
        #expect(m.emittedLogins.first?.channels.map(\.id) == ["ca", "cb", "cc"])
    }

    @Test func presenceFollowsDevices() {
        var m = Machine()
        m.setup([Sig.login("x", "tablet"), Sig.login("x", "phone"), Sig.login("x", "phone")])
        #expect(m.world.devices(of: "x") == ["phone", "tablet"], "devices are sorted and not repeated")
        m.setup([Sig.logout("x", "phone")])
        #expect(m.world.devices(of: "x") == ["tablet"])
        #expect(m.world.isOnline("x"))
        m.setup([Sig.logout("x", "tablet")])
        #expect(!m.world.isOnline("x"))
    }

    // MARK: JSON of the signal record

    @Test func signalRecordShapes() throws {
        var m = Machine()
        m.setup(Self.online + [Sig.login("x", "phone")])
        #expect(m.run(Sig.invite("a", "y", "r9", offline: true, pushText: "p")) == nil)
        let invite = try #require(m.emittedSignals.first)
        #expect(
            Record.output(.signal(invite)).jsonLine
                == #"{"kind":"signal","seq":\#(invite.seq),"channel":"c1","event":"invite","to":"y","devices":[],"stored":true,"sync":false,"from":"a","requestId":"r9"}"#
        )
        #expect(m.run(Sig.control("a", "b")) == nil)
        let control = try #require(m.emittedSignals.first)
        #expect(
            Record.output(.signal(control)).jsonLine
                == #"{"kind":"signal","seq":\#(control.seq),"channel":"c1","event":"control","to":"b","devices":["bd"],"stored":false,"sync":false,"from":"a"}"#
        )
    }

    // MARK: Members sync

    /// `a` joins at 1 000 and is never online; `b` is online throughout.
    static let syncBase = [
        Sig.login("b", "bd", ts: 1_000), Sig.create(), Sig.join("a", ts: 1_000), Sig.join("b", ts: 1_000),
    ]

    @Test func membersSyncRemovesAtExactlyTheTimeout() throws {
        var m = Machine()
        m.setup(Self.syncBase)
        #expect(m.run(Sig.tick(1_000 + 119_999)) == nil)
        #expect(m.outputs.isEmpty, "at 119 999 ms nothing happens")
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b"])
        #expect(m.run(Sig.tick(1_000 + 120_000)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
        let sync = m.emittedSignals.map(ExpectedSignal.init)
        #expect(sync == [ExpectedSignal(.membersSync, to: "b", ["bd"], from: "")])
        #expect(m.emittedSignals.first?.members == ["b"])
        let json = Record.output(.signal(try #require(m.emittedSignals.first))).jsonLine
        #expect(
            json
                == #"{"kind":"signal","seq":\#(m.world.lastSeq),"channel":"c1","event":"membersSync","to":"b","devices":["bd"],"stored":false,"sync":false,"members":["b"]}"#
        )
        #expect(m.run(Sig.tick(1_000_000)) == nil)
        #expect(m.outputs.isEmpty, "nothing more to sync")
        #expect(m.world.channels["c1"]!.memberIds == ["b"], "an online member is never removed")
    }

    @Test func membersSyncCountsFromTheLastDeviceGoingOffline() throws {
        var m = Machine()
        m.setup([
            Sig.login("b", "bd", ts: 1_000), Sig.create(), Sig.login("a", "p", ts: 1_000),
            Sig.login("a", "t", ts: 1_000),
            Sig.join("a", ts: 1_000), Sig.join("b", ts: 1_000),
            Sig.logout("a", "p", ts: 40_000), Sig.logout("a", "t", ts: 50_000),
        ])
        #expect(m.run(Sig.tick(50_000 + 119_999)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b"], "counted from the last device, not the first")
        #expect(m.run(Sig.tick(50_000 + 120_000)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    @Test func membersSyncCountsFromTheJoinWhenLaterThanTheLogout() throws {
        var m = Machine()
        m.setup([
            Sig.login("b", "bd", ts: 1_000), Sig.create(), Sig.join("b", ts: 1_000),
            Sig.login("a", "p", ts: 1_000), Sig.logout("a", "p", ts: 2_000), Sig.join("a", ts: 60_000),
        ])
        #expect(m.run(Sig.tick(60_000 + 119_999)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b", "a"])
        #expect(m.run(Sig.tick(60_000 + 120_000)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    @Test func loggingInBeforeTheDeadlineKeepsTheMember() throws {
        var m = Machine()
        m.setup(Self.syncBase + [Sig.login("a", "p", ts: 100_000)])
        #expect(m.run(Sig.tick(10_000_000)) == nil)
        #expect(m.outputs.isEmpty)
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b"])
        // Offline again: a new 120 s from the logout.
        m.setup([Sig.logout("a", "p", ts: 10_000_000)])
        #expect(m.run(Sig.tick(10_119_999)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b"])
        #expect(m.run(Sig.tick(10_120_000)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    @Test func removalHappensBeforeTheEventsOwnDecision() throws {
        var m = Machine()
        m.setup(Self.syncBase)
        let before = SignalingSnapshot(m.world)
        #expect(m.run(Sig.leave("a", ts: 121_000))?.code == .notMember, "a was removed at 121 000, before its leave")
        // The removal the decision saw is a system event of its own (SPEC §1.3), the leave nothing.
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
        #expect(m.world.lastSeq == before.lastSeq + 1 && m.world.lastTs == 121_000)
        #expect(
            m.emittedSignals.map(ExpectedSignal.init) == [
                ExpectedSignal(.membersSync, to: "b", ["bd"], from: "")
            ])
        #expect(m.emittedSignals.map(\.members) == [["b"]])

        var n = Machine()
        n.setup(Self.syncBase)
        #expect(n.run(Sig.leave("a", ts: 120_999)) == nil, "one ms earlier the leave is a member's")
        #expect(n.emittedSignals.map(ExpectedSignal.init) == [ExpectedSignal(.leave, to: "b", ["bd"], from: "a")])
    }

    @Test func removalComesFirstInTheOutputsOfTheEventThatReachesTheDeadline() throws {
        var m = Machine()
        m.setup(Self.syncBase + [Sig.login("c", "cd", ts: 1_000), Sig.join("c", ts: 1_000)])
        #expect(m.run(Sig.control("b", ts: 200_000)) == nil)
        #expect(
            m.emittedSignals.map(ExpectedSignal.init) == [
                ExpectedSignal(.membersSync, to: "b", ["bd"], from: ""),
                ExpectedSignal(.membersSync, to: "c", ["cd"], from: ""),
                ExpectedSignal(.control, to: "c", ["cd"], from: "b"),
            ])
        #expect(m.emittedSignals.prefix(2).allSatisfy { $0.members == ["b", "c"] && $0.seq == m.world.lastSeq })
    }

    @Test func membersSyncCoversEveryOpenChannelButNotClosedOnes() throws {
        var m = Machine()
        m.setup(
            [Sig.login("b", "bd", ts: 1_000)]
                + ["c1", "c2", "c3"].flatMap {
                    [Sig.create("own", $0), Sig.join("a", $0, ts: 1_000), Sig.join("b", $0, ts: 1_000)]
                }
                + [Sig.close("b", "c3")])
        #expect(m.run(Sig.tick(121_000)) == nil)
        #expect(
            m.emittedSignals.map { [$0.channel.string, $0.event.rawValue, $0.to.string] } == [
                ["c1", "membersSync", "b"], ["c2", "membersSync", "b"],
            ])
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
        #expect(m.world.channels["c2"]!.memberIds == ["b"])
        #expect(m.world.channels["c3"]!.memberIds == ["a", "b"], "a closed channel keeps its last members")
    }

    @Test func aChannelWhoseMembersAllExpireNotifiesNobodyAndStaysOpen() throws {
        var m = Machine()
        m.setup([Sig.create(), Sig.join("a", ts: 1_000), Sig.join("b", ts: 5_000)])
        #expect(m.run(Sig.tick(121_000)) == nil)
        #expect(m.emittedSignals.map(ExpectedSignal.init) == [ExpectedSignal(.membersSync, to: "b", from: "")])
        #expect(m.run(Sig.tick(125_000)) == nil)
        #expect(m.emittedSignals.isEmpty)
        #expect(m.world.channels["c1"]!.memberIds.isEmpty)
        #expect(!m.world.channels["c1"]!.closed)
        #expect(m.run(Sig.join("a")) == nil, "the channel can be joined again")
    }

    @Test func theTimeoutIsConfigurable() throws {
        var config = Config()
        config.membersSyncTimeoutMs = 5_000
        var m = Machine(config: config)
        m.setup(Self.syncBase)
        #expect(m.run(Sig.tick(5_999)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["a", "b"])
        #expect(m.run(Sig.tick(6_000)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    @Test func eventTimeNeverGoesBackForMembersSync() throws {
        var m = Machine()
        m.setup(Self.syncBase + [Sig.tick(121_000)])
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
        m.setup([Sig.join("a", ts: 10)])
        #expect(m.world.channels["c1"]!.members.last?.joinedTs == 121_000, "a smaller ts is raised to the last event's")
        #expect(m.run(Sig.tick(241_000 - 1)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b", "a"])
        #expect(m.run(Sig.tick(241_000)) == nil)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    @Test func loginAtTheDeadlineComesAfterTheRemoval() throws {
        var m = Machine()
        m.setup(Self.syncBase)
        #expect(m.run(Sig.login("a", "p", ts: 121_000)) == nil)
        #expect(m.emittedLogins.first?.channels.isEmpty == true, "a was removed before its login")
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    @Test func anyEventReachingTheDeadlineRunsMembersSync() throws {
        var m = Machine()
        m.setup(Self.syncBase)
        #expect(m.run(op("team.create", "own", ["team": "t1", "ts": 121_000])) == nil)
        #expect(m.emittedSignals.map(ExpectedSignal.init) == [ExpectedSignal(.membersSync, to: "b", ["bd"], from: "")])
        #expect(m.tips.count == 1, "the team op's own outputs follow")
        if case .signal = m.outputs.first {} else { Issue.record("members sync comes before the op's own outputs") }
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
    }

    /// Every signaling op survives the log's binary encoding and its JSON export unchanged.
    @Test(arguments: [
        op("channel.create", "own", ["channel": "c1", "kind": "video", "ext": "{\"a\":1}", "ts": 5, "opId": "o1"]),
        op("channel.create", "own", ["channel": "c1", "ts": 5]),
        op("channel.join", "a", ["channel": "c1", "device": "phone", "ts": 5]),
        op(
            "channel.invite", "a",
            ["channel": "c1", "target": "x", "requestId": "r1", "offline": true, "pushText": "ring", "ts": 5]),
        op("channel.invite", "a", ["channel": "c1", "target": "x", "requestId": "r1", "ts": 5]),
        op("channel.cancelInvite", "a", ["channel": "c1", "target": "x", "requestId": "r1", "ts": 5]),
        op("channel.reject", "x", ["channel": "c1", "inviter": "a", "requestId": "r1", "device": "tab", "ts": 5]),
        op(
            "channel.accept", "x",
            ["channel": "c1", "inviter": "a", "requestId": "r1", "device": "ph", "ts": 5, "opId": "k"]),
        op("channel.leave", "a", ["channel": "c1", "ts": 5]),
        op("channel.close", "a", ["channel": "c1", "ts": 5]),
        op("channel.control", "a", ["channel": "c1", "target": "b", "data": "mute", "ts": 5]),
        op("channel.control", "a", ["channel": "c1", "data": "", "ts": 5]),
        op("client.login", "a", ["device": "phone", "ts": 5]),
        op("client.logout", "a", ["device": "phone", "ts": 5]),
        op("clock.tick", "sys", ["ts": 5]),
    ])
    func opsRoundTrip(_ line: String) throws {
        guard case .success(let parsed) = OpParser.parse(line: line) else {
            Issue.record("not parsed: \(line)"); return
        }
        let event = Event(seq: 7, ts: 5, op: parsed)
        #expect(try EventCodec.decode(seq: 7, EventCodec.encode(event)) == event, "binary: \(line)")
        guard case .success(let again) = OpParser.parse(line: parsed.jsonLine) else {
            Issue.record("export not parsed: \(parsed.jsonLine)")
            return
        }
        #expect(again == parsed, "JSON export: \(line) → \(parsed.jsonLine)")
    }

    /// The system members-sync event (issue 10 §5): a new op tag, 74, in the same version-1 encoding (so
    /// existing logs read as before), with an empty actor and no fields. It is no input op: submitted as
    /// one it is `notPermitted`, and `teamlog log` exports it as the `clock.tick` that runs the same sync.
    @Test func systemMembersSyncEvent() throws {
        let event = Event(seq: 9, ts: 121_000, op: Op(actor: "", ts: 121_000, body: .membersSync))
        let bytes = EventCodec.encode(event)
        #expect(EventCodec.version == 1 && bytes.first == 1)
        #expect(Array(bytes.suffix(3)) == [0, 0, 74], "no flags, empty actor, tag 74")
        #expect(try EventCodec.decode(seq: 9, bytes) == event)
        #expect(event.op.jsonLine == #"{"op":"clock.tick","actor":"system","ts":121000}"#)
        guard case .failure(let r) = World().decide(Op(actor: "x", body: .membersSync), now: 0) else {
            Issue.record("a membersSync op was accepted")
            return
        }
        #expect(r.code == .notPermitted)
        #expect(World().dueMembersSync(at: .max) == nil, "nobody in a channel: nothing is due")
    }

    /// Applying the same events to a fresh world gives the same channels, queues and removals.
    @Test func replayGivesTheSameRemovals() throws {
        var m = Machine()
        var events: [Event] = []
        let lines =
            Self.syncBase + [
                Sig.invite("b", "x", offline: true), Sig.login("c", "cd", ts: 2_000), Sig.join("c", ts: 2_000),
                Sig.logout("c", "cd", ts: 3_000), Sig.tick(121_000), Sig.tick(122_999), Sig.tick(123_000),
                Sig.login("x", "xp", ts: 130_000),
            ]
        var outputs: [Output] = []
        for line in lines {
            guard case .success(let op) = OpParser.parse(line: line),
                case .success(let e) = m.world.decide(op, now: m.now)
            else { Issue.record("rejected: \(line)"); return }
            events.append(e)
            m.world.apply(e, into: &m.outputs)
            outputs += m.outputs
            m.outputs.removeAll()
        }
        var fresh = World()
        var replayed: [Output] = []
        for e in events { fresh.apply(e, into: &replayed) }
        #expect(fresh.projected == m.world.projected)
        #expect(fresh.channels == m.world.channels)
        #expect(fresh.offlineQueues == m.world.offlineQueues)
        #expect(fresh.presence == m.world.presence)
        #expect(fresh.syncDeadline == m.world.syncDeadline)
        #expect(replayed == outputs)
        #expect(m.world.channels["c1"]!.memberIds == ["b"])
        let syncs = outputs.compactMap { if case .signal(let s) = $0, s.event == .membersSync { s } else { nil } }
        #expect(syncs.map(\.members) == [["b", "c"], ["b", "c"], ["b"]])
    }
}
