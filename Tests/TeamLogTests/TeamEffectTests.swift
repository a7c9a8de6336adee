import TeamLog
import TestSupport
import Testing

/// The state each accepted team op leaves behind.
@Suite struct TeamEffectTests {
    @Test func createSetsOwnerModesAndMembers() throws {
        var m = Machine()
        m.setup([
            op(
                "team.create", "own",
                [
                    "team": "t1", "kind": "superTeam", "name": "Ops", "members": ["a", "own", "b"],
                    "joinMode": "free", "inviteMode": "all", "beInviteMode": "needConsent",
                    "updateInfoMode": "all", "muted": true,
                ])
        ])
        let t = try #require(m.world.teams["t1"])
        #expect(t.kind == .superTeam)
        #expect(t.owner == "own")
        #expect(t.member("own")?.role == .owner)
        #expect(t.memberIds == ["own", "a", "b"])
        #expect(
            t.joinMode == .free && t.inviteMode == .all && t.beInviteMode == .needConsent && t.updateInfoMode == .all)
        #expect(t.muted)
    }

    @Test func transferMakesOldOwnerNormal() throws {
        var m = Machine()
        m.setup(baseTeam + [op("team.transferOwner", "own", ["team": "t1", "target": "mgr"])])
        let t = try #require(m.world.teams["t1"])
        #expect(t.owner == "mgr")
        #expect(t.member("mgr")?.role == .owner)
        #expect(t.member("own")?.role == .normal)
    }

    @Test func muteUntilEndsByEventTime() throws {
        var m = Machine()
        m.setup(
            baseTeam + [op("team.muteMember", "own", ["team": "t1", "target": "a", "muted": true, "until": 5_000])])
        let member = try #require(m.world.teams["t1"]?.member("a"))
        #expect(member.mutedUntil == 5_000)
        #expect(member.isMuted(at: 4_999))
        #expect(!member.isMuted(at: 5_000))
        m.setup([op("team.muteMember", "own", ["team": "t1", "target": "a", "muted": false])])
        #expect(m.world.teams["t1"]?.member("a")?.mutedUntil == nil)
    }

    @Test func joinClearsPendingRequests() throws {
        var m = Machine()
        m.setup(
            baseTeam + [
                op(
                    "team.update", "own",
                    ["team": "t1", "fields": ["beInviteMode": "needConsent"] as KeyValuePairs<String, Any>]),
                op("team.apply", "x", ["team": "t1"]),
                op("team.invite", "mgr", ["team": "t1", "targets": ["x"]]),
                op("team.invite", "own", ["team": "t1", "targets": ["x"]]),
            ])
        #expect(m.world.teams["t1"]?.invites["x"] == ["mgr", "own"])
        m.setup([op("team.acceptInvite", "x", ["team": "t1", "inviter": "own"])])
        #expect(m.world.teams["t1"]?.invites["x"] == nil)
        #expect(m.world.teams["t1"]?.applications["x"] == nil)
        #expect(m.world.teams["t1"]?.isMember("x") == true)
    }

    /// A dismissal ends every membership by marking the team: the roster stays as it was (no record per
    /// member), out of every user's team index and with nobody online; later ops are `dismissed`.
    @Test func dismissRemovesEveryoneAndLaterOpsAreDismissed() throws {
        var m = Machine()
        m.setup(baseTeam + [op("client.login", "a", ["device": "d1"]), op("team.apply", "x", ["team": "t1"])])
        let before = try #require(m.world.teams["t1"])
        #expect(MemberBits.count(before.bits.online) == 1)
        m.setup([op("team.dismiss", "own", ["team": "t1"])])
        let t = try #require(m.world.teams["t1"])
        #expect(t.dismissed)
        #expect(t.slots == before.slots && t.memberCount == 4)
        #expect(MemberBits.count(t.bits.online) == 0)
        #expect(m.world.userTeams.values.allSatisfy { !$0.contains("t1") })
        #expect(t.applications.isEmpty)
        m.setup([op("client.logout", "a", ["device": "d1"]), op("client.login", "b", ["device": "d1"])])
        #expect(m.world.teams["t1"]?.bits == t.bits, "presence no longer updates the roster")
        #expect(m.world.invariantViolations().isEmpty && m.world.derivedIndexViolations().isEmpty)
        #expect(m.run(op("member.setNotify", "a", ["team": "t1", "state": "none"]))?.code == .dismissed)
    }

    @Test func eventTimeNeverGoesBackwards() {
        var m = Machine()
        m.setup([op("team.create", "own", ["team": "t1", "ts": 5_000])])
        m.setup([op("team.create", "own", ["team": "t2", "ts": 4_000])])
        #expect(m.world.lastTs == 5_000)
        m.now = 9_000
        m.setup([op("team.create", "own", ["team": "t3"])])
        #expect(m.world.lastTs == 9_000)
    }

    @Test func slotsAreReusedLowestFirst() throws {
        var m = Machine()
        m.setup(
            baseTeam + [
                op("team.kick", "own", ["team": "t1", "targets": ["mgr", "a"]]),
                op("team.invite", "own", ["team": "t1", "targets": ["x", "y", "z"]]),
            ])
        let t = try #require(m.world.teams["t1"])
        #expect(t.member("x")?.slot == 1)
        #expect(t.member("y")?.slot == 2)
        #expect(t.member("z")?.slot == 4)
    }
}
