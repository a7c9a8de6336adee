public import TeamLog
public import TeamLogStore
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The batch processor: lines in, SPEC §4 records out, committing every `batchSize` ops.
///
/// A batch's records are handed to the sink only after its transaction committed, so nothing printed
/// is ever lost by a crash. A bad line becomes a `rejected` record and the run continues.
public final class Processor {
    /// How much of the output to produce (`--emit`).
    public enum Emit: String, Sendable, CaseIterable {
        case all, events, none
    }

    /// Settings of a run.
    public struct Options: Sendable {
        /// Ops per write transaction.
        public var batchSize: Int = 10_000
        /// Bytes of encoded records that also end a batch: its records wait in memory until it is durable,
        /// and a large team's records are megabytes each (10,000 ops of supergroups up to 200,000 members
        /// held 4.6 GB). Far above what ordinary batches print, so it changes nothing for them.
        public var maxBatchRecordBytes: Int = 64 << 20
        /// Which records to produce.
        public var emit: Emit = .all
        public init() {}
    }

    /// Counters of a run.
    public struct Summary: Sendable, Equatable {
        public var lines = 0
        public var accepted = 0
        public var rejected = 0
        public var duplicates = 0
        public var commits = 0
        /// The number of the last input line answered (0 before the first): where a stopped run ends.
        public var lastLine = 0
    }

    public let store: Store
    public let options: Options
    /// The processor's clock (ms) for ops without `ts`.
    private let clock: () -> Int64
    private let sink: ([UInt8]) throws -> Void
    private var out = JSONWriter()
    private var inBatch = 0
    /// Records of the batch the committer thread is writing (batch mode).
    private var inFlightOut: [UInt8] = []
    /// Batch and stream mode overlap a batch's write with the next batch's work; `commit()` (and the
    /// processors of the HTTP writer, which commits for them) commit in place.
    private var pipelined = false
    public private(set) var summary = Summary()
    /// A file ingest's input (as given) and the bytes of it before where reading began: each commit then
    /// records the input position its lines reach (`Store.stageInput`), which `ingest --resume` goes on
    /// from. `nil`: none is kept (standard input from a pipe, the HTTP server).
    public var input: (path: String, offset: UInt64)?
    /// The last line answered since the last commit, with its end offset and checksum: staged as the input
    /// position when the next commit starts (once per commit, not per line).
    private var answeredSinceCommit: (number: Int, endOffset: Int, checksum: UInt64)?
    /// Batch mode (`run`) calls this on the processing thread after each chunk of lines (512) with the
    /// input bytes consumed through the last line processed, for a progress display; stream mode does not.
    public var progress: ((_ inputBytes: Int) -> Void)?
    /// Sees every record a line produces, whatever `emit` prints (outputs only while the store
    /// `wantsDeliveries` for deliveries), with the seq of the event it belongs to (`nil` for `rejected`,
    /// the original seq for `duplicate`), as it is produced: before its batch is durable. The HTTP server
    /// keeps them until its commit returns, for its record stream and its metrics.
    public var observer: ((_ record: Record, _ seq: UInt64?) -> Void)?

    /// Processes into `store`; `sink` receives committed output bytes (JSON lines).
    public init(
        store: Store, options: Options = Options(), clock: @escaping () -> Int64 = Processor.wallClock,
        sink: @escaping ([UInt8]) throws -> Void
    ) {
        self.store = store
        self.options = options
        store.wantsDeliveries = options.emit == .all
        self.clock = clock
        self.sink = sink
    }

    /// Milliseconds since 1970 from the system clock.
    public static func wallClock() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Handles one input line.
    public func process(_ line: LineReader.Line) throws {
        try process(ParsedLine.parse(line))
    }

    /// Handles one input line that was already read and parsed.
    public func process(_ parsed: ParsedLine) throws {
        summary.lastLine = parsed.number
        if input != nil { answeredSinceCommit = (parsed.number, parsed.endOffset, parsed.checksum) }
        guard let result = parsed.result else { return }  // blank lines are not ops
        summary.lines += 1
        switch result {
        case .failure(let rejection):
            // A re-sent opId is answered as the first time whatever the line holds now, once the line is
            // JSON with a readable opId; a line failing its shape is otherwise not remembered.
            if let opId = parsed.opId, let outcome = try store.outcome(opId: opId) {
                answer(outcome, line: parsed.number, opId: opId)
            } else {
                reject(parsed.number, parsed.opId, rejection)
            }
        case .success(let op):
            try submit(op, line: parsed.number)
        }
    }

