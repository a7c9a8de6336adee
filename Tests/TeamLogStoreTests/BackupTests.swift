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

/// `teamlog backup` / `Store.backup(to:)`: a hot copy of a store, projections first and then the log,
/// each from one snapshot. The copy is the store as a crash at that moment would have left it: its log is
/// a prefix of the source's (the same chained hash at its head), its projections are at a checkpoint at or
/// before that head, it audits clean, a writer opening it replays exactly the lag, and fed the whole input
/// again it ends where the source ended, table for table.
@Suite struct BackupTests {
    static let lines = TeamWorkloadProbe.lines(count: 1_200, seed: 31)

    /// Feeds `lines[range]` to `processor`, committing every `batch` lines.
    static func feed(_ processor: Processor, _ range: Range<Int>, batch: Int = 50) throws {
        for n in range {
            try processor.process(.text(number: n + 1, bytes: Array(Self.lines[n].utf8)))
            if (n + 1) % batch == 0 { try processor.commit() }
        }
        try processor.commit()
    }

    /// Opens the copy at `path` as a writer, checks the replay at open and the audit, feeds every line
    /// again (those it holds come back as duplicates, by opId) and compares its tables with `source`'s.
    static func resumeAndCompare(_ path: String, report: BackupReport, source: String) throws {
        let copy = try Store(path: path)
        #expect(copy.replayedAtOpen == Int(report.lag), "a writer replays the log after the copied checkpoint")
        #expect(try copy.head().seq == report.headSeq)
        let audit = try copy.audit()
        #expect(audit.ok, "the copy audits clean: \(audit)")
        try feed(Processor(store: copy, clock: { 1_000_000 }) { _ in }, 0..<lines.count)
        try copy.checkpointNow()
        let copied = try CrashSafetyTests.storedTables(copy)
        let copiedHead = try copy.head().seq
        copy.close()
        let original = try Store(path: source)
        defer { original.close() }
        #expect(copiedHead == (try original.head().seq))
        #expect(copied == (try CrashSafetyTests.storedTables(original)), "resumed from the copy, the same tables")
    }

    /// A writer's store in `directory`, checkpointing every `ops` ops, fed the first `fed` lines.
    static func writer(in directory: TemporaryDirectory, checkpointEvery ops: Int, fed: Int) throws
        -> (path: String, store: Store, processor: Processor)
    {
        let path = directory.child("store")
        let store = try Store(path: path, options: .checkpointing(every: ops))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        try feed(processor, 0..<fed)
        return (path, store, processor)
    }

    /// The chained hash of the log of the store at `path` (opened as a reader) at `seq`, or at its head.
    static func logHash(_ path: String, at seq: UInt64? = nil) throws -> [UInt8]? {
        let reader = try Store(path: path, options: readOnly, loadState: false)
        defer { reader.close() }
        guard let seq else { return reader.lastHash }
        return try reader.env.read { txn in try reader.recordHash(seq, in: txn) }
    }

    @Test func aWritersOwnBackupIsItsStoreAtThatMomentAndResumes() throws {
        let directory = TemporaryDirectory("backup-own")
        let (path, store, processor) = try Self.writer(in: directory, checkpointEvery: 400, fed: 700)
        store.finishCheckpoint()  // the one in flight, if any: its position is then `store.checkpoint`
        try #require(store.checkpoint.seq > 0 && store.checkpoint.seq < store.committedSeq, "the copy is taken with a log tail after the checkpoint")

        let copyPath = directory.child("copy")
        var positions: [Int] = []
        let report = try store.backup(to: copyPath, progress: { positions.append($0) })
        #expect(report.headSeq == store.committedSeq)
        #expect(report.checkpointSeq == store.checkpoint.seq)
        #expect(report.lag > 0)
        #expect(report.path == copyPath)
        #expect(report.logBytes == Store.fileSize(copyPath + "/data.mdb") && report.logBytes > 0)
        #expect(report.projectionBytes == Store.fileSize(copyPath + "/proj/data.mdb") && report.projectionBytes > 0)
        #expect(positions.last == report.logBytes + report.projectionBytes, "the last progress call counts both files")
        // The copy's head carries the source's chained hash at that seq: the same log up to it.
        #expect(try store.env.read { txn in try store.recordHash(report.headSeq, in: txn) } == Self.logHash(copyPath))

        // The writer goes on after the backup; then the copy, resumed, catches up with it.
        try Self.feed(processor, 700..<Self.lines.count)
        store.close()
        try Self.resumeAndCompare(copyPath, report: report, source: path)
    }

