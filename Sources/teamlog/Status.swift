import ArgumentParser
import TeamLog
import TeamLogStore
import TeamLogNATS

/// `teamlog status`: the log's head, the projections' checkpoint and the lag between them, each table's
/// size, the map sizes and the writer's pid.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the log's head, the projections' checkpoint and lag, table sizes and the writer.")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup(title: "NATS deployment (docs/nats.md)") var cluster: ClusterOptions

    func run() throws {
        if cluster.nats != nil { return try clusterStatus() }
        let status = try openForQuery(storeOptions.path).status()
        if json {
            try printOut(status.json.jsonString)
            return
        }
        var lines = [
            "head        seq \(status.headSeq), event time \(status.headTs)",
            "checkpoint  seq \(status.checkpointSeq), event time \(status.checkpointTs) (queries answer as of it)",
            "lag         \(status.lag) events"
                + (status.projectionsPastLog
                    ? "\nPROBLEM     the projections are past the log's head: they hold events the log does not; "
                        + "queries refuse the store until `teamlog repair` rebuilds them from the log"
                    : "")
                + (status.verifiedCopy
                    ? "\nverified    a verified copy (`teamlog audit --verified`): projections only, no log; a base, not a store to write"
                    : ""),
            "writer      \(status.writerPid.map { "pid \($0)" } ?? "none")",
            "input       "
                + (status.input.map {
                    "line \($0.line) of \($0.path) (byte \($0.offset)): `teamlog ingest FILE --resume` goes on after it"
                } ?? "none recorded (no `ingest` of a file)"),
            "read-ahead  \(status.readAhead ? "on" : "off") (memory limit "
                + "\(status.memoryLimitBytes.map { "\($0) bytes" } ?? "unknown"); TEAMLOG_READ_AHEAD)",
            "log map     \(status.logUsedBytes) of \(status.logMapSize) bytes used, \(status.logFreeBytes) of them free pages",
            "proj map    \(status.projectionUsedBytes) of \(status.projectionMapSize) bytes used, "
                + "\(status.projectionFreeBytes) of them free pages",
        ]
        for table in status.tables {
            lines.append("\(table.name.padding(22))\(String(table.entries).padding(12))\(table.bytes) bytes")
        }
        for item in status.setAside {
            lines.append(
                item.kind == "cutRecords"
                    ? "set aside   \(item.path): log records a repair cut; feed them again (`teamlog ingest FILE`) or remove it"
                    : "set aside   \(item.path): projections a repair could not open; inspect, then remove it (`compact` drops it)")
        }
        try printOut(lines.joined(separator: "\n"))
    }
}

extension Status {
    /// `teamlog status --nats URL --partitions N`: each partition's status (its store's, plus its stream
    /// position, counters and whether it has caught up), one JSON array with `--json`.
    /// A partition that does not answer is reported as such (`{"partition":P,"error":…}` in JSON) beside
    /// the others' statuses, and the command then exits 3.
    func clusterStatus() throws {
        let results: [Result<JSONValue, ClusterError>]
        let queries: ClusterQueries
        do {
            queries = try cluster.queries()
            results = queries.statusesOrFailures()
        } catch {
            printErr("teamlog: \(error)")
            throw ExitCode(3)
        }
        var statuses: [JSONValue] = []
        // Said from the op stream's record, not echoed from --partitions (an operator's trial: a NATS server
        // with no deployment at all was described as one of 7 partitions).
        let deployment: String
        if let recorded = queries.recorded {
            let count = recorded.partitions.map { "\($0) partitions" }
                ?? "\(queries.partitions) partitions (the op stream records no count)"
            deployment = "deployment: \(count), partitioning \(queries.scheme)"
        } else {
            deployment = "deployment: none on this NATS server (no \(TeamLogSubjects.opsStream) stream yet); asking "
                + "\(queries.partitions) partitions"
        }
        var lines = [deployment]
        var unanswered = false
        for (p, result) in results.enumerated() {
            switch result {
            case .success(let s):
                statuses.append(s)
                lines.append(
                    "partition \(p): head seq \(TeamLogNATS_text(s["headSeq"])), stream position "
                        + "\(TeamLogNATS_text(s["sourcePosition"])), consumed \(TeamLogNATS_text(s["consumed"])), unpublished "
                        + "\(TeamLogNATS_text(s["unpublished"])), backlog \(TeamLogNATS_text(s["pending"])), in flight "
                        + "\(TeamLogNATS_text(s["inFlight"])), lease \(s["leaseValid"]?.boolValue == false ? "NOT VALID (fetching paused)" : "valid"), caught up "
                        + TeamLogNATS_text(s["caughtUp"]))
            case .failure(let error):
                unanswered = true
                // Whether a process still holds its lease (it died or hangs: it lapses after its TTL) or
                // none does (stopped cleanly, or never started).
                let lease: (json: JSONValue, text: String)
                switch queries.leaseHolder(p) {
                case .success(let (holder, ago)?):
                    lease = (
                        .object([
                            ("pid", .int(Int64(holder.pid))), ("host", .string(holder.host)),
                            ("ttlMs", .int(Int64(holder.ttlMs))), ("renewedMsAgo", .int(ago)),
                        ]),
                        "its lease is held by \(holder), last renewed \(Progress.duration(Double(ago) / 1_000)) ago "
                            + "(another process takes it over \(Progress.duration(Double(holder.takeoverMs) / 1_000)) "
                            + "after the last renewal)")
                case .success(nil): lease = (.null, "no process holds its lease (stopped cleanly, or never started)")
                case .failure(let why): lease = (.string("\(why)"), "its lease unknown: \(why)")
                }
                statuses.append(
                    .object([("partition", .int(Int64(p))), ("error", .string("\(error)")), ("lease", lease.json)]))
                lines.append("partition \(p): NO ANSWER: \(error); \(lease.text)")
            }
        }
        try printOut(json ? JSONValue.array(statuses).jsonString : lines.joined(separator: "\n"))
        if unanswered { throw ExitCode(3) }
    }
}

private func TeamLogNATS_text(_ v: JSONValue?) -> String { TeamTable.text(v) }