    /// Submits an already parsed op (line number for the records).
    public func submit(_ op: Op, line: Int) throws {
        switch try store.submit(op, now: clock()) {
        case .rejected(let rejection):
            reject(line, op.opId, rejection)
            if op.opId != nil { try countTowardBatch() }
        case .rejectedAfterSync(let rejection, let sync, let outputs):
            // The system event gets no `event` record (one per accepted op); its signals go out in log order.
            if let observer { for output in outputs { observer(.output(output), sync.seq) } }
            if options.emit == .all {
                for output in outputs { emit(.output(output)) }
            }
            reject(line, op.opId, rejection)
            try countTowardBatch()
        case .rejectedBefore(let rejection):
            answer(.rejected(rejection), line: line, opId: op.opId ?? "")
        case .duplicate(let seq):
            answer(.accepted(seq: seq), line: line, opId: op.opId ?? "")
        case .accepted(let event, let outputs):
            summary.accepted += 1
            let record = Record.event(line: line, seq: event.seq, ts: event.ts, op: op.name)
            if let observer {
                observer(record, event.seq)
                for output in outputs { observer(.output(output), event.seq) }
            }
            emit(record)
            if options.emit == .all {
                for output in outputs { emit(.output(output)) }
            }
            try countTowardBatch()
        }
    }

    /// The answer to an opId decided before: `duplicate`, or its first rejection.
    private func answer(_ outcome: OpIdOutcome, line: Int, opId: Id) {
        switch outcome {
        case .accepted(let seq):
            summary.duplicates += 1
            let record = Record.duplicate(line: line, opId: opId, seq: seq)
            observer?(record, seq)
            emit(record)
        case .rejected(let rejection):
            reject(line, opId, Rejection(rejection.code, rejection.reason + " (opId \(opId) was rejected before)"))
        }
    }

    private func countTowardBatch() throws {
        inBatch += 1
        if inBatch >= options.batchSize || out.bytes.count >= options.maxBatchRecordBytes {
            try pipelined ? startCommit(inPlace: false) : commit()
        }
    }

    /// The records of ops the caller made durable itself (a writer that commits the store for several
    /// processors at once): returned instead of handed to the sink, and forgotten.
    public func takeOutput() -> [UInt8] {
        precondition(inFlightOut.isEmpty, "takeOutput in batch mode")
        inBatch = 0
        defer { out.bytes.removeAll(keepingCapacity: true) }
        return out.bytes
    }

    /// Commits what is pending and hands its records to the sink.
    public func commit() throws {
        try startCommit(inPlace: true)
        try finishInFlight()
    }

    /// Commits what is pending, in place or (batch mode) on the committer thread while this one goes on
    /// with the next batch. The batch's records wait in `inFlightOut` and reach the sink once it is
    /// durable, before any later batch's.
    private func startCommit(inPlace: Bool) throws {
        try finishInFlight()
        // The input position goes with the commit that holds its lines' events (the store commits only
        // when this processor asks). A batch of rejections alone commits too when it moves the position:
        // a resumed run starts after them instead of answering them again.
        var movesInput = false
        if let input, let answered = answeredSinceCommit {
            store.stageInput(
                InputPosition(
                    offset: input.offset + UInt64(answered.endOffset), line: UInt64(answered.number),
                    lineChecksum: answered.checksum, path: input.path))
            answeredSinceCommit = nil
            movesInput = true
        }
        if store.pendingCount > 0 || movesInput {
            do { try inPlace ? store.commit() : store.beginCommit() } catch {
                out.bytes.removeAll(keepingCapacity: true)  // this batch's records: it did not commit
                throw error
            }
            summary.commits += 1
        }
        inBatch = 0
        swap(&inFlightOut, &out.bytes)
        out.bytes.removeAll(keepingCapacity: true)
    }

    /// Waits for the batch in flight, then prints its records — only if it committed: when the store
    /// failed (that batch or an earlier one), its records are dropped and the failure thrown.
    private func finishInFlight() throws {
        do { try store.finishCommit() } catch {
            inFlightOut.removeAll(keepingCapacity: true)
            throw error
        }
        if !inFlightOut.isEmpty {
            let bytes = inFlightOut
            inFlightOut.removeAll(keepingCapacity: true)
            try sink(bytes)
        }
    }

