public import TeamLog
public import TeamLogStore
import TeamLogThreads

/// The store's single writer for a server: one dedicated thread owns the `Store` (which is not
/// thread-safe, and whose LMDB write transactions must not hop threads) and group-commits what
/// concurrent callers submit.
///
/// Each loop of the thread takes every submission queued since the last one, runs each through its own
/// `Processor` (the CLI's: same decisions, same records, line numbers relative to its body), commits
/// them all in one transaction and one fsync, and only then hands each caller its records. Submissions
/// arriving while a commit is written wait for the next loop, so the more callers there are the larger
/// each group grows. Queries run on the caller's thread (`answer`, `Store.readCommitted`): every durable
/// commit publishes the records it changed over the stored checkpoint, so a query sees every op answered
/// before it without waiting for a checkpoint (read your writes).
public final class WriterService: @unchecked Sendable {
    /// Settings.
    public struct Options: Sendable {
        /// How to open the store.
        public var store = Store.Options()
        /// A single submission with more ops than this is committed in several transactions.
        public var batchSize = 10_000
        /// Bytes of records (`Record.estimatedSize`) that also end a group: its records wait in memory until
        /// it is durable, and a large team's are megabytes each (a NATS partition's group of 8,192 inputs
        /// with supergroups up to 200,000 members held 4.5 GB). Ordinary groups stay far below it.
        public var maxGroupRecordBytes = 64 << 20
        /// Seqs of records kept for the record stream.
        public var streamWindow = 65_536
        /// Bytes of records kept for the record stream (256 MiB: deliveries to large teams are large).
        public var streamWindowBytes = 256 << 20
        /// Called on the writer's thread when a checkpoint fails after the last one succeeded, with the
        /// failure in words (`Store.onCheckpointFailure`), and when one succeeds again, with its seq.
        public var onCheckpointFailure: (@Sendable (String) -> Void)?
        public var onCheckpointRecovered: (@Sendable (UInt64) -> Void)?
        public init() {}
    }

    /// Why a submission or a wait was not served.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What kind of failure.
        public enum Code: String, Sendable {
            /// The store is still being opened.
            case notReady
            /// The service is stopping or stopped.
            case stopping
            /// The store failed (a commit, or refused at open): nothing more is written.
            case storeFailed
        }
        public var code: Code
        public var message: String
        public var description: String { "\(code.rawValue): \(message)" }

