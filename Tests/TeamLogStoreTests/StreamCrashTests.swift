import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `teamlog ingest --follow` killed with SIGKILL at 20 seeded points of a live feed: the store reopens
/// sound, holds every event the child printed, and feeding the whole input again (a plain ingest) ends
/// byte for byte where one clean run ends. SIGTERM instead ends the stream cleanly: exit 0 and everything
/// printed is everything committed.
///
/// The feed is a FIFO the child reads as stdin, or a regular file it follows while the test appends to it,
/// written in seeded chunk sizes that split lines anywhere. Each kill comes a seeded few milliseconds after the
/// child printed the event of a seeded line, while the feed goes on, so it lands mid-stream; small batches and
/// a 5 ms flush make commits frequent, so kills land before, inside and after commits.
@Suite struct StreamCrashTests {
    static let lineCount = 4_000
    static let seed: UInt64 = 20_260_315
    static let crashPoints = 20

    /// The workload and what one clean, uninterrupted (non-follow) ingest of it ends with.
    struct Reference: Sendable {
        var workload: [UInt8]
        /// The `opId` of each line (index = line - 1).
        var lineOpIds: [String?]
        /// The `opId` of each event of the clean run, in seq order.
        var logOpIds: [String?]
        var seq: UInt64
        var tables: CrashSafetyTests.Tables
        var audit: String
        var auditOK: Bool
    }

    static let reference: Result<Reference, any Error> = Result { try makeReference() }

