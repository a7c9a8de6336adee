import TeamLog
import TeamLogRuntime
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a stopped run leaves under `$TMPDIR`: a signal removes the scratch store (or the backup) the run
/// was making before it ends the process; what `kill -9` left is removed by the next run that makes one,
/// and a live one — of this or another process — never is.
@Suite struct LeftoverTests {
    static let exe = TestSupport.teamlogExecutable
    static let events = 2_000

    /// A store of `events` team creations (an audit of it takes about a second in a debug build).
    func makeStore(_ dir: TemporaryDirectory) throws -> String {
        let text =
            (1...Self.events).map {
                #"{"op":"team.create","actor":"owner","team":"t\#($0)","name":"Team \#($0)","ts":\#(1000 + $0)}"#
            }.joined(separator: "\n") + "\n"
        try CrashSafetyTests.writeFile(dir.child("ops.jsonl"), Array(text.utf8))
        let store = dir.child("store")
        let (status, _) = try ChildProcess.run(
            Self.exe, ["ingest", dir.child("ops.jsonl"), "--store", store, "--emit", "none"], timeout: 120)
        #expect(status == .exited(0))
        return store
    }

    /// The `teamlog-scratch-*` directories in `tmp`.
    func scratchDirectories(_ tmp: String) -> [String] {
        listDirectory(tmp).filter { $0.hasPrefix("teamlog-scratch-") }.map { tmp + "/" + $0 }
    }

    /// Starts `teamlog args` with `TMPDIR=tmp` and waits until its scratch store is there (its owner's lock
    /// made), returning the child and the directory.
    func startReplay(_ args: [String], tmp: String, stderr: String) throws -> (ChildProcess, String) {
        let child = try ChildProcess(Self.exe, args, environment: ["TMPDIR": tmp], stderr: stderr)
        let deadline = monotonicNow() + 60
        while monotonicNow() < deadline {
            if let made = scratchDirectories(tmp).first(where: { access($0 + "/owner.lock", F_OK) == 0 }) {
                return (child, made)
            }
            usleep(1_000)
        }
        throw ChildProcessError("no scratch store appeared in \(tmp) for \(args)")
    }

    @Test func aSignalRemovesTheScratchStoreAndStillEndsTheProcess() throws {
        let dir = TemporaryDirectory("leftover-signal")
        let store = try makeStore(dir)
        let tmp = dir.child("tmp")
        #expect(mkdir(tmp, 0o755) == 0)
        for (args, signal, name) in [
            (["audit", "--store", store], SIGTERM, "SIGTERM"),
            (["team", "t1", "--at", "1900", "--store", store], SIGHUP, "SIGHUP"),
            (["repair", "--store", store], SIGTERM, "SIGTERM"),
        ] {
            let err = dir.child("stderr")
            let (child, scratch) = try startReplay(args, tmp: tmp, stderr: err)
            child.kill(signal)
            // Ended by the signal, as without the cleanup: a supervisor sees what it sent.
            #expect(child.wait() == .signaled(signal), "\(args)")
            #expect(scratchDirectories(tmp).isEmpty, "\(args): \(scratchDirectories(tmp))")
            #expect(CrashSafetyTests.readText(err).contains("teamlog: \(name): removed \(scratch)\n"), "\(args)")
        }
        // The store is as it was: a repair stopped while it replayed cut nothing.
        let (status, lines) = try ChildProcess.run(Self.exe, ["audit", "--store", store], timeout: 120)
        #expect(status == .exited(0) && lines.last == "audit OK", "\(lines)")
    }

