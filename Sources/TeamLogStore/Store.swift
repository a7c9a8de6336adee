public import LMDB
public import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The LMDB-backed event log, with its projections kept as a checkpointed cache of it.
///
/// Two LMDB environments, one writer each. The log environment (the store directory) holds the events,
/// the opId index and the head; a **group commit** appends a batch's events and opIds and fsyncs — the
/// only durable write between reading a line and printing its records. The projection environment
/// (`proj/`) holds the projection tables and the checkpoint they are at; every `checkpointOps` ops or
/// `checkpointMs` ms the records changed since the last checkpoint (each once) are written there with
/// the new checkpoint in one transaction, by a second writer thread, after the log batch they reach is
/// durable. Opening the store loads nothing of them but presence, channels and offline queues, and replays
/// the log after their checkpoint, so a crash at any point recovers exactly; everything else an op needs is
/// loaded when it needs it and evicted beyond a budget (`WorkingSet`, docs/store-design.md).
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
        /// A writer that must find a store at the path (`repair`): where there is none, the open throws
        /// `.notAStore` as a reader's does and creates nothing. A writer creates a new store by default.
        public var mustExist: Bool = false
        /// A writer that rebuilds the projections from the log (`repair`): a projections environment whose
        /// files cannot be opened (truncated, a damaged header, not LMDB's, another format) is set aside —
        /// renamed `proj.damaged-<seconds>` beside it, kept for inspection (`setAsideProjections`) — and a
        /// new, empty one made, which the repair then fills. The log is never touched by this.
        public var setAsideDamagedProjections: Bool = false
        /// What the writer will append, checked against the partition the store belongs to (`PartitionRole`).
        public var partitionRole: PartitionRole = .unchecked
        /// When another process holds the writer lock: wait for it (true) or fail at once (false).
        public var waitForWriter: Bool = false
        /// While waiting for the writer lock (`waitForWriter`): looked at every 50 ms; when it turns true the
        /// open gives up (`writerBusy`, "stopped waiting") — a server asked to stop while it waits.
        public var stopWaitingForWriter: (@Sendable () -> Bool)?
        /// Verify the whole hash chain when opening for writing (a hash-only scan of every record). Off by
        /// default: a writer verifies the log after the projections' checkpoint as it replays it, checks
        /// that the checkpoint's hash is the log's at that seq, and chains every batch it appends; `audit`
        /// verifies the whole chain. A broken chain makes the store refuse to append until `repair`.
        public var verifyChainAtOpen: Bool = false
        /// Write a checkpoint after this many ops since the last one (at a commit).
        public var checkpointOps: Int = 100_000
        /// Write a checkpoint at the first commit this many ms after the last one.
        public var checkpointMs: Int = 1_000
        /// The nice value of the checkpoint's thread (`nil`: the process's own). A checkpoint is background
        /// work: at a lower priority it yields cores to the writer, the commit and a server's requests,
        /// which it made wait once a second (query p99 in `teamlog-http-bench`), and runs on any idle core.
        /// Only the lag of the projections behind the log grows while the cores are busy, up to the bound
        /// where the writer waits for it (`checkpointDue`). 10, not 19: the writer may wait on this thread,
        /// and at 19 a thread gets ~1.5% of a core beside each busy one (10: ~10%); an unprivileged thread
        /// cannot raise its priority back while it is waited on.
        public var checkpointNice: Int32? = 10
        /// The share of wall time, in percent, a checkpoint's puts may keep its thread busy (`nil` or 100:
        /// as fast as it can). A checkpoint is a burst of ~0.1–0.4 s of CPU once a second; on a machine
        /// whose cores the writer, the parser, the committer and their clients nearly fill, the burst took
        /// the writer's core share and made the stream's latency bump once a second (BENCHMARKS, tenth
        /// session). Paced, it works ~2 ms, then pauses so that its busy share stays at this figure —
        /// RocksDB's rate limiter for flushes and compactions does the same for I/O. A checkpoint that the
        /// next one is already waiting for (the writer is a whole interval ahead) stops pausing.
        public var checkpointDuty: Int? = 50
        /// The budget of the working set: the resident projections' estimated size, in bytes, beyond which
        /// clean units are evicted after each checkpoint (`--cache-mb`).
        public var cacheBytes: Int = Store.defaultCacheBytes
        /// The maps' read-ahead (`ReadAhead`): by default `TEAMLOG_READ_AHEAD`, else `auto`.
        public var readAhead: ReadAhead = .environmentDefault
        /// The memory the process may use, for `readAhead` `auto` (`nil`: the machine's or its memory
        /// cgroup's limit, `ResidentMemory.limitBytes`).
        public var memoryLimit: Int? = nil
        /// Called while an open replays the log after the projections' checkpoint (what a crash left:
        /// up to about one checkpoint interval; seconds on a big working set, BENCHMARKS.md "The checkpoint
        /// interval's defaults") with the events replayed so far and the tail's length: first `(0, n)`,
        /// then every `openReplayProgressInterval` events, last `(r, r)` with all it replayed (`r == n` unless
        /// the chain breaks in the tail). Not called when there is no tail.
        public var openReplayProgress: (@Sendable (_ replayed: Int, _ of: Int) -> Void)? = nil
        /// A scratch store made from another store's projections (`makeScratch(base:)`): its log is empty
        /// and its projections are ahead of it by design, so the open replays no tail and fails nothing.
        var projectionsAheadOfLog = false

        public init() {}
    }

    /// Events between two calls of `Options.openReplayProgress`.
    static let openReplayProgressInterval = 1_024

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

    /// The log's LMDB environment (the store directory).
    public let env: Environment
    let dbs: Databases
    /// The projections' LMDB environment (`proj/` in the store directory).
    public let projectionEnv: Environment
    let pdbs: ProjectionDatabases
    /// The projected state after every submitted op (committed or pending).
    public internal(set) var world: World
    /// Hash of the last committed record.
    public private(set) var lastHash: [UInt8]
    /// Seq of the last committed event.
    public private(set) var committedSeq: UInt64
    /// The position of the stored projections (the last checkpoint written, or being written).
    public internal(set) var checkpoint: Checkpoint
    /// Events replayed from the log after the checkpoint when the store was opened.
    public private(set) var replayedAtOpen: Int = 0
    let options: Options

    private var pendingEvents: [Event] = []
    private var pendingOpIds: [Id: OpIdOutcome] = [:]
    /// The emptied events' buffer of the last committed batch, for the next one.
    private var spareEvents: [Event]?
    /// The source position, outbox entries and confirmed publishes to write with the next commit.
    var pendingSource = SourceWrite()
    /// The external source position the committed log has consumed through (0: none; `Store+Source`).
    public internal(set) var sourcePosition: UInt64 = 0
    /// The outputs of the last `applyReplayed` event (its buffer reused): what `rederiveRecords` hands on.
    private(set) var pendingOutputsScratch: [Output] = []
    /// Set by `close` for its last checkpoint, which evicts nothing (`startCheckpoint`).
    var closing = false
    /// The fan-out work of every event this store applied since it opened (benchmarks report it).
    public private(set) var fanOutStats = FanOutStats()
    private var failed: StoreError?
    private(set) var writerLock: WriterLock?
    /// A read snapshot kept for opId lookups between commits (renewed after each one).
    private var lookup: ReadSnapshot?
    /// The batch the committer thread is writing, if any, and its opId outcomes (still answered from
    /// memory until it is durable).
    private var inFlight: CommitJob?
    private var inFlightOpIds: [Id: OpIdOutcome] = [:]
    /// Started by the first `beginCommit`.
    private(set) var committer: WriterThread?
    /// Writes checkpoints (started by the first one); `inFlightCheckpoint` is the one it is writing.
    var checkpointer: WriterThread?
    var inFlightCheckpoint: CheckpointJob?
    /// Drops the maps' pages off this thread (started by the first release); `inFlightRelease` is the
    /// drop it runs or ran last.
    var releaser: WriterThread?
    var inFlightRelease: PageReleaseJob?
    /// Ops submitted since the last checkpoint began, and when (monotonic ms) it began.
    var opsSinceCheckpoint = 0
    /// About how many pages of the memory maps this thread read since it last released them: one per
    /// event committed and per unit looked up, plus a team's roster pages.
    var touchesSinceRelease = 0
    var lastCheckpointMs: Int64 = 0
    /// The last checkpoint failed: its records wait in `checkpointBuffer` for the next one.
    var checkpointFailed = false
    /// Records of the next checkpoint, encoded at each commit (`bufferChanges`), so a checkpoint never
    /// stalls the store's thread on everything an interval changed. A key encoded here and changed again
    /// later is encoded again, after it: the later value is written last.
    var checkpointBuffer = RecordBuffer()
    /// Changed records a commit left for the next ones to encode (`bufferChanges(limit:)`): a commit
    /// encodes its share of them (`commitEncodingBudget(limit:)`), and a checkpoint all that are left.
    var carriedChanges: [ProjectionKey] = []
    /// The share of the changed records a commit encodes, the rest left to the next commits — at least
    /// this many, more when the average commit changes more (`commitEncodingBudget(limit:)`); `nil` (the
    /// default), all of them. A stream sets it (`streamCommitEncodingLimit`): its lines wait behind each
    /// commit's encoding, where a batch's throughput gains nothing from spreading it. Ignored while the
    /// store serves readers, which need every commit's records at once.
    public var commitEncodingLimit: Int?
    /// Changed records waiting for a later commit (or the next checkpoint) to encode them.
    public var carriedChangeCount: Int { carriedChanges.count }
    /// The changed records per commit, a moving average over ~16 commits (while a limit is set).
    var changesPerCommit = 0.0
    /// A stream's `commitEncodingLimit`: ~0.5–1 ms of encoding (small in debug builds, so the tests'
    /// streams carry records from commit to commit).
    #if DEBUG
        public static let streamCommitEncodingLimit = 16
    #else
        public static let streamCommitEncodingLimit = 1_024
    #endif
    /// Records committed after the stored checkpoint, published for readers on other threads (set by
    /// `serveReaders`, then never changed).
    var readerRecords: ReaderRecords?
    /// Why the stored settings record cannot be trusted (a reader opened it anyway; a writer refuses).
    public private(set) var settingsDamage: String?
    /// Where damaged projections were set aside at open (`Options.setAsideDamagedProjections`), and why.
    public private(set) var setAsideProjections: (path: String, reason: StoreError)?
    /// Why the last checkpoint failed, if it did (the log is unaffected).
    public internal(set) var lastCheckpointError: (any Error)?
    /// The last checkpoint's failure in words a user can act on (`checkpointFailure`); `nil` once one
    /// succeeds again.
    public internal(set) var checkpointProblem: StoreError?
    /// Checkpoints that failed since the store opened.
    public internal(set) var checkpointFailures = 0
    /// Called on the store's thread when a checkpoint fails after the last one succeeded — the first of a
    /// run of failures, not each retry — with the failure named (a long-running writer says so at once:
    /// while checkpoints fail the log goes on, but other processes' queries stay at the last checkpoint
    /// and the changes wait in memory).
    public var onCheckpointFailure: ((StoreError) -> Void)?
    /// Called on the store's thread when a checkpoint succeeds after failures, with its seq.
    public var onCheckpointRecovered: ((UInt64) -> Void)?
    /// What is resident, and when it was last needed (see `WorkingSet`).
    var workingSet: WorkingSet
    /// A scratch store that holds projections only (an audit's or a repair's replay): `applyReplayed`
    /// appends nothing to its log — no encoding, no hash chain, no opId index; the replay verifies the
    /// source log's chain itself — and checkpoints are started by `replayedBatchDone`, not by commits.
    /// Its log stays empty, so its checkpoints carry the genesis hash: only its projection tables (and
    /// the checkpoint's seq and ts) mean anything. Set before the first event.
    var projectionsOnly = false
    /// A replay's scratch store (`makeScratch`: an audit's, a repair's, a `--at` query's), which runs beside
    /// a writer with budgets of its own: its mapped pages are dropped at half of `--cache-mb`.
    var isReplayScratch = false
    /// The most puts one transaction of a checkpoint holds (`nil`: a checkpoint is one transaction, as a
    /// store's must be): a replay's scratch store's (`ReplayLimits.checkpointPuts`).
    var checkpointPuts: Int?
    /// Bytes of other maps this process reads beside this store's (a scratch store: those of the store it
    /// replays), counted with its own by `adjustReadAhead`.
    var readAheadCompanionBytes: () -> Int = { 0 }
    /// The memory this process may use, in bytes, as `adjustReadAhead` reads it at open and at every
    /// checkpoint: `Options.memoryLimit`, else the limit found at open (`ResidentMemory.limitBytes`).
    public var memoryLimit: Int?

    /// The default working-set budget (256 MiB).
    public static let defaultCacheBytes = 256 << 20

    /// The default budget of a replay's working set (`audit`, `repair`, `--at`): a writer's, 256 MiB (three
    /// quarters of it, 192 MiB, until the fortieth session: see `ReplayLimits.budgetBytes`).
    public static var defaultReplayCacheBytes: Int { ReplayLimits.defaultBudgetBytes }

    /// Opens (creating when missing) the store in directory `path`, at its projections' checkpoint, and
    /// replays the log after it. Only the always-resident tables (presence, channels, offline queues) are
    /// loaded; everything else is loaded when an op first needs it (`WorkingSet`).
    /// With `loadState` false (queries) the projections stay on disk and `world` holds only the checkpoint.
    public init(path: String, options: Options = Options(), loadState: Bool = true) throws {
        var envOptions = Environment.Options()
        envOptions.mapSize = options.mapSize
        envOptions.noSync = options.noSync
        envOptions.readOnly = options.readOnly
        try options.requestedConfig.validate()
        if !options.projectionsAheadOfLog, let unfinished = StoreError.projectionsWithoutLog(path) { throw unfinished }
        if !options.readOnly {
            if Self.isVerifiedCopy(path) {
                throw StoreError(
                    code: .other,
                    message: "\(path) is a verified copy of a store's projections (`teamlog audit --verified`), "
                        + "with no log: a base for `audit`, `--at` and `serve --at-base`, not a store to write",
                    path: path)
            }
            if StoreError.isNonDirectory(path) { throw StoreError.notADirectory(path) }
            if options.mustExist && access(path + "/data.mdb", F_OK) != 0 {
                throw StoreError(
                    code: .notAStore,
                    message: "no teamlog store at \(path) (no data file); `teamlog ingest --store \(path)` creates one",
                    path: path)
            }
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw StoreError.system("cannot create store directory \(path)", call: "mkdir", path: path)
            }
            writerLock = try WriterLock(
                directory: path, wait: options.waitForWriter, giveUp: options.stopWaitingForWriter)
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
        // An existing store's log is checked first (a foreign directory is refused untouched); a new store's
        // projection environment is made first and its log layout last, so a store whose log exists always
        // has its projections (a kill in between leaves no store at all).
        let projPath = path + "/" + ProjectionDatabases.directory
        let existing = fresh ? nil : try Databases(env: env, creating: nil)
        let (projEnv, projDbs): (Environment, ProjectionDatabases)
        do {
            (projEnv, projDbs) = try Self.openProjections(projPath, options: envOptions, readOnly: options.readOnly)
        } catch let error as StoreError
            where options.setAsideDamagedProjections && !options.readOnly && existing != nil
            && [.truncated, .corrupted, .notAStore, .incompatibleFormat].contains(error.code)
        {
            let aside = projPath + ".damaged-\(time(nil))"
            guard rename(projPath, aside) == 0 else {
                throw StoreError.system("cannot set the damaged projections \(projPath) aside", call: "rename", path: projPath)
            }
            setAsideProjections = (aside, error)
            (projEnv, projDbs) = try Self.openProjections(projPath, options: envOptions, readOnly: false)
        }
        (projectionEnv, pdbs) = (projEnv, projDbs)
        // Root maintaining a service user's store: what this open created (lock files, a new `proj/`) is
        // given to the store's owner (`Store+Ownership.swift`).
        Self.adoptByItsOwner(path)
        dbs = try existing ?? Databases(env: env, creating: requested)
        let meta = try dbs.readMeta(env)
        let source = try env.read { [dbs] txn in try dbs.readSource(txn) }
        var config = requested
        if let damage = meta.configDamage {
            // Every op is decided under the settings (a team's member limit): a writer does not decide under
            // settings it cannot trust. Readers answer from what was decided; `audit` reports it.
            guard options.readOnly else {
                throw StoreError(
                    code: .corrupted,
                    message: "the settings record of store \(path) is damaged (it \(damage)): no op is decided under "
                        + "settings that cannot be trusted, and nothing was written. Restore the store from a copy "
                        + "(`teamlog backup` copies hold its settings); `teamlog info` of a copy shows them",
                    path: path)
            }
            settingsDamage = damage
        }
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
            // A record from before its checksum is given one (once; the same settings).
            if !options.readOnly && meta.configUnchecked { try dbs.writeConfig(env, stored) }
        } else if !options.readOnly {
            try dbs.writeConfig(env, config)
        }
        if !options.readOnly { try Self.checkPartition(options.partitionRole, env, dbs, path, seq: meta.lastSeq, source: source) }
        world = World(config: config)
        workingSet = WorkingSet(budgetBytes: options.cacheBytes)
        lastHash = meta.lastHash
        committedSeq = meta.lastSeq
        sourcePosition = source
        self.options = options

        // The projections: opened (created when missing, or rebuilt when made by another format), then
        // loaded at their checkpoint.
        var loaded = World(config: config)
        let stored = try projEnv.read { txn in
            let stored = try projDbs.readCheckpoint(txn)
            if loadState { try projDbs.loadAlwaysResident(txn, into: &loaded) }
            return stored
        }
        checkpoint = stored
        loaded.restorePosition(seq: stored.seq, ts: stored.ts)
        world = loaded
        if loadState { world.finishRestore() }
        lastCheckpointMs = MonotonicClock.milliseconds()

        memoryLimit = options.memoryLimit ?? ResidentMemory.limitBytes()
        adjustReadAhead()  // before the tail's replay reads the maps
        if loadState && !options.projectionsAheadOfLog {
            // The log after the checkpoint: its chain continues from the checkpoint's hash, and applying it
            // brings the projections to the head. What it changes goes into the next checkpoint.
            if stored.seq > meta.lastSeq {
                failed = StoreError(
                    code: .brokenChain,
                    message: "the projections in \(projPath) are at seq \(stored.seq) but the log ends at "
                        + "\(meta.lastSeq); run `teamlog repair` to rebuild them from the log", path: path)
            } else {
                let tail = try replayTail(from: stored, to: meta)
                replayedAtOpen = tail.events
                if let problem = tail.problem {
                    failed = StoreError(
                        code: .brokenChain,
                        message: "the log's hash chain is broken at \(problem); refusing to append onto it. "
                            + "Run `teamlog audit` for details and `teamlog repair` to cut the log there and rebuild",
                        path: path)
                }
            }
        }
        // Debug builds (the tests) check every derived index against its source after each restore.
        assert(!loadState || world.invariantViolations().isEmpty, "\(world.invariantViolations().prefix(5))")
        if failed == nil && !options.readOnly && options.verifyChainAtOpen, let problem = try verifyChain() {
            failed = StoreError(
                code: .brokenChain,
                message: "the log's hash chain is broken at \(problem); refusing to append onto it. "
                    + "Run `teamlog audit` for details and `teamlog repair` to cut the log there and rebuild",
                path: path)
        }
    }

    /// Opens the projection environment at `path`, creating it when missing (or when it holds nothing, or
    /// another format: it is a cache of the log, rebuilt from seq 1 then).
    private static func openProjections(_ path: String, options: Environment.Options, readOnly: Bool) throws
        -> (Environment, ProjectionDatabases)
    {
        if !readOnly && mkdir(path, 0o755) != 0 && errno != EEXIST {
            throw StoreError.system("cannot create projection directory \(path)", call: "mkdir", path: path)
        }
        // A checkpoint commits without sync and flushes after (`FlushMarker`): after a reboot, a newest
        // transaction past the one known flushed may be torn. A writer rolls it back (the checkpoint
        // before it, and the log's tail after that, replayed as after any crash); a reader waits for one.
        do {
            if try FlushMarker.newestMayBeTorn(directory: path) {
                if readOnly {
                    throw StoreError(
                        code: .corrupted,
                        message: "the projections' last checkpoint (\(path)) was not known to be on disk before "
                            + "the machine restarted; a writer (`teamlog ingest`) recovers it when it opens the store",
                        path: path)
                }
                try DataFileHeader.rollBackUnflushedMeta(directory: path)
            }
        } catch let error as LMDBError {
            throw StoreError.opening(path, error)
        }
        let env: Environment
        do { env = try Environment(path: path, options: options) } catch let error as LMDBError {
            if readOnly, case .system(ENOENT) = error.code {
                throw StoreError(
                    code: .notAStore,
                    message: "the store's projections (\(path)) are missing; a writer (`teamlog ingest`) rebuilds them "
                        + "from the log", cause: error, path: path)
            }
            throw StoreError.opening(path, error)
        }
        if readOnly { return (env, try ProjectionDatabases(env: env, create: false)) }
        // What is in the page cache (an unsynced checkpoint a killed process left) is on disk from here on,
        // and the marker says so: the next checkpoint's commit may be torn by a power loss, never an earlier one.
        do { try FlushMarker.flush(env) } catch let error as LMDBError { throw StoreError.opening(path, error) }
        if env.lastTransactionID == 0 { return (env, try ProjectionDatabases(env: env, create: true)) }
        do {
            return (env, try ProjectionDatabases(env: env, create: false))
        } catch let error as StoreError where error.code == .incompatibleFormat || error.code == .notAStore {
            // Not ours to keep: drop every table and start again from seq 1.
            try env.write { txn in
                for name in ["meta"] + ProjectionTable.allCases.map({ "p.\($0.rawValue)" }) {
                    if let db = try? txn.openHandle(name, create: false) { try txn.clear(db) }
                }
            }
            return (env, try ProjectionDatabases(env: env, create: true))
        }
    }

    /// Whether accepted messages produce `delivery` outputs with user lists (`--emit all`); the state is
    /// the same either way.
    public var wantsDeliveries: Bool {
        get { world.wantsDeliveries }
        set { world.wantsDeliveries = newValue }
    }

    /// A reader of the store at `path`: read-only, nothing of its state loaded (queries, copies, status).
    public static func reader(at path: String) throws -> Store {
        var options = Options()
        options.readOnly = true
        return try Store(path: path, options: options, loadState: false)
    }

    /// Why the store refuses to write, if it does (a broken chain found at open, a failed commit, closed,
    /// repaired).
    public var refusal: StoreError? { failed }

    /// From now on the store refuses to write, for `reason` (unless it already does for another).
    func refuse(_ reason: StoreError) { failed = failed ?? reason }

    /// Gives up the writer role: commits nothing more and releases the writer lock, so another `Store`
    /// (in this process or another) can write. Uncommitted ops are dropped, as in a crash.
    public func close() {
        try? finishCommit()  // never release the writer lock under a transaction still being written
        // A clean stop leaves the projections at the head, so the next open replays nothing. Nothing is
        // evicted for it: the state is about to go.
        if failed == nil && writerLock != nil && pendingEvents.isEmpty && pendingOpIds.isEmpty {
            closing = true
            try? checkpointNow()
        }
        finishCheckpoint()
        refuse(StoreError(code: .closed, message: "store \(env.path) was closed", path: env.path))
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
        opsSinceCheckpoint += 1
        try prefetch(op)
        #if DEBUG
            // Debug builds check that the op changed nothing outside its footprint: the changes of the
            // batch so far are set aside, so `dirty` holds this op's alone.
            var earlier = world.setAsideChanges()
            defer {
                let problems = footprintViolations(of: world.changes, seq: world.lastSeq)
                assert(problems.isEmpty, "\(problems.prefix(5))")
                world.restoreChanges(&earlier)
            }
        #endif
        // In place (`inPlace`): `world.decide` on the stored property copied the whole state for the call.
        switch inPlace(&world, { $0.decide(op, now: now) }) {
        case .failure(let rejection):
            if let opId = op.opId { pendingOpIds[opId] = .rejected(rejection) }
            // The decision saw the removals due at the op's time; store them even though the op fails.
            guard let sync = inPlace(&world, { $0.dueMembersSync(at: op.ts ?? now) }) else {
                return .rejected(rejection)
            }
            var outputs: [Output] = []
            world.apply(sync, into: &outputs, counting: &fanOutStats)
            append(sync)
            return .rejectedAfterSync(rejection, sync: sync, outputs: outputs)
        case .success(let event):
            var outputs: [Output] = []
            world.apply(event, into: &outputs, counting: &fanOutStats)
            append(event)
            return .accepted(event, outputs)
        }
    }

    /// Appends an already accepted event (replays into a new store use this path too). It is encoded and
    /// its hash chained when the batch is committed (`CommitJob`, on the committer thread).
    private func append(_ event: Event) {
        pendingEvents.append(event)
        if let opId = event.op.opId { pendingOpIds[opId] = .accepted(seq: event.seq) }
    }

    /// Applies and appends an event another store's log holds (a replay into a scratch store): no decision,
    /// the same state change and records as when it was accepted.
    func applyReplayed(_ event: Event) throws {
        // Counted toward the next checkpoint as a submitted op is, so a scratch store checkpoints (and
        // evicts) every `checkpointOps` events as a writer does, instead of buffering the whole history.
        opsSinceCheckpoint += 1
        try prefetch(event.op)
        pendingOutputsScratch.removeAll(keepingCapacity: true)
        world.apply(event, into: &pendingOutputsScratch, counting: &fanOutStats)
        if !projectionsOnly { append(event) }
    }

    /// A projections-only store (`projectionsOnly`) after a run of `applyReplayed` events: evicts when
    /// over budget (`evictWholesaleIfOverBudget`), and starts a checkpoint when `checkpointOps` events have
    /// been applied since the last one and it is done. The changed records are encoded only then (a
    /// checkpoint buffers them), not after every run as a log commit does: a record changed in several
    /// runs is encoded once (the checkpointer's samples −8% on a 1M-event audit).
    func replayedBatchDone() throws {
        precondition(projectionsOnly, "a store with a log checkpoints at its commits")
        if workingSet.wholesale { try evictWholesaleIfOverBudget() }
        if opsSinceCheckpoint >= options.checkpointOps && inFlightCheckpointIsDone {
            if workingSet.wholesale {
                finishCheckpoint()
                evictCheckpointedMessages()
            }
            startCheckpoint(after: nil)
        }
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
        if writerLock == nil { return try env.read { txn in try txn.get(dbs.opIds, opId) } }
        // While a batch commits (most of a batch ingest's time) no read transaction may stay open: the
        // committer may grow the map. The snapshot is renewed for the lookup and reset after it, under the
        // map-size lock, instead of a new read transaction per op (callgrind: ~4,100 instructions a lookup
        // against ~4,900, ~3,700 of them the B-tree descent itself); its view is the latest commit, and the
        // in-flight batch's opIds were looked up above.
        if inFlight != nil { return try env.read(reusing: &lookup) { txn in try txn.get(dbs.opIds, opId) } }
        if lookup == nil { lookup = try env.snapshot() } else { try lookup!.renew() }  // a no-op when active
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
        spareEvents = job.takeEventBuffer()
        if let error = job.error {
            let failure = commitFailure(error, seqs: committedSeq + 1...max(committedSeq + 1, job.head.lastSeq))
            failed = failure
            throw failure
        }
        committedSeq = job.head.lastSeq
        lastHash = job.head.lastHash
        readerRecords?.publish(upTo: committedSeq)
        if let position = job.source.position { sourcePosition = position }
        // The batch is durable whatever happens here; a snapshot that cannot be renewed is taken afresh.
        do { try lookup?.renew() } catch { lookup = nil }
    }

    /// Whether a batch is being written by the committer thread.
    public var isCommitting: Bool { inFlight != nil }

    /// Whether `finishCommit` would return without waiting: no batch in flight, or the one in flight is
    /// written (or failed). Stream mode polls it to print a batch's records as soon as it is durable.
    public var commitIsDone: Bool {
        guard let job = inFlight else { return true }
        return committer?.isDone(job) ?? true
    }

    private func beginCommit(onThisThread: Bool) throws {
        if let failed { throw failed }
        try finishCommit()
        guard !pendingEvents.isEmpty || !pendingOpIds.isEmpty || !pendingSource.isEmpty else { return }
        let job = CommitJob(
            env: env, dbs: dbs, events: pendingEvents, opIds: pendingOpIds, previousHash: lastHash,
            lastSeq: world.lastSeq, lastTs: world.lastTs, source: pendingSource)
        pendingSource = SourceWrite()
        // No read transaction of this process may be open while the writer grows the map; lookups use
        // short transactions until the batch is done.
        lookup?.reset()
        if !onThisThread && committer == nil { committer = WriterThread(name: "tl-commit") }
        if !onThisThread, let committer {
            committer.start(job)
        } else {  // in place (also when no committer thread could be started)
            job.runInPlace()
        }
        inFlight = job
        swap(&inFlightOpIds, &pendingOpIds)
        // The job shares the events' buffer: the next batch goes into the buffer of the one before it,
        // which its job emptied on the committer's thread (`removeAll` would allocate a fresh one).
        if let spare = spareEvents.take() {
            pendingEvents = spare
        } else {
            pendingEvents.removeAll(keepingCapacity: true)
        }
        pendingOpIds.removeAll(keepingCapacity: true)
        // Without readers, a commit encodes a bounded share of what changed and leaves the rest to the next
        // commits; readers need each commit's records at once (`readerRecords`).
        bufferChanges(limit: readerRecords == nil ? commitEncodingLimit : nil)
        touchesSinceRelease += job.eventCount
        hurryCheckpointIfNextIsDue()
        // A checkpoint encodes every carried record at its start: while many wait, it waits a commit or
        // two for them to drain (not past twice its interval).
        if checkpointDue
            && (carriedChanges.count <= commitEncodingLimit.map { commitEncodingBudget(limit: $0) } ?? 0
                || opsSinceCheckpoint >= 2 * options.checkpointOps)
        {
            startCheckpoint(after: job)
        } else {
            continueEviction(ops: job.eventCount)
        }
        walkCheckpointedMessages(ops: job.eventCount)
        if touchesSinceRelease >= Self.writerReleaseInterval {
            // Not only at checkpoints: the lookups of a batch (duplicate ids, units loaded) read pages all
            // over files that grow with history, ~2 pages per op once the store is larger than what a
            // second of ops touches, and a checkpoint comes every second at the earliest — later when the
            // checkpointer is behind. (Measured on a 1M-op ingest into a 3M-op store: the projection
            // file's mapped pages reached 527 MB in its first 2.2 s with releases at checkpoints only.)
            releaseResidentPagesIfOverBudget()
        }
    }

    /// The writer's check every `writerReleaseInterval` page reads: drops both maps' pages (they stay in
    /// the page cache) only when the process's file-backed resident memory is over `mappedBytesBudget` (or
    /// cannot be read). Dropping them unconditionally made a hot writer fault the same pages in again and
    /// again: measured on `teamlog-bench --stream`, 0.98 → 0.75 page faults per op with the budget (0.66
    /// with no writer release at all).
    ///
    /// The check and the drop run on the releaser's thread (`PageReleaseJob`), not this one: an
    /// `madvise(MADV_DONTNEED)` over a few hundred MB of mapped pages took 9–12 ms, which the stream's
    /// lines behind it waited for (BENCHMARKS, sixteenth session). A request while the last one still
    /// runs is dropped: that one is dropping the pages.
    func releaseResidentPagesIfOverBudget() {
        touchesSinceRelease = 0
        if let running = inFlightRelease, !(releaser?.isDone(running) ?? true) { return }
        let job = PageReleaseJob(envs: [env, projectionEnv], budget: mappedBytesBudget)
        if releaser == nil { releaser = WriterThread(name: "tl-release") }
        if let releaser {
            releaser.start(job)
        } else {
            job.runInPlace()
        }
        inFlightRelease = job
    }

    /// File-backed resident bytes (the maps' pages this process touched, and its program's) beyond which
    /// the writer drops the maps' pages: the working set's budget, at least 32 MiB — half of it for an
    /// audit's, repair's or `--at` query's replay (`isReplayScratch`), whose peak RSS at 5M events has a
    /// 1 GB bar.
    /// At half for the writer too, ingesting ops 4M–5M of the `--scale` workload spent a fifth of its
    /// writer's thread faulting in again the B-tree pages the last drop took (1.8 GB of store): at the
    /// full budget that chunk ran 58.5k → 69k ops/s with 16% fewer writer samples, its peak RSS 925 →
    /// 1,035 MB, the first chunk's 835 → 990 MB (BENCHMARKS, fifteenth session).
    var mappedBytesBudget: Int { max(32 << 20, isReplayScratch ? options.cacheBytes / 2 : options.cacheBytes) }

    /// Pages read (as `touchesSinceRelease` counts them) between two checks of the file-backed budget by
    /// the writer's thread. A page read maps more than its page (the kernel's fault-around maps the
    /// neighbours already in the page cache, 64 KiB; `MADV_RANDOM` does not stop it), so at 4,096 a 5M-event
    /// audit's scratch map reached 300–480 MB between checks against a 128 MiB budget, a third of its
    /// peak RSS. At 1,024: peak 1,017,340 / 962,388 → 796,164 / 798,116 KiB, for 2–6 s more system time
    /// (BENCHMARKS, twelfth session). A check is one read of `/proc/self/statm`.
    #if DEBUG
        static let writerReleaseInterval = 64  // small in debug builds, so the tests run through releases
    #else
        static let writerReleaseInterval = 1_024
    #endif

    deinit {
        committer?.stop()  // after the batch in flight, if any
        checkpointer?.stop()
        releaser?.stop()
    }
}

