import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogThreads
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// `teamlog compact` / `Store.compact(path:)`: the store's files shrunk to their live pages by swapping the
/// store's directory with a compacted copy, under the writer lock. The store keeps every record (same log,
/// same tables), a writer goes on from it, a running writer refuses it, a writer waiting for the lock gets
/// the compacted store, and a compaction killed at any point leaves a whole store at the path.
@Suite struct CompactTests {
    /// A store at `directory/store` fed `count` workload lines, checkpointed every `every` ops (so its
    /// checkpoints rewrite pages, which LMDB keeps on its free list), closed.
    static func store(_ directory: TemporaryDirectory, count: Int = 1_500, every: Int = 40) throws -> String {
        let path = directory.child("store")
        let store = try Store(path: path, options: .checkpointing(every: every))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in TeamWorkloadProbe.lines(count: count, seed: 53).enumerated() {
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
            if (n + 1) % 50 == 0 { try processor.commit() }
        }
        try processor.commit()
        store.close()
        return path
    }

    /// Runs `teamlog ARGUMENTS` `times` times and SIGKILLs it each time: at even points within `within`
    /// µs of its start, at odd ones within `thenWithin` µs of `copyAppears` appearing (so the kill lands
    /// in the copy, the swap or the removal of a command that writes a copy and swaps it in); `after`
    /// checks the store after each kill.
    static func killRepeatedly(
        _ arguments: [String], times: Int, seed: UInt64, within: Int, copyAppears: String, thenWithin: Int,
        after: (Int) throws -> Void
    ) throws {
        var random = SeededRandom(seed)
        for point in 0..<times {
            let child = try ChildProcess(TestSupport.teamlogExecutable, arguments)
            if point % 2 == 0 {
                usleep(UInt32(random.below(within)))
            } else {
                let deadline = MonotonicClock.seconds() + 20
                while access(copyAppears, F_OK) != 0 && MonotonicClock.seconds() < deadline { usleep(50) }
                usleep(UInt32(random.below(thenWithin)))
            }
            child.kill(SIGKILL)
            _ = child.wait()
            try after(point)
        }
    }

    static func reader(_ path: String) throws -> Store { try Store.reader(at: path) }

    /// The store's tables, head hash and status, read by a reader.
    static func contents(_ path: String) throws -> (CrashSafetyTests.Tables, [UInt8], StoreStatus) {
        let store = try reader(path)
        defer { store.close() }
        return (try CrashSafetyTests.storedTables(store), store.lastHash, try store.status())
    }

