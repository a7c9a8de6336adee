// teamlog-bench --nats: issue 13's bar — partitions on NATS JetStream, measured on the real binaries.
//
//   swift build -c release --product teamlog && swift build -c release --product teamlog-bench
//   .build/release/teamlog-bench --nats [--nats-ops N] [--seed S] [--max-team N] [--out DIR]
//
// In one run:
// 1. the single-store baselines: `teamlog ingest FILE --store S --emit none` (durable, default settings),
//    the ratio's base, and the same with `--emit all` to /dev/null (every record encoded, as a partition
//    must: the fair per-op cost to compare a partition's with);
// 2. for N = 1, 2, 3 partitions: a fresh `nats-server -js` (store on disk), the workload routed first by
//    an in-process `OpRouter` (the router's rate), then N `teamlog serve --nats` children timed from their
//    start until every one has committed its subject's last message and published its outbox;
// 3. end-to-end latency on the 3-partition deployment, caught up: ops published through the router at a
//    fixed rate, their records received on a core subscription to `teamlog.out.*.{event,rejected,duplicate}`
//    and matched by `"line"`;
// 4. the key distribution (`RoutePlanner`, N = 1…8) and a model of N partitions on N machines from the
//    measured CPU cost per op of one partition.
// Writes DIR/nats.md.

import NATS
import NATSServer
import TeamLog
import TeamLogNATS
import TeamLogRuntime
import TeamLogWorkload

#if canImport(Glibc)
    import Glibc
#endif

/// The `--nats` mode.
struct NATSBench {
    /// Sizes and rates.
    struct Options {
        /// Lines of the workload routed and consumed by each deployment (and ingested by the baseline).
        var ops = 200_000
        var seed: UInt64 = 42
        /// The largest supergroup (two more at a quarter and a sixteenth of it).
        var maxTeam = 2_000
        /// Deployments of 1 … this many partitions are measured; the last one also serves the latency runs.
        var maxPartitions = 3
        /// Offered rates of the latency runs (ops/s); a rate runs only if the one before kept up.
        var latencyRates: [Double] = [2_000, 5_000]
        var latencySeconds = 10.0
        /// The model's partition counts: 1 … this.
        var modelPartitions = 8
        /// Longest wait for a deployment to catch up.
        var catchUpTimeout = 900.0
        var outDir = "."
    }

    /// One deployment of N partitions.
    struct Deployment {
        var partitions: Int
        var routeSeconds: Double
        var routedLines: Int
        /// Messages the router published per partition (a broadcast line counts on every partition).
        var perPartition: [Int]
        /// From spawning the partitions until all had caught up.
        var catchUpSeconds: Double
        /// CPU seconds (user + system) of each partition process when caught up.
        var partitionCPU: [Double]
        /// CPU seconds of nats-server during the catch-up.
        var serverCPU: Double
        /// Records on `TEAMLOG_OUT` when caught up (every kind: events, deliveries, notices …).
        var records: UInt64 = 0
        /// Peak RSS of each partition (MB), from wait4 at the end.
        var partitionRSS: [Double] = []
    }

    /// One fixed-rate latency run.
    struct LatencyRun {
        var offered: Double
        var lines: Int
        var publishSeconds: Double
        /// Publish-to-record latencies in seconds, sorted (received lines only).
        var latencies: [Double]
        var missing: Int

