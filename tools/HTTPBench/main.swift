// teamlog-http-bench: issue 12's bars for `teamlog serve`, in one run beside the CLI's batch path.
//
//   swift build -c release --product teamlog-http-bench
//   .build/release/teamlog-http-bench [--ops N] [--clients N] [--per-request N] [--ingest-rate OPS/S]
//                                     [--query-rate Q/S] [--seconds S] [--seed S] [--max-team N] [--out DIR]
//
// 1. The CLI's batch path (`teamlog ingest FILE`: the Processor over a LineReader, durable batches of
//    10,000, every record produced) on the generated workload: ops/s.
// 2. The same lines over HTTP to a real server (WriterService + TeamLogServer on a loopback port, durable
//    group commits) from N concurrent clients (default 64) posting P ops per request (default 100): ops/s,
//    and its ratio to (1) — the bar is >= 50%.
// 3. Query latency while ingesting: a server preloaded with part of the workload takes the rest at a paced
//    rate (default 20,000 ops/s in requests of 100) while queries (team and unread, ids from the workload)
//    are sent at a paced rate (default 2,000/s, open loop: each at its scheduled time, whatever the ones
//    before it are doing): p50/p99/max latency — the bar is p99 <= 5 ms.
//
// The clients run in this process, on the same cores as the server: the numbers are for one machine, and
// the ratios within one run are what to compare. Writes DIR/bench-http.md.

import AsyncHTTPClient
import Logging
import NIOCore
import ServiceLifecycle
import TeamLog
import TeamLogHTTP
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads
import TeamLogWorkload

#if canImport(Glibc)
    import Glibc
#endif

struct Settings {
    /// 300,000: phase 3 preloads up to 500 requests (50,000 ops) and then needs `ingestRate × seconds`
    /// (200,000) more; with 200,000 it ran out after 7.5 s and reported ~15,000 ops/s achieved.
    var ops = 300_000
    var clients = 64
    var perRequest = 100
    var ingestRate = 20_000.0
    var queryRate = 2_000.0
    var seconds = 10.0
    var seed: UInt64 = 42
    var maxTeam = 2_000
    var outDir = "."
    /// Only the query-latency measurement (3), for tuning.
    var onlyQueries = false
    /// `?emit=` of the latency phase's ingest requests (`all`: every record in each answer, as in phase 2;
    /// `events`: what an application server posting ops needs, the deliveries going to the record stream).
    var ingestEmit = "all"
    /// Writes each query's scheduled time (s from the start) and latency (ms) here, for finding stalls.
    var latencyLog: String?
}

func now() -> Double { MonotonicClock.seconds() }

/// A new directory under `$TMPDIR` (or /tmp), as `teamlog-bench` makes its stores.
func tempDir(_ name: String) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/teamlog-http-bench-\(name)-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: made!)
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let f = fopen(path, "w")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

