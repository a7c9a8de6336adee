// teamlog-bench --stream: issue 11's stream bar ("offered 50,000 ops/s of the mixed workload for 10 s,
// sustained ≥ 49,000 with p99 ≤ 10 ms from writing a line to reading its record"), measured on the real CLI.
//
//   swift build -c release --product teamlog-bench   (and --product teamlog, --product teamlog-gen)
//   .build/release/teamlog-bench --stream [--stream-rate OPS/S] [--stream-seconds S] [--stream-warm-up N]
//                                [--stream-live-warm-up N] [--flush-ms T] [--stream-emit all|events]
//                                [--seed S] [--max-team N] [--out DIR] [--stream-backup-at S | --stream-audit-at S]
//                                [--stream-side-args "ARGS"]
//
// Generates issue 11's chat workload with teamlog-gen, ingests its first `--stream-warm-up` ops into a new
// store (untimed: the teams exist and have history) — all but the last `--stream-live-warm-up` with
// `teamlog ingest FILE`, those last ones through the stream child itself, as fast as it takes them, so the
// timed part meets a warm process — then writes the next `rate × seconds` lines to the stdin of that
// `teamlog ingest - --follow` child on a fixed schedule (line i
// is due at start + i / rate; whatever is due is written at once, checked every 0.2 ms), while a second
// thread reads its stdout. A line's latency is from when it was due — not when the bench managed to write
// it, so a child that stops reading is charged for the wait (no coordinated omission) — to when the
// record naming its line number was read. Writes DIR/stream.md.
//
// `--stream-backup-at S` / `--stream-audit-at S`: S seconds into the timed part, `teamlog backup` copies
// (or `teamlog audit` audits) the live store from another process, with `--stream-side-args` added to its
// command line; the report gives its duration and the latencies of the lines due while it ran.

import TeamLogStore
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#endif

/// The `--stream` mode: the stream processor of the real CLI at a fixed offered rate.
struct StreamBench {
    struct Options {
        var rate = 50_000
        var seconds = 10.0
        var warmUp = 500_000
        /// Of the warm-up, the ops written to the stream child itself (as fast as it takes them, untimed)
        /// before the schedule starts, so the timed part meets a warm process — its working set loaded —
        /// as a stream processor in steady state would be.
        var liveWarmUp = 100_000
        /// `--flush-ms` of the child: the longest a batch waits for more ops before its commit starts.
        var flushMs = 2
        /// `--emit` of the child (`none` prints nothing, so nothing could be timed: not allowed).
        var emit = "events"
        var seed: UInt64 = 42
        var users = 250_000
        var teams = 3_000
        var maxTeam = 2_000
        var outDir = "."
        /// More arguments for the stream child (`--checkpoint-ms 500`, `--cache-mb 512`, …).
        var childArguments: [String] = []
        /// Each timed line's due time (s from the start) and latency (ms), one per line, for finding stalls.
        var latencyLog: String?
        /// The command run beside the stream from another process — `backup` or `audit` of the live store —
        /// and when (seconds into the timed part); `nil`: none.
        var side: (command: String, at: Double)?
        /// More arguments for that command (`--nice 0`, …).
        var sideArguments: [String] = []
    }

    let options: Options