        public init(code: Code, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// What one group commit did, for metrics (called on the writer's thread after the commit).
    public struct CommitReport: Sendable {
        /// Ops in the group (lines that were not blank).
        public var lines = 0
        public var accepted = 0
        public var duplicates = 0
        public var rejected: [RejectionCode: Int] = [:]
        /// Submissions (requests) in the group.
        public var submissions = 0
        /// Seconds the commit (write and fsync) took.
        public var commitSeconds = 0.0
        /// Committed seq minus the projections' checkpoint seq after it.
        public var checkpointLag: UInt64 = 0
        /// The store's working set after the commit (counters since the store opened).
        public var workingSet: WorkingSetStats?
        /// Events and bytes of records the record stream retains after the commit.
        public var windowEvents = 0
        public var windowBytes = 0
    }

    /// The state of the service.
    public enum State: Sendable, Equatable {
        case opening, ready, failed(String), stopped
    }

    private struct Submission {
        /// Who waits for the answer: a request (its records, as values) or a stream input (its outbox
        /// entry, encoded: it was written in the commit).
        enum Reply {
            case answer(@Sendable (Result<Answer, Failure>) -> Void)
            case outbox(@Sendable (Result<[UInt8], Failure>) -> Void)
        }
        var lines: [ParsedLine]
        var emit: Processor.Emit
        /// With `emit: .all`: the bytes of output records (`Record.estimatedSize`) kept for the answer;
        /// later outputs are left out (`Answer.omittedOutputs`).
        var maxOutputBytes: Int? = nil
        /// A stream input's position: its records go to the outbox with it (`submit(_:source:done:)`).
        var source: UInt64? = nil
        var reply: Reply

        func fail(_ failure: Failure) {
            switch reply {
            case .answer(let done): done(.failure(failure))
            case .outbox(let done): done(.failure(failure))
            }
        }
    }

    /// A request's answer when its outputs are capped (`submit(_:emit:maxOutputBytes:answer:)`).
    public struct Answer: Sendable {
        /// Its records, in order: every event, rejection and duplicate record, and the outputs up to the cap.
        public var records: [Record]
        /// Output records left out once the cap was reached (0: none).
        public var omittedOutputs = 0
        /// The seq of the first event whose outputs were left out: `GET /v1/records?from=` it has them.
        public var omittedFromSeq: UInt64? = nil
    }

    public let path: String
    public let options: Options
    /// Called on the writer's thread after each group commit.
    public let onCommit: @Sendable (CommitReport) -> Void
    private let monitor = Monitor()
    private var queue: [Submission] = []
    /// Outbox entries whose publish was confirmed, to delete with the next commit.
    private var published: [UInt64] = []
    private var _sourcePosition: UInt64 = 0
    private var stopRequested = false
    private var _state: State = .opening
    private var _store: Store?
    private var _window: RecordWindow?
    private var _committedSeq: UInt64 = 0
    private var _checkpointSeq: UInt64 = 0
    private var _config = Config()
    private var thread: JoinableThread?

    /// Starts the writer's thread, which opens the store at `path` (replaying its log after the
    /// checkpoint) and then serves submissions; `state` says when it is ready.
    public init(
        path: String, options: Options = Options(), onCommit: @escaping @Sendable (CommitReport) -> Void = { _ in }
    ) {
        self.path = path
        self.options = options
        self.onCommit = onCommit
        thread = startThread(name: "tl-writer") { [self] in run() }
        if thread == nil { monitor.locked { _state = .failed("cannot start the writer thread") } }
    }

    /// Opening, ready, failed (with why) or stopped.
    public var state: State { monitor.locked { _state } }

    /// The store once open. Other threads may only use what is safe beside the writer: reads of the stored
    /// projections and of the log, `status`.
    public var store: Store? { monitor.locked { _store } }

    /// Whether it was stopped while its open waited for another writer's lock (`waitForWriter`), so never
    /// opened the store.
    public var stoppedWaitingForWriter: Bool { monitor.locked { _stoppedWaiting } }
    private var _stoppedWaiting = false

    /// The store's settings (read at open; the defaults until then).
    public var config: Config { monitor.locked { _config } }

    /// The records of recent committed events, once the store is open.
    public var window: RecordWindow? { monitor.locked { _window } }

    /// The last durable seq: every submission answered so far is at or below it.
    public var committedSeq: UInt64 { monitor.locked { _committedSeq } }

    /// The seq of the last checkpoint the writer knows complete (the projections on disk are at least there).
    public var checkpointSeq: UInt64 { monitor.locked { _checkpointSeq } }

    /// Why the last checkpoint failed, while checkpoints fail (`Store.checkpointProblem`): the log goes on,
    /// but other processes' queries stay at `checkpointSeq` and the changes since wait in memory.
    public var checkpointProblem: String? { monitor.locked { _checkpointProblem } }
    private var _checkpointProblem: String?

    /// Queues lines (already parsed off this thread) for the next group commit; `done` gets their SPEC §4
    /// records (those `emit` asks for, in order) once they are durable, or why not. The records are
    /// values: the caller encodes them (`encode`) on its own thread, so the writer's thread, which every
    /// request waits on, does not. `done` is called on the writer's thread: it must not block.
    public func submit(
        _ lines: [ParsedLine], emit: Processor.Emit, done: @escaping @Sendable (Result<[Record], Failure>) -> Void
    ) {
        submit(lines, emit: emit, maxOutputBytes: nil) { done($0.map(\.records)) }
    }

    /// As `submit(_:emit:done:)`, with the output records the answer keeps capped at `maxOutputBytes`
    /// (`emit: .all` only; nil: no cap): a request's outputs grow with its teams' sizes — one send to a
    /// 200,000-member team is an 8 MB delivery — and wait in memory until the group is durable. Past the
    /// cap its events, rejections and duplicates are still answered; the outputs left out are counted in
    /// the answer, from the seq of the first event that had one left out (the record stream serves them).
    public func submit(
        _ lines: [ParsedLine], emit: Processor.Emit, maxOutputBytes: Int?,
        answer: @escaping @Sendable (Result<Answer, Failure>) -> Void
    ) {
        let refused: Failure? = monitor.locked {
            if let failure = refusal { return failure }
            queue.append(Submission(lines: lines, emit: emit, maxOutputBytes: maxOutputBytes, reply: .answer(answer)))
            monitor.broadcast()
            return nil
        }
        if let refused { answer(.failure(refused)) }
    }

    /// Records as JSON Lines, each ending in a newline: what `teamlog ingest` prints for them.
    public static func encode(_ records: [Record]) -> [UInt8] {
        var writer = JSONWriter()
        for record in records {
            record.write(into: &writer)
            writer.bytes.append(0x0A)
        }
        return writer.bytes
    }

    /// Queues one input of an external stream at `position` (its stream sequence, above every position
    /// submitted before): decided like any line, its records — all of them, whatever a request would
    /// print — are written to the store's outbox and the position to its `meta.source`, in the same
    /// commit as its events. `done` gets the encoded `OutboxRecords` once that commit is durable.
    public func submit(
        _ line: ParsedLine, source position: UInt64, done: @escaping @Sendable (Result<[UInt8], Failure>) -> Void
    ) {
        let refused: Failure? = monitor.locked {
            if let failure = refusal { return failure }
            queue.append(Submission(lines: [line], emit: .none, source: position, reply: .outbox(done)))
            monitor.broadcast()
            return nil
        }
        if let refused { done(.failure(refused)) }
    }

    /// The stream position the committed log has consumed through (`Store.sourcePosition`).
    public var sourcePosition: UInt64 { monitor.locked { _sourcePosition } }

    /// Marks outbox entries as published downstream: deleted by the next commit (one of their own when
    /// nothing else comes), so a restart does not send them again.
    public func confirmPublished(_ positions: [UInt64]) {
        guard !positions.isEmpty else { return }
        monitor.locked {
            published += positions
            monitor.broadcast()
        }
    }

    /// How many committed outbox entries are left (records whose publish is not confirmed, or whose
    /// deletion has not committed yet): counted, not read.
    public func unpublishedCount() throws -> Int {
        guard let store else { return 0 }
        return try store.outboxCount()
    }

    /// The committed outbox entries after `position` (records committed but not confirmed published).
    public func unpublished(after position: UInt64 = 0) throws -> [(position: UInt64, records: OutboxRecords)] {
        guard let store else { return [] }
        return try store.outboxEntries(after: position).map { ($0.0, try OutboxRecords(decoding: $0.1)) }
    }

    /// Stops taking submissions, serves the ones queued, commits, writes a last checkpoint, closes the store
    /// and ends the thread; returns when all that is done.
    public func stop() {
        monitor.locked {
            stopRequested = true
            monitor.broadcast()
        }
        thread?.join()
        thread = nil
    }

    /// The groups a batch of submissions is decided in, in order: consecutive submissions together, but a
    /// submission of `batchSize` lines or more alone. Such a submission commits parts of itself while it is
    /// decided, and each of those transactions carries every op pending in the store: grouped with others
    /// it would make their ops durable under its commits, and its failure would answer as failed
    /// submissions that had become durable whole.
    private static func groups(of batch: [Submission], batchSize: Int) -> [[Submission]] {
        var groups: [[Submission]] = []
        var current: [Submission] = []
        for submission in batch {
            if submission.lines.count >= batchSize {
                if !current.isEmpty { groups.append(current) }
                current = []
                groups.append([submission])
            } else {
                current.append(submission)
            }
        }
        if !current.isEmpty { groups.append(current) }
        return groups
    }

    /// Inside the lock: the failure once the service has failed.
    private var failedState: Failure? {
        if case .failed(let why) = _state { return Failure(code: .storeFailed, message: why) }
        return nil
    }

    /// Inside the lock: why a new request is refused, if it is.
    private var refusal: Failure? {
        if stopRequested { return Failure(code: .stopping, message: "the server is stopping") }
        switch _state {
        case .opening: return Failure(code: .notReady, message: "the store is being opened")
        case .ready: return nil
        case .failed(let why): return Failure(code: .storeFailed, message: why)
        case .stopped: return Failure(code: .stopping, message: "the server has stopped")
        }
    }

    // MARK: - The writer's thread

    private func run() {
        let store: Store
        do {
            var storeOptions = options.store
            // A stop while it waits for another writer's lock ends the wait (and the service) at once.
            storeOptions.stopWaitingForWriter = { [weak self] in self?.monitor.locked { self?.stopRequested } ?? true }
            store = try Store(path: path, options: storeOptions)
        } catch {
            if (error as? StoreError)?.code == .writerBusy && monitor.locked({ stopRequested }) {
                monitor.locked {  // asked to stop before it had a store: nothing to close
                    _state = .stopped
                    _stoppedWaiting = true
                }
                return
            }
            fail("cannot open store \(path): \(error)", store: nil)
            return waitForStop()
        }
        if let refusal = store.refusal {
            fail("\(refusal)", store: store)
            return waitForStop()
        }
        store.onCheckpointFailure = { [weak self, options] problem in
            self?.monitor.locked { self?._checkpointProblem = "\(problem)" }
            options.onCheckpointFailure?("\(problem)")
        }
        store.onCheckpointRecovered = { [weak self, options] seq in
            self?.monitor.locked { self?._checkpointProblem = nil }
            options.onCheckpointRecovered?(seq)
        }
        store.wantsDeliveries = true  // the record stream carries every delivery, whatever a request prints
        store.serveReaders()  // queries on other threads read each durable commit, checkpointed or not
        let config = store.world.config
        let window = RecordWindow(
            capacity: options.streamWindow, maxBytes: options.streamWindowBytes, nextSeq: store.committedSeq + 1)
        monitor.locked {
            _store = store
            _config = config
            _window = window
            _committedSeq = store.committedSeq
            _checkpointSeq = store.checkpoint.seq
            _sourcePosition = store.sourcePosition
            _state = .ready
        }
        // Group commits are pipelined: while one group's transaction is written and fsynced on the store's
        // committer thread, this thread decides the next group; a group is answered once durable, in order.
        var inFlight: Group?
        while true {
            // Idle (no group in flight): a checkpoint the quiet would otherwise hold back (`checkpointIfIdle`),
            // and a wait for submissions no longer than until it is due or done.
            let idleWaitMs = inFlight == nil ? store.checkpointIfIdle() : nil
            let (batch, confirmed, stopping): ([Submission], [UInt64], Bool) = monitor.locked {
                // With a group in flight, take what is queued without waiting (nothing: finish that group).
                if inFlight == nil {
                    let ready = { !self.queue.isEmpty || self.stopRequested || !self.published.isEmpty }
                    if let idleWaitMs { _ = monitor.wait(until: ready, timeoutMs: idleWaitMs) } else { monitor.wait(until: ready) }
                }
                defer {
                    queue.removeAll()
                    published.removeAll()
                }
                return (queue, published, stopRequested)
            }
            if let failure = monitor.locked({ failedState }) {
                // A group failed (the store, or a decision's read of it): nothing more is decided or
                // committed — the failed group's ops may still be pending in the store, and committing them
                // with a later group would make durable what was answered as failed. The group in flight, if
                // any, is answered as its commit went; what was queued gets the failure.
                if let previous = inFlight { finishGroup(previous, store: store, window: window) }
                inFlight = nil
                window.close()
                for submission in batch { submission.fail(failure) }
                if stopping && monitor.locked({ queue.isEmpty }) { break }
                continue
            }
            store.stagePublished(confirmed)
            if !batch.isEmpty {
                for whole in Self.groups(of: batch, batchSize: options.batchSize) {
                    var part = whole[...]
                    // A group ends early once its records reach `maxGroupRecordBytes`; the rest makes more.
                    while let first = part.first {
                        if let failure = monitor.locked({ failedState }) {
                            for submission in part { submission.fail(failure) }
                            break
                        }
                        if let previous = inFlight, first.lines.count >= options.batchSize {
                            // A submission this large commits part of itself while it is decided, which would
                            // finish the commit in flight on the way: answer that group first, by its own commit.
                            finishGroup(previous, store: store, window: window)
                            inFlight = nil
                        }
                        let (group, taken) = startGroup(Array(part), store: store)
                        part = part.dropFirst(taken)
                        if let previous = inFlight { finishGroup(previous, store: store, window: window) }
                        inFlight = group.flatMap { beginCommit($0, store: store, window: window) }
                    }
                }
            } else {
                if let previous = inFlight { finishGroup(previous, store: store, window: window) }
                inFlight = nil
                if store.hasStagedSource {
                    do { try store.commit() } catch {
                        monitor.locked { _state = .failed("\(error)") }
                        window.close()
                    }
                }
            }
            // A checkpoint that has finished drops the records readers no longer need from memory.
            let checkpointSeq = store.pollCheckpoint()
            monitor.locked { _checkpointSeq = max(_checkpointSeq, checkpointSeq) }
            if stopping && inFlight == nil && monitor.locked({ queue.isEmpty }) { break }
        }
        // A clean stop: what was queued is answered above; the last checkpoint brings the projections to
        // the head so the next open replays nothing.
        window.close()
        store.close()
        monitor.locked {
            if case .ready = _state { _state = .stopped }
            _store = nil
        }
    }

    /// A group of submissions decided and applied, its commit started or about to be, waiting to be
    /// answered once durable.
    private final class Group {
        final class Output {
            /// The records the submission's `emit` asks for, in order.
            var records: [Record] = []
            /// A stream input's outbox entry, encoded.
            var outbox: [UInt8] = []
            /// Bytes of the output records kept, and those left out past the submission's cap.
            var outputBytes = 0
            var omittedOutputs = 0
            var omittedFromSeq: UInt64?
        }
        /// The submissions it answers (those a group decided before its records reached the bound).
        var batch: [Submission]
        var processors: [(Processor, Output)] = []
        /// The estimated bytes of the records it holds.
        var recordBytes = 0
        /// Records of each seq for the record stream.
        var byEvent: [UInt64: [Record]] = [:]
        /// Seqs the group's events took: `first ... last` (none when `last < first`).
        var first: UInt64 = 0
        var last: UInt64 = 0
        var report = CommitReport()
        var commitStarted = 0.0
        private let alive: GroupCount

        init(batch: [Submission], alive: GroupCount) {
            self.batch = batch
            self.alive = alive
            alive.add(1)
        }

        deinit { alive.add(-1) }

        /// Lets the group go once answered: each processor's observer captures the group (its report and
        /// records), so the group and the processors it holds would otherwise keep each other — and every
        /// record of the group — alive for good.
        func release() {
            for (processor, _) in processors { processor.observer = nil }
            processors = []
            byEvent = [:]
        }
    }

    /// Groups not yet freed (a test checks that answered groups go).
    final class GroupCount: @unchecked Sendable {
        private let monitor = Monitor()
        private var value = 0
        func add(_ n: Int) { monitor.locked { value += n } }
        var count: Int { monitor.locked { value } }
    }

    private let groupCount = GroupCount()

    /// Groups of submissions decided and not yet freed: those in flight (at most two once answered ones
    /// are gone). A number that grows with the submissions answered is a leak.
    public var liveGroups: Int { groupCount.count }

    /// Runs each submission of a group through a processor of its own (same decisions and records as the
    /// CLI's), until its records reach `maxGroupRecordBytes` (at least one submission): the group and how
    /// many of `batch` it took. `nil` when the store failed (every submission of `batch` is answered with
    /// that).
    private func startGroup(_ batch: [Submission], store: Store) -> (Group?, taken: Int) {
        let group = Group(batch: batch, alive: groupCount)
        group.first = store.world.lastSeq + 1
        var taken = 0
        do {
            for submission in batch {
                var outbox = OutboxRecords()
                var processorOptions = Processor.Options()
                processorOptions.emit = .none  // the observer keeps the records; nothing is encoded here
                processorOptions.batchSize = options.batchSize
                let output = Group.Output()
                let processor = Processor(store: store, options: processorOptions) { _ in }
                store.wantsDeliveries = true
                let emit = submission.emit
                let cap = submission.maxOutputBytes
                let fromSource = submission.source != nil
                processor.observer = { record, seq in
                    let size = record.estimatedSize
                    group.recordBytes += size
                    if fromSource { outbox.append(record) }
                    switch record {
                    case .rejected(_, _, let code, _):
                        group.report.rejected[code, default: 0] += 1
                        if emit != .none { output.records.append(record) }
                        return
                    case .duplicate:
                        group.report.duplicates += 1
                        if emit != .none { output.records.append(record) }
                        return
                    case .event:
                        group.report.accepted += 1
                        if emit != .none { output.records.append(record) }
                    case .output:
                        if emit == .all {
                            if let cap, output.omittedOutputs > 0 || output.outputBytes + size > cap {
                                output.omittedOutputs += 1
                                if output.omittedFromSeq == nil { output.omittedFromSeq = seq }
                            } else {
                                output.outputBytes += size
                                output.records.append(record)
                            }
                        }
                    }
                    if let seq { group.byEvent[seq, default: []].append(record) }
                }
                group.processors.append((processor, output))
                for line in submission.lines { try processor.process(line) }
                group.report.lines += processor.summary.lines
                if let position = submission.source {
                    // Staged before any later commit, so the position and the records are written in the
                    // transaction that makes this input's events durable (one line: never split).
                    let encoded = outbox.encoded
                    store.stageSource(position: position, outbox: [(position, encoded)])
                    output.outbox = encoded
                }
                taken += 1
                if group.recordBytes >= options.maxGroupRecordBytes { break }
            }
        } catch {
            failGroup(group, store: store, error: error)
            return (nil, batch.count)
        }
        group.batch = Array(batch[..<taken])
        group.report.submissions = taken
        group.last = store.world.lastSeq
        return (group, taken)
    }

    /// Starts the group's commit on the store's committer thread (a previous group's is finished first).
    private func beginCommit(_ group: Group, store: Store, window: RecordWindow) -> Group? {
        group.commitStarted = MonotonicClock.seconds()
        do { try store.beginCommit() } catch {
            failGroup(group, store: store, error: error)
            window.close()
            return nil
        }
        return group
    }

    /// Waits until the group is durable, then publishes its records to the stream and answers each
    /// submission.
    private func finishGroup(_ group: Group, store: Store, window: RecordWindow) {
        do {
            try store.finishCommit()
        } catch {
            failGroup(group, store: store, error: error)
            window.close()
            return
        }
        var report = group.report
        report.commitSeconds = MonotonicClock.seconds() - group.commitStarted
        if group.last >= group.first {
            let byEvent = group.byEvent
            window.publish((group.first...group.last).map { RecordWindow.Entry(seq: $0, records: byEvent[$0] ?? []) })
        }
        monitor.locked {
            _committedSeq = max(_committedSeq, group.last)
            _checkpointSeq = max(_checkpointSeq, store.checkpoint.seq)
            _sourcePosition = store.sourcePosition
        }
        report.checkpointLag = group.last - min(group.last, store.checkpoint.seq)
        report.workingSet = store.workingSetStats
        (report.windowEvents, report.windowBytes) = window.retained
        onCommit(report)
        let outputs = group.processors.map(\.1)
        group.release()
        for (submission, output) in zip(group.batch, outputs) {
            switch submission.reply {
            case .answer(let done):
                done(
                    .success(
                        Answer(
                            records: output.records, omittedOutputs: output.omittedOutputs,
                            omittedFromSeq: output.omittedFromSeq)))
            case .outbox(let done): done(.success(output.outbox))
            }
        }
    }

    /// The store failed with `error` while the group was decided or committed: nothing more is written,
    /// and every submission of the group is told.
    private func failGroup(_ group: Group, store: Store, error: any Error) {
        // A running server cannot resume by itself: its store refuses every later write.
        let failure = Failure(
            code: .storeFailed,
            message: "\(error). This server writes nothing more until it is restarted (its log is intact: the "
                + "restart replays it), and /healthz answers 503 meanwhile")
        monitor.locked { _state = .failed(failure.message) }
        group.release()
        for submission in group.batch { submission.fail(failure) }
    }

    private func fail(_ message: String, store: Store?) {
        store?.close()
        monitor.locked { _state = .failed(message) }
    }

    /// After a failed open: answers whatever comes until `stop`.
    private func waitForStop() {
        while true {
            let (batch, stopping): ([Submission], Bool) = monitor.locked {
                monitor.wait { !queue.isEmpty || stopRequested }
                defer { queue.removeAll() }
                return (queue, stopRequested)
            }
            let failure = monitor.locked { refusal } ?? Failure(code: .storeFailed, message: "store failed")
            for s in batch { s.fail(failure) }
            if stopping { return }
        }
    }
}
