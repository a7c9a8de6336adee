import TeamLog
import TeamLogWorkload
import TestSupport
import Testing

/// SPEC §2: who receives a message, who is alerted, and why not — through `World` (team and p2p messages,
/// tips) and directly on the bitset core.
@Suite struct FanOutTests {
    /// `t1` owned by `own`, manager `mgr`, normal `a`, `b`, `c`, in slots 0–4.
    static let base: [String] = [
        op("team.create", "own", ["team": "t1", "name": "Ops", "members": ["mgr", "a", "b", "c"]]),
        op("team.addManagers", "own", ["team": "t1", "targets": ["mgr"]]),
    ]

    /// One expected delivery: receivers, alerted, and silenced as `user:reason` in receiver order.
    struct Expected: Equatable, CustomStringConvertible, Sendable {
        var receivers: [Id]
        var alerted: [Id]
        var silenced: [String]
        var description: String { "receivers \(receivers) alerted \(alerted) silenced \(silenced)" }
    }

    struct FanCase: CustomTestStringConvertible, Sendable {
        let name: String
        let setup: [String]
        let op: String
        let expect: [Expected]
        var testDescription: String { name }

        init(_ name: String, _ setup: [String] = [], _ op: String, _ expect: Expected...) {
            self.name = name
            self.setup = setup
            self.op = op
            self.expect = expect
        }
    }

    /// Shorthand: receivers with every one alerted but those in `silenced`.
    static func d(_ receivers: [Id], _ silenced: [Id: SilenceReason] = [:]) -> Expected {
        Expected(
            receivers: receivers, alerted: receivers.filter { silenced[$0] == nil },
            silenced: receivers.compactMap { u in silenced[u].map { "\(u):\($0.rawValue)" } })
    }

    static func all(_ receivers: [Id], _ reason: SilenceReason) -> Expected {
        d(receivers, Dictionary(uniqueKeysWithValues: receivers.map { ($0, reason) }))
    }

    /// The deliveries of the last accepted op, as `Expected`.
    static func deliveries(_ m: Machine) -> [Expected] {
        m.deliveries.map { d in
            Expected(
                receivers: d.receivers, alerted: d.alerted,
                silenced: d.silenced.map { "\($0.user):\($0.reason.rawValue)" })
        }
    }

    static let others: [Id] = ["own", "mgr", "b", "c"]

