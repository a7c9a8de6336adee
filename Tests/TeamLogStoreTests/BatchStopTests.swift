import TeamLog
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A batch `ingest` (not `--follow`) stopped by SIGINT, SIGTERM or SIGHUP: every line it had read is
/// answered, committed and printed, the summary and the line to resume from are said, and the process ends
/// by the signal (a script must not go on as if the whole input were in). Before, the signal ended it as a
/// crash would: no summary, no last checkpoint, and no word of how far it got.
@Suite struct BatchStopTests {
    static let lines = TeamWorkloadProbe.lines(count: 400, seed: 77)

    /// The input named as a file (a FIFO, so the test decides how much there is) or given on stdin.
    @Test(arguments: [(SIGINT, true), (SIGTERM, false), (SIGHUP, true)])
    func aStoppedBatchIngestCommitsWhatItReadAndSaysWhereToResume(signal: Int32, named: Bool) throws {
        let directory = TemporaryDirectory("batch-stop")
        let storePath = directory.child("store")
        let errPath = directory.child("ingest.err")
        let fifo = directory.child("in.fifo")
        let feed = try LiveFeed(.fifo, path: fifo)
        let child = try ChildProcess(
            TestSupport.teamlogExecutable,
            ["ingest", named ? fifo : "-", "--store", storePath, "--batch-size", "50", "--emit", "events"],
            stdin: named ? nil : fifo, stderr: errPath)

        // 120 lines, then a quiet pipe: two batches of 50 commit; the first's records are out once the second
        // is written (batch mode prints a batch's records when the next one starts committing).
        let first = Array(Self.lines[..<120].map { $0 + "\n" }.joined().utf8)
        _ = try feed.pump(first, from: 0, to: first.count, chunk: 1 << 14, draining: child)
        #expect(
            try child.lines.contains { $0.contains(#""line":50,"#) }
                || child.waitForOutput(containing: #""line":50,"#, timeout: 60),
            "the first batch is committed and printed")
        child.kill(signal)
        let finished = (try? child.readToEnd(timeout: 30)) != nil
        if !finished { child.kill(SIGKILL) }
        let status = child.wait()
        feed.close()
        let stderr = readTextFile(errPath)
        #expect(finished, "the ingest did not end within 30 s of the signal")
        #expect(status == .signaled(signal), "it ends by the signal: \(status): \(stderr.prefix(600))")

        // Every line it read (all 120: the pipe held no more) is answered and printed, once, in order.
        let answered = child.lines.compactMap { try? JSONParser.parse($0) }.compactMap { $0["line"]?.intValue }
        #expect(answered.map(Int.init) == Array(1...120))
        let name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "SIGHUP"
        #expect(stderr.contains("teamlog: \(name): stopping"), "\(stderr)")
        // The workload's own rejections (a member added twice, …) are answered too.
        let events = child.lines.count(where: CrashSafetyTests.isEvent)
        #expect(stderr.contains("accepted \(events), rejected \(120 - events), duplicates 0"), "the summary: \(stderr)")
        #expect(stderr.contains("stopped after line 120, every line through it answered and committed"), "\(stderr)")
        if named {
            // A FIFO cannot be read from a position (a regular file says `teamlog ingest FILE … --resume`).
            #expect(stderr.contains("the rest of \(fifo) (from its line 121) was not read"), "\(stderr)")
        } else {
            #expect(stderr.contains("the rest of standard input (from its line 121) was not read"), "\(stderr)")
        }

        // Closed as a finished run is: its last checkpoint is at the head, and the audit is clean.
        do {
            let store = try Store(path: storePath)
            defer { store.close() }
            #expect(try store.head().seq == UInt64(events))
            #expect(store.checkpoint.seq == UInt64(events), "the stopped run wrote its last checkpoint")
            #expect(try store.audit().ok)
        }

        // Resumed from line 121, the log is the one a single run of all 400 lines makes.
        let rest = directory.child("rest.jsonl")
        try CheckpointTests.writeLines(rest, Array(Self.lines[120...]))
        let resumed = try ChildProcess(
            TestSupport.teamlogExecutable, ["ingest", rest, "--store", storePath, "--emit", "none"])
        _ = try resumed.readToEnd(timeout: 120)
        #expect(resumed.wait() == .exited(0))
        let whole = directory.child("whole.jsonl")
        try CheckpointTests.writeLines(whole, Self.lines)
        let clean = try ChildProcess(
            TestSupport.teamlogExecutable,
            ["ingest", whole, "--store", directory.child("clean"), "--emit", "none"])
        _ = try clean.readToEnd(timeout: 120)
        #expect(clean.wait() == .exited(0))
        let store = try Store(path: storePath)
        defer { store.close() }
        let cleanStore = try Store(path: directory.child("clean"))
        defer { cleanStore.close() }
        #expect(try store.head().seq == cleanStore.head().seq)
        #expect(store.checkpoint.hash == cleanStore.checkpoint.hash, "the same log, to the hash chain's head")
        #expect(try CrashSafetyTests.opIds(of: store) == CrashSafetyTests.opIds(of: cleanStore))
    }
}
