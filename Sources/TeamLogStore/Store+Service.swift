public import LMDB
public import TeamLog
import TeamLogThreads

/// What a long-running writer process (`teamlog serve`) needs besides the CLI's API: reads of the stored
/// projections from threads other than the writer's, and the log export in chunks.
extension Store {
    /// Runs `body` in a read snapshot of the projections as they are on disk, with the seq of the
    /// checkpoint that snapshot holds. Unlike `readProjections` it never checkpoints first, so it touches
    /// nothing of the writer's state and may run on any thread while the writer works (LMDB read
    /// transactions are `MDB_NOTLS`; the environment's resize lock keeps them off a map growth). It sees
    /// the stored checkpoint only; queries that must read their writes use `readCommitted`.
    public func readStoredProjections<R>(_ body: (Transaction, _ checkpointSeq: UInt64) throws -> R) throws -> R {
        try projectionEnv.read { txn in try body(txn, pdbs.readCheckpoint(txn).seq) }
    }

    /// `teamlog log`: committed events `from`…`to` as JSON Lines that `ingest` accepts again (ts and opId
    /// kept), only those of `team` when given, handed to `write` in chunks of about `chunkBytes`;
    /// `visited` sees every seq walked (for progress), `exported` every op written. Safe on any thread (one
    /// read snapshot of the log). Returns the first break of the hash chain, if any: the export stops
    /// before it.
    public func exportLog(
        from: UInt64 = 1, to: UInt64? = nil, team: Id? = nil, chunkBytes: Int = 64 << 10,
        visited: (UInt64) -> Void = { _ in }, exported: (Op) -> Void = { _ in }, write: ([UInt8]) throws -> Void
    ) throws -> ChainProblem? {
        var out: [UInt8] = []
        out.reserveCapacity(chunkBytes)
        var problem: ChainProblem?
        try forEachEvent(from: from, to: to) { event in
            visited(event.seq)
            if let team, event.op.body.team != team { return }
            exported(event.op)
            out.append(contentsOf: event.op.jsonLine.utf8)
            out.append(0x0A)
            if out.count > chunkBytes {
                try write(out)
                out.removeAll(keepingCapacity: true)
            }
        } problem: {
            problem = $0
        }
        if !out.isEmpty { try write(out) }
        return problem
    }
}

extension Store {
    /// Why the state as of a seq cannot be given.
    public struct AsOfError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// `--at SEQ` / `?at=SEQ`: the store as of `seq`, replayed from the log into a scratch store, whose
    /// projections are checkpointed (query it with `readStoredProjections` too); the caller removes it.
    /// Throws `AsOfError` when the log is broken before `seq` or ends before it. `config`: as for
    /// `replayIntoScratch` (another thread than the writer's passes the settings it read at open).
    /// `base`: a copy of this store at or before `seq` to start from (`replayIntoScratch(base:)`): only the
    /// events after its checkpoint are replayed. `progress`: the replay's seq, every 65,536.
    public func replayed(
        at seq: UInt64, config: Config? = nil, base: Store? = nil, progress: ((Int) -> Void)? = nil
    ) throws -> ScratchStore {
        let scratch = try replayIntoScratch(upTo: seq, config: config, base: base, progress: progress)
        if let problem = scratch.problem {
            scratch.remove()
            throw AsOfError(description: "cannot replay to seq \(seq): \(problem)")
        }
        if UInt64(scratch.events) < seq {
            scratch.remove()
            throw AsOfError(description: "the log ends at seq \(scratch.events), before \(seq)")
        }
        do { try scratch.owning { try scratch.store.checkpointNow() } } catch {
            scratch.remove()
            throw error
        }
        return scratch
    }
}

extension Store {
    /// Takes the position of a checkpoint that has finished, without waiting for one that has not; the
    /// seq the stored projections are at.
    public func pollCheckpoint() -> UInt64 {
        if inFlightCheckpointIsDone { finishCheckpoint() }
        return checkpoint.seq
    }

    /// A writer's checkpoint while its input is idle. Checkpoints start at commits (`checkpointDue`), so
    /// a writer whose feed went quiet after a burst left the stored projections — what other processes'
    /// queries and `teamlog status` read — behind by that burst for as long as the quiet lasted (and the
    /// next open replayed it). A writer's loop calls this while it waits for input, with no op pending
    /// and no commit in flight (else it does nothing): it takes the position of a checkpoint that has
    /// finished, and starts the next once `checkpointMs` has passed since the last one started, when ops
    /// (or a failed checkpoint's records) are waiting for it. Returns how many milliseconds the caller may
    /// wait before calling again (at most a minute); `nil` when nothing waits for a checkpoint until more
    /// ops come.
    public func checkpointIfIdle() -> Int? {
        guard refusal == nil, writerLock != nil, !isCommitting, pendingCount == 0 else { return nil }
        guard inFlightCheckpointIsDone else { return Self.idleCheckpointPollMs }
        finishCheckpoint()
        guard
            opsSinceCheckpoint > 0 || !world.changes.isEmpty || !carriedChanges.isEmpty
                || !checkpointBuffer.isEmpty || checkpointFailed
        else { return nil }
        let since = MonotonicClock.milliseconds() - lastCheckpointMs
        if since < Int64(options.checkpointMs) { return Int(min(Int64(options.checkpointMs) - since, 60_000)) }
        startCheckpoint(after: nil)  // every op it reaches is durable: nothing is pending or in flight
        return Self.idleCheckpointPollMs
    }

    /// How often an idle writer looks whether its checkpoint has finished (`checkpointIfIdle`).
    static let idleCheckpointPollMs = 20
}
