import TeamLog
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The progress line of `ingest`, `audit`, `repair`, `log` and a query's `--at` replay as a child process
/// writes it to a pipe:
/// forced on with `TEAMLOG_PROGRESS=always` (every frame, `\r` + text + `ESC[K`, ending with the line
/// erased), and absent — stderr not a terminal — without it.
@Suite struct ProgressTests {
    static let exe = TestSupport.teamlogExecutable
    static let events = 2_000
    /// Every update draws, so a small input shows its intermediate positions.
    static let always = ["TEAMLOG_PROGRESS": "always", "TEAMLOG_PROGRESS_INTERVAL_MS": "0"]

    /// Runs `teamlog args`; returns the exit status, stdout lines and stderr.
    func run(_ args: [String], environment: [String: String], in dir: TemporaryDirectory) throws
        -> (ChildProcess.Status, [String], String)
    {
        let err = dir.child("stderr")
        // Scratch stores under the test's own directory: what killed runs of other tests left under /tmp is
        // swept with a line on stderr by the first replay that finds it (`LeftoverTests`), not here.
        let tmp = dir.child("tmp")
        mkdir(tmp, 0o755)
        let child = try ChildProcess(
            Self.exe, args, environment: environment.merging(["TMPDIR": tmp]) { given, _ in given }, stderr: err)
        let lines = try child.readToEnd(timeout: 60)
        return (child.wait(), lines, CrashSafetyTests.readText(err))
    }

    /// The frames drawn (text between `\r` and `ESC[K`), and what follows the erasing `\r ESC[K` at the end.
    func frames(_ stderr: String, sourceLocation: SourceLocation = #_sourceLocation) -> (frames: [String], rest: String)
    {
        var pieces = stderr.split(separator: "\r", omittingEmptySubsequences: false).map(String.init)
        #expect(pieces.first == "", "stderr starts with a frame", sourceLocation: sourceLocation)
        pieces.removeFirst()
        let last = pieces.removeLast()
        #expect(last.hasPrefix("\u{1B}[K"), "the line is erased at the end", sourceLocation: sourceLocation)
        for piece in pieces {
            #expect(piece.hasSuffix("\u{1B}[K") && piece.count > 3, "a frame: \(piece)", sourceLocation: sourceLocation)
        }
        return (pieces.map { String($0.dropLast(3)) }, String(last.dropFirst(3)))
    }

    /// The leading `position` of frames `label POSITION/TOTAL …`, checking they never go backwards.
    func positions(_ frames: [String], _ label: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        let positions = frames.map { frame -> String in
            #expect(frame.hasPrefix(label + " "), "\(frame)", sourceLocation: sourceLocation)
            return String(frame.dropFirst(label.count + 1).prefix { $0 != "/" })
        }
        let numbers = positions.map { Double($0) ?? -1 }
        #expect(
            numbers.allSatisfy { $0 >= 0 } && numbers == numbers.sorted(), "\(positions)",
            sourceLocation: sourceLocation)
        return positions
    }

    /// Bytes in KiB with one decimal, rounded, as the progress line writes a size between 1 KiB and 1 MiB.
    static func kib(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + 512) >> 10
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// A store of `events` team creations, from a file of that many lines; returns the file's size.
    func makeInput(_ dir: TemporaryDirectory) throws -> Int {
        let text =
            (1...Self.events).map {
                #"{"op":"team.create","actor":"owner","team":"t\#($0)","name":"Team \#($0)","ts":\#(1000 + $0)}"#
            }.joined(separator: "\n") + "\n"
        try CrashSafetyTests.writeFile(dir.child("ops.jsonl"), Array(text.utf8))
        return text.utf8.count
    }

