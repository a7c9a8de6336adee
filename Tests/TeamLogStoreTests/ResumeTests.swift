import TeamLog
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `teamlog ingest FILE --resume`: every commit records, in the log's own transaction, the input position
/// its lines reach, so an input *without opIds* — which feeding again would apply twice — resumes exactly
/// after a kill -9 at any point, a signal, or the end of a file that has grown since; and a file that is not
/// the input the store read is refused before anything is read.
@Suite struct ResumeTests {
    /// The seeded team workload with every opId taken out: nothing but the recorded position can tell
    /// which lines the store has.
    static let lines: [String] = TeamWorkloadProbe.lines(count: 3_000, seed: 91).map { line in
        guard let start = line.range(of: #","opId":""#) else { return line }
        let rest = line[start.upperBound...]
        guard let close = rest.firstIndex(of: "\"") else { return line }
        return String(line[..<start.lowerBound] + line[line.index(after: close)...])
    }

    /// The chain head and seq of one clean run of `lines`.
    static let clean: Result<(seq: UInt64, hash: [UInt8]), any Error> = Result {
        let directory = TemporaryDirectory("resume-clean")
        let input = directory.child("in.jsonl")
        try CheckpointTests.writeLines(input, Self.lines)
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", directory.child("store"), "--emit", "none"],
            timeout: 300)
        guard run.status == .exited(0) else { throw ChildProcessError("the clean run: \(run.status)") }
        let store = try Store(path: directory.child("store"))
        defer { store.close() }
        return (try store.head().seq, store.checkpoint.hash)
    }

    static func ingest(_ arguments: [String], err: String) throws -> ChildProcess {
        try ChildProcess(TestSupport.teamlogExecutable, ["ingest"] + arguments + ["--emit", "events"], stderr: err)
    }

    /// Killed with SIGKILL at seeded moments (after a seeded number of printed events), then resumed —
    /// sometimes killed again while resuming — the store ends with the log one clean run makes, to the hash
    /// chain's head, and every line's event printed once over all the runs.
    @Test func anInputWithoutOpIdsResumesExactlyAfterKills() throws {
        let clean = try Self.clean.get()
        #expect(!Self.lines.contains { $0.contains("opId") })
        var random = SeededRandom(2026_11_29)
        for round in 0..<4 {
            let directory = TemporaryDirectory("resume-kill")
            let input = directory.child("in.jsonl")
            let storePath = directory.child("store")
            try CheckpointTests.writeLines(input, Self.lines)
            var printed: [Int: Int] = [:]  // line → how many times its event was printed
            var runs = 0
            while true {
                runs += 1
                let resuming = runs > 1
                let child = try Self.ingest(
                    [input, "--store", storePath, "--batch-size", "40"] + (resuming ? ["--resume"] : []),
                    err: directory.child("err\(runs)"))
                // Kill after a seeded number of events (at most twice per round), or let it finish.
                let killAfter = runs <= 2 ? 50 + random.below(1_200) : Int.max
                var seen = 0
                var killed = false
                while let line = try child.readLine(timeout: 120) {
                    if let record = try? JSONParser.parse(line), record["kind"]?.stringValue == "event",
                        let number = record["line"]?.intValue
                    {
                        printed[Int(number), default: 0] += 1
                        seen += 1
                    }
                    if seen >= killAfter {
                        child.kill(SIGKILL)
                        killed = true
                        break
                    }
                }
                let status = child.wait()
                if !killed {
                    #expect(status == .exited(0), "round \(round), run \(runs): \(readTextFile(directory.child("err\(runs)")))")
                    break
                }
                // What it printed after its last read is in the pipe still: the store has it, and the next
                // run does not print it again.
                while let line = try? child.readLine(timeout: 0.2) {
                    if let record = try? JSONParser.parse(line), record["kind"]?.stringValue == "event",
                        let number = record["line"]?.intValue
                    {
                        printed[Int(number), default: 0] += 1
                    }
                }
                if resuming {
                    #expect(readTextFile(directory.child("err\(runs)")).contains("teamlog: resuming \(input) after line"))
                }
            }
            let store = try Store(path: storePath)
            defer { store.close() }
            #expect(try store.head().seq == clean.seq, "round \(round): the events of one clean run")
            #expect(store.checkpoint.hash == clean.hash, "round \(round): the same log, to the hash chain's head")
            #expect(printed.values.allSatisfy { $0 == 1 }, "round \(round): no line's event printed twice")
            // A batch that became durable just before a kill was never printed (records are printed after
            // their commit, and a resumed run starts after it): `teamlog records` re-derives those.
            #expect(printed.count <= Int(clean.seq) && printed.count >= Int(clean.seq) - 2 * 2 * 40, "round \(round)")
            #expect(try store.audit().ok)
            let position = try #require(try store.inputPosition())
            #expect(position.line == UInt64(Self.lines.count) && position.path == input)
            let view = try store.status().json["input"]
            #expect(view?["line"]?.intValue == Int64(Self.lines.count) && view?["path"]?.stringValue == input)
        }
    }