    /// `status` counts the pages on each environment's free list: a store whose checkpoints rewrote its
    /// records has some; its compacted copy has none, and its projections' file is the source's used bytes
    /// less about those free ones.
    @Test func statusCountsFreePagesThatACompactedCopyLeavesOut() throws {
        let directory = TemporaryDirectory("backup-free-pages")
        let (_, store, _) = try Self.writer(in: directory, checkpointEvery: 40, fed: Self.lines.count)
        try store.checkpointNow()
        let source = try store.status()
        #expect(source.projectionFreeBytes > 0, "thirty checkpoints rewrote pages: \(source.projectionFreeBytes)")
        #expect(source.projectionFreeBytes < source.projectionUsedBytes)
        #expect(source.logFreeBytes >= 0 && source.logFreeBytes < source.logUsedBytes)
        let tableBytes = source.tables.filter { $0.name.hasPrefix("proj/") }.reduce(0) { $0 + $1.bytes }
        #expect(tableBytes + source.projectionFreeBytes <= source.projectionUsedBytes, "free pages are not the tables'")
        let json = source.json
        #expect(json["projectionFreeBytes"]?.intValue == Int64(source.projectionFreeBytes))
        #expect(json["logFreeBytes"]?.intValue == Int64(source.logFreeBytes))

        let copyPath = directory.child("copy")
        let report = try store.backup(to: copyPath)
        store.close()
        let copy = try Store(path: copyPath, options: Self.readOnly, loadState: false)
        defer { copy.close() }
        let copied = try copy.status()
        #expect(copied.projectionFreeBytes == 0 && copied.logFreeBytes == 0, "a compacted copy has no free list")
        #expect(report.projectionBytes < source.projectionUsedBytes)
        // The copy holds the tables' pages plus its meta pages and a few branch pages' worth of rounding.
        #expect(report.projectionBytes <= source.projectionUsedBytes - source.projectionFreeBytes + 16 * 4096)
    }

