import Metrics
import Synchronization
public import Prometheus
import TeamLog
public import TeamLogRuntime
import TeamLogStore

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
    let workingSetLoads: Metrics.Counter
    let workingSetEvictions: Metrics.Counter
    /// The store's cumulative loads and evictions last added to the counters (the writer's thread only).
    private let countedWorkingSet = Mutex<(loads: Int, evictions: Int)>((0, 0))
    let windowEvents: Metrics.Gauge
    let windowBytes: Metrics.Gauge
    let atReplays: Metrics.Gauge

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
        workingSetLoads = Metrics.Counter(label: "teamlog_working_set_loads_total", factory: factory)
        workingSetEvictions = Metrics.Counter(label: "teamlog_working_set_evictions_total", factory: factory)
        windowEvents = Metrics.Gauge(label: "teamlog_record_window_events", factory: factory)
        windowBytes = Metrics.Gauge(label: "teamlog_record_window_bytes", factory: factory)
        atReplays = Metrics.Gauge(label: "teamlog_at_replays_running", factory: factory)
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
            let (loads, evictions) = countedWorkingSet.withLock { counted in
                defer { counted = (workingSet.loads, workingSet.evictions) }
                return (workingSet.loads - counted.loads, workingSet.evictions - counted.evictions)
            }
            if loads > 0 { workingSetLoads.increment(by: loads) }
            if evictions > 0 { workingSetEvictions.increment(by: evictions) }
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
    func exposition(store: Store?, atReplaysRunning: Int, checkpointLagNow: UInt64? = nil, checkpointFailingNow: Bool = false)
        -> [UInt8]
    {
        atReplays.record(Double(atReplaysRunning))
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
        return registry.emitToBuffer()
    }
}