    /// What one run measured.
    struct Outcome {
        var offered = 0
        var answered = 0
        /// Seconds from the first line's due time to the last record read.
        var seconds = 0.0
        /// Latencies in ms, sorted.
        var latencies: [Double] = []
        var child: ChildRun?
        var childSummary = ""
        /// The live warm-up: ops and the seconds until the last one's record was read.
        var warmUpOps = 0
        var warmUpSeconds = 0.0
        /// CPU seconds per thread name of the child from the first timed line due to the last one's record
        /// read (a steadier measure of a change than the latency when the host is busy).
        var timedThreads: [(name: String, seconds: Double)] = []
        /// Stretches of more than 10 ms in which no record was read (`answerGaps`).
        var stops = AnswerGaps()
        /// The untimed batch warm-up (`teamlog ingest FILE` into an empty store): its ops and its child's CPU
        /// seconds — a reference for how fast the host runs this hour, taken in the same run.
        var batchWarmUp: (ops: Int, cpuSeconds: Double)?
        /// `--stream-backup-at` / `--stream-audit-at`: when the command ran (s from the first line due), how
        /// it ended, its output, and the latencies (ms, sorted) of the lines due in that window and of the
        /// others.
        var side: (from: Double, to: Double, run: ChildRun, output: String)?
        var latenciesDuringSide: [Double] = []
        var latenciesOutsideSide: [Double] = []

        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
    }

    func run() throws {
        guard options.rate > 0, options.seconds > 0, options.emit != "none" else {
            throw BenchError("--stream-rate and --stream-seconds must be > 0, --stream-emit all or events")
        }
        let teamlog = try ChildProcess.sibling("teamlog")
        let dir = tempDir("stream")
        let store = dir + "/store"
        let files = (workload: dir + "/workload.jsonl", warm: dir + "/warm.jsonl", live: dir + "/live.jsonl")
        let (out, err) = (dir + "/child.out", dir + "/child.err")
        defer {
            removeDirectoryTree(store)
            removeDirectoryTree(store + "-backup")  // `--stream-backup-at`
            removeDirectoryTree(dir)
        }
        let offered = Int(Double(options.rate) * options.seconds)
        let (genArguments, _) = try generateChatWorkload(
            ops: options.warmUp + offered, seed: options.seed, users: options.users, teams: options.teams,
            maxTeam: options.maxTeam, to: files.workload, stderr: err)
        var splitter = try ChunkSplitter(path: files.workload)
        let liveWarm = min(options.liveWarmUp, options.warmUp)
        let warmLines = try splitter.copy(lines: options.warmUp - liveWarm, to: files.warm)
        let liveWarmLines = try splitter.copy(lines: liveWarm, to: files.live + ".warm")
        let liveLines = try splitter.copy(lines: offered, to: files.live)
        splitter.close()
        unlink(files.workload)
        guard liveLines == offered, liveWarmLines == liveWarm else {
            throw BenchError("the workload has \(liveLines) lines after the warm-up")
        }

        progress("warm-up: ingesting \(fmt(Double(warmLines))) ops (untimed)…")
        let warm = try ChildProcess.run(
            teamlog, ["ingest", files.warm, "--store", store, "--emit", "none"], stdout: out, stderr: err)
        guard warm.succeeded else { throw BenchError("warm-up ingest \(warm.ending): \(readText(err))") }
        unlink(files.warm)

        let live = try readLines(files.live)
        let warmPart = try readLines(files.live + ".warm")
        unlink(files.live)
        unlink(files.live + ".warm")
        let loadBefore = loadAverage()
        progress(
            "offering \(fmt(Double(offered))) ops at \(fmt(Double(options.rate))) ops/s to `teamlog ingest - --follow "
                + "--flush-ms \(options.flushMs) --emit \(options.emit)`…")
        var outcome = try measure(teamlog, store: store, warm: warmPart, live: live, stderr: err)
        outcome.batchWarmUp = (warmLines, warm.cpuSeconds)
        outcome.childSummary = readText(err).split(separator: "\n").last.map(String.init) ?? ""
        let report = markdown(outcome, loadBefore: loadBefore, generation: genArguments.joined(separator: " "))
        print(report)
        mkdir(options.outDir, 0o755)
        writeFile(options.outDir + "/stream.md", report)
    }

    /// The workload's lines, as one buffer and each line's end offset (past its newline).
    private func readLines(_ path: String) throws -> (bytes: [UInt8], ends: [Int]) {
        let text = Array(readText(path).utf8)
        var ends: [Int] = []
        ends.reserveCapacity(options.rate * Int(options.seconds.rounded(.up)) + 1)
        for (i, byte) in text.enumerated() where byte == 0x0A { ends.append(i + 1) }
        return (text, ends)
    }

