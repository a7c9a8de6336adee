import ArgumentParser
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization
import TeamLog
import TeamLogHTTP
import TeamLogNATS
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads
import UnixSignals

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `teamlog serve`: the processor as an HTTP service (docs/serve.md). One process owns the store; the
/// HTTP layer parses and prints, the runtime's `WriterService` group-commits.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Serve the store over HTTP: ops in, records out after each group commit, queries, a record stream, metrics."
    )

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "Address to listen on, HOST:PORT (port 0: any free port, printed on stdout in the \"serving\" line).")
    var listen = "127.0.0.1:8080"

    @Option(help: "A file holding the bearer token writes need (surrounding whitespace ignored).")
    var tokenFile: String?

    @Flag(help: "With --token-file, require the token for the /v1/ reads too.")
    var protectReads = false

    @Option(help: "Largest request body in bytes (larger: 413).")
    var bodyLimit: Int = ServerConfiguration().bodyLimit

    @Option(help: "Most lines a POST /v1/ops body may hold (more: 413 tooManyLines, nothing decided).")
    var maxLines: Int = ServerConfiguration().maxLines

    @Option(
        help: "MiB of output records a POST /v1/ops answer keeps with emit=all; past it only event, rejection and duplicate records (headers Teamlog-Outputs-Omitted, Teamlog-Outputs-Omitted-From-Seq: read them from GET /v1/records).")
    var maxResponseMb: Int = ServerConfiguration().maxResponseBytes >> 20

    @Option(
        help: "Seconds a connection may send nothing, between requests or within a request's body, before it is closed (0: never; a response being sent is not idle).")
    var idleTimeoutS: Double = ServerConfiguration().idleTimeoutSeconds ?? 0

    @Option(
        help:
            "Seconds a stop (SIGTERM, SIGINT, SIGHUP) waits for requests in flight before closing their connections; the writer then commits what it was given and checkpoints (0: wait for them however long).")
    var shutdownTimeoutS: Double = 20

    @Option(help: "Committed events whose records the record stream keeps for resuming (in memory).")
    var streamWindow: Int = WriterService.Options().streamWindow

    @Option(help: "Most MiB of records the record stream keeps (the oldest events go first).")
    var streamWindowMb: Int = WriterService.Options().streamWindowBytes >> 20

    @Option(help: "A single request with more ops than this is committed in several transactions.")
    var batchSize: Int = WriterService.Options().batchSize

    @Flag(help: "Skip fsync at commit (tests and benchmarks: a crash may lose acknowledged ops).")
    var noSync = false

    @OptionGroup var writer: WriterOptions

    @OptionGroup(title: "NATS deployment (docs/nats.md)") var cluster: ClusterOptions

    @Option(help: "With --nats: the partition this process owns (0 ..< --partitions).")
    var partition: Int?

    @Option(help: "With --nats: stream replicas when the streams are created.")
    var replicas: Int = 1

    @Option(
        help: ArgumentHelp(
            "With --nats: the partition's lease, renewed every third of it; after a holder's last renewal another process waits this long (and a fifth) before it takes the partition over (docs/nats.md, The lease).",
            valueName: "SECONDS"))
    var leaseS: Double = 10

    @Option(
        help: ArgumentHelp(
            "A copy of this store (`teamlog backup`), or a directory of copies, that `?at=SEQ` queries replay from: the newest whose checkpoint is at or before SEQ.",
            valueName: "DIR"))
    var atBase: String?

    @Option(
        help:
            "Point-in-time replays (`?at=`) that may run at once (each holds ~0.8 GB at 5M events); one more is answered 503. 0: none."
    )
    var atReplays: Int = ServerConfiguration().atReplays

    @Flag(
        name: .customLong("stream-catch-up"), inversion: .prefixedNo,
        help:
            "A record stream from a seq older than the window catches up from the log (a replay, in an --at-replays slot); with --no-stream-catch-up it is 410."
    )
    var streamCatchUp = ServerConfiguration().streamCatchUp

    @OptionGroup var settings: SettingsOptions

    /// Checked before `run` (so a wrong value is answered with this command's usage, not the root's).
    func validate() throws {
        _ = try Self.parseListen(listen)
        guard bodyLimit > 0, maxLines > 0, streamWindow > 0, streamWindowMb > 0, batchSize > 0, maxResponseMb > 0 else {
            throw ValidationError(
                "--body-limit, --max-lines, --stream-window, --stream-window-mb, --batch-size and --max-response-mb must be positive")
        }
        guard atReplays >= 0 else { throw ValidationError("--at-replays must be 0 or more") }
        guard idleTimeoutS >= 0, idleTimeoutS.isFinite else { throw ValidationError("--idle-timeout-s must be 0 or more") }
        guard shutdownTimeoutS >= 0, shutdownTimeoutS.isFinite else {
            throw ValidationError("--shutdown-timeout-s must be 0 or more")
        }
        guard leaseS >= 0.3, leaseS <= 3_600, leaseS.isFinite else {
            throw ValidationError("--lease-s must be from 0.3 to 3600 seconds")
        }
        // Asked for and not given, each would serve what the operator meant to close or route.
        if protectReads && tokenFile == nil { throw ValidationError("--protect-reads needs --token-file") }
        if cluster.nats == nil && partition != nil {
            throw ValidationError("--partition is for --nats: a partition's store takes its ops from its stream only")
        }
        if cluster.nats != nil {
            guard let partition, (0..<cluster.partitions).contains(partition) else {
                throw ValidationError("--nats needs --partition P with 0 <= P < --partitions")
            }
        }
    }

    func run() async throws {
        var config = ServerConfiguration()
        (config.host, config.port) = try Self.parseListen(listen)
        config.protectReads = protectReads
        config.bodyLimit = bodyLimit
        config.maxLines = maxLines
        config.maxResponseBytes = maxResponseMb << 20
        config.atReplays = atReplays
        config.streamCatchUp = streamCatchUp
        config.idleTimeoutSeconds = idleTimeoutS > 0 ? idleTimeoutS : nil
        config.shutdownTimeoutSeconds = shutdownTimeoutS > 0 ? shutdownTimeoutS : nil
        if let tokenFile {
            let token = try Self.readToken(tokenFile)
            guard !token.isEmpty else { throw ValidationError("the token file \(tokenFile) is empty") }
            config.token = token
        }
        if let atBase {
            // A copy or a directory (of copies to come, perhaps), or refused now rather than at the first `?at=`.
            do {
                try Store.newestCopy(at: atBase, atOrBefore: .max, excluding: storeOptions.path) { entry, damage in
                    printErr("teamlog: --at-base: passing over the copy \(entry), which cannot be opened (replace it): \(damage.message)")
                }.copy?.store.close()
            } catch {
                throw CLIError("--at-base \(atBase): \(error)")
            }
            config.atBase = atBase
        }
        var worker: PartitionWorker.Options?
        if cluster.nats != nil, let partition {  // in range: `validate`
            var w = PartitionWorker.Options()
            w.partition = partition
            w.partitions = cluster.partitions
            w.replicas = replicas
            w.leaseMs = Int(leaseS * 1_000)
            w.onNotice = { printErr("teamlog: \($0)") }
            worker = w
            config.opsRefusal =
                "this server is partition \(partition) of \(cluster.partitions): its ops come from teamlog.ops.\(partition) "
                + "(publish them with `teamlog route`)"
        }
        var options = WriterService.Options()
        options.store.partitionRole = worker.map { .partition($0.partition, of: $0.partitions) } ?? .standalone
        options.store.noSync = noSync
        options.store.requestedConfig = settings.request
        try writer.apply(to: &options.store)
        let waitsForWriter = options.store.waitForWriter
        options.batchSize = batchSize
        options.streamWindow = streamWindow
        options.streamWindowBytes = streamWindowMb << 20

        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        var logger = Logger(label: "teamlog.serve")
        logger.logLevel = .notice
        // Said when it happens, once per run of failures: the server stays ready, but other processes'
        // queries stay at the last checkpoint (`/readyz` names the problem, `teamlog_checkpoint_failing`).
        options.onCheckpointFailure = { [logger] problem in logger.error("\(problem)") }
        options.onCheckpointRecovered = { [logger] seq in
            logger.notice("the projections' checkpoint succeeded again", metadata: ["seq": "\(seq)"])
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))  // other libraries' metrics too
        let metrics = ServerMetrics(registry: registry)
        // A partition that never starts consuming (another instance serves it, NATS unreachable) wrote
        // nothing: a store directory this run created for it is removed again rather than left behind.
        let storeExisted = access(storeOptions.path, F_OK) == 0
        let writer = WriterService(path: storeOptions.path, options: options) { metrics.record($0) }
        let server = TeamLogServer(writer: writer, configuration: config, metrics: metrics, logger: logger)
        var services: [any Service] = [WriterLifecycle(writer: writer), server]
        let consuming = Signal()
        if let worker {
            services.append(
                PartitionService(writer: writer, cluster: cluster, options: worker, consuming: consuming, metrics: metrics))
        }
        var groupConfiguration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint, .sighup], logger: logger)
        // Past it the group cancels its services: the server closes the connections still open (a stalled
        // upload, a long export, a `?at=` replay's answer), the writer stops as on a graceful stop.
        let shutdownTimeout = shutdownTimeoutS > 0 ? Duration.milliseconds(Int64(shutdownTimeoutS * 1_000)) : nil
        groupConfiguration.maximumGracefulShutdownDuration = shutdownTimeout
        let group = ServiceGroup(configuration: groupConfiguration)
        // A second SIGTERM/SIGINT exits at once: what was acknowledged is committed, the log is consistent.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup)
        let path = storeOptions.path
        let timeoutSeconds =
            shutdownTimeoutS == shutdownTimeoutS.rounded() ? "\(Int(shutdownTimeoutS))" : "\(shutdownTimeoutS)"
        let watcher = Task {
            var count = 0
            var overdue: Task<Void, Never>?
            defer { overdue?.cancel() }
            for await signal in signals {
                count += 1
                if count == 1, let shutdownTimeout {
                    overdue = Task {
                        guard (try? await Task.sleep(for: shutdownTimeout)) != nil else { return }
                        printErr(
                            "teamlog: requests still in flight \(timeoutSeconds) s after \(signal): closing their "
                                + "connections (--shutdown-timeout-s)")
                    }
                }
                if count >= 2 {
                    // A `?at=` replay's scratch store in the making is not left under $TMPDIR.
                    let removed = Leftovers.removeAll()
                    printErr(
                        "teamlog: second \(signal): exiting now"
                            + (removed.isEmpty ? "" : " (removed \(removed.joined(separator: ", ")))"))
                    _exit(signal.rawValue + 128)
                }
                printErr("teamlog: \(signal): finishing in-flight requests, committing, checkpointing")
            }
        }
        let opened = Task {
            guard let port = await server.port() else { return }
            var waited = 0
            while writer.state == .opening && !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(5))
                waited += 5
                if waited == 1_000 {
                    // A long open (another writer's lock with --wait, a crash tail to replay): the address now,
                    // so /healthz and /readyz can be watched (with --listen …:0 nothing else names the port).
                    printErr(
                        "teamlog: listening on http://\(Self.hostForURL(config.host)):\(port) while the store opens "
                            + "(/healthz 200, /readyz 503 until it is open)"
                            + (waitsForWriter ? "; with --wait, another writer's lock may be what it waits for" : ""))
                }
            }
            if case .failed = writer.state {
                await group.triggerGracefulShutdown()  // said below, before exiting 2
                return
            }
            // Stopped while it waited for another writer's lock (`--wait`): it never served.
            guard writer.state == .ready else { return }
            // A partition says it serves once it consumes its stream too: a NATS that cannot be reached
            // fails the group (exit 3) without a "serving" line before it.
            while worker != nil && !consuming.isSet && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            if Task.isCancelled { return }
            if let replayed = writer.store?.replayedAtOpen, replayed > 0 {
                // A crash left a log tail after the projections' checkpoint: say the open replayed it.
                logger.notice(
                    "recovered: replayed the log after the projections' checkpoint",
                    metadata: ["events": "\(replayed)"])
            }
            try? printOut("teamlog: serving \(path) on http://\(Self.hostForURL(config.host)):\(port)")
        }
        do { try await group.run() } catch {
            watcher.cancel()
            opened.cancel()
            printErr("teamlog: \(error)")
            if worker != nil && !storeExisted && !consuming.isSet && writer.store == nil {
                removeDirectoryTree(path)
                printErr("teamlog: removed \(path), the store this start created (the partition consumed nothing)")
            }
            throw ExitCode(3)
        }
        watcher.cancel()
        opened.cancel()
        // A `?at=` replay whose answer was cut by --shutdown-timeout-s: its scratch store goes with the process.
        let removed = Leftovers.removeAll()
        if !removed.isEmpty { printErr("teamlog: removed \(removed.joined(separator: ", ")) (replays cut short)") }
        if writer.stoppedWaitingForWriter {
            printErr("teamlog: stopped while waiting for the store's writer lock; the store was not opened")
        }
        if case .failed(let why) = writer.state {
            printErr("teamlog: \(why)")
            throw ExitCode(2)
        }
    }

    static func hostForURL(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    /// `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (loopback).
    static func parseListen(_ text: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { throw ValidationError("--listen must be HOST:PORT") }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "127.0.0.1" : host, port)
    }

    static func readToken(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CLIError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            bytes += buffer[..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.trimmingWhitespace
    }
}

