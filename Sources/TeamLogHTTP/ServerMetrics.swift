import Metrics
import Synchronization
public import Prometheus
import TeamLog
public import TeamLogRuntime
import TeamLogStore
import TeamLogThreads

/// The server's metrics, recorded through swift-metrics into its own Prometheus registry (so several
/// servers in one process — the tests — never share counters) and exported at `GET /metrics`.
///
public final class ServerMetrics: Sendable {
    /// The registry `GET /metrics` prints.
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory
    let accepted: Metrics.Counter
    let duplicates: Metrics.Counter
    let rejected: [RejectionCode: Metrics.Counter]
    let commitDuration: Metrics.Timer
    let batchOps: Metrics.Recorder
    let batchRequests: Metrics.Recorder
    let checkpointLag: Metrics.Gauge
    let checkpointFailing: Metrics.Gauge
    let logBytes: Metrics.Gauge
    let projectionBytes: Metrics.Gauge
    let logFreeBytes: Metrics.Gauge
    let readAhead: Metrics.Gauge
    let projectionFreeBytes: Metrics.Gauge
    let workingSetBytes: Metrics.Gauge
    let workingSetBudget: Metrics.Gauge
    let workingSetHitRatio: Metrics.Gauge
    /// Counters (they only grow while the store is open): Prometheus' `rate()` needs the type.
    let workingSetLoads: TotalCounter
    let workingSetEvictions: TotalCounter
    let windowEvents: Metrics.Gauge
    let windowBytes: Metrics.Gauge
    let atReplays: Metrics.Gauge
    let blockingThreads: Metrics.Gauge
    let blockingBusy: Metrics.Gauge
    let blockingQueued: Metrics.Gauge
    /// A NATS partition's consumption (`serve --nats`), made at its first reading so a standalone server
    /// exports none of them.
    private let partition = Mutex<PartitionMetrics?>(nil)

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        let fast: [Duration] = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        factory.defaultDurationHistogramBuckets = fast
        factory.valueHistogramBuckets = [
            "teamlog_commit_batch_ops": [1, 10, 100, 1_000, 10_000, 100_000],
            "teamlog_commit_batch_requests": [1, 2, 4, 8, 16, 32, 64, 128, 256],
        ]
        self.factory = factory
        accepted = Metrics.Counter(label: "teamlog_ops_accepted_total", factory: factory)
        duplicates = Metrics.Counter(label: "teamlog_ops_duplicates_total", factory: factory)
        var rejected: [RejectionCode: Metrics.Counter] = [:]
        for code in RejectionCode.allCases {
            rejected[code] = Metrics.Counter(
                label: "teamlog_ops_rejected_total", dimensions: [("code", code.rawValue)], factory: factory)
        }
        self.rejected = rejected
        commitDuration = Metrics.Timer(label: "teamlog_commit_duration_seconds", factory: factory)
        batchOps = Metrics.Recorder(label: "teamlog_commit_batch_ops", aggregate: true, factory: factory)
        batchRequests = Metrics.Recorder(label: "teamlog_commit_batch_requests", aggregate: true, factory: factory)
        checkpointLag = Metrics.Gauge(label: "teamlog_checkpoint_lag_events", factory: factory)
        checkpointFailing = Metrics.Gauge(label: "teamlog_checkpoint_failing", factory: factory)
        logBytes = Metrics.Gauge(label: "teamlog_store_bytes", dimensions: [("env", "log")], factory: factory)
        projectionBytes = Metrics.Gauge(label: "teamlog_store_bytes", dimensions: [("env", "proj")], factory: factory)
        logFreeBytes = Metrics.Gauge(label: "teamlog_store_free_bytes", dimensions: [("env", "log")], factory: factory)
        projectionFreeBytes = Metrics.Gauge(
            label: "teamlog_store_free_bytes", dimensions: [("env", "proj")], factory: factory)
        readAhead = Metrics.Gauge(label: "teamlog_store_read_ahead", factory: factory)
        workingSetBytes = Metrics.Gauge(label: "teamlog_working_set_bytes", factory: factory)
        workingSetBudget = Metrics.Gauge(label: "teamlog_working_set_budget_bytes", factory: factory)
        workingSetHitRatio = Metrics.Gauge(label: "teamlog_working_set_hit_ratio", factory: factory)
        workingSetLoads = TotalCounter("teamlog_working_set_loads_total", factory: factory)
        workingSetEvictions = TotalCounter("teamlog_working_set_evictions_total", factory: factory)
        windowEvents = Metrics.Gauge(label: "teamlog_record_window_events", factory: factory)
        windowBytes = Metrics.Gauge(label: "teamlog_record_window_bytes", factory: factory)
        atReplays = Metrics.Gauge(label: "teamlog_at_replays_running", factory: factory)
        blockingThreads = Metrics.Gauge(label: "teamlog_blocking_threads", factory: factory)
        blockingBusy = Metrics.Gauge(label: "teamlog_blocking_busy_threads", factory: factory)
        blockingQueued = Metrics.Gauge(label: "teamlog_blocking_queued_calls", factory: factory)
    }

    /// Records one group commit (the writer's thread calls this).
    public func record(_ report: WriterService.CommitReport) {
        if report.accepted > 0 { accepted.increment(by: report.accepted) }
        if report.duplicates > 0 { duplicates.increment(by: report.duplicates) }
        for (code, n) in report.rejected { rejected[code]?.increment(by: n) }
        commitDuration.recordSeconds(report.commitSeconds)
        batchOps.record(report.lines)
        batchRequests.record(report.submissions)
        checkpointLag.record(Double(report.checkpointLag))
        if let workingSet = report.workingSet {
            workingSetBytes.record(Double(workingSet.residentBytes))
            workingSetBudget.record(Double(workingSet.budgetBytes))
            workingSetHitRatio.record(workingSet.hitRatio)
            workingSetLoads.record(total: workingSet.loads)
            workingSetEvictions.record(total: workingSet.evictions)
        }
        windowEvents.record(Double(report.windowEvents))
        windowBytes.record(Double(report.windowBytes))
    }

    /// Records one HTTP request: its route (the OpenAPI path, or `unmatched`), method and status.
    func recordRequest(route: String, method: String, status: Int, seconds: Double) {
        Metrics.Timer(
            label: "teamlog_http_request_duration_seconds",
            dimensions: [("route", route), ("method", method), ("status", String(status))], factory: factory
        ).recordSeconds(seconds)
    }

    /// The Prometheus text exposition, with the store's sizes, the `?at=` replays running, the checkpoint's
    /// lag and whether checkpoints fail read now (the lag recorded at commits alone stayed at its last
    /// value after an idle checkpoint caught up).
    func exposition(
        store: Store?, atReplaysRunning: Int, checkpointLagNow: UInt64? = nil, checkpointFailingNow: Bool = false,
        blocking: BlockingPool.Counts? = nil
    ) -> [UInt8] {
        atReplays.record(Double(atReplaysRunning))
        if let blocking {
            blockingThreads.record(Double(blocking.threads))
            blockingBusy.record(Double(blocking.busy))
            blockingQueued.record(Double(blocking.queued))
        }
        if let checkpointLagNow { checkpointLag.record(Double(checkpointLagNow)) }
        checkpointFailing.record(checkpointFailingNow ? 1 : 0)
        if let store {
            logBytes.record(Double(store.env.usedBytes))
            projectionBytes.record(Double(store.projectionEnv.usedBytes))
            readAhead.record(store.readAheadIsOn ? 1 : 0)
            if let free = try? store.freeBytes() {
                logFreeBytes.record(Double(free.log))
                projectionFreeBytes.record(Double(free.projections))
            }
        }
        return Self.withHelp(registry.emitToBuffer())
    }

    // MARK: - A NATS partition

    /// What a NATS partition's worker counted (`serve --nats`; the worker's counters since start).
    public struct PartitionReading: Sendable {
        /// Messages its stream subject still held for it at its last fetch (nil: none fetched yet).
        public var pending: UInt64?
        public var consumed = 0
        public var published = 0
        public var skipped = 0
        public var reseeks = 0
        public var alreadyDownstream = 0
        /// Inputs fetched but not yet committed, published and acked.
        public var inFlight = 0
        /// Whether it holds a renewed lease (it fetches only then).
        public var leaseValid = false
        public init() {}
    }

    private final class PartitionMetrics: Sendable {
        let pending: Metrics.Gauge
        let inFlight: Metrics.Gauge
        let leaseValid: Metrics.Gauge
        let consumed: TotalCounter
        let published: TotalCounter
        let skipped: TotalCounter
        let reseeks: TotalCounter
        let alreadyDownstream: TotalCounter

        init(factory: PrometheusMetricsFactory) {
            pending = Metrics.Gauge(label: "teamlog_nats_pending_messages", factory: factory)
            inFlight = Metrics.Gauge(label: "teamlog_nats_in_flight_messages", factory: factory)
            leaseValid = Metrics.Gauge(label: "teamlog_nats_lease_valid", factory: factory)
            consumed = TotalCounter("teamlog_nats_consumed_total", factory: factory)
            published = TotalCounter("teamlog_nats_published_total", factory: factory)
            skipped = TotalCounter("teamlog_nats_skipped_total", factory: factory)
            reseeks = TotalCounter("teamlog_nats_reseeks_total", factory: factory)
            alreadyDownstream = TotalCounter("teamlog_nats_already_downstream_total", factory: factory)
        }
    }

    /// Records a partition worker's reading (`serve --nats` polls its worker).
    public func record(_ reading: PartitionReading) {
        let metrics = partition.withLock { current in
            if let current { return current }
            let made = PartitionMetrics(factory: factory)
            current = made
            return made
        }
        if let pending = reading.pending { metrics.pending.record(Double(pending)) }
        metrics.inFlight.record(Double(reading.inFlight))
        metrics.leaseValid.record(reading.leaseValid ? 1 : 0)
        metrics.consumed.record(total: reading.consumed)
        metrics.published.record(total: reading.published)
        metrics.skipped.record(total: reading.skipped)
        metrics.reseeks.record(total: reading.reseeks)
        metrics.alreadyDownstream.record(total: reading.alreadyDownstream)
    }

    // MARK: - Help

    /// Each metric's `# HELP` text. swift-prometheus takes help only through its own registry's `make…`
    /// calls, not through swift-metrics, so the exposition gets them here, before each `# TYPE` line;
    /// `ServeTests` fails for a `teamlog_` metric without one.
    static let help: [String: String] = [
        "teamlog_ops_accepted_total": "Ops accepted and committed to the log.",
        "teamlog_ops_duplicates_total": "Ops answered as duplicates of an earlier opId (nothing committed).",
        "teamlog_ops_rejected_total": "Ops rejected, by SPEC error code (nothing committed).",
        "teamlog_commit_duration_seconds": "Time of one group commit of the log (write and fsync).",
        "teamlog_commit_batch_ops": "Lines per group commit.",
        "teamlog_commit_batch_requests": "Requests (HTTP bodies, NATS messages) per group commit.",
        "teamlog_checkpoint_lag_events": "Events in the log after the projections' checkpoint (what other processes' queries do not see yet).",
        "teamlog_checkpoint_failing": "1 while the projections' checkpoints fail (the log goes on; other processes' queries grow stale).",
        "teamlog_store_bytes": "Bytes the store's LMDB environment uses, by environment (log, proj).",
        "teamlog_store_free_bytes": "Bytes free on the file system of the store's environment, by environment.",
        "teamlog_store_read_ahead": "1 while the kernel's read-ahead is on for the projections' file.",
        "teamlog_working_set_bytes": "Bytes of projections resident in the writer's working set.",
        "teamlog_working_set_budget_bytes": "The working set's budget (--cache-mb).",
        "teamlog_working_set_hit_ratio": "Share of working-set lookups answered without a load from LMDB.",
        "teamlog_working_set_loads_total": "Units loaded into the working set from LMDB.",
        "teamlog_working_set_evictions_total": "Units evicted from the working set beyond its budget.",
        "teamlog_record_window_events": "Events held by the record window (/v1/records and the stream).",
        "teamlog_record_window_bytes": "Bytes held by the record window.",
        "teamlog_at_replays_running": "?at= replays running now.",
        "teamlog_blocking_threads": "Threads of the server's pool for blocking work (replays, status reads).",
        "teamlog_blocking_busy_threads": "Threads of that pool running a call now.",
        "teamlog_blocking_queued_calls": "Calls waiting for a thread of that pool (all \(blockingWork.maxThreads) busy).",
        "teamlog_http_request_duration_seconds": "HTTP requests by route (the OpenAPI path), method and status.",
        "teamlog_nats_pending_messages": "Messages of this partition's subject in the op stream not yet fetched, at its last fetch: its backlog.",
        "teamlog_nats_in_flight_messages": "Messages fetched and not yet committed, published and acked.",
        "teamlog_nats_lease_valid": "1 while this process holds the partition's lease, renewed (it fetches only then).",
        "teamlog_nats_consumed_total": "Op messages submitted to the writer.",
        "teamlog_nats_published_total": "Records published to TEAMLOG_OUT and confirmed.",
        "teamlog_nats_skipped_total": "Redeliveries at or below the store's position, acked without being applied again.",
        "teamlog_nats_reseeks_total": "Times the consumer was made again at the store's position (out-of-order or lost deliveries).",
        "teamlog_nats_already_downstream_total": "Records not published because TEAMLOG_OUT already held them (a rebuilt partition).",
    ]

    /// `text` with a `# HELP` line before each `# TYPE` line of a metric `help` knows.
    static func withHelp(_ text: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.count + 4_096)
        let typePrefix = Array("# TYPE ".utf8)
        for line in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.starts(with: typePrefix) {
                let rest = line.dropFirst(typePrefix.count)
                let name = String(decoding: rest.prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
                if let help = help[name] { out += Array("# HELP \(name) \(help)\n".utf8) }
            }
            out += line
            out.append(UInt8(ascii: "\n"))
        }
        if !out.isEmpty && text.last != UInt8(ascii: "\n") { out.removeLast() }
        return out
    }
}

/// A Prometheus counter fed cumulative totals (a store's or a worker's counts since it started): each
/// reading adds what the total grew by since the last one.
final class TotalCounter: Sendable {
    private let counter: Metrics.Counter
    private let last = Mutex<Int>(0)

    init(_ label: String, factory: PrometheusMetricsFactory) {
        counter = Metrics.Counter(label: label, factory: factory)
    }

    func record(total: Int) {
        let grown = last.withLock { last in
            defer { last = max(last, total) }
            return total - last
        }
        if grown > 0 { counter.increment(by: grown) }
    }
}
