import NATS
import NATSServer
import TeamLog
import TeamLogNATS
import TeamLogRuntime
import TeamLogStore
import TeamLogWorkload
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A NATS deployment of teamlog for a test: real `nats-server` processes (one, or a 3-node cluster),
/// `teamlog serve --nats` partition processes (real binaries, so they can be killed with SIGKILL), and
/// the checks every scenario ends with.
final class ClusterHarness {
    let directory = TemporaryDirectory("teamlog-nats")
    let partitions: Int
    private(set) var server: NATSServerProcess?
    private(set) var cluster: NATSCluster?
    private(set) var processes: [ChildProcess?]
    private var restarts = 0
    let replicas: Int
    /// Whether partitions get `--replicas` (without it they take the op stream's, which a router made).
    var passesReplicas = true

    init(partitions: Int, clusterNodes: Int = 1, serverArguments: [String] = []) throws {
        self.partitions = partitions
        processes = Array(repeating: nil, count: partitions)
        mkdir(directory.child("nats"), 0o755)
        if clusterNodes > 1 {
            cluster = try NATSCluster.start(nodes: clusterNodes, baseDir: directory.child("nats"))
            replicas = 3
        } else {
            server = try NATSServerProcess.start(storeDir: directory.child("nats"), extraArguments: serverArguments)
            replicas = 1
        }
    }

    deinit {
        for p in processes { p?.kill(SIGKILL) }
        for p in processes { _ = p?.wait() }
        cluster?.stop()
        server?.stop()
    }

    var urls: [String] { cluster?.urls ?? [server!.url] }

    func connect() throws -> NATSConnection {
        try NATSConnection(NATSConnection.Options(servers: urls))
    }

    func storePath(_ p: Int) -> String { directory.child("p\(p)") }