    @Test func aCompactedStoreHoldsTheSameRecordsInFewerBytesAndGoesOn() throws {
        let directory = TemporaryDirectory("compact")
        let path = try Self.store(directory)
        let (tables, hash, before) = try Self.contents(path)
        try #require(before.projectionFreeBytes > 0, "the checkpoints left free pages to give back")

        let report = try Store.compact(path: path)
        #expect(report.path == path)
        #expect(report.bytesBefore == before.logUsedBytes + before.projectionUsedBytes)
        #expect(report.bytesAfter < report.bytesBefore)
        #expect(report.headSeq == before.headSeq && report.checkpointSeq == before.checkpointSeq)
        #expect(access(Store.compactionDirectory(for: path), F_OK) != 0, "the old store is removed")

        let (compactedTables, compactedHash, after) = try Self.contents(path)
        #expect(compactedTables == tables, "every record kept")
        #expect(compactedHash == hash, "the same log, to its head's chained hash")
        #expect(after.projectionFreeBytes == 0 && after.logFreeBytes == 0)
        #expect(after.logUsedBytes + after.projectionUsedBytes == report.bytesAfter)
        #expect(after.writerPid == nil, "the locks are released")

        // A writer opens the compacted store, audits it clean and takes more ops after its head.
        let writer = try Store(path: path)
        defer { writer.close() }
        #expect(writer.replayedAtOpen == 0)
        #expect(try writer.audit().ok)
        let processor = Processor(store: writer, clock: { 2_000_000 }) { _ in }
        try processor.process(.text(number: 1, bytes: Array(#"{"op":"client.login","actor":"late","device":"d","ts":1}"#.utf8)))
        try processor.commit()
        #expect(try writer.head().seq == before.headSeq + 1)
    }

    /// A store owned by a service user, maintained by root: `compact` (a new directory swapped in),
    /// `repair` (a new `proj/`), a reader that had to create its lock file and a writer all left root's
    /// files behind, and the service user could no longer open its own store. Now what root creates in a
    /// store is the store owner's.
    @Test(.enabled(if: geteuid() == 0, "needs root"))
    func rootMaintenanceLeavesTheStoreItsOwners() throws {
        let directory = TemporaryDirectory("compact-owner")
        let path = try Self.store(directory, count: 600)
        let (uid, gid): (uid_t, gid_t) = (65_534, 65_534)
        func chownTree(_ p: String) {
            _ = lchown(p, uid, gid)
            for name in (directoryEntries(p) ?? []) { chownTree(p + "/" + name) }
        }
        chownTree(path)
        func notTheOwners(_ p: String) -> [String] {
            var st = stat()
            guard lstat(p, &st) == 0 else { return [] }
            var found = st.st_uid == uid && st.st_gid == gid ? [] : [p]
            if (st.st_mode & S_IFMT) == S_IFDIR { for name in directoryEntries(p) ?? [] { found += notTheOwners(p + "/" + name) } }
            return found
        }
        for arguments in [["compact"], ["repair"], ["status"], ["ingest", "-"]] {
            if arguments == ["status"] { unlink(path + "/lock.mdb"); unlink(path + "/proj/lock.mdb") }
            let run = try ChildProcess.run(TestSupport.teamlogExecutable, arguments + ["--store", path], timeout: 60)
            #expect(run.status == .exited(0), "\(arguments)")
            #expect(notTheOwners(path).isEmpty, "\(arguments): \(notTheOwners(path))")
        }
    }

    /// The records a repair cut (`cut-*.jsonl` in the store's directory) are the only copy of those ops:
    /// a compaction, which replaces the directory, keeps them.
    @Test func aCompactionKeepsTheRecordsARepairCut() throws {
        let directory = TemporaryDirectory("compact-cut")
        let path = try Self.store(directory, count: 300)
        let text = #"{"op":"team.leave","actor":"a","team":"t1","opId":"x"}"# + "\n"
        try CrashSafetyTests.writeFile(path + "/cut-7-1000.jsonl", Array(text.utf8))
        _ = try Store.compact(path: path)
        #expect(CrashSafetyTests.readText(path + "/cut-7-1000.jsonl") == text)
        #expect(access(Store.compactionDirectory(for: path), F_OK) != 0)
    }

    @Test func aRunningWriterRefusesItAndTheStoreIsUntouched() throws {
        let directory = TemporaryDirectory("compact-busy")
        let path = try Self.store(directory, count: 300)
        let writer = try Store(path: path)
        defer { writer.close() }
        let size = Store.fileSize(path + "/proj/data.mdb")
        #expect {
            try Store.compact(path: path)
        } throws: { error in
            (error as? StoreError)?.code == .writerBusy
        }
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["compact", "--store", path], stderr: directory.child("compact.err"),
            timeout: 60)
        #expect(run.status == .exited(1))
        let message = readTextFile(directory.child("compact.err"))
        #expect(message.contains("is being written by another process (pid \(getpid()))"), "\(message)")
        #expect(message.contains("stop the writer first"), "\(message)")
        #expect(Store.fileSize(path + "/proj/data.mdb") == size)
        #expect(access(Store.compactionDirectory(for: path), F_OK) != 0, "no copy made")
    }

    /// A store reached through a symbolic link is compacted where it lies: the link still points at it, and
    /// the copy was made beside the real directory. Something other than a directory where the copy goes is
    /// refused, untouched.
    @Test func aLinkedStoreIsCompactedWhereItLies() throws {
        let directory = TemporaryDirectory("compact-link")
        let path = try Self.store(directory, count: 300)
        let link = directory.child("link")
        #expect(symlink(path, link) == 0)
        let (tables, _, _) = try Self.contents(path)
        let report = try Store.compact(path: link)
        #expect(report.path == link)
        var info = stat()
        #expect(lstat(link, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK, "the link is still a link")
        #expect(try Self.contents(link).0 == tables)
        #expect(try Self.contents(path).2.projectionFreeBytes == 0, "the real directory was compacted")
        #expect(access(Store.compactionDirectory(for: link), F_OK) != 0)

        // A link where the copy would go: refused, and neither it nor its target touched.
        let target = directory.child("keep")
        #expect(mkdir(target, 0o755) == 0)
        try CrashSafetyTests.writeFile(target + "/precious", [1, 2, 3])
        #expect(symlink(target, Store.compactionDirectory(for: path)) == 0)
        #expect(throws: StoreError.self) { try Store.compact(path: path) }
        #expect(access(target + "/precious", F_OK) == 0)
        #expect(lstat(Store.compactionDirectory(for: path), &info) == 0)
    }

    /// What a killed compaction left beside the store (its copy, or the old store after the swap) is
    /// removed by the next one.
    @Test func whatAKilledCompactionLeftIsRemovedByTheNext() throws {
        let directory = TemporaryDirectory("compact-leftover")
        let path = try Self.store(directory, count: 300)
        let leftover = Store.compactionDirectory(for: path)
        #expect(mkdir(leftover, 0o755) == 0 && mkdir(leftover + "/proj", 0o755) == 0)
        try CrashSafetyTests.writeFile(leftover + "/data.mdb", [UInt8](repeating: 7, count: 10_000))
        let (tables, _, _) = try Self.contents(path)
        _ = try Store.compact(path: path)
        #expect(access(leftover, F_OK) != 0)
        #expect(try Self.contents(path).0 == tables)
    }

    /// A writer that waits for the lock (`--wait`) while the store's directory is swapped gets the lock on
    /// the new directory's file, not on the old one's (which would let a second writer in beside it).
    @Test func aWriterWaitingForTheLockGetsTheSwappedInDirectory() throws {
        let directory = TemporaryDirectory("compact-lock")
        let path = directory.child("store")
        let other = directory.child("other")
        #expect(mkdir(path, 0o755) == 0 && mkdir(other, 0o755) == 0)
        let held = try WriterLock(directory: path, wait: false)
        let acquired = Monitor()
        var waiterHolds = false
        var waiter: WriterLock?
        let thread = try #require(
            startThread(name: "lock-waiter") {
                let lock = try? WriterLock(directory: path, wait: true)
                acquired.locked {
                    waiter = lock
                    waiterHolds = lock != nil
                    acquired.broadcast()
                }
            })
        usleep(100_000)  // the waiter blocks on `path/writer.lock`
        let swappedIn = try WriterLock(directory: other, wait: false)
        try Environment.exchangeDirectories(other, path, parent: directory.path)
        held.release()  // the waiter wakes on the old directory's file (now at `other`)
        let tooEarly = acquired.locked { acquired.wait(until: { waiterHolds }, timeoutMs: 300) }
        #expect(!tooEarly, "the lock of a replaced file is not the store's lock")
        swappedIn.release()
        let got = acquired.locked { acquired.wait(until: { waiterHolds }, timeoutMs: 10_000) }
        thread.join()
        #expect(got)
        #expect(WriterLock.holder(directory: path) == getpid(), "it holds the file now at the store's path")
        #expect(throws: StoreError.self, "and that lock keeps a second writer out") {
            try WriterLock(directory: path, wait: false)
        }
        waiter?.release()
    }

    /// `teamlog compact` killed at random moments: the path always holds a whole store with every record,
    /// and a compaction after the kills succeeds.
    @Test func aKilledCompactionLeavesAWholeStore() throws {
        let directory = TemporaryDirectory("compact-killed")
        let path = try Self.store(directory, count: 6_000, every: 200)
        let (tables, hash, _) = try Self.contents(path)
        try Self.killRepeatedly(
            ["compact", "--store", path], times: 8, seed: 59, within: 80_000,
            copyAppears: Store.compactionDirectory(for: path), thenWithin: 20_000
        ) { point in
            let (afterTables, afterHash, _) = try Self.contents(path)
            #expect(afterTables == tables && afterHash == hash, "kill \(point): the store is whole")
        }
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["compact", "--store", path], stderr: directory.child("compact.err"),
            timeout: 60)
        #expect(run.status == .exited(0), "\(readTextFile(directory.child("compact.err")))")
        #expect(run.lines.first?.hasPrefix("compact \(path): ") == true, "\(run.lines)")
        let reader = try Self.reader(path)
        defer { reader.close() }
        #expect(try reader.audit().ok)
        #expect(try CrashSafetyTests.storedTables(reader) == tables)
        #expect(access(Store.compactionDirectory(for: path), F_OK) != 0)
    }
}