    /// Runs the child: first the live warm-up lines as fast as it takes them (until the record of the
    /// last one is read), then the timed lines on their schedule with a paced writer and a reader on two
    /// threads; returns when the child has exited.
    private func measure(
        _ teamlog: String, store: String, warm: (bytes: [UInt8], ends: [Int]), live: (bytes: [UInt8], ends: [Int]),
        stderr: String
    ) throws -> Outcome {
        let arguments = [
            "ingest", "-", "--store", store, "--follow", "--flush-ms", "\(options.flushMs)", "--emit", options.emit,
        ] + options.childArguments
        let (child, input, output) = try ChildProcess.spawnPiped(teamlog, arguments, stderr: stderr)
        let records = RecordReader(fd: output)
        // The live warm-up: lines 1...W.
        let warmCount = warm.ends.count
        let warmStart = now()
        if warmCount > 0 {
            let (_, seen) = try inParallel(
                { warm.bytes.withUnsafeBytes { raw in writeAll(input, raw.baseAddress!, raw.count) } },
                { records.read(untilLine: warmCount) { _, _ in } })
            guard seen else { throw BenchError("the stream child ended during the live warm-up") }
        }
        let warmSeconds = now() - warmStart
        // The timed lines: W+1...W+N; line W+i was due at start + (i - 1) / rate.
        let total = live.ends.count
        let rate = Double(options.rate)
        let latencies = SharedLatencies(count: total)
        // At the end: read by the reader at the last record, and by the writer just before it closes the
        // child's stdin (the parse thread ends at that EOF, before the last record is read).
        let threadsAtEnd = SharedThreadCPU()
        let threadsAtClose = SharedThreadCPU()
        let threadsAtStart = ThreadCPU.read(child.pid)
        let start = now() + 0.01
        let side = SharedSideRun()
        let sideArguments = options.sideArguments
        let sideThread = options.side.flatMap { command, at in
            startThread(name: "bench-side") {
                let begin = start + at
                while now() < begin { usleep(1_000) }
                let (out, err) = (store + "-side.out", store + "-side.err")
                let arguments =
                    command == "backup"
                    ? ["backup", "--store", store, "--to", store + "-backup", "--json"] : [command, "--store", store]
                let run = try? ChildProcess.run(teamlog, arguments + sideArguments, stdout: out, stderr: err)
                if let run {
                    let output = (readText(out) + readText(err)).split(separator: "\n").suffix(2).joined(separator: " / ")
                    side.value = (begin - start, now() - start, run, output)
                }
                // The copy is removed after the timed part (`run`) unless TL_BENCH_REMOVE_BACKUP is set: on a
                // file system mounted with `discard` (this VM's ext4), deleting 330 MB at once issued ~100-MB
                // discards that the stream's log `fdatasync` queued behind — a 30-ms stop charged to the
                // backup until a block trace showed it (`removeDirectoryTree` now shrinks large files first).
                if getenv("TL_BENCH_REMOVE_BACKUP") != nil { removeDirectoryTree(store + "-backup") }
                unlink(out)
                unlink(err)
            }
        }
        // For lining a profile up with the latency log (`perf record -k CLOCK_MONOTONIC`).
        progress("timed part: line 1 due at CLOCK_MONOTONIC \(fmt(start, 6)) s")
        let (written, _): (Int, Bool) = try inParallel(
            {
                // The paced writer: whatever is due goes out in one write.
                var sent = 0
                defer {
                    threadsAtClose.value = ThreadCPU.read(child.pid)
                    close(input)
                }
                while sent < total {
                    let due = min(total, Int(((now() - start) * rate).rounded(.down)) + 1)
                    if due <= sent {
                        usleep(200)
                        continue
                    }
                    let from = sent == 0 ? 0 : live.ends[sent - 1]
                    let to = live.ends[due - 1]
                    let ok = live.bytes.withUnsafeBytes { raw in writeAll(input, raw.baseAddress! + from, to - from) }
                    guard ok else { break }  // the child is gone
                    sent = due
                }
                return sent
            },
            {
                // The reader: each record's line number, timed when its read returned.
                records.read(untilLine: Int.max) { line, readAt in
                    let i = line - warmCount
                    if i >= 1 && i <= total {
                        latencies.set(i - 1, (readAt - (start + Double(i - 1) / rate)) * 1000)
                        if i == total { threadsAtEnd.value = ThreadCPU.read(child.pid) }
                    }
                }
            })
        close(output)
        let run = child.wait()
        sideThread?.join()
        var outcome = Outcome()
        if let window = side.value {
            outcome.side = window
            for (i, latency) in latencies.values.enumerated() where !latency.isNaN {
                let due = Double(i) / rate
                if due >= window.from && due <= window.to {
                    outcome.latenciesDuringSide.append(latency)
                } else {
                    outcome.latenciesOutsideSide.append(latency)
                }
            }
            outcome.latenciesDuringSide.sort()
            outcome.latenciesOutsideSide.sort()
        }
        outcome.offered = written
        if let path = options.latencyLog {
            var text = ""
            for (i, latency) in latencies.values.enumerated() {
                text += "\(fmt(Double(i) / rate, 4))\t\(latency.isNaN ? "lost" : fmt(latency, 3))\n"
            }
            writeFile(path, text)
        }
        outcome.stops = Self.answerGaps(latencies.values, rate: rate, over: 10)
        outcome.latencies = latencies.values.filter { !$0.isNaN }.sorted()
        outcome.answered = outcome.latencies.count
        outcome.seconds = records.lastRead - start
        outcome.child = run
        outcome.warmUpOps = warmCount
        outcome.warmUpSeconds = warmSeconds
        if let end = threadsAtEnd.value {
            outcome.timedThreads = end.merging(threadsAtClose.value ?? ThreadCPU()).since(threadsAtStart)
        }
        return outcome
    }

