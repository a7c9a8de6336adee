import LMDB
import Synchronization
import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A write transaction prepared on the store's thread, to be run by a `WriterThread` (or in place).
/// Subclasses hold everything the transaction puts, so the writer never reads the changing state.
class WriteJob: @unchecked Sendable {
    /// Set by the writer when the transaction failed.
    var error: (any Error)?
    /// Set by the writer when the transaction ended (committed or failed).
    var done = false

    /// Runs the transaction.
    func write() throws { preconditionFailure("subclass") }

    /// Frees what was written, on the writer's thread (freeing hundreds of thousands of small arrays was
    /// a sixth of the store thread's work).
    func dropRecords() {}

    /// Runs the job on the calling thread.
    func runInPlace() {
        do { try write() } catch { self.error = error }
        if error == nil { dropRecords() }  // a failed job keeps its records: a checkpoint retries them
        done = true
    }
}

/// One batch of the log, ready to write: its events, their opIds and the new head.
///
/// The events are encoded here, on the committer's thread, as they are chained and put: an `Event` is an
/// immutable value the store's thread hands over with a retain, and encoding it there was 5–8% of that
/// thread (perf: 4.7% of the stream's writer, 7.9% of a batch ingest's).
/// (Encoding the changed projection records on the committer from a copy-on-write copy of the state was
/// tried: fewer instructions on the store's thread, but the copies the next batch's changes then made
/// cost as much as they saved.)
final class CommitJob: WriteJob, @unchecked Sendable {
    private let env: Environment
    private let dbs: Databases
    /// The batch's events, in seq order (dropped once written: read `eventCount` from other threads).
    private var events: [Event]
    /// How many events the batch holds (fixed at creation: the store's thread reads it while the
    /// committer may be dropping `events`).
    let eventCount: Int
    private(set) var opIds: [Id: OpIdOutcome]
    /// The new head; its `lastHash` is the chain's hash after the batch once written.
    private(set) var head: Meta
    /// The chain's hash before the batch.
    private let previousHash: [UInt8]
    /// The external source position this batch consumed through, its outbox entries, and the outbox
    /// entries whose publishing was confirmed (deleted), when the store is fed from a stream.
    let source: SourceWrite

    init(
        env: Environment, dbs: Databases, events: [Event], opIds: [Id: OpIdOutcome],
        previousHash: [UInt8], lastSeq: UInt64, lastTs: Int64, source: SourceWrite = SourceWrite()
    ) {
        self.env = env
        self.dbs = dbs
        self.events = events
        self.eventCount = events.count
        self.opIds = opIds
        self.previousHash = previousHash
        self.head = Meta(lastSeq: lastSeq, lastTs: lastTs, lastHash: previousHash, config: nil)
        self.source = source
    }

    /// The batch's one write transaction: events (each encoded, then its hash chained on the one before
    /// it appended — SHA-256 was a sixteenth of the store's thread before it moved here; jobs run one at a
    /// time in seq order, so the chain is the same as hashing at submit), opId index, head. Its fsync is
    /// the only durable write on the path from a line to its records. Runs again from the start if LMDB
    /// grows the map, so it derives everything from the job's inputs.
    override func write() throws {
        try env.write { txn in
            var hash = previousHash
            var w = ByteWriter(capacity: 256)
            for event in events {
                w.bytes.removeAll(keepingCapacity: true)
                EventCodec.encode(event, into: &w)
                hash = w.bytes.withUnsafeBytes { HashChain.next(previous: hash, seq: event.seq, payload: $0) }
                w.bytes.append(contentsOf: hash)
                try txn.put(dbs.log.handle, key: BigEndianUInt64.encoded(event.seq), value: w.bytes, flags: .append)
            }
            head.lastHash = hash
            for (opId, outcome) in opIds {
                try txn.put(dbs.opIds, opId, outcome, flags: .noOverwrite)
            }
            try dbs.writeHead(txn, head)
            if let position = source.position {
                try txn.put(dbs.meta, "source", BigEndianUInt64.encoded(position))
            }
            if let input = source.input { try txn.put(dbs.meta, "input", input.encoded) }
            if let outbox = dbs.outbox {
                for (key, value) in source.outbox { try txn.put(outbox, key, value) }
                for key in source.published { _ = try txn.delete(outbox, key) }
            } else if !source.outbox.isEmpty {
                throw StoreError(code: .corrupted, message: "the store has no outbox database")
            }
        }
        // A store directory removed under a running writer: LMDB went on committing into the unlinked file,
        // and every op acknowledged from then on was gone with the process (a server answered 200 and
        // stayed ready). The batch is not durable in any store: it fails, and the store with it.
        if env.dataFileIsUnlinked {
            throw StoreError(
                code: .io,
                message: "the store's data file \(env.path)/data.mdb was removed while this writer ran: this batch "
                    + "and any later one cannot be made durable (restore the store from a backup, then feed again)")
        }
    }

