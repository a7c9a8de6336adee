import LMDB
import Synchronization
import TeamLog
import TeamLogStore
import TeamLogThreads
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 11 §1, §2, §4, §7: the log commit is the only durable write on a line's path; projections are a
/// checkpointed cache of the log, written off that path, recovered by replaying the log after their
/// checkpoint; other processes read the last checkpoint; `teamlog status` shows the lag.
@Suite struct CheckpointTests {
    static let never = "100000000"

    static func lines(_ count: Int) -> [String] { TeamWorkloadProbe.lines(count: count, seed: 11) }

    static func writeLines(_ path: String, _ lines: [String]) throws {
        try CrashSafetyTests.writeFile(path, Array(lines.joined(separator: "\n").utf8) + [0x0A])
    }

    /// A store of the same lines ingested in one clean run (its projections checkpointed at close).
    static func cleanStore(_ lines: [String], _ directory: TemporaryDirectory) throws -> Store {
        let input = directory.child("clean.jsonl")
        try writeLines(input, lines)
        let path = directory.child("clean")
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", path, "--emit", "none"], timeout: 120)
        try #require(run.status == .exited(0))
        return try Store(path: path)
    }

    @Test func aCleanCloseLeavesNothingToReplay() throws {
        let h = try StoreHarness()
        try h.feed(Self.lines(300))
        let head = try h.store.head().seq
        try h.reopen()
        #expect(h.store.replayedAtOpen == 0)
        #expect(h.store.checkpoint.seq == head)
        #expect(try h.store.audit().ok)
    }

    /// Opening a store whose projections are behind replays exactly the log after their checkpoint, and
    /// the result equals a run with checkpoints everywhere.
    @Test func openReplaysOnlyTheLogAfterTheCheckpoint() throws {
        let directory = TemporaryDirectory("checkpoint-tail")
        let lines = Self.lines(550)
        let options = Store.Options.checkpointing(every: 300)  // one checkpoint, at the commit after op 300; none after it
        let path = directory.child("store")
        var headAtCrash: UInt64 = 0
        var checkpointAtCrash: UInt64 = 0
        do {
            let store = try Store(path: path, options: options)
            for (i, line) in lines.enumerated() {
                guard case .success(let op) = OpParser.parse(line: line) else { continue }
                _ = try store.submit(op, now: 1_000)
                if i % 100 == 99 { try store.commit() }
            }
            try store.commit()
            headAtCrash = try store.head().seq
            store.finishCheckpoint()
            checkpointAtCrash = store.checkpoint.seq
            // No close: as if the process died here (the writer lock goes with the object).
        }
        #expect(checkpointAtCrash > 0 && checkpointAtCrash < headAtCrash, "a checkpoint behind the head")
        let reopened = try Store(path: path, options: options)
        defer { reopened.close() }
        #expect(reopened.refusal == nil)
        #expect(reopened.replayedAtOpen == Int(headAtCrash - checkpointAtCrash))
        #expect(reopened.world.lastSeq == headAtCrash)
        #expect(try reopened.audit().ok)
        let clean = try Self.cleanStore(lines, directory)
        defer { clean.close() }
        #expect(try CrashSafetyTests.storedTables(reopened) == CrashSafetyTests.storedTables(clean))
    }

    /// The calls an open made to `Options.openReplayProgress`.
    final class ReplayCalls: Sendable {
        let calls = Mutex<[(replayed: Int, of: Int)]>([])
        var seen: [(replayed: Int, of: Int)] { calls.withLock { $0 } }
        func record(_ replayed: Int, _ of: Int) { calls.withLock { $0.append((replayed, of)) } }
    }

    /// A store of `lines` committed and never checkpointed — no close, as if the process died — so its
    /// next open replays its whole log; returns the log's head seq.
    static func storeWithATail(_ path: String, _ lines: [String]) throws -> UInt64 {
        let store = try Store(path: path, options: .checkpointing(every: 1_000_000))
        for line in lines {
            guard case .success(let op) = OpParser.parse(line: line) else { continue }
            _ = try store.submit(op, now: 1_000)
        }
        try store.commit()
        return try store.head().seq
    }