    /// Stream mode on a growing file keeps the position too: `ingest FILE --follow` killed with SIGKILL,
    /// then `--follow --resume` while the file goes on growing, ends where one clean run of the file ends.
    @Test func aFollowedFileResumesAfterAKill() throws {
        let clean = try Self.clean.get()
        let directory = TemporaryDirectory("resume-follow")
        let storePath = directory.child("store")
        let feed = try LiveFeed(.growingFile, path: directory.child("in.jsonl"))
        let bytes = Array((Self.lines.joined(separator: "\n") + "\n").utf8)
        let half = bytes[..<(bytes.count / 2)].lastIndex(of: 0x0A)! + 1
        let arguments = [feed.path, "--store", storePath, "--follow", "--batch-size", "40", "--flush-ms", "5"]
        let first = try Self.ingest(arguments, err: directory.child("err1"))
        _ = try feed.pump(bytes, from: 0, to: half, chunk: 1 << 14, draining: first)
        #expect(try StreamCrashTests.waitForOutput(first, containing: #""line":500,"#, timeout: 60))
        first.kill(SIGKILL)
        _ = first.wait()
        let second = try Self.ingest(arguments + ["--resume"], err: directory.child("err2"))
        _ = try feed.pump(bytes, from: half, to: bytes.count, chunk: 1 << 14, draining: second)
        #expect(try StreamCrashTests.waitForOutput(second, containing: #""line":\#(Self.lines.count),"#, timeout: 120))
        second.kill(SIGTERM)
        _ = try second.readToEnd(timeout: 60)
        #expect(second.wait() == .exited(0))
        feed.close()
        #expect(readTextFile(directory.child("err2")).contains("resuming \(feed.path) after line"))
        let store = try Store(path: storePath)
        defer { store.close() }
        #expect(try store.head().seq == clean.seq)
        #expect(store.checkpoint.hash == clean.hash, "the same log, to the hash chain's head")
    }

    /// The position's line as long as a line may be (the limit's bytes, then CRLF): found whole, so the
    /// file is recognised and resumed after it (one byte short of the window, it was refused as another
    /// input).
    @Test func aLineOfTheFullLengthWithCRLFResumes() throws {
        let directory = TemporaryDirectory("resume-long")
        let input = directory.child("in.jsonl")
        let storePath = directory.child("store")
        let first = Self.lines[0] + "\n" + String(repeating: "x", count: OpParser.maxLineBytes) + "\r\n"
        try CrashSafetyTests.writeFile(input, Array(first.utf8))
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", storePath, "--emit", "none"], timeout: 120)
        #expect(run.status == .exited(0))
        try CrashSafetyTests.writeFile(input, Array((first + Self.lines[1] + "\n").utf8))
        let resumed = try Self.ingest([input, "--store", storePath, "--resume"], err: directory.child("err"))
        let lines = try resumed.readToEnd(timeout: 120)
        #expect(resumed.wait() == .exited(0), "\(readTextFile(directory.child("err")))")
        #expect(readTextFile(directory.child("err")).contains("resuming \(input) after line 2"))
        #expect(lines.compactMap { try? JSONParser.parse($0) }.compactMap { $0["line"]?.intValue } == [3])
    }