    /// Frees the batch on the committer's thread, but keeps the events' buffer (emptied: the events are
    /// released here), which the store takes back for a later batch (`takeEventBuffer`): a batch handed
    /// over with a retain left the writer appending its next batch into freshly allocated memory, its
    /// growth copies and first-touch page faults on the writer's thread at every commit (perf, batch
    /// ingest: `memmove` and `exc_page_fault` under `Store.append`). The opIds' storage is dropped: the
    /// store's `inFlightOpIds` shares it, and clears and reuses it once this job lets it go.
    override func dropRecords() {
        events.removeAll(keepingCapacity: true)
        opIds = [:]
    }

    /// The emptied events' buffer of a job that is done and committed (`dropRecords` ran), for the next
    /// batch; `nil` for one that failed or still holds its events.
    func takeEventBuffer() -> [Event]? {
        guard done, error == nil, events.isEmpty, events.capacity > 0 else { return nil }
        defer { events = [] }
        return events
    }
}

/// The next chunk of `CheckpointJob.appendChanges` to encode, shared by its two threads.
private final class ChunkCounter: @unchecked Sendable {
    private let next = Atomic<Int>(0)

    /// A chunk no other call returned (past the last one once all are taken).
    func take() -> Int { next.wrappingAdd(1, ordering: .relaxed).oldValue }
}

/// What a commit writes for a stream-fed store besides its events (`Store.stageSource`).
struct SourceWrite {
    var position: UInt64?
    var outbox: [(UInt64, [UInt8])] = []
    var published: [UInt64] = []
    /// A file `ingest`'s place in its input (`Store+Input`).
    var input: InputPosition?
    var isEmpty: Bool { position == nil && outbox.isEmpty && published.isEmpty && input == nil }
}

/// The projection records changed since the last checkpoint (encoded from the state at `seq`, or when
/// they were added, for new keys) and that position, written to the projection environment in one
/// transaction — after the log batch that reaches `seq` is durable, so the projections are never ahead
/// of the log. A failed job keeps its records, and the next checkpoint writes them first.
final class CheckpointJob: WriteJob, @unchecked Sendable {
    private let env: Environment
    private let dbs: ProjectionDatabases
    private(set) var changes: RecordBuffer
    /// The position; `hash` is taken from `after` once that batch is written.
    private(set) var checkpoint: Checkpoint
    /// The log batch that ends at `checkpoint.seq`, still being written when this job was made.
    private let after: CommitJob?
    /// Waits until `after` is written (or failed).
    private let waitForLog: (CommitJob) -> Void
    /// File-backed resident bytes over which the pages read are dropped (`Store.mappedBytesBudget`).
    private let mappedBytesBudget: Int
    /// The busy share, in percent, the puts keep to (`Store.Options.checkpointDuty`; `nil`: no pauses).
    private let duty: Int?
    /// The most puts one write transaction holds (`nil`: the whole checkpoint in one; see `writeChanges`).
    private let putsPerTransaction: Int?
    /// Set by the store's thread when the next checkpoint is due: no more pauses.
    private let hurried = Atomic<Bool>(false)
    /// Time spent pausing (tests and diagnostics).
    private(set) var pausedNanoseconds: Int64 = 0

