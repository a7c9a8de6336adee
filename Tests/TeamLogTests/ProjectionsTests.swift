import TeamLog
import TestSupport
import Testing

/// `Projections` is what the log projects, as one `Equatable` value: equal after the same events, unequal
/// after different ones, and blind to what is not state (residency stamps, change tracking, work counters,
/// the working set's counts).
struct ProjectionsTests {
    static let lines =
        baseTeam + [
            Msg.send("a", "m1", ["needReceipt": true]), Msg.send("own", "m2"),
            op("message.read", "b", ["to": Msg.team(), "upTo": 5]),
            Msg.send("a", "p1", to: Msg.conv("p2p", "b")),
            op("team.kick", "own", ["team": "t1", "targets": ["b"]]),
        ]

    static func run(_ lines: [String]) -> World {
        var m = Machine()
        m.setup(lines)
        return m.world
    }

    @Test func sameEventsEqualDifferentOnesDoNot() {
        let a = Self.run(Self.lines)
        let b = Self.run(Self.lines)
        #expect(a.projected == b.projected)
        #expect(a.lastSeq == UInt64(Self.lines.count))
        #expect(Self.run(Self.lines.dropLast()).projected != a.projected, "one event fewer")
        var other = Self.lines
        other[other.count - 2] = Msg.send("a", "p1", to: Msg.conv("p2p", "c"))
        #expect(Self.run(other).projected != a.projected, "the same number of events, one different")
    }

    @Test func whatIsNotStateDoesNotCount() {
        let a = Self.run(Self.lines)
        var b = Self.run(Self.lines)
        #expect(b.stamp(ResidentKey.team("t1"), seq: 999) != nil, "t1 is resident and stamped")
        b.clearChanges()
        var stats = FanOutStats()
        var out: [Output] = []
        b.apply(Event(seq: b.lastSeq + 1, ts: 5_000, op: Op(actor: "x", body: .membersSync)), into: &out, counting: &stats)
        var c = Self.run(Self.lines)
        c.apply(Event(seq: c.lastSeq + 1, ts: 5_000, op: Op(actor: "x", body: .membersSync)), into: &out)
        #expect(b.projected == c.projected, "a stamp, cleared changes and counted stats are not state")
        #expect(b.projected != a.projected)
        #expect(b.residentCounts == c.residentCounts)
        #expect(b.invariantViolations().isEmpty)
    }

    @Test func theCallersCountersAddUp() {
        var m = Machine()
        m.setup(baseTeam)
        var stats = FanOutStats()
        for (i, line) in [Msg.send("a", "m1"), Msg.send("a", "p1", to: Msg.conv("p2p", "b"))].enumerated() {
            guard case .success(let op) = OpParser.parse(line: line),
                case .success(let event) = m.world.decide(op, now: 2_000 + Int64(i))
            else {
                Issue.record("rejected: \(line)")
                return
            }
            m.world.apply(event, into: &m.outputs, counting: &stats)
        }
        let members = m.world.teams["t1"]!.memberCount
        #expect(stats.messages == 2)
        #expect(stats.memberDecisions == members + 2, "the team's members, then the p2p pair")
    }

