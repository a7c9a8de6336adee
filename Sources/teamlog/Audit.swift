import ArgumentParser
import TeamLog
import TeamLogStore

/// `teamlog audit`: hash chain + replay + compare; exit 0 when all match, 1 otherwise.
struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify the log's hash chain, replay it and compare with the stored projections.")

    @OptionGroup var storeOptions: StoreOptions

    @OptionGroup var priority: BackgroundPriority

    @Option(
        help: ArgumentHelp(
            "A copy of this store (`teamlog backup`) to start the replay from: only the log after its checkpoint is replayed.",
            valueName: "DIR"))
    var base: String?

    @Option(
        help: ArgumentHelp(
            "A directory of verified copies: start from the newest one at or before the store's checkpoint (unless --base is given), and keep a clean audit's replayed projections there as the next one.",
            valueName: "DIR"))
    var verified: String?

    @Option(help: ArgumentHelp("Verified copies kept in --verified DIR, the newest (at least 1).", valueName: "N"))
    var keepVerified: Int = 2

    @OptionGroup var budget: ReplayBudget

    @Flag(help: "Print the report as one JSON object (for monitoring); the exit status is the same.")
    var json = false

    func validate() throws {
        if keepVerified < 1 { throw ValidationError("--keep-verified must be at least 1") }
        // Inside the store, `compact` and `repair` would remove the copies without a word.
        if let verified {
            do { try Store.refuseInside(verified, of: storeOptions.path, "--verified") } catch let error as StoreError {
                throw ValidationError(error.message)
            }
        }
    }

    func run() throws {
        priority.lowerThisThread()  // before the replay's, the comparison's and the scratch store's threads
        // A replay frees much at once and waits on nobody: freed memory goes back to the kernel within 1 s.
        Allocator.setFreedPagesDecay(milliseconds: 1_000)
        Interrupts.removeLeftoversOnSignal()
        if Store.isVerifiedCopy(storeOptions.path) {
            // Its log is empty by design: every table would "differ" from a replay of nothing.
            printErr(
                "teamlog: \(storeOptions.path) is a verified copy (`teamlog audit --verified`): projections only, no log "
                    + "to replay. It is checked against its VERIFIED file whenever an audit starts from it "
                    + "(`teamlog audit --store STORE --verified DIR`); audit the store it was made from")
            throw ExitCode(2)
        }
        let store = try openForQuery(storeOptions.path)
        Interrupts.removeAbandonedScratchStores()
        let start = monotonicSeconds()
        // A head that cannot be read is the audit's to report: the progress goes without a total.
        let progress = Progress("audit", total: (try? store.head().seq).map { Int($0) }, unit: .count("events"))
        defer { progress.clear() }
        var baseStore = try base.map { try openBase($0, of: storeOptions.path) }
        var basePath = base
        if baseStore == nil, let verified {
            // The newest copy a clean audit of this store left, at or before the checkpoint to audit.
            let checkpointSeq = try store.readStoredProjections { $1 }
            do {
                let found = try Store.newestCopy(
                    at: verified, atOrBefore: checkpointSeq, excluding: storeOptions.path, verifiedOnly: true)
                (baseStore, basePath) = (found.copy?.store, found.copy?.path)
            } catch { throw CLIError("cannot use --verified \(verified): \(error)") }
        }
        defer { baseStore?.close() }
        let update: ((Int) -> Void)? = progress.isOn ? { progress.update($0) } : nil
        let report: AuditReport
        do {
            report = try store.audit(
                base: baseStore, keepingVerifiedCopyIn: verified, cacheBytes: budget.bytes, progress: update)
        } catch where ScratchStore.isScratchFailure(error) {
            progress.clear()
            throw scratchFailed("the audit", error)
        }
        // The replay reaches the checkpoint; the chain is then checked to the head unless it broke before.
        progress.finish(at: report.chainProblem == nil ? Int(report.headSeq) : report.events)
        let elapsed = max(monotonicSeconds() - start, 1e-9)
        if json { return try printJSON(report, seconds: elapsed, basePath: basePath, base: &baseStore) }
        if let baseSeq = report.baseSeq, let base = basePath {
            // The rate is the replay's, which the base shortened: not comparable with a full audit's.
            try printOut("log: \(report.events) events, checkpoint seq \(report.seq), chain checked from seq 1")
            try printOut(
                "base: \(base) at checkpoint seq \(baseSeq); replayed the \(report.replayedEvents) events after it "
                    + "in \(format3(elapsed)) s all told")
        } else {
            // The replay reaches the checkpoint; the log's tail after it is chain-checked, not replayed.
            let tail = report.headSeq > report.seq ? " (head seq \(report.headSeq): the tail after it chain-checked)" : ""
            try printOut(
                "log: \(report.events) events replayed to checkpoint seq \(report.seq)\(tail), "
                    + "\(Int(Double(report.events) / elapsed)) events/s")
        }
        try printOut(ReplayBudget.line(report.replay))
        if let p = report.chainProblem { try printOut("chain: BROKEN at \(p)") } else { try printOut("chain: OK") }
        if let p = report.checkpointProblem { try printOut("checkpoint: \(p)") }
        if let p = report.settingsProblem { try printOut("settings: DAMAGED: the record \(p)") }
        let o = report.opIds
        if let difference = o.difference {
            try printOut("opIds: DIFFERS: \(difference) (`teamlog repair` mends the index from the log)")
        } else if report.chainProblem != nil || report.checkpointProblem != nil {
            try printOut("opIds: \(o.eventsWithOpId) events' opIds found at their seqs, to where the log was checked")
        } else {
            try printOut(
                "opIds: OK: \(o.entries) entries, \(o.accepted) accepted (each the opId of the event at its seq), "
                    + "\(o.entries - o.accepted) rejections")
        }
        let stoppedEarly = !report.comparedTables
        if stoppedEarly {
            try printOut("tables: not compared: the replay stopped at the chain's break, before the checkpoint "
                + "(`teamlog repair` cuts the log there and rebuilds them)")
        }
        for t in report.tables {
            let status = stoppedEarly ? "not compared" : t.difference.map { "DIFFERS: \($0)" } ?? "OK"
            try printOut("\(t.table.padding(14))\(String(t.records).padding(10))\(t.digest)  \(status)")
        }
        if let copy = report.verifiedCopy, let verified {
            baseStore?.close()  // before the older copies go, the one it was may be among them
            baseStore = nil
            let removed = Store.pruneVerifiedCopies(in: verified, keep: keepVerified, sparing: copy)
            try printOut(
                "verified: \(copy) kept" + (removed.isEmpty ? "" : "; removed \(removed.joined(separator: ", "))"))
        }
        if !report.ok, report.baseSeq != nil, let basePath, let baseStore {
            try explainFailure(from: basePath, baseStore)
        }
        try printOut(report.ok ? "audit OK" : "audit FAILED")
        if !report.ok { throw ExitCode(1) }
        if let problem = report.verifiedCopyProblem {
            printErr("teamlog: the audit is clean, but its verified copy was not kept in \(verified ?? ""): \(problem)")
            throw ExitCode(2)
        }
    }
}

