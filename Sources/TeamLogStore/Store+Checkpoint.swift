public import LMDB
import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Checkpoints: the projections written to their environment, off the path of log commits, and the log
/// after the last one replayed at open.
extension Store {
    /// Whether the next commit should also start a checkpoint (a query: see `hurryCheckpointIfNextIsDue`).
    var checkpointDue: Bool {
        guard inFlightCheckpointIsDone else {
            // One at a time; the next commit tries again. But the lag is bounded: twice the ops interval
            // behind, the writer waits for the running checkpoint (in `startCheckpoint`) rather than let the
            // uncheckpointed tail, and the dirty units it pins in memory, grow while a background-priority
            // checkpointer gets no core.
            return opsSinceCheckpoint >= 2 * options.checkpointOps
        }
        if opsSinceCheckpoint >= options.checkpointOps { return true }
        return opsSinceCheckpoint > 0 && MonotonicClock.milliseconds() - lastCheckpointMs >= Int64(options.checkpointMs)
    }

    /// When a checkpoint is still being written and the next one's interval (ops or time) has passed,
    /// tells the running one to stop pacing itself (`CheckpointJob.hurry`): its pauses spread its work
    /// over the interval, not past it. Called by the writer after each commit, before `checkpointDue`.
    func hurryCheckpointIfNextIsDue() {
        guard let running = inFlightCheckpoint, !inFlightCheckpointIsDone else { return }
        if opsSinceCheckpoint >= options.checkpointOps
            || MonotonicClock.milliseconds() - lastCheckpointMs >= Int64(options.checkpointMs)
        {
            running.hurry()
        }
    }

    /// Encodes every record changed since the last checkpoint from the state now (which `after`, the
    /// batch just handed to the log, brings the log to) and hands them to the checkpointer, which writes
    /// them once that batch is durable. The state's change set starts again empty.
    ///
    /// `hash`: the chain's hash at the state's seq when that is not the log's head (`lastHash`): an open's
    /// replay of a long tail checkpoints on the way (`replayTail`).
    func startCheckpoint(after job: CommitJob?, hash: [UInt8]? = nil) {
        finishCheckpoint()  // the previous one is done (`checkpointDue`), or this is an explicit call
        // What the finished checkpoint made clean: a step sized by the batch (all the ops since the last
        // checkpoint for an explicit one), the rest at the next commits — but not for `close`'s last
        // checkpoint: a step of all the ops since the last one was a sweep of ~320,000 units (279 ms) on
        // the way out of a 400,000-op ingest, evicting a state about to be freed (BENCHMARKS, thirteenth
        // session).
        if !closing { evictIfOverBudget(ops: job?.eventCount ?? opsSinceCheckpoint) }
        // The pages read since (opId lookups, units loaded), as the checkpointer does for its own, over the
        // budget (on the releaser's thread).
        releaseResidentPagesIfOverBudget()
        adjustReadAhead()  // the files grew
        let position = Checkpoint(seq: world.lastSeq, ts: world.lastTs, hash: hash ?? lastHash)
        let committer = self.committer
        bufferChanges()
        readerRecords?.checkpointStarted(at: position.seq)
        // The next buffer starts at this one's size: grown by doubling from empty, it was copied ~log₂ n
        // times per checkpoint.
        var changes = RecordBuffer(records: checkpointBuffer.count, bytes: checkpointBuffer.byteCount)
        swap(&changes, &checkpointBuffer)
        let checkpoint = CheckpointJob(
            env: projectionEnv, dbs: pdbs, changes: changes, checkpoint: position, after: job,
            mappedBytesBudget: mappedBytesBudget, duty: options.checkpointDuty,
            putsPerTransaction: checkpointPuts,
            waitForLog: { job in committer?.wait(job) })
        checkpointFailed = false
        world.clearChanges()
        workingSet.lastIntervalOps = opsSinceCheckpoint
        opsSinceCheckpoint = 0
        lastCheckpointMs = MonotonicClock.milliseconds()
        if checkpointer == nil { checkpointer = WriterThread(name: "tl-checkpoint", nice: options.checkpointNice) }
        if let checkpointer {
            checkpointer.start(checkpoint)
        } else {
            checkpoint.runInPlace()
        }
        inFlightCheckpoint = checkpoint
    }

