public import NATS
public import TeamLog
public import TeamLogRuntime
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#endif

/// One partition of a NATS deployment (`teamlog serve --nats … --partition p`): consumes
/// `teamlog.ops.<p>` into the store through the `WriterService`, publishes the records to
/// `teamlog.out.<p>.<kind>`, and answers `teamlog.q.<p>.*` queries.
///
/// **Exactly once, end to end.**
/// 1. A fetched message at stream sequence `s` is submitted with `source: s`; the writer commits its
///    events, its records (the outbox) and `s` as the store's source position in one LMDB transaction.
/// 2. Only after that commit are its records published, one NATS message each, with `Nats-Msg-Id`
///    `<p>:<s>:<n>`; once the stream confirmed them the input message is acked and the outbox entry
///    is deleted by a later commit.
/// 3. After a crash anywhere: the store holds exactly the inputs up to its source position. Opening it,
///    the worker first publishes every outbox entry still there (the stream drops ids it has), then
///    consumes from the durable consumer, acking without processing every redelivery at or below the
///    source position. So no op is applied twice, none is skipped, and no record is lost (durable before
///    it is sent) or duplicated (deterministic ids).
///
/// **Order.** A partition's log must be its subject's messages in stream order, and skipping "at or
/// below the position" is only sound if nothing after the position was skipped. A pull consumer
/// delivers new messages in order, but redeliveries (a dead instance's unacked messages, an ack later
/// than the ack wait) come back out of order. So the store's position, not the consumer's ack state, is
/// the truth — as Kafka Streams commits offsets with its state: at start the worker deletes the durable
/// consumer and creates it again starting at position + 1 (a dead instance's pending pulls and unacked
/// messages go with it), and if a redelivery of a message past the position ever arrives while running,
/// it lets everything in flight commit and seeks the same way again. A delivery can also be lost
/// outright: a fetch's answer that died with a NATS server, or messages the server sent to a fetch that
/// had already given up. The consumer counts them delivered, so the next message to arrive would be one
/// past them — applied before them, and they, redelivered later below the position, acked unapplied. So
/// the worker checks the consumer's delivery sequence, which counts every delivery of this consumer one
/// by one: a jump means deliveries were lost, and it seeks again from the position (`FetchCursor`).
///
/// Threads: one fetches and submits (the writer's thread decides and commits, group-committing
/// everything fetched meanwhile); one publishes and acks in commit order. At most `maxInFlight` inputs
/// are between fetch and ack, so a slow NATS slows consumption instead of growing memory.
public final class PartitionWorker: @unchecked Sendable {
    /// Settings.
    public struct Options: Sendable {
        public var partition = 0
        public var partitions = 1
        /// Messages asked for per fetch.
        public var fetchBatch = 512
        /// How long a fetch waits for messages.
        public var fetchTimeoutMs = 100
        /// Inputs submitted but not yet acked, at most.
        public var maxInFlight = 8_192
        /// Bytes of encoded records between commit and publish, at most (a team's delivery record grows
        /// with its members: 8,192 inputs of 1 MB records held 7 GB): fetching waits while over it.
        public var maxInFlightBytes = 256 << 20
        /// Replicas of the streams when this worker creates them.
        public var replicas = 1
        /// How long the server waits for an ack before redelivering.
        public var ackWaitMs = 30_000
        /// Attempts to set up streams and consumer at start (0.1 s, 0.2 s … 2 s apart: about 15 s for 12).
        public var startAttempts = 12
        /// The partition's lease (`PartitionLease`): renewed every third of this; another process waits
        /// this long (and a fifth) after a holder's last renewal before it takes the partition over.
        public var leaseMs = 10_000
        /// Told what the worker waits for at start (a lease another process held).
        public var onNotice: (@Sendable (String) -> Void)? = nil
        /// Whether a start that waits for the lease should give up (a stop asked meanwhile).
        public var shouldStopStarting: (@Sendable () -> Bool)? = nil
        public init() {}
    }