    @Test func anotherProcessBacksUpALiveWriterWithProgress() throws {
        let directory = TemporaryDirectory("backup-live")
        let (path, store, processor) = try Self.writer(in: directory, checkpointEvery: 300, fed: 400)

        // `teamlog backup` runs while this writer keeps committing batches of 20 lines.
        let copyPath = directory.child("copy")
        let child = try ChildProcess(
            TestSupport.teamlogExecutable, ["backup", "--store", path, "--to", copyPath, "--json"],
            environment: ["TEAMLOG_PROGRESS": "always", "TEAMLOG_PROGRESS_INTERVAL_MS": "0"],
            stderr: directory.child("backup.err"))
        var fed = 400
        var output: [String] = []
        while !child.reachedEnd {
            if fed < Self.lines.count {
                let next = min(fed + 20, Self.lines.count)
                try Self.feed(processor, fed..<next)
                fed = next
            }
            if let line = try child.readLine(timeout: fed < Self.lines.count ? 0.001 : 5) { output.append(line) }
        }
        #expect(child.wait() == .exited(0), "\(readTextFile(directory.child("backup.err")))")
        try Self.feed(processor, fed..<Self.lines.count)
        let sourceHead = store.committedSeq
        store.close()

        let json = try JSONParser.parse(try #require(output.last))
        let head = UInt64(try #require(json["headSeq"]?.intValue))
        let checkpoint = UInt64(try #require(json["checkpointSeq"]?.intValue))
        #expect(json["path"]?.stringValue == copyPath)
        #expect(checkpoint <= head && head <= sourceHead && head >= 400)
        #expect(json["lag"]?.intValue == Int64(head - checkpoint))
        #expect(readTextFile(directory.child("backup.err")).contains("backup "), "a progress frame on stderr")

        #expect(try Self.logHash(copyPath) == Self.logHash(path, at: head), "the copy's log is the source's up to its head")
        let report = BackupReport(path: copyPath, headSeq: head, checkpointSeq: checkpoint, logBytes: 0, projectionBytes: 0)
        try Self.resumeAndCompare(copyPath, report: report, source: path)
    }

    @Test func aDestinationThatHoldsAnythingIsRefusedUntouched() throws {
        let directory = TemporaryDirectory("backup-refused")
        let (path, store, _) = try Self.writer(in: directory, checkpointEvery: 100, fed: 150)
        defer { store.close() }

        let occupied = directory.child("occupied")
        #expect(mkdir(occupied, 0o755) == 0)
        try CrashSafetyTests.writeFile(occupied + "/keep.txt", Array("mine".utf8))
        #expect(throws: StoreError.self) { try store.backup(to: occupied) }
        #expect(readTextFile(occupied + "/keep.txt") == "mine")
        #expect(Store.fileSize(occupied + "/data.mdb") == 0 && access(occupied + "/proj", F_OK) != 0)

        // An empty directory is taken; a path under a missing one is refused and leaves nothing.
        let empty = directory.child("empty")
        #expect(mkdir(empty, 0o755) == 0)
        #expect(try store.backup(to: empty).headSeq == store.committedSeq)
        #expect(throws: StoreError.self) { try store.backup(to: directory.child("missing/copy")) }
        #expect(access(directory.child("missing"), F_OK) != 0)

        // The CLI says why and exits non-zero.
        let cli = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["backup", "--store", path, "--to", occupied],
            stderr: directory.child("cli.err"), timeout: 60)
        #expect(cli.status != .exited(0))
        #expect(readTextFile(directory.child("cli.err")).contains("exists and is not an empty directory"))
    }

    /// A destination inside the store — under `proj/`, beside it, the store itself, or reached through a
    /// symbolic link or `..` — is refused and nothing is made there: `repair` swaps `proj/` and `compact`
    /// the whole directory, and either removed such a copy without a word.
    @Test func aDestinationInsideTheStoreIsRefused() throws {
        let directory = TemporaryDirectory("backup-inside")
        let (path, store, _) = try Self.writer(in: directory, checkpointEvery: 100, fed: 150)
        defer { store.close() }
        #expect(symlink(path, directory.child("link")) == 0)
        for inside in [
            path + "/proj/copy", path + "/copy", path + "/copy/", path, directory.child("link/copy"),
            path + "/proj/../copy2",
        ] {
            #expect(throws: StoreError.self, "\(inside)") { try store.backup(to: inside) }
        }
        for made in ["proj/copy", "copy", "copy2"] { #expect(access(path + "/" + made, F_OK) != 0, "\(made)") }
        // Beside the store (a name that only starts like it) is outside.
        #expect(try store.backup(to: path + "-copy").headSeq == store.committedSeq)
        let cli = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["backup", "--store", path, "--to", path + "/proj/bk"],
            stderr: directory.child("cli.err"), timeout: 60)
        #expect(cli.status != .exited(0))
        #expect(readTextFile(directory.child("cli.err")).contains("is inside the store"))
    }

    /// A store whose projections are past its log's head — its log cut under them (a `repair` during a
    /// hot backup's two copies crashed the backup on an underflow and left such a copy), or two stores'
    /// files mixed — answered queries from events no log held, and `status` said lag 0. Now `status`
    /// names the problem, queries and backups refuse it, and `repair` rebuilds it from its log.
    @Test func aStoreWhoseProjectionsArePastItsLogIsRefusedUntilRepaired() throws {
        let directory = TemporaryDirectory("backup-past")
        let (path, store, processor) = try Self.writer(in: directory, checkpointEvery: 100, fed: 300)
        let early = directory.child("early")
        _ = try store.backup(to: early)
        try Self.feed(processor, 300..<600)
        store.close()
        // The early copy's log under the later projections.
        let mixed = directory.child("mixed")
        #expect(mkdir(mixed, 0o755) == 0 && mkdir(mixed + "/proj", 0o755) == 0)
        for (from, to) in [(early + "/data.mdb", mixed + "/data.mdb"), (path + "/proj/data.mdb", mixed + "/proj/data.mdb")] {
            #expect(try ChildProcess.run("/bin/cp", [from, to], timeout: 30).status == .exited(0))
        }
        let reader = try Store.reader(at: mixed)
        #expect(try reader.status().projectionsPastLog)
        #expect(try reader.projectionsPastLog() != nil)
        let refused = #expect(throws: StoreError.self) { try reader.backup(to: directory.child("copy")) }
        #expect(refused?.message.contains("they hold events the log does not") == true, "\(String(describing: refused))")
        #expect(access(directory.child("copy"), F_OK) != 0, "nothing made")
        reader.close()
        let status = try ChildProcess.run(TestSupport.teamlogExecutable, ["status", "--store", mixed], timeout: 60)
        #expect(status.lines.contains { $0.hasPrefix("PROBLEM") }, "\(status.lines)")
        let err = directory.child("query.err")
        let query = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["unread", "u1", "--store", mixed], stderr: err, timeout: 60)
        #expect(query.status == .exited(1) && query.lines.isEmpty)
        #expect(readTextFile(err).contains("run `teamlog repair`"), "\(readTextFile(err))")
        let repair = try ChildProcess.run(TestSupport.teamlogExecutable, ["repair", "--store", mixed], timeout: 60)
        #expect(repair.status == .exited(0), "\(repair.lines)")
        let repaired = try Store.reader(at: mixed)
        defer { repaired.close() }
        #expect(try !repaired.status().projectionsPastLog)
        #expect(try repaired.audit().ok)
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["unread", "u1", "--store", mixed], timeout: 60).status != .exited(2))
        // An audit's verified copies inside the store are refused as a backup is: repair and compact would
        // remove them without a word.
        let inside = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", mixed, "--verified", mixed + "/proj/V"],
            stderr: directory.child("verified.err"), timeout: 60)
        #expect(inside.status == .exited(64), "\(readTextFile(directory.child("verified.err")))")
        #expect(readTextFile(directory.child("verified.err")).contains("is inside the store"))
        #expect(access(mixed + "/proj/V", F_OK) != 0)
    }

    /// `teamlog backup` killed with SIGKILL at seeded moments, half of them as soon as the log's copy has
    /// begun: each file of the copy is written under another name and renamed when whole and synced, so
    /// the copy's `data.mdb` exists only complete — a directory the kill left either holds a whole store
    /// that audits clean or is refused as a store (never a truncated log, nor one a writer would append
    /// to). A new backup after them succeeds.
    @Test func aKilledBackupLeavesAWholeCopyOrNone() throws {
        let directory = TemporaryDirectory("backup-killed")
        let path = directory.child("store")
        let store = try Store(path: path, options: .checkpointing(every: 2_000))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in TeamWorkloadProbe.lines(count: 16_000, seed: 43).enumerated() {
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
            if (n + 1) % 500 == 0 { try processor.commit() }
        }
        try processor.commit()
        store.close()

        var random = SeededRandom(41)
        for point in 0..<10 {
            let copyPath = directory.child("copy\(point)")
            let child = try ChildProcess(TestSupport.teamlogExecutable, ["backup", "--store", path, "--to", copyPath])
            if point % 2 == 0 {
                usleep(UInt32(random.below(60_000)))
            } else {
                // The log's file, under whatever name it is being written, appears: the kill lands in its copy.
                let deadline = MonotonicClock.seconds() + 10
                while access(copyPath + "/data.mdb", F_OK) != 0
                    && access(Environment.copyInProgress(in: copyPath), F_OK) != 0 && MonotonicClock.seconds() < deadline
                {
                    usleep(50)
                }
                usleep(UInt32(random.below(300)))
            }
            child.kill(SIGKILL)
            _ = child.wait()
            if access(copyPath + "/data.mdb", F_OK) == 0 {
                let copy = try Store(path: copyPath, options: Self.readOnly, loadState: false)
                let audit = try copy.audit()
                #expect(audit.ok, "kill \(point): a copy with its log file is whole: \(audit)")
                copy.close()
            } else {
                #expect(throws: StoreError.self, "kill \(point): no log file, no store") {
                    try Store(path: copyPath, options: Self.readOnly, loadState: false)
                }
                // Nor does a writer make one of it (an empty log under copied projections), once the copy
                // has begun (the kill may have come before it made anything).
                let begun = access(copyPath + "/proj", F_OK) == 0
                if begun {
                    #expect(throws: StoreError.self, "kill \(point): a writer refuses it") { try Store(path: copyPath) }
                    #expect(access(copyPath + "/data.mdb", F_OK) != 0, "kill \(point): no log was made")
                }
            }
        }
        let source = try Store(path: path, options: Self.readOnly, loadState: false)
        defer { source.close() }
        let report = try source.backup(to: directory.child("after"))
        #expect(report.headSeq == (try source.head().seq) && report.lag == 0)
    }

    /// What a backup stopped between its two copies leaves — the projections whole, the log's copy under its
    /// temporary name — is named as that by readers and writers alike, and no command writes a log into it.
    /// Before, the error said `teamlog ingest --store COPY` would create a store there; that made an empty
    /// log under the copied projections, and the copy's data was then only good for `repair` to discard.
    @Test func aCopyStoppedBeforeItsLogIsRefusedAsAnUnfinishedCopy() throws {
        let directory = TemporaryDirectory("backup-unfinished")
        let path = directory.child("store")
        let store = try Store(path: path, options: .checkpointing(every: 100))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        try Self.feed(processor, 0..<300)
        store.close()
        let copyPath = directory.child("copy")
        let source = try Store(path: path, options: Self.readOnly, loadState: false)
        _ = try source.backup(to: copyPath)
        source.close()
        // The log's copy in the making: `data.mdb` not yet renamed into place.
        #expect(rename(copyPath + "/data.mdb", Environment.copyInProgress(in: copyPath)) == 0)
        unlink(copyPath + "/lock.mdb")

        for arguments in [
            ["status", "--store", copyPath], ["ingest", "/dev/null", "--store", copyPath],
            ["repair", "--store", copyPath], ["team", "--store", copyPath, "t0"],
        ] {
            let child = try ChildProcess(TestSupport.teamlogExecutable, arguments, stderr: directory.child("err"))
            _ = try child.readToEnd(timeout: 60)
            let status = child.wait()
            let stderr = readTextFile(directory.child("err"))
            #expect(status != .exited(0), "\(arguments[0]): \(stderr)")
            #expect(
                stderr.contains("\(copyPath) is not a whole store: it holds projections (proj/) but no log (data.mdb)")
                    && stderr.contains("a copy never finished: \(Environment.copyInProgress(in: copyPath))") && !stderr.contains("creates one"),
                "\(arguments[0]): \(stderr)")
            #expect(access(copyPath + "/data.mdb", F_OK) != 0, "\(arguments[0]) wrote no log into the copy")
        }
        // The files it holds are as the backup left them: moved back, the copy is whole.
        #expect(rename(Environment.copyInProgress(in: copyPath), copyPath + "/data.mdb") == 0)
        let copy = try Store(path: copyPath, options: Self.readOnly, loadState: false)
        defer { copy.close() }
        #expect(try copy.audit().ok)
    }

    /// A reader opened before a writer in another process grew both maps (`MDB_MAP_RESIZED` when the
    /// copy begins its snapshot): the copy adopts the new size and starts again, and copies the grown store.
    @Test func aBackupAdoptsMapsAnotherProcessGrew() throws {
        let directory = TemporaryDirectory("backup-resized")
        let path = directory.child("store")
        let lines = TeamWorkloadProbe.lines(count: 12_000, seed: 47)
        let store = try Store(path: path)
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in lines.prefix(200).enumerated() {
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
        }
        try processor.commit()
        store.close()

        let reader = try Store(path: path, options: Self.readOnly, loadState: false)
        defer { reader.close() }
        let (logMap, projectionMap) = (reader.env.mapSize, reader.projectionEnv.mapSize)
        let file = directory.child("more.jsonl")
        try CrashSafetyTests.writeFile(file, Array(lines.dropFirst(200).joined(separator: "\n").utf8) + [0x0A])
        let more = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", path, "--emit", "none"],
            stderr: directory.child("ingest.err"), timeout: 120)
        try #require(more.status == .exited(0), "\(readTextFile(directory.child("ingest.err")))")
        let grownMaps = try [path, path + "/proj"].map { try #require(try DataFileHeader.read(directory: $0)).current.mapSize }
        try #require(
            grownMaps[0] > UInt64(logMap) && grownMaps[1] > UInt64(projectionMap),
            "the writer grew both maps past the reader's: \(grownMaps) against \(logMap), \(projectionMap)")

        let report = try reader.backup(to: directory.child("copy"))
        let grown = try Store(path: path, options: Self.readOnly, loadState: false)
        defer { grown.close() }
        let status = try grown.status()
        #expect(report.headSeq == status.headSeq && report.checkpointSeq == status.checkpointSeq)
        #expect(report.lag == 0)
    }

    /// Large files (a scratch store's, a copy's) are removed by shrinking them a step at a time first, so
    /// a file system that discards freed blocks sends a step's worth at a time; small ones are unlinked;
    /// a directory is left to `removeDirectoryTree`'s recursion.
    @Test func largeFilesAreShrunkThenRemoved() throws {
        let directory = TemporaryDirectory("remove-gently")
        let big = directory.child("big")
        let chunk = [UInt8](repeating: 7, count: 1 << 20)
        let fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        for _ in 0..<40 { _ = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        close(fd)
        try CrashSafetyTests.writeFile(directory.child("small"), Array("x".utf8))
        #expect(mkdir(directory.child("sub"), 0o755) == 0)

        #expect(removeFileGently(big, stepBytes: 4 << 20))
        #expect(access(big, F_OK) != 0)
        #expect(removeFileGently(directory.child("small"), stepBytes: 4 << 20))
        #expect(access(directory.child("small"), F_OK) != 0)
        #expect(!removeFileGently(directory.child("sub")))
        #expect(access(directory.child("sub"), F_OK) == 0)
    }

    static var readOnly: Store.Options {
        var options = Store.Options()
        options.readOnly = true
        return options
    }
}
