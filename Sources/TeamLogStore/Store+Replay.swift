public import LMDB
public import TeamLog

/// Replaying the log into fresh projections, and checking its hash chain on the way.
extension Store {
    /// A break in the hash chain or an undecodable record.
    public struct ChainProblem: Sendable, Equatable, CustomStringConvertible {
        public var seq: UInt64
        public var message: String
        public var description: String { "seq \(seq): \(message)" }
    }

    /// The outcome of a replay.
    public struct Replay {
        /// The state rebuilt from seq 1 (up to the first problem, if any).
        public var world: World
        /// Events read.
        public var events: Int
        /// The first problem met in the log, if any; replay stops there.
        public var problem: ChainProblem?
        /// The hash after the last good record.
        public var lastHash: [UInt8]
    }

    /// Walks the committed log from seq 1 (through `upTo` when given) in a snapshot, checking seq
    /// continuity and every chained hash; calls `body` with each good record's seq and encoded event, and
    /// stops at the first problem. Replay, export and the writer's full check use it.
    func walkChain(
        in txn: Transaction, upTo: UInt64? = nil, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void
    ) throws -> (records: UInt64, lastHash: [UInt8], problem: ChainProblem?) {
        let walk = try walkChain(in: txn, after: 0, hash: HashChain.genesis, upTo: upTo) { seq, payload in
            try body(seq, payload)
            return nil
        }
        return (walk.last, walk.hash, walk.problem)
    }

    /// Walks the log after `seq` (through `upTo` when given) in a snapshot, continuing the hash chain from
    /// `hash`: checks seq continuity and every chained hash, and hands each good record to `body`, which
    /// may name a problem with it. Stops at the first problem. Returns the last good seq and its hash. The
    /// one place the chain is verified: from seq 1 (replay, export, audit) or after a checkpoint (open).
    ///
    /// The log's pages it has read are dropped from the process's resident set every `releaseInterval`
    /// seqs (`Environment.releaseResidentPages`): otherwise a walk of the whole log — `teamlog log`, a
    /// `--verify-chain` open, an audit — ends holding the whole log file (`teamlog log` of a 5M-event
    /// store peaked at 778 MB).
    func walkChain(
        in txn: Transaction, after seq: UInt64, hash: [UInt8], upTo: UInt64? = nil,
        _ body: (UInt64, UnsafeRawBufferPointer) throws -> String?
    ) throws -> (last: UInt64, hash: [UInt8], problem: ChainProblem?) {
        // A walk reads the log front to back: read-ahead serves it whatever the memory (`ReadAhead`). On a
        // 5M-event audit in a 1.5 GiB memory cgroup, with the log read a page at a time: 747,647 major
        // faults. Advice changes only when pages are read, never what: a concurrent change is harmless.
        let readAhead = env.readAhead
        env.setReadAhead(true)
        defer { env.setReadAhead(readAhead) }
        var hash = hash
        var expected = seq + 1
        var problem: ChainProblem?
        try txn.forEach(dbs.log.handle, from: BigEndianUInt64.encoded(expected)) { key, value in
            guard key.count == 8, let seq = try? BigEndianUInt64.decode(key) else {
                problem = ChainProblem(seq: expected, message: "log key is not an 8-byte seq")
                return false
            }
            if let upTo, seq > upTo { return false }
            if seq % Store.releaseInterval == 0 { env.releaseResidentPages() }
            guard seq == expected else {
                problem = ChainProblem(
                    seq: expected,
                    message: seq > expected
                        ? "record missing (next stored record is \(seq))" : "record out of order (\(seq))")
                return false
            }
            guard let record = LogRecord(value) else {
                problem = ChainProblem(seq: seq, message: "record too short to hold its hash")
                return false
            }
            let next = HashChain.next(previous: hash, seq: seq, payload: record.payload)
            guard next.elementsEqual(record.hash) else {
                problem = ChainProblem(seq: seq, message: "hash mismatch: the record or one before it was changed")
                return false
            }
            if let message = try body(seq, record.payload) {
                problem = ChainProblem(seq: seq, message: message)
                return false
            }
            hash = next
            expected += 1
            return true
        }
        return (expected - 1, hash, problem)
    }

    /// Reads the committed log from seq 1 (through `upTo` when given), verifying the chain, and applies
    /// every event to a fresh state in memory with this store's config, keeping every unread index entry
    /// (an `IndexJournal`): memory grows with the history. Not used by the store itself — audit, repair and
    /// `--at` replay into a scratch store (`replayIntoScratch`) — but kept for the property tests, as an
    /// oracle independent of the writer's change tracking. `progress` is called every 65,536 events.
    public func replay(upTo: UInt64? = nil, progress: ((Int) -> Void)? = nil) throws -> Replay {
        try env.read { txn in try replay(in: txn, upTo: upTo, progress: progress) }
    }

