import ArgumentParser
import TeamLog
import TeamLogStore

/// `teamlog status`: the log's head, the projections' checkpoint and the lag between them, each table's
/// size, the map sizes and the writer's pid.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the log's head, the projections' checkpoint and lag, table sizes and the writer.")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let status = try openForQuery(storeOptions.path).status()
        if json {
            try printOut(status.json.jsonString)
            return
        }
        var lines = [
            "head        seq \(status.headSeq), event time \(status.headTs)",
            "checkpoint  seq \(status.checkpointSeq), event time \(status.checkpointTs) (queries answer as of it)",
            "lag         \(status.lag) events",
            "writer      \(status.writerPid.map { "pid \($0)" } ?? "none")",
            "log map     \(status.logUsedBytes) of \(status.logMapSize) bytes used",
            "proj map    \(status.projectionUsedBytes) of \(status.projectionMapSize) bytes used",
        ]
        for table in status.tables {
            lines.append("\(table.name.padding(22))\(String(table.entries).padding(12))\(table.bytes) bytes")
        }
        try printOut(lines.joined(separator: "\n"))
    }
}
