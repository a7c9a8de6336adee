import ArgumentParser
import TeamLogStore

/// `teamlog compact`: gives a store's free pages back to the file system, with no writer running.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Shrink the store's files to their live pages (no writer may run meanwhile).",
        discussion: """
            A compacted copy is made beside the store (DIR.compacting, as `teamlog backup` makes one) and \
            swapped with it in one step; then the old files are removed. It holds the writer lock throughout: \
            it refuses while a writer runs, and a writer started with --wait meanwhile gets the compacted \
            store. Queries may run throughout. `teamlog status` shows the free pages it would give back.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var priority: BackgroundPriority

    func run() throws {
        priority.lowerThisThread()  // before the copy's and the progress's threads
        Interrupts.removeLeftoversOnSignal()
        let path = storeOptions.path
        let start = monotonicSeconds()
        let total = (try? openForQuery(path)).flatMap { store in
            defer { store.close() }
            return (try? store.status())?.liveBytes
        }
        let progress = Progress("compact", total: total, unit: .bytes)
        defer { progress.clear() }
        let report: CompactReport
        do {
            report = try Store.compact(path: path, progress: progress.isOn ? { progress.update($0) } : nil)
        } catch let error as StoreError where error.path != path && error.path != nil {
            // The copy failed (a full disk, say): the store was not touched, and the message says so.
            throw CLIError("compaction of \(path) failed, and the store was left as it was: \(error)")
        } catch {
            throw cannotOpen(path, error)
        }
        progress.finish(at: report.bytesAfter)
        if json { return try printOut(report.json.jsonString) }
        try printOut(
            "compact \(report.path): \(report.bytesBefore) → \(report.bytesAfter) bytes (log through seq "
                + "\(report.headSeq), projections at checkpoint seq \(report.checkpointSeq)), "
                + "\(format3(monotonicSeconds() - start)) s")
    }
}
