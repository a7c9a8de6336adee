import LMDB
public import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A throwaway store in a temporary directory holding another store's log and projections as of an
/// earlier seq: what `--at SEQ` answers from, with the same queries (and the same index seeks) as a
/// live store. Written without fsync; its directory is removed by `remove()` or when it dies.
public final class ScratchStore {
    /// The store; query it like any other.
    public let store: Store
    /// Events replayed into it.
    public internal(set) var events: Int = 0
    /// The first problem met in the source's log, if any: the replay stopped before it.
    public internal(set) var problem: Store.ChainProblem?
    /// The source log's chained hash after the last event replayed.
    public internal(set) var lastHash: [UInt8] = HashChain.genesis
    /// The directory, removed with its files.
    public let path: String
    private let directory: Directory
    private var removed = false

    init(store: Store, directory: Directory) {
        self.store = store
        self.path = directory.path
        self.directory = directory
    }

    /// Writes the scratch store's checkpoint at the source's position: the last event replayed, its time,
    /// and the source log's chained hash there. A projections-only scratch store's own checkpoints carry its
    /// empty log's hash; a copy of its projections that stands for the source's (`repair`'s swap, a
    /// verified copy) must carry the source's, which an open and `checkBaseHash` compare with the log.
    @discardableResult
    func checkpointAtSource() throws -> Checkpoint {
        let position = Checkpoint(seq: UInt64(events), ts: store.checkpoint.ts, hash: lastHash)
        try store.projectionEnv.write { txn in try store.pdbs.writeCheckpoint(txn, position) }
        return position
    }