    /// Where the child stopped answering: the gaps between consecutive record reads (each line's due time
    /// plus its latency) longer than `over` ms. A stall of the writer shows as one such gap whatever the
    /// latencies it leaves behind while the backlog drains, so the count and the longest say how often and
    /// how long the pipeline stopped, and where to look in a profile lined up with the run.
    struct AnswerGaps {
        var count = 0
        /// The longest gap, ms, and when it began (s after the first line was due).
        var longest = 0.0
        var longestAt = 0.0
    }

    static func answerGaps(_ latencies: [Double], rate: Double, over: Double) -> AnswerGaps {
        var reads: [Double] = []
        reads.reserveCapacity(latencies.count)
        for (i, latency) in latencies.enumerated() where !latency.isNaN {
            reads.append(Double(i) / rate + latency / 1000)
        }
        reads.sort()
        var gaps = AnswerGaps()
        for (a, b) in zip(reads, reads.dropFirst()) {
            let gap = (b - a) * 1000
            guard gap > over else { continue }
            gaps.count += 1
            if gap > gaps.longest { (gaps.longest, gaps.longestAt) = (gap, a) }
        }
        return gaps
    }

    /// The value of the first `"line":` of a record, if any.
    static func lineNumber(_ record: ArraySlice<UInt8>) -> Int? {
        let key = Array("\"line\":".utf8)
        var i = record.startIndex
        while i + key.count <= record.endIndex {
            if record[i] == key[0] && record[i..<(i + key.count)].elementsEqual(key) {
                var j = i + key.count
                var value = 0
                var digits = 0
                while j < record.endIndex, record[j] >= 0x30, record[j] <= 0x39 {
                    value = value * 10 + Int(record[j] - 0x30)
                    digits += 1
                    j += 1
                }
                return digits > 0 ? value : nil
            }
            i += 1
        }
        return nil
    }