    /// An open whose log tail is many checkpoint intervals long (a rebuilt `proj/` replays the whole log)
    /// checkpoints on the way and evicts to its budget, as a writer does — memory bounded by the working
    /// set, not the history (a 962,411-event rebuild held 1,366 MB before, 911 MB after; 5M events 1,119 MB)
    /// — and ends equal to a clean run, its checkpoints' hashes the log's.
    @Test func aLongTailIsCheckpointedAndEvictedAsItIsReplayed() throws {
        let directory = TemporaryDirectory("checkpoint-long-tail")
        let path = directory.child("store")
        let lines = Self.lines(3_000)
        let head = try Self.storeWithATail(path, lines)
        var options = Store.Options.checkpointing(every: 200)
        options.cacheBytes = 32 << 10
        do {
            let store = try Store(path: path, options: options)
            defer { store.close() }
            #expect(store.refusal == nil)
            #expect(store.replayedAtOpen == Int(head))
            store.finishCheckpoint()
            #expect(store.checkpoint.seq == head / 200 * 200, "checkpointed every 200 events of the replay")
            #expect(store.workingSetStats.evictions > 0, "evicted to its budget while replaying")
            #expect(try store.audit().ok)
        }
        let reopened = try Store(path: path, options: options)
        defer { reopened.close() }
        #expect(reopened.replayedAtOpen == 0, "the close checkpointed the rest")
        #expect(try reopened.audit().ok)
        let clean = try Self.cleanStore(lines, directory)
        defer { clean.close() }
        #expect(try CrashSafetyTests.storedTables(reopened) == CrashSafetyTests.storedTables(clean))
    }

    /// A commit with `commitEncodingLimit` (a stream's) encodes about that many changed records and
    /// carries the rest to the next commits, and a checkpoint takes all that are left: nothing is lost or
    /// stale — the stored tables equal a clean run's, and the store audits clean.
    @Test func aCommitCarriesWhatItDoesNotEncodeToTheNextOnes() throws {
        let directory = TemporaryDirectory("checkpoint-carry")
        let lines = Self.lines(1_200)
        let store = try Store(path: directory.child("store"), options: .checkpointing(every: 150))
        store.commitEncodingLimit = 8
        var carried: [Int] = []
        var checkpoints: Set<UInt64> = []
        for (i, line) in lines.enumerated() {
            guard case .success(let op) = OpParser.parse(line: line) else { continue }
            _ = try store.submit(op, now: 1_000)
            if i % 10 == 9 {
                try store.commit()
                carried.append(store.carriedChangeCount)
                checkpoints.insert(store.checkpoint.seq)
            }
        }
        #expect(carried.contains { $0 > 0 }, "some commit left records for the next ones")
        #expect(carried.contains(0), "and the next ones drained them")
        #expect(checkpoints.count >= 5, "checkpoints kept coming while records were carried: \(checkpoints.sorted())")
        try store.checkpointNow()
        #expect(store.carriedChangeCount == 0, "a checkpoint encodes everything carried")
        #expect(try store.audit().ok)
        store.close()
        let reopened = try Store(path: directory.child("store"))
        defer { reopened.close() }
        #expect(reopened.replayedAtOpen == 0)
        let clean = try Self.cleanStore(lines, directory)
        defer { clean.close() }
        #expect(try CrashSafetyTests.storedTables(reopened) == CrashSafetyTests.storedTables(clean))
    }

    /// A stream whose every commit changes more records than the limit (a saturated one, committing
    /// full batches) builds no backlog: its commits' share follows their average, so what is carried
    /// stays about one burst, not a multiple of every commit's changes.
    @Test func aSaturatedStreamCarriesNoGrowingBacklog() throws {
        let directory = TemporaryDirectory("checkpoint-carry-saturated")
        let store = try Store(path: directory.child("store"), options: .checkpointing(every: 1_000_000))
        defer { store.close() }
        store.commitEncodingLimit = 8
        var carried: [Int] = []
        for (i, line) in Self.lines(3_000).enumerated() {
            guard case .success(let op) = OpParser.parse(line: line) else { continue }
            _ = try store.submit(op, now: 1_000)
            if i % 100 == 99 {
                try store.commit()
                carried.append(store.carriedChangeCount)
            }
        }
        let late = carried.suffix(10)
        #expect(late.allSatisfy { $0 < 300 }, "the backlog stays small once the share follows: \(carried)")
        #expect(try store.audit().ok)
    }