    /// Starts (or restarts) partition `p`'s process.
    func startPartition(_ p: Int) throws {
        restarts += 1
        processes[p] = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "serve", "--store", storePath(p), "--listen", "127.0.0.1:0", "--nats", urls.joined(separator: ","),
                "--partition", String(p), "--partitions", String(partitions),
                "--checkpoint-ops", "200",
            ] + (passesReplicas ? ["--replicas", String(replicas)] : []),
            stderr: directory.child("start-\(restarts).err"))
    }

    func startAll() throws { for p in 0..<partitions { try startPartition(p) } }

    func kill(_ p: Int) {
        processes[p]?.kill(SIGKILL)
        _ = processes[p]?.wait()
        processes[p] = nil
    }

    /// SIGTERM to every partition and waits: each must exit 0.
    func stopAll() throws -> [ChildProcess.Status] {
        for p in processes { p?.kill(SIGTERM) }
        let statuses = processes.compactMap { $0?.wait() }
        processes = Array(repeating: nil, count: partitions)
        return statuses
    }

    /// Routes `lines` in-process (the router `teamlog route` runs).
    func route(_ lines: [String], connection: NATSConnection) throws {
        var options = OpRouter.Options()
        options.partitions = partitions
        options.replicas = replicas
        options.window = 256
        let router = try OpRouter(connection: connection, options: options)
        for (i, line) in lines.enumerated() {
            try router.route(.text(number: i + 1, bytes: Array(line.utf8)), now: 5_000_000_000_000)
        }
        try router.flush()
    }

    /// Every message of `stream`, in stream order.
    static func messages(_ js: JetStream, _ stream: String) throws -> [NATSMessage] {
        let last = try js.streamLastSequence(stream)
        guard last > 0 else { return [] }
        return try (1...last).compactMap { try js.message(stream: stream, sequence: $0) }
    }

    /// Waits until every partition's committed source position is the last input of its subject and its
    /// outbox is empty (every record published and confirmed).
    func waitUntilCaughtUp(_ connection: NATSConnection, timeout: Double = 60) throws {
        let js = try connection.jetStream()
        let inputs = try Self.messages(js, TeamLogSubjects.opsStream)
        var expected = Array(repeating: UInt64(0), count: partitions)
        for m in inputs {
            guard let p = Int(m.subject.split(separator: ".").last ?? "") else { continue }
            expected[p] = max(expected[p], m.streamSequence ?? 0)
        }
        let queries = try ClusterQueries(connection: connection, partitions: partitions, timeoutMs: 2_000)
        let deadline = monotonicSeconds() + timeout
        var lastError = ""
        while true {
            var statuses: [JSONValue]?
            do { statuses = try queries.statuses() } catch { lastError = "\(error)" }
            if let statuses, statuses.count == partitions,
                statuses.enumerated().allSatisfy({ p, s in
                    s["sourcePosition"]?.intValue == Int64(expected[p]) && s["unpublished"]?.intValue == 0
                })
            {
                return
            }
            if monotonicSeconds() > deadline {
                var logs = ""
                for start in 1...restarts {
                    let text = (try? String(decoding: readBytes(directory.child("start-\(start).err")), as: UTF8.self)) ?? ""
                    logs += "\n--- start \(start) stderr:\n" + String(text.suffix(3_000))
                }
                throw ChildProcessError(
                    "partitions did not catch up: expected positions \(expected), statuses \(String(describing: statuses)), "
                        + "last query error: \(lastError)\(logs)")
            }
            sleepMs(50)
        }
    }

    // MARK: - Checks

    /// The records each partition must have published: its inputs, in stream order, through a fresh
    /// in-process store and processor (`--emit all`), one JSON line each.
    func expectedRecords(_ connection: NATSConnection) throws -> [[String]] {
        let js = try connection.jetStream()
        var perPartition: [[ParsedLine]] = Array(repeating: [], count: partitions)
        for m in try Self.messages(js, TeamLogSubjects.opsStream) {
            guard let p = Int(m.subject.split(separator: ".").last ?? "") else { continue }
            perPartition[p].append(PartitionWorker.parse(m))
        }
        return try perPartition.enumerated().map { p, lines in
            let dir = directory.child("reference-\(p)")
            let store = try Store(path: dir)
            var out: [UInt8] = []
            let processor = Processor(store: store) { out += $0 }
            for line in lines { try processor.process(line) }
            try processor.commit()
            store.close()
            return out.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// What is on `TEAMLOG_OUT` per partition, in order, with each message's id.
    func publishedRecords(_ connection: NATSConnection) throws -> [[(id: String, json: String)]] {
        let js = try connection.jetStream()
        var out: [[(String, String)]] = Array(repeating: [], count: partitions)
        for m in try Self.messages(js, TeamLogSubjects.outStream) {
            let parts = m.subject.split(separator: ".")
            guard parts.count == 4, let p = Int(parts[2]) else { continue }
            out[p].append((m.headers["Nats-Msg-Id"]?.first ?? "", String(decoding: m.data, as: UTF8.self)))
        }
        return out
    }

    /// Every answer for the ids `lines` name, normalized for comparison across logs: seq fields dropped
    /// (each partition has its own seqs), tip ids (`tip-SEQ`) masked, conversations in `to` order.
    static func answers(_ lines: [String], _ answer: (QueryKind, Id) throws -> JSONValue?) throws -> [String: String] {
        var ids: [QueryKind: Set<String>] = [:]
        for line in lines {
            guard let value = try? JSONParser.parse(Array(line.utf8)) else { continue }
            if let t = value["team"]?.stringValue { ids[.team, default: []].insert(t) }
            if let a = value["actor"]?.stringValue { ids[.unread, default: []].insert(a) }
            for m in value["members"]?.arrayValue ?? [] { if let u = m.stringValue { ids[.unread, default: []].insert(u) } }
            if let m = value["messageId"]?.stringValue {
                ids[.message, default: []].insert(m)
                ids[.receipts, default: []].insert(m)
            }
            if let c = value["channel"]?.stringValue { ids[.channel, default: []].insert(c) }
        }
        var out: [String: String] = [:]
        for (kind, set) in ids {
            for id in set {
                out["\(kind.rawValue) \(id)"] = try answer(kind, Id(id)).map { normalized($0).jsonString } ?? "none"
            }
        }
        return out
    }

    static func normalized(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let pairs):
            var kept = pairs.filter { $0.0 != "seq" && $0.0 != "lastReadSeq" }.map { ($0.0, normalized($0.1)) }
            if let i = kept.firstIndex(where: { $0.0 == "conversations" }), case .array(let cs) = kept[i].1 {
                kept[i].1 = .array(cs.sorted { $0.jsonString < $1.jsonString })
            }
            return .object(kept)
        case .array(let items): return .array(items.map(normalized))
        case .string(let s) where s.hasPrefix("tip-") && s.dropFirst(4).allSatisfy({ $0.isNumber || $0 == "." }):
            return .string("tip-*")  // tip ids are made of their seq
        default: return value
        }
    }

    /// The answers of one store that ingested `lines` directly (the single-store reference).
    func singleStoreAnswers(_ lines: [String]) throws -> [String: String] {
        let store = try Store(path: directory.child("single"))
        let processor = Processor(store: store, options: { var o = Processor.Options(); o.emit = .none; return o }()) { _ in }
        for (i, line) in lines.enumerated() { try processor.process(.text(number: i + 1, bytes: Array(line.utf8))) }
        try processor.commit()
        defer { store.close() }
        return try Self.answers(lines) { kind, id in
            try store.readCommitted { try kind.view(store, id, in: $0) }
        }
    }

    /// The workload: the mixed generator (team ops, team and p2p messages, receipts, reads, signaling,
    /// logins), small.
    static func workload(count: Int, seed: UInt64) -> [String] {
        var w = MixedWorkload(options: .init(seed: seed, users: 150, teams: 12, maxTeam: 50))
        return (0..<count).map { _ in w.next() }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func sleepMs(_ ms: Int) {
    var ts = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    _ = nanosleep(&ts, nil)
}

func readBytes(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw ChildProcessError("cannot open \(path)") }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n <= 0 { break }
        bytes += buffer[..<n]
    }
    return bytes
}

/// Writes `bytes` to `path`, replacing what it held.
func writeBytes(_ path: String, _ bytes: [UInt8]) throws {
    let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw ChildProcessError("cannot create \(path)") }
    defer { close(fd) }
    guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
        throw ChildProcessError("cannot write \(path)")
    }
}