    /// Counters since start.
    public struct Stats: Sendable {
        /// Inputs submitted to the writer.
        public var consumed = 0
        /// Redeliveries at or below the committed source position, acked without processing.
        public var skipped = 0
        /// Records published (confirmed by the stream).
        public var published = 0
        /// Outbox entries found at start and published again.
        public var republishedAtStart = 0
        /// Records not published because the output stream already held them (`downstream`).
        public var alreadyDownstream = 0
        /// Queries answered.
        public var queries = 0
        /// Times the consumer was re-created at the committed position after an out-of-order redelivery.
        public var reseeks = 0
    }

    private struct Done {
        var position: UInt64
        var message: NATSMessage?
        var records: OutboxRecords
        /// The records as the writer handed them over, decoded by the publishing thread (off the writer's).
        var encoded: [UInt8]? = nil
    }

    public let options: Options
    private let connection: NATSConnection
    private let writer: WriterService
    private var js: JetStream?
    /// The last record of this partition on the output stream at start (`lastPublished`): records up to it
    /// are not published again. Set before consuming starts; read by the publishing thread only after.
    private var downstream: (position: UInt64, index: Int)?
    private var subscription: PullSubscription?
    private var lease: PartitionLease?
    private var querySubscription: NATSSubscription?
    private let monitor = Monitor()
    private var completed: [Done] = []
    private var inFlight = 0
    /// Bytes of the encoded records of `completed` and of the batch being published.
    private var inFlightBytes = 0
    /// Messages the consumer still had for this partition after the last fetch (`nil`: none fetched yet).
    private var lastPending: UInt64?
    private var stopping = false
    private var _failure: String?
    private var _stats = Stats()
    private var threads: [JoinableThread] = []

    /// A worker for `options.partition` over a `writer` that is ready (its store open).
    public init(connection: NATSConnection, writer: WriterService, options: Options) {
        self.connection = connection
        self.writer = writer
        self.options = options
    }

    /// Counters since start.
    public var stats: Stats { monitor.locked { _stats } }

    /// The messages its subject still held for it at its last fetch (its backlog; nil before the first
    /// fetch) and the inputs between fetch and ack now.
    public var backlog: (pending: UInt64?, inFlight: Int) { monitor.locked { (lastPending, inFlight) } }

    /// Whether it holds its lease, renewed recently enough to fetch.
    public var holdsLease: Bool { lease?.isValid ?? false }

    /// Why the worker stopped on its own (the store failed, or NATS refused for too long), if it did.
    public var failure: String? { monitor.locked { _failure } }

    /// Creates the streams when absent, publishes what the outbox still holds, subscribes, and starts
    /// consuming and answering queries.
    public func start() throws {
        let js = try connection.jetStream(maxPendingAsync: 65_536)
        self.js = js
        // A deployment of another size first: "already served" by its partition of the same number would
        // be the wrong reason (an operator's trial).
        if let partitioning = try? TeamLogSubjects.partitioning(js) {
            try partitioning.check(partitions: options.partitions)
        }
        try refuseIfAnotherInstanceServes()
        let lease = try takeLease(js)
        self.lease = lease
        // Renewed from now on: setting up may take a while on a cluster electing leaders.
        guard let renewer = startThread(name: "tl-lease", { [self] in leaseLoop() }) else {
            lease.release()
            throw ClusterError("cannot start the lease thread")
        }
        threads.append(renewer)
        do { try startConsuming(js) } catch {
            stop()  // the threads started so far, and the lease released: the next instance starts at once
            throw error
        }
    }

    /// Everything after the lease: streams, outbox, consumer, queries, threads.
    private func startConsuming(_ js: JetStream) throws {
        // A cluster that is still electing leaders (just started, or a node restarting) times out stream
        // and consumer requests for a few seconds: retried with a backoff, bounded by `startAttempts`.
        try retrying(options.startAttempts, "partition \(options.partition): setting up its streams and consumer") {
            try prepare(js)
        }
        querySubscription = try connection.subscribe("teamlog.q.\(options.partition).*") { [weak self] message in
            self?.answer(message)
        }
        guard let fetcher = startThread(name: "tl-fetch", { [self] in fetchLoop() }) else {
            throw ClusterError("cannot start the fetch thread")
        }
        threads.append(fetcher)
        guard let publisher = startThread(name: "tl-publish", { [self] in publishLoop() }) else {
            throw ClusterError("cannot start the publish thread")
        }
        threads.append(publisher)
    }

