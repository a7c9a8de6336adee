import ArgumentParser
import TeamLog
import TeamLogRuntime
import TeamLogStore

/// `teamlog records`: the output records (SPEC §4) of past events, re-derived from the log, for a consumer
/// that missed them (`serve`'s record stream keeps only a window; `ingest --emit` printed them once).
struct Records: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the output records of past events (SPEC §4 JSON Lines), re-derived from the log.",
        discussion: """
            Each accepted op's `event` record (its `line` is 0: the log keeps no input line) followed by its \
            tips, deliveries, notices, signals and logins, exactly as the writer made them; a system sync's \
            outputs alone. `rejected` and `duplicate` records are not in the log. The state before --from is \
            rebuilt by a replay into a scratch store (from --base's checkpoint when given), so a late --from \
            costs a replay of the log up to it.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "First seq whose records to print.")
    var from: UInt64 = 1

    @Option(help: "Last seq whose records to print (default: the log's head).")
    var to: UInt64?

    @Option(
        help: ArgumentHelp(
            "A copy of this store (`teamlog backup`) at or before --from - 1, or a directory of copies (the newest such is taken), to start the replay from.",
            valueName: "DIR"))
    var base: String?

    func validate() throws {
        try validateSeq(from, "--from")
        if let to { try validateSeq(to, "--to") }
        if let to, to < from { throw ValidationError("--to \(to) is before --from \(from)") }
        if base != nil && from == 1 { throw ValidationError("--base is for a --from past 1: nothing is replayed before seq 1") }
    }

    func run() throws {
        Allocator.setFreedPagesDecay(milliseconds: 1_000)
        Interrupts.removeLeftoversOnSignal()
        if Store.isVerifiedCopy(storeOptions.path) {
            throw CLIError(
                "\(storeOptions.path) is a verified copy (`teamlog audit --verified`): projections only, it holds no log "
                    + "to derive records from; use the store it was made from")
        }
        let store = try openForQuery(storeOptions.path)
        defer { store.close() }
        Interrupts.removeAbandonedScratchStores()
        let baseCopy = try base.map { try chooseBase($0, for: from - 1, of: storeOptions.path) }
        defer { baseCopy?.store.close() }
        let head = try? store.head().seq
        let end = head.map { min(to ?? $0, $0) } ?? to
        // One line from the replay's start to the range's end: the replay before --from, then the records.
        let progress = Progress(
            "records", total: end.map { Int($0) }, from: Int(baseCopy?.checkpointSeq ?? 0), unit: .count("events"))
        defer { progress.clear() }
        var out: [UInt8] = []
        func flush() throws {
            progress.beforeStdout()
            try writeAll(1, out)
            out.removeAll(keepingCapacity: true)
        }
        let result: Store.RederivedRecords
        do {
            result = try store.rederiveRecords(
                from: from, to: to, base: baseCopy?.store, progress: progress.isOn ? { progress.update($0) } : nil
            ) { seq, records in
                out += WriterService.encode(records)
                if out.count >= 256 << 10 { try flush() }
                progress.update(Int(seq))
                return true
            }
        } catch let error as Store.AsOfError {
            throw CLIError(error.description)
        } catch where ScratchStore.isScratchFailure(error) {
            progress.clear()
            throw scratchFailed("the replay to seq \(from - 1)", error)
        }
        try flush()
        progress.finish(at: Int(result.last))
        if let problem = result.problem {
            printErr("teamlog: log is broken at \(problem); records stopped there")
            throw ExitCode(1)
        }
    }
}
