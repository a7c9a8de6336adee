public import TeamLog

/// The output records of past events, re-derived from the log: what a subscriber that was away longer
/// than `serve`'s record window, or a consumer starting late, reads to catch up (KurrentDB's catch-up
/// subscriptions, a Kafka consumer reading an output topic from an old offset).
extension Store {
    /// What `rederiveRecords` visited.
    public struct RederivedRecords: Sendable {
        /// The last seq whose records were handed over (`from - 1` when none were).
        public var last: UInt64
        /// Where the log's chain broke inside the range, if it did: the records stop before it.
        public var problem: ChainProblem?
    }

    /// Hands `body` the SPEC §4 records of every committed event from `from` through `to` (the log's end
    /// when nil), in log order, one call per event: an accepted op's `event` record — whose `line` is 0,
    /// the log keeps no input line — then its outputs (tips, deliveries with their lists, notices,
    /// signals, logins); a system sync (`membersSync`) its outputs alone. `rejected` and `duplicate`
    /// records belong to the request that got them and are not in the log. `body` returns false to stop.
    ///
    /// The state before `from` is rebuilt by replaying the log through `from - 1` into a scratch store
    /// (`replayed(at:)`, from `base`'s checkpoint when given: a copy at or before `from - 1`), then each
    /// event from `from` on is applied to it through the writer's own path with deliveries computed, so
    /// the records are the ones the writer made then (the domain is deterministic: time comes from the
    /// events). Memory is the replay's working set whatever the range; the cost is a replay to `from`
    /// (or from the copy), then about an audit's per event. A `from` past the log's head hands over
    /// nothing (an incremental reader that is up to date). Throws `AsOfError` when the log breaks before
    /// `from`.
    @discardableResult
    public func rederiveRecords(
        from: UInt64, to: UInt64? = nil, config: Config? = nil, base: Store? = nil,
        progress: ((Int) -> Void)? = nil, _ body: (_ seq: UInt64, _ records: [Record]) throws -> Bool
    ) throws -> RederivedRecords {
        precondition(from >= 1, "seqs start at 1")
        // Past the log's end there is nothing to hand over (as `log --from` finds nothing): no replay.
        if let head = try? head().seq, from > head { return RederivedRecords(last: from - 1, problem: nil) }
        let reader = try recordReader(from: from, config: config, base: base, progress: progress)
        defer { reader.close() }
        _ = try reader.advance(through: to, progress: progress, body)
        return RederivedRecords(last: reader.position, problem: reader.problem)
    }

    /// A `RecordReader` whose first event is `from`: the replay through `from - 1` done (`rederiveRecords`).
    public func recordReader(
        from: UInt64, config: Config? = nil, base: Store? = nil, progress: ((Int) -> Void)? = nil
    ) throws -> RecordReader {
        precondition(from >= 1, "seqs start at 1")
        let scratch =
            from > 1
            ? try replayed(at: from - 1, config: config, base: base, progress: progress)
            : try makeScratch(config: config, projectionsOnly: true)
        scratch.store.wantsDeliveries = true
        return RecordReader(log: self, scratch: scratch, position: from - 1)
    }
}

/// Re-derives the records of a store's events in order from a position, and keeps its place between
/// calls: a catch-up reader of the record stream (`serve`'s `GET /v1/records` from a seq older than its
/// window) advances to the log's head, then again to the head that has moved on meanwhile, until it
/// reaches what the live window still holds. Its state is a scratch store (`Store.recordReader`), removed
/// by `close()`. One thread at a time.
public final class RecordReader {
    private let log: Store
    private let scratch: ScratchStore
    /// The last seq whose records were handed over (its first event is `position + 1`).
    public private(set) var position: UInt64
    /// Where the log's chain broke, if it did: nothing after it is handed over.
    public private(set) var problem: Store.ChainProblem?

    init(log: Store, scratch: ScratchStore, position: UInt64) {
        self.log = log
        self.scratch = scratch
        self.position = position
    }

    /// Hands `body` the records of each event after `position` through `to` (the log's head as one
    /// snapshot sees it now, when nil), one call per event; false when `body` stopped it or the chain broke
    /// (`problem`), true when it reached the end.
    public func advance(
        through to: UInt64? = nil, progress: ((Int) -> Void)? = nil,
        _ body: (_ seq: UInt64, _ records: [Record]) throws -> Bool
    ) throws -> Bool {
        guard problem == nil else { return false }
        let target = scratch.store
        let scratch = self.scratch
        struct Stop: Error {}
        do {
            try log.forEachEvent(
                from: position + 1, to: to,
                { event in
                    try scratch.apply(event, batchSize: 8_192, progress: progress)
                    var records: [Record] = []
                    records.reserveCapacity(target.pendingOutputsScratch.count + 1)
                    if case .membersSync = event.op.body {
                    } else {
                        records.append(.event(line: 0, seq: event.seq, ts: event.ts, op: event.op.name))
                    }
                    for output in target.pendingOutputsScratch { records.append(.output(output)) }
                    position = event.seq
                    if try !body(event.seq, records) { throw Stop() }
                }, problem: { self.problem = $0 })
        } catch is Stop { return false }
        return problem == nil
    }

    /// Removes the scratch store.
    public func close() { scratch.remove() }
}