func fmt(_ x: Double, _ digits: Int = 0) -> String {
    guard x.isFinite else { return "—" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let n = Int((x * scale).rounded())
    if digits == 0 { return String(n) }
    let frac = String(abs(n) % Int(scale))
    return "\(n / Int(scale)).\(String(repeating: "0", count: digits - frac.count))\(frac)"
}

/// A server on a loopback port over a new store, run as the CLI runs it (writer and server in one
/// ServiceGroup).
final class BenchServer: @unchecked Sendable {
    let directory: String
    let writer: WriterService
    let server: TeamLogServer
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let base: String

    init() async throws {
        directory = tempDir("serve")
        var options = WriterService.Options()
        options.store.mapSize = 1 << 30
        if let ms = getenv("TL_CHECKPOINT_MS") { options.store.checkpointMs = Int(String(cString: ms))! }
        let metrics = ServerMetrics()
        writer = WriterService(path: directory + "/store", options: options) { metrics.record($0) }
        var config = ServerConfiguration()
        config.port = 0
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        server = TeamLogServer(writer: writer, configuration: config, metrics: metrics, logger: logger)
        group = ServiceGroup(configuration: .init(services: [WriterLifecycle(writer: writer), server], logger: logger))
        running = Task { [group] in try await group.run() }
        guard let port = await server.port() else { throw BenchError("the server did not start") }
        base = "http://127.0.0.1:\(port)"
        while writer.state == .opening { try await Task.sleep(for: .milliseconds(5)) }
        guard writer.state == .ready else { throw BenchError("store: \(writer.state)") }
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        removeDirectoryTree(directory + "/store")
        removeDirectoryTree(directory)
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Posts one body; returns the number of `event` records answered.
func post(_ client: HTTPClient, _ url: String, _ body: [UInt8]) async throws -> Int {
    var request = HTTPClientRequest(url: url)
    request.method = .POST
    request.headers.add(name: "Content-Type", value: "application/x-ndjson")
    request.body = .bytes(ByteBuffer(bytes: body))
    let response = try await client.execute(request, timeout: .seconds(120))
    let bytes = try await response.body.collect(upTo: 1 << 30)
    guard response.status == .ok else { throw BenchError("POST answered \(response.status)") }
    // Counts lines that start with the event record's kind (the client shares the server's cores: no
    // allocation per candidate).
    let needle = Array("{\"kind\":\"event\"".utf8)
    return bytes.withUnsafeReadableBytes { raw in
        var events = 0
        var lineStart = 0
        while lineStart + needle.count <= raw.count {
            if memcmp(raw.baseAddress! + lineStart, needle, needle.count) == 0 { events += 1 }
            guard let newline = raw[lineStart...].firstIndex(of: 0x0A) else { break }
            lineStart = newline + 1
        }
        return events
    }
}

/// A GET; returns its latency in seconds (from `start`), or nil on a non-200.
func get(_ client: HTTPClient, _ url: String) async -> Bool {
    var request = HTTPClientRequest(url: url)
    request.method = .GET
    guard let response = try? await client.execute(request, timeout: .seconds(30)),
        (try? await response.body.collect(upTo: 1 << 24)) != nil
    else { return false }
    return response.status == .ok || response.status == .notFound
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

/// The next index of a shared sequence (for clients taking chunks in order).
final class Ticket: @unchecked Sendable {
    private let monitor = Monitor()
    private var next = 0
    func take() -> Int {
        monitor.locked {
            defer { next += 1 }; return next
        }
    }
}

@main
struct HTTPBench {
    static func main() async throws {
        var s = Settings()
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let arg = args.next() {
            switch arg {
            case "--ops": s.ops = Int(args.next()!)!
            case "--clients": s.clients = Int(args.next()!)!
            case "--per-request": s.perRequest = Int(args.next()!)!
            case "--ingest-rate": s.ingestRate = Double(args.next()!)!
            case "--query-rate": s.queryRate = Double(args.next()!)!
            case "--seconds": s.seconds = Double(args.next()!)!
            case "--seed": s.seed = UInt64(args.next()!)!
            case "--max-team": s.maxTeam = Int(args.next()!)!
            case "--out": s.outDir = args.next()!
            case "--only-queries": s.onlyQueries = true
            case "--latency-log": s.latencyLog = args.next()!
            case "--ingest-emit": s.ingestEmit = args.next()!
            default:
                print(
                    "usage: teamlog-http-bench [--ops N] [--clients N] [--per-request N] [--ingest-rate OPS/S] [--query-rate Q/S] [--seconds S] [--seed S] [--max-team N] [--out DIR] [--only-queries] [--ingest-emit all|events|none] [--latency-log FILE]"
                )
                exit(2)
            }
        }
        try await run(s)
    }

    static func run(_ s: Settings) async throws {
        var workloadOptions = MixedWorkload.Options()
        workloadOptions.seed = s.seed
        workloadOptions.maxTeam = s.maxTeam
        workloadOptions.users = 50_000
        print("generating \(s.ops) ops (seed \(s.seed), supergroups up to \(s.maxTeam) members)…")
        var workload = MixedWorkload(options: workloadOptions)
        let lines: [[UInt8]] = (0..<s.ops).map { _ in Array(workload.next().utf8) }
        var teams: [String] = []
        var users: [String] = []
        for line in lines.prefix(50_000) {
            guard case .object(let pairs)? = try? JSONParser.parse(line) else { continue }
            let fields = Dictionary(pairs, uniquingKeysWith: { a, _ in a })
            if fields["op"] == .string("team.create"), case .string(let team)? = fields["team"] { teams.append(team) }
            if case .string(let actor)? = fields["actor"], users.count < 5_000 { users.append(actor) }
        }

        var clientConfig = HTTPClient.Configuration()
        clientConfig.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(256, s.clients * 2)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfig)
        let chunks: [[UInt8]] = stride(from: 0, to: lines.count, by: s.perRequest).map { start in
            Array(lines[start..<min(start + s.perRequest, lines.count)].joined(separator: [0x0A])) + [0x0A]
        }
        var (cliRate, cliAccepted, httpRate, httpAccepted) = (Double.nan, 0, Double.nan, 0)
        if !s.onlyQueries {
            (cliRate, cliAccepted, httpRate, httpAccepted) = try await ingestRates(s, lines, chunks, client)
        }

        // 3. Query latency while ingesting at a paced rate.
        print(
            "3. queries at \(fmt(s.queryRate)) q/s while ingesting \(fmt(s.ingestRate)) ops/s (emit=\(s.ingestEmit)) for \(fmt(s.seconds)) s…"
        )
        let live = try await BenchServer()
        let preload = min(chunks.count / 4, 500)
        for k in 0..<preload { _ = try await post(client, live.base + "/v1/ops", chunks[k]) }
        let ingestChunks = Array(chunks[preload...])
        let requestInterval = Double(s.perRequest) / s.ingestRate
        let queryInterval = 1 / s.queryRate
        let start = now() + 0.05
        let queryURLs: [String] =
            teams.prefix(500).map { live.base + "/v1/teams/\($0)" }
            + users.prefix(500).map { live.base + "/v1/users/\($0)/unread" }
        let (timed, failures, posted, lateQueries): ([(Double, Double)], Int, Int, Int) = await withTaskGroup(
            of: ((Double, Double)?, Int).self
        ) { group in
            // Ingest: a request every `requestInterval`, each on its own task (open loop).
            group.addTask {
                await withTaskGroup(of: Int.self) { inner in
                    var k = 0
                    while k < ingestChunks.count {
                        let due = start + Double(k) * requestInterval
                        if due > start + s.seconds { break }
                        let wait = due - now()
                        if wait > 0 { try? await Task.sleep(for: .microseconds(Int(wait * 1e6))) }
                        let chunk = ingestChunks[k]
                        inner.addTask {
                            (try? await post(client, live.base + "/v1/ops?emit=\(s.ingestEmit)", chunk)) != nil ? 1 : 0
                        }
                        k += 1
                    }
                    var ok = 0
                    for await n in inner { ok += n }
                    return (nil, -ok)
                }
            }
            // Queries: one every `queryInterval`, latency from its scheduled time.
            var q = 0
            var late = 0
            while true {
                let due = start + Double(q) * queryInterval
                if due > start + s.seconds { break }
                let wait = due - now()
                if wait > 0 { try? await Task.sleep(for: .microseconds(Int(wait * 1e6))) }
                if now() - due > 0.001 { late += 1 }
                let url = queryURLs[q % queryURLs.count]
                group.addTask {
                    let ok = await get(client, url)
                    return (ok ? (due - start, now() - due) : nil, ok ? 0 : 1)
                }
                q += 1
            }
            var latencies: [(Double, Double)] = []
            var failures = 0
            var posted = 0
            for await (latency, n) in group {
                if let latency { latencies.append(latency) }
                if n < 0 { posted = -n } else { failures += n }
            }
            return (latencies, failures, posted, late)
        }
        let elapsed = now() - start
        try await live.stop()
        try await client.shutdown()
        let sorted = timed.map(\.1).sorted()
        if let path = s.latencyLog {
            let text = timed.sorted { $0.0 < $1.0 }.map { "\($0.0) \($0.1 * 1000)\n" }.joined()
            writeFile(path, Array(text.utf8))
        }
        let p50 = percentile(sorted, 0.5) * 1000
        let p99 = percentile(sorted, 0.99) * 1000
        let maxMs = (sorted.last ?? .nan) * 1000
        let ingestAchieved = Double(posted * s.perRequest) / elapsed
        let queryAchieved = Double(sorted.count) / elapsed
        print(
            "   queries: \(sorted.count) answered (\(failures) failed), p50 \(fmt(p50, 2)) ms, p99 \(fmt(p99, 2)) ms, max \(fmt(maxMs, 1)) ms; achieved \(fmt(queryAchieved)) q/s and \(fmt(ingestAchieved)) ops/s ingested; \(lateQueries) queries sent over 1 ms late by the load generator"
        )

        let report = """
            | measure | value | bar |
            |---|---|---|
            | CLI batch path (`ingest FILE`, durable batches of 10,000, all records) | \(fmt(cliRate)) ops/s (\(cliAccepted) accepted) | |
            | HTTP ingest, \(s.clients) clients × \(s.perRequest) ops per request, durable group commits | \(fmt(httpRate)) ops/s (\(httpAccepted) accepted) | |
            | HTTP / CLI | \(fmt(100 * httpRate / cliRate, 1))% | ≥ 50% |
            | query latency at \(fmt(s.queryRate)) q/s while ingesting \(fmt(s.ingestRate)) ops/s (achieved \(fmt(queryAchieved)) q/s, \(fmt(ingestAchieved)) ops/s) | p50 \(fmt(p50, 2)) ms, p99 \(fmt(p99, 2)) ms, max \(fmt(maxMs, 1)) ms | p99 ≤ 5 ms |

            \(s.ops) ops (MixedWorkload seed \(s.seed), supergroups up to \(s.maxTeam) members); clients in the same process as the server.
            """
        mkdir(s.outDir, 0o755)
        writeFile(s.outDir + "/bench-http.md", Array((report + "\n").utf8))
        print("\n" + report)
    }

    /// 1 and 2: the CLI's batch rate and the HTTP rate on the same lines.
    static func ingestRates(_ s: Settings, _ lines: [[UInt8]], _ chunks: [[UInt8]], _ client: HTTPClient) async throws
        -> (Double, Int, Double, Int)
    {
        // 1. The CLI's batch path.
        let cliDir = tempDir("cli")
        var storeOptions = Store.Options()
        storeOptions.mapSize = 1 << 30
        let cliStore = try Store(path: cliDir + "/store", options: storeOptions)
        var popts = Processor.Options()
        popts.emit = .all
        let processor = Processor(store: cliStore, options: popts) { _ in }
        let file = cliDir + "/ops.jsonl"
        writeFile(file, Array(lines.joined(separator: [0x0A])) + [0x0A])
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        var reader = LineReader(fd: fd)
        print("1. CLI batch path (teamlog ingest FILE)…")
        var t = now()
        try processor.run(&reader)
        let cliSeconds = now() - t
        close(fd)
        let cliAccepted = processor.summary.accepted
        cliStore.close()
        removeDirectoryTree(cliDir + "/store")
        unlink(file)
        removeDirectoryTree(cliDir)
        let cliRate = Double(s.ops) / cliSeconds
        print("   \(fmt(cliRate)) ops/s (\(cliAccepted) accepted, \(fmt(cliSeconds, 2)) s)")

        // 2. HTTP ingest from concurrent clients.
        print("2. HTTP: \(s.clients) clients posting \(s.perRequest) ops per request…")
        let ingest = try await BenchServer()
        let ticket = Ticket()
        t = now()
        let httpAccepted = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<s.clients {
                group.addTask {
                    var accepted = 0
                    while true {
                        let k = ticket.take()
                        guard k < chunks.count else { return accepted }
                        accepted += try await post(client, ingest.base + "/v1/ops", chunks[k])
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        let httpSeconds = now() - t
        try await ingest.stop()
        let httpRate = Double(s.ops) / httpSeconds
        print(
            "   \(fmt(httpRate)) ops/s (\(httpAccepted) accepted, \(fmt(httpSeconds, 2)) s): \(fmt(100 * httpRate / cliRate, 1))% of the CLI batch rate"
        )

        return (cliRate, cliAccepted, httpRate, httpAccepted)
    }

}
