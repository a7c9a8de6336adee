import LMDB
import TeamLog
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

/// Random op sequences (seeded): invariants after every step; replaying the log equals the stored
/// projections, byte for byte, after a reopen.
@Suite struct PropertyTests {
    /// A mix of plausible ops (from the workload model) and ops by random actors on random teams, so
    /// both accepted and rejected paths run.
    static func randomLines(seed: UInt64, count: Int) -> [String] {
        var rng = SplitMix64(seed: seed)
        let plausible = TeamWorkloadProbe.lines(
            count: count, seed: seed, users: 40, teams: 8, invalidShare: 0.1,
            config: small)
        let names = [
            "team.invite", "team.kick", "team.leave", "team.addManagers", "team.removeManagers",
            "team.muteMember", "team.transferOwner", "team.dismiss", "team.apply", "team.acceptInvite",
        ]
        return plausible.map { line in
            guard rng.chance(0.15) else { return line }
            let user = "u\(Int.random(in: 0..<40, using: &rng))"
            let other = "u\(Int.random(in: 0..<40, using: &rng))"
            let team = "t\(Int.random(in: 0..<8, using: &rng))"
            let name = names.randomElement(using: &rng)!
            return op(name, user, ["team": team, "targets": [other], "target": other, "muted": true, "inviter": other])
        }
    }

    static let small: Config = {
        var c = Config()
        c.teamMaxMembers = 25
        c.superTeamMaxMembers = 40
        return c
    }()

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func invariantsHoldAndReplayEqualsStored(seed: UInt64) throws {
        // Odd seeds run with a working set of 8 KiB and a checkpoint every 25 ops: nearly everything is
        // evicted at each checkpoint and loaded again by the next op that needs it.
        let tiny = seed % 2 == 1
        let h = try StoreHarness(
            config: Self.small, batchSize: Int(seed) * 13, cacheBytes: tiny ? 8 << 10 : Store.defaultCacheBytes,
            checkpointOps: tiny ? 25 : Store.Options().checkpointOps)
        var accepted = 0
        var rejected = 0
        for line in Self.randomLines(seed: seed, count: 1_200) {
            let records = try h.feed(line)
            accepted += records.filter { $0["kind"]?.stringValue == "event" }.count
            rejected += records.filter { $0["kind"]?.stringValue == "rejected" }.count
            let problems = h.store.world.invariantViolations()
            #expect(problems.isEmpty, "after \(line): \(problems)")
            if !problems.isEmpty { return }
        }
        #expect(
            accepted > 300 && rejected > 50,
            "the mix must exercise both paths: \(accepted) accepted, \(rejected) rejected")
        try h.reopen()
        let replay = try h.store.replay()
        #expect(replay.problem == nil)
        #expect(replay.events == accepted)
        let rebuilt = ProjectionCodec.allRecords(replay.world)
        let stored = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }
        for table in ProjectionTable.allCases {
            let s = stored[table] ?? []
            let r = rebuilt[table] ?? []
            let sameKeys = s.map(\.0) == r.map(\.0)
            let sameValues = s.map(\.1) == r.map(\.1)
            #expect(sameKeys && sameValues, "\(table): \(s.count) stored vs \(r.count) replayed records differ")
        }
        // Every projected table as one value (`Projections` is `Equatable`), not only its records' bytes.
        let loaded = try h.store.loadAllProjections()
        #expect(replay.world.projected == loaded.projected, "replayed state differs from the stored state")
        #expect(loaded.invariantViolations().isEmpty, "\(loaded.invariantViolations().prefix(5))")
        let report = try h.store.audit()
        #expect(report.ok, "\(report.tables.compactMap(\.difference)) \(String(describing: report.chainProblem))")
    }

    /// Deterministic: the same log gives byte-identical projections in two stores.
    @Test func sameInputSameBytes() throws {
        let lines = Self.randomLines(seed: 9, count: 800)
        let a = try StoreHarness(config: Self.small, batchSize: 50)
        let b = try StoreHarness(config: Self.small, batchSize: 7, cacheBytes: 4 << 10, checkpointOps: 10)
        try a.feed(lines)
        try b.feed(lines)
        let pa = try a.store.readProjections { txn in try a.store.storedProjections(in: txn) }
        let pb = try b.store.readProjections { txn in try b.store.storedProjections(in: txn) }
        for table in ProjectionTable.allCases {
            let same = pa[table]!.map(\.1) == pb[table]!.map(\.1)
            #expect(same, "\(table) differs between two stores fed the same input")
        }
        #expect(a.store.lastHash == b.store.lastHash)
    }
}