    @Test func whatAKilledRunLeftIsRemovedByTheNextAndALiveOneIsNot() throws {
        let dir = TemporaryDirectory("leftover-kill")
        let store = try makeStore(dir)
        let tmp = dir.child("tmp")
        #expect(mkdir(tmp, 0o755) == 0)
        let (child, killed) = try startReplay(["audit", "--store", store], tmp: tmp, stderr: dir.child("stderr"))
        // Killed once its scratch store has its files (the store is opened just after the lock is made).
        let deadline = monotonicNow() + 60
        while access(killed + "/proj/data.mdb", F_OK) != 0 && monotonicNow() < deadline { usleep(1_000) }
        child.kill(SIGKILL)
        #expect(child.wait() == .signaled(SIGKILL))
        #expect(access(killed + "/proj/data.mdb", F_OK) == 0, "kill -9 leaves the scratch store")
        setAge(killed, seconds: 120)

        // Beside it: one that is live (its owner's lock held, here by this process) and as old; one
        // unowned but made a moment ago (as one between `mkdtemp` and its lock looks); a scratch store of
        // an older teamlog, with only its store's `writer.lock`, unheld; and a file of that name.
        let live = tmp + "/teamlog-scratch-live01"
        let fresh = tmp + "/teamlog-scratch-fresh1"
        let older = tmp + "/teamlog-scratch-older1"
        for path in [live, fresh, older] { #expect(mkdir(path, 0o700) == 0) }
        let lock = open(live + "/owner.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
        // Closed once, below, or here when an earlier step throws: a second `close` of the number would
        // close whatever a parallel test opened under it since (it once closed another test's LMDB file
        // in the middle of `mdb_env_open`: "Bad file descriptor").
        var lockHeld = true
        defer { if lockHeld { close(lock) } }
        try CrashSafetyTests.writeFile(older + "/writer.lock", Array("999999\n".utf8))
        try CrashSafetyTests.writeFile(tmp + "/teamlog-scratch-file01", Array("x".utf8))
        for path in [live, older, tmp + "/teamlog-scratch-file01"] { setAge(path, seconds: 120) }

        let err = dir.child("stderr2")
        let audit = try ChildProcess(Self.exe, ["audit", "--store", store], environment: ["TMPDIR": tmp], stderr: err)
        let lines = try audit.readToEnd(timeout: 120)
        #expect(audit.wait() == .exited(0) && lines.last == "audit OK", "\(lines)")
        let said = CrashSafetyTests.readText(err)
        #expect(said.contains("teamlog: removed \(killed) ("), "\(said)")
        #expect(said.contains("teamlog: removed \(older) ("), "\(said)")
        #expect(said.contains(", the scratch store of a run that was killed\n"), "\(said)")
        #expect(
            Set(listDirectory(tmp)) == ["teamlog-scratch-live01", "teamlog-scratch-fresh1", "teamlog-scratch-file01"],
            "\(listDirectory(tmp))")

        // The live one's owner gone, it goes too (in-process: the sweep the next replay runs).
        close(lock)
        lockHeld = false
        let removed = ScratchStore.removeAbandoned(in: tmp)
        #expect(removed.map(\.path) == [live])
        #expect(ScratchStore.removeAbandoned(in: tmp, minimumAge: 0).map(\.path) == [fresh])
        #expect(listDirectory(tmp) == ["teamlog-scratch-file01"])
    }

    /// A scratch store is registered as this process's to remove on a signal while it exists (and its
    /// own replays keep it out of the sweep: its owner lock is held); a backup's new directory while it is
    /// copied.
    @Test func whatARunMakesIsRegisteredWhileItMakesIt() throws {
        let dir = TemporaryDirectory("leftover-registry")
        let store = try Store(path: dir.child("store"))
        defer { store.close() }
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        let line = #"{"op":"team.create","actor":"owner","team":"t1","name":"T","ts":1000}"#
        try processor.process(.text(number: 1, bytes: Array(line.utf8)))
        try processor.commit()
        let scratch = try store.replayed(at: 1)
        #expect(Leftovers.paths.contains(scratch.path))
        // Old enough to be swept, but its owner (this process) holds its lock. (Only old directories are
        // looked at: the parallel tests' scratch stores being made now are young.)
        setAge(scratch.path, seconds: 120)
        #expect(!ScratchStore.removeAbandoned(in: ScratchStore.parentDirectory).map(\.path).contains(scratch.path))
        #expect(access(scratch.path, F_OK) == 0)
        scratch.remove()
        #expect(!Leftovers.paths.contains(scratch.path))
        #expect(access(scratch.path, F_OK) != 0)

        let copy = dir.child("copy")
        var seen = false
        _ = try store.backup(to: copy) { _ in seen = seen || Leftovers.paths.contains(copy) }
        #expect(seen)
        #expect(!Leftovers.paths.contains(copy))
        #expect(access(copy + "/data.mdb", F_OK) == 0, "a finished backup is kept")

        // Into an empty directory it was given: what it makes there, not the directory.
        let given = dir.child("given")
        #expect(mkdir(given, 0o755) == 0)
        var listed: [String] = []
        _ = try store.backup(to: given) { _ in listed = Leftovers.paths.filter { $0.hasPrefix(given) } }
        #expect(Set(listed) == [given + "/proj", given + "/data.mdb", given + "/lock.mdb", given + "/data.mdb.partial"])
        #expect(!Leftovers.paths.contains { $0.hasPrefix(given) })
    }

    private func setAge(_ path: String, seconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var times = [timeval(tv_sec: now.tv_sec - seconds, tv_usec: 0), timeval(tv_sec: now.tv_sec - seconds, tv_usec: 0)]
        #expect(utimes(path, &times) == 0)
    }

    private func monotonicNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    private func listDirectory(_ path: String) -> [String] {
        (Tmpfs.entries(path) ?? []).sorted()
    }
}
