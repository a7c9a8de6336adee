// teamlog-bench: on one generated workload, in one process, teamlog against its baselines.
//
//   swift run -c release teamlog-bench [--ops N] [--seed S] [--max-team N] [--out DIR]
//                                      [--row-mix-ops N] [--sqlite-seconds S]
//   teamlog-bench --scale [--scale-ops N] [--scale-chunk N] [--seed S] [--max-team N] [--out DIR] [--keep]
//                         [--scale-base-audit] [--scale-one-process] [--scale-audit-cache-mb N]
//     (issue 11's bars on the real CLI as child processes: ScaleBench.swift)
//   teamlog-bench --nats [--nats-ops N] [--seed S] [--max-team N] [--out DIR]
//     (issue 13: the CLI against 1, 2, 3 NATS JetStream partitions, latency, the scaling model: NATSBench.swift)
//   teamlog-bench --stream [--stream-rate OPS/S] [--stream-seconds S] [--stream-warm-up N] [--flush-ms T] …
//     (issue 11's stream bar on `teamlog ingest --follow` as a child process: StreamBench.swift)
//   teamlog-bench --apply-ceiling STORE
//     (a store's events applied to an in-memory World alone: the ceiling of any replay; `--scale` runs it)
//
// Reports ops/s, member-decisions/s, deliveries/s, replay (audit) events/s, peak memory, store bytes per
// event and stream commit latency, beside the raw-LMDB-append limit, a naive per-member fan-out and the
// per-recipient-row design in SQLite (on a second mix with teams up to 2,000 members); writes
// `bench.md` (a BENCHMARKS.md-ready table) and `bench.svg` (a chart) to --out.

import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogWorkload

#if canImport(Glibc)
    import Glibc
#endif

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func peakRSSMiB() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_maxrss) / 1024
}

/// A new directory under `$TMPDIR` (or /tmp): where the bench's stores live, so a run can put them on
/// another file system.
func tempDir(_ name: String) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/teamlog-bench-\(name)-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: made!)
}

func fmt(_ x: Double, _ digits: Int = 0) -> String {
    if digits == 0 {
        return String(Int(x.rounded())).reversed().enumerated().map {
            $0.offset > 0 && $0.offset % 3 == 0 ? "\($0.element)," : "\($0.element)"
        }.reversed().joined()
    }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let n = Int((x * scale).rounded())
    let frac = String(abs(n) % Int(scale))
    return "\(n / Int(scale)).\(String(repeating: "0", count: digits - frac.count))\(frac)"
}

struct Row {
    var name: String
    var value: Double
    var unit: String
    var note: String
}