    /// Stream mode: reads a live feed, group-committing every `batchSize` ops or `flushMs` after the first
    /// uncommitted op, whichever comes first; each batch's records reach the sink only after its commit.
    /// Returns when the input ends or `stopRequested()` turns true (then every line already read is
    /// answered and committed).
    ///
    /// Three threads, as in batch mode: one reads and parses lines and hands them over as soon as the input
    /// has no further complete line; this one decides and applies them in input order; the store's
    /// committer writes and fsyncs a batch while this one goes on with the next. A batch's records are
    /// printed as soon as it is durable (looked for before every op, and every millisecond while input is
    /// idle). A batch whose time is up while the previous one is still being written keeps
    /// taking lines until that one is durable, then starts at once: one batch in flight, batches durable
    /// and printed in input order.
    public func follow(_ reader: LineReader, flushMs: Int, stopRequested: () -> Bool) throws {
        let pipeline = ParsePipeline(reader: reader, mode: .live, checksums: input != nil)
        try pipeline.start()
        pipelined = true
        // Lines wait behind each commit's encoding of what changed: a big team's dismiss is spread over a
        // few commits (`Store.commitEncodingLimit`).
        let encodingLimit = store.commitEncodingLimit
        store.commitEncodingLimit = Store.streamCommitEncodingLimit
        defer {
            pipelined = false
            store.commitEncodingLimit = encodingLimit
        }
        var deadline: Int64?  // when the open batch's commit is due
        var stopping = false
        do {
            loop: while true {
                if !stopping && stopRequested() {
                    stopping = true
                    pipeline.requestStop()
                }
                if try commitIfDue(&deadline) { continue }
                let now = MonotonicClock.milliseconds()
                var timeout = deadline.map { Int(max(0, $0 - now)) } ?? 100
                if store.isCommitting || !inFlightOut.isEmpty { timeout = min(timeout, 1) }
                if let d = deadline, now >= d { timeout = 1 }  // due, waiting for the batch in flight
                switch try pipeline.next(timeoutMs: timeout) {
                case .chunk(let chunk):
                    for parsed in chunk {
                        // Between two ops, not only between chunks: behind a slow op (a 2,000-member team
                        // dismissed: 5–15 ms) the rest of its chunk would wait for it before their batch
                        // commits and its records go out.
                        _ = try commitIfDue(&deadline)
                        try process(parsed)
                        if inBatch == 0 && out.bytes.isEmpty {
                            deadline = nil  // the batch just filled and started committing
                        } else if deadline == nil {
                            deadline = MonotonicClock.milliseconds() + Int64(flushMs)
                        }
                    }
                    pipeline.recycle(chunk)
                case .timeout:
                    // Idle: the checkpoint a commit would have started, so other processes' queries are
                    // not left behind by the last burst for as long as the feed stays quiet.
                    if deadline == nil && !store.isCommitting && inFlightOut.isEmpty { _ = store.checkpointIfIdle() }
                    continue
                case .end:
                    break loop
                }
            }
        } catch let error as LineReader.InputChanged {
            // The input ended where the file changed: what was read of it is answered and committed.
            pipeline.finish()
            try commit()
            throw error
        } catch {
            pipeline.finish()
            try? finishInFlight()  // what was committed before the failure is still printed
            throw error
        }
        pipeline.finish()
        try commit()
    }

    /// Stream mode, between two ops: prints the records of the batch in flight once it is durable, and
    /// starts the open batch's commit when its `deadline` has passed and no batch is in flight (then
    /// clears it); whether it started one.
    private func commitIfDue(_ deadline: inout Int64?) throws -> Bool {
        if store.commitIsDone { try finishInFlight() }  // the durable batch's records go out now
        guard let d = deadline, !store.isCommitting, MonotonicClock.milliseconds() >= d else { return false }
        try startCommit(inPlace: false)
        deadline = nil
        return true
    }

    /// Reads every line of `reader`, then commits. Reading and parsing run on a second thread, a few
    /// chunks ahead of this one, which decides and applies in input order; each full batch is written
    /// and fsynced by the store's committer thread while this one works on the next.
    ///
    /// When `stopRequested()` turns true (looked at between chunks, and every 200 ms while the input is
    /// quiet) the reading thread stops reading; every line it had read is still answered, committed and
    /// printed, as in stream mode (a producer on a pipe cannot send those again), and it returns false: the
    /// input after `summary.lastLine` was not read. True when it read the input to its end.
    @discardableResult
    public func run(_ reader: inout LineReader, stopRequested: () -> Bool = { false }) throws -> Bool {
        let pipeline = ParsePipeline(reader: reader, checksums: input != nil)
        try pipeline.start()
        pipelined = true
        defer { pipelined = false }
        var stopped = false
        do {
            reading: while true {
                if !stopped && stopRequested() {
                    stopped = true
                    pipeline.requestStop()
                }
                // In 200 ms steps, so a stop is seen while a pipe is quiet.
                switch try pipeline.next(timeoutMs: 200) {
                case .chunk(let chunk):
                    for parsed in chunk { try process(parsed) }
                    if let progress, let last = chunk.last { progress(last.endOffset) }
                    pipeline.recycle(chunk)
                case .timeout:
                    continue
                case .end:
                    break reading
                }
            }
        } catch {
            pipeline.finish()
            try? finishInFlight()  // what was committed before the failure is still printed
            throw error
        }
        pipeline.finish()
        try commit()
        return !stopped || pipeline.reachedEnd  // a stop after the last line was read stopped nothing
    }

    private func reject(_ line: Int, _ opId: Id?, _ rejection: Rejection) {
        summary.rejected += 1
        let record = Record.rejected(line: line, opId: opId, code: rejection.code, reason: rejection.reason)
        observer?(record, nil)
        emit(record)
    }

    private func emit(_ record: Record) {
        guard options.emit != .none else { return }
        record.write(into: &out)
        out.bytes.append(0x0A)
    }
}