    /// Runs `body`, which writes this scratch store (a replay's applies, batches and checkpoints: the
    /// replayed store is only read): a failure is named as the scratch store's (`isScratchFailure`), as
    /// `noSpace` when its file system has no room left — checked now, while the store still fills it.
    func owning<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch { throw named(error) }
    }

    /// A failure of a step that wrote this scratch store, named as `owning` names it.
    private func named(_ error: any Error) -> any Error {
        if let error = error as? StoreError, error.path == path { return error }
        if let free = Store.outOfSpace(error, directory: path) {
            return StoreError(
                code: .noSpace, message: "no space left on device for the scratch store \(path) (\(free) bytes free)",
                cause: error, path: path)
        }
        guard error is LMDBError else { return error }
        return StoreError(code: .lmdb, message: "the scratch store \(path) failed", cause: error, path: path)
    }

    /// Applies one replayed event (`Store.applyReplayed`; its outputs are then the store's
    /// `pendingOutputsScratch`), ending a batch every `batchSize` events (a checkpoint when one is due; a
    /// commit for a store with a log), releasing the maps' resident pages every `Store.releaseInterval`
    /// events and reporting `progress` every 65,536 seqs: a replay's step, and a record reader's.
    func apply(_ event: Event, batchSize: Int, progress: ((Int) -> Void)?) throws {
        let target = store
        // Not through `owning`'s closure: its context held a copy of the event (a retain of each of its
        // fields and a release after, per replayed event: callgrind).
        do {
            try target.applyReplayed(event)
            if target.projectionsOnly {
                if event.seq % UInt64(batchSize) == 0 { try target.replayedBatchDone() }
            } else if target.pendingCount >= batchSize {
                try target.commit()
            }
        } catch {
            throw named(error)
        }
        if event.seq % Store.releaseInterval == 0 {
            // Pages of the scratch store read so far stay resident otherwise: its whole size by the end.
            target.env.releaseResidentPages()
            target.projectionEnv.releaseResidentPages()
        }
        if event.seq & 0xFFFF == 0 { progress?(Int(event.seq)) }
    }

    /// Closes the store and removes its directory.
    public func remove() {
        guard !removed else { return }
        removed = true
        store.close()
        directory.remove()
    }

    deinit { remove() }

    /// Where scratch stores are made: `$TMPDIR`, or /tmp.
    public static var parentDirectory: String {
        getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    }

    /// Whether `error`, thrown by a replay into a scratch store (`audit`, `repair`, `--at`), is the
    /// scratch store's own failure — its directory or files could not be made, or its file system ran
    /// out of room (LMDB reports a short write as EIO: put down to a full disk as a commit's is) — rather
    /// than anything about the store being replayed. Such a run could not be done: it says nothing of
    /// the store.
    public static func isScratchFailure(_ error: any Error) -> Bool {
        let parent = parentDirectory
        if let error = error as? StoreError, let path = error.path,
            path == parent || path.hasPrefix(parent + "/teamlog-scratch-")
        {
            return true
        }
        let cause = (error as? StoreError)?.cause ?? error
        return Store.outOfSpace(cause, directory: parent) != nil
    }

    /// A scratch store's directory while this process owns it: made by `make()` under `$TMPDIR` (or /tmp),
    /// registered with `Leftovers` (removed if a signal stops the process), and holding an exclusive
    /// `flock` on its `owner.lock` from its first moment to its removal — what tells `removeAbandoned` a
    /// live scratch store (of any process) from one a killed process left.
    final class Directory {
        let path: String
        private var lock: Int32
        private let leftover: Int

        private init(path: String, lock: Int32, leftover: Int) {
            self.path = path
            self.lock = lock
            self.leftover = leftover
        }

        static func make() throws -> Directory {
            let base = parentDirectory
            removeAbandonedOnce(in: base)
            var template = Array("\(base)/teamlog-scratch-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw StoreError.system("cannot create a scratch directory in \(base)", call: "mkdtemp", path: base)
            }
            let path = String(cString: made)
            // Registered before anything is made in it: a signal from here on removes it.
            let leftover = Leftovers.register(path)
            let lockPath = path + "/" + ownerLockName
            let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let error = StoreError.system("cannot lock \(lockPath)", call: fd < 0 ? "open" : "flock", path: path)
                if fd >= 0 { close(fd) }
                removeDirectoryTree(path)
                Leftovers.unregister(leftover)
                throw error
            }
            return Directory(path: path, lock: fd, leftover: leftover)
        }

        /// Removes the directory with its files, then lets go of it.
        func remove() {
            guard lock >= 0 else { return }
            removeDirectoryTree(path)
            Leftovers.unregister(leftover)
            close(lock)
            lock = -1
        }

        deinit { remove() }
    }

    /// The file in a scratch store's directory whose `flock` its owner holds (`Directory`).
    static let ownerLockName = "owner.lock"

    /// A scratch directory under `parent` that no process owns any more, as `removeAbandoned` found it.
    public struct Abandoned: Sendable, Equatable {
        public var path: String
        /// The bytes its files held on disk.
        public var bytes: Int
    }

    /// Removes the scratch stores under `parent` (default `$TMPDIR` or /tmp) that processes killed before
    /// they could remove them left behind (`kill -9`, the OOM killer, a machine's crash: an audit of a
    /// 5M-event store leaves ~2 GB), and returns them. A directory named `teamlog-scratch-*` is abandoned
    /// when no process holds a lock on it — its `owner.lock` (`Directory`) nor its store's `writer.lock`
    /// (a scratch store made before the owner lock) — and it has not changed for `minimumAge` seconds,
    /// which passes over one being made at this moment (between `mkdtemp` and its lock). A live scratch
    /// store of this or any other process, and anything that is not such a directory of this user's, is
    /// left alone. Every replay into a scratch store runs this once per process (`Directory.make()`);
    /// the CLI runs it first to say what it removed.
    @discardableResult
    public static func removeAbandoned(in parent: String = parentDirectory, minimumAge: Int = 60) -> [Abandoned] {
        _ = sweep.locked { swept.insert(parent) }
        var removed: [Abandoned] = []
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        for name in (directoryEntries(parent) ?? []).sorted() where name.hasPrefix("teamlog-scratch-") {
            let path = parent + "/" + name
            var st = stat()
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == geteuid(),
                Int(now.tv_sec) - Int(st.st_mtim.tv_sec) >= minimumAge
            else { continue }
            // Each lock taken is held until the directory is gone: its owner cannot come back meanwhile.
            var held: [Int32] = []
            defer { for fd in held { close(fd) } }
            var owned = false
            for lockName in [ownerLockName, "writer.lock"] {
                let fd = open(path + "/" + lockName, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { continue }
                held.append(fd)
                if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                    owned = true
                    break
                }
            }
            if owned { continue }
            let bytes = diskBytes(path)
            removeDirectoryTree(path)
            if access(path, F_OK) != 0 { removed.append(Abandoned(path: path, bytes: bytes)) }
        }
        return removed
    }

    private static let sweep = Monitor()
    nonisolated(unsafe) private static var swept: Set<String> = []

    /// `removeAbandoned(in:)`, unless this process ran it for `parent` already.
    private static func removeAbandonedOnce(in parent: String) {
        guard sweep.locked({ !swept.contains(parent) }) else { return }
        removeAbandoned(in: parent)
    }

    /// The bytes the files under `path` hold on disk.
    private static func diskBytes(_ path: String) -> Int {
        var total = 0
        for name in directoryEntries(path) ?? [] {
            var st = stat()
            guard lstat(path + "/" + name, &st) == 0 else { continue }
            total += (st.st_mode & S_IFMT) == S_IFDIR ? diskBytes(path + "/" + name) : Int(st.st_blocks) * 512
        }
        return total
    }
}

