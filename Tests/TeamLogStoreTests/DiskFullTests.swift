import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads
import TeamLogWorkload
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A disk that fills up in the middle of an ingest (a small tmpfs): the failed batch prints nothing, the
/// run exits 2 naming "no space left on device" and the store, the store audits clean, and once there is
/// room the same input resumes it to exactly what one clean run stores.
///
/// Needs permission to mount a tmpfs (root); elsewhere the tests are skipped with that reason.
@Suite(.serialized) struct DiskFullTests {
    /// Whether this process may mount a tmpfs (tried once).
    static let canMount: Bool = canMountTmpfs

    /// The issue's workload, smaller: message-heavy, so a 2 MiB tmpfs fills after a few thousand ops (12,000 are
    /// fed: the log must meet the full disk whatever the projections' share of it).
    static func workload(_ count: Int) -> [UInt8] {
        var w = MixedWorkload(options: .init(seed: 21, users: 5000, teams: 150, maxTeam: 300))
        var bytes: [UInt8] = []
        for _ in 0..<count { bytes += Array(w.next().utf8) + [0x0A] }
        return bytes
    }

    /// A tmpfs of `size`, a work directory (`name`) holding `count` lines of the workload in `w.jsonl`, and
    /// a store's path on the tmpfs. Keep the returned `fs`: it unmounts when it dies.
    static func fixture(size: String, lines count: Int, _ name: String) throws
        -> (fs: Tmpfs, work: TemporaryDirectory, input: String, store: String)
    {
        let fs = try #require(Tmpfs(size: size))
        let work = TemporaryDirectory(name)
        let input = work.child("w.jsonl")
        try CrashSafetyTests.writeFile(input, Self.workload(count))
        return (fs, work, input, fs.path + "/st")
    }