    /// The partition's lease, taken before anything of the partition is touched (`PartitionLease`).
    private func takeLease(_ js: JetStream) throws -> PartitionLease {
        let p = options.partition
        let lease = try retrying(options.startAttempts, "partition \(p): opening the lease bucket") {
            // As many copies as the deployment's op stream keeps (a route with --replicas 3 made it), so
            // losing one NATS node does not stop every partition's renewals.
            let replicas = max(options.replicas, (try? js.streamState(TeamLogSubjects.opsStream))??.replicas ?? 1)
            return try PartitionLease(js: js, partition: p, ttlMs: options.leaseMs, replicas: replicas)
        }
        try retrying(options.startAttempts, "partition \(p): taking its lease") {
            do {
                try lease.acquire(shouldStop: { options.shouldStopStarting?() ?? false }, waiting: { holder, ms in
                    options.onNotice?(
                        "partition \(p)'s lease is held by \(holder.map(\.description) ?? "another process"), which has "
                            + "not renewed it yet: waiting up to \((ms + 999) / 1_000) s for it to renew (then this one "
                            + "stops) or lapse")
                })
            } catch PartitionLease.Refusal.held(let holder) {
                throw alreadyServed(holder.map { " (\($0), which holds its lease)" } ?? "")
            } catch PartitionLease.Refusal.stopped {
                throw ClusterError(
                    "partition \(p): stopped while waiting for its lease (this one changed nothing)", permanent: true)
            }
        }
        return lease
    }

    /// Renews the lease every third of its TTL until the worker stops; a lease another process took
    /// stops the worker, one NATS does not answer for is tried again every half second (fetching pauses
    /// while it is not valid: `fetchLoop`). The lease is released when the worker stops.
    private func leaseLoop() {
        guard let lease else { return }
        var next = MonotonicClock.milliseconds() + Int64(lease.ttlMs / 3)
        var trouble = false  // the last renewal failed (said once per run of failures)
        while true {
            let stop: Bool = monitor.locked {
                _ = monitor.wait(
                    until: { stopping || _failure != nil },
                    timeoutMs: Int(max(0, next - MonotonicClock.milliseconds())))
                return stopping || _failure != nil
            }
            if stop { break }
            let renewal = lease.renew()
            switch renewal {
            case .renewed, .retaken:
                next = MonotonicClock.milliseconds() + Int64(lease.ttlMs / 3)
                if trouble {
                    trouble = false
                    options.onNotice?("partition \(options.partition): its lease is renewed again; fetching goes on")
                }
                if renewal == .retaken {
                    options.onNotice?(
                        "partition \(options.partition): its lease key was gone (deleted by hand?): taken again; the "
                            + "consumer is made again at the store's position before the next fetch")
                }
            case .unreachable(let why):
                next = MonotonicClock.milliseconds() + Int64(min(500, lease.ttlMs / 6))
                if !trouble {
                    trouble = true
                    options.onNotice?(
                        "partition \(options.partition): could not renew its lease (\(why)); it fetches nothing once the "
                            + "lease is no longer valid, until a renewal succeeds")
                }
            case .lost(let holder):
                monitor.locked {
                    _failure = "lost the partition's lease to \(holder.map(\.description) ?? "another process"), "
                        + "which serves it now: stopped fetching"
                    monitor.broadcast()
                }
                return
            }
        }
    }