/// Which ops a writer appends to a store, for the check that a partition's store takes only its stream's
/// ops (`serve --nats` records "partition P of N" in the log's meta at its first start): appended by a
/// plain `ingest` or `serve`, or consumed as another partition, they would mix two orders in one log —
/// events no stream holds, or another partition's ops on top of its own — and nothing would say so.
public enum PartitionRole: Sendable, Equatable {
    /// Not checked: the store's own maintenance (`repair`, `compact`), scratch stores, tests.
    case unchecked
    /// Ops from a file, stdin or HTTP (`ingest`, `serve`): refused on a partition's store.
    case standalone
    /// Partition `partition` of `partitions` (`serve --nats`): refused on another partition's store and on a
    /// store that already holds ops from no stream; recorded at the first start.
    case partition(Int, of: Int)
}

extension Store {
    static func checkPartition(
        _ role: PartitionRole, _ env: Environment, _ dbs: Databases, _ path: String, seq: UInt64, source: UInt64
    ) throws {
        guard role != .unchecked else { return }
        let stored: String? = try env.read { txn in
            try txn.get(dbs.meta, "partition").map { String(decoding: $0, as: UTF8.self) }
        }
        func refuse(_ message: String) -> StoreError { StoreError(code: .configMismatch, message: message, path: path) }
        switch role {
        case .unchecked:
            return
        case .standalone:
            if let stored {
                throw refuse(
                    "store \(path) is partition \(stored) of a NATS deployment: its log is its stream's order, so it takes "
                        + "ops only from `teamlog serve --nats` (route them with `teamlog route`); queries, `audit` and "
                        + "`backup` read it as any store")
            }
        case .partition(let p, let n):
            let mine = "\(p)/\(n)"
            if let stored {
                guard stored == mine else {
                    throw refuse(
                        "store \(path) is partition \(stored), not \(mine): serve it with --partition and --partitions as it "
                            + "was made, or give partition \(mine) its own store")
                }
                return
            }
            if seq > 0 && source == 0 {
                throw refuse(
                    "store \(path) holds \(seq) events that came from no stream (`ingest` or a plain `serve`): a partition "
                        + "starts from an empty store (or its own)")
            }
            try env.write { txn in try txn.put(dbs.meta, "partition", Array(mine.utf8)) }
        }
    }
}