    /// An accepted op's footprint (a replay's) leaves out the ids the op makes — a sent message's, its
    /// receipt tally's, the tips' — and keeps every unit it reads; an undecided op's names them all.
    @Test func anAcceptedOpsFootprintLeavesOutTheIdsItMakes() {
        let world = Self.run(Self.lines)
        func keys(_ line: String, accepted: Bool) -> Set<ResidentKey> {
            guard case .success(let op) = OpParser.parse(line: line) else { return [] }
            var keys: [ResidentKey] = []
            world.footprint(of: op, into: &keys, accepted: accepted)
            return Set(keys)
        }
        let send = Msg.send("a", "m9", ["needReceipt": true])
        let made: Set<ResidentKey> = [.message("m9"), .receipt("m9")]
        #expect(made.isSubset(of: keys(send, accepted: false)))
        #expect(keys(send, accepted: true) == keys(send, accepted: false).subtracting(made))
        #expect(keys(send, accepted: true).contains(.team("t1")), "the team it reads stays")

        let tip = ResidentKey.message(Id("tip-\(world.lastSeq + 1)"))
        let update = op("team.update", "own", ["team": "t1", "fields": JSONValue.object([("name", .string("n"))])])
        #expect(keys(update, accepted: false).contains(tip))
        #expect(keys(update, accepted: true) == keys(update, accepted: false).subtracting([tip]))

        let content = JSONValue.object([("type", .string("text")), ("text", .string("x"))])
        let modify = op("message.modify", "a", ["messageId": "m1", "content": content])
        // A modify reads a stored message; deciding it also reads the message's team (dismissed?), which
        // applying an accepted one does not need.
        #expect(keys(modify, accepted: true) == [.message("m1")], "a modify reads a stored message")
        #expect(keys(modify, accepted: false) == [.message("m1"), .team("t1")])

        // An accepted create made a new team (`teamExists` refused a used id): nothing stored holds it, its
        // conversation or any view of that, so a replay looks for nothing; deciding one reads them all.
        let create = op("team.create", "own", ["team": "t9", "members": ["a", "b", "c"]])
        #expect(keys(create, accepted: true).isEmpty)
        let conv = ConvKey(team: "t9", kind: .team)
        let read: Set<ResidentKey> = [
            .team("t9"), .conv(conv), .userConv("own", conv), .userConv("a", conv), .userConv("b", conv),
            .userConv("c", conv),
        ]
        #expect(read.isSubset(of: keys(create, accepted: false)))
    }

    /// A team.create adds its roster and every member's view and team list without looking for them (the
    /// team is new): every member has one view from the create's seq and the team in their list, and the
    /// derived indexes and resident counts agree with the tables.
    @Test func aCreatedTeamListsEveryMemberOnce() {
        let members = (1...40).map { "u\($0)" }
        let created = Self.run([op("team.create", "own", ["team": "t1", "members": members])])
        #expect(created.teams["t1"]!.memberCount == 41)
        for user in ["own"] + members {
            #expect(created.userTeams[Id(user)].map(Array.init) == [Id("t1")], "\(user)")
            #expect(created.userConvs[Id(user)]?.count == 1, "\(user)")
            #expect(created.userConvs[Id(user)]?[ConvKey(team: "t1", kind: .team)]?.joinSeq == 1, "\(user)")
        }
        #expect(created.derivedIndexViolations().isEmpty)
        #expect(created.userConvCount == 41)
    }
}

/// `TeamState.admins` (the owner and managers, read through the admin bits) lists them in roster order,
/// as filtering the whole roster does, through promotions, a transfer, a demotion and a departure.
struct AdminListTests {
    @Test func adminsAreTheRosterFilteredInItsOrder() {
        var m = Machine()
        let users = (1...40).map { "u\($0)" }
        m.setup([op("team.create", "own", ["team": "t1", "members": users])])
        func check(_ step: String) {
            let team = m.world.teams["t1"]!
            let filtered = team.roster.filter { $0.role.isAdmin }.map(\.user)
            #expect(team.admins == filtered, "\(step)")
        }
        check("created")
        for (i, line) in [
            op("team.addManagers", "own", ["team": "t1", "targets": ["u33", "u2", "u17"]]),
            op("team.transferOwner", "own", ["team": "t1", "target": "u9"]),
            op("team.removeManagers", "u9", ["team": "t1", "targets": ["u2"]]),
            op("team.leave", "u17", ["team": "t1"]),
            op("team.addManagers", "u9", ["team": "t1", "targets": ["u40", "u1"]]),
        ].enumerated() {
            m.setup([line])
            check("step \(i + 1)")
        }
        #expect(m.world.teams["t1"]!.admins == ["u1", "u9", "u33", "u40"], "the old owner is a member now")
    }
}