    /// The streams, the outbox's leftovers published again, and the consumer at the store's position.
    private func prepare(_ js: JetStream) throws {
        try TeamLogSubjects.ensureStreams(js, partitions: options.partitions, replicas: options.replicas)
        let leftovers = try writer.unpublished()
        if !leftovers.isEmpty {
            var cursor = PublishCursor()
            do {
                try publish(leftovers.map { Done(position: $0.position, message: nil, records: $0.records) }, from: &cursor)
            } catch let tooLarge as RecordTooLarge {
                throw ClusterError("partition \(options.partition): \(tooLarge)", permanent: true)
            }
            writer.confirmPublished(leftovers.map(\.position))
            monitor.locked { _stats.republishedAtStart = leftovers.count }
        }
        downstream = try lastPublished(js)
        let subscription = try seek(after: writer.sourcePosition)
        monitor.locked { self.subscription = subscription }
    }

    /// The last record of this partition the output stream holds, as `(input position, index)` from its
    /// `Nats-Msg-Id`: the newest of the last message on each kind's subject.
    private func lastPublished(_ js: JetStream) throws -> (position: UInt64, index: Int)? {
        var last: (position: UInt64, index: Int)?
        for kind in Record.kinds {
            guard
                let message = try js.lastMessage(
                    stream: TeamLogSubjects.outStream, subject: TeamLogSubjects.out(options.partition, kind)),
                let id = message.headers["Nats-Msg-Id"]?.first.flatMap(TeamLogSubjects.parseOutMsgId),
                id.partition == options.partition
            else { continue }
            if last.map({ ($0.position, $0.index) < (id.position, id.index) }) ?? true { last = (id.position, id.index) }
        }
        return last
    }

    /// A second process serving this partition (on another store) would delete and recreate the durable
    /// consumer under the first, and the two would take turns answering queries — the one behind stale, and
    /// able to stall while its status said caught up (an operator's trial). Before touching anything, the
    /// partition's status subject is asked: an answer is a live instance, and this one refuses to start.
    /// (Two instances starting in the same second can both find none: a supervisor runs one per partition.)
    private func refuseIfAnotherInstanceServes() throws {
        let subject = TeamLogSubjects.query(options.partition, "status")
        guard let answer = try? connection.request(subject, [], timeoutMs: 1_000) else { return }  // none: go on
        let status = try? JSONParser.parse(answer.data)
        let pid = status?["writerPid"]?.intValue.map { " (its writer pid \($0))" } ?? ""
        let position = status?["sourcePosition"]?.intValue.map { ", at stream position \($0)" } ?? ""
        throw alreadyServed(pid + position)
    }

    /// The refusal of a start whose partition another process serves (`detail`: what is known of it).
    private func alreadyServed(_ detail: String) -> ClusterError {
        ClusterError(
            "partition \(options.partition) of \(options.partitions) is already served by another process\(detail): "
                + "one process per partition — stop it first (this one changed nothing)", permanent: true)
    }

    /// (Re)creates the durable consumer so it delivers this partition's subject from `position` + 1, in
    /// order, with nothing pending.
    private func seek(after position: UInt64) throws -> PullSubscription {
        guard let js else { throw ClusterError("not started") }
        let p = options.partition
        do { try js.deleteConsumer(stream: TeamLogSubjects.opsStream, durable: TeamLogSubjects.durable(p)) } catch let
            error as NATSError where error.code == .notFound
        {}
        return try js.pullSubscribe(
            stream: TeamLogSubjects.opsStream, subject: TeamLogSubjects.ops(p), durable: TeamLogSubjects.durable(p),
            startSequence: position + 1, ackWaitMs: options.ackWaitMs,
            maxAckPending: max(options.maxInFlight * 2, 1_000))
    }

    /// Waits until nothing is in flight (every submitted input committed, published and acked).
    private func drain() {
        monitor.locked { monitor.wait { inFlight == 0 || _failure != nil } }
    }

    /// Stops fetching, lets every submitted input commit, publish and ack, and returns. Unfetched
    /// messages stay in the stream for the next start.
    public func stop() {
        monitor.locked {
            stopping = true
            monitor.broadcast()
        }
        for thread in threads { thread.join() }
        threads = []
        querySubscription = nil
        lease?.release()  // the next instance starts at once
    }

    // MARK: - Consuming

