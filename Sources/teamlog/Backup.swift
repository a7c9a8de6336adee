import ArgumentParser
import TeamLogStore

/// `teamlog backup --to DIR`: a consistent, compacted copy of the store in a new directory, beside a
/// writer that goes on working.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the store (log and projections, compacted) to a new directory while a writer may run.",
        discussion: """
            The projections are copied first, then the log, each from one read snapshot: the copy is the \
            store as a crash at that moment would leave it. A writer opening it replays the log after its \
            checkpoint (the reported lag); `teamlog audit --store DIR` checks it like any store.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "The new store's directory (created; an existing one must be empty).")
    var to: String

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var priority: BackgroundPriority

    func run() throws {
        priority.lowerThisThread()  // before the copy's and the progress's threads
        Interrupts.removeLeftoversOnSignal()
        let store = try openForQuery(storeOptions.path)
        defer { store.close() }
        let start = monotonicSeconds()
        let status = try store.status()
        let progress = Progress("backup", total: status.liveBytes, unit: .bytes)
        defer { progress.clear() }
        let report: BackupReport
        do {
            report = try store.backup(to: to, progress: progress.isOn ? { progress.update($0) } : nil)
        } catch {
            throw CLIError("\(error)")
        }
        progress.finish(at: report.logBytes + report.projectionBytes)
        if json { return try printOut(report.json.jsonString) }
        let seconds = monotonicSeconds() - start
        try printOut(
            "backup \(report.path): log through seq \(report.headSeq) (\(report.logBytes) bytes), projections at "
                + "checkpoint seq \(report.checkpointSeq) (\(report.projectionBytes) bytes), lag \(report.lag) events, "
                + "\(format3(seconds)) s")
    }
}
