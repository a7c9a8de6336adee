import TeamLog
import TeamLogWorkload
import Testing

/// `TeamState` keeps its fields in one copy-on-write box: copies must still be independent values. Every
/// mutating entry point is used on a copy, and the original must keep every field it had (and the other
/// way round).
@Suite struct TeamStateValueTests {
    private func team(members n: Int) -> TeamState {
        var t = TeamState(id: Id("t1"), kind: .team, owner: Id("u0"), seq: 1, ts: 100)
        t.addMember(Id("u0"), role: .owner, joinSeq: 1)
        for i in 1..<n { t.addMember(Id("u\(i)"), role: .normal, joinSeq: 1) }
        return t
    }

    @Test func aChangedCopyLeavesTheOriginalAsItWas() {
        let original = team(members: 70)
        let snapshot = (
            original.roster, original.bits, original.name, original.invites, original.applications, original.past,
            original.muted
        )
        var copy = original
        copy.name = "renamed"
        copy.muted = true
        copy.invites[Id("x")] = [Id("u0")]
        copy.applications[Id("y")] = "hi"
        copy.addMember(Id("new"), role: .manager, joinSeq: 5)
        copy.removeMember(Id("u3"), at: 6)
        copy.updateMember(Id("u4")) { $0.role = .manager }
        copy.setOnline(Id("u5"), true)
        copy.restorePast(Id("gone"), [PastMembership(joinSeq: 2, leaveSeq: 3, slot: 9)])
        _ = copy.stamp.mark(42)

        #expect(original.roster == snapshot.0)
        #expect(original.bits == snapshot.1)
        #expect(original.name == snapshot.2 && original.invites == snapshot.3)
        #expect(original.applications == snapshot.4 && original.past == snapshot.5 && original.muted == snapshot.6)
        #expect(original.stamp.seq == 0)
        #expect(original.isMember(Id("u3")) && !original.isMember(Id("new")))
        #expect(original.member(Id("u4"))?.role == .normal)
        #expect(copy != original)
        #expect(copy.isMember(Id("new")) && !copy.isMember(Id("u3")))
        #expect(copy.wasMember(Id("u3"), at: 5) && !copy.wasMember(Id("u3"), at: 6))
        #expect(copy.member(Id("u4"))?.role == .manager && copy.stamp.seq == 42)
    }

    @Test func theOriginalChangedLeavesACopyAsItWas() {
        var original = team(members: 10)
        let copy = original
        original.removeMember(Id("u1"), at: 3)
        #expect(copy.isMember(Id("u1")) && copy.past.isEmpty)
        #expect(!original.isMember(Id("u1")) && original.past[Id("u1")]?.count == 1)
    }

    /// Equality is by value, not by box: two teams built apart compare equal, and stamps never count.
    @Test func equalityIsByValue() {
        var a = team(members: 5)
        let b = team(members: 5)
        #expect(a == b)
        _ = a.stamp.mark(7)
        #expect(a == b)
        a.intro = "x"
        #expect(a != b)
    }
}