    init(
        env: Environment, dbs: ProjectionDatabases, changes: RecordBuffer,
        checkpoint: Checkpoint, after: CommitJob?, mappedBytesBudget: Int, duty: Int? = nil,
        putsPerTransaction: Int? = nil, waitForLog: @escaping (CommitJob) -> Void
    ) {
        precondition(putsPerTransaction.map { $0 > 0 } ?? true, "a transaction holds at least one put")
        self.putsPerTransaction = putsPerTransaction
        self.env = env
        self.dbs = dbs
        self.changes = changes
        self.checkpoint = checkpoint
        self.after = after
        self.mappedBytesBudget = mappedBytesBudget
        self.duty = duty.flatMap { $0 > 0 && $0 < 100 ? $0 : nil }
        self.waitForLog = waitForLog
    }

    /// Stops the pauses (any thread).
    func hurry() { hurried.store(true, ordering: .relaxed) }

    /// Work between two checks of the clock (puts), and the work between two pauses (ns).
    static let putsPerCheck = 256
    static let sliceNanoseconds: Int64 = 2_000_000

    /// Whether the process's file-backed resident memory is over the budget (or unknown).
    private var overBudget: Bool { ResidentMemory.fileBacked(over: mappedBytesBudget) }

    /// Appends the projection records `state` marks as changed: table, key and value (`nil`: delete).
    ///
    /// A large change set (a batch commit's, an audit's checkpoint) is encoded in chunks on two threads:
    /// encoding only reads the state, and the order of the chunks' records does not matter — each key is
    /// encoded from the final state, so a key listed twice writes the same record twice. Small ones (a stream's
    /// commit every few ms) stay on this thread: a thread's start would cost more than it saves.
    static func appendChanges(of state: World, to changes: inout RecordBuffer) {
        appendChanges(state.changes.appended, state.changes.dirty, of: state, to: &changes)
    }

    /// Appends the records of the keys in `first` and then `second`, encoded from `state` (as above).
    static func appendChanges(
        _ first: some Collection<ProjectionKey>, _ second: some Collection<ProjectionKey>, of state: World,
        to changes: inout RecordBuffer
    ) {
        guard first.count + second.count >= parallelEncodingThreshold else {
            for key in first { ProjectionCodec.append(key, in: state, to: &changes) }
            for key in second { ProjectionCodec.append(key, in: state, to: &changes) }
            return
        }
        // Chunks of `first` and `second`, walked in place (copying the keys into one array, an enum with
        // ids, a retain each, was a twentieth of a batch ingest's writer), handed out one at a time to
        // whichever of the two threads asks next. Fixed halves made the writer wait for the helper's half
        // whenever the other core was busy (parse, commit, checkpoint threads): `perf sched` showed the
        // writer blocked ~4 ms (a scheduler tick) at most commits while the helper ran. Taking chunks, the
        // writer encodes whatever the helper has not started.
        let firstChunks = chunkBounds(first)
        let secondChunks = chunkBounds(second)
        let chunkCount = firstChunks.count + secondChunks.count
        let next = ChunkCounter()
        func encode(into buffer: inout RecordBuffer) {
            while true {
                let k = next.take()
                if k < firstChunks.count {
                    for key in first[firstChunks[k]] { ProjectionCodec.append(key, in: state, to: &buffer) }
                } else if k < chunkCount {
                    for key in second[secondChunks[k - firstChunks.count]] {
                        ProjectionCodec.append(key, in: state, to: &buffer)
                    }
                } else {
                    return
                }
            }
        }
        let bytesPerKey = changes.isEmpty ? 64 : max(16, changes.byteCount / changes.count)
        let share = (first.count + second.count) / 2
        // Neither side throws; `inParallel` only rethrows what they throw.
        let (_, later) = try! inParallel(
            { encode(into: &changes) },
            {
                var buffer = RecordBuffer(records: share, bytes: share * bytesPerKey)
                encode(into: &buffer)
                return buffer
            })
        changes.append(contentsOf: later)
    }

    /// Keys a chunk of `appendChanges` holds: ~50–100 µs of encoding.
    static let encodingChunk = 256

