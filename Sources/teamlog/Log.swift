import ArgumentParser
import TeamLog
import TeamLogStore

/// `teamlog log`: the events as JSON Lines that `teamlog ingest` accepts again (ts and opId kept), so a
/// log can be moved or rebuilt into a new store and audited equal.
struct Log: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Export events as JSON Lines that ingest accepts again.")

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "First seq to export.")
    var from: UInt64 = 1

    @Option(help: "Last seq to export.")
    var to: UInt64?

    @Option(help: "Only events of this team (team ops and messages to its conversation).")
    var team: String?

    func run() throws {
        let store = try openForQuery(storeOptions.path)
        var out: [UInt8] = []
        out.reserveCapacity(1 << 20)
        var problem: Store.ChainProblem?
        try store.forEachEvent(from: from, to: to) { event in
            if let team, event.op.body.team != Id(team) { return }
            out.append(contentsOf: event.op.jsonLine.utf8)
            out.append(0x0A)
            if out.count > 1 << 20 {
                try writeAll(1, out)
                out.removeAll(keepingCapacity: true)
            }
        } problem: {
            problem = $0
        }
        try writeAll(1, out)
        if let problem {
            printErr("teamlog: log is broken at \(problem); export stopped there")
            throw ExitCode(1)
        }
    }
}