    /// What the fetch loop does with a message.
    enum FetchAction: Equatable {
        /// At or below the committed position: done before, ack it.
        case ackDone
        /// At or below the last submitted position: in flight, acked after its commit.
        case inFlight
        /// Let what is in flight commit and seek again from the committed position.
        case reseek
        /// The next input: submit it.
        case submit
    }

    /// The fetch loop's bookkeeping: the last position submitted and the consumer's delivery sequence of
    /// the last message taken (0: none since the consumer was made).
    struct FetchCursor {
        var submitted: UInt64
        var lastDelivery: UInt64 = 0

        /// What to do with a message at stream sequence `position`, delivered `deliveredCount` times, the
        /// consumer's `delivery`-th delivery (`nil` when unknown). A redelivery past the submitted position
        /// may be out of order, and a delivery more than one past the last means deliveries were lost:
        /// either way, seek again. Only a message not sent back to a seek counts as taken, so a seek that
        /// fails leaves the gap in view and the next message asks again.
        mutating func take(position: UInt64, deliveredCount: UInt64, delivery: UInt64?, committed: UInt64)
            -> FetchAction
        {
            let action: FetchAction
            // First: a lost delivery can only be made good by delivering again, whatever this message is
            // (one done before would otherwise carry the count past the gap, unnoticed).
            if let delivery, delivery > lastDelivery + 1 {
                action = .reseek
            } else if position <= committed {
                action = .ackDone
            } else if position <= submitted {
                action = .inFlight
            } else if deliveredCount > 1 {
                action = .reseek
            } else {
                action = .submit
                submitted = position
            }
            if action != .reseek, let delivery { lastDelivery = max(lastDelivery, delivery) }
            return action
        }

        /// A new consumer now delivers from `position` + 1, its deliveries counted from 1.
        mutating func sought(after position: UInt64) {
            submitted = position
            lastDelivery = 0
        }
    }

    private func fetchLoop() {
        var cursor = FetchCursor(submitted: writer.sourcePosition)
        var failures = 0
        var leaseEpoch = lease?.epoch ?? 0
        while true {
            let stop: Bool = monitor.locked {
                monitor.wait {
                    stopping || _failure != nil
                        || (inFlight < options.maxInFlight && inFlightBytes < options.maxInFlightBytes)
                }
                return stopping || _failure != nil
            }
            if stop { break }
            if let lease {
                // Not sure of the lease (renewals unanswered): fetch nothing until a renewal succeeds.
                if !lease.isValid {
                    usleep(20_000)
                    continue
                }
                // Taken again after its key was lost: another process may have moved the consumer meanwhile.
                if lease.epoch != leaseEpoch {
                    drain()
                    do {
                        let fresh = try seek(after: writer.sourcePosition)
                        monitor.locked { self.subscription = fresh }
                        cursor.sought(after: writer.sourcePosition)
                        leaseEpoch = lease.epoch
                        monitor.locked { _stats.reseeks += 1 }
                    } catch {
                        waitBeforeRetry(3)
                    }
                    continue
                }
            }
            guard let subscription = monitor.locked({ self.subscription }) else { break }
            let messages: [NATSMessage]
            do {
                messages = try subscription.fetch(batch: options.fetchBatch, timeoutMs: options.fetchTimeoutMs)
                failures = 0
                if let last = messages.last {
                    monitor.locked { lastPending = last.pendingCount }
                } else {
                    monitor.locked { lastPending = 0 }  // a fetch that waited and got nothing: none pending
                }
            } catch {
                // NATS away (a node restarting, a leader election): retried with a backoff; the consumer's
                // position is on the server, so nothing is skipped. A connection that gave up reconnecting
                // (a client that does not reconnect forever) never comes back: that is the worker's failure
                // (the server exits 3 and its supervisor restarts it), not a retry loop that consumes nothing.
                if connection.isClosed {
                    monitor.locked {
                        _failure = "the NATS connection is closed (reconnects exhausted): \(error)"
                        monitor.broadcast()
                    }
                    break
                }
                failures += 1
                waitBeforeRetry(min(failures, 5))
                continue
            }
            let committed = writer.sourcePosition
            messages: for message in messages {
                guard let position = message.streamSequence else { continue }
                let action = cursor.take(
                    position: position, deliveredCount: message.deliveredCount ?? 1,
                    delivery: message.consumerSequence, committed: committed)
                switch action {
                case .ackDone:
                    try? subscription.ack(message)  // done before; only its ack was lost
                    monitor.locked { _stats.skipped += 1 }
                case .inFlight:
                    break  // redelivered while in flight: acked after its commit
                case .reseek:
                    // Out of order, or deliveries lost: let what is in flight finish, then deliver again, in
                    // order, from the committed position (a new consumer: its deliveries count from 1). If the
                    // seek fails, the cursor still stands before the gap, so the next message asks again.
                    drain()
                    do {
                        let fresh = try seek(after: writer.sourcePosition)
                        monitor.locked { self.subscription = fresh }
                        cursor.sought(after: writer.sourcePosition)
                        monitor.locked { _stats.reseeks += 1 }
                    } catch {
                        waitBeforeRetry(3)
                    }
                    break messages
                case .submit:
                    // Records of the inputs before may be large (a big team's delivery): over the byte bound,
                    // wait for the publisher before handing over more.
                    let go: Bool = monitor.locked {
                        monitor.wait { stopping || _failure != nil || inFlightBytes < options.maxInFlightBytes }
                        return _failure == nil
                    }
                    guard go else { break messages }
                    monitor.locked {
                        inFlight += 1
                        _stats.consumed += 1
                    }
                    writer.submit(Self.parse(message), source: position) { [self] result in
                        monitor.locked {
                            switch result {
                            case .success(let bytes):
                                inFlightBytes += bytes.count
                                completed.append(
                                    Done(position: position, message: message, records: OutboxRecords(), encoded: bytes))
                            case .failure(let failure):
                                _failure = "the store failed: \(failure)"
                            }
                            monitor.broadcast()
                        }
                    }
                }
            }
        }
    }