    static func makeReference() throws -> Reference {
        let directory = TemporaryDirectory("stream-reference")
        let lines = TeamWorkloadProbe.lines(count: lineCount, seed: seed)
        let workload = Array(lines.joined(separator: "\n").utf8) + [0x0A]
        let file = directory.child("ops.jsonl")
        try CrashSafetyTests.writeFile(file, workload)
        let storePath = directory.child("clean")
        let clean = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", storePath, "--emit", "none"],
            stderr: directory.child("clean.err"), timeout: 300)
        guard clean.status == .exited(0) else {
            throw ChildProcessError(
                "clean ingest \(clean.status): \(CrashSafetyTests.readText(directory.child("clean.err")))")
        }
        let store = try Store(path: storePath)
        defer { store.close() }
        let audit = try store.audit()
        return Reference(
            workload: workload,
            lineOpIds: lines.map { (try? JSONParser.parse($0))?["opId"]?.stringValue },
            logOpIds: try CrashSafetyTests.opIds(of: store), seq: try store.head().seq,
            tables: try CrashSafetyTests.storedTables(store), audit: "\(audit)", auditOK: audit.ok)
    }

    // MARK: SIGKILL at seeded points

    /// Where and how one crash point feeds and kills.
    struct CrashPoint: Sendable, CustomStringConvertible {
        var index: Int
        var feed: LiveFeed.Kind
        /// The kill comes once the child has printed the event of a line at or past this one.
        var line: Int
        /// Bytes per write (lines are split anywhere).
        var chunk: Int
        /// Milliseconds from seeing that event to the kill; the feed goes on meanwhile.
        var delayMs: Int

        var description: String {
            "crash point \(index) (\(feed.rawValue) in \(chunk)-byte writes, kill \(delayMs) ms after line \(line) is out)"
        }

        /// Twenty points spread over the workload, one per 190-line stretch.
        static func seeded(_ index: Int) -> CrashPoint {
            var random = SeededRandom(StreamCrashTests.seed &+ UInt64(index) &* 7919)
            return CrashPoint(
                index: index, feed: index % 2 == 0 ? .fifo : .growingFile,
                line: 100 + index * 190 + random.below(190), chunk: 64 << random.below(10), delayMs: random.below(25))
        }
    }

    /// What one crash point saw; `problems` is empty when the store survived it.
    struct Outcome: Sendable {
        var point: CrashPoint
        var killedByTest = false
        var childStatus = ""
        var printedEvents = 0
        var committed: UInt64 = 0
        var problems: [String] = []
    }

    @Test func killedStreamingIngestSurvivesTwentySeededCrashPoints() async throws {
        let reference = try Self.reference.get()
        try #require(reference.auditOK, "the clean run audits OK: \(reference.audit)")
        try #require(reference.logOpIds.allSatisfy { $0 != nil }, "every workload op carries an opId")

        // Two points at a time: each is a chain of blocking child processes.
        let points = (0..<Self.crashPoints).map(CrashPoint.seeded)
        var outcomes: [Outcome] = []
        await withTaskGroup(of: Outcome.self) { group in
            var next = 0
            func start() {
                guard next < points.count else { return }
                let point = points[next]
                next += 1
                group.addTask { Self.run(point, reference) }
            }
            start()
            start()
            for await outcome in group {
                outcomes.append(outcome)
                start()
            }
        }
        outcomes.sort { $0.point.index < $1.point.index }

        for outcome in outcomes {
            #expect(
                outcome.killedByTest,
                "\(outcome.point): the stream ended on its own before the kill: \(outcome.childStatus)")
            #expect(outcome.problems.isEmpty, "\(outcome.point): \(outcome.problems.joined(separator: "; "))")
        }
        let survived = outcomes.filter { $0.problems.isEmpty }.count
        let killed = outcomes.filter(\.killedByTest).count
        let detail = outcomes.map { "#\($0.point.index): \($0.printedEvents) printed ≤ \($0.committed) committed" }
        print(
            "crash points survived: \(survived) of \(outcomes.count) (killed by SIGKILL: \(killed)) — \(detail.joined(separator: ", "))"
        )
        #expect(survived == Self.crashPoints)
    }

    /// Streams the workload into a `--follow` ingest, kills it at the point, checks the store, re-feeds everything.
    static func run(_ point: CrashPoint, _ reference: Reference) -> Outcome {
        var outcome = Outcome(point: point)
        do {
            try crashAndRecover(point, reference, &outcome)
        } catch {
            outcome.problems.append("\(error)")
        }
        return outcome
    }

    static func crashAndRecover(_ point: CrashPoint, _ reference: Reference, _ outcome: inout Outcome) throws {
        let directory = TemporaryDirectory("stream-crash-\(point.index)")
        let storePath = directory.child("store")
        let errPath = directory.child("stream.err")

        // 1. Stream, kill.
        let feed = try LiveFeed(point.feed, path: directory.child(point.feed == .fifo ? "in.fifo" : "in.jsonl"))
        // No crash backtracer in the child: one that dies on its own while the test kills it would leave the
        // backtracer holding the output pipe open (for its 30 s timeout).
        let child = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "ingest", feed.argument, "--store", storePath, "--follow", "--batch-size", "50", "--flush-ms", "5",
                "--emit", "events",
                // Even points checkpoint every few batches, so kills land in and around checkpoints too;
                // odd ones at the defaults (a checkpoint a second), so most of their log is replayed at open.
                "--checkpoint-ops", point.index % 2 == 0 ? "120" : "100000",
            ],
            environment: ["SWIFT_BACKTRACE": "enable=no"], stdin: feed.stdin, stderr: errPath)
        // Feed the whole workload (paced by the pipe, or appended as fast as it goes) and kill `delayMs` after
        // the child printed the event of line `point.line` or a later one: mid-stream, at a seeded place.
        let workload = reference.workload
        var offset = 0
        var unread = 0  // bytes written since the child's output was last read
        var killAt = Double.infinity
        let giveUp = now() + 120
        while now() < killAt, now() < giveUp, !child.reachedEnd {
            var wrote = 0
            if offset < workload.count {
                wrote = try feed.write(workload[offset..<min(offset + point.chunk, workload.count)])
                offset += wrote
                unread += wrote
            }
            if wrote > 0 && unread < 1 << 14 { continue }
            unread = 0
            // Read what is out (a child blocked on a full stdout stops reading its input), watching for the line.
            let wait = killAt == .infinity ? (offset < workload.count ? 0.0005 : 0.01) : max(killAt - now(), 0.0005)
            while let record = try child.readLine(timeout: min(wait, 0.01)) {
                if killAt == .infinity, CrashSafetyTests.isEvent(record),
                    let line = (try? JSONParser.parse(record))?["line"]?.intValue, line >= point.line
                {
                    killAt = now() + Double(point.delayMs) / 1000
                }
                if now() >= killAt { break }
            }
        }
        child.kill(SIGKILL)
        let status = child.wait()
        _ = try? child.readToEnd(timeout: 5)  // what it wrote before dying is in the pipe already
        feed.close()
        outcome.killedByTest = status == .signaled(SIGKILL)
        outcome.childStatus = "\(status): \(CrashSafetyTests.readText(errPath).prefix(600))"

        let printed = child.lines.compactMap { try? JSONParser.parse($0) }
        if printed.count != child.lines.count { outcome.problems.append("a complete output line is not JSON") }
        let events = printed.filter { $0["kind"]?.stringValue == "event" }
        let printedSeqs = events.compactMap { $0["seq"]?.intValue }.map { UInt64($0) }
        outcome.printedEvents = printedSeqs.count
        if printedSeqs != (0..<printedSeqs.count).map({ UInt64($0) + 1 }) {
            outcome.problems.append("printed events are not seqs 1...\(printedSeqs.count) in order")
        }

        // 2. Reopen: sound, and every printed event is committed, as printed.
        do {
            let store = try Store(path: storePath)
            defer { store.close() }
            if let refusal = store.refusal { outcome.problems.append("reopened store refuses to write: \(refusal)") }
            let audit = try store.audit()
            if !audit.ok { outcome.problems.append("audit after the kill: \(audit)") }
            let committed = try store.head().seq
            outcome.committed = committed
            if let seq = printedSeqs.first(where: { $0 > committed }) {
                outcome.problems.append(
                    "printed seq \(seq) is not committed (checkpoint \(committed)): printed output was lost")
            }
            if committed > reference.seq {
                outcome.problems.append("committed \(committed) > clean run's \(reference.seq)")
            }
            let committedOpIds = try CrashSafetyTests.opIds(of: store)
            if committedOpIds != Array(reference.logOpIds.prefix(Int(committed))) {
                outcome.problems.append("the committed log is not a prefix of the clean run's")
            }
            for event in events {
                guard let line = event["line"]?.intValue, let seq = event["seq"]?.intValue,
                    line >= 1, line <= reference.lineOpIds.count, let opId = reference.lineOpIds[Int(line) - 1]
                else {
                    outcome.problems.append("printed event without a workload line: \(event.jsonString)")
                    continue
                }
                if try store.seqOf(opId: Id(opId)) != UInt64(seq) {
                    outcome.problems.append("printed line \(line) as seq \(seq), but \(opId) is stored elsewhere")
                }
            }
        }

        // 3. Feed the whole input again with a plain ingest: committed ops answer duplicate, the rest follows.
        let file = directory.child("all.jsonl")
        try CrashSafetyTests.writeFile(file, reference.workload)
        let rerun = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", storePath, "--emit", "events"],
            stderr: directory.child("rerun.err"), timeout: 300)
        if rerun.status != .exited(0) {
            outcome.problems.append(
                "re-feed \(rerun.status): \(CrashSafetyTests.readText(directory.child("rerun.err")).prefix(600))")
        }
        let records = rerun.lines.compactMap { try? JSONParser.parse($0) }
        let duplicates = records.filter { $0["kind"]?.stringValue == "duplicate" }.count
        if duplicates != Int(outcome.committed) {
            outcome.problems.append("re-feed answered \(duplicates) duplicates for \(outcome.committed) committed ops")
        }
        let newSeqs = records.filter { $0["kind"]?.stringValue == "event" }.compactMap { $0["seq"]?.intValue }
        let expectedSeqs = outcome.committed < reference.seq ? Array(outcome.committed + 1...reference.seq) : []
        if newSeqs.map({ UInt64($0) }) != expectedSeqs {
            outcome.problems.append("re-feed events are not seqs \(outcome.committed + 1)...\(reference.seq)")
        }

        // 4. The end state is the clean run's, byte for byte.
        let store = try Store(path: storePath)
        defer { store.close() }
        if let problem = try store.verifyChain() { outcome.problems.append("chain after re-feed: \(problem)") }
        let seq = try store.head().seq
        if seq != reference.seq { outcome.problems.append("final checkpoint \(seq), clean run \(reference.seq)") }
        if try CrashSafetyTests.opIds(of: store) != reference.logOpIds {
            outcome.problems.append("final log's opIds differ from the clean run's (an op applied twice or lost)")
        }
        let tables = try CrashSafetyTests.storedTables(store)
        for table in ProjectionTable.allCases where tables[table] != reference.tables[table] {
            outcome.problems.append("final \(table.rawValue) differs from the clean run's")
        }
    }

    // MARK: SIGTERM

    /// SIGHUP (a closed terminal or ssh session) is a clean stop as SIGTERM and SIGINT are.
    @Test(arguments: [SIGTERM, SIGHUP]) func sigtermMidFeedCommitsWhatItReadAndExitsZero(signal: Int32) throws {
        let reference = try Self.reference.get()
        let directory = TemporaryDirectory("stream-term")
        let storePath = directory.child("store")
        let errPath = directory.child("stream.err")
        let feed = try LiveFeed(.fifo, path: directory.child("in.fifo"))
        let child = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "ingest", "-", "--store", storePath, "--follow", "--batch-size", "50", "--flush-ms", "5", "--emit",
                "events",
            ],
            stdin: feed.stdin, stderr: errPath)

        // Feed in 16 KiB writes until 100 events are out (the stop handler is installed by then), then stop
        // writing with most of the workload unsent and send SIGTERM while the child holds read lines. (100, not
        // 300: in a loaded full test run the child once read the whole 471 KB workload before it had printed
        // 300 events, so the SIGTERM came after the feed.)
        var offset = 0
        while !child.reachedEnd, offset < reference.workload.count, Self.events(child.lines) < 100 {
            offset = try feed.pump(
                reference.workload, from: offset, to: min(offset + (1 << 14), reference.workload.count),
                chunk: 1 << 14, draining: child)
        }
        #expect(offset < reference.workload.count, "the SIGTERM should come mid-feed")
        child.kill(signal)
        let finished = Self.readToEnd(child, timeout: 20)
        if !finished { child.kill(SIGKILL) }
        let status = child.wait()
        // What the child took out of the FIFO is what it read: the rest is still in the pipe.
        let consumed = offset - (try feed.readBack())
        feed.close()
        let stderr = CrashSafetyTests.readText(errPath)
        #expect(finished, "the stream did not end within 20 s of SIGTERM")
        #expect(status == .exited(0), "SIGTERM ends the stream cleanly: \(status): \(stderr.prefix(600))")

        let printed = child.lines.compactMap { try? JSONParser.parse($0) }
        let seqs = printed.filter { $0["kind"]?.stringValue == "event" }.compactMap { $0["seq"]?.intValue }
        let store = try Store(path: storePath)
        defer { store.close() }
        let audit = try store.audit()
        #expect(audit.ok, "\(audit)")
        let committed = try store.head().seq
        #expect(seqs.map { UInt64($0) } == Array(1..<committed + 1), "printed events are exactly the committed seqs")
        #expect(committed >= 100)
        #expect(stderr.contains("accepted \(committed),"), "the summary counts what was committed: \(stderr)")
        #expect(try CrashSafetyTests.opIds(of: store) == Array(reference.logOpIds.prefix(Int(committed))))

        // Every complete line it took from the pipe was answered (committed or rejected), not dropped: a
        // producer on a pipe cannot send it again.
        let linesRead = reference.workload[..<consumed].count(where: { $0 == 0x0A })
        let answered = printed.compactMap { $0["line"]?.intValue }.max() ?? 0
        #expect(
            Int(answered) == linesRead,
            "the child read \(linesRead) complete lines (\(consumed) bytes) from the FIFO but answered \(answered)")
    }

    /// A writer that stalls in the middle of an over-long line must not keep the stream from stopping.
    @Test func sigtermWhileAnOverlongLineIsHalfReceived() throws {
        let directory = TemporaryDirectory("stream-term-long")
        let storePath = directory.child("store")
        let errPath = directory.child("stream.err")
        let feed = try LiveFeed(.fifo, path: directory.child("in.fifo"))
        let child = try ChildProcess(
            TestSupport.teamlogExecutable,
            ["ingest", "-", "--store", storePath, "--follow", "--flush-ms", "5", "--emit", "events"],
            stdin: feed.stdin, stderr: errPath)
        let first =
            Array(#"{"op":"team.create","actor":"o","team":"t","ts":1767225600000,"opId":"long-1"}"#.utf8) + [0x0A]
        _ = try feed.pump(first, from: 0, to: first.count, chunk: first.count, draining: child)
        #expect(
            try Self.waitForOutput(child, containing: #""kind":"event""#, timeout: 20),
            "the first op is committed and printed")

        // 1.5 MiB of one line, no newline: over the 1 MiB limit, and the writer stalls there.
        let long =
            Array(#"{"op":"team.update","actor":"o","team":"t","fields":{"intro":""#.utf8)
            + [UInt8](repeating: UInt8(ascii: "x"), count: 3 << 19)
        _ = try feed.pump(long, from: 0, to: long.count, chunk: 1 << 16, draining: child)
        let settle = Self.now() + 0.3
        while Self.now() < settle { _ = try child.readLine(timeout: 0.05) }
        child.kill(SIGTERM)
        let finished = Self.readToEnd(child, timeout: 5)
        if !finished { child.kill(SIGKILL) }
        let status = child.wait()
        feed.close()
        #expect(finished, "ingest --follow ignored SIGTERM for 5 s while a line over 1 MiB was half received")
        #expect(status == .exited(0), "\(status): \(CrashSafetyTests.readText(errPath).prefix(600))")
        let store = try Store(path: storePath)
        defer { store.close() }
        #expect(try store.head().seq == 1)
        #expect(try store.audit().ok)
    }

    // MARK: Helpers

    /// Whether the child printed a line containing `text`, already (the feed's draining may have read it) or
    /// within `timeout` seconds.
    static func waitForOutput(_ child: ChildProcess, containing text: String, timeout: Double) throws -> Bool {
        try child.lines.contains { $0.contains(text) } || child.waitForOutput(containing: text, timeout: timeout)
    }

    static func events(_ lines: [String]) -> Int { lines.count(where: CrashSafetyTests.isEvent) }

    /// Reads the child's output to its end; false when it did not end within `timeout` seconds.
    static func readToEnd(_ child: ChildProcess, timeout: Double) -> Bool {
        (try? child.readToEnd(timeout: timeout)) != nil
    }

    static func now() -> Double { CrashSafetyTests.now() }
}

/// The input side of a streaming ingest: a FIFO the child reads as its stdin, or a regular file it follows
/// (`ingest FILE --follow`) while the test appends to it.
final class LiveFeed {
    enum Kind: String, Sendable {
        case fifo, growingFile
    }

    let kind: Kind
    let path: String
    private var fd: Int32

    init(_ kind: Kind, path: String) throws {
        self.kind = kind
        self.path = path
        switch kind {
        case .fifo:
            guard mkfifo(path, 0o600) == 0 else {
                throw ChildProcessError("mkfifo \(path): \(String(cString: strerror(errno)))")
            }
            // Read-write: the open does not wait for a reader, the child's open for reading finds a writer at
            // once, and a write never raises SIGPIPE (this end is a reader too). Non-blocking: the test drains
            // the child's output between writes instead of stalling on a full pipe.
            fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        case .growingFile:
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw ChildProcessError("open \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { close() }

    /// The `ingest` input argument.
    var argument: String { kind == .fifo ? "-" : path }
    /// The child's stdin (`nil`: /dev/null).
    var stdin: String? { kind == .fifo ? path : nil }

    /// Writes what fits without blocking; returns the bytes written.
    func write(_ bytes: ArraySlice<UInt8>) throws -> Int {
        guard !bytes.isEmpty else { return 0 }
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        if n >= 0 { return n }
        if errno == EAGAIN || errno == EINTR { return 0 }
        throw ChildProcessError("write \(path): \(String(cString: strerror(errno)))")
    }

    /// Writes `data[from..<to]` in `chunk`-byte writes, reading the child's output in between (a child blocked
    /// on a full stdout pipe stops reading its input). Stops early when the child's output ended; returns the
    /// offset reached. The child's output lines must be short (`--emit events`): `ChildProcess.readLine` scans
    /// a pending partial line again on every call, and with these millisecond timeouts a line of megabytes
    /// would never be read to its end.
    func pump(_ data: [UInt8], from: Int, to: Int, chunk: Int, draining child: ChildProcess) throws -> Int {
        var offset = from
        var sinceDrain = 0
        while offset < to, !child.reachedEnd {
            let n = try write(data[offset..<min(to, offset + chunk)])
            offset += n
            sinceDrain += n
            // Drain when the pipe is full, every 16 KiB, and at the end (a 1 ms wait each time).
            if n == 0 || sinceDrain >= 1 << 14 || offset == to {
                while try child.readLine(timeout: n == 0 ? 0.002 : 0.0005) != nil {}
                sinceDrain = 0
            }
        }
        return offset
    }

    /// Reads back and discards what is still in the FIFO (what its reader did not take); returns the count.
    func readBack() throws -> Int {
        precondition(kind == .fifo, "only a FIFO can be read back")
        var total = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n > 0 {
                total += n
            } else if n < 0 && errno == EINTR {
                continue
            } else if n == 0 || errno == EAGAIN {
                return total
            } else {
                throw ChildProcessError("read \(path): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Closes the writing end: the FIFO's reader sees the end of its input.
    func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }
}

/// SplitMix64, for seeded test parameters.
struct SeededRandom {
    private var state: UInt64

    init(_ seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in `0..<bound`.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