extension Audit {
    /// `--json`: the report (`AuditReport.json`) with the base it started from, the verified copies it
    /// removed and, after a difference found from a base, whose it is (`baseDamage`: the damage a verified
    /// copy shows against its `VERIFIED` file, `[]` for none, `null` when it is no verified copy). Exits as
    /// the text form does.
    func printJSON(_ report: AuditReport, seconds: Double, basePath: String?, base: inout Store?) throws {
        guard case .object(var fields) = report.json(seconds: seconds) else { return }
        fields.append(("basePath", basePath.map(JSONValue.string) ?? .null))
        if !report.ok, report.baseSeq != nil, let base {
            let damage = try? base.verifiedCopyDamage()
            fields.append(("baseDamage", damage.flatMap { $0 }.map { .array($0.map(JSONValue.string)) } ?? .null))
        }
        var removed: [String] = []
        if let copy = report.verifiedCopy, let verified {
            base?.close()  // before the older copies go, the one it was may be among them
            base = nil
            removed = Store.pruneVerifiedCopies(in: verified, keep: keepVerified, sparing: copy)
        }
        fields.append(("removedCopies", .array(removed.map(JSONValue.string))))
        try printOut(JSONValue.object(fields).jsonString)
        if !report.ok { throw ExitCode(1) }
        if let problem = report.verifiedCopyProblem {
            printErr("teamlog: the audit is clean, but its verified copy was not kept in \(verified ?? ""): \(problem)")
            throw ExitCode(2)
        }
    }

    /// After an audit from a copy found a difference: whose it is. A verified copy's tables are checked
    /// against the digests its `VERIFIED` file recorded — unchanged, the difference is the store's; changed,
    /// the copy was damaged since it was kept. Of a backup, only a full audit can tell.
    func explainFailure(from basePath: String, _ base: Store) throws {
        guard let damage = try? base.verifiedCopyDamage() else {  // no verified copy (or unreadable)
            return try printOut(
                "base: the difference may be the copy's as well as the store's: a full `teamlog audit` (no --base) tells"
            )
        }
        if damage.isEmpty {
            try printOut(
                "base: \(basePath) still matches its VERIFIED file: the difference is the store's (or its log's)")
        } else {
            try printOut(
                "base: \(basePath) was DAMAGED since it was kept (\(damage.joined(separator: "; "))): remove it "
                    + "and audit without it (a full `teamlog audit`, or --verified from an older copy)")
        }
    }
}
