import TeamLogThreads
public import LMDB
public import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The LMDB-backed event log with its stored projections and checkpoint.
///
/// One writer per environment: the owner of a `Store` submits ops (decide + apply in memory) and commits
/// them in batches; each commit writes the batch's events, their opId index entries, every projection
/// record they changed and the checkpoint in **one** write transaction, so a crash can never leave them apart.
public final class Store {
    /// How to open a store.
    public struct Options: Sendable {
        /// Initial LMDB map size; it grows on demand.
        public var mapSize: Int = 1 << 20
        /// Skip fsync at commit (tests and benchmarks only: a crash may lose the last batches, never tear one).
        public var noSync: Bool = false
        /// Limits for a new store; an existing store keeps the ones it was created with.
        public var config: Config = Config()
        /// Settings asked for explicitly: applied over `config` to a new store; an existing store with
        /// other values is refused (`.configMismatch`).
        public var requestedConfig = ConfigRequest()
        /// Open for queries only.
        public var readOnly: Bool = false
        /// When another process holds the writer lock: wait for it (true) or fail at once (false).
        public var waitForWriter: Bool = false
        /// Verify the whole hash chain when opening for writing (a hash-only scan, ~GB/s); a broken chain
        /// makes the store refuse to append until `repair`.
        public var verifyChainAtOpen: Bool = true

        public init() {}
    }

    /// The result of submitting one op.
    public enum Submission {
        case accepted(Event, [Output])
        case rejected(Rejection)
        case duplicate(seq: UInt64)
        /// The op's `opId` was rejected before: the same rejection, not decided again.
        case rejectedBefore(Rejection)
        /// Rejected, but its time reached a members-sync deadline: the system `membersSync` event (its
        /// own seq, applied like an accepted one, with its outputs) was appended first (SPEC §1.3).
        case rejectedAfterSync(Rejection, sync: Event, outputs: [Output])
    }

    /// The LMDB environment (one directory).
    public let env: Environment
    let dbs: Databases
    /// The projected state after every submitted op (committed or pending).
    public private(set) var world: World
    /// Hash of the last committed record.
    public private(set) var lastHash: [UInt8]
    /// Seq of the last committed event.
    public private(set) var committedSeq: UInt64

    private var pendingEvents: [(seq: UInt64, value: [UInt8])] = []
    private var pendingOpIds: [Id: OpIdOutcome] = [:]
    private var pendingOutputsScratch: [Output] = []
    private var failed: StoreError?
    private var writerLock: WriterLock?
    /// A read snapshot kept for opId lookups between commits (renewed after each one).
    private var lookup: ReadSnapshot?
    /// The batch the committer thread is writing, if any, and its opId outcomes (still answered from
    /// memory until it is durable).
    private var inFlight: CommitJob?
    private var inFlightOpIds: [Id: OpIdOutcome] = [:]
    /// Started by the first `beginCommit`.
    private var committer: Committer?