    /// The input line a message carries: its line number from the router's header, a line over the
    /// limit as such (the router did not forward it).
    public static func parse(_ message: NATSMessage) -> ParsedLine {
        let number = message.headers[TeamLogSubjects.lineHeader]?.first.flatMap { Int($0) } ?? 1
        if let length = message.headers[TeamLogSubjects.tooLongHeader]?.first.flatMap({ Int($0) }) {
            return ParsedLine.parse(.tooLong(number: number, length: length))
        }
        return ParsedLine.parse(.text(number: number, bytes: message.data))
    }

    // MARK: - Publishing

    /// Records published before waiting for the stream's acks, and their bytes (libnats keeps each
    /// until its ack: 1,024 records of a large team's deliveries are gigabytes).
    static let publishWindow = 1_024
    static let publishWindowBytes = 32 << 20

    private func publishLoop() {
        while true {
            let (taken, stop): ([Done], Bool) = monitor.locked {
                monitor.wait { !completed.isEmpty || _failure != nil || (stopping && inFlight == 0) }
                defer { completed.removeAll(keepingCapacity: true) }
                return (completed, completed.isEmpty)
            }
            if stop { break }
            var batch = taken
            let batchBytes = taken.reduce(0) { $0 + ($1.encoded?.count ?? 0) }
            defer {
                monitor.locked {
                    inFlightBytes -= batchBytes
                    monitor.broadcast()
                }
            }
            do {
                for i in batch.indices {
                    guard let bytes = batch[i].encoded else { continue }
                    batch[i].records = try OutboxRecords(decoding: bytes)
                    batch[i].encoded = nil
                }
            } catch {
                monitor.locked {
                    _failure = "cannot read the records of an input: \(error)"
                    monitor.broadcast()
                }
                break
            }
            var attempt = 0
            var cursor = PublishCursor()
            while true {
                attempt += 1
                do {
                    try publish(batch, from: &cursor)
                    break
                } catch let tooLarge as RecordTooLarge {
                    // Never publishable as it is: the partition stops and says why (retrying it re-sent the
                    // records before it every ten minutes, past the stream's de-duplication window).
                    monitor.locked {
                        _failure = tooLarge.description
                        monitor.broadcast()
                    }
                    return
                } catch {
                    // The records are in the outbox: a stop now loses nothing (the next start publishes them).
                    if monitor.locked({ stopping }) && attempt >= 3 {
                        monitor.locked {
                            inFlight -= batch.count
                            monitor.broadcast()
                        }
                        return
                    }
                    waitBeforeRetry(min(attempt, 5))
                }
            }
            if let subscription = monitor.locked({ self.subscription }) {
                for done in batch { if let message = done.message { try? subscription.ack(message) } }
            }
            writer.confirmPublished(batch.map(\.position))
            monitor.locked {
                inFlight -= batch.count
                _stats.published += batch.reduce(0) { $0 + $1.records.entries.count }
                monitor.broadcast()
            }
        }
    }