    @Test func everyLongCommandDrawsPositionTotalRateAndEstimate() throws {
        let dir = TemporaryDirectory("progress")
        let size = try makeInput(dir)
        let store = dir.child("store")
        let total = Self.kib(size)

        // ingest FILE: bytes of the file, a frame per chunk of 512 lines, then the summary as before.
        let (status, records, stderr) = try run(
            ["ingest", dir.child("ops.jsonl"), "--store", store, "--emit", "events"], environment: Self.always,
            in: dir)
        #expect(status == .exited(0))
        #expect(records.count == Self.events)
        let ingest = frames(stderr)
        #expect(ingest.frames.first == "ingest 0.0/\(total) KiB (0%)")
        let last = try #require(ingest.frames.last)
        #expect(last.hasPrefix("ingest \(total)/\(total) KiB (100%), ") && last.hasSuffix(" left"), "\(last)")
        #expect(last.contains("/s, ~"), "a rate and an estimate: \(last)")
        #expect(Set(positions(ingest.frames, "ingest")).count >= 4, "intermediate positions (4 chunks)")
        #expect(ingest.rest.hasPrefix("accepted \(Self.events), rejected 0, duplicates 0, "))
        #expect(ingest.rest.split(separator: "\n").count == 1, "only the summary after the progress")

        // audit: events of the log (the store's callback comes every 65,536; here the first and last frames).
        let (auditStatus, auditOut, auditErr) = try run(["audit", "--store", store], environment: Self.always, in: dir)
        #expect(auditStatus == .exited(0))
        #expect(auditOut.last == "audit OK")
        let audit = frames(auditErr).frames
        #expect(audit.first == "audit 0/\(Self.events) events (0%)")
        #expect(audit.last?.hasPrefix("audit \(Self.events)/\(Self.events) events (100%), ") == true, "\(audit)")
        #expect(audit.last?.contains(" events/s, ~") == true && audit.last?.hasSuffix(" left") == true)
        #expect(frames(auditErr).rest.isEmpty)

        // repair: the replay's events.
        let (repairStatus, repairOut, repairErr) = try run(
            ["repair", "--store", store], environment: Self.always, in: dir)
        #expect(repairStatus == .exited(0))
        #expect(repairOut.first == "chain OK")
        let repair = frames(repairErr).frames
        #expect(repair.first == "repair 0/\(Self.events) events (0%)")
        #expect(repair.last?.hasPrefix("repair \(Self.events)/\(Self.events) events (100%), ") == true, "\(repair)")

        // A query --at SEQ: the replay's events towards SEQ; stdout is the answer alone.
        let (atStatus, atOut, atErr) = try run(
            ["team", "t1", "--json", "--at", "1500", "--store", store], environment: Self.always, in: dir)
        #expect(atStatus == .exited(0))
        #expect(atOut.count == 1 && atOut.first?.hasPrefix(#"{"team":"t1","#) == true, "\(atOut)")
        let at = frames(atErr).frames
        #expect(at.first == "replay 0/1500 events (0%)")
        #expect(at.last?.hasPrefix("replay 1500/1500 events (100%), ") == true, "\(at)")
        #expect(frames(atErr).rest.isEmpty)

        // log: a frame per event written (the interval is 0), by seq; stdout is the export alone.
        let (logStatus, logOut, logErr) = try run(["log", "--store", store], environment: Self.always, in: dir)
        #expect(logStatus == .exited(0))
        #expect(logOut.count == Self.events)
        let log = frames(logErr).frames
        #expect(positions(log, "log") == ["0"] + (1...Self.events).map(String.init) + [String(Self.events)])
        #expect(log.first == "log 0/\(Self.events) events (0%)")
        #expect(log.contains { $0.hasPrefix("log 1000/\(Self.events) events (50%), ") })
        #expect(log.last?.hasPrefix("log \(Self.events)/\(Self.events) events (100%), ") == true)

        // log --from/--to: the range is the total, percent counts from its start.
        let (_, rangeOut, rangeErr) = try run(
            ["log", "--from", "1001", "--to", "1500", "--store", store], environment: Self.always, in: dir)
        #expect(rangeOut.count == 500)
        let range = frames(rangeErr).frames
        #expect(range.first == "log 1000/1500 events (0%)")
        #expect(range.contains { $0.hasPrefix("log 1250/1500 events (50%), ") })
        #expect(range.last?.hasPrefix("log 1500/1500 events (100%), ") == true)

        // compact: bytes of the copy over the store's live bytes; the last frame is the compacted size, and
        // stdout is the report alone.
        let (compactStatus, compactOut, compactErr) = try run(
            ["compact", "--store", store, "--json"], environment: Self.always, in: dir)
        #expect(compactStatus == .exited(0), "\(compactErr)")
        let report = try JSONParser.parse(try #require(compactOut.last))
        let after = Self.kib(Int(try #require(report["bytesAfter"]?.intValue)))
        let compact = frames(compactErr).frames
        #expect(compact.first?.hasPrefix("compact 0.0/") == true, "\(compact)")
        #expect(compact.last?.hasPrefix("compact \(after)/") == true, "\(compact)")
        #expect(compactOut.count == 1)
    }

    /// A store of 3,000 team creations committed and never checkpointed — no close, as if the process died
    /// — so its next open replays its whole log; returns the log's length.
    static func storeWithATail(_ path: String) throws -> Int {
        let writer = try Store(path: path, options: .checkpointing(every: 1_000_000))
        for i in 1...3_000 {
            let line = #"{"op":"team.create","actor":"owner","team":"t\#(i)","name":"T","ts":\#(1000 + i)}"#
            guard case .success(let op) = OpParser.parse(line: line) else { continue }
            _ = try writer.submit(op, now: 1_000)
        }
        try writer.commit()
        return Int(try writer.head().seq)
    }

    /// An open that replays the log after the projections' checkpoint (a crash left it) draws a `recover`
    /// line — events of the tail — before the command's own; without `TEAMLOG_PROGRESS`, nothing.
    @Test func anOpenAfterACrashDrawsItsReplay() throws {
        let dir = TemporaryDirectory("progress-recover")
        let one = dir.child("one.jsonl")
        try CrashSafetyTests.writeFile(
            one, Array(#"{"op":"team.create","actor":"owner","team":"x","name":"X","ts":9000}"#.utf8) + [0x0A])
        let store = dir.child("store")
        let n = try Self.storeWithATail(store)
        #expect(n == 3_000)

        let (status, _, stderr) = try run(
            ["ingest", one, "--store", store, "--emit", "none"], environment: Self.always, in: dir)
        #expect(status == .exited(0))
        let recover = stderr.split(separator: "\r").filter { $0.hasPrefix("recover ") }.map { String($0.dropLast(3)) }
        #expect(recover.first == "recover 0/\(n) events (0%)")
        #expect(recover.last?.hasPrefix("recover \(n)/\(n) events (100%)") == true, "\(recover.suffix(1))")
        #expect(Set(positions(recover, "recover")).count >= 4, "0, every 1,024 events, the end: \(recover)")
        #expect(stderr.contains("\r\u{1B}[K\ringest "), "the recover line is erased before ingest's own")
        #expect(stderr.split(separator: "\r").last?.contains("accepted 1, rejected 0, duplicates 0, ") == true)

        let quietStore = dir.child("quiet")
        #expect(try Self.storeWithATail(quietStore) == n)
        let (quietStatus, _, quiet) = try run(
            ["ingest", one, "--store", quietStore, "--emit", "none"], environment: [:], in: dir)
        #expect(quietStatus == .exited(0))
        #expect(quiet.hasPrefix("accepted 1, rejected 0, duplicates 0, ") && !quiet.contains("\r"), "\(quiet)")
    }

    /// Through a pipe (stderr is a file here, not a terminal) and without `TEAMLOG_PROGRESS`, nothing.
    @Test func silentWhenStderrIsNotATerminal() throws {
        let dir = TemporaryDirectory("progress-off")
        _ = try makeInput(dir)
        let store = dir.child("store")
        let (status, _, stderr) = try run(
            ["ingest", dir.child("ops.jsonl"), "--store", store, "--emit", "none"], environment: [:], in: dir)
        #expect(status == .exited(0))
        #expect(stderr.hasPrefix("accepted \(Self.events), rejected 0, duplicates 0, "))
        #expect(stderr.split(separator: "\n").count == 1 && !stderr.contains("\r") && !stderr.contains("\u{1B}"))
        for command in [
            ["audit"], ["repair"], ["log"], ["log", "--from", "5", "--to", "9"], ["compact"],
            ["team", "t1", "--at", "1500"],
        ] {
            let (status, out, stderr) = try run(command + ["--store", store], environment: [:], in: dir)
            #expect(status == .exited(0), "\(command)")
            #expect(!out.isEmpty)
            #expect(stderr.isEmpty, "\(command): \(stderr)")
        }
        // `never`: nothing either.
        let (_, _, never) = try run(
            ["audit", "--store", store], environment: ["TEAMLOG_PROGRESS": "never"], in: dir)
        #expect(never.isEmpty)
    }

    /// `ingest -` from a regular file has its size as the total; `--follow` shows no progress.
    @Test func standardInputAndFollow() throws {
        let dir = TemporaryDirectory("progress-stdin")
        let size = try makeInput(dir)
        let err = dir.child("stderr")
        let child = try ChildProcess(
            Self.exe, ["ingest", "-", "--store", dir.child("a"), "--emit", "none"], environment: Self.always,
            stdin: dir.child("ops.jsonl"), stderr: err)
        try child.readToEnd(timeout: 60)
        #expect(child.wait() == .exited(0))
        let total = Self.kib(size)
        #expect(
            frames(CrashSafetyTests.readText(err)).frames.last?.hasPrefix("ingest \(total)/\(total) KiB (100%)") == true
        )

        // Following a regular file waits for it to grow: stop it once every line was answered.
        let follower = try ChildProcess(
            Self.exe, ["ingest", "-", "--follow", "--store", dir.child("b"), "--emit", "events"],
            environment: Self.always, stdin: dir.child("ops.jsonl"), stderr: err)
        #expect(try follower.waitForOutput(containing: "\"seq\":\(Self.events),", timeout: 60))
        follower.kill(SIGTERM)
        try follower.readToEnd(timeout: 60)
        #expect(follower.wait() == .exited(0))
        let followErr = CrashSafetyTests.readText(err)
        #expect(followErr.hasPrefix("accepted \(Self.events), ") && !followErr.contains("\r"), "\(followErr)")
    }
}
