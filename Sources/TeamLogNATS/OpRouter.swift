public import NATS
import TeamLog
public import TeamLogRuntime

/// `teamlog route`: reads ops and publishes each to its partition's subject on `TEAMLOG_OPS`, as
/// `RoutePlanner` plans (key, `ts` stamping, broadcast, `Nats-Msg-Id`).
///
/// Publishes are asynchronous and confirmed in windows of `window` messages (`waitForPublishes`): the
/// stream stores them in publish order, so each partition sees its ops in input order. A failed window
/// is published again, whole, under the same ids (the stream drops what it already has), up to
/// `retries` times; then the run fails with the line it had reached — and a re-run of the same input
/// is safe for every op with an `opId`.
public final class OpRouter {
    /// Settings.
    public struct Options: Sendable {
        public var partitions = 1
        /// Messages published before waiting for their acknowledgements.
        public var window = 2_048
        /// Attempts of a window before giving up (0.1 s, 0.2 s … 2 s apart: about 17 s for 12, longer than a
        /// stream leader's election after a node dies).
        public var retries = 12
        /// Replicas of the streams when the router creates them.
        public var replicas = 1
        public init() {}
    }

    /// What a run did.
    public struct Summary: Sendable {
        public var lines = 0
        public var messages = 0
        /// Messages the stream already held under their `Nats-Msg-Id` (an op re-routed within its
        /// duplicate window, e.g. a run repeated after a failure): acknowledged, not stored again. Counted
        /// on each window's first attempt only, so a lower bound when a window was retried.
        public var duplicates = 0
        /// Messages per partition.
        public var perPartition: [Int] = []
    }

    private let connection: NATSConnection
    private let js: JetStream
    public let options: Options
    /// The deployment's partitioning, as its op stream records it.
    public let partitioning: Partitioning
    private var planner: RoutePlanner
    private var pending: [RoutePlanner.Planned] = []
    public private(set) var summary = Summary()

    /// Connects the router to `connection`, creating the streams when absent.
    public init(connection: NATSConnection, options: Options) throws {
        self.connection = connection
        self.options = options
        js = try connection.jetStream(maxPendingAsync: 65_536)  // windows stay far below: no stall inside libnats
        partitioning = try retrying(options.retries, "creating the streams") { [js] in
            try TeamLogSubjects.ensureStreams(js, partitions: options.partitions, replicas: options.replicas)
        }
        planner = RoutePlanner(partitions: options.partitions, scheme: partitioning.scheme)
        summary.perPartition = Array(repeating: 0, count: options.partitions)
        let partitions = options.partitions
        let retries = options.retries
        planner.locate = { [connection] messageId in
            // A message sent long ago (or before this router started): the partition whose `message`
            // query knows it. Every earlier publish is confirmed first, so a message routed by this run
            // has reached its stream. A partition that does not answer (down, restarting) may be the one:
            // asked again with a backoff, then the route fails — sent to the fallback instead, the op was
            // rejected `noSuchMessage` for good while its message sat on the silent partition.
            var holder: Int?
            for p in 0..<partitions {
                let reply = try retrying(retries, "asking partition \(p) whether it holds message \(messageId)") {
                    try connection.request(TeamLogSubjects.query(p, "message"), Array(messageId.utf8), timeoutMs: 2_000)
                }
                if reply.data.first == UInt8(ascii: "{"), !reply.data.starts(with: Array("{\"error\"".utf8)) {
                    holder = p
                    break
                }
            }
            return holder
        }
    }

    /// Routes one line (`clock`: ms, for ops without `ts`).
    public func route(_ line: LineReader.Line, now: Int64) throws {
        let planned = try planner.plan(line, now: now)
        guard !planned.isEmpty else { return }
        summary.lines += 1
        pending += planned
        if pending.count >= options.window { try flush() }
    }

    /// Whether routed messages wait to be published (`flush`).
    public var hasPending: Bool { !pending.isEmpty }

    /// Publishes and confirms everything routed so far.
    public func flush() throws {
        guard !pending.isEmpty else { return }
        var attempt = 0
        _ = js.takeDuplicates()  // late acks of a window given up on: not this window's
        while true {
            attempt += 1
            // Counted on a window's first attempt only: one published again after a failure finds its
            // own first attempt's messages, which are not what the stream had before (the count is a
            // lower bound when a window is retried — a NATS node restarting).
            defer {
                let duplicates = js.takeDuplicates()
                if attempt == 1 { summary.duplicates += duplicates }
            }
            do {
                for m in pending {
                    var headers = [(TeamLogSubjects.lineHeader, String(m.line))]
                    if let length = m.tooLongLength { headers.append((TeamLogSubjects.tooLongHeader, String(length))) }
                    try js.publishAsync(TeamLogSubjects.ops(m.partition), m.data, msgId: m.msgId, headers: headers)
                }
                try js.waitForPublishes(timeoutMs: 10_000)
                break
            } catch {
                if attempt >= options.retries {
                    throw ClusterError(
                        "publishing to \(TeamLogSubjects.opsStream) failed \(attempt) times: lines \(pending.first?.line ?? 0)–"
                            + "\(pending.last?.line ?? 0) are not confirmed (every line before them is); run the same input "
                            + "again once NATS is back — what the stream has is de-duplicated by opId: \(error)")
                }
                waitBeforeRetry(attempt)
            }
        }
        for m in pending { summary.perPartition[m.partition] += 1 }
        summary.messages += pending.count
        pending.removeAll(keepingCapacity: true)
    }
}

/// Runs `body` up to `attempts` times, waiting `waitBeforeRetry` between failures; the last failure is
/// thrown as a `ClusterError` naming `what` and the attempts (a NATS cluster electing leaders answers
/// JetStream requests with timeouts for a few seconds). A failure that cannot pass (`isPermanent`) is
/// thrown at once.
func retrying<R>(_ attempts: Int, _ what: String, _ body: () throws -> R) throws -> R {
    var attempt = 0
    while true {
        attempt += 1
        do { return try body() } catch {
            if isPermanent(error) { throw ClusterError("\(what) failed: \(error)", permanent: true) }
            if attempt >= max(1, attempts) { throw ClusterError("\(what) failed \(attempt) times: \(error)") }
            waitBeforeRetry(attempt)
        }
    }
}

/// Whether asking again cannot help: a `ClusterError` that says so, or a JetStream refusal of the
/// configuration itself — replicas on a server without clustering (10074), an invalid configuration
/// (10052), subjects another stream holds (10065), JetStream not enabled (10076, 10039). "Insufficient
/// resources" (10023) is retried: a cluster whose nodes are still joining answers it for a while.
func isPermanent(_ error: any Error) -> Bool {
    if let error = error as? ClusterError { return error.permanent }
    if let error = error as? NATSError, let code = error.jetStreamCode {
        return [10_074, 10_052, 10_065, 10_076, 10_039].contains(code)
    }
    return false
}

/// Sleeps 100 ms × 2^(attempt-1), capped at 2 s.
func waitBeforeRetry(_ attempt: Int) {
    let ms = min(2_000, 100 << min(attempt - 1, 5))
    var ts = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    _ = nanosleep(&ts, nil)
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