    /// The largest message body this partition sends: the server's `max_payload`, less a margin for the
    /// headers (a record's message id), which count toward it too.
    private var payloadLimit: Int { connection.maxPayload - 512 }

    /// Where publishing a batch stands: every record before it is confirmed by the stream, so a publish
    /// tried again after a failure starts there (the stream's de-duplication window is ten minutes; a
    /// retry after a longer outage would otherwise store the confirmed ones again).
    struct PublishCursor {
        var done = 0
        var entry = 0
    }

    /// A record the NATS server cannot take as one message.
    struct RecordTooLarge: Error, CustomStringConvertible {
        var partition: Int
        var position: UInt64
        var kind: String
        var bytes: Int
        var maxPayload: Int
        var description: String {
            "a \(kind) record of \(bytes) bytes (of the input at stream position \(position)) is over the NATS server's "
                + "max_payload (\(maxPayload) bytes): raise max_payload in nats-server's configuration (at most 64 MB, "
                + "e.g. `max_payload: 16MB`; a large team's records grow with its members) and restart partition "
                + "\(partition) — the record stays in the store's outbox and is published then, once (docs/nats.md, "
                + "\"Records and max_payload\")"
        }
    }

    /// Publishes the records of `batch` from `cursor` under their deterministic ids and waits for the
    /// stream's confirmations, moving `cursor` past each window the stream confirmed. A record over the
    /// server's `max_payload` throws `RecordTooLarge` before anything of the batch is sent.
    private func publish(_ batch: [Done], from cursor: inout PublishCursor) throws {
        guard let js else { return }
        let p = options.partition
        let limit = payloadLimit
        for done in batch[cursor.done...] {
            for entry in done.records.entries where entry.json.count > limit {
                throw RecordTooLarge(
                    partition: p, position: done.position, kind: entry.kind, bytes: entry.json.count,
                    maxPayload: connection.maxPayload)
            }
        }
        // At most `publishWindow` publishes wait for their acks at a time, far under the library's own
        // limit (`maxPendingAsync`), so a publish never stalls inside libnats. (The heap corruption of
        // loaded 3-partition runs once blamed on that stall was libnats' fetch writing past its batch
        // array; `PullSubscription.fetch` no longer uses it. The window stays: it bounds memory.)
        var unconfirmed = 0
        var unconfirmedBytes = 0
        var skipped = 0  // since the cursor: counted once the cursor moves past them (a retry sees them again)
        func confirmed(through position: PublishCursor) {
            cursor = position
            if skipped > 0 { monitor.locked { _stats.alreadyDownstream += skipped } }
            skipped = 0
        }
        var next = cursor
        while next.done < batch.count {
            let done = batch[next.done]
            let entries = done.records.entries
            while next.entry < entries.count {
                let n = next.entry
                let entry = entries[n]
                next.entry += 1
                // Already on the output stream (a partition rebuilt from its input stream onto a new store
                // produces every record again, and the stream's de-duplication window is ten minutes):
                // not published a second time. The ids are deterministic, so what is there is this record.
                if let downstream, (done.position, n) <= (downstream.position, downstream.index) {
                    skipped += 1
                    continue
                }
                try js.publishAsync(
                    TeamLogSubjects.out(p, entry.kind), entry.json,
                    msgId: TeamLogSubjects.outMsgId(p, done.position, n))
                unconfirmed += 1
                unconfirmedBytes += entry.json.count
                if unconfirmed >= Self.publishWindow || unconfirmedBytes >= Self.publishWindowBytes {
                    try js.waitForPublishes(timeoutMs: 10_000)
                    unconfirmed = 0
                    unconfirmedBytes = 0
                    confirmed(through: next)
                }
            }
            next.done += 1
            next.entry = 0
        }
        try js.waitForPublishes(timeoutMs: 10_000)
        confirmed(through: next)
    }