    /// Opens (creating when missing) the store in directory `path` and loads its projections.
    /// With `loadState` false (queries) the projections stay on disk and `world` holds only the checkpoint.
    public init(path: String, options: Options = Options(), loadState: Bool = true) throws {
        var envOptions = Environment.Options()
        envOptions.mapSize = options.mapSize
        envOptions.noSync = options.noSync
        envOptions.readOnly = options.readOnly
        try options.requestedConfig.validate()
        if !options.readOnly {
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw StoreError.system("cannot create store directory \(path)", call: "mkdir", path: path)
            }
            writerLock = try WriterLock(directory: path, wait: options.waitForWriter)
        }
        do {
            env = try Environment(path: path, options: envOptions)
        } catch let error as LMDBError {
            throw StoreError.opening(path, error)
        }
        // Only a data file LMDB has just initialized (none, empty, or never committed to — an interrupted
        // creation) becomes a new store; anything else must already be one, or is refused untouched.
        let requested = options.requestedConfig.applied(to: options.config)
        let fresh = !options.readOnly && env.lastTransactionID == 0
        dbs = try Databases(env: env, creating: fresh ? requested : nil)
        let meta = try dbs.readMeta(env)
        var config = requested
        if let stored = meta.config {
            let differences = options.requestedConfig.differences(from: stored)
            guard differences.isEmpty else {
                throw StoreError(
                    code: .configMismatch,
                    message: "store \(path) was created with other settings, and its log was decided under them: "
                        + differences.joined(separator: ", ") + ". Leave the options out, or create a new store",
                    path: path)
            }
            config = stored
        } else if !options.readOnly {
            try dbs.writeConfig(env, config)
        }
        world = World(config: config)
        lastHash = meta.lastHash
        committedSeq = meta.lastSeq
        world.lastSeq = meta.lastSeq
        world.lastTs = meta.lastTs
        let verify = !options.readOnly && options.verifyChainAtOpen
        var problem: ChainProblem??  // checked already (the outer optional) and what was found
        if loadState {
            var loaded = world
            if verify {
                // Two cores: the chain is checked while the projections load, each in its own read
                // transaction. This process holds the writer lock, so both see the same data; the
                // empty read first adopts a map another process grew, before two transactions are open.
                try env.read { _ in }
                (_, problem) = try inParallel(
                    { try self.dbs.loadProjections(self.env, into: &loaded) },
                    { try self.env.concurrentRead { txn in try self.chainProblem(in: txn) } })
            } else {
                try dbs.loadProjections(env, into: &loaded)
            }
            world = loaded
            world.finishRestore()
        }
        if verify, let problem = try problem ?? verifyChain() {
            failed = StoreError(
                code: .brokenChain,
                message: "the log's hash chain is broken at \(problem); refusing to append onto it. "
                    + "Run `teamlog audit` for details and `teamlog repair` to cut the log there and rebuild",
                path: path)
        }
        world.clearChanges()
    }

    /// Whether accepted messages produce `delivery` outputs with user lists (`--emit all`); the state is
    /// the same either way.
    public var wantsDeliveries: Bool {
        get { world.wantsDeliveries }
        set { world.wantsDeliveries = newValue }
    }

    /// Why the store refuses to write, if it does (a broken chain found at open, a failed commit, closed).
    public var refusal: StoreError? { failed }

    /// Gives up the writer role: commits nothing more and releases the writer lock, so another `Store`
    /// (in this process or another) can write. Uncommitted ops are dropped, as in a crash.
    public func close() {
        try? finishCommit()  // never release the writer lock under a transaction still being written
        failed = failed ?? StoreError(code: .closed, message: "store \(env.path) was closed", path: env.path)
        lookup = nil
        writerLock?.release()
        writerLock = nil
    }

    /// Number of submitted ops (accepted, or rejected with an opId) not yet committed.
    public var pendingCount: Int { max(pendingEvents.count, pendingOpIds.count) }

    /// Checks, decides and applies one op in memory; it becomes durable at the next `commit`.
    ///
    /// An op whose `opId` was accepted before (committed or pending) is a duplicate and changes nothing.
    public func submit(_ op: Op, now: Int64) throws -> Submission {
        if let failed { throw failed }
        if let opId = op.opId, let outcome = try outcome(opId: opId) {
            switch outcome {
            case .accepted(let seq): return .duplicate(seq: seq)
            case .rejected(let rejection): return .rejectedBefore(rejection)
            }
        }
        switch world.decide(op, now: now) {
        case .failure(let rejection):
            if let opId = op.opId { pendingOpIds[opId] = .rejected(rejection) }
            // The decision saw the removals due at the op's time; store them even though the op fails.
            guard let sync = world.dueMembersSync(at: op.ts ?? now) else { return .rejected(rejection) }
            var outputs: [Output] = []
            world.apply(sync, into: &outputs)
            append(sync)
            return .rejectedAfterSync(rejection, sync: sync, outputs: outputs)
        case .success(let event):
            var outputs: [Output] = []
            world.apply(event, into: &outputs)
            append(event)
            return .accepted(event, outputs)
        }
    }

    /// Appends an already accepted event (replays into a new store use this path too).
    /// The chained hash is added when the batch is committed (on the committer thread in batch mode).
    private func append(_ event: Event) {
        var w = ByteWriter(capacity: 128)
        EventCodec.encode(event, into: &w)
        pendingEvents.append((event.seq, w.bytes))
        if let opId = event.op.opId { pendingOpIds[opId] = .accepted(seq: event.seq) }
    }

    /// Applies and appends an event another store's log holds (a replay into a scratch store): no decision,
    /// the same state change and records as when it was accepted.
    func applyReplayed(_ event: Event) {
        pendingOutputsScratch.removeAll(keepingCapacity: true)
        world.apply(event, into: &pendingOutputsScratch)
        append(event)
    }

    /// The seq of the event accepted with `opId`, if any.
    public func seqOf(opId: Id) throws -> UInt64? {
        if case .accepted(let seq)? = try outcome(opId: opId) { return seq }
        return nil
    }

    /// The first outcome of an op submitted with `opId`, if any.
    public func outcome(opId: Id) throws -> OpIdOutcome? {
        if let outcome = pendingOpIds[opId] { return outcome }
        if let outcome = inFlightOpIds[opId] { return outcome }
        if writerLock == nil || inFlight != nil { return try env.read { txn in try txn.get(dbs.opIds, opId) } }
        if lookup == nil { lookup = try env.snapshot() }
        return try lookup!.get(dbs.opIds, opId)
    }

    /// Makes every pending op durable: events, opId index, changed projections and checkpoint in one
    /// write transaction. After a failure the store refuses further work (its memory is ahead of disk).
    public func commit() throws {
        try beginCommit(onThisThread: true)
        try finishCommit()
    }

    /// Starts committing every pending op on the committer thread and returns at once, so the caller can
    /// submit the next batch while this one is written and fsynced. Nothing of the batch is durable until
    /// `finishCommit` returns; a batch still in flight is finished first (one in flight at a time).
    public func beginCommit() throws {
        try beginCommit(onThisThread: false)
    }

    /// Waits for the batch started by `beginCommit`, if any. Returns only when that batch is durable:
    /// throws its failure, and once the store has failed (or was refused or closed) throws that on every
    /// call, so no caller can take a batch that never committed for one that did.
    public func finishCommit() throws {
        guard let job = inFlight else {
            if let failed { throw failed }
            return
        }
        committer?.wait(job)
        inFlight = nil
        inFlightOpIds.removeAll(keepingCapacity: true)
        if let error = job.error {
            let failure = commitFailure(error, seqs: committedSeq + 1...max(committedSeq + 1, job.checkpoint.lastSeq))
            failed = failure
            throw failure
        }
        committedSeq = job.checkpoint.lastSeq
        lastHash = job.checkpoint.lastHash
        // The batch is durable whatever happens here; a snapshot that cannot be renewed is taken afresh.
        do { try lookup?.renew() } catch { lookup = nil }
    }

    /// Whether a batch is being written by the committer thread.
    public var isCommitting: Bool { inFlight != nil }

    private func beginCommit(onThisThread: Bool) throws {
        if let failed { throw failed }
        try finishCommit()
        guard !pendingEvents.isEmpty || !world.dirty.isEmpty || !world.appended.isEmpty || !pendingOpIds.isEmpty
        else { return }
        // Encoded here, before the transaction (`write` may run its body again after growing the map),
        // from one borrowed copy of the state: reading the property per key copied it per record.
        let snapshot = world
        let job = CommitJob(
            events: pendingEvents, opIds: pendingOpIds, changes: CommitJob.changes(of: snapshot),
            previousHash: lastHash, lastSeq: world.lastSeq, lastTs: world.lastTs)
        // No read transaction of this process may be open while the writer grows the map; lookups use
        // short transactions until the batch is done.
        lookup?.reset()
        if !onThisThread && committer == nil { committer = Committer(env: env, dbs: dbs) }
        if !onThisThread, let committer {
            committer.start(job)
        } else {  // in place (also when no committer thread could be started)
            do { try job.write(env: env, dbs: dbs) } catch { job.error = error }
            job.done = true
        }
        inFlight = job
        swap(&inFlightOpIds, &pendingOpIds)
        world.clearChanges()
        pendingEvents.removeAll(keepingCapacity: true)
        pendingOpIds.removeAll(keepingCapacity: true)
    }

    deinit {
        committer?.stop()  // after the batch in flight, if any
    }
}
