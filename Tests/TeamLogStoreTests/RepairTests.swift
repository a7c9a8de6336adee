import LMDB
import TeamLog
import TeamLogThreads
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// `teamlog repair` / `Store.repair()` swaps a compacted copy of the rebuilt projections in for `proj/`
/// (`swapProjections`): the store ends with the replay's tables at the cut, nothing beside `proj/`, and a
/// writer goes on; the `Store` that repaired refuses further use; a repair killed at any point leaves a
/// store that the next repair brings to the same tables as an uninterrupted one.
@Suite struct RepairTests {
    /// `teamlog repair` of a path with no store says so and creates nothing (it made an empty store and
    /// reported "chain OK"): a mistyped path is an error, as for every command but `ingest` and `serve`.
    @Test func aMissingStoreIsAnErrorAndNothingIsCreated() throws {
        let directory = TemporaryDirectory("repair-missing")
        let missing = directory.child("nosuch")
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["repair", "--store", missing], stderr: directory.child("repair.err"),
            timeout: 60)
        #expect(run.status == .exited(1))
        #expect(readTextFile(directory.child("repair.err")).contains("no teamlog store at"))
        #expect(access(missing, F_OK) != 0, "nothing created")
        var options = Store.Options()
        options.mustExist = true
        #expect(throws: StoreError.self) { try Store(path: missing, options: options) }
        #expect(access(missing, F_OK) != 0)
    }

    /// Projections whose file cannot be opened (truncated; a header zeroed) with the log intact: `repair`
    /// refused them ("restore from a copy, or rebuild from the input") although the log — the truth —
    /// holds all it needs. Now readers point to `repair`, which sets the files aside (kept, named) and
    /// rebuilds the same tables from the log.
    @Test(arguments: ["truncated", "zeroed header"])
    func damagedProjectionsAreSetAsideAndRebuiltFromTheLog(damage: String) throws {
        let directory = TemporaryDirectory("repair-damaged-proj")
        let path = try CompactTests.store(directory, count: 1_500)
        let (tables, hash, _) = try CompactTests.contents(path)
        let file = path + "/proj/data.mdb"
        if damage == "truncated" {
            #expect(truncate(file, 20_000) == 0)
        } else {
            let fd = open(file, O_WRONLY | O_CLOEXEC)
            let zeros = [UInt8](repeating: 0, count: 8_192)
            #expect(pwrite(fd, zeros, zeros.count, 0) == zeros.count)
            close(fd)
        }
        let query = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["unread", "u1", "--store", path], stderr: directory.child("query.err"),
            timeout: 60)
        #expect(query.status == .exited(1))
        #expect(readTextFile(directory.child("query.err")).contains("`teamlog repair` sets these files aside"))
        let repair = try ChildProcess.run(TestSupport.teamlogExecutable, ["repair", "--store", path], timeout: 120)
        #expect(repair.status == .exited(0), "\(repair.lines)")
        #expect(repair.lines.first?.hasPrefix("projections: could not be opened") == true, "\(repair.lines)")
        let aside = try #require((directoryEntries(path) ?? []).first { $0.hasPrefix("proj.damaged-") })
        #expect(access(path + "/" + aside + "/data.mdb", F_OK) == 0, "the damaged files are kept")
        let (after, afterHash, status) = try CompactTests.contents(path)
        #expect(after == tables && afterHash == hash, "the same tables, rebuilt from the log")
        #expect(status.checkpointSeq == status.headSeq)
        #expect(status.setAside == [StoreStatus.SetAside(path: path + "/" + aside, kind: "damagedProjections")])
        let shown = try ChildProcess.run(TestSupport.teamlogExecutable, ["status", "--store", path], timeout: 60)
        #expect(shown.lines.contains { $0.hasPrefix("set aside   \(path)/\(aside): projections a repair could not open") })
        #expect(try CompactTests.reader(path).audit().ok)
    }

    @Test func theRebuiltProjectionsAreSwappedInAndNothingIsLeftBeside() throws {
        let directory = TemporaryDirectory("repair-swap")
        let path = try CompactTests.store(directory, count: 1_500)
        let (tables, hash, _) = try CompactTests.contents(path)
        let leftover = path + "/proj.repaired"  // what a killed repair may leave
        #expect(mkdir(leftover, 0o755) == 0)
        try CrashSafetyTests.writeFile(leftover + "/data.mdb", [UInt8](repeating: 7, count: 10_000))

        var options = Store.Options()
        options.verifyChainAtOpen = false
        let store = try Store(path: path, options: options, loadState: false)
        let report = try store.repair()
        #expect(report.problem == nil && report.removedEvents == 0 && report.cutFile == nil, "nothing cut, nothing saved")
        #expect(store.refusal?.code == .closed, "the store that repaired refuses further use")
        store.close()

        #expect(access(leftover, F_OK) != 0, "nothing beside proj/")
        let (after, afterHash, status) = try CompactTests.contents(path)
        #expect(after == tables && afterHash == hash, "a sound store's projections rebuilt as they were")
        #expect(status.checkpointSeq == status.headSeq && status.setAside.isEmpty)
        #expect(try CompactTests.reader(path).audit().ok)
        // A writer opens the repaired store and goes on.
        let writer = try Store(path: path, options: .checkpointing(every: 100))
        #expect(writer.refusal == nil)
        writer.close()
    }

    @Test func aKilledRepairLeavesAStoreTheNextRepairBringsToTheSameTables() throws {
        // Two equal stores, each with the same record broken; one repaired without interruption.
        let (clean, killed) = (TemporaryDirectory("repair-clean"), TemporaryDirectory("repair-killed"))
        let cleanPath = try CompactTests.store(clean, count: 6_000, every: 200)
        let path = try CompactTests.store(killed, count: 6_000, every: 200)
        let seq = try CompactTests.contents(path).2.headSeq - 500
        try TamperTests.breakRecord(cleanPath, seq: seq)
        try TamperTests.breakRecord(path, seq: seq)
        let cleanRun = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["repair", "--store", cleanPath], timeout: 120)
        #expect(cleanRun.status == .exited(0))
        let (expected, expectedHash, _) = try CompactTests.contents(cleanPath)

        try CompactTests.killRepeatedly(
            ["repair", "--store", path], times: 6, seed: 61, within: 150_000, copyAppears: path + "/proj.repaired",
            thenWithin: 5_000
        ) { _ in }
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["repair", "--store", path], stderr: killed.child("repair.err"), timeout: 120
        )
        #expect(run.status == .exited(0), "\(readTextFile(killed.child("repair.err")))")
        #expect(access(path + "/proj.repaired", F_OK) != 0)
        let (tables, hash, status) = try CompactTests.contents(path)
        #expect(tables == expected && hash == expectedHash, "the same tables and head as the uninterrupted repair")
        #expect(status.headSeq == seq - 1 && status.checkpointSeq == seq - 1)
        #expect(try CompactTests.reader(path).audit().ok)
    }
}
