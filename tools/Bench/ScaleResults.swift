// What one `teamlog-bench --scale` run measured, and the ratios issue 11's bars are stated in.

/// Everything one `--scale` run measured, in the order it measured it; `markdown` renders it.
struct ScaleResults {
    /// One chunk of the workload ingested by its own `teamlog ingest`, then the open-and-ingest-one-op probe.
    struct Chunk {
        /// Ops of the workload before this chunk.
        var firstOp: Int
        /// Lines in this chunk.
        var ops: Int
        var ingest: ChildRun
        var ingestSummary: IngestSummary?
        /// Opening the store and ingesting one `client.login`; nil when the chunk's ingest failed.
        var probe: ChildRun?
        var probeSummary: IngestSummary?
        /// Allocated bytes of the store's files after the probe (`st_blocks`).
        var storeDiskBytes: Int

        /// Lines per second of wall time, opening the store included.
        var wallRate: Double { Double(ops) / ingest.seconds }
        /// Lines per CPU second of the ingest child (its threads together): its rate with the load of other
        /// processes on a shared machine taken out.
        var cpuRate: Double { Double(ops) / max(ingest.cpuSeconds, 1e-9) }
        /// Lines per second by teamlog's own clock (after the store is open).
        var ownRate: Double? { ingestSummary.map { Double($0.lines) / max($0.seconds, 1e-9) } }
    }

    /// The command line, as run.
    var command: String
    /// UTC, `YYYY-MM-DD HH:MM`.
    var date: String
    /// Cores, memory and load average at the start, for reading the numbers.
    var machine: String
    /// The generator's command line.
    var workload: String
    var plannedOps: Int
    var chunkSize: Int
    var generation: ChildRun
    /// The largest `ru_maxrss` of a trivial child (`/bin/true`), spawned at the start and the end: the
    /// floor under every child's peak RSS (see `ChildRun.peakRSSBytes`).
    var floorRSSBytes: Int = 0
    var chunks: [Chunk] = []
    var audit: ChildRun?
    var auditSummary: AuditSummary?
    /// The second audit, with `--cache-mb mb` (`--scale-audit-cache-mb`), and its summary.
    var budgetAudit: (mb: Int, run: ChildRun, summary: AuditSummary?)?
    /// `teamlog backup` of the store before its last chunk (after `afterOps` ops), and its `--json` line.
    var backup: (run: ChildRun, afterOps: Int, report: String)?
    /// `teamlog audit --base` of the final store from that copy: its `base:` line and whether it was OK.
    var baseAudit: (run: ChildRun, baseLine: String, ok: Bool)?
    /// `teamlog audit --verified V` of that copy (a full audit, which keeps the first verified copy) and then
    /// of the final store (from that verified copy): each run, its `base:` line, whether it was OK.
    var verifiedRoll: (ofCopy: ChildRun, ofStore: ChildRun, baseLine: String, ok: Bool)?
    /// `teamlog unread USER --at SEQ` of the final store from seq 1 and with `--base` that copy (SEQ halfway
    /// between the copy's checkpoint and the store's), and whether the two answered the same.
    var pointInTime: (user: String, at: UInt64, full: ChildRun, fromCopy: ChildRun, same: Bool)?
    /// `teamlog-bench --apply-ceiling` of the final store (a child): its events and seconds of `apply` alone.
    var applyCeiling: (run: ChildRun, events: Int, applySeconds: Double)?
    /// The whole workload by one `teamlog ingest` child (`--scale-one-process`), and its summary.
    var oneProcess: (run: ChildRun, summary: IngestSummary?)?
    /// What could not be measured, and why, in words.
    var problems: [String] = []
    /// Load average at the end.
    var loadAtEnd = ""
    var totalSeconds = 0.0

    // MARK: Issue 11's ratios

    /// Peak RSS of ingesting the last chunk over that of the first (bar: ≤ 1.3).
    var rssRatio: Double? {
        guard chunks.count >= 2, let first = chunks.first, let last = chunks.last else { return nil }
        return Double(last.ingest.peakRSSBytes) / Double(first.ingest.peakRSSBytes)
    }

    /// Ingest rate (wall) of the last chunk over that of the first (bar: ≥ 0.8).
    var rateRatio: Double? {
        guard chunks.count >= 2, let first = chunks.first, let last = chunks.last else { return nil }
        return last.wallRate / first.wallRate
    }

    /// Ingest ops per CPU second of the last chunk over the first: not a bar, the rate ratio without the
    /// other processes' share of the cores.
    var cpuRateRatio: Double? {
        guard chunks.count >= 2, let first = chunks.first, let last = chunks.last else { return nil }
        return last.cpuRate / first.cpuRate
    }

    /// The probe after the last chunk: opening the whole store and ingesting one op (bars: ≤ 1 s, ≤ 300 MB).
    var finalProbe: ChildRun? { chunks.last?.probe }

    /// Events replayed by the audit per second of its wall time (bar: ≥ 500,000).
    var auditRate: Double? {
        guard let audit, let auditSummary else { return nil }
        return Double(auditSummary.events) / audit.seconds
    }

    /// Ops ingested by completed chunks.
    var ingestedOps: Int { chunks.reduce(0) { $0 + $1.ops } }
}