    /// Encodes the records the state marks as changed since the last commit into the next checkpoint's
    /// buffer (at each commit, so a checkpoint only hands the buffer over and never stalls the store's
    /// thread), and forgets the marks. A record changed in several batches is encoded once per batch; the
    /// checkpointer writes only its last value.
    ///
    /// `limit`: a commit's share (`commitEncodingBudget(limit:)`): encode about that many, oldest first,
    /// and carry the rest (`carriedChanges`) to the next calls — each takes its share and an eighth of
    /// what is left beyond it; `nil` (a checkpoint, an explicit call) encodes everything carried too. A
    /// stream's commit after a 2,000-member team's dismiss or create had ~4,000–6,000 records to encode,
    /// and the lines behind it waited 3–8 ms for them (a trace of `teamlog-bench --stream`, nineteenth
    /// session). Every carried record is encoded from the state when it is, so the buffer's last value of
    /// a key is still the latest; and no carried unit is evicted first, since ops after the last
    /// checkpoint's start named it.
    func bufferChanges(limit: Int? = nil) {
        let added = world.changes.count
        if limit != nil { changesPerCommit += (Double(added) - changesPerCommit) / 16 }
        guard added > 0 || !carriedChanges.isEmpty else { return }
        let share = limit.map { commitEncodingBudget(limit: $0) }
        let start = checkpointBuffer.count
        // No `reserveCapacity(count + n)` here: called at every commit it reallocated the whole buffer
        // each time (exact growth), where appending grows it geometrically.
        if carriedChanges.isEmpty && share.map({ added <= $0 }) ?? true {
            CheckpointJob.appendChanges(world.changes.appended, world.changes.dirty, of: world, to: &checkpointBuffer)
        } else {
            carriedChanges.append(contentsOf: world.changes.appended)
            carriedChanges.append(contentsOf: world.changes.dirty)
            let carried = carriedChanges.count
            let now = share.map { min(carried, $0 + max(0, carried - $0) / 8) } ?? carried
            CheckpointJob.appendChanges(carriedChanges[..<now], [], of: world, to: &checkpointBuffer)
            carriedChanges.removeFirst(now)
        }
        world.clearChanges()
        if let readerRecords {
            // Published to readers once the log has them (`finishCommit`; at once when it already does).
            readerRecords.stage(checkpointBuffer, from: start, seq: world.lastSeq, ts: world.lastTs)
            readerRecords.publish(upTo: committedSeq)
        }
    }

    /// A commit's share of the changed records to encode under `limit`: the limit, or twice the records
    /// an average commit changes when that is more — so carrying spreads a burst (a big team's dismiss)
    /// over a few commits, but a stream whose every commit changes more than the limit (a saturated
    /// one, committing full batches) does not build a backlog that the next checkpoint would have to
    /// encode at once.
    func commitEncodingBudget(limit: Int) -> Int { max(limit, Int(2 * changesPerCommit)) }

    /// Whether no checkpoint is being written.
    var inFlightCheckpointIsDone: Bool {
        guard let job = inFlightCheckpoint else { return true }
        return checkpointer.map { c in c.isDone(job) } ?? true
    }

    /// Waits for the checkpoint being written, if any, and takes its position. A checkpoint that failed
    /// loses nothing: the log holds its events, its transaction left the projections at the previous
    /// checkpoint, and its records go back in front of the buffer, so the next checkpoint writes them
    /// first (`checkpointFailed`). Its error is kept in `lastCheckpointError`.
    public func finishCheckpoint() {
        guard let job = inFlightCheckpoint else { return }
        job.hurry()  // someone waits for it now
        checkpointer?.wait(job)
        inFlightCheckpoint = nil
        if let error = job.error {
            lastCheckpointError = error
            checkpointFailed = true
            var buffer = job.changes
            buffer.append(contentsOf: checkpointBuffer)
            checkpointBuffer = buffer
            checkpointFailures += 1
            let first = checkpointProblem == nil
            let problem = checkpointFailure(error)
            checkpointProblem = problem
            if first { onCheckpointFailure?(problem) }
        } else {
            checkpoint = job.checkpoint
            lastCheckpointError = nil
            readerRecords?.checkpointCommitted(at: checkpoint.seq)
            if checkpointProblem != nil {
                checkpointProblem = nil
                onCheckpointRecovered?(checkpoint.seq)
            }
        }
    }

    /// A failed checkpoint named: `noSpace` when the projections' file system is full (LMDB reports a short
    /// write as EIO), else `commitFailed`; what it leaves as it was, and that the next one tries again.
    func checkpointFailure(_ error: any Error) -> StoreError {
        Self.writeFailure(
            error, directory: projectionEnv.path, place: projectionEnv.path, what: "the projections' checkpoint failed",
            kept: "the log holds every committed op; the projections stay at checkpoint seq \(checkpoint.seq), which "
                + "other processes' queries answer as of, and the next checkpoint writes every change since",
            retry: nil)
    }

    /// Makes the stored projections reach every committed op now: commits what is pending, writes a
    /// checkpoint and waits for it. (Queries on the writer's own `Store` read the projections, so they
    /// call this first: read your writes.)
    public func checkpointNow() throws {
        try commit()
        finishCheckpoint()
        guard
            checkpoint.seq < committedSeq || !world.changes.isEmpty || !carriedChanges.isEmpty
                || !checkpointBuffer.isEmpty || checkpointFailed
                || (projectionsOnly && checkpoint.seq < world.lastSeq)  // nothing committed: its log is empty
        else { return }
        startCheckpoint(after: nil)
        finishCheckpoint()
        if let lastCheckpointError { throw lastCheckpointError }
    }