    static let team: [FanCase] = [
        FanCase("broadcast reaches every member but the sender", [], Msg.send("a", "m1"), d(others)),
        FanCase("owner's broadcast", [], Msg.send("own", "m1"), d(["mgr", "a", "b", "c"])),
        FanCase(
            "disableNotification silences every receiver", [], Msg.send("a", "m1", ["disableNotification": true]),
            all(others, .disableNotification)),
        FanCase(
            "disableNotification beats notifyNone", [Msg.notify("b", "none")],
            Msg.send("a", "m1", ["disableNotification": true]), all(others, .disableNotification)),
        FanCase(
            "disableNotification beats managerOnly and mentions", [Msg.notify("b", "managerOnly")],
            Msg.send("a", "m1", ["disableNotification": true, "mentions": ["b"]]), all(others, .disableNotification)),
        FanCase("notify none", [Msg.notify("b", "none")], Msg.send("a", "m1"), d(others, ["b": .notifyNone])),
        FanCase(
            "notify none, sender a manager", [Msg.notify("b", "none")], Msg.send("mgr", "m1"),
            d(["own", "a", "b", "c"], ["b": .notifyNone])),
        FanCase(
            "managerOnly, normal sender", [Msg.notify("b", "managerOnly")], Msg.send("a", "m1"),
            d(others, ["b": .managerOnly])),
        FanCase(
            "managerOnly, manager sender", [Msg.notify("b", "managerOnly")], Msg.send("mgr", "m1"),
            d(["own", "a", "b", "c"])),
        FanCase(
            "managerOnly, owner sender", [Msg.notify("b", "managerOnly")], Msg.send("own", "m1"),
            d(["mgr", "a", "b", "c"])),
        FanCase(
            "managerOnly lifted by a mention", [Msg.notify("b", "managerOnly"), Msg.notify("c", "managerOnly")],
            Msg.send("a", "m1", ["mentions": ["b"]]), d(others, ["c": .managerOnly])),
        FanCase(
            "a mention does not lift none", [Msg.notify("b", "none")], Msg.send("a", "m1", ["mentions": ["b"]]),
            d(others, ["b": .notifyNone])),
        FanCase(
            "an owner with managerOnly hears a normal member", [Msg.notify("own", "managerOnly")], Msg.send("a", "m1"),
            d(others, ["own": .managerOnly])),
        FanCase(
            "mentioning a non-member or the sender changes nothing", [Msg.notify("b", "managerOnly")],
            Msg.send("a", "m1", ["mentions": ["zz", "a"]]), d(others, ["b": .managerOnly])),
        FanCase("directed", [], Msg.send("a", "m1", ["directedUserIds": ["c", "b"]]), d(["b", "c"])),
        FanCase(
            "directed + managerOnly + mention", [Msg.notify("b", "managerOnly"), Msg.notify("c", "managerOnly")],
            Msg.send("a", "m1", ["directedUserIds": ["b", "c"], "mentions": ["b"]]), d(["b", "c"], ["c": .managerOnly])),
        FanCase(
            "directed: a mention outside the set receives nothing", [Msg.notify("own", "managerOnly")],
            Msg.send("a", "m1", ["directedUserIds": ["b"], "mentions": ["own"]]), d(["b"])),
        FanCase("directed to the sender too", [], Msg.send("a", "m1", ["directedUserIds": ["a", "b"]]), d(["b"])),
        FanCase("directed to the sender alone", [], Msg.send("a", "m1", ["directedUserIds": ["a"]]), d([])),
        FanCase(
            "status message: online members only", [Msg.login("own"), Msg.login("b"), Msg.login("a")],
            Msg.send("a", "m1", ["isStatusMessage": true]), all(["own", "b"], .statusMessage)),
        FanCase(
            "status message beats notifyNone", [Msg.login("b"), Msg.notify("b", "none")],
            Msg.send("a", "m1", ["isStatusMessage": true]), all(["b"], .statusMessage)),
        FanCase(
            "disableNotification beats status message", [Msg.login("b")],
            Msg.send("a", "m1", ["isStatusMessage": true, "disableNotification": true]),
            all(["b"], .disableNotification)),
        FanCase("status message with nobody online", [], Msg.send("a", "m1", ["isStatusMessage": true]), d([])),
        FanCase(
            "status message after the last device logged out",
            [Msg.login("b", "d1"), Msg.login("b", "d2"), Msg.login("c"), Msg.logout("b", "d1"), Msg.logout("c")],
            Msg.send("a", "m1", ["isStatusMessage": true]), all(["b"], .statusMessage)),
        FanCase(
            "status message: all devices gone",
            [Msg.login("b", "d1"), Msg.login("b", "d2"), Msg.logout("b", "d2"), Msg.logout("b", "d1")],
            Msg.send("a", "m1", ["isStatusMessage": true]), d([])),
        FanCase(
            "status message to an online member who joined later",
            [Msg.login("x"), op("team.invite", "own", ["team": "t1", "targets": ["x"]])],
            Msg.send("a", "m1", ["isStatusMessage": true]), all(["x"], .statusMessage)),
        FanCase(
            "status message, directed", [Msg.login("b"), Msg.login("c")],
            Msg.send("a", "m1", ["isStatusMessage": true, "directedUserIds": ["b", "own"]]), all(["b"], .statusMessage)),
        FanCase(
            "team mute + manager sending",
            [
                op("team.muteAll", "own", ["team": "t1", "muted": true]), Msg.notify("b", "managerOnly"),
                Msg.notify("c", "none"),
            ],
            Msg.send("mgr", "m1"), d(["own", "a", "b", "c"], ["c": .notifyNone])),
        FanCase(
            "team mute + owner sending",
            [op("team.muteAll", "mgr", ["team": "t1", "muted": true]), Msg.notify("mgr", "managerOnly")],
            Msg.send("own", "m1"), d(["mgr", "a", "b", "c"])),
        FanCase(
            "a removed manager is a normal sender",
            [op("team.removeManagers", "own", ["team": "t1", "targets": ["mgr"]]), Msg.notify("b", "managerOnly")],
            Msg.send("mgr", "m1"), d(["own", "a", "b", "c"], ["b": .managerOnly])),
        FanCase(
            "receivers in slot order: a joiner takes the freed slot",
            [op("team.leave", "a", ["team": "t1"]), op("team.invite", "own", ["team": "t1", "targets": ["x", "y"]])],
            Msg.send("b", "m1"), d(["own", "mgr", "x", "c", "y"])),
    ]

