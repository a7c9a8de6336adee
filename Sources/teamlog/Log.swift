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

    /// An empty range is a mistake; a `--from` past the head is not (an incremental export that finds
    /// nothing new prints nothing and succeeds).
    func validate() throws {
        if from > 0 { try validateSeq(from, "--from") }  // 0: from the start, as 1
        if let to { try validateSeq(to, "--to") }
        if let to, to < from { throw ValidationError("--to \(to) is before --from \(from)") }
        if let team { try validateIdArgument(team, "--team") }
    }

    func run() throws {
        if Store.isVerifiedCopy(storeOptions.path) {  // it printed nothing and exited 0
            throw CLIError(
                "\(storeOptions.path) is a verified copy (`teamlog audit --verified`): projections only, it holds no log "
                    + "to export; export the store it was made from")
        }
        let store = try openForQuery(storeOptions.path)
        // The export of a damaged store goes on without a total when its head cannot be read.
        let head = try? store.head().seq
        let end = head.map { min(to ?? $0, $0) } ?? to
        let progress = Progress("log", total: end.map { Int($0) }, from: Int(max(from, 1)) - 1, unit: .count("events"))
        defer { progress.clear() }
        var last = Int(max(from, 1)) - 1
        var readsWithUpTo = 0
        let problem = try store.exportLog(from: from, to: to, team: team.map { Id($0) }) { seq in
            last = Int(seq)
            progress.update(last)
        } exported: { op in
            if op.readsUpToASeq { readsWithUpTo += 1 }
        } write: { chunk in
            progress.beforeStdout()
            try writeAll(1, chunk)
        }
        progress.finish(at: last)
        // What a store made from this export must be told (a trial: a 2,100-member team's create, refused
        // `teamFull` by a store of the default limits, and everything after it).
        let config = store.world.config
        if config != Config() {
            printErr(
                "teamlog: this store's settings are not the defaults: make a store from this export with "
                    + "--max-team-members \(config.teamMaxMembers) --max-super-team-members \(config.superTeamMaxMembers) "
                    + "--members-sync-ms \(config.membersSyncTimeoutMs)")
        }
        // A part of the log is numbered anew where it is ingested: a read's `upTo` names a seq of this log.
        if readsWithUpTo > 0 && (from > 1 || team != nil) {
            printErr(
                "teamlog: warning: \(readsWithUpTo) exported message.read ops carry upTo, a seq of this log; a store made "
                    + "from \(team != nil ? "one team's events" : "a part of the log") numbers events anew, so there they "
                    + "mark another position (a whole export keeps every seq)")
        }
        if let problem {
            printErr("teamlog: log is broken at \(problem); export stopped there")
            throw ExitCode(1)
        }
    }
}