    // MARK: - Queries

    private func answer(_ message: NATSMessage) {
        let name = message.subject.split(separator: ".").last.map(String.init) ?? ""
        let id = Id(String(decoding: message.data, as: UTF8.self))
        let reply: JSONValue
        do {
            if name == "status" {
                guard let store = writer.store else {
                    throw WriterService.Failure(code: .notReady, message: "not open")
                }
                var status = try store.status().json
                if case .object(var fields) = status {
                    fields.append(("partition", .int(Int64(options.partition))))
                    fields.append(("partitions", .int(Int64(options.partitions))))
                    fields.append(("sourcePosition", .int(Int64(writer.sourcePosition))))
                    let unpublished = try writer.unpublishedCount()
                    let (stats, pending, inFlight) = monitor.locked { (_stats, lastPending, self.inFlight) }
                    fields.append(("unpublished", .int(Int64(unpublished))))
                    fields.append(("consumed", .int(Int64(stats.consumed))))
                    fields.append(("skipped", .int(Int64(stats.skipped))))
                    fields.append(("published", .int(Int64(stats.published))))
                    fields.append(("reseeks", .int(Int64(stats.reseeks))))
                    fields.append(("republishedAtStart", .int(Int64(stats.republishedAtStart))))
                    fields.append(("alreadyDownstream", .int(Int64(stats.alreadyDownstream))))
                    fields.append(("pending", pending.map { .int(Int64($0)) } ?? .null))
                    fields.append(("inFlight", .int(Int64(inFlight))))
                    fields.append(("leaseValid", .bool(holdsLease)))
                    // Nothing left in the stream for it as of its last fetch, nothing in flight, nothing owed —
                    // and a lease it renews: without one it fetches nothing, and "nothing pending" is stale.
                    fields.append(
                        ("caughtUp", .bool(pending == 0 && inFlight == 0 && unpublished == 0 && holdsLease)))
                    status = .object(fields)
                }
                reply = status
            } else if let kind = QueryKind(rawValue: name) {
                let view: JSONValue? = try writer.answer { store, snapshot in
                    kind == .unread
                        ? try QueryKind.unreadWithTimes(store, id, in: snapshot)
                        : try kind.view(store, id, in: snapshot)
                }
                reply = view ?? Self.error(kind.missingCode, kind.missingMessage(id.string))
            } else {
                reply = Self.error("unknownQuery", "no query \(name)")
            }
        } catch {
            reply = Self.error("unavailable", "\(error)")
        }
        monitor.locked { _stats.queries += 1 }
        var w = JSONWriter()
        w.write(reply)
        let size = w.bytes.count
        if size > payloadLimit {
            // Over what NATS carries (a large team's roster): said, rather than an answer that never arrives.
            w = JSONWriter()
            w.write(
                Self.error(
                    "tooLarge",
                    "the answer is \(size) bytes, over the NATS server's max_payload (\(connection.maxPayload)): "
                        + "ask partition \(options.partition)'s HTTP API (`GET /v1/…` on its --listen address), or raise "
                        + "max_payload (docs/nats.md, \"Records and max_payload\")"))
        }
        try? connection.respond(to: message, w.bytes)
    }

    public static func error(_ code: String, _ message: String) -> JSONValue {
        .object([("error", .object([("code", .string(code)), ("message", .string(message))]))])
    }
}
