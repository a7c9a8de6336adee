import ArgumentParser
import TeamLogStore

/// `teamlog repair`: cut the log at its first bad record and rebuild the projections from the rest.
struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cut the log before its first broken record and rebuild every projection from the log.")

    @OptionGroup var storeOptions: StoreOptions

    @OptionGroup var budget: ReplayBudget

    func run() throws {
        // A replay frees much at once and waits on nobody: freed memory goes back to the kernel within 1 s.
        Allocator.setFreedPagesDecay(milliseconds: 1_000)
        Interrupts.removeLeftoversOnSignal()
        var options = Store.Options()
        options.verifyChainAtOpen = false
        options.mustExist = true  // a mistyped path is an error, not a new empty store "repaired"
        options.setAsideDamagedProjections = true  // the log is the truth: damaged projections are rebuilt
        let store: Store
        do { store = try Store(path: storeOptions.path, options: options, loadState: false) } catch {
            throw cannotOpen(storeOptions.path, error)
        }
        if let (aside, reason) = store.setAsideProjections {
            try printOut("projections: could not be opened (\(reason.code)): set aside in \(aside); rebuilt from the log below")
        }
        Interrupts.removeAbandonedScratchStores()
        // A log too damaged to read its head still gets a position and a rate.
        let progress = Progress("repair", total: (try? store.head().seq).map { Int($0) }, unit: .count("events"))
        defer { progress.clear() }
        let report = try store.repair(
            cacheBytes: budget.bytes, progress: progress.isOn ? { progress.update($0) } : nil)
        progress.finish(at: report.keptEvents)
        if let p = report.problem {
            try printOut("chain broken at \(p): removed \(report.removedEvents) records from seq \(p.seq) on")
        } else {
            try printOut("chain OK")
        }
        if let file = report.cutFile {
            try printOut(
                "saved the \(report.removedEvents) removed records to \(file): op lines `teamlog ingest` takes again "
                    + "(check the first, the record the log broke at, before you feed them)")
        }
        let o = report.opIds
        let freed = o.freedByCut > 0 ? "; freed the opIds of \(o.freedByCut) cut events" : ""
        if o.changed {
            try printOut(
                "opIds: MENDED from the log: \(o.added) added, \(o.corrected) corrected, \(o.removed) removed\(freed) "
                    + "(\(o.entries) entries now)")
        } else {
            try printOut("opIds: OK: \(o.entries) entries agree with the log\(freed)")
        }
        if o.repeated > 0 {
            try printOut(
                "opIds: \(o.repeated) events carry an opId an earlier event carried: the first keeps it "
                    + "(`teamlog audit` names the next)")
        }
        try printOut(
            "kept \(report.keptEvents) events; rebuilt \(report.projectionRecords) projection records from the log")
        try printOut(ReplayBudget.line(report.replay))
    }
}
