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
}
