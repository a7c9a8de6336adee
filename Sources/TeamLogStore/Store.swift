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
    }

    /// The LMDB environment (one directory).
    public let env: Environment
    let dbs: Databases
    /// The projected state after every submitted op (committed or pending).
    public private(set) var world: World
    /// Hash of the last submitted record.
    public private(set) var lastHash: [UInt8]
    /// Seq of the last committed event.
    public private(set) var committedSeq: UInt64

    private var pendingEvents: [(seq: UInt64, value: [UInt8])] = []
    private var pendingOpIds: [String: OpIdOutcome] = [:]
    private var pendingOutputsScratch: [Output] = []
    private var failed: StoreError?
    private var writerLock: WriterLock?
    /// A read snapshot kept for opId lookups between commits (renewed after each one).
    private var lookup: ReadSnapshot?

    /// Opens (creating when missing) the store in directory `path` and loads its projections.
    /// With `loadState` false (queries) the projections stay on disk and `world` holds only the checkpoint.
    public init(path: String, options: Options = Options(), loadState: Bool = true) throws {
        var envOptions = Environment.Options()
        envOptions.mapSize = options.mapSize
        envOptions.noSync = options.noSync
        envOptions.readOnly = options.readOnly
        if !options.readOnly {
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw StoreError("cannot create store directory \(path): \(String(cString: strerror(errno)))")
            }
            writerLock = try WriterLock(directory: path, wait: options.waitForWriter)
        }
        env = try Environment(path: path, options: envOptions)
        dbs = try Databases(env: env, create: !options.readOnly)
        let meta = try dbs.readMeta(env)
        var config = options.config
        if let stored = meta.config {
            config = stored
        } else if !options.readOnly {
            try dbs.writeConfig(env, config)
        }
        world = World(config: config)
        lastHash = meta.lastHash
        committedSeq = meta.lastSeq
        world.lastSeq = meta.lastSeq
        world.lastTs = meta.lastTs
        if loadState {
            try dbs.loadProjections(env, into: &world)
            world.finishRestore()
        }
        if !options.readOnly && options.verifyChainAtOpen, let problem = try verifyChain() {
            failed = StoreError(
                "the log's hash chain is broken at \(problem); refusing to append onto it. "
                    + "Run `teamlog audit` for details and `teamlog repair` to cut the log there and rebuild")
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
        failed = failed ?? StoreError("store was closed")
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
            return .rejected(rejection)
        case .success(let event):
            var outputs: [Output] = []
            world.apply(event, into: &outputs)
            append(event)
            return .accepted(event, outputs)
        }
    }

    /// Appends an already accepted event (replays into a new store use this path too).
    private func append(_ event: Event) {
        var w = ByteWriter(capacity: 96)
        EventCodec.encode(event, into: &w)
        let hash = w.bytes.withUnsafeBytes { HashChain.next(previous: lastHash, seq: event.seq, payload: $0) }
        w.raw(hash)
        lastHash = hash
        pendingEvents.append((event.seq, w.bytes))
        if let opId = event.op.opId { pendingOpIds[opId] = .accepted(seq: event.seq) }
    }

    /// The seq of the event accepted with `opId`, if any.
    public func seqOf(opId: String) throws -> UInt64? {
        if case .accepted(let seq)? = try outcome(opId: opId) { return seq }
        return nil
    }

    /// The first outcome of an op submitted with `opId`, if any.
    public func outcome(opId: String) throws -> OpIdOutcome? {
        if let outcome = pendingOpIds[opId] { return outcome }
        if writerLock == nil { return try env.read { txn in try txn.get(dbs.opIds, opId) } }
        if lookup == nil { lookup = try env.snapshot() }
        return try lookup!.get(dbs.opIds, opId)
    }

    /// Makes every pending op durable: events, opId index, changed projections and checkpoint in one
    /// write transaction. After a failure the store refuses further work (its memory is ahead of disk).
    public func commit() throws {
        if let failed { throw failed }
        guard !pendingEvents.isEmpty || !world.dirty.isEmpty || !world.appended.isEmpty || !pendingOpIds.isEmpty
        else { return }
        // Encode before the transaction: `write` may run its body again after growing the map.
        let changes = (Array(world.dirty) + world.appended).map { ProjectionCodec.record($0, in: world) }
        let checkpoint = Meta(lastSeq: world.lastSeq, lastTs: world.lastTs, lastHash: lastHash, config: nil)
        let events = pendingEvents
        let opIds = pendingOpIds
        lookup?.reset()  // no read transaction of this process may be open while the map grows
        do {
            try env.write { txn in
                for (seq, value) in events {
                    try txn.put(dbs.log.handle, key: BigEndianUInt64.encoded(seq), value: value, flags: .append)
                }
                for (opId, outcome) in opIds {
                    try txn.put(dbs.opIds, opId, outcome, flags: .noOverwrite)
                }
                for (table, key, value) in changes {
                    let db = dbs.projection(table)
                    if let value { try txn.put(db, key: key, value: value) } else { try txn.delete(db, key: key) }
                }
                try dbs.writeCheckpoint(txn, checkpoint)
            }
        } catch {
            let failure = StoreError("commit of seq \(committedSeq + 1)...\(world.lastSeq) failed: \(error)")
            failed = failure
            throw failure
        }
        world.clearChanges()
        try lookup?.renew()
        pendingEvents.removeAll(keepingCapacity: true)
        pendingOpIds.removeAll(keepingCapacity: true)
        committedSeq = world.lastSeq
    }
}
