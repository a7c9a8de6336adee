import LMDB
import TeamLog
import TeamLogStore
import TeamLogThreads
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Readers and writers in separate processes on one store: a read snapshot stays what it was while another
/// process ingests 100,000 ops; a second writer fails at once with a clear message, or waits with `--wait`;
/// `teamlog audit` beside a live stream audits a consistent snapshot.
@Suite struct ConcurrencyTests {
    static let t0: Int64 = 1_767_225_600_000

    // MARK: (a) A snapshot held across a 100,000-op ingest

    /// `count` simple ops starting at op number `from`: 500 teams `c0…c499` (each with an owner and three
    /// members), then new teams, notify changes and team updates on them. All are valid.
    static func simpleOps(from: Int, count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count * 110)
        for n in from..<(from + count) {
            let ts = t0 + Int64(n)
            let line: String
            if n < 500 {
                line =
                    #"{"op":"team.create","actor":"o\#(n)","team":"c\#(n)","name":"C \#(n)","members":["m\#(n)-0","m\#(n)-1","m\#(n)-2"],"ts":\#(ts)}"#
            } else {
                let t = (n / 10) % 500
                switch n % 10 {
                case 0:
                    line = #"{"op":"team.create","actor":"o\#(t)","team":"d\#(n)","name":"D \#(n)","ts":\#(ts)}"#
                case 1...5:
                    let state = ["all", "none", "managerOnly"][n % 3]
                    line =
                        #"{"op":"member.setNotify","actor":"m\#(t)-\#(n % 3)","team":"c\#(t)","state":"\#(state)","ts":\#(ts)}"#
                default:
                    line =
                        #"{"op":"team.update","actor":"o\#(t)","team":"c\#(t)","fields":{"intro":"intro \#(n)","name":"C \#(t) v\#(n)"},"ts":\#(ts)}"#
                }
            }
            out += Array(line.utf8)
            out.append(0x0A)
        }
        return out
    }

    /// What a reader answers inside one snapshot.
    struct Answers: Equatable, CustomStringConvertible {
        var team: String?
        var checkpoint: [UInt8]?
        var lastSeq: UInt64?
        var teams: Int
        var members: Int
        var description: String {
            "seq \(lastSeq.map(String.init) ?? "-"), \(teams) teams, \(members) members, c0 \(team?.prefix(120) ?? "-")"
        }
    }

    /// Handles in the log environment (`log`) and the projections' (`meta`, `teams`, `members`).
    struct Handles {
        let meta: Database<UTF8String, RawBytes>
        let log: DatabaseHandle
        let teams: DatabaseHandle
        let members: DatabaseHandle

        init(_ store: Store) throws {
            meta = try store.projectionEnv.open("meta", create: false)
            log = try store.env.openHandle("log", create: false)
            teams = try store.projectionEnv.openHandle("p.teams", create: false)
            members = try store.projectionEnv.openHandle("p.members", create: false)
        }

        /// The answers in a snapshot of each environment (`txn`: the log's; `ptxn`: the projections').
        func answers(_ store: Store, _ txn: Transaction, _ ptxn: Transaction) throws -> Answers {
            Answers(
                team: try store.teamView("c0", in: store.storedSnapshot(ptxn))?.jsonString,
                checkpoint: try ptxn.get(meta, "checkpoint"),
                lastSeq: try txn.last(log).map { try $0.key.withUnsafeBytes { try BigEndianUInt64.decode($0) } },
                teams: try ptxn.stat(teams).entries, members: try ptxn.stat(members).entries)
        }

        /// The answers in fresh snapshots.
        func answers(_ store: Store) throws -> Answers {
            try store.projectionEnv.read { ptxn in try store.env.read { txn in try answers(store, txn, ptxn) } }
        }
    }

    @Test func readSnapshotIsStableWhileAnotherProcessIngests100kOps() throws {
        let directory = TemporaryDirectory("concurrency-snapshot")
        let storePath = directory.child("store")
        let setup = directory.child("setup.jsonl")
        let bulk = directory.child("bulk.jsonl")
        try CrashSafetyTests.writeFile(setup, Self.simpleOps(from: 0, count: 1_000))
        try CrashSafetyTests.writeFile(bulk, Self.simpleOps(from: 1_000, count: 100_000))
        let first = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", setup, "--store", storePath, "--no-sync", "--emit", "none"],
            stderr: directory.child("setup.err"), timeout: 120)
        try #require(first.status == .exited(0), "\(CrashSafetyTests.readText(directory.child("setup.err")))")

        var options = Store.Options()
        options.readOnly = true
        let store = try Store(path: storePath, options: options, loadState: false)
        let handles = try Handles(store)
        // A reader in another process too: it must not hold the writer up either.
        let holder = try ChildProcess(TestSupport.teamlogExecutable, ["debug-hold-reader", "--store", storePath])
        try #require(try holder.waitForOutput(containing: "ready", timeout: 30))

        let errPath = directory.child("bulk.err")
        try store.projectionEnv.read { ptxn in
            try store.env.read { txn in
                let before = try handles.answers(store, txn, ptxn)
                #expect(before.lastSeq == 1_000)
                #expect(before.teams == 550, "c0…c499 and d500, d510, … d990")
                let ingest = try ChildProcess.run(
                    TestSupport.teamlogExecutable,
                    ["ingest", bulk, "--store", storePath, "--no-sync", "--emit", "none"],
                    stderr: errPath, timeout: 300)
                #expect(ingest.status == .exited(0), "\(CrashSafetyTests.readText(errPath))")
                #expect(CrashSafetyTests.readText(errPath).hasPrefix("accepted 100000, rejected 0,"))
                let after = try handles.answers(store, txn, ptxn)
                #expect(after == before, "the snapshot changed under its reader")
            }
        }
        holder.kill(SIGKILL)
        holder.wait()

        // A fresh snapshot sees the ingest.
        let fresh = try handles.answers(store)
        #expect(fresh.lastSeq == 101_000)
        #expect(fresh.teams == 550 + 10_000)
        #expect(try store.head().seq == 101_000)
        let c0 = try #require(try store.teamView("c0"))
        #expect(c0["name"]?.stringValue == "C 0 v100009", "the last update of c0 is op 100009")
        #expect(c0["intro"]?.stringValue == "intro 100009")
        #expect(try store.verifyChain() == nil)
    }

    // MARK: (b) One writer at a time

    @Test func secondWriterFailsFastOrWaitsWithWait() throws {
        let directory = TemporaryDirectory("concurrency-writers")
        let storePath = directory.child("store")
        let feed = try LiveFeed(.fifo, path: directory.child("in.fifo"))
        let firstErr = directory.child("first.err")
        let writer = try ChildProcess(
            TestSupport.teamlogExecutable, ["ingest", "-", "--store", storePath, "--follow", "--emit", "events"],
            stdin: feed.stdin, stderr: firstErr)
        func send(_ line: String) throws {
            let bytes = Array(line.utf8) + [0x0A]
            #expect(try feed.pump(bytes, from: 0, to: bytes.count, chunk: bytes.count, draining: writer) == bytes.count)
        }
        try send(#"{"op":"team.create","actor":"wa","team":"w1","members":["wb"],"ts":1767225600000,"opId":"w-1"}"#)
        try #require(
            try StreamCrashTests.waitForOutput(writer, containing: #""seq":1"#, timeout: 30),
            "the first writer holds the store")

        let second = directory.child("second.jsonl")
        try CrashSafetyTests.writeFile(
            second,
            Array(
                """
                {"op":"team.invite","actor":"wa","team":"w1","targets":["wc"],"ts":1767225602000,"opId":"w-3"}
                {"op":"team.create","actor":"wz","team":"w1","ts":1767225603000,"opId":"w-4"}

                """.utf8))

        // Without --wait: fails at once, naming the holder.
        let refusedErr = directory.child("refused.err")
        let started = CrashSafetyTests.now()
        let refused = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", second, "--store", storePath],
            stderr: refusedErr, timeout: 30)
        let elapsed = CrashSafetyTests.now() - started
        let message = CrashSafetyTests.readText(refusedErr)
        #expect(refused.status == .exited(1))
        #expect(message.contains("being written by another process"), "\(message)")
        #expect(message.contains("pid \(writer.pid)"), "the message names the holder: \(message)")
        #expect(elapsed < 5, "the second writer failed after \(elapsed) s, not at once")
        #expect(refused.lines.isEmpty)
        let busy = #expect(throws: StoreError.self) { try Store(path: storePath) }
        #expect(busy?.code == .writerBusy, "\(String(describing: busy))")

        // With --wait: blocks while the first writer keeps working, then runs against the state it left.
        let waiterErr = directory.child("waiter.err")
        let waiter = try ChildProcess(
            TestSupport.teamlogExecutable, ["ingest", second, "--store", storePath, "--wait", "--emit", "events"],
            stderr: waiterErr)
        try send(
            #"{"op":"team.update","actor":"wa","team":"w1","fields":{"name":"W1"},"ts":1767225601000,"opId":"w-2"}"#)
        #expect(
            try StreamCrashTests.waitForOutput(writer, containing: #""seq":2"#, timeout: 30),
            "the first writer still writes")
        #expect(try waiter.readLine(timeout: 1.0) == nil && !waiter.reachedEnd, "the waiting writer waits")

        feed.close()  // end of input: the first writer commits and exits
        try writer.readToEnd(timeout: 30)
        #expect(writer.wait() == .exited(0), "\(CrashSafetyTests.readText(firstErr))")
        let records = try waiter.readToEnd(timeout: 60).compactMap { try? JSONParser.parse($0) }
        #expect(waiter.wait() == .exited(0), "\(CrashSafetyTests.readText(waiterErr))")
        let answers = records.filter { $0["line"] != nil }.map {
            "\($0["kind"]!.stringValue!) \($0["seq"]?.intValue ?? 0) \($0["code"]?.stringValue ?? "")"
        }
        #expect(
            answers == ["event 3 ", "rejected 0 teamExists"], "the waiter decided against the first writer's state")

        let store = try Store(path: storePath)
        defer { store.close() }
        #expect(try store.head().seq == 3)
        #expect(try store.audit().ok)
        #expect(try store.teamView("w1")?["name"]?.stringValue == "W1")
        #expect(try store.teamView("w1")?["memberCount"]?.intValue == 3)
    }

    // MARK: (c) audit beside a live stream

    @Test func auditBesideALiveStreamSeesAConsistentSnapshot() throws {
        let directory = TemporaryDirectory("concurrency-audit")
        let storePath = directory.child("store")
        let workload = try StreamCrashTests.reference.get().workload
        let feed = try LiveFeed(.fifo, path: directory.child("in.fifo"))
        let errPath = directory.child("stream.err")
        let ingest = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "ingest", "-", "--store", storePath, "--follow", "--batch-size", "50", "--flush-ms", "5", "--emit",
                "events",
            ],
            stdin: feed.stdin, stderr: errPath)
        var offset = 0
        func feedSome() throws {
            offset = try feed.pump(
                workload, from: offset, to: min(offset + 2_048, workload.count), chunk: 2_048, draining: ingest)
        }
        while StreamCrashTests.events(ingest.lines) == 0 && offset < workload.count && !ingest.reachedEnd {
            try feedSome()
        }

        // Audits one after another while the stream keeps writing.
        var audits: [(status: ChildProcess.Status, lines: [String], eventsDuring: Int)] = []
        while audits.count < 3 && !ingest.reachedEnd {
            let audit = try ChildProcess(TestSupport.teamlogExecutable, ["audit", "--store", storePath])
            let eventsBefore = StreamCrashTests.events(ingest.lines)
            while !audit.reachedEnd {
                if offset < workload.count { try feedSome() }
                _ = try audit.readLine(timeout: 0.001)
            }
            audits.append((audit.wait(), audit.lines, StreamCrashTests.events(ingest.lines) - eventsBefore))
        }
        feed.close()
        try ingest.readToEnd(timeout: 60)
        #expect(ingest.wait() == .exited(0), "\(CrashSafetyTests.readText(errPath).prefix(600))")

        #expect(audits.count == 3, "three audits ran beside the stream")
        for (i, audit) in audits.enumerated() {
            #expect(audit.status == .exited(0), "audit \(i + 1): \(audit.lines)")
            #expect(
                audit.lines.contains("chain: OK") && audit.lines.last == "audit OK", "audit \(i + 1): \(audit.lines)")
        }
        #expect(
            audits.contains { $0.eventsDuring > 0 }, "an audit overlapped with commits: \(audits.map(\.eventsDuring))")
        let store = try Store(path: storePath)
        defer { store.close() }
        #expect(try store.audit().ok)
    }
}

