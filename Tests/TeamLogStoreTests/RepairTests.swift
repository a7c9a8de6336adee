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
    /// Flips a byte of log record `seq`'s event (its chained hash kept): the chain breaks there.
    static func breakRecord(_ path: String, seq: UInt64) throws {
        try TamperTests.withLog(path) { env, log in
            try env.write { txn in
                let key = BigEndianUInt64.encoded(seq)
                var value = try #require(try txn.get(log, key: key))
                value[0] ^= 0x01
                try txn.put(log, key: key, value: value)
            }
        }
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
        #expect(report.problem == nil && report.removedEvents == 0)
        #expect(store.refusal?.code == .closed, "the store that repaired refuses further use")
        store.close()

        #expect(access(leftover, F_OK) != 0, "nothing beside proj/")
        let (after, afterHash, status) = try CompactTests.contents(path)
        #expect(after == tables && afterHash == hash, "a sound store's projections rebuilt as they were")
        #expect(status.checkpointSeq == status.headSeq)
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
        try Self.breakRecord(cleanPath, seq: seq)
        try Self.breakRecord(path, seq: seq)
        let cleanRun = try ChildProcess.run(TestSupport.teamlogExecutable, ["repair", "--store", cleanPath], timeout: 120)
        #expect(cleanRun.status == .exited(0))
        let (expected, expectedHash, _) = try CompactTests.contents(cleanPath)

        var random = SeededRandom(61)
        for point in 0..<6 {
            let child = try ChildProcess(TestSupport.teamlogExecutable, ["repair", "--store", path])
            if point % 2 == 0 {
                usleep(UInt32(random.below(150_000)))
            } else {
                // The copy's directory appears: the kill lands in the copy, the swap or the removal.
                let deadline = MonotonicClock.seconds() + 20
                while access(path + "/proj.repaired", F_OK) != 0 && MonotonicClock.seconds() < deadline { usleep(50) }
                usleep(UInt32(random.below(5_000)))
            }
            child.kill(SIGKILL)
            _ = child.wait()
        }
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["repair", "--store", path], stderr: killed.child("repair.err"), timeout: 120)
        #expect(run.status == .exited(0), "\(readTextFile(killed.child("repair.err")))")
        #expect(access(path + "/proj.repaired", F_OK) != 0)
        let (tables, hash, status) = try CompactTests.contents(path)
        #expect(tables == expected && hash == expectedHash, "the same tables and head as the uninterrupted repair")
        #expect(status.headSeq == seq - 1 && status.checkpointSeq == seq - 1)
        #expect(try CompactTests.reader(path).audit().ok)
    }
}