/// Removes a directory and everything under it: a store's files (LMDB's two, the writer lock) and its
/// projection environment's directory. For scratch stores, and for tools that make stores to throw away.
/// Large files are shrunk step by step first (`removeFileGently`).
public func removeDirectoryTree(_ path: String) {
    for name in directoryEntries(path) ?? [] where !removeFileGently(path + "/" + name) {
        removeDirectoryTree(path + "/" + name)
    }
    rmdir(path)
}

/// The names in directory `path` but `.` and `..`; `nil` when it cannot be read (not a directory).
func directoryEntries(_ path: String) -> [String]? {
    guard let dir = opendir(path) else { return nil }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// Removes a file (not a directory: `false`, as `unlink` does), first shrinking one that holds more than
/// two `stepBytes` from its end a step at a time, each step followed by an `fsync` of its directory.
///
/// On a file system that discards freed blocks (ext4 mounted with `discard`, as this project's VMs are:
/// without a journal, as blocks are freed; with one, when the journal commits), unlinking a 330 MB file
/// at once sent ~100-MB discards to the device, and a live writer's log `fdatasync` on it waited ~30 ms
/// behind them (a block trace of `teamlog-bench --stream --stream-backup-at`); stepped, they went out at
/// ≤ 33.5 MB each. The directory's `fsync` commits a journal where there is one, so each step's blocks
/// are discarded apart there too — and it writes none of the file's data: a scratch store (never synced)
/// is dropped from the page cache step by step without reaching the disk, where syncing the file itself
/// would first have written all of it. RocksDB's `DeleteScheduler` paces deletions for the same reason.
@discardableResult
func removeFileGently(_ path: String, stepBytes: Int = 32 << 20) -> Bool {
    var st = stat()
    if lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && Int(st.st_blocks) * 512 > 2 * stepBytes {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        let directory = open(parentDirectory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 && directory >= 0 {
            var size = Int(st.st_size)
            while size > stepBytes {
                size -= stepBytes
                guard ftruncate(fd, off_t(size)) == 0 else { break }
                _ = fsync(directory)
            }
        }
        if fd >= 0 { close(fd) }
        if directory >= 0 { close(directory) }
    }
    return unlink(path) == 0
}

/// The directory part of a path (`.` for a bare name).
func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

extension Store {
    /// Events (or records) a long scan — a replay, an audit's comparison, a repair's copy — reads between
    /// two releases of the memory maps' resident pages (`Environment.releaseResidentPages`), which would
    /// otherwise hold every page it touched: the size of the store. Small in debug builds, so the tests
    /// run through the releases.
    #if DEBUG
        static let releaseInterval: UInt64 = 128
    #else
        static let releaseInterval: UInt64 = 65_536
    #endif

    /// A new, empty scratch store with this store's config, in a new directory under `$TMPDIR`: written
    /// without fsync, its maps sized like this store's so a long replay rarely has to grow them.
    /// `projectionsOnly`: a replay into it keeps no log (`Store.projectionsOnly`) — for an audit, a
    /// repair and a `--at` query, which read only its projection tables (and its checkpoint's seq and time).
    ///
    /// `base`: a store whose projections the scratch store starts from (a copy of them, at their
    /// checkpoint; its log stays empty) instead of empty — `audit(base:)`.
    func makeScratch(
        config: Config? = nil, projectionsOnly: Bool = false, limits: ReplayLimits = ReplayLimits(), base: Store? = nil
    ) throws -> ScratchStore {
        let directory = try ScratchStore.Directory.make()
        let path = directory.path
        var options = Options()
        options.noSync = true
        options.config = config ?? world.config
        options.verifyChainAtOpen = false
        options.mapSize = max(64 << 20, env.mapSize, projectionEnv.mapSize, base?.projectionEnv.mapSize ?? 0)
        if let base {
            let projPath = path + "/" + ProjectionDatabases.directory
            do {
                guard mkdir(projPath, 0o755) == 0 else {
                    throw StoreError.system("cannot create \(projPath)", call: "mkdir", path: projPath)
                }
                try base.projectionEnv.copy(to: projPath, durable: false)
            } catch {
                directory.remove()
                guard let error = error as? LMDBError else { throw error }
                throw StoreError(code: .lmdb, message: "cannot copy the base's projections: \(error)", cause: error)
            }
            options.projectionsAheadOfLog = true
        }
        options.checkpointOps = limits.checkpointOps
        options.readAhead = self.options.readAhead  // and `memoryLimit`, below: the process's, as this store's
        options.memoryLimit = memoryLimit
        // A replay is throughput-bound on every core it has, and nothing waits on it with a latency: its
        // checkpoints keep the process's priority.
        options.checkpointNice = nil
        options.checkpointDuty = nil
        do {
            let scratch = try Store(path: path, options: options)
            scratch.wantsDeliveries = false
            scratch.projectionsOnly = projectionsOnly
            scratch.isReplayScratch = true
            scratch.checkpointPuts = limits.checkpointPuts
            scratch.workingSet.onlyEvictedAreStored = base == nil  // it starts empty
            scratch.workingSet.wholesale = projectionsOnly
            // The replay's budget for a `--at` query's scratch store too: it runs beside a writer in `serve`
            // (`?at=`), and at the writer's own budget its peak RSS reached 1.16 GB at `--at 4000000`.
            scratch.workingSet.budgetBytes = limits.budgetBytes
            // The replay reads this store's maps beside the scratch store's: their pages share the memory.
            scratch.readAheadCompanionBytes = { [weak self] in
                guard let self else { return 0 }
                return self.env.usedBytes + self.projectionEnv.usedBytes
            }
            scratch.adjustReadAhead()
            return ScratchStore(store: scratch, directory: directory)
        } catch {
            directory.remove()
            throw error
        }
    }

    /// Replays this store's committed log from seq 1 (through `upTo` when given), verifying its hash chain,
    /// into a new projections-only scratch store: each event applied through the writer's own path (apply,
    /// changed records, checkpoints), so the scratch store's tables are the ones a writer that stopped at
    /// that seq would hold, unread indexes included, and its projections are checkpointed at that seq (and
    /// its time). The replay keeps no history in memory: what it makes goes to the scratch store's disk.
    ///
    /// `config` is the store's settings (`world.config` when nil): a thread other than the writer's passes
    /// the ones it read at open, so it never touches the writer's state.
    ///
    /// `base`: a copy of this store (`teamlog backup`) whose checkpoint is at or before `upTo`: the scratch
    /// store starts from a copy of its projections and only the log after its checkpoint is walked and
    /// replayed, the chain continued from the base's checkpoint hash — which must be this log's record's at
    /// that seq (`checkBaseHash`). Throws when the base cannot serve: other settings, a checkpoint past
    /// `upTo`, or another log's hash.
    ///
    /// `progress` is the replay's position (a seq), every 65,536 seqs.
    public func replayIntoScratch(
        upTo: UInt64? = nil, batchSize: Int = 8_192, config: Config? = nil, base: Store? = nil,
        progress: ((Int) -> Void)? = nil
    ) throws -> ScratchStore {
        let config = config ?? world.config
        let baseCheckpoint = try base.map { base in try base.projectionEnv.read { try base.pdbs.readCheckpoint($0) } }
        if let base, base.world.config != config { throw Self.baseSettingsMismatch }
        return try env.read { txn in
            if let baseCheckpoint {
                if let upTo, baseCheckpoint.seq > upTo {
                    throw StoreError(
                        code: .other,
                        message: "the base's projections are at seq \(baseCheckpoint.seq), past \(upTo): "
                            + "give an older copy, or none")
                }
                try Self.checkBaseHash(baseCheckpoint, log: self, txn)
            }
            let scratch = try makeScratch(config: config, projectionsOnly: true, base: base)
            do {
                try replay(
                    into: scratch, in: txn, upTo: upTo, after: baseCheckpoint?.seq ?? 0,
                    chainFrom: baseCheckpoint?.hash, batchSize: batchSize, progress: progress)
                return scratch
            } catch {
                scratch.remove()
                throw error
            }
        }
    }

    /// Replays the log of snapshot `txn` (of `env`) from seq 1 through `upTo` (or its end, or its first
    /// problem) into `scratch`, then checkpoints the scratch store's projections at the last event
    /// replayed. Sets the scratch store's `events`, `problem` and `lastHash`. Two threads when the second
    /// can read the same snapshot: one walks the chain and decodes, this one applies and commits.
    /// `progress` is called every 65,536 seqs.
    ///
    /// `after`: the scratch store's projections are already at that seq (`makeScratch(base:)`); the chain is
    /// still verified from seq 1 (an audit's), but only the events after it are decoded and applied — or,
    /// given `chainFrom` (the hash at `after`, vouched for by the caller), verified from there on only.
    ///
    /// `opIds`: an audit's check of the opId index, handed every event the walk reads after `after`
    /// (`OpIdIndexCheck`; those before are the caller's to check: `checkOpIds(through:into:in:)`).
    func replay(
        into scratch: ScratchStore, in txn: Transaction, upTo: UInt64?, after: UInt64 = 0, chainFrom: [UInt8]? = nil,
        batchSize: Int = 8_192, checking opIds: OpIdIndexCheck? = nil, progress: ((Int) -> Void)?
    ) throws {
        let target = scratch.store
        func apply(_ event: Event) throws { try scratch.apply(event, batchSize: batchSize, progress: progress) }
        let start = chainFrom.map { (seq: after, hash: $0) } ?? (seq: 0, hash: HashChain.genesis)
        let walk =
            try replayOnTwoCores(txn, upTo: upTo, after: after, from: start, checking: opIds, apply)
            ?? walkChain(
                in: txn, after: start.seq, hash: start.hash, upTo: upTo
            ) { seq, payload in
                if seq <= after { return nil }
                try opIds?.record(seq: seq, payload: payload, in: txn)
                let event: Event
                do { event = try EventCodec.decode(seq: seq, payload) } catch { return "undecodable event: \(error)" }
                try apply(event)
                return nil
            }
        try scratch.owning { try target.checkpointNow() }
        scratch.events = Int(walk.last)
        scratch.problem = walk.problem
        scratch.lastHash = walk.hash
    }

    /// The replay's walk on a second thread (in its own transaction on the same snapshot), checking the
    /// chain and decoding events in chunks, while this thread applies them. `nil`, with nothing applied,
    /// when the second thread cannot get the same snapshot (a writer committed in between).
    private func replayOnTwoCores(
        _ txn: Transaction, upTo: UInt64?, after: UInt64, from start: (seq: UInt64, hash: [UInt8]),
        checking opIds: OpIdIndexCheck?, _ apply: (Event) throws -> Void
    ) throws -> (last: UInt64, hash: [UInt8], problem: ChainProblem?)? {
        let snapshot = txn.snapshotID
        let decoded = ChunkQueue<Event>()
        let chunkSize = 256
        let (_, walk) = try inParallel(
            {
                do {
                    while let chunk = try decoded.pop() {
                        // Each event borrowed where it lies (`for event in chunk` copied it out).
                        try chunk.withUnsafeBufferPointer { events in
                            for i in events.indices { try apply(events[i]) }
                        }
                        decoded.recycle(chunk)  // freed on the decoding thread
                    }
                } catch {
                    decoded.close()  // stops the walk
                    throw error
                }
            },
            {
                defer { decoded.close() }
                return try self.env.concurrentRead { other -> (UInt64, [UInt8], ChainProblem?)? in
                    guard other.snapshotID == snapshot else { return nil }
                    var chunk: [Event] = []
                    chunk.reserveCapacity(chunkSize)
                    var stopped = false
                    let walk = try self.walkChain(in: other, after: start.seq, hash: start.hash, upTo: upTo) {
                        seq, payload in
                        if seq <= after { return nil }  // in the base's projections: its hash is all
                        try opIds?.record(seq: seq, payload: payload, in: other)
                        let event: Event
                        do { event = try EventCodec.decode(seq: seq, payload) } catch {
                            return "undecodable event: \(error)"
                        }
                        chunk.append(event)
                        if chunk.count == chunkSize {
                            guard decoded.push(chunk) else {
                                stopped = true
                                return "replay stopped"
                            }
                            chunk.removeAll(keepingCapacity: true)
                        }
                        return nil
                    }
                    if !chunk.isEmpty { _ = decoded.push(chunk) }
                    return stopped ? nil : walk
                } ?? nil
            })
        return walk
    }
}

/// How far apart a scratch store's checkpoints are and the working-set budget of a projections-only replay
/// (audit, repair): the defaults in use; tests make them small so that a short history goes through the
/// wholesale evictions and the early eviction of checkpointed messages.
struct ReplayLimits {
    /// Checkpoints every 50,000 events (a writer's `checkpointOps` is 100,000): the records changed since
    /// the last one wait in memory (and the checkpoint's transaction holds their dirty pages), and a replay
    /// makes them fast; the messages a committed checkpoint holds are dropped at the next one
    /// (`evictCheckpointedMessages`).
    /// A record changed in several intervals is encoded and written once per interval: 5M-event audit,
    /// three alternated pairs, 20,000 → 50,000: 94,445–99,724 → 103,447–104,383 events/s, CPU 84 → 74 s
    /// (system time 20 → 15 s), peak RSS unchanged; at 200,000 the held messages filled the budget
    /// (15 wholesale evictions against 5) and the rate fell back (BENCHMARKS, twentieth session).
    var checkpointOps = 50_000
    /// The estimate counts entries, not the dictionaries' spare buckets and per-user storage (a heap
    /// profile of a 1M-event audit: ~460 MB held by the replay at an estimated 256 MiB), and an audit or
    /// repair runs beside a writer that has its own. From the eleventh to the thirty-ninth session it was
    /// three quarters of the writer's default (192 MiB): with the allocator's shorter decay (`Allocator`), a
    /// 5M-event audit's peak RSS went 1,150–1,168 → 1,040–1,045 MB at the same rate then (BENCHMARKS,
    /// eleventh session); at 160 MiB the teams no longer fit in half the budget, are evicted with the rest,
    /// and the rate halves. Since scratch checkpoints are written in bounded transactions (thirty-ninth), it
    /// is the writer's default, 256 MiB: two alternated rounds at 5M events, 192 → 256 MiB: 92.6 / 78.0 →
    /// 68.1 / 66.9 s at 680–690 → 727–753 MB of peak RSS, and in the session before 68.5–73.2 → 64.7–67.8 s;
    /// 320 MiB ran 63.7 / 65.1 s at 838–891 MB, too near the 1 GB bar to be the default (BENCHMARKS,
    /// thirty-eighth and fortieth sessions). `teamlog audit --cache-mb` gives another one.
    var budgetBytes = Self.defaultBudgetBytes

    /// The replay's budget unless one is given: the writer's, 256 MiB.
    static let defaultBudgetBytes = Store.defaultCacheBytes
    /// Events between two looks at the budget and the checkpoint interval (`Store.replayedBatchDone`).
    var batchSize = 8_192
    /// The most puts one transaction of a scratch checkpoint holds (`CheckpointJob.writeChanges`): LMDB
    /// keeps the largest transaction's dirty pages in the process until the scratch store closes. A 1M-event
    /// audit, three alternated rounds, one transaction per checkpoint → 32,768 → 8,192 puts: peak RSS
    /// 603–625 → 565–574 → 530–540 MB at the same wall time; at 5M events 760–773 → 647–690 MB, the wall
    /// time within the noise (+0–4%) and the system time 19 → 27 s (BENCHMARKS, thirty-ninth session).
    var checkpointPuts: Int? = Self.defaultCheckpointPuts

    #if DEBUG
        /// Small in debug builds, so the tests' replays split their checkpoints.
        static let defaultCheckpointPuts = 64
    #else
        static let defaultCheckpointPuts = 8_192
    #endif
}

extension ReplayLimits {
    /// The defaults, with the budget `cacheBytes` when given (`audit`'s and `repair`'s `cacheBytes:`).
    init(cacheBytes: Int?) {
        self.init()
        if let cacheBytes {
            precondition(cacheBytes > 0, "a replay's budget is positive")
            budgetBytes = cacheBytes
        }
    }
}