func run() throws {
    var ops = 200_000
    var options = MixedWorkload.Options()
    options.maxTeam = 20_000
    var outDir = "."
    var rowMixOps = 50_000
    var sqliteBudget = 30.0
    var scale = false  // --scale: issue 11's bars instead (ScaleBench.swift); shares --seed, --max-team, --out
    var scaleOptions = ScaleBench.Options()
    var stream = false  // --stream: issue 11's stream bar on the CLI (StreamBench.swift); shares --seed, --max-team, --out
    var streamOptions = StreamBench.Options()
    var nats = false  // --nats: issue 13's measurements (NATSBench.swift); shares --seed, --max-team, --out
    var natsOptions = NATSBench.Options()
    var args = CommandLine.arguments.dropFirst().makeIterator()
    while let a = args.next() {
        switch a {
        case "--ops": ops = Int(args.next()!)!
        case "--seed":
            options.seed = UInt64(args.next()!)!
            scaleOptions.seed = options.seed
            natsOptions.seed = options.seed
            streamOptions.seed = options.seed
        case "--max-team":
            options.maxTeam = Int(args.next()!)!
            scaleOptions.maxTeam = options.maxTeam
            natsOptions.maxTeam = options.maxTeam
            streamOptions.maxTeam = options.maxTeam
        case "--out":
            outDir = args.next()!
            scaleOptions.outDir = outDir
            natsOptions.outDir = outDir
            streamOptions.outDir = outDir
        case "--scale": scale = true
        case "--stream": stream = true
        case "--stream-rate": streamOptions.rate = Int(args.next()!)!
        case "--stream-seconds": streamOptions.seconds = Double(args.next()!)!
        case "--stream-warm-up": streamOptions.warmUp = Int(args.next()!)!
        case "--stream-live-warm-up": streamOptions.liveWarmUp = Int(args.next()!)!
        case "--stream-latency-log": streamOptions.latencyLog = args.next()!
        case "--stream-child-args": streamOptions.childArguments = args.next()!.split(separator: " ").map(String.init)
        case "--stream-emit": streamOptions.emit = args.next()!
        case "--stream-backup-at": streamOptions.side = ("backup", Double(args.next()!)!)
        case "--stream-audit-at": streamOptions.side = ("audit", Double(args.next()!)!)
        case "--stream-side-args": streamOptions.sideArguments = args.next()!.split(separator: " ").map(String.init)
        case "--flush-ms": streamOptions.flushMs = Int(args.next()!)!
        case "--scale-ops": scaleOptions.ops = Int(args.next()!)!
        case "--scale-chunk": scaleOptions.chunk = Int(args.next()!)!
        case "--keep": scaleOptions.keep = true
        case "--scale-base-audit": scaleOptions.baseAudit = true
        case "--scale-one-process": scaleOptions.oneProcess = true
        case "--scale-audit-cache-mb":
            scaleOptions.auditCacheMb = max(1, Int(args.next()!)!)
        case "--nats": nats = true
        case "--nats-ops": natsOptions.ops = Int(args.next()!)!
        case "--row-mix-ops": rowMixOps = Int(args.next()!)!
        case "--sqlite-seconds": sqliteBudget = Double(args.next()!)!
        case "--parse-file":
            try parseFile(args.next()!)
            return
        case "--apply-ceiling":
            try applyCeiling(args.next()!)
            return
        case "--spread":
            let file = args.next()!
            var maxPartitions = 8
            if args.next() == "--max-partitions" { maxPartitions = Int(args.next()!)! }
            try spread(file, maxPartitions: maxPartitions)
            return
        default:
            print(
                "usage: teamlog-bench [--ops N] [--seed S] [--max-team N] [--out DIR] [--row-mix-ops N] [--sqlite-seconds S]"
            )
            print(
                "       teamlog-bench --scale [--scale-ops N] [--scale-chunk N] [--seed S] [--max-team N] [--out DIR]"
                    + " [--keep] [--scale-base-audit] [--scale-one-process] [--scale-audit-cache-mb N]")
            print("       teamlog-bench --nats [--nats-ops N] [--seed S] [--max-team N] [--out DIR]")
            print("       teamlog-bench --apply-ceiling STORE")
            print("       teamlog-bench --spread FILE [--max-partitions N]")
            print(
                "       teamlog-bench --stream [--stream-rate OPS/S] [--stream-seconds S] [--stream-warm-up N] [--stream-live-warm-up N]"
                    + " [--stream-latency-log FILE] [--stream-child-args \"ARGS\"] [--stream-backup-at S | --stream-audit-at S] [--stream-side-args \"ARGS\"]"
                    + " [--flush-ms T] [--stream-emit all|events] [--seed S] [--max-team N] [--out DIR]")
            exit(2)
        }
    }
    if scale {
        try ScaleBench(options: scaleOptions).run()
        return
    }
    if stream {
        try StreamBench(options: streamOptions).run()
        return
    }
    if nats {
        try NATSBench(options: natsOptions).run()
        return
    }
    mkdir(outDir, 0o755)  // may exist
    let batch = 10_000
    print("generating \(ops) ops (seed \(options.seed), supergroups up to \(options.maxTeam) members)…")
    var workload = MixedWorkload(options: options)
    var lines: [[UInt8]] = []
    lines.reserveCapacity(ops)
    for _ in 0..<ops { lines.append(Array(workload.next().utf8)) }
    let bytes = lines.reduce(0) { $0 + $1.count + 1 }

    // 1. JSON Lines parsing alone.
    var t = now()
    var parsed: [Op] = []
    parsed.reserveCapacity(ops)
    for line in lines {
        if case .success(let op) = line.withUnsafeBytes({ OpParser.parse(line: $0) }) { parsed.append(op) }
    }
    let parseSeconds = now() - t

    // 2. teamlog on pre-parsed ops: decide + log + projections + fan-out, durable batches, no output.
    let dirA = tempDir("ops")
    defer { removeDirectoryTree(dirA) }
    var storeOptions = Store.Options()
    storeOptions.mapSize = 1 << 30
    let store = try Store(path: dirA, options: storeOptions)
    store.wantsDeliveries = false
    t = now()
    var accepted = 0
    var mainMessages = 0  // accepted message.send ops
    for (i, op) in parsed.enumerated() {
        if case .accepted = try store.submit(op, now: 0) {
            accepted += 1
            if case .messageSend = op.body { mainMessages += 1 }
        }
        // The CLI's batch path: each full batch is written and fsynced by the committer thread while
        // this one applies the next.
        if (i + 1) % batch == 0 { try store.beginCommit() }
    }
    try store.commit()
    let opsSeconds = now() - t
    let stats = store.fanOutStats
    let storeBytes = store.env.usedBytes

    // 3. JSON Lines end to end: parse + decide + store + project + fan-out, through the processor.
    let dirB = tempDir("jsonl")
    defer { removeDirectoryTree(dirB) }
    let storeB = try Store(path: dirB, options: storeOptions)
    var popts = Processor.Options()
    popts.emit = .none
    popts.batchSize = batch
    let processor = Processor(store: storeB, options: popts, clock: { 0 }) { _ in }
    let file = dirB + "/ops.jsonl"
    writeFile(file, lines.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n") + "\n")
    let fd = open(file, O_RDONLY | O_CLOEXEC)
    var reader = LineReader(fd: fd)
    t = now()
    try processor.run(&reader)  // the CLI's path: reading and parsing on a second thread
    let jsonlSeconds = now() - t
    close(fd)
    unlink(file)
    storeB.close()

    // 4. The limit: raw LMDB appends of the same encoded event records, same batches, durable commits.
    var records: [[UInt8]] = []
    try store.env.read { txn in
        try txn.forEach(store.env.openHandle("log", create: false)) { _, value in
            records.append(Array(value))
            return true
        }
    }
    let dirC = tempDir("raw")
    defer { removeDirectoryTree(dirC) }
    var envOptions = Environment.Options()
    envOptions.mapSize = 1 << 30
    let raw = try Environment(path: dirC, options: envOptions)
    let rawLog = try raw.openHandle("log")
    t = now()
    var seq: UInt64 = 0
    var start = 0
    while start < records.count {
        let end = min(start + batch, records.count)
        try raw.write { txn in
            for r in records[start..<end] {
                seq += 1
                try txn.put(rawLog, key: BigEndianUInt64.encoded(seq), value: r, flags: .append)
            }
        }
        start = end
    }
    let rawSeconds = now() - t

    // 5. Replay (audit) of the whole log.
    t = now()
    let report = try store.audit()
    let auditSeconds = now() - t
    precondition(report.ok, "audit failed")

    // 5b. The domain's apply alone: the same events, decoded up front, applied to a plain in-memory
    // `World` on one thread — no chain check, no store, no change tracking, no deliveries. No replay of
    // this domain (audit, `--at`, repair) can be faster than this on one core.
    var replayEvents: [Event] = []
    try store.forEachEvent { replayEvents.append($0) }
    var bare = BareReplay(config: store.world.config)
    let applySeconds = bare.apply(replayEvents)
    // The writer's teams are the resident ones: at most all of them.
    precondition(bare.world.teams.count >= store.world.teams.count, "the bare replay lost teams")
    replayEvents = []

    // 6. The fan-out core vs a naive per-member dictionary loop, on the biggest team of the run.
    let biggest = store.world.teams.values.filter { !$0.dismissed }.max { $0.memberCount < $1.memberCount }!
    var fan = FanOut()
    let coreMessages = 20_000
    t = now()
    var sink = 0
    for i in 0..<coreMessages {
        let slot = i % max(1, biggest.slots.count)
        fan.run(biggest.bits, FanOut.Message(senderSlot: slot, senderIsAdmin: i % 50 == 0))
        sink &+= Int(fan.alerted[0] & 1)
    }
    let coreSeconds = now() - t
    var naive: [Id: Member] = [:]
    for m in biggest.slots.compactMap({ $0 }) { naive[m.user] = m }
    let roster = biggest.roster.map(\.user)
    let naiveMessages = max(1, coreMessages / 100)
    t = now()
    for i in 0..<naiveMessages {
        let sender = roster[i % roster.count]
        let senderAdmin = naive[sender]!.role.isAdmin
        for user in roster where user != sender {
            let m = naive[user]!
            if m.notify == .none || (m.notify == .managerOnly && !senderAdmin) { continue }
            sink &+= 1
        }
    }
    let naiveSeconds = now() - t

    // 7. Stream mode: commit latency at a fixed offered rate (group commit every 2 ms or 1,000 ops), in
    // steady state: the first half of the workload (which creates the teams, supergroups included) is
    // ingested first in batches, untimed; the rest is offered at the fixed rate.
    let dirD = tempDir("stream")
    defer { removeDirectoryTree(dirD) }
    let storeD = try Store(path: dirD, options: storeOptions)
    storeD.wantsDeliveries = false
    let warmUp = parsed.count / 2
    for (n, op) in parsed[..<warmUp].enumerated() {
        _ = try storeD.submit(op, now: 0)
        if (n + 1) % batch == 0 { try storeD.beginCommit() }
    }
    try storeD.commit()
    let offered = 50_000.0
    let streamEnd = min(parsed.count, warmUp + 100_000)
    // Like `ingest --follow`: a batch commits 2 ms after its first op was taken (or at 1,000 ops), so a
    // backlog makes batches bigger rather than commits more frequent. Latency is from the arrival (due
    // time) of a batch's first op to the end of its commit.
    var latencies: [Double] = []
    var batchArrival: Double?  // due time of the batch's first op
    var batchOpened = 0.0  // when it was taken
    let begin = now()
    var i = warmUp
    var commitSeconds = 0.0  // time inside commits (encode, write, fsync), for the profile of a miss
    func streamCommit() throws {
        let c = now()
        try storeD.commit()
        let end = now()
        commitSeconds += end - c
        latencies.append(end - batchArrival!)
        batchArrival = nil
    }
    while i < streamEnd {
        let due = begin + Double(i - warmUp) / offered
        let clock = now()
        if clock < due {
            if batchArrival != nil && clock - batchOpened >= 0.002 { try streamCommit() }
            continue
        }
        _ = try storeD.submit(parsed[i], now: 0)
        if batchArrival == nil {
            batchArrival = due
            batchOpened = clock
        }
        i += 1
        if storeD.pendingCount >= 1_000 || now() - batchOpened >= 0.002 { try streamCommit() }
    }
    if batchArrival != nil { try streamCommit() }
    let streamSeconds = now() - begin
    latencies.sort()
    let p50 = latencies[latencies.count / 2] * 1000
    let p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)] * 1000

    // 8. Per-recipient rows in SQLite vs teamlog, on a mix whose teams go up to 2,000 members.
    var rowOptions = options
    rowOptions.maxTeam = 2_000
    var rowWorkload = MixedWorkload(options: rowOptions)
    var rowOps: [Op] = []
    for _ in 0..<rowMixOps {
        if case .success(let op) = OpParser.parse(line: rowWorkload.next()) { rowOps.append(op) }
    }
    let dirE = tempDir("rows-teamlog")
    defer { removeDirectoryTree(dirE) }
    let storeE = try Store(path: dirE, options: storeOptions)
    storeE.wantsDeliveries = false
    // Elapsed time and messages at the end of each batch, to compare on the prefix the baseline finishes.
    var teamlogAtBatch: [(seconds: Double, messages: Int, ops: Int, stats: FanOutStats, bytes: Int)] = []
    var teamlogMessages = 0
    t = now()
    for (i, op) in rowOps.enumerated() {
        if case .accepted = try storeE.submit(op, now: 0), case .messageSend = op.body { teamlogMessages += 1 }
        if (i + 1) % batch == 0 || i + 1 == rowOps.count {
            try storeE.commit()
            let elapsed = now() - t
            teamlogAtBatch.append((elapsed, teamlogMessages, i + 1, storeE.fanOutStats, storeE.env.usedBytes))
        }
    }
    let rowConfig = storeE.world.config
    storeE.close()
    let dirF = tempDir("rows-sqlite")
    defer { removeDirectoryTree(dirF) }
    print("per-recipient-row SQLite baseline (up to \(fmt(sqliteBudget)) s)…")
    let baseline = try runPerRecipientRows(rowOps, config: rowConfig, batch: batch, budget: sqliteBudget, dir: dirF)
    // Both rates over the same prefix of the mix: the baseline stops at a batch boundary when out of time.
    let prefix = teamlogAtBatch[(baseline.opsDone + batch - 1) / batch - 1]
    let teamlogMessageRate = Double(prefix.messages) / prefix.seconds
    let baselineMessageRate = Double(baseline.messages) / baseline.seconds

    let rows = [
        Row(
            name: "teamlog ops (pre-parsed, durable batches)", value: Double(parsed.count) / opsSeconds, unit: "ops/s",
            note:
                "≥ 25% of the raw limit: \(fmt(100 * (Double(parsed.count) / opsSeconds) / (Double(records.count) / rawSeconds), 1))%"
        ),
        Row(
            name: "raw LMDB MDB_APPEND (the limit)", value: Double(records.count) / rawSeconds, unit: "records/s",
            note: "same bytes, same batches"),
        Row(
            name: "JSON Lines end to end", value: Double(lines.count) / jsonlSeconds, unit: "ops/s",
            note: "target ≥ 400,000"),
        Row(
            name: "JSON parsing alone", value: Double(lines.count) / parseSeconds, unit: "lines/s",
            note: "\(fmt(Double(bytes) / parseSeconds / 1e6, 1)) MB/s"),
        Row(
            name: "member decisions (in ingest)", value: Double(stats.memberDecisions) / opsSeconds,
            unit: "decisions/s", note: "\(fmt(Double(stats.messages))) messages and tips"),
        Row(
            name: "deliveries (in ingest)", value: Double(stats.deliveries) / opsSeconds, unit: "deliveries/s", note: ""
        ),
        Row(
            name: "fan-out core, \(biggest.memberCount) members",
            value: Double(biggest.memberCount * coreMessages) / coreSeconds, unit: "decisions/s",
            note:
                "\(fmt(coreSeconds / Double(coreMessages) * 1e9)) ns/message; \(fmt((Double(biggest.memberCount * coreMessages) / coreSeconds) / (Double(biggest.memberCount * naiveMessages) / naiveSeconds), 0))× the naive loop"
        ),
        Row(
            name: "teamlog messages, 2,000-member mix", value: teamlogMessageRate, unit: "messages/s",
            note:
                "≥ 1,000× the per-recipient rows: \(fmt(teamlogMessageRate / max(baselineMessageRate, 1e-9)))×"
        ),
        Row(
            name: "per-recipient rows (SQLite), same mix", value: baselineMessageRate, unit: "messages/s",
            note:
                "WAL, synchronous=FULL, one transaction per \(fmt(Double(batch))) ops; \(fmt(Double(baseline.messages))) messages in the first \(fmt(Double(baseline.opsDone))) ops (both rates on that prefix)"
        ),
        Row(
            name: "naive per-member loop", value: Double(biggest.memberCount * naiveMessages) / naiveSeconds,
            unit: "decisions/s", note: "dictionary lookup per member"),
        Row(
            name: "replay (audit)", value: Double(report.events) / auditSeconds, unit: "events/s",
            note: "target ≥ 2,000,000"),
        Row(
            name: "domain apply alone (in memory)", value: Double(report.events) / applySeconds,
            unit: "events/s",
            note:
                "the same events decoded up front, applied to a plain World on one thread: the ceiling of any replay; the audit reaches \(fmt(100 * applySeconds / auditSeconds))% of it"
        ),
        Row(
            name: "stream commit latency p50 / p99", value: p99, unit: "ms (p99)",
            note:
                "p50 \(fmt(p50, 2)) ms at \(fmt(offered)) ops/s offered for \(fmt(Double(streamEnd - warmUp))) ops after a \(fmt(Double(warmUp)))-op warm-up (\(fmt(Double(streamEnd - warmUp) / streamSeconds)) ops/s achieved; \(fmt(Double(latencies.count))) commits, \(fmt(commitSeconds / Double(max(1, latencies.count)) * 1000, 2)) ms each on average, \(fmt(100 * commitSeconds / streamSeconds))% of the time in commits); target p99 ≤ 5 ms"
        ),
        Row(
            name: "store size", value: Double(storeBytes) / Double(max(1, accepted)), unit: "bytes/event",
            note: "\(fmt(Double(storeBytes) / 1e6, 1)) MB for \(fmt(Double(accepted))) events"),
        Row(name: "peak memory", value: peakRSSMiB(), unit: "MiB", note: "whole process"),
    ]
    var table = "| measure | value | unit | note |\n|---|---:|---|---|\n"
    for r in rows { table += "| \(r.name) | \(fmt(r.value, r.value < 100 ? 2 : 0)) | \(r.unit) | \(r.note) |\n" }

    // The same measures side by side, for teamlog and each baseline ("—": the design has no such thing).
    func cell(_ x: Double?) -> String { x.map { fmt($0, $0 < 100 ? 2 : 0) } ?? "—" }
    let opsRate = Double(parsed.count) / opsSeconds
    let rawRate = Double(records.count) / rawSeconds
    let rawBytes = Double(raw.usedBytes) / Double(max(1, records.count))
    let naiveRate = Double(biggest.memberCount * naiveMessages) / naiveSeconds
    let prefixOps = Double(prefix.ops)
    let sides: [(String, String, [Double?])] = [
        (
            "teamlog", "main mix",
            [
                opsRate, Double(mainMessages) / opsSeconds, Double(stats.memberDecisions) / opsSeconds,
                Double(stats.deliveries) / opsSeconds, Double(report.events) / auditSeconds,
                Double(storeBytes) / Double(max(1, accepted)),
            ]
        ),
        ("raw LMDB append (the limit)", "main mix's event records", [rawRate, nil, nil, nil, nil, rawBytes]),
        ("naive per-member loop", "biggest team of the main mix", [nil, nil, naiveRate, nil, nil, nil]),
        (
            "teamlog", "2,000-member mix, first \(fmt(prefixOps)) ops",
            [
                prefixOps / prefix.seconds, teamlogMessageRate, Double(prefix.stats.memberDecisions) / prefix.seconds,
                Double(prefix.stats.deliveries) / prefix.seconds, nil, Double(prefix.bytes) / prefixOps,
            ]
        ),
        (
            "per-recipient rows (SQLite)", "same ops",
            [
                Double(baseline.opsDone) / baseline.seconds, baselineMessageRate,
                Double(baseline.memberDecisions) / baseline.seconds, Double(baseline.inboxRows) / baseline.seconds,
                nil, Double(baseline.bytes) / Double(max(1, baseline.opsDone)),
            ]
        ),
    ]
    table +=
        "\n| system | workload | ops/s | messages/s | member decisions/s | deliveries/s | replay events/s | store bytes/op |\n"
        + "|---|---|---:|---:|---:|---:|---:|---:|\n"
    for (name, workload, values) in sides {
        table += "| \(name) | \(workload) | " + values.map(cell).joined(separator: " | ") + " |\n"
    }
    table +=
        "\nPeak memory is the whole process's (\(fmt(peakRSSMiB())) MiB: every store of the run, and the workloads). "
        + "The per-recipient rows keep team state in memory (the same domain) and store only messages, inbox rows, "
        + "unread counters and receipts; teamlog also stores team state and its log.\n"
    print(
        "\nteamlog-bench: \(fmt(Double(ops))) ops (\(fmt(Double(accepted))) accepted), seed \(options.seed), batches of \(batch)\n"
    )
    print(table)
    if sink == -1 { print("") }
    let md = "## teamlog-bench (\(fmt(Double(ops))) ops, seed \(options.seed))\n\n" + table
    writeFile(outDir + "/bench.md", md)
    writeFile(
        outDir + "/bench.svg",
        chart([
            ("raw LMDB append", Double(records.count) / rawSeconds), ("teamlog ops", Double(parsed.count) / opsSeconds),
            ("JSON Lines e2e", Double(lines.count) / jsonlSeconds), ("replay", Double(report.events) / auditSeconds),
            ("teamlog msgs, 2k mix", teamlogMessageRate), ("SQLite rows msgs, 2k mix", baselineMessageRate),
        ]))
    print("wrote \(outDir)/bench.md and \(outDir)/bench.svg")
}