extension ConcurrencyTests {
    /// A writer refused the store's lock closes its descriptor once. (The lock's initializer closed it and
    /// threw, and the class's `deinit`, which Swift runs for an object whose properties were all set,
    /// truncated and closed the same number again — by then another thread's file or socket: a server test
    /// died in NIO's `getsockname` with EBADF.) Meanwhile another thread keeps opening descriptors and
    /// checks that each stays its own until it closes it itself.
    @Test func aRefusedWriterClosesItsLockDescriptorOnce() throws {
        let directory = TemporaryDirectory()
        let storePath = directory.child("store")
        var options = Store.Options()
        options.noSync = true
        let holder = try Store(path: storePath, options: options)
        defer { holder.close() }
        let probe = directory.child("probe")
        let state = ProbeState()
        let checker = try #require(
            startThread {
                while !state.stopped {
                    let fd = open(probe, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
                    guard fd >= 0 else { continue }
                    for _ in 0..<20 where fcntl(fd, F_GETFD) < 0 { state.steal() }
                    if close(fd) != 0 { state.steal() }  // EBADF: someone else closed it
                }
            })
        var refused = 0
        for _ in 0..<3_000 {
            do { _ = try Store(path: storePath, options: options) } catch let error as StoreError
                where error.code == .writerBusy
            {
                refused += 1
            }
        }
        state.stop()
        checker.join()
        #expect(refused == 3_000)
        #expect(state.stolen == 0, "descriptors of another thread closed under it: \(state.stolen)")
    }
}

private final class ProbeState: @unchecked Sendable {
    private let monitor = Monitor()
    private var _stopped = false
    private var _stolen = 0
    var stopped: Bool { monitor.locked { _stopped } }
    var stolen: Int { monitor.locked { _stolen } }
    func stop() { monitor.locked { _stopped = true } }
    func steal() { monitor.locked { _stolen += 1 } }
}