    static let tips: [FanCase] = [
        FanCase(
            "update tip: every member incl. the actor, silenced tip",
            [Msg.notify("b", "none"), Msg.notify("c", "managerOnly")],
            op("team.update", "own", ["team": "t1", "fields": ["name": "Dev"] as KeyValuePairs<String, Any>]),
            all(["own", "mgr", "a", "b", "c"], .tip)),
        FanCase(
            "invite tip reaches the new members", [], op("team.invite", "mgr", ["team": "t1", "targets": ["x"]]),
            all(["own", "mgr", "a", "b", "c", "x"], .tip)),
        FanCase(
            "kick tip reaches the removed", [], op("team.kick", "own", ["team": "t1", "targets": ["c", "a"]]),
            all(["own", "mgr", "b", "c", "a"], .tip)),
        FanCase(
            "leave tip reaches the leaver", [], op("team.leave", "a", ["team": "t1"]),
            all(["own", "mgr", "b", "c", "a"], .tip)),
        FanCase(
            "dismiss tip reaches every former member", [], op("team.dismiss", "own", ["team": "t1"]),
            all(["own", "mgr", "a", "b", "c"], .tip)),
        FanCase(
            "transfer + leave: two tips, the second to the leaver too", [],
            op("team.transferOwner", "own", ["team": "t1", "target": "a", "leave": true]),
            all(["own", "mgr", "a", "b", "c"], .tip), all(["mgr", "a", "b", "c", "own"], .tip)),
        FanCase(
            "mute tip", [], op("team.muteMember", "own", ["team": "t1", "target": "b", "muted": true]),
            all(["own", "mgr", "a", "b", "c"], .tip)),
        FanCase("setNotify has no tip", [], Msg.notify("a", "none")),
    ]