/// `--parse-file FILE`: teamlog's op parser alone over the lines of FILE (beside the simdjson probe,
/// tools/simdjson-probe/run.sh), as lines/s and MB/s.
func parseFile(_ path: String) throws {
    guard let f = fopen(path, "r") else { throw BenchError("cannot open \(path)") }
    var lines: [[UInt8]] = []
    var bytes = 0
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    while true {
        let n = getline(&line, &capacity, f)
        if n < 0 { break }
        let count = n > 0 && line![n - 1] == 10 ? n - 1 : n
        lines.append(Array(UnsafeRawBufferPointer(start: line, count: count)))
        bytes += n
    }
    free(line)
    fclose(f)
    var accepted = 0
    let t = now()
    for l in lines {
        if case .success = l.withUnsafeBytes({ OpParser.parse(line: $0) }) { accepted += 1 }
    }
    let seconds = now() - t
    print(
        "teamlog OpParser (bytes to a validated Op): \(lines.count) lines in \(fmt(seconds, 3)) s = \(fmt(Double(lines.count) / seconds)) lines/s, \(fmt(Double(bytes) / seconds / 1e6, 1)) MB/s (\(accepted) ops, \(lines.count - accepted) rejected)"
    )
}

/// `--apply-ceiling STORE`: the store's committed events applied to a plain in-memory `World` on one thread,
/// decoded 65,536 at a time with only the applying timed — the domain's `apply` alone, without the chain
/// check, the store, change tracking or deliveries: no replay of this log (audit, `--at`, repair) can be
/// faster on one core. The whole history stays in memory (a bench, not a command: several GB at 5M events).
/// Prints one line `apply-ceiling: N events, S s of apply, R events/s`. `--scale` runs it after its audit.
func applyCeiling(_ path: String) throws {
    let store = try Store.reader(at: path)
    defer { store.close() }
    var bare = BareReplay(config: store.world.config)
    var chunk: [Event] = []
    chunk.reserveCapacity(65_536)
    var (events, seconds) = (0, 0.0)
    func applyChunk() {
        seconds += bare.apply(chunk)
        events += chunk.count
        chunk.removeAll(keepingCapacity: true)
    }
    var broken: Store.ChainProblem?
    try store.forEachEvent(
        { event in
            chunk.append(event)
            if chunk.count == 65_536 { applyChunk() }
        }, problem: { broken = $0 })
    applyChunk()
    if let broken { throw BenchError("the log's chain breaks at seq \(broken.seq): \(broken.message)") }
    print(
        "apply-ceiling: \(events) events, \(fmt(seconds, 3)) s of apply, \(fmt(Double(events) / max(seconds, 1e-9))) events/s (\(bare.world.teams.count) teams)"
    )
}