    /// `keys` cut into ranges of `encodingChunk` indices (a set's indices are walked once to find them).
    private static func chunkBounds<C: Collection>(_ keys: C) -> [Range<C.Index>] {
        var bounds: [Range<C.Index>] = []
        bounds.reserveCapacity(keys.count / encodingChunk + 1)
        var lower = keys.startIndex
        while lower != keys.endIndex {
            let upper = keys.index(lower, offsetBy: encodingChunk, limitedBy: keys.endIndex) ?? keys.endIndex
            bounds.append(lower..<upper)
            lower = upper
        }
        return bounds
    }

    /// Changed keys from which `appendChanges` encodes on two threads (small in debug builds, so the
    /// tests' commits and checkpoints take the two-thread path). 4,096: the commit after a big team's
    /// dismiss (~6,000 records) is one the stream's lines wait behind, and a thread's start (~0.1 ms)
    /// is far less than half of encoding that many (16,384 until the seventeenth session: the writer's
    /// samples for 20 cold 2,000-member dismisses 681 → 640 on average over six alternated pairs).
    #if DEBUG
        static let parallelEncodingThreshold = 64
    #else
        static let parallelEncodingThreshold = 4_096
    #endif

    override func write() throws {
        if let after {
            waitForLog(after)
            if let error = after.error {
                throw StoreError(
                    code: .commitFailed, message: "checkpoint skipped: its log batch did not commit", cause: error)
            }
            checkpoint.hash = after.head.lastHash
        }
        let order = Self.writeOrder(changes)
        // Committed without sync, then flushed range by range and the marker rewritten (`FlushMarker`): one
        // `fdatasync` of a second's B-tree pages (~200 MB at 50,000 ops/s) held the log's group commits on
        // the same device behind it — the stream's once-a-second stops.
        try FlushMarker.catchUp(env)
        try env.withUnsyncedCommit { try writeChanges(order) }
        try FlushMarker.flush(env)
        // The pages this transaction read through the map stay resident in this process otherwise, until
        // its RSS holds the whole projection file; the page cache keeps them for the next reader. Not below
        // the budget: the writer would fault its hot pages in again.
        if overBudget { env.releaseResidentPages() }
    }

    /// The checkpoint's records in `order`, and the checkpoint: in one transaction — or, given
    /// `putsPerTransaction` (a replay's scratch store: `ReplayLimits.checkpointPuts`), in consecutive
    /// transactions of at most that many puts, the checkpoint in the last.
    ///
    /// LMDB holds a transaction's dirty pages in memory until its commit, and keeps the freed ones for
    /// later transactions for as long as the environment is open: the largest transaction's pages stay in
    /// the process for good. A heap profile of a 1M-event audit (jemalloc, at its peak) had 102 MB of its
    /// 501 MB there, all from these puts. Nothing needs a scratch store's checkpoint to be atomic: nothing
    /// reads the scratch store before the checkpoint is finished (`finishCheckpoint`) but the replay itself,
    /// and a replay that dies leaves its scratch store to be removed. A store's own checkpoint stays one
    /// transaction: its records and its seq are durable together or not at all.
    private func writeChanges(_ order: [Int]) throws {
        guard let limit = putsPerTransaction, order.count > limit else {
            try writeChanges(order[...], withCheckpoint: true)
            return
        }
        var start = order.startIndex
        while start < order.endIndex {
            let end = min(start + limit, order.endIndex)
            try writeChanges(order[start..<end], withCheckpoint: end == order.endIndex)
            start = end
        }
    }