    /// An open that replays a log tail reports it as it goes (the CLI draws it as its `recover` line):
    /// `(0, n)` first, every 1,024 events, `(n, n)` last — and nothing when the last close left no tail.
    @Test func anOpenReportsItsReplayOfTheTail() throws {
        let directory = TemporaryDirectory("checkpoint-progress")
        let path = directory.child("store")
        let options = Store.Options.checkpointing(every: 1_000_000)
        let head = try Self.storeWithATail(path, Self.lines(3_000))
        let n = Int(head)
        #expect(n > 2 * 1_024)
        let replay = ReplayCalls()
        var reporting = options
        reporting.openReplayProgress = replay.record
        let store = try Store(path: path, options: reporting)
        #expect(store.replayedAtOpen == n)
        let seen = replay.seen
        #expect(seen.first.map { $0 == (0, n) } == true, "\(seen.prefix(2))")
        #expect(seen.last.map { $0 == (n, n) } == true, "\(seen.suffix(2))")
        let between = seen.dropFirst().dropLast()
        #expect(between.map(\.replayed) == Array(stride(from: 1_024, through: n, by: 1_024)))
        #expect(between.allSatisfy { $0.of == n })
        store.close()

        let none = ReplayCalls()
        reporting.openReplayProgress = none.record
        let reopened = try Store(path: path, options: reporting)
        defer { reopened.close() }
        #expect(reopened.replayedAtOpen == 0)
        #expect(none.seen.isEmpty, "no tail, no calls: \(none.seen)")
    }