    static let p2p: [FanCase] = [
        FanCase("p2p message", [], Msg.send("a", "m1", to: Msg.p2p("b")), d(["b"])),
        FanCase(
            "p2p disableNotification", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["disableNotification": true]),
            all(["b"], .disableNotification)),
        FanCase(
            "p2p directed to the peer", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["directedUserIds": ["b", "a"]]),
            d(["b"])),
        FanCase(
            "p2p directed to the sender", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["directedUserIds": ["a"]]), d([])),
        FanCase(
            "p2p status message, peer offline", [Msg.login("a")],
            Msg.send("a", "m1", to: Msg.p2p("b"), ["isStatusMessage": true]), d([])),
        FanCase(
            "p2p status message, peer online", [Msg.login("b")],
            Msg.send("a", "m1", to: Msg.p2p("b"), ["isStatusMessage": true]),
            all(["b"], .statusMessage)),
        FanCase(
            "p2p ignores the team notify state", [Msg.notify("b", "none")], Msg.send("a", "m1", to: Msg.p2p("b")),
            d(["b"])),
    ]

    func check(_ c: FanCase) {
        var m = Machine()
        m.setup(Self.base + c.setup)
        let result = m.run(c.op)
        #expect(result == nil, "\(c.name): rejected \(String(describing: result))")
        let got = Self.deliveries(m)
        #expect(got == c.expect, "\(c.name)")
        for d in m.deliveries {
            #expect(Set(d.alerted).isDisjoint(with: d.silenced.map(\.user)), "\(c.name): alerted and silenced overlap")
            #expect(Set(d.alerted).union(d.silenced.map(\.user)) == Set(d.receivers), "\(c.name): not a partition")
            #expect(d.seq == m.world.lastSeq)
        }
    }

    @Test(arguments: team) func teamMessages(_ c: FanCase) { check(c) }
    @Test(arguments: tips) func tipDeliveries(_ c: FanCase) { check(c) }
    @Test(arguments: p2p) func p2pMessages(_ c: FanCase) { check(c) }

    @Test func deliveryNamesTheConversationAndMessage() throws {
        var m = Machine()
        m.setup(Self.base + [op("team.create", "own", ["team": "s1", "kind": "superTeam", "members": ["a"]])])
        #expect(m.run(Msg.send("a", "m1", to: Msg.superTeam("s1"))) == nil)
        let d = try #require(m.deliveries.first)
        #expect(d.to == Conversation(.superTeam, "s1"))
        #expect(d.messageId == "m1")
        #expect(
            m.run(op("team.update", "own", ["team": "s1", "fields": ["intro": "x"] as KeyValuePairs<String, Any>]))
                == nil)
        #expect(m.deliveries.first?.to == Conversation(.superTeam, "s1"))
        #expect(m.deliveries.first?.messageId == "tip-\(m.world.lastSeq)")
        #expect(m.run(Msg.send("a", "p1", to: Msg.p2p("b"))) == nil)
        #expect(m.deliveries.first?.to == Conversation(.p2p, "b"))
    }

    /// A team delivery holds its fan-out's bits over the roster as it was and lists ids only when read: what
    /// it lists never changes when the roster does afterwards (leaves, joins, notify, roles, a dismissal),
    /// and its counts, its JSON and its listed copy agree.
    @Test func aDeliveryListsTheRosterAsItWasWhenSent() throws {
        var m = Machine()
        m.setup(Self.base + [Msg.notify("b", "none"), Msg.notify("c", "managerOnly")])
        #expect(m.run(Msg.send("a", "m1")) == nil)
        let d = try #require(m.deliveries.first)
        let listed = Delivery(
            seq: d.seq, to: d.to, messageId: d.messageId, receivers: d.receivers, alerted: d.alerted,
            silenced: d.silenced)
        let json = Record.output(.delivery(d)).jsonLine
        #expect(d.receivers == ["own", "mgr", "b", "c"])
        #expect(d.alerted == ["own", "mgr"])
        #expect(d.silenced.map { "\($0.user):\($0.reason.rawValue)" } == ["b:notifyNone", "c:managerOnly"])
        m.setup([
            Msg.notify("b", "all"), Msg.notify("own", "none"),
            op("team.kick", "own", ["team": "t1", "targets": ["mgr", "c"]]),
            op("team.invite", "own", ["team": "t1", "targets": ["x", "y"]]),
            op("team.dismiss", "own", ["team": "t1"]),
        ])
        #expect(d == listed)
        #expect(Record.output(.delivery(d)).jsonLine == json)
        #expect(Record.output(.delivery(listed)).jsonLine == json)
        #expect(d.receiverCount == 4 && d.silencedCount == 2)
        #expect(listed.receiverCount == 4 && listed.silencedCount == 2)
        #expect(Record.output(.delivery(d)).jsonLine.contains(#""silenced":{"b":"notifyNone","c":"managerOnly"}"#))
    }

    /// Tips are stored and become the last message, but never count.
    @Test func tipsNeverCount() {
        var m = Machine()
        m.setup(Self.base)
        let key = ConvKey(team: "t1", kind: .team)
        m.setup([
            op("team.update", "own", ["team": "t1", "fields": ["name": "Dev"] as KeyValuePairs<String, Any>]),
            op("team.invite", "own", ["team": "t1", "targets": ["x"]]),
        ])
        for u: Id in ["own", "mgr", "a", "b", "c", "x"] { #expect(m.unread(u, key) == 0, "\(u)") }
        #expect(m.world.lastMessage("a", key)?.messageId == "tip-\(m.world.lastSeq)")
        #expect(m.world.messages["tip-\(m.world.lastSeq)"]?.isTip == true)
    }

    /// Alert mode never changes receiving or counting (NIM).
    @Test func silencedReceiversStillCount() {
        var m = Machine()
        m.setup(Self.base + [Msg.notify("b", "none"), Msg.notify("c", "managerOnly")])
        let key = ConvKey(team: "t1", kind: .team)
        m.setup([Msg.send("a", "m1"), Msg.send("a", "m2", ["disableNotification": true])])
        for u: Id in ["own", "mgr", "b", "c"] { #expect(m.unread(u, key) == 2, "\(u)") }
        #expect(m.unread("a", key) == 0)
    }

    // MARK: The bitset core, on hand-built rosters

    /// A roster of `slots` slots; attribute bits only on present slots (as `TeamState` keeps them).
    static func roster(
        _ slots: Int, absent: Set<Int> = [], admins: Set<Int> = [], none: Set<Int> = [],
        managerOnly: Set<Int> = [], online: Set<Int> = []
    ) -> MemberBits {
        let words = (slots + 63) / 64
        func bits(_ set: Set<Int>) -> [UInt64] { word(set.filter { $0 < slots && !absent.contains($0) }, words) }
        var b = MemberBits()
        b.present = bits(Set(0..<slots))
        b.admins = bits(admins)
        b.notifyNone = bits(none)
        b.notifyManagerOnly = bits(managerOnly)
        b.online = bits(online)
        return b
    }

    static func word(_ slots: Set<Int>, _ words: Int) -> [UInt64] {
        var w = [UInt64](repeating: 0, count: words)
        for s in slots { w[s >> 6] |= 1 << UInt64(s & 63) }
        return w
    }

    static func slots(_ words: [UInt64]) -> [Int] {
        var out: [Int] = []
        MemberBits.forEachSlot(words) { out.append($0) }
        return out
    }

    @Test func coreSpansThreeWords() {
        let bits = Self.roster(130, absent: [0, 63, 127], none: [1, 65, 129], managerOnly: [2, 66, 128, 64])
        #expect(bits.wordCount == 3)
        var core = FanOut()
        core.run(bits, FanOut.Message(senderSlot: 64, senderIsAdmin: false, mentions: Self.word([66, 65, 0], 3)))
        let expectedReceivers = (0..<130).filter { ![0, 63, 127, 64].contains($0) }
        #expect(Self.slots(core.receivers) == expectedReceivers)
        #expect(MemberBits.count(core.receivers) == 126)
        #expect(Self.slots(core.silencedNone) == [1, 65, 129], "a mention does not lift none")
        #expect(Self.slots(core.silencedManagerOnly) == [2, 128], "the mention lifts 66; 64 is the sender")
        #expect(Self.slots(core.alerted) == expectedReceivers.filter { ![1, 65, 129, 2, 128].contains($0) })
        #expect(core.reason(1) == .notifyNone)
        #expect(core.reason(129) == .notifyNone)
        #expect(core.reason(128) == .managerOnly)
        #expect(core.reason(66) == nil)
        #expect(core.reason(64) == nil, "the sender is not a receiver")
        #expect(core.reason(0) == nil, "an empty slot is not a receiver")
        #expect(core.reason(500) == nil)

        core.run(bits, FanOut.Message(senderSlot: 64, senderIsAdmin: true))
        #expect(core.silencedManagerOnly == [0, 0, 0], "an admin sender lifts managerOnly")
        #expect(Self.slots(core.silencedNone) == [1, 65, 129])
    }

    @Test(arguments: [SilenceReason.disableNotification, .tip, .statusMessage])
    func messageLevelReasonSilencesEveryReceiver(_ reason: SilenceReason) {
        let bits = Self.roster(130, none: [5], managerOnly: [70], online: Set(0..<130))
        var core = FanOut()
        core.run(
            bits,
            FanOut.Message(
                senderSlot: nil, senderIsAdmin: false, silenceAll: reason,
                onlineOnly: reason == .statusMessage, mentions: Self.word([70], 3)))
        #expect(MemberBits.count(core.receivers) == 130, "no sender: every present slot receives")
        #expect(MemberBits.count(core.alerted) == 0)
        #expect(MemberBits.count(core.silencedNone) == 0)
        #expect(MemberBits.count(core.silencedManagerOnly) == 0)
        #expect(core.silenceAll == reason)
        for slot in [0, 5, 63, 64, 70, 129] { #expect(core.reason(slot) == reason) }
        #expect(core.reason(130) == nil)
    }

    @Test func coreOnlineOnlyAndDirected() {
        let bits = Self.roster(130, absent: [4], online: [3, 4, 70, 129, 10])
        var core = FanOut()
        core.run(
            bits, FanOut.Message(senderSlot: 10, senderIsAdmin: false, silenceAll: .statusMessage, onlineOnly: true))
        #expect(Self.slots(core.receivers) == [3, 70, 129], "online, present, not the sender")
        // A directed set shorter than the roster: the missing words direct to nobody.
        core.run(bits, FanOut.Message(senderSlot: 10, senderIsAdmin: false, directed: Self.word([3, 4, 10, 63], 1)))
        #expect(Self.slots(core.receivers) == [3, 63])
        core.run(bits, FanOut.Message(senderSlot: 10, senderIsAdmin: false, directed: Self.word([129, 64], 3)))
        #expect(Self.slots(core.receivers) == [64, 129])
        // Directed and online-only together.
        core.run(
            bits,
            FanOut.Message(
                senderSlot: nil, senderIsAdmin: false, onlineOnly: true, directed: Self.word([3, 5, 129], 3)))
        #expect(Self.slots(core.receivers) == [3, 129])
        #expect(Self.slots(core.alerted) == [3, 129])
    }

    @Test func coreBuffersDoNotLeakBetweenRuns() {
        var core = FanOut()
        core.run(
            Self.roster(130, none: [100], managerOnly: [120]), FanOut.Message(senderSlot: nil, senderIsAdmin: false))
        #expect(MemberBits.count(core.receivers) == 130)
        // A smaller roster with the same and then a different word count.
        core.run(Self.roster(130, absent: Set(3..<130)), FanOut.Message(senderSlot: 0, senderIsAdmin: false))
        #expect(Self.slots(core.receivers) == [1, 2])
        #expect(MemberBits.count(core.silencedNone) == 0)
        #expect(MemberBits.count(core.silencedManagerOnly) == 0)
        core.run(Self.roster(3), FanOut.Message(senderSlot: 2, senderIsAdmin: false))
        #expect(core.receivers == [0b11])
        #expect(core.reason(100) == nil)
        core.run(Self.roster(0), FanOut.Message(senderSlot: 0, senderIsAdmin: false))
        #expect(core.receivers.isEmpty)
        #expect(core.reason(0) == nil)
        // A sender slot past the roster is ignored.
        core.run(Self.roster(65), FanOut.Message(senderSlot: 700, senderIsAdmin: false))
        #expect(MemberBits.count(core.receivers) == 65)
    }

    /// The core against a per-member reading of §2, on seeded random rosters up to 300 slots.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func coreMatchesTheRuleMemberByMember(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var core = FanOut()
        func pick(_ n: Int, _ p: Double) -> Set<Int> { Set((0..<n).filter { _ in rng.chance(p) }) }
        for _ in 0..<150 {
            let n = Int.random(in: 0...300, using: &rng)
            let absent = pick(n, 0.2)
            let none = pick(n, 0.2)
            let managerOnly = pick(n, 0.3).subtracting(none)
            let bits = Self.roster(
                n, absent: absent, admins: pick(n, 0.1), none: none, managerOnly: managerOnly, online: pick(n, 0.5))
            let words = bits.wordCount
            let sender: Int? = n > 0 && rng.chance(0.9) ? Int.random(in: 0..<n, using: &rng) : nil
            let senderIsAdmin = rng.chance(0.3)
            let status = rng.chance(0.2)
            let disable = rng.chance(0.15)
            let directedSet: Set<Int>? = rng.chance(0.3) ? pick(n, 0.3) : nil
            let mentionSet: Set<Int>? = rng.chance(0.4) ? pick(n, 0.2) : nil
            let silenceAll: SilenceReason? = disable ? .disableNotification : (status ? .statusMessage : nil)
            core.run(
                bits,
                FanOut.Message(
                    senderSlot: sender, senderIsAdmin: senderIsAdmin, silenceAll: silenceAll, onlineOnly: status,
                    directed: directedSet.map { Self.word($0, words) },
                    mentions: mentionSet.map { Self.word($0, words) }))
            for slot in 0..<n {
                let receives =
                    !absent.contains(slot) && slot != sender && (directedSet?.contains(slot) ?? true)
                    && (!status || MemberBits.test(bits.online, slot))
                var reason: SilenceReason? = nil
                if receives {
                    if let silenceAll {
                        reason = silenceAll
                    } else if none.contains(slot) {
                        reason = .notifyNone
                    } else if managerOnly.contains(slot) && !senderIsAdmin && !(mentionSet?.contains(slot) ?? false) {
                        reason = .managerOnly
                    }
                }
                #expect(MemberBits.test(core.receivers, slot) == receives, "seed \(seed) slot \(slot)")
                #expect(core.reason(slot) == reason, "seed \(seed) slot \(slot)")
                #expect(MemberBits.test(core.alerted, slot) == (receives && reason == nil), "seed \(seed) slot \(slot)")
            }
        }
    }

    // MARK: Property: alert mode changes only alerting

    /// Seeded random teams and messages, run in two worlds that differ only in one member's notify state:
    /// receivers, counting, receipts and last messages are equal; only `alerted`/`silenced` of that member
    /// may differ.
    @Test(arguments: Array(1...12) as [UInt64])
    func notifyStateChangesOnlyAlerting(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let n = Int.random(in: 3...140, using: &rng)
        let users = (0..<n).map { "u\($0)" }
        var setup = [op("team.create", "u0", ["team": "t1", "members": Array(users.dropFirst())])]
        let managers = users.dropFirst().filter { _ in rng.chance(0.15) }
        if !managers.isEmpty { setup.append(op("team.addManagers", "u0", ["team": "t1", "targets": Array(managers)])) }
        for u in users where rng.chance(0.6) {
            setup.append(Msg.notify(u, ["all", "managerOnly", "none"].randomElement(using: &rng)!))
        }
        for u in users where rng.chance(0.4) { setup.append(Msg.login(u)) }
        // Holes and a joiner who takes a freed slot.
        let leavers = users.dropFirst().filter { _ in rng.chance(0.1) }.filter { !managers.contains($0) }
        for u in leavers { setup.append(op("team.leave", u, ["team": "t1"])) }
        if !leavers.isEmpty, rng.chance(0.5) {
            setup.append(op("team.invite", "u0", ["team": "t1", "targets": ["late"]]))
        }

        var a = Machine()
        a.setup(setup)
        let members = a.world.teams["t1"]!.memberIds
        let target = members.randomElement(using: &rng)!
        let states = ["all", "managerOnly", "none"].shuffled(using: &rng)
        var b = a
        a.setup([Msg.notify(target.string, states[0])])
        b.setup([Msg.notify(target.string, states[1])])
        let key = ConvKey(team: "t1", kind: .team)
        var targetAlertDiffers = 0

        for i in 0..<40 {
            let sender = members.randomElement(using: &rng)!
            var pairs: [(String, JSONValue)] = [
                ("op", .string("message.send")), ("actor", .string(sender)), ("to", Msg.team()),
                ("messageId", .string("m\(i)")), ("content", Msg.content("text")),
            ]
            if rng.chance(0.3) {
                pairs.append(
                    (
                        "directedUserIds",
                        .array(
                            members.filter { _ in rng.chance(0.3) }.prefix(30).map { .string($0) } + [.string(target)])
                    ))
            }
            if rng.chance(0.4) {
                pairs.append(("mentions", .array(members.filter { _ in rng.chance(0.2) }.map { .string($0) })))
            }
            for flag in ["needReceipt", "disableNotification", "isStatusMessage", "disableUpdateLastMessage"]
            where rng.chance(0.2) {
                pairs.append((flag, .bool(true)))
            }
            if rng.chance(0.15) { pairs.append(("isCounted", .bool(false))) }
            let line = JSONValue.object(pairs).jsonString
            let ra = a.run(line)
            let rb = b.run(line)
            #expect(ra == rb, "seed \(seed) message \(i): \(line)")
            guard ra == nil else { continue }
            let da = a.deliveries, db = b.deliveries
            #expect(da.count == 1 && db.count == 1)
            guard let x = da.first, let y = db.first else { continue }
            #expect(x.receivers == y.receivers, "seed \(seed) message \(i): receivers differ")
            #expect(x.alerted.filter { $0 != target } == y.alerted.filter { $0 != target }, "seed \(seed) message \(i)")
            if x.alerted.contains(target) != y.alerted.contains(target) { targetAlertDiffers += 1 }
            #expect(
                x.silenced.filter { $0.user != target }.map { "\($0.user):\($0.reason)" }
                    == y.silenced.filter { $0.user != target }.map { "\($0.user):\($0.reason)" },
                "seed \(seed) message \(i)")
            for u in users.map({ Id($0) }) + ["late"] {
                #expect(a.unread(u, key) == b.unread(u, key), "seed \(seed) message \(i): unread of \(u)")
                #expect(
                    a.world.lastMessage(u, key) == b.world.lastMessage(u, key),
                    "seed \(seed) message \(i): last of \(u)")
            }
            #expect(a.world.receipts == b.world.receipts)
            #expect(a.world.convs == b.world.convs)
            #expect(a.world.userConvs == b.world.userConvs)
            #expect(a.world.messages == b.world.messages)
            // A read in both worlds keeps them in step.
            if rng.chance(0.2) {
                let reader = members.randomElement(using: &rng)!
                let upTo = Int(a.world.lastSeq) - Int.random(in: 0...5, using: &rng)
                let line = Msg.read(reader.string, upTo: max(upTo, 0))
                #expect(a.run(line) == nil && b.run(line) == nil)
            }
        }
        // Not vacuous: with `none` on one side the target's alerting must have differed somewhere.
        if states[0] == "none" || states[1] == "none" {
            #expect(targetAlertDiffers > 0, "seed \(seed): \(target) \(states[0]) vs \(states[1]) never differed")
        }
    }
}