    enum Mode: String, CaseIterable, Sendable {
        case batch, follow
        /// Checkpoints as often as commits, so the projections' writes meet the full disk too.
        var arguments: [String] {
            (self == .batch ? ["--batch-size", "500"] : ["--follow", "--batch-size", "500"]) + [
                "--checkpoint-ops", "500",
            ]
        }
    }

    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"), arguments: Mode.allCases)
    func aFullDiskPrintsNothingOfTheFailedBatchAndResumes(mode: Mode) throws {
        let (fs, work, input, store) = try Self.fixture(size: "2m", lines: 12_000, "diskfull-input")
        defer { withExtendedLifetime((fs, work)) {} }  // mounted and kept to the end

        // 1. The disk fills: exit 2, the cause named with the store's path, and only committed records printed.
        let err = work.child("full.err")
        let full = try ChildProcess.run(
            TestSupport.teamlogExecutable,
            ["ingest", mode == .follow ? "-" : input, "--store", store, "--emit", "events"] + mode.arguments,
            stdin: mode == .follow ? input : nil, stderr: err, timeout: 120)
        let message = CrashSafetyTests.readText(err)
        #expect(full.status == .exited(2), "\(message)")
        #expect(message.contains("no space left on device"), "\(message)")
        #expect(message.contains(store), "\(message)")
        let printed = full.lines.filter(CrashSafetyTests.isEvent)
        let committed = try Self.checkpoint(store)
        // Where it fills depends on how many checkpoints ran (a background one may coalesce several), so only
        // that it filled after the first batch and before the end.
        #expect(committed > 0 && committed < 12_000, "the disk filled in the middle (committed \(committed))")
        #expect(UInt64(printed.count) == committed, "printed \(printed.count) events, the store holds \(committed)")

        // 2. What is on disk is sound.
        let audit = try ChildProcess.run(TestSupport.teamlogExecutable, ["audit", "--store", store], timeout: 60)
        #expect(audit.status == .exited(0), "\(audit.lines)")

        // 3. With room again the same input resumes: the stored ops answer duplicate, the rest are applied.
        try fs.resize("64m")
        let resumed = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", store, "--emit", "events"],
            stderr: work.child("resume.err"), timeout: 120)
        #expect(resumed.status == .exited(0), "\(CrashSafetyTests.readText(work.child("resume.err")))")
        let clean = work.child("clean")
        let reference = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", clean, "--emit", "none"], timeout: 120)
        #expect(reference.status == .exited(0))
        #expect(try Self.checkpoint(store) == Self.checkpoint(clean))
        let final = try Store(path: store)
        defer { final.close() }
        #expect(try final.audit().ok)
        let expected = try Store(path: clean)
        defer { expected.close() }
        #expect(try CrashSafetyTests.storedTables(final) == CrashSafetyTests.storedTables(expected))
    }

    /// A store made, or a copy without its lock file read, on a disk with no room: LMDB sized its new
    /// lock file sparse and wrote its reader table through a map, so the process died of SIGBUS (exit
    /// 135) — now the file gets its blocks first and the run fails with `noSpace`, naming the store, and
    /// once there is room the same command works.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func aStoreOpenedOnAFullDiskIsAnErrorNotACrash() throws {
        let fs = try #require(Tmpfs(size: "16m"))
        let work = TemporaryDirectory("diskfull-open")
        let input = work.child("one.jsonl")
        try CrashSafetyTests.writeFile(input, Array(#"{"op":"clock.tick","actor":"a","ts":1}"#.utf8) + [0x0A])
        // A copy of a store on the tmpfs (a backup), its lock files removed, as a copy from elsewhere has none.
        let source = work.child("source")
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["ingest", input, "--store", source], timeout: 60).status == .exited(0))
        let copy = fs.path + "/copy"
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["backup", "--store", source, "--to", copy], timeout: 60).status == .exited(0))
        unlink(copy + "/lock.mdb")
        unlink(copy + "/proj/lock.mdb")
        // Full: the tmpfs shrunk to what it holds.
        var vfs = statvfs()
        #expect(statvfs(fs.path, &vfs) == 0)
        let usedKiB = (Int(vfs.f_blocks) - Int(vfs.f_bfree)) * Int(vfs.f_frsize) / 1024
        try fs.resize("\(usedKiB)k")
        let store = fs.path + "/new"
        for (name, arguments) in [("ingest", ["ingest", input, "--store", store]), ("status", ["status", "--store", copy])] {
            let err = work.child("\(name).err")
            let run = try ChildProcess.run(TestSupport.teamlogExecutable, arguments, stderr: err, timeout: 60)
            let message = CrashSafetyTests.readText(err)
            #expect(run.status == .exited(1), "\(name): \(run.status) \(message)")
            #expect(message.contains("no space left on device for store"), "\(name): \(message)")
        }
        try fs.resize("16m")
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["ingest", input, "--store", store], timeout: 60).status == .exited(0))
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["status", "--store", copy], timeout: 60).status == .exited(0))
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["audit", "--store", store], timeout: 60).status == .exited(0))
    }

    /// An audit or a `--at` query whose scratch store (in `$TMPDIR`) runs out of room could not run: exit 2
    /// and a message naming the scratch store and TMPDIR — an audit's exit 1 means the store differs from
    /// its log, which this run could not tell — and the scratch store is removed.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func aReplayWhoseScratchStoreFillsItsDiskCouldNotRun() throws {
        let fs = try #require(Tmpfs(size: "256k"))
        let work = TemporaryDirectory("diskfull-scratch")
        let input = work.child("w.jsonl")
        try CrashSafetyTests.writeFile(input, Self.workload(4_000))
        let store = work.child("st")
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, ["ingest", input, "--store", store, "--emit", "none"], timeout: 120).status == .exited(0))
        let tmp = ["TMPDIR": fs.path]
        for (name, arguments, what) in [
            ("audit", ["audit", "--store", store], "the audit could not run"),
            ("at", ["unread", "u1", "--store", store, "--at", "3900"], "the replay to seq 3900 could not run"),
        ] {
            let err = work.child("\(name).err")
            let run = try ChildProcess.run(TestSupport.teamlogExecutable, arguments, environment: tmp, stderr: err, timeout: 120)
            let message = CrashSafetyTests.readText(err)
            #expect(run.status == .exited(2), "\(name): \(run.status) \(message)")
            #expect(message.contains(what) && message.contains("TMPDIR"), "\(name): \(message)")
            #expect(message.contains("no space left on device for") && message.contains("teamlog-scratch-"), "\(name): \(message)")
            #expect(try #require(Tmpfs.entries(fs.path)).isEmpty, "\(name): the scratch store is removed")
        }
        let audit = try ChildProcess.run(TestSupport.teamlogExecutable, ["audit", "--store", store], timeout: 120)
        #expect(audit.status == .exited(0), "with room the same audit is clean")
    }

    /// `repair` saves the records it cuts before it removes them: on a full disk it cannot, and removes
    /// nothing (the log is as it was, the break still found); with room it saves them and cuts.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func aRepairThatCannotSaveWhatItCutsRemovesNothing() throws {
        let (fs, work, input, store) = try Self.fixture(size: "32m", lines: 2_000, "diskfull-repair")
        let exe = TestSupport.teamlogExecutable
        #expect(try ChildProcess.run(exe, ["ingest", input, "--store", store, "--emit", "none"], timeout: 120).status == .exited(0))
        let head = try { () throws -> UInt64 in
            let reader = try Store.reader(at: store)
            defer { reader.close() }
            return try reader.head().seq
        }()
        let k = head / 2
        try TamperTests.breakRecord(store, seq: k)
        // The rest of the file system filled.
        let filler = open(fs.path + "/filler", O_WRONLY | O_CREAT, 0o644)
        let block = [UInt8](repeating: 7, count: 1 << 16)
        while block.withUnsafeBytes({ write(filler, $0.baseAddress!, $0.count) }) > 0 {}
        close(filler)
        let tmp = ["TMPDIR": work.path]  // the scratch replay has room
        let err = work.child("repair.err")
        let full = try ChildProcess.run(exe, ["repair", "--store", store], environment: tmp, stderr: err, timeout: 120)
        let message = CrashSafetyTests.readText(err)
        #expect(full.status != .exited(0), "\(full.lines)")
        #expect(message.contains("repair removed nothing"), "\(message)")
        #expect(!(Tmpfs.entries(store) ?? []).contains { $0.hasPrefix("cut-") }, "no partial file is left")
        do {
            let reader = try Store.reader(at: store)
            defer { reader.close() }
            #expect(try reader.head().seq == head)
            #expect(try reader.verifyChain()?.seq == k)
        }
        unlink(fs.path + "/filler")
        let repairedErr = work.child("repaired.err")
        let repaired = try ChildProcess.run(
            exe, ["repair", "--store", store], environment: tmp, stderr: repairedErr, timeout: 120)
        #expect(repaired.status == .exited(0), "\(CrashSafetyTests.readText(repairedErr))")
        let cut = try #require((Tmpfs.entries(store) ?? []).first { $0.hasPrefix("cut-\(k)-") && $0.hasSuffix(".jsonl") })
        let lines = CrashSafetyTests.readText(store + "/" + cut).split(separator: "\n")
        #expect(lines.count == Int(head - k + 1))
        #expect(lines.first?.hasPrefix(#"{"cut":"undecodable log record","seq":\#(k),"bytes":""#) == true, "\(lines.first ?? "")")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix(#"{"op":"#) })
    }

    /// `compact` without room for its copy: it fails, removes what it wrote, and leaves the store as it was;
    /// with room again it succeeds.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func aCompactionWithoutRoomLeavesTheStoreAsItWas() throws {
        let (fs, work, input, path) = try Self.fixture(size: "256m", lines: 4_000, "diskfull-compact")
        defer { withExtendedLifetime((fs, work)) {} }  // mounted and kept to the end
        let ingest = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", path, "--emit", "none", "--checkpoint-ops", "200"],
            timeout: 120)
        #expect(ingest.status == .exited(0))
        let reader = try Store(path: path, options: BackupTests.readOnly, loadState: false)
        let tables = try CrashSafetyTests.storedTables(reader)
        let status = try reader.status()
        reader.close()
        let live = status.liveBytes

        // The disk shrunk to what it holds and half the copy's size. (Not filled with a file: a child that
        // another test spawned while the file was open for writing would hold its blocks after the unlink —
        // the likely cause of two fresh-clone CI runs finding 0.6 MB free of 256 MB after the unlink, which
        // no local run reproduced; the suite's files are opened `O_CLOEXEC` since — and a remount cannot
        // leak.)
        var vfs = statvfs()
        #expect(statvfs(fs.path, &vfs) == 0)
        let usedKiB = (Int(vfs.f_blocks) - Int(vfs.f_bfree)) * Int(vfs.f_frsize) / 1024
        try fs.resize("\(usedKiB + live / 2 / 1024)k")
        let error = #expect(throws: StoreError.self) { try Store.compact(path: path) }
        #expect("\(String(describing: error))".contains("No space left on device"), "\(String(describing: error))")
        #expect(access(Store.compactionDirectory(for: path), F_OK) != 0, "the partial copy is removed")
        let after = try Store(path: path, options: BackupTests.readOnly, loadState: false)
        #expect(try CrashSafetyTests.storedTables(after) == tables)
        #expect(try after.audit().ok)
        after.close()

        try fs.resize("256m")
        // Room again: the failed copy left nothing behind, so what is free is the tmpfs less the store.
        #expect(statvfs(fs.path, &vfs) == 0)
        let room = Int(vfs.f_bavail) * Int(vfs.f_frsize)
        #expect(room > live + (1 << 20), "room \(room) for a copy of \(live) bytes (the store used \(status.logUsedBytes + status.projectionUsedBytes))")
        let report = try Store.compact(path: path)
        #expect(report.bytesAfter <= report.bytesBefore)
        let compacted = try Store(path: path, options: BackupTests.readOnly, loadState: false)
        defer { compacted.close() }
        #expect(try CrashSafetyTests.storedTables(compacted) == tables)
    }

    /// The same through the API: `Processor.run` throws `.noSpace`, and its sink got only committed batches.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func processorThrowsNoSpaceAndSinksOnlyCommittedRecords() throws {
        let (fs, work, input, path) = try Self.fixture(size: "2m", lines: 12_000, "diskfull-api")
        defer { withExtendedLifetime((fs, work)) {} }  // mounted and kept to the end
        var sunk: [UInt8] = []
        var thrown: (any Error)?
        do {
            var storeOptions = Store.Options()
            storeOptions.checkpointOps = 500  // the projections' writes meet the full disk too
            let store = try Store(path: path, options: storeOptions)
            defer { store.close() }
            var options = Processor.Options()
            options.batchSize = 500
            options.emit = .events
            let processor = Processor(store: store, options: options) { sunk += $0 }
            let fd = open(input, O_RDONLY | O_CLOEXEC)
            defer { close(fd) }
            var reader = LineReader(fd: fd, follow: false)
            do { try processor.run(&reader) } catch { thrown = error }
            #expect(throws: StoreError.self) { try store.finishCommit() }  // and it stays failed
        }
        let error = try #require(thrown as? StoreError, "\(String(describing: thrown))")
        #expect(error.code == .noSpace, "\(error)")
        #expect(error.path == path)
        #expect(error.cause is LMDBError)
        let events = String(decoding: sunk, as: UTF8.self).split(separator: "\n").filter {
            CrashSafetyTests.isEvent(String($0))
        }
        #expect(UInt64(events.count) == (try Self.checkpoint(path)))
    }

    static func checkpoint(_ path: String) throws -> UInt64 {
        var options = Store.Options()
        options.readOnly = true
        return try Store(path: path, options: options, loadState: false).head().seq
    }

    /// The projections' disk fills while the log's has room: checkpoints fail (the log commits go on, the
    /// records stay pending), and once there is room the next checkpoint writes them all — the store
    /// audits clean and equals a clean run.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func aFailedCheckpointIsRetriedWithItsRecords() throws {
        let work = TemporaryDirectory("diskfull-checkpoint")
        let path = work.child("st")
        mkdir(path, 0o755)
        let fs = try #require(Tmpfs(size: "1m"))
        // The projections' environment on the small file system, the log on the large one.
        try #require(symlink(fs.path, path + "/proj") == 0)
        var options = Store.Options()
        options.noSync = true
        options.checkpointOps = 300
        let lines = String(decoding: Self.workload(4_000), as: UTF8.self).split(separator: "\n").map(String.init)
        let store = try Store(path: path, options: options)
        // Said once per run of failures, and once when one succeeds again.
        var said: [StoreError] = []
        var recovered: [UInt64] = []
        store.onCheckpointFailure = { said.append($0) }
        store.onCheckpointRecovered = { recovered.append($0) }
        var failures = 0
        for (i, line) in lines.enumerated() {
            guard case .success(let op) = OpParser.parse(line: line) else { continue }
            _ = try store.submit(op, now: 1_000)
            if i % 100 == 99 {
                try store.commit()  // the log always commits
                store.finishCheckpoint()
                if store.lastCheckpointError != nil { failures += 1 }
            }
        }
        try store.commit()
        #expect(failures > 0, "the projections' disk filled")
        #expect(store.checkpoint.seq < (try store.head().seq))
        try fs.resize("64m")
        try store.checkpointNow()
        #expect(store.lastCheckpointError == nil)
        #expect(store.checkpoint.seq == (try store.head().seq))
        #expect(said.count == 1 && store.checkpointFailures >= 1, "\(said.count) said, \(store.checkpointFailures) failed")
        #expect(said.first?.code == .noSpace && said.first?.message.contains("the log holds every committed op") == true)
        #expect(recovered == [store.checkpoint.seq] && store.checkpointProblem == nil)
        #expect(try store.audit().ok)
        let clean = try StoreHarness()
        try clean.feed(lines)
        #expect(try CrashSafetyTests.storedTables(store) == CrashSafetyTests.storedTables(clean.store))
        store.close()
    }

    /// The writer service (the server's, a partition's) on a disk that fills while four clients submit
    /// concurrently (pipelined group commits, requests over the batch size): every op of a request
    /// answered with its records is in the store; of a request answered `storeFailed`, at most the ops of
    /// the transactions it committed before the failure are (a prefix, never the whole request: nothing a
    /// later commit made durable behind a failure); and the store audits clean.
    @Test(.enabled(if: canMount, "mounting a tmpfs is not allowed here (needs root)"))
    func aServiceOnAFullDiskAnswersExactlyWhatIsDurable() throws {
        let fs = try #require(Tmpfs(size: "2m"))
        let path = fs.path + "/store"
        var options = WriterService.Options()
        options.store.noSync = true
        options.store.checkpointOps = 200
        // Each request (10 ops) is over the batch size: it commits part of itself while it is decided,
        // which finishes the group in flight on the way — that group must be answered by its own commit.
        options.batchSize = 4
        let writer = WriterService(path: path, options: options)
        while writer.state == .opening { usleepMs(2) }
        #expect(writer.state == .ready)
        func op(_ text: String) -> ParsedLine { ParsedLine.parse(.text(number: 1, bytes: Array(text.utf8))) }
        let create = ResultBox<[Record]>()
        writer.submit([op(#"{"op":"team.create","actor":"a","ts":1000,"team":"t","members":["b","c"]}"#)], emit: .none)
        {
            create.set($0)
        }
        _ = try create.wait().get()
        let padding = String(repeating: "x", count: 1_500)
        final class Outcomes: @unchecked Sendable {
            let monitor = Monitor()
            var answered: [(opIds: [String], ok: Bool)] = []
        }
        let outcomes = Outcomes()
        let clients = (0..<4).compactMap { c in
            startThread {
                for r in 0..<150 {
                    let opIds = (0..<10).map { "c\(c)-\(r)-\($0)" }
                    let lines = opIds.map { id in
                        op(
                            #"{"op":"message.send","actor":"a","ts":2000,"opId":"\#(id)","to":{"type":"team","id":"t"},"messageId":"\#(id)","content":{"type":"text","text":"\#(padding)"}}"#
                        )
                    }
                    let box = ResultBox<[Record]>()
                    writer.submit(lines, emit: .all) { box.set($0) }
                    let ok: Bool
                    switch box.wait() {
                    case .success: ok = true
                    case .failure: ok = false
                    }
                    outcomes.monitor.locked { outcomes.answered.append((opIds, ok)) }
                }
            }
        }
        #expect(clients.count == 4)
        for client in clients { client.join() }
        writer.stop()
        let answered = outcomes.monitor.locked { outcomes.answered }
        let failedAt = answered.firstIndex { !$0.ok }
        #expect(failedAt != nil, "the disk never filled")
        #expect(answered.contains { $0.ok }, "nothing was committed before the disk filled")

        try fs.resize("64m")
        var readOptions = Store.Options()
        readOptions.readOnly = true
        let store = try Store(path: path, options: readOptions, loadState: false)
        var lostAcknowledged: [String] = []
        var durableFailed: [String] = []
        for (opIds, ok) in answered {
            let stored = try opIds.map { try store.seqOf(opId: Id($0)) != nil }
            if ok {
                lostAcknowledged += zip(opIds, stored).filter { !$0.1 }.map(\.0)
            } else if stored.last == true || stored.drop(while: { $0 }).contains(true) {
                // A failed request over the batch size may have had its first transactions committed (a
                // prefix of its ops: a retry with the same opIds gets `duplicate`), never all of it.
                durableFailed += zip(opIds, stored).filter(\.1).map(\.0)
            }
        }
        #expect(lostAcknowledged.isEmpty, "answered with records but not stored: \(lostAcknowledged.prefix(5))")
        #expect(durableFailed.isEmpty, "answered storeFailed but stored whole (or not as a prefix): \(durableFailed)")
        store.close()
        let reopened = try Store(path: path)
        defer { reopened.close() }
        #expect(try reopened.audit().ok)
    }
}