/// A partition of a NATS deployment as a service: once the store is open, connects (bounded retries),
/// republishes the outbox, consumes its stream and answers queries until the group shuts down; then
/// stops consuming and lets what was fetched commit, publish and ack. Listed after the writer, so it is
/// stopped first. A worker that fails (store failure, NATS gone for good) fails the group: exit 3.
struct PartitionService: Service {
    let writer: WriterService
    let cluster: ClusterOptions
    let options: PartitionWorker.Options
    /// Set once the worker consumes its stream (`serve` prints its "serving" line then).
    let consuming: Signal
    /// Where the worker's counters, backlog and lease go (`/metrics`, `teamlog_nats_*`).
    let metrics: ServerMetrics

    func run() async throws {
        while writer.state == .opening { try await Task.sleep(for: .milliseconds(5)) }
        guard writer.state == .ready else {
            // The store did not open: `serve` stops the group, says why and exits 2. Returning before the
            // group stops failed it instead ("a service has finished unexpectedly", exit 3, and no reason).
            try? await gracefulShutdown()
            return
        }
        let connection = try cluster.connect(name: "teamlog-partition-\(options.partition)", reconnectForever: true)
        var options = options
        options.shouldStopStarting = { Task.isShuttingDownGracefully || Task.isCancelled }
        let worker = PartitionWorker(connection: connection, writer: writer, options: options)
        try worker.start()
        consuming.set()
        printErr(
            "teamlog: partition \(options.partition) of \(options.partitions) consuming \(TeamLogSubjects.ops(options.partition))"
        )
        while !Task.isShuttingDownGracefully && !Task.isCancelled && worker.failure == nil {
            metrics.record(Self.reading(worker))
            try? await Task.sleep(for: .milliseconds(50))
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stop = {
                worker.stop()
                connection.close()
                continuation.resume()
            }
            if startThread(stop) == nil { stop() }
        }
        if let failure = worker.failure { throw ClusterError("partition \(options.partition): \(failure)") }
    }
}

extension PartitionService {
    static func reading(_ worker: PartitionWorker) -> ServerMetrics.PartitionReading {
        let stats = worker.stats
        let backlog = worker.backlog
        var reading = ServerMetrics.PartitionReading()
        reading.pending = backlog.pending
        reading.inFlight = backlog.inFlight
        reading.leaseValid = worker.holdsLease
        reading.consumed = stats.consumed
        reading.published = stats.published
        reading.skipped = stats.skipped
        reading.reseeks = stats.reseeks
        reading.alreadyDownstream = stats.alreadyDownstream
        return reading
    }
}

/// A one-way signal one task sets and another polls.
final class Signal: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