        var achieved: Double { Double(lines) / publishSeconds }
        func percentile(_ q: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(Double(latencies.count) * q))]
        }
        /// Kept up: everything arrived, ≥ 95% of the offered rate was published, p99 under a second.
        var keptUp: Bool { missing == 0 && achieved >= 0.95 * offered && percentile(0.99) < 1 }
    }

    /// The key distribution of the workload.
    struct Distribution {
        /// For N = 1 … modelPartitions: messages per partition.
        var perPartition: [[Int]]
        var broadcastLines: Int
        var largestKey: String
        var largestKeyLines: Int
        var lines: Int
    }

    let options: Options

    /// Runs every measurement, prints the report and writes `outDir/nats.md`.
    func run() throws {
        let teamlog = try ChildProcess.sibling("teamlog")
        _ = try NATSServerProcess.executable()
        let startLoad = loadAverage()
        let started = now()
        let dir = tempDir("nats")
        defer { _ = try? ChildProcess.run("/bin/rm", ["-rf", dir], stdout: "/dev/null", stderr: "/dev/null") }

        // The workload: `ops` lines in a file, then the lines the latency runs publish (the same generator
        // continued, so they act on the teams the workload built).
        let extra = options.latencyRates.reduce(0) { $0 + Int($1 * options.latencySeconds) }
        var workloadOptions = MixedWorkload.Options()
        workloadOptions.seed = options.seed
        workloadOptions.maxTeam = options.maxTeam
        progress(
            "generating \(fmt(Double(options.ops + extra))) ops (seed \(options.seed), max team \(options.maxTeam))…")
        var generator = MixedWorkload(options: workloadOptions)
        let lines = (0..<(options.ops + extra)).map { _ in Array(generator.next().utf8) }
        let file = dir + "/workload.jsonl"
        writeFile(
            file, lines[..<options.ops].map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n") + "\n")

        // 1. The single-store baseline.
        progress("baseline: teamlog ingest (durable, default settings)…")
        let (out, err) = (dir + "/child.out", dir + "/child.err")
        let ingest = try ChildProcess.run(
            teamlog, ["ingest", file, "--store", dir + "/cli-store", "--emit", "none"], stdout: out, stderr: err)
        guard ingest.succeeded else { throw BenchError("teamlog ingest \(ingest.ending): \(readText(err))") }
        let ingestSummary = IngestSummary(parsing: readText(err))
        let baseline = Double(options.ops) / ingest.seconds
        progress("  \(fmt(baseline)) ops/s (\(fmt(ingest.seconds, 2)) s wall, \(fmt(ingest.cpuSeconds, 2)) CPU s)")
        _ = try? ChildProcess.run("/bin/rm", ["-rf", dir + "/cli-store"], stdout: "/dev/null", stderr: "/dev/null")
        // The same with every record encoded and written (to /dev/null): what a partition must produce.
        progress("baseline: teamlog ingest --emit all (records to /dev/null)…")
        let ingestAll = try ChildProcess.run(
            teamlog, ["ingest", file, "--store", dir + "/cli-store", "--emit", "all"], stdout: "/dev/null", stderr: err)
        guard ingestAll.succeeded else {
            throw BenchError("teamlog ingest --emit all \(ingestAll.ending): \(readText(err))")
        }
        progress("  \(fmt(Double(options.ops) / ingestAll.seconds)) ops/s (\(fmt(ingestAll.cpuSeconds, 2)) CPU s)")
        _ = try? ChildProcess.run("/bin/rm", ["-rf", dir + "/cli-store"], stdout: "/dev/null", stderr: "/dev/null")

        // 2. Deployments of 1 … maxPartitions; the last stays up for 3.
        var deployments: [Deployment] = []
        var latencyRuns: [LatencyRun] = []
        var problems: [String] = []
        for n in 1...options.maxPartitions {
            // A deployment whose partition fails is reported and tried once more (fresh server and stores).
            var attempt = 0
            var made: Live?
            while made == nil && attempt < 2 {
                attempt += 1
                do {
                    made = try deploy(n, lines: lines[..<options.ops], teamlog: teamlog, dir: dir + "/n\(n)-\(attempt)")
                } catch {
                    problems.append("N=\(n), attempt \(attempt): \(error)")
                    progress("  N=\(n) attempt \(attempt) failed: \(error)")
                }
            }
            guard let live = made else { continue }
            defer { live.stop() }
            deployments.append(live.deployment)
            let d = live.deployment
            progress(
                "  N=\(n): routed \(fmt(Double(d.routedLines) / d.routeSeconds)) lines/s; caught up in "
                    + "\(fmt(d.catchUpSeconds, 2)) s = \(fmt(Double(options.ops) / d.catchUpSeconds)) ops/s; "
                    + "partition CPU s \(d.partitionCPU.map { fmt($0, 2) }); nats-server CPU s \(fmt(d.serverCPU, 2))")
            if n == options.maxPartitions {
                // 3. Latency at fixed rates, on this deployment.
                var next = options.ops
                for rate in options.latencyRates {
                    let count = Int(rate * options.latencySeconds)
                    if let last = latencyRuns.last, !last.keptUp {
                        problems.append(
                            "latency at \(fmt(rate)) ops/s not run: \(fmt(last.offered)) ops/s did not keep up")
                        break
                    }
                    progress("latency: \(fmt(rate)) ops/s for \(fmt(options.latencySeconds)) s on \(n) partitions…")
                    let run = try latency(live, lines: lines[next..<(next + count)], firstLine: next + 1, rate: rate)
                    next += count
                    latencyRuns.append(run)
                    progress(
                        "  achieved \(fmt(run.achieved)) ops/s; p50 \(fmt(run.percentile(0.5) * 1000, 2)) ms, p99 "
                            + "\(fmt(run.percentile(0.99) * 1000, 2)) ms, max \(fmt((run.latencies.last ?? .nan) * 1000, 2)) ms; "
                            + "missing \(run.missing)")
                }
            }
            let stopped = live.stop()
            deployments[deployments.count - 1].partitionRSS = stopped.map { Double($0?.peakRSSBytes ?? 0) / 1e6 }
            for (p, s) in stopped.enumerated() where s?.succeeded != true {
                problems.append("N=\(n) partition \(p) ended with \(s?.ending ?? "unknown status") on SIGTERM")
            }
        }

        // 4. The key distribution, and the model.
        progress("key distribution for N = 1…\(options.modelPartitions)…")
        let distribution = distribution(lines[..<options.ops])
        let report = markdown(
            baseline: (ingest, ingestSummary, baseline), withRecords: ingestAll, deployments: deployments,
            latency: latencyRuns,
            distribution: distribution, problems: problems, startLoad: startLoad, seconds: now() - started)
        print("\n" + report)
        mkdir(options.outDir, 0o755)  // may exist
        writeFile(options.outDir + "/nats.md", report)
        print("wrote \(options.outDir)/nats.md")
    }

    // MARK: A deployment

    /// A running deployment: its server, its partitions, the router that filled it and what was measured.
    final class Live {
        let server: NATSServerProcess
        let connection: NATSConnection
        let router: OpRouter
        var children: [RunningChild]
        var deployment: Deployment
        private var stopped: [ChildRun?]?

        init(
            server: NATSServerProcess, connection: NATSConnection, router: OpRouter, children: [RunningChild],
            deployment: Deployment
        ) {
            self.server = server
            self.connection = connection
            self.router = router
            self.children = children
            self.deployment = deployment
        }

        /// SIGTERM to every partition (reaped), then the server stops. Idempotent: the first call's result.
        @discardableResult
        func stop() -> [ChildRun?] {
            if let stopped { return stopped }
            let runs = children.map { $0.stop(SIGTERM) }
            stopped = runs
            connection.close()
            server.stop()
            return runs
        }
    }

    /// Starts a server, routes `lines`, starts `n` partitions and waits until they have caught up.
    private func deploy(_ n: Int, lines: ArraySlice<[UInt8]>, teamlog: String, dir: String) throws -> Live {
        mkdir(dir, 0o755)
        mkdir(dir + "/js", 0o755)
        progress("N=\(n): nats-server -js, routing \(fmt(Double(lines.count))) lines…")
        let server = try NATSServerProcess.start(storeDir: dir + "/js")
        let connection: NATSConnection
        do { connection = try NATSConnection(NATSConnection.Options(servers: [server.url])) } catch {
            server.stop()
            throw error
        }
        var routerOptions = OpRouter.Options()
        routerOptions.partitions = n
        let router = try OpRouter(connection: connection, options: routerOptions)
        let clock = wallMilliseconds()
        var t = now()
        for (i, line) in zip(lines.indices, lines) { try router.route(.text(number: i + 1, bytes: line), now: clock) }
        try router.flush()
        let routeSeconds = now() - t
        let last = try (0..<n).map { try lastSequence(connection, subject: TeamLogSubjects.ops($0)) }

        let serverPID = server.processID ?? 0
        let serverBefore = procCPUSeconds(serverPID) ?? 0
        t = now()
        var children: [RunningChild] = []
        for p in 0..<n {
            children.append(
                try ChildProcess.spawn(
                    teamlog,
                    [
                        "serve", "--store", dir + "/p\(p)", "--listen", "127.0.0.1:0", "--nats", server.url,
                        "--partition", String(p), "--partitions", String(n),
                    ], stdout: dir + "/p\(p).out", stderr: dir + "/p\(p).err"))
        }
        let live = Live(
            server: server, connection: connection, router: router, children: children,
            deployment: Deployment(
                partitions: n, routeSeconds: routeSeconds, routedLines: router.summary.lines,
                perPartition: router.summary.perPartition, catchUpSeconds: 0, partitionCPU: [], serverCPU: 0))
        do {
            try waitUntilCaughtUp(connection, last: last, children: children, dir: dir)
        } catch {
            live.stop()
            throw error
        }
        live.deployment.catchUpSeconds = now() - t
        live.deployment.partitionCPU = children.map { $0.cpuSeconds ?? .nan }
        live.deployment.serverCPU = (procCPUSeconds(serverPID) ?? .nan) - serverBefore
        live.deployment.records = (try? connection.jetStream().streamState(TeamLogSubjects.outStream))?.messages ?? 0
        return live
    }

    /// The stream sequence of the last message on `subject` of `TEAMLOG_OPS` (0 when none), from the
    /// JetStream API (`STREAM.MSG.GET` with `last_by_subj`).
    private func lastSequence(_ connection: NATSConnection, subject: String) throws -> UInt64 {
        let reply = try connection.request(
            "$JS.API.STREAM.MSG.GET.\(TeamLogSubjects.opsStream)", Array("{\"last_by_subj\":\"\(subject)\"}".utf8),
            timeoutMs: 5_000)
        let value = try JSONParser.parse(reply.data)
        return UInt64(value["message"]?["seq"]?.intValue ?? 0)
    }

    /// Polls every partition's `status` (every 20 ms) until its `sourcePosition` is its subject's last
    /// sequence and `unpublished` is 0; fails when a child exits or after `catchUpTimeout`.
    private func waitUntilCaughtUp(
        _ connection: NATSConnection, last: [UInt64], children: [RunningChild], dir: String
    ) throws {
        let queries = try ClusterQueries(connection: connection, partitions: last.count, timeoutMs: 2_000)
        let deadline = now() + options.catchUpTimeout
        while true {
            if let statuses = try? queries.statuses(),
                statuses.enumerated().allSatisfy({ p, s in
                    s["sourcePosition"]?.intValue == Int64(last[p]) && s["unpublished"]?.intValue == 0
                })
            {
                return
            }
            for (p, child) in children.enumerated() {
                var status: Int32 = 0
                if waitpid(child.pid, &status, WNOHANG) == child.pid {
                    // Its whole stderr (a crash's backtrace) is kept in the output directory.
                    mkdir(options.outDir, 0o755)
                    let kept = options.outDir + "/partition-\(p)-of-\(last.count)-exit-\(Int(now())).err"
                    writeFile(kept, readText(dir + "/p\(p).err"))
                    throw BenchError(
                        "partition \(p) of \(last.count) exited (wait status \(status)) before catching up; stderr "
                            + "kept in \(kept): \(tail(String(readText(dir + "/p\(p).err").prefix(400))))")
                }
            }
            if now() > deadline {
                throw BenchError("partitions did not catch up within \(fmt(options.catchUpTimeout)) s")
            }
            var ts = timespec(tv_sec: 0, tv_nsec: 20_000_000)
            _ = nanosleep(&ts, nil)
        }
    }

    // MARK: Latency

    /// First arrival time of each line's record, filled by subscription threads.
    final class Arrivals: @unchecked Sendable {
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private var first: [Double]
        private var received = 0
        let firstLine: Int

        init(firstLine: Int, count: Int) {
            self.firstLine = firstLine
            first = Array(repeating: 0, count: count)
            mutex = .allocate(capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        /// Records `line`'s record arriving at `time`; later records of the same line (a broadcast op's
        /// other partitions) are ignored.
        func record(line: Int, at time: Double) {
            let i = line - firstLine
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            guard i >= 0, i < first.count, first[i] == 0 else { return }
            first[i] = time
            received += 1
        }

        /// Lines whose record arrived, and the arrival times (0: not yet).
        var snapshot: (received: Int, first: [Double]) {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return (received, first)
        }
    }

    /// Publishes `lines` through the deployment's router at `rate` (flushing at most 1 ms after a line was
    /// routed) and measures, per line, from handing it to the router to receiving its first record.
    private func latency(_ live: Live, lines: ArraySlice<[UInt8]>, firstLine: Int, rate: Double) throws -> LatencyRun {
        let arrivals = Arrivals(firstLine: firstLine, count: lines.count)
        let handler: @Sendable (NATSMessage) -> Void = { message in
            let t = now()
            if let line = recordLine(message.data) { arrivals.record(line: line, at: t) }
        }
        let subscriptions = try ["event", "rejected", "duplicate"].map {
            try live.connection.subscribe("teamlog.out.*.\($0)", handler)
        }
        defer { for s in subscriptions { s.cancel() } }
        try live.connection.flush(timeoutMs: 5_000)

        var sent = [Double](repeating: 0, count: lines.count)
        let clock = wallMilliseconds()
        let begin = now()
        var lastFlush = begin
        var unflushed = false
        var i = 0
        for line in lines {
            let due = begin + Double(i) / rate
            while true {
                let t = now()
                if t >= due { break }
                if unflushed && t - lastFlush >= 0.001 {
                    try live.router.flush()
                    lastFlush = now()
                    unflushed = false
                    continue
                }
                // Sleep (no spinning: the partitions and the server share the cores) until the line is due
                // or the next flush, whichever is first.
                let wake = unflushed ? min(due, lastFlush + 0.001) : due
                let ns = max(20_000, Int((wake - t) * 1e9))
                var ts = timespec(tv_sec: 0, tv_nsec: min(ns, 999_999_999))
                _ = nanosleep(&ts, nil)
            }
            sent[i] = now()
            try live.router.route(.text(number: firstLine + i, bytes: line), now: clock)
            unflushed = true
            i += 1
            if now() - lastFlush >= 0.001 {
                try live.router.flush()
                lastFlush = now()
                unflushed = false
            }
        }
        try live.router.flush()
        let publishSeconds = now() - begin
        // Wait for the records (at most 30 s after the last publish).
        let deadline = now() + 30
        while arrivals.snapshot.received < lines.count && now() < deadline {
            var ts = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            _ = nanosleep(&ts, nil)
        }
        let (received, first) = arrivals.snapshot
        var latencies: [Double] = []
        latencies.reserveCapacity(received)
        for (s, f) in zip(sent, first) where f > 0 { latencies.append(f - s) }
        latencies.sort()
        return LatencyRun(
            offered: rate, lines: lines.count, publishSeconds: publishSeconds, latencies: latencies,
            missing: lines.count - received)
    }

    // MARK: Distribution and model

    /// Messages per partition for N = 1 … modelPartitions (as `RoutePlanner` plans them), broadcast lines
    /// and the single key with the most lines.
    private func distribution(_ lines: ArraySlice<[UInt8]>) -> Distribution {
        let counts = Array(1...options.modelPartitions)
        var planners = counts.map { RoutePlanner(partitions: $0, scheme: .current) }
        var perPartition = counts.map { Array(repeating: 0, count: $0) }
        var broadcast = 0
        var keyLines: [[UInt8]: Int] = [:]
        var messageKeys: [Id: [UInt8]] = [:]
        let unparsed = Array("(lines that do not parse: partition 0)".utf8)
        let clock = wallMilliseconds()
        for (i, line) in zip(lines.indices, lines) {
            let input = LineReader.Line.text(number: i + 1, bytes: line)
            for k in planners.indices {
                // No `locate`: nothing to throw (a modify of an old message goes to its fallback here).
                for m in (try? planners[k].plan(input, now: clock)) ?? [] { perPartition[k][m.partition] += 1 }
            }
            switch ParsedLine.parse(input).result {
            case .success(let op)?:
                switch PartitionKey.of(op) {
                case .broadcast: broadcast += 1
                case .key(let key):
                    keyLines[key, default: 0] += 1
                    if case .messageSend(let m) = op.body { messageKeys[m.messageId] = key }
                case .byMessage(let id):
                    keyLines[messageKeys[id] ?? Array("m:\(id.string)".utf8), default: 0] += 1
                }
            case .failure?: keyLines[unparsed, default: 0] += 1
            case nil: break
            }
        }
        let largest = keyLines.max { $0.value < $1.value }
        return Distribution(
            perPartition: perPartition, broadcastLines: broadcast,
            largestKey: largest.map { String(decoding: $0.key, as: UTF8.self) } ?? "—",
            largestKeyLines: largest?.value ?? 0, lines: lines.count)
    }

    // MARK: Report

    private func markdown(
        baseline: (run: ChildRun, summary: IngestSummary?, rate: Double), withRecords: ChildRun,
        deployments: [Deployment],
        latency: [LatencyRun], distribution: Distribution, problems: [String], startLoad: String, seconds: Double
    ) -> String {
        let ops = Double(options.ops)
        var md = "## teamlog-bench --nats: \(fmt(ops)) ops on 1…\(options.maxPartitions) JetStream partitions\n\n"
        md += "- command: `\(CommandLine.arguments.joined(separator: " "))`\n"
        md +=
            "- date: \(utcDate()) UTC; machine: \(machineDescription()); load average at the start \(startLoad), at the "
        md += "end \(loadAverage()); total \(fmt(seconds / 60, 1)) min\n"
        md += "- workload: `MixedWorkload` seed \(options.seed), max team \(fmt(Double(options.maxTeam))), "
        md += "\(fmt(ops)) lines (the latency runs continue the same generator)\n"
        md += "- every deployment: a fresh single `nats-server -js` (file store in a temp dir); the whole "
        md += "workload routed first by an in-process `OpRouter` (window 2,048), then N `teamlog serve --store S "
        md += "--listen 127.0.0.1:0 --nats URL --partition p --partitions N` children (durable, default "
        md += "settings), timed from their spawn until every partition's `status` shows `sourcePosition` = "
        md += "the last sequence of its subject and `unpublished` = 0 (polled every 20 ms)\n\n"

        md += "### Throughput\n\n"
        md += "| run | ops/s | × CLI | wall s | messages per partition | partition CPU s | nats-server CPU s "
        md += "| records published | router lines/s | partition CPU µs/op |\n"
        md += "|---|---:|---:|---:|---|---|---:|---:|---:|---:|\n"
        let b = baseline.run
        md += "| CLI `teamlog ingest --emit none` (single store) | \(fmt(baseline.rate)) | 1.00 "
        md += "| \(fmt(b.seconds, 2)) | — | \(fmt(b.cpuSeconds, 2)) | — | none (`--emit none`) | — "
        md += "| \(fmt(b.cpuSeconds / ops * 1e6)) |\n"
        let w = withRecords
        md += "| CLI `teamlog ingest --emit all` (records to /dev/null) | \(fmt(ops / w.seconds)) "
        md += "| \(fmt(ops / w.seconds / baseline.rate, 2)) | \(fmt(w.seconds, 2)) | — | \(fmt(w.cpuSeconds, 2)) | — "
        md += "| all (to /dev/null) | — | \(fmt(w.cpuSeconds / ops * 1e6)) |\n"
        for d in deployments {
            let rate = ops / d.catchUpSeconds
            md += "| N=\(d.partitions) partitions | \(fmt(rate)) | \(fmt(rate / baseline.rate, 2)) "
            md += "| \(fmt(d.catchUpSeconds, 2)) | \(d.perPartition.map { fmt(Double($0)) }.joined(separator: " / ")) "
            md += "| \(d.partitionCPU.map { fmt($0, 2) }.joined(separator: " / ")) | \(fmt(d.serverCPU, 2)) "
            md += "| \(fmt(Double(d.records))) "
            md += "| \(fmt(Double(d.routedLines) / d.routeSeconds)) "
            md += "| \(fmt(d.partitionCPU.reduce(0, +) / ops * 1e6)) |\n"
        }
        if let s = baseline.summary {
            md += "\nThe CLI's own clock (after opening the store): \(fmt(Double(s.lines) / s.seconds)) ops/s; "
            md += "accepted \(fmt(Double(s.accepted))), rejected \(fmt(Double(s.rejected))), duplicates "
            md += "\(fmt(Double(s.duplicates))).\n"
        }
        md += "\nThe machine has \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores: with 2 or 3 partitions the "
        md += "partition processes and nats-server compete for them, so these rates measure the cores, not "
        md += "the design's scaling; the model below takes the measured CPU cost per op to N machines. "
        md += "Router: one thread, asynchronous publishes confirmed per window of 2,048.\n\n"

        md += "### End-to-end latency (N=\(options.maxPartitions), caught up)\n\n"
        md += "From handing a line to the router (`OpRouter.route`, flushed at most 1 ms later) to receiving "
        md += "its first `event`/`rejected`/`duplicate` record on a core NATS subscription to "
        md += "`teamlog.out.*.<kind>` (a broadcast op's first partition counts).\n\n"
        md += "| offered ops/s | achieved ops/s | lines | p50 ms | p95 ms | p99 ms | max ms | missing |\n"
        md += "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        for r in latency {
            md += "| \(fmt(r.offered)) | \(fmt(r.achieved)) | \(fmt(Double(r.lines))) "
            md += "| \(fmt(r.percentile(0.5) * 1000, 2)) | \(fmt(r.percentile(0.95) * 1000, 2)) "
            md += "| \(fmt(r.percentile(0.99) * 1000, 2)) | \(fmt((r.latencies.last ?? .nan) * 1000, 2)) "
            md += "| \(r.missing) |\n"
        }

        md += "\n### Key distribution and the model (N partitions on N machines)\n\n"
        let lines = Double(distribution.lines)
        let broadcastShare = Double(distribution.broadcastLines) / lines
        let keyShare = Double(distribution.largestKeyLines) / lines
        md += "Of the \(fmt(lines)) lines, \(fmt(100 * broadcastShare, 2))% are broadcast "
        md += "(`client.login`, `client.logout`, `clock.tick`, `members.sync`: every partition applies them); "
        md += "the largest single key is `\(distribution.largestKey)` with \(fmt(100 * keyShare, 2))% of the lines.\n\n"
        if let one = deployments.first, one.partitions == 1, let cpu = one.partitionCPU.first, cpu > 0 {
            let cost = cpu / Double(one.perPartition[0])
            md += "Cost per op of a partition, measured at N=1: \(fmt(cpu, 2)) CPU s for "
            md += "\(fmt(Double(one.perPartition[0]))) messages = \(fmt(cost * 1e6, 2)) µs/op "
            md += "(\(fmt(1 / cost)) ops per CPU second; the CLI ingest: \(fmt(b.cpuSeconds / ops * 1e6, 2)) µs/op, "
            md += "without consuming, the outbox and publishing records). "
            md += "Modeled rate(N) = 1 / (max over partitions of its share of the lines, broadcast included, × "
            md += "cost per op): each partition alone on its machine, nats-server and the router not the limit, "
            md += "every op costing the average.\n\n"
            md += "| N | messages per partition | largest partition's share | modeled ops/s | × N=1 | × CLI |\n"
            md += "|---:|---|---:|---:|---:|---:|\n"
            for counts in distribution.perPartition {
                let share = Double(counts.max() ?? 0) / lines
                let rate = 1 / (share * cost)
                md += "| \(counts.count) | \(counts.map { fmt(Double($0)) }.joined(separator: " / ")) "
                md += "| \(fmt(100 * share, 1))% | \(fmt(rate)) | \(fmt(rate * cost, 2)) "
                md += "| \(fmt(rate / baseline.rate, 2)) |\n"
            }
            let bound = 1 / ((keyShare + broadcastShare) * cost)
            md += "\nBound for any N: the partition holding the largest key pays that key's lines plus every "
            md += "broadcast line: 1 / ((\(fmt(100 * keyShare, 2))% + \(fmt(100 * broadcastShare, 2))%) × cost) "
            md += "= \(fmt(bound)) ops/s (\(fmt(bound * cost, 1))× one partition).\n"
            for d in deployments where d.partitions > 1 {
                let costs = zip(d.partitionCPU, d.perPartition).map { $0 / Double(max(1, $1)) * 1e6 }
                md += "\nCheck at N=\(d.partitions): measured CPU µs per message per partition "
                md += "\(costs.map { fmt($0, 2) }.joined(separator: " / ")) (N=1: \(fmt(cost * 1e6, 2))).\n"
            }
        } else {
            md += "The model needs the N=1 deployment's CPU time: not measured.\n"
        }
        if !problems.isEmpty {
            md += "\nNot measured or failed:\n\n" + problems.map { "- \($0)\n" }.joined()
        }
        return md
    }

    // MARK: Helpers

    private func progress(_ line: String) {
        print(line)
        fflush(nil)
    }

    private func tail(_ text: String) -> String {
        String(text.suffix(600)).split(separator: "\n").joined(separator: " / ")
    }
}

/// Wall-clock milliseconds since the epoch (the router stamps ops without `ts` with it).
private func wallMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// The `"line":N` of a SPEC record (`{"kind":"event","line":N,…}`), or nil.
private func recordLine(_ data: [UInt8]) -> Int? {
    let marker = Array("\"line\":".utf8)
    guard data.count > marker.count else { return nil }
    for start in 0...(data.count - marker.count) where data[start] == marker[0] {
        guard data[start..<(start + marker.count)].elementsEqual(marker) else { continue }
        var n = 0
        var i = start + marker.count
        var any = false
        while i < data.count, data[i] >= 0x30, data[i] <= 0x39 {
            n = n * 10 + Int(data[i] - 0x30)
            i += 1
            any = true
        }
        return any ? n : nil
    }
    return nil
}