    /// Replays the committed log after the projections' checkpoint into `world`, verifying its hash
    /// chain from the checkpoint's hash to the head's. The records it changes are marked for the next
    /// checkpoint, one of which starts every `checkpointOps` events of a long tail (evicting as a writer
    /// does); its outputs were handed on (or lost with a crash) when the events were first applied.
    func replayTail(from checkpoint: Checkpoint, to head: Meta) throws -> (events: Int, problem: ChainProblem?) {
        let deliveries = world.wantsDeliveries
        world.wantsDeliveries = false
        defer { world.wantsDeliveries = deliveries }
        var scratch: [Output] = []
        return try env.read { txn in
            if checkpoint.seq > 0 {
                // The projections were made from this log: the event at their seq carries their hash.
                guard let stored = try recordHash(checkpoint.seq, in: txn), stored == checkpoint.hash else {
                    let problem = ChainProblem(
                        seq: checkpoint.seq, message: "the projections' checkpoint does not match the log at its seq")
                    return (0, problem)
                }
            }
            let tail = Int(head.lastSeq - checkpoint.seq)  // the caller checked the log reaches the checkpoint
            let progress = tail > 0 ? options.openReplayProgress : nil
            progress?(0, tail)
            let walk = try walkChain(in: txn, after: checkpoint.seq, hash: checkpoint.hash) { seq, payload in
                let event: Event
                do { event = try EventCodec.decode(seq: seq, payload) } catch { return "undecodable event: \(error)" }
                scratch.removeAll(keepingCapacity: true)
                try prefetch(event.op)
                world.apply(event, into: &scratch)
                opsSinceCheckpoint += 1
                if opsSinceCheckpoint >= options.checkpointOps && !options.readOnly,
                    let hash = try recordHash(seq, in: txn)
                {
                    // A tail longer than the interval (a rebuilt `proj/`: the whole log) is checkpointed on
                    // the way, which lets the working set evict: memory stays at its budget, not the
                    // history's size (a 962,411-event rebuild held 1,366 MB before). The chain's hash at
                    // `seq` is its record's, verified before this body runs.
                    startCheckpoint(after: nil, hash: hash)
                }
                if let progress, (seq - checkpoint.seq) % UInt64(Self.openReplayProgressInterval) == 0 {
                    progress(Int(seq - checkpoint.seq), tail)
                }
                return nil
            }
            let events = Int(walk.last - checkpoint.seq)
            progress?(events, events)  // the last call, even when the chain broke before the head
            if walk.problem == nil, let problem = Self.checkpointProblem(head, records: walk.last, lastHash: walk.hash)
            {
                return (events, problem)
            }
            return (events, walk.problem)
        }
    }

    /// The chained hash stored with the log's record at `seq`; `nil` when there is no such record.
    func recordHash(_ seq: UInt64, in txn: Transaction) throws -> [UInt8]? {
        try BigEndianUInt64.encoded(seq).withUnsafeBytes { key in
            try txn.withValue(dbs.log.handle, key: key) { value in value.flatMap { LogRecord($0) }.map { Array($0.hash) } }
        }
    }
}

extension Store {
    /// Runs `body` in a read transaction of the projection environment. Another process reads the last
    /// checkpoint; the writer's own store first brings the projections to every op it has committed
    /// (read your writes).
    public func readProjections<R>(_ body: (Transaction) throws -> R) throws -> R {
        if writerLock != nil && refusal == nil { try checkpointNow() }
        return try projectionEnv.read(body)
    }

    /// Runs `body` on one snapshot of the projections as queries see them, the state as of the last
    /// durable commit: in a writer that serves readers (`serveReaders`), on any thread, the stored
    /// checkpoint with the records committed after it layered on top (no checkpoint is waited for);
    /// in the writer's own store otherwise, after checkpointing what it committed; in another process,
    /// the last checkpoint.
    public func readCommitted<R>(_ body: (ProjectionSnapshot) throws -> R) throws -> R {
        let records = readerRecords?.current
        if records == nil && writerLock != nil && refusal == nil { try checkpointNow() }
        return try projectionEnv.read { txn in try body(ProjectionSnapshot(txn: txn, pdbs: pdbs, records: records)) }
    }

    /// The stored projections alone (at their checkpoint), as queries see them, in `txn`, a read
    /// transaction of `projectionEnv`.
    public func storedSnapshot(_ txn: Transaction) throws -> ProjectionSnapshot {
        try ProjectionSnapshot(txn: txn, pdbs: pdbs, records: nil)
    }

    /// Makes this writer's committed state readable from other threads without checkpoints: from now on
    /// every durable commit publishes the records it changed for `readCommitted` (a server's queries;
    /// `CommittedRecords`). Call on the store's thread with nothing pending, before sharing the store.
    public func serveReaders() {
        guard readerRecords == nil else { return }
        precondition(pendingCount == 0 && !isCommitting, "serveReaders with uncommitted ops")
        finishCheckpoint()
        bufferChanges()  // what the replay at open changed, if no checkpoint has taken it yet
        let records = ReaderRecords()
        records.checkpointStarted(at: checkpoint.seq)
        // Committed, not yet in a committed checkpoint: the buffer (a failed checkpoint's records included).
        records.stage(checkpointBuffer, from: 0, seq: world.lastSeq, ts: world.lastTs)
        records.publish(upTo: committedSeq)
        readerRecords = records
    }
}