    private func markdown(_ o: Outcome, loadBefore: String, generation: String) -> String {
        let achieved = Double(o.answered) / max(o.seconds, 1e-9)
        let p99 = o.percentile(0.99)
        var md = "## teamlog-bench --stream: \(fmt(Double(options.rate))) ops/s offered for \(fmt(options.seconds, 1)) s\n\n"
        md += "\(utcDate()) UTC, \(machineDescription()), load average \(loadBefore) before the run.\n"
        md += "Workload: `SWIFT_DETERMINISTIC_HASHING=1 teamlog-gen \(generation)`; the first "
        md += "\(fmt(Double(options.warmUp - o.warmUpOps))) ops ingested first by `teamlog ingest FILE` (untimed); then "
        md += "`teamlog ingest - --follow --flush-ms \(options.flushMs) --emit \(options.emit)"
        md += "\(options.childArguments.map { " " + $0 }.joined())` started, took the next "
        md += "\(fmt(Double(o.warmUpOps))) as fast as it could (untimed: \(fmt(o.warmUpSeconds, 1)) s, so its working set "
        md += "is warm), and was offered the next \(fmt(Double(o.offered))) on a fixed schedule.\n\n"
        md += "| measure | value | bar |\n|---|---|---|\n"
        md += "| sustained (records read ÷ time from the first line due to the last record read) | "
        md += "\(fmt(achieved)) ops/s (\(fmt(Double(o.answered))) of \(fmt(Double(o.offered))) lines answered) | ≥ 49,000 |\n"
        md += "| latency, line due → its record read: p50 / p99 / p99.9 / max | "
        md += "\(fmt(o.percentile(0.5), 2)) / \(fmt(p99, 2)) / \(fmt(o.percentile(0.999), 2)) / "
        md += "\(fmt(o.latencies.last ?? .nan, 2)) ms | p99 ≤ 10 ms |\n"
        md += "| stops: stretches of > 10 ms with no record read | \(o.stops.count)"
        if o.stops.count > 0 {
            md += " (longest \(fmt(o.stops.longest, 1)) ms, from \(fmt(o.stops.longestAt, 3)) s)"
        }
        md += " | |\n"
        if let child = o.child {
            md += "| the child's CPU (user + system, warm-up included) | \(fmt(child.cpuSeconds, 2)) s; "
            md += "\(fmt(child.cpuSeconds / Double(max(o.answered + o.warmUpOps, 1)) * 1e6, 1)) µs per op | |\n"
            md += "| the child's peak RSS | \(fmt(Double(child.peakRSSBytes) / 1e6)) MB | |\n"
            md += "| the child's page faults (minor) | \(fmt(Double(child.minorFaults))) = "
            md += "\(fmt(Double(child.minorFaults) / Double(max(o.answered + o.warmUpOps, 1)), 2)) per op | |\n"
            md += "| the child's ending | \(child.ending) | |\n"
        }
        if !o.timedThreads.isEmpty {
            let perOp = { (seconds: Double) in fmt(seconds / Double(max(o.answered, 1)) * 1e6, 2) }
            let total = o.timedThreads.reduce(0) { $0 + $1.seconds }
            let shown = o.timedThreads.filter { $0.seconds > 0 }.map { "\($0.name) \(perOp($0.seconds))" }
            md += "| the child's CPU in the timed part, µs per op (per thread; 10-ms ticks) | \(perOp(total)): "
            md += "\(shown.joined(separator: ", ")) | |\n"
        }
        if let batch = o.batchWarmUp, batch.ops > 0 {
            // The same binary's batch ingest minutes earlier: runs on a slower hour of a shared host show
            // it slower too, so writer µs per op of two runs compare better divided by it.
            md += "| host reference: the untimed batch warm-up (`ingest FILE`, \(fmt(Double(batch.ops))) ops into an "
            md += "empty store), CPU µs per op | \(fmt(batch.cpuSeconds / Double(batch.ops) * 1e6, 2)) | |\n"
        }
        if let b = o.side, let command = options.side?.command {
            let during = o.latenciesDuringSide
            let outside = o.latenciesOutsideSide
            let pct = { (l: [Double], p: Double) in l.isEmpty ? Double.nan : l[min(l.count - 1, Int(Double(l.count) * p))] }
            let args = ([command] + options.sideArguments).joined(separator: " ")
            md += "| `teamlog \(args)` of the live store (another process) | from \(fmt(b.from, 2)) s to \(fmt(b.to, 2)) s, "
            md += "\(b.run.ending), CPU \(fmt(b.run.cpuSeconds, 2)) s, peak RSS \(fmt(Double(b.run.peakRSSBytes) / 1e6)) MB: "
            md += "`\(b.output)` | |\n"
            md += "| latency p50 / p99 / max of the \(fmt(Double(during.count))) lines due during the \(command) | "
            md += "\(fmt(pct(during, 0.5), 2)) / \(fmt(pct(during, 0.99), 2)) / \(fmt(during.last ?? .nan, 2)) ms | |\n"
            md += "| … and of the other \(fmt(Double(outside.count))) lines | "
            md += "\(fmt(pct(outside, 0.5), 2)) / \(fmt(pct(outside, 0.99), 2)) / \(fmt(outside.last ?? .nan, 2)) ms | |\n"
        }
        md += "\nThe child's summary: `\(o.childSummary)`\n"
        let met = achieved >= 49_000 && p99 <= 10
        md += "\nBar: \(met ? "**met**" : "**missed**").\n"
        return md
    }