/// A run that lists no deliveries (a replay, an ingest printing none) decides only who receives a team
/// message — for a plain broadcast, not even that: its count is the roster's. It must reach the same state
/// and the same counts as a run that decides and lists every alert.
@Suite struct FanOutWithoutDeliveriesTests {
    @Test(arguments: [UInt64(1), 7, 42])
    func sameStateAndCountsAsAFullFanOut(seed: UInt64) {
        var workload = MixedWorkload(options: .init(seed: seed, users: 600, teams: 12, maxTeam: 300))
        var full = World()
        var lean = World()
        lean.wantsDeliveries = false
        var fullStats = FanOutStats()
        var leanStats = FanOutStats()
        var fullOut: [Output] = []
        var leanOut: [Output] = []
        var kinds: [String: Int] = [:]
        for i in 0..<6_000 {
            let line = workload.next()
            guard case .success(let op) = OpParser.parse(line: line),
                case .success(let event) = full.decide(op, now: op.ts ?? 0)
            else { continue }
            if case .messageSend(let m) = op.body, m.to.kind != .p2p {
                let kind =
                    m.directedUserIds != nil
                    ? "directed" : m.isStatusMessage ? "status" : m.needReceipt ? "receipt" : "plain"
                kinds[kind, default: 0] += 1
            }
            fullOut.removeAll(keepingCapacity: true)
            leanOut.removeAll(keepingCapacity: true)
            full.apply(event, into: &fullOut, counting: &fullStats)
            lean.apply(event, into: &leanOut, counting: &leanStats)
            #expect(
                !leanOut.contains { if case .delivery = $0 { true } else { false } },
                "seed \(seed) line \(i): no delivery is listed")
        }
        let sameState = lean.projected == full.projected  // not in `#expect`: it would print both states
        #expect(sameState, "seed \(seed): the projections differ")
        #expect(leanStats == fullStats, "seed \(seed)")
        #expect(lean.invariantViolations().isEmpty)
        // Not vacuous: every kind of team message went through both paths.
        for kind in ["plain", "receipt", "directed", "status"] {
            #expect(kinds[kind, default: 0] > 0, "seed \(seed): no \(kind) team message in the run")
        }
        #expect(fullStats.deliveries > fullStats.messages, "team messages reached several members each")
    }
}