    /// One transaction of `writeChanges`: the records in `order`, and the checkpoint when asked.
    private func writeChanges(_ order: ArraySlice<Int>, withCheckpoint: Bool) throws {
        try env.write { txn in
            // Its puts read leaf pages all over a file that grows with history: released as it goes, or the
            // process's RSS at the end of a checkpoint holds every page it read (measured: peak RSS of a 1M-op
            // ingest into a 3M-op store 1,439 MB, 633 MB of it mapped file pages, against 286 MB into an
            // empty store).
            let release = txn.residentPageReleaser()
            let entries = changes.entries
            try changes.withArena { arena in
                // Table by table, each through one cursor: the keys come in order, so LMDB finds most
                // leaves from the cursor's page rather than from the root.
                var i = order.startIndex
                var sliceStart = MonotonicClock.nanoseconds()
                while i < order.endIndex {
                    let table = entries[order[i]].table
                    try txn.withCursor(dbs.table(table)) { cursor in
                        while i < order.endIndex, entries[order[i]].table == table {
                            let entry = entries[order[i]]
                            let key = entry.key(in: arena)
                            if let value = entry.value(in: arena) {
                                try cursor.put(key: key, value: value)
                            } else {
                                try cursor.delete(key: key)
                            }
                            if i & (Self.releaseEvery - 1) == Self.releaseEvery - 1, overBudget { release?() }
                            if let duty, i % Self.putsPerCheck == Self.putsPerCheck - 1 {
                                pace(duty: duty, sliceStart: &sliceStart)
                            }
                            i += 1
                        }
                    }
                }
            }
            if withCheckpoint { try dbs.writeCheckpoint(txn, checkpoint) }
        }
    }

    /// After a slice of `sliceNanoseconds` of work, pauses so that work stays `duty` percent of the time.
    private func pace(duty: Int, sliceStart: inout Int64) {
        let now = MonotonicClock.nanoseconds()
        let worked = now - sliceStart
        guard worked >= Self.sliceNanoseconds else { return }
        if !hurried.load(ordering: .relaxed) {
            let pause = worked * Int64(100 - duty) / Int64(duty)
            usleep(UInt32(clamping: pause / 1_000))
            pausedNanoseconds += MonotonicClock.nanoseconds() - now
        }
        sliceStart = MonotonicClock.nanoseconds()
    }

    override func dropRecords() { changes = RecordBuffer() }

    /// Puts between two checks of the file-backed budget, releasing the mapped pages a checkpoint read
    /// when over it (a power of two; small in debug builds, so the tests' checkpoints run through
    /// releases). 8,192 let a scratch checkpoint's reads overshoot the budget by hundreds of MB (see
    /// `Store.writerReleaseInterval`).
    #if DEBUG
        static let releaseEvery = 16
    #else
        static let releaseEvery = 1_024
    #endif

    /// The order to write `changes` in: each (table, key) once — its last change, the buffer holding a
    /// record once per batch that changed it — in key order, table by table, so each B-tree is walked once
    /// from left to right instead of at random (fewer pages touched and copied, a cursor's path mostly
    /// reused).
    ///
    /// Sorts plain 24-byte entries (table rank, the key's first 16 bytes, its record's index), comparing
    /// whole keys in the buffer's arena with `memcmp` only when those 16 bytes tie, and drops the earlier
    /// changes of a key in the same pass. (The first version sorted `(table, [UInt8], [UInt8]?)` tuples
    /// after deduplicating them through a `Set` of copied keys: the moves retained and released both arrays
    /// and the comparator compared the tables' names as strings, a fifth of an audit's CPU — perf, a
    /// 100,000-event store.) Tables are ordered by `ProjectionTable.allCases` (any fixed order does: each
    /// is its own database).
    static func writeOrder(_ changes: RecordBuffer) -> [Int] {
        struct Sortable {
            var rank: UInt32
            var index: UInt32
            /// The key's bytes 0–7 and 8–15, big-endian, zero-padded.
            var prefix: UInt64
            var next: UInt64
        }
        return changes.withArena { arena -> [Int] in
            let records = changes.entries
            var entries: [Sortable] = []
            entries.reserveCapacity(records.count)
            for (index, record) in records.enumerated() {
                let key = record.key(in: arena)
                var prefix: UInt64 = 0
                var next: UInt64 = 0
                for i in 0..<8 { prefix = prefix << 8 | UInt64(i < key.count ? key[i] : 0) }
                for i in 8..<16 { next = next << 8 | UInt64(i < key.count ? key[i] : 0) }
                entries.append(
                    Sortable(rank: UInt32(record.table.rank), index: UInt32(index), prefix: prefix, next: next))
            }
            /// LMDB's default order of two keys (bytes unsigned, a prefix first): negative, zero, positive.
            func compareKeys(_ a: Sortable, _ b: Sortable) -> Int {
                compareBytes(records[Int(a.index)].key(in: arena), records[Int(b.index)].key(in: arena))
            }
            entries.sort { a, b in
                if a.rank != b.rank { return a.rank < b.rank }
                // Zero-padded first 16 bytes order keys as their bytes do wherever they differ there (ids
                // share prefixes: 8 bytes alone tied often enough to make `memcmp` a third of the sort).
                if a.prefix != b.prefix { return a.prefix < b.prefix }
                if a.next != b.next { return a.next < b.next }
                let order = compareKeys(a, b)
                return order != 0 ? order < 0 : a.index < b.index
            }
            var order: [Int] = []
            order.reserveCapacity(entries.count)
            for i in entries.indices {
                // The last of a run of equal keys is the latest change.
                if i + 1 < entries.count {
                    let a = entries[i], b = entries[i + 1]
                    if a.rank == b.rank && a.prefix == b.prefix && a.next == b.next && compareKeys(a, b) == 0 {
                        continue
                    }
                }
                order.append(Int(entries[i].index))
            }
            return order
        }
    }
}