    private func progress(_ line: String) {
        print(line)
        fflush(nil)
    }
}

/// The side command's window and outcome, set by its thread and read after joining it.
private final class SharedSideRun: @unchecked Sendable {
    var value: (from: Double, to: Double, run: ChildRun, output: String)?
}

/// Reads a child's records from a pipe and hands each record's line number to a callback with the time
/// its read returned. Used by one thread at a time (the warm-up's, then the timed phase's).
private final class RecordReader: @unchecked Sendable {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var carry: [UInt8] = []
    private(set) var lastRead = 0.0

    init(fd: Int32) { self.fd = fd }

    /// Reads until the record of input line `untilLine` (or a later one) came — true — or the pipe
    /// ended — false.
    func read(untilLine: Int, _ each: (_ line: Int, _ readAt: Double) -> Void) -> Bool {
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            let readAt = now()
            lastRead = readAt
            carry += buffer[..<n]
            var lineStart = 0
            var reached = false
            while let newline = carry[lineStart...].firstIndex(of: 0x0A) {
                if let line = StreamBench.lineNumber(carry[lineStart..<newline]) {
                    each(line, readAt)
                    if line >= untilLine { reached = true }
                }
                lineStart = newline + 1
            }
            carry.removeFirst(lineStart)
            if reached { return true }
        }
    }
}

/// A reading of the child's threads, set once by one of the bench's two threads and read after both
/// have been joined.
private final class SharedThreadCPU: @unchecked Sendable {
    var value: ThreadCPU?
}

/// Latencies written by the reader thread and read after it joined.
private final class SharedLatencies: @unchecked Sendable {
    private(set) var values: [Double]
    init(count: Int) { values = [Double](repeating: .nan, count: count) }
    func set(_ index: Int, _ value: Double) { if values[index].isNaN { values[index] = value } }
}

/// Writes all `count` bytes; false when the reader is gone (EPIPE) or another error.
private func writeAll(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Bool {
    var offset = 0
    while offset < count {
        let n = write(fd, bytes + offset, count - offset)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        offset += n
    }
    return true
}