/// The domain's `apply` alone: a plain in-memory `World` with no change tracking and no deliveries, for
/// the "domain apply alone" row and `--apply-ceiling`.
struct BareReplay {
    private(set) var world: World
    private var out: [Output] = []
    private var stats = FanOutStats()

    init(config: Config) {
        world = World(config: config)
        world.tracksChanges = false
        world.wantsDeliveries = false
    }

    /// Applies `events` in order; returns the seconds it took.
    mutating func apply(_ events: [Event]) -> Double {
        let t = now()
        for event in events {
            out.removeAll(keepingCapacity: true)
            world.apply(event, into: &out, counting: &stats)
        }
        return now() - t
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func writeFile(_ path: String, _ text: String) {
    guard let f = fopen(path, "w") else {
        print("teamlog-bench: cannot write \(path): \(String(cString: strerror(errno)))")
        return
    }
    _ = Array(text.utf8).withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

/// A horizontal bar chart of rates (events, ops or messages per second) on a log scale (1/s to the top).
func chart(_ bars: [(String, Double)]) -> String {
    let width = 560.0
    let top = log10(max(10, bars.map(\.1).max() ?? 10))
    var svg =
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width) + 330)\" height=\"\(bars.count * 34 + 40)\" font-family=\"sans-serif\" font-size=\"13\">\n"
    for (i, (name, value)) in bars.enumerated() {
        let y = 10 + i * 34
        let w = max(1, log10(max(1, value)) / top * width)
        svg += "<text x=\"0\" y=\"\(y + 17)\">\(name)</text>\n"
        svg += "<rect x=\"190\" y=\"\(y)\" width=\"\(fmt(w, 1))\" height=\"24\" fill=\"#4a7bd0\"/>\n"
        svg += "<text x=\"\(fmt(200 + w, 1))\" y=\"\(y + 17)\">\(fmt(value)) /s</text>\n"
    }
    let y = 10 + bars.count * 34
    svg += "<text x=\"190\" y=\"\(y + 14)\" fill=\"#666\">log scale</text>\n"
    return svg + "</svg>\n"
}

do { try run() } catch {
    print("teamlog-bench: \(error)")
    exit(1)
}