    /// Replays inside a given read snapshot.
    public func replay(in txn: Transaction, upTo: UInt64? = nil, progress: ((Int) -> Void)? = nil) throws -> Replay {
        var replayer = Replayer(config: world.config, progress: progress)
        var undecodable: ChainProblem?
        let walk = try walkChain(in: txn, upTo: upTo) { seq, payload in
            guard undecodable == nil else { return }
            let event: Event
            do { event = try EventCodec.decode(seq: seq, payload) } catch {
                undecodable = ChainProblem(seq: seq, message: "undecodable event: \(error)")
                return
            }
            replayer.apply(event)
        }
        let events = undecodable.map { Int($0.seq - 1) } ?? Int(walk.records)
        return Replay(
            world: replayer.finish(), events: events, problem: undecodable ?? walk.problem, lastHash: walk.lastHash)
    }

    /// Visits committed events from `from` through `to` in one snapshot, verifying the hash chain over
    /// them: from the hash stored with record `from - 1` (or from seq 1), so each visited record is checked
    /// against the one before it and a break inside the range stops the visit and is reported to
    /// `problem`. The chain before `from` is `audit`'s to check (as an open checks only the tail after
    /// its checkpoint): from seq 1, an export of the last 100 events of a 2.9M-event log walked all of
    /// it (1.8–2.2 s; a `from` one past the head, an incremental export that finds nothing, 1.96 s — a
    /// soak trial of `serve`'s `/v1/log`, thirty-second session). A `from` whose predecessor is missing
    /// walks from seq 1, so a missing record is named; one past the log's end visits nothing.
    public func forEachEvent(
        from: UInt64 = 1, to: UInt64? = nil, _ body: (Event) throws -> Void,
        problem: (ChainProblem) -> Void = { _ in }
    ) throws {
        try env.read { txn in
            var start = (seq: UInt64(0), hash: HashChain.genesis)
            if from > 1 {
                if let hash = try recordHash(from - 1, in: txn) {
                    start = (from - 1, hash)
                } else if let last = try txn.last(dbs.log.handle), last.key.count == 8,
                    let lastSeq = try? last.key.withUnsafeBytes({ try BigEndianUInt64.decode($0) }), lastSeq < from - 1
                {
                    return  // past the end: nothing to visit
                }
            }
            let walk = try walkChain(in: txn, after: start.seq, hash: start.hash, upTo: to) { seq, payload in
                if seq >= from { try body(try EventCodec.decode(seq: seq, payload)) }
                return nil
            }
            if let p = walk.problem { problem(p) }
        }
    }

    /// Reads one event by seq.
    public func event(at seq: UInt64) throws -> Event? {
        try env.read { txn in
            try BigEndianUInt64.encoded(seq).withUnsafeBytes { key in
                try txn.withValue(dbs.log.handle, key: key) { value -> Event? in
                    guard let value, let record = LogRecord(value) else { return nil }
                    return try EventCodec.decode(seq: seq, record.payload)
                }
            }
        }
    }

    /// Every stored projection record, table by table, in key order (`txn`: of `projectionEnv`), copied
    /// into memory (for tests on small stores; audit streams the tables instead).
    public func storedProjections(in txn: Transaction) throws -> [ProjectionTable: [([UInt8], [UInt8])]] {
        var out: [ProjectionTable: [([UInt8], [UInt8])]] = [:]
        for table in ProjectionTable.allCases {
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(pdbs.table(table)) { key, value in
                rows.append((Array(key), Array(value)))
                return true
            }
            out[table] = rows
        }
        return out
    }
}

/// Applies events to a fresh state the way the in-memory replay does (`Store.replay`, the property tests'
/// oracle): no delivery lists, no change tracking (it writes nothing), the unread index entries kept in an
/// `IndexJournal` (what `ProjectionCodec.allRecords` lists the index tables from), progress every 65,536
/// seqs.
struct Replayer {
    private var world: World
    private var scratch: [Output] = []
    private let progress: ((Int) -> Void)?
    /// Events applied.
    private(set) var events = 0

    init(config: Config, progress: ((Int) -> Void)?) {
        world = World(config: config)
        world.wantsDeliveries = false
        world.tracksChanges = false
        world.indexJournal = IndexJournal()
        self.progress = progress
    }

    mutating func apply(_ event: Event) {
        scratch.removeAll(keepingCapacity: true)
        world.apply(event, into: &scratch)
        events += 1
        if event.seq & 0xFFFF == 0 { progress?(Int(event.seq)) }
    }

    /// The rebuilt state, tracking changes again.
    consuming func finish() -> World {
        world.tracksChanges = true
        return world
    }
}