    /// kill -9 of a streaming writer that never checkpointed: every printed event is in the log, the
    /// reopened store replays all of them into the projections, audits clean and equals a clean run.
    @Test func killBetweenLogCommitsAndACheckpointRecoversExactly() throws {
        let directory = TemporaryDirectory("checkpoint-kill")
        let lines = Self.lines(400)
        let input = directory.child("in.jsonl")
        let feed = try LiveFeed(.growingFile, path: input)
        let path = directory.child("store")
        let child = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "ingest", input, "--store", path, "--follow", "--batch-size", "20", "--flush-ms", "5", "--emit",
                "events", "--checkpoint-ops", Self.never, "--checkpoint-ms", Self.never,
            ],
            environment: ["SWIFT_BACKTRACE": "enable=no"], stderr: directory.child("err"))
        _ = try feed.write(ArraySlice(Array(lines.joined(separator: "\n").utf8) + [0x0A]))
        let reference = try Self.cleanStore(lines, directory)
        let lastSeq = try reference.head().seq
        reference.close()
        #expect(try StreamCrashTests.waitForOutput(child, containing: "\"seq\":\(lastSeq),", timeout: 60))
        child.kill(SIGKILL)
        #expect(child.wait() == .signaled(SIGKILL))
        feed.close()

        var readOnly = Store.Options()
        readOnly.readOnly = true
        let reader = try Store(path: path, options: readOnly, loadState: false)
        #expect(try reader.status().checkpointSeq == 0, "nothing was checkpointed before the kill")
        #expect(try reader.status().headSeq == lastSeq)
        let store = try Store(path: path)
        defer { store.close() }
        #expect(store.replayedAtOpen == Int(lastSeq))
        #expect(try store.audit().ok)
        let clean = try Store(path: directory.child("clean"))
        defer { clean.close() }
        #expect(try CrashSafetyTests.storedTables(store) == CrashSafetyTests.storedTables(clean))
    }

    /// The projections' lag behind the log is bounded: while a checkpoint cannot finish (here another
    /// transaction holds the projection environment's write lock), the writer goes on committing ops —
    /// the log commit is the only work on a line's path — until it is twice `checkpointOps` past the
    /// checkpoint being written, and there it waits for it instead of letting the uncheckpointed tail
    /// grow. Released, it finishes, and the projections reach the head.
    @Test func theCheckpointLagIsBoundedByTwiceTheInterval() throws {
        let directory = TemporaryDirectory("checkpoint-lag")
        let options = Store.Options.checkpointing(every: 10)
        let store = try Store(path: directory.child("store"), options: options)
        defer { store.close() }
        let ops = Self.lines(120).compactMap { line -> Op? in
            if case .success(let op) = OpParser.parse(line: line) { return op }
            return nil
        }
        let monitor = Monitor()
        nonisolated(unsafe) var holding = false
        nonisolated(unsafe) var release = false
        nonisolated(unsafe) var submitted = 0
        nonisolated(unsafe) var failure: (any Error)?
        let projections = store.projectionEnv
        let blocker = startThread(name: "test-blocker") {
            do {
                try projections.write { _ in
                    monitor.locked {
                        holding = true
                        monitor.broadcast()
                        monitor.wait(until: { release })
                    }
                }
            } catch { monitor.locked { failure = error } }
        }
        monitor.locked { monitor.wait(until: { holding }) }
        nonisolated(unsafe) let writerStore = store
        let writer = startThread(name: "test-writer") {
            do {
                for op in ops {
                    _ = try writerStore.submit(op, now: 1_000)
                    try writerStore.commit()  // one op per commit: a checkpoint is due at every tenth
                    monitor.locked {
                        submitted += 1
                        monitor.broadcast()
                    }
                }
            } catch { monitor.locked { failure = error } }
        }
        // The writer stops at the bound: the first checkpoint starts after ~10 ops and cannot finish; ~20
        // ops later the writer waits for it (rejected ops do not count). Without the bound it commits all.
        let stuckAt = monitor.locked { () -> Int in
            _ = monitor.wait(until: { submitted >= 40 }, timeoutMs: 1_500)
            return submitted
        }
        #expect(stuckAt >= 20 && stuckAt < 40, "the writer went on to op \(stuckAt) past a stalled checkpoint")
        monitor.locked {
            release = true
            monitor.broadcast()
        }
        blocker?.join()
        writer?.join()
        #expect(failure == nil)
        #expect(monitor.locked { submitted } == ops.count)
        try store.checkpointNow()
        store.finishCheckpoint()
        #expect(store.checkpoint.seq == (try store.head().seq))
        #expect(try store.audit().ok)
    }

    /// `teamlog ingest --follow` of a growing file `in.jsonl` into `store` under `directory` (events printed,
    /// checkpoints every `checkpointMs` and never by ops), with `firstLine` in the file before it starts.
    static func followWriter(in directory: TemporaryDirectory, checkpointMs: String, firstLine: [UInt8]? = nil) throws
        -> (LiveFeed, ChildProcess)
    {
        let input = directory.child("in.jsonl")
        let feed = try LiveFeed(.growingFile, path: input)
        if let firstLine { _ = try feed.write(ArraySlice(firstLine)) }
        let writer = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "ingest", input, "--store", directory.child("store"), "--follow", "--flush-ms", "5", "--emit",
                "events", "--checkpoint-ops", Self.never, "--checkpoint-ms", checkpointMs,
            ],
            stderr: directory.child("writer.err"))
        return (feed, writer)
    }

    /// Another process reads the last checkpoint; `status` shows the lag and the writer; a clean stop
    /// checkpoints everything.
    @Test func otherProcessesReadTheLastCheckpointAndStatusShowsTheLag() throws {
        let directory = TemporaryDirectory("checkpoint-lag")
        let path = directory.child("store")
        let exe = TestSupport.teamlogExecutable
        let create = #"{"op":"team.create","actor":"own","team":"lag1","members":["a"],"ts":1767225600000}"#
        // Creating the store (and its first, empty checkpoint) before the writer starts.
        let first = directory.child("first.jsonl")
        try CrashSafetyTests.writeFile(first, Array(#"{"op":"client.login","actor":"x","device":"d","ts":1}"#.utf8) + [0x0A])
        #expect(try ChildProcess.run(exe, ["ingest", first, "--store", path], timeout: 60).status == .exited(0))
        let (feed, writer) = try Self.followWriter(in: directory, checkpointMs: Self.never)
        _ = try feed.write(ArraySlice(Array(create.utf8) + [0x0A]))
        #expect(try StreamCrashTests.waitForOutput(writer, containing: #""seq":2,"#, timeout: 30))

        let team = try ChildProcess.run(exe, ["team", "lag1", "--store", path, "--json"], timeout: 30)
        #expect(team.status == .exited(1), "another process reads the checkpoint, which is before the team")
        let status = try ChildProcess.run(exe, ["status", "--store", path, "--json"], timeout: 30)
        let view = try JSONParser.parse(try #require(status.lines.first))
        #expect(view["headSeq"]?.intValue == 2)
        #expect(view["checkpointSeq"]?.intValue == 1)
        #expect(view["lag"]?.intValue == 1)
        #expect(view["writerPid"]?.intValue == Int64(writer.pid))

        writer.kill(SIGTERM)
        #expect(writer.wait() == .exited(0))
        feed.close()
        let after = try ChildProcess.run(exe, ["status", "--store", path, "--json"], timeout: 30)
        let done = try JSONParser.parse(try #require(after.lines.first))
        #expect(done["lag"]?.intValue == 0, "a clean stop writes a last checkpoint")
        #expect(done["writerPid"] == .null)
        // A writer killed with its pid left in the lock file, the pid since reused by a live process (this
        // one): the kernel's lock table, not the pid, says whether a writer runs.
        try CrashSafetyTests.writeFile(path + "/writer.lock", Array("\(getpid())\n".utf8))
        let reused = try ChildProcess.run(exe, ["status", "--store", path, "--json"], timeout: 30)
        #expect(try JSONParser.parse(try #require(reused.lines.first))["writerPid"] == .null, "no one holds the lock")
        let found = try ChildProcess.run(exe, ["team", "lag1", "--store", path, "--json"], timeout: 30)
        #expect(found.status == .exited(0))
        #expect(try JSONParser.parse(try #require(found.lines.first))["memberCount"]?.intValue == 2)
    }

    /// A writer whose feed goes quiet after a burst still checkpoints: checkpoints start at commits, and
    /// with no commit coming the projections other processes read stayed behind by the burst for as long
    /// as the quiet lasted. Now the idle writer starts the checkpoint itself once `--checkpoint-ms` has
    /// passed (here 2 s after its open, well after the one op's commit), and another process reads the op
    /// while the writer still runs.
    @Test func anIdleWriterCheckpointsWithinTheInterval() throws {
        let directory = TemporaryDirectory("checkpoint-idle")
        let path = directory.child("store")
        let exe = TestSupport.teamlogExecutable
        let create = #"{"op":"team.create","actor":"own","team":"idle1","members":["a"],"ts":1767225600000}"#
        let (feed, writer) = try Self.followWriter(
            in: directory, checkpointMs: "2000", firstLine: Array(create.utf8) + [0x0A])
        #expect(try StreamCrashTests.waitForOutput(writer, containing: #""seq":1,"#, timeout: 30))
        let deadline = ContinuousClock.now + .seconds(30)
        var lag: Int64? = nil
        repeat {
            let status = try ChildProcess.run(exe, ["status", "--store", path, "--json"], timeout: 30)
            let view = try JSONParser.parse(try #require(status.lines.first))
            #expect(view["writerPid"]?.intValue == Int64(writer.pid), "the writer still runs")
            lag = view["lag"]?.intValue
            if lag == 0 { break }
            usleep(100_000)
        } while ContinuousClock.now < deadline
        #expect(lag == 0, "the idle writer checkpointed the op")
        let team = try ChildProcess.run(exe, ["team", "idle1", "--store", path, "--json"], timeout: 30)
        #expect(team.status == .exited(0), "another process reads the op while the writer runs")
        writer.kill(SIGTERM)
        #expect(writer.wait() == .exited(0))
        feed.close()
    }

    /// The projections are a cache: deleted, a writer rebuilds them from the log; readers say so meanwhile.
    @Test func deletedProjectionsAreRebuiltFromTheLog() throws {
        let directory = TemporaryDirectory("checkpoint-rebuild")
        let lines = Self.lines(300)
        let clean = try Self.cleanStore(lines, directory)
        let head = try clean.head().seq
        let tables = try CrashSafetyTests.storedTables(clean)
        clean.close()
        let path = directory.child("clean")
        TemporaryDirectory.removeTree(path + "/proj")

        let query = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["status", "--store", path], stderr: directory.child("q.err"), timeout: 30)
        #expect(query.status != .exited(0))
        #expect(CrashSafetyTests.readText(directory.child("q.err")).contains("projections"))

        let store = try Store(path: path)
        defer { store.close() }
        #expect(store.replayedAtOpen == Int(head))
        #expect(try store.audit().ok)
        #expect(try CrashSafetyTests.storedTables(store) == tables)
    }
}