    /// A file that grew: `--resume` reads only what was added, with line numbers going on from the first
    /// run's; a file that is not the input (shorter, another line where the position ends) is refused
    /// before anything is read; a store fed from a pipe only records no position to resume from.
    @Test func aGrownFileResumesAtItsNewLinesAndAnotherInputIsRefused() throws {
        let clean = try Self.clean.get()
        let directory = TemporaryDirectory("resume-grown")
        let input = directory.child("in.jsonl")
        let storePath = directory.child("store")
        try CheckpointTests.writeLines(input, Array(Self.lines[..<1_000]))
        let first = try Self.ingest([input, "--store", storePath], err: directory.child("err1"))
        _ = try first.readToEnd(timeout: 120)
        #expect(first.wait() == .exited(0))
        try CheckpointTests.writeLines(input, Self.lines)  // the same 1,000 lines, then 2,000 more

        // Another file: shorter than what was read; or as long, with another line ending at the position.
        let short = directory.child("short.jsonl")
        try CheckpointTests.writeLines(short, Array(Self.lines[..<900]))
        var changed = Self.lines[..<1_000].map { $0 }
        // The same length, another byte: only the checksum tells it.
        let prefix = "{\"op\":\""
        #expect(changed[999].hasPrefix(prefix))
        let rest = changed[999].dropFirst(prefix.count)
        changed[999] = prefix + rest.prefix(1).uppercased() + rest.dropFirst()
        let other = directory.child("other.jsonl")
        try CheckpointTests.writeLines(other, changed + Array(Self.lines[1_000...]))
        for (file, reason) in [(short, "shorter than the"), (other, "is not line 1000 of")] {
            let refused = try Self.ingest([file, "--store", storePath, "--resume"], err: directory.child("refused"))
            _ = try refused.readToEnd(timeout: 60)
            #expect(refused.wait() == .exited(2))
            let stderr = readTextFile(directory.child("refused"))
            #expect(stderr.contains("--resume: \(file)") && stderr.contains(reason), "\(stderr)")
        }

        let resumed = try Self.ingest([input, "--store", storePath, "--resume"], err: directory.child("err2"))
        let lines = try resumed.readToEnd(timeout: 300)
        #expect(resumed.wait() == .exited(0))
        let numbers = lines.compactMap { try? JSONParser.parse($0) }.compactMap { $0["line"]?.intValue }
        #expect(numbers.first == 1_001 && numbers.last == 3_000, "line numbers go on from the first run's")
        #expect(readTextFile(directory.child("err2")).contains("resuming \(input) after line 1000"))
        let store = try Store(path: storePath)
        #expect(try store.head().seq == clean.seq)
        #expect(store.checkpoint.hash == clean.hash)
        store.close()

        // Fed from a pipe: no position is kept, and --resume says why it cannot.
        let piped = directory.child("piped")
        let feed = try LiveFeed(.fifo, path: directory.child("in.fifo"))
        let child = try ChildProcess(
            TestSupport.teamlogExecutable, ["ingest", "-", "--store", piped, "--emit", "none"], stdin: feed.stdin)
        let bytes = Array((Self.lines[..<50].joined(separator: "\n") + "\n").utf8)
        _ = try feed.pump(bytes, from: 0, to: bytes.count, chunk: 1 << 14, draining: child)
        feed.close()
        _ = try child.readToEnd(timeout: 60)
        #expect(child.wait() == .exited(0))
        let pipedStore = try Store(path: piped)
        #expect(try pipedStore.inputPosition() == nil)
        pipedStore.close()
        let noPosition = try Self.ingest([input, "--store", piped, "--resume"], err: directory.child("none"))
        _ = try noPosition.readToEnd(timeout: 60)
        #expect(noPosition.wait() == .exited(2))
        #expect(readTextFile(directory.child("none")).contains("records no input position"))
    }
}