/// Drops the memory maps' resident pages of `envs` when the process's file-backed resident memory is
/// over `budget` (`Store.releaseResidentPagesIfOverBudget`), on the thread that runs it: the pages stay in
/// the page cache, and a reader faults them in again. An environment's `releaseResidentPages` reads its
/// map's bounds in a read transaction of its own and holds its resize lock, so it runs beside the store's
/// thread and the committer.
final class PageReleaseJob: WriteJob, @unchecked Sendable {
    private let envs: [Environment]
    private let budget: Int

    init(envs: [Environment], budget: Int) {
        self.envs = envs
        self.budget = budget
    }

    override func write() throws {
        guard ResidentMemory.fileBacked(over: budget) else { return }
        for env in envs { env.releaseResidentPages() }
    }
}

/// A thread that runs the write transactions handed to it, one at a time, so the store's thread can go
/// on deciding and applying while they are written and fsynced. It is still the one writer of its
/// environment: the store hands over at most one job and waits for it before the next. The store has
/// one for the log (the committer), one for the projections (the checkpointer), and one that drops the
/// maps' pages (the releaser: `PageReleaseJob`, no transaction of its own but a read).
final class WriterThread: @unchecked Sendable {
    private let monitor = Monitor()
    private var job: WriteJob?
    private var stopping = false
    private var thread: JoinableThread?

    /// `nil` when no thread can be started (the store then writes in place). `nice`: the thread's lower
    /// priority, if any.
    init?(name: String, nice: Int32? = nil) {
        guard
            let started = startThread(
                name: name,
                {
                    if let nice { lowerThisThreadsPriority(to: nice) }
                    self.loop()
                })
        else { return nil }
        thread = started
    }

    private func loop() {
        while let current = monitor.locked({ () -> WriteJob? in
            monitor.wait { job != nil || stopping }
            return job
        }) {
            var failure: (any Error)?
            do { try current.write() } catch { failure = error }
            if failure == nil { current.dropRecords() }  // a failed job keeps its records to be retried
            monitor.locked {
                current.error = failure
                current.done = true
                job = nil
                monitor.broadcast()
            }
        }
    }

    /// Starts writing `job` (the previous one must be finished).
    func start(_ job: WriteJob) {
        monitor.locked {
            precondition(self.job == nil, "one job in flight at a time")
            self.job = job
            monitor.broadcast()
        }
    }

    /// Waits until `job` is written (or failed).
    func wait(_ job: WriteJob) {
        monitor.locked { monitor.wait { job.done } }
    }

    /// Whether `job` is written (or failed), without waiting.
    func isDone(_ job: WriteJob) -> Bool {
        monitor.locked { job.done }
    }

    /// Ends the thread after the job in flight, if any.
    func stop() {
        monitor.locked {
            stopping = true
            monitor.broadcast()
        }
        thread?.join()
        thread = nil
    }
}
