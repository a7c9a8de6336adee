import ArgumentParser
import NATS
import TeamLog
import TeamLogNATS
import TeamLogRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--nats URL[,URL…]` and `--partitions N`, shared by `route`, `serve --nats` and the cluster queries.
struct ClusterOptions: ParsableArguments {
    @Option(help: "NATS server URLs, comma-separated (a cluster's nodes): use the NATS deployment.")
    var nats: String?

    @Option(help: "With --nats: the number of partitions.")
    var partitions: Int = 1

    @Option(help: "With --nats: connection attempts before giving up (each waits up to 2 s; 0.5 s, 1 s … between).")
    var connectAttempts: Int = 3

    /// Connects with bounded retries: a NATS outage fails with a clear error, never a hang.
    /// `reconnectForever`: a long-running partition server rides out a NATS outage of any length (its
    /// consumer's position is on the server; it resumes where it was); short-lived commands give up.
    func connect(name: String, reconnectForever: Bool = false) throws -> NATSConnection {
        guard let nats else { throw ValidationError("--nats is required") }
        guard partitions > 0 else { throw ValidationError("--partitions must be positive") }
        var options = NATSConnection.Options(servers: nats.split(separator: ",").map(String.init))
        options.name = name
        if reconnectForever {
            options.maxReconnects = -1
            // A partition runs for days: a lost NATS connection pauses its work, so it is said when it goes and
            // when it is back (an operator's trial saw nothing in the log while NATS was away).
            let servers = nats
            options.onConnectionEvent = { event in
                switch event {
                case .disconnected:
                    printErr("teamlog: NATS connection to \(servers) lost: consuming and publishing wait; reconnecting")
                case .reconnected(let url):
                    printErr("teamlog: NATS connection back (\(url)): consuming and publishing go on")
                }
            }
        }
        var attempt = 0
        while true {
            attempt += 1
            do { return try NATSConnection(options) } catch {
                if attempt >= max(1, connectAttempts) {
                    throw CLIError("cannot connect to NATS at \(nats) after \(attempt) attempts: \(error)")
                }
                // 0.5 s after the first attempt, 1 s after the others (a `tv_nsec` of 1e9 is EINVAL: no wait).
                var ts = attempt == 1 ? timespec(tv_sec: 0, tv_nsec: 500_000_000) : timespec(tv_sec: 1, tv_nsec: 0)
                _ = nanosleep(&ts, nil)
            }
        }
    }

    /// A cross-partition query client.
    func queries() throws -> ClusterQueries {
        try ClusterQueries(connection: try connect(name: "teamlog-query"), partitions: partitions)
    }
}

/// `teamlog route FILE|- --nats URL --partitions N`.
struct Route: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish ops to their partitions on NATS JetStream (stream TEAMLOG_OPS, subjects teamlog.ops.<p>).",
        discussion: """
            Team ops and team messages go by team, p2p messages by the pair of users, signaling by channel; \
            client.login, client.logout and clock.tick go to every partition. A missing ts is stamped with \
            this router's clock. Lines that do not parse go to partition 0, which answers them rejected. The \
            streams are created when absent. See docs/nats.md.
            """)

    @Argument(help: "A file of JSON Lines operations, or - for standard input.")
    var file: String

    @OptionGroup var cluster: ClusterOptions

    @Option(help: "Stream replicas when the streams are created (1, or 3 on a 3-node cluster).")
    var replicas: Int = 1

    @Option(help: "Messages published before waiting for the stream's acknowledgements.")
    var window: Int = 2_048

    func run() throws {
        guard window > 0, replicas > 0 else { throw ValidationError("--window and --replicas must be positive") }
        let fd: Int32 = file == "-" ? 0 : open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CLIError("cannot open \(file): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }
        let connection: NATSConnection
        do { connection = try cluster.connect(name: "teamlog-route") } catch let error as CLIError {
            printErr("teamlog: \(error)")
            throw ExitCode(3)
        }
        var options = OpRouter.Options()
        options.partitions = cluster.partitions
        options.replicas = replicas
        options.window = window
        let router: OpRouter
        do { router = try OpRouter(connection: connection, options: options) } catch {
            printErr("teamlog: cannot set up the streams on \(cluster.nats ?? ""): \(error)")
            throw ExitCode(3)
        }
        var st = stat()
        let size = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG ? Int(st.st_size) : nil
        let progress = Progress("route", total: size, unit: .bytes)
        var reader = LineReader(fd: fd)
        let start = monotonicSeconds()
        do {
            // A live feed (`-` from a pipe) is not held back until a window fills: what was routed is
            // published and confirmed as soon as input pauses for 5 ms.
            loop: while true {
                switch try reader.next(timeoutMs: router.hasPending ? 5 : nil) {
                case .line(let line):
                    try router.route(line, now: Processor.wallClock())
                    if progress.isOn { progress.update(reader.bytesConsumed) }
                case .timeout: try router.flush()
                case .end: break loop
                }
            }
            try router.flush()
        } catch {
            progress.clear()
            printErr("teamlog: \(error)")
            throw ExitCode(3)
        }
        progress.finish()
        connection.close()
        let s = router.summary
        let elapsed = max(monotonicSeconds() - start, 1e-9)
        let parts = s.perPartition.enumerated().map { "p\($0.offset) \($0.element)" }.joined(separator: ", ")
        let already =
            s.duplicates > 0
            ? "; \(s.duplicates) of them already in the stream (the same Nats-Msg-Id within its duplicate window: not stored again)"
            : ""
        printErr(
            "routed \(s.lines) lines as \(s.messages) messages (\(parts)), \(Int(Double(s.lines) / elapsed)) lines/s\(already)")
    }
}
