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
/// each group grows. A caller that needs the stored projections to reach a seq (read your writes) asks
/// for it with `whenProjections(reach:)`: the thread writes one checkpoint for every such caller of a
/// loop. Queries themselves run on the caller's thread (`Store.readStoredProjections`).
public final class WriterService: @unchecked Sendable {
    /// Settings.
    public struct Options: Sendable {
        /// How to open the store.
        public var store = Store.Options()
        /// A single submission with more ops than this is committed in several transactions.
        public var batchSize = 10_000
        /// Seqs of records kept for the record stream.
        public var streamWindow = 65_536
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
    }

    /// The state of the service.
    public enum State: Sendable, Equatable {
        case opening, ready, failed(String), stopped
    }

    private struct Submission {
        var lines: [ParsedLine]
        var emit: Processor.Emit
        /// A stream input's position: its records go to the outbox with it (`submit(_:source:done:)`).
        var source: UInt64? = nil
        var done: @Sendable (Result<[UInt8], Failure>) -> Void
    }

    private struct Waiter {
        var seq: UInt64
        var done: @Sendable (Result<Void, Failure>) -> Void
    }

    public let path: String
    public let options: Options
    /// Called on the writer's thread after each group commit.
    public let onCommit: @Sendable (CommitReport) -> Void
    private let monitor = Monitor()
    private var queue: [Submission] = []
    private var waiters: [Waiter] = []
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
        thread = startThread { [self] in run() }
        if thread == nil { monitor.locked { _state = .failed("cannot start the writer thread") } }
    }

    /// Opening, ready, failed (with why) or stopped.
    public var state: State { monitor.locked { _state } }

    /// The store once open. Other threads may only use what is safe beside the writer: reads of the stored
    /// projections and of the log, `status`.
    public var store: Store? { monitor.locked { _store } }

    /// The store's settings (read at open; the defaults until then).
    public var config: Config { monitor.locked { _config } }

    /// The records of recent committed events, once the store is open.
    public var window: RecordWindow? { monitor.locked { _window } }

    /// The last durable seq: every submission answered so far is at or below it.
    public var committedSeq: UInt64 { monitor.locked { _committedSeq } }

    /// The seq of the last checkpoint the writer knows complete (the projections on disk are at least there).
    public var checkpointSeq: UInt64 { monitor.locked { _checkpointSeq } }

    /// Queues lines (already parsed off this thread) for the next group commit; `done` gets their SPEC §4
    /// records as JSON Lines (those `emit` asks for) once they are durable, or why not. Called on the
    /// writer's thread: it must not block.
    public func submit(
        _ lines: [ParsedLine], emit: Processor.Emit, done: @escaping @Sendable (Result<[UInt8], Failure>) -> Void
    ) {
        let refused: Failure? = monitor.locked {
            if let failure = refusal { return failure }
            queue.append(Submission(lines: lines, emit: emit, done: done))
            monitor.broadcast()
            return nil
        }
        if let refused { done(.failure(refused)) }
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
            queue.append(Submission(lines: [line], emit: .none, source: position, done: done))
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

    /// The committed outbox entries after `position` (records committed but not confirmed published).
    public func unpublished(after position: UInt64 = 0) throws -> [(position: UInt64, records: OutboxRecords)] {
        guard let store else { return [] }
        return try store.outboxEntries(after: position).map { ($0.0, try OutboxRecords(decoding: $0.1)) }
    }

    /// Calls `done` once the stored projections are at `seq` or past it (at once when they are), having the
    /// writer's thread write a checkpoint when they are behind.
    public func whenProjections(reach seq: UInt64, _ done: @escaping @Sendable (Result<Void, Failure>) -> Void) {
        let answer: Result<Void, Failure>? = monitor.locked {
            if _checkpointSeq >= seq { return .success(()) }
            if let failure = refusal { return .failure(failure) }
            waiters.append(Waiter(seq: seq, done: done))
            monitor.broadcast()
            return nil
        }
        if let answer { done(answer) }
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
            store = try Store(path: path, options: options.store)
        } catch {
            fail("cannot open store \(path): \(error)", store: nil)
            return waitForStop()
        }
        if let refusal = store.refusal {
            fail("\(refusal)", store: store)
            return waitForStop()
        }
        store.wantsDeliveries = true  // the record stream carries every delivery, whatever a request prints
        let config = store.world.config
        let window = RecordWindow(capacity: options.streamWindow, nextSeq: store.committedSeq + 1)
        monitor.locked {
            _store = store
            _config = config
            _window = window
            _committedSeq = store.committedSeq
            _checkpointSeq = store.checkpoint.seq
            _sourcePosition = store.sourcePosition
            _state = .ready
        }
        // Queries waiting for the projections: served by checkpoints written on the store's checkpointer
        // thread while this one goes on with the next group (a commit never waits for a checkpoint).
        var waiting: [Waiter] = []
        while true {
            let (batch, arrived, confirmed, stopping): ([Submission], [Waiter], [UInt64], Bool) = monitor.locked {
                monitor.wait {
                    !queue.isEmpty || !waiters.isEmpty || stopRequested || !waiting.isEmpty || !published.isEmpty
                }
                defer {
                    queue.removeAll()
                    waiters.removeAll()
                    published.removeAll()
                }
                return (queue, waiters, published, stopRequested)
            }
            waiting += arrived
            store.stagePublished(confirmed)
            if !batch.isEmpty {
                commitGroup(batch, store: store, window: window)
            } else if store.hasStagedSource {
                do { try store.commit() } catch {
                    let failure = Failure(code: .storeFailed, message: "\(error)")
                    monitor.locked { _state = .failed(failure.message) }
                    window.close()
                    failWaiters(failure)
                }
            }
            if !waiting.isEmpty { waiting = serveWaiters(waiting, store: store) }
            if stopping && waiting.isEmpty && monitor.locked({ queue.isEmpty && waiters.isEmpty }) { break }
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

    /// Runs a group through one processor each, commits once, answers each.
    private func commitGroup(_ batch: [Submission], store: Store, window: RecordWindow) {
        final class Output {
            var bytes: [UInt8] = []
            /// With `emit` all: per record printed, in order, the seq it goes to the stream under (0: not
            /// streamed), so the stream reuses the printed bytes instead of encoding every record again.
            var seqs: [UInt64] = []
        }
        var report = CommitReport()
        report.submissions = batch.count
        let before = store.committedSeq
        var byEvent: [UInt64: [UInt8]] = [:]
        var writer = JSONWriter()
        var processors: [(Processor, Output)] = []
        var failure: Failure?
        do {
            for submission in batch {
                var outbox = OutboxRecords()
                var processorOptions = Processor.Options()
                processorOptions.emit = submission.emit
                processorOptions.batchSize = options.batchSize
                let output = Output()
                let processor = Processor(store: store, options: processorOptions) { output.bytes += $0 }
                store.wantsDeliveries = true
                let printsAll = submission.emit == .all
                let fromSource = submission.source != nil
                processor.observer = { record, seq in
                    if fromSource { outbox.append(record) }
                    switch record {
                    case .rejected(_, _, let code, _):
                        report.rejected[code, default: 0] += 1
                        if printsAll { output.seqs.append(0) }
                        return
                    case .duplicate:
                        report.duplicates += 1
                        if printsAll { output.seqs.append(0) }
                        return
                    case .event:
                        report.accepted += 1
                    case .output:
                        break
                    }
                    guard let seq else { return }
                    if printsAll { return output.seqs.append(seq) }
                    if fromSource, let json = outbox.entries.last?.json {
                        // Encoded once: the record stream takes the outbox's bytes.
                        byEvent[seq, default: []] += json
                        byEvent[seq, default: []].append(0x0A)
                        return
                    }
                    writer.bytes.removeAll(keepingCapacity: true)
                    record.write(into: &writer)
                    writer.bytes.append(0x0A)
                    byEvent[seq, default: []] += writer.bytes
                }
                processors.append((processor, output))
                for line in submission.lines { try processor.process(line) }
                report.lines += processor.summary.lines
                if let position = submission.source {
                    // Staged before any later commit, so the position and the records are written in the
                    // transaction that makes this input's events durable (one line: never split).
                    let encoded = outbox.encoded
                    store.stageSource(position: position, outbox: [(position, encoded)])
                    output.bytes = encoded
                }
            }
            let started = MonotonicClock.seconds()
            try store.commit()
            report.commitSeconds = MonotonicClock.seconds() - started
            for (processor, _) in processors { try processor.commit() }  // hands over each one's records
        } catch {
            failure = Failure(code: .storeFailed, message: "\(error)")
        }
        if let failure {
            monitor.locked { _state = .failed(failure.message) }
            window.close()
            for submission in batch { submission.done(.failure(failure)) }
            failWaiters(failure)
            return
        }
        let after = store.committedSeq
        for (_, output) in processors where !output.seqs.isEmpty {
            var start = 0
            var index = 0
            for (i, byte) in output.bytes.enumerated() where byte == 0x0A {
                let seq = index < output.seqs.count ? output.seqs[index] : 0
                if seq != 0 { byEvent[seq, default: []] += output.bytes[start...i] }
                start = i + 1
                index += 1
            }
            assert(index == output.seqs.count, "records printed \(index), observed \(output.seqs.count)")
        }
        if after > before {
            window.publish((before + 1...after).map { RecordWindow.Entry(seq: $0, lines: byEvent[$0] ?? []) })
        }
        monitor.locked {
            _committedSeq = after
            _checkpointSeq = max(_checkpointSeq, store.checkpoint.seq)
            _sourcePosition = store.sourcePosition
        }
        report.checkpointLag = after - min(after, store.checkpoint.seq)
        report.workingSet = store.workingSetStats
        onCommit(report)
        for (submission, (_, output)) in zip(batch, processors) { submission.done(.success(output.bytes)) }
    }

    /// Answers the waiters the projections have reached; for the others, starts a checkpoint of what is
    /// committed (unless one is being written) and, when no submission is queued meanwhile, waits for it.
    /// Returns the waiters still waiting.
    private func serveWaiters(_ waiting: [Waiter], store: Store) -> [Waiter] {
        if let refusal = store.refusal {
            let failure = Failure(code: .storeFailed, message: "\(refusal)")
            for w in waiting { w.done(.failure(failure)) }
            return []
        }
        var seq = store.pollCheckpoint()
        if waiting.contains(where: { $0.seq > seq }) {
            if !store.isCheckpointing { _ = store.startCheckpointOfCommitted() }
            if monitor.locked({ queue.isEmpty }) {
                store.finishCheckpoint()
                seq = store.checkpoint.seq
            }
        }
        if let error = store.lastCheckpointError, waiting.contains(where: { $0.seq > seq }) {
            // A checkpoint that fails loses nothing (the log has every op); the waiters are told.
            let failure = Failure(code: .storeFailed, message: "checkpoint failed: \(error)")
            for w in waiting { w.done(.failure(failure)) }
            return []
        }
        monitor.locked { _checkpointSeq = max(_checkpointSeq, seq) }
        var still: [Waiter] = []
        for w in waiting {
            if w.seq <= seq { w.done(.success(())) } else { still.append(w) }
        }
        return still
    }

    private func fail(_ message: String, store: Store?) {
        store?.close()
        monitor.locked { _state = .failed(message) }
    }

    private func failWaiters(_ failure: Failure) {
        let waiting: [Waiter] = monitor.locked {
            defer { waiters.removeAll() }
            return waiters
        }
        for w in waiting { w.done(.failure(failure)) }
    }

    /// After a failed open: answers whatever comes until `stop`.
    private func waitForStop() {
        while true {
            let (batch, waiting, stopping): ([Submission], [Waiter], Bool) = monitor.locked {
                monitor.wait { !queue.isEmpty || !waiters.isEmpty || stopRequested }
                defer {
                    queue.removeAll()
                    waiters.removeAll()
                }
                return (queue, waiters, stopRequested)
            }
            let failure = monitor.locked { refusal } ?? Failure(code: .storeFailed, message: "store failed")
            for s in batch { s.done(.failure(failure)) }
            for w in waiting { w.done(.failure(failure)) }
            if stopping { return }
        }
    }
}
