import TeamLogThreads
import Crypto
import LMDB
import TeamLog

/// `teamlog audit`: verify the hash chain, replay the log into fresh projections and compare them with
/// the stored ones, table by table. It reads one snapshot of the projections and then one of the log
/// (which can only be ahead of them), so it runs beside a live writer: the stored projections are
/// compared with the replay through their checkpoint seq, and the rest of the log is chain-checked.
public struct AuditReport: Sendable {
    /// One compared projection table.
    public struct TableResult: Sendable {
        public var table: String
        public var records: Int
        /// SHA-256 over the stored records (keys and values), for comparing stores by eye.
        public var digest: String
        /// The first difference, in words; `nil` when stored equals replayed.
        public var difference: String?
    }

    /// Seq of the projections audited (their checkpoint).
    public var seq: UInt64
    /// Seq of the log's head in the snapshot audited.
    public var headSeq: UInt64 = 0
    /// Events replayed.
    public var events: Int
    /// The hash chain's first problem, if any.
    public var chainProblem: Store.ChainProblem?
    /// A checkpoint that disagrees with the log.
    public var checkpointProblem: String?
    public var tables: [TableResult]

    /// True when the chain, the checkpoint and every table are sound.
    public var ok: Bool {
        chainProblem == nil && checkpointProblem == nil && tables.allSatisfy { $0.difference == nil }
    }
}

extension Store {
    /// Audits the committed store: the stored projections against a replay through their checkpoint,
    /// and the whole hash chain to the head.
    public func audit(progress: ((Int) -> Void)? = nil) throws -> AuditReport {
        // The writer's own store audits its committed state; and no checkpoint of this process may grow
        // the projections' map while they are read.
        if writerLock != nil && refusal == nil { try checkpointNow() }
        finishCheckpoint()
        return try projectionEnv.read { ptxn in
            let checkpoint = try pdbs.readCheckpoint(ptxn)
            return try env.read { txn in
                let meta = try dbs.readMeta(txn)
                var report: AuditReport
                var hashAtCheckpoint: [UInt8]?
                if let (twoCores, hash) = try auditOnTwoCores(txn, ptxn, checkpoint: checkpoint, progress: progress) {
                    report = twoCores
                    hashAtCheckpoint = hash
                } else {
                    let replay = try replay(in: txn, upTo: checkpoint.seq, progress: progress)
                    report = AuditReport(
                        seq: checkpoint.seq, events: replay.events, chainProblem: replay.problem,
                        checkpointProblem: nil, tables: [])
                    if replay.problem == nil {
                        report.checkpointProblem = Self.positionProblem(
                            checkpoint, records: UInt64(replay.events), lastHash: replay.lastHash)
                        hashAtCheckpoint = replay.lastHash
                    }
                    let expected = ProjectionCodec.recordCounts(replay.world)
                    for table in ProjectionTable.allCases {
                        report.tables.append(
                            try compareTable(table, world: replay.world, expected: expected[table] ?? 0, in: ptxn))
                    }
                }
                report.headSeq = meta.lastSeq
                // The log after the checkpoint: its chain, and the head naming its end.
                if report.chainProblem == nil && report.checkpointProblem == nil, let hashAtCheckpoint {
                    let tail = try walkChain(in: txn, after: checkpoint.seq, hash: hashAtCheckpoint) { _, _ in nil }
                    report.chainProblem = tail.problem
                    if tail.problem == nil {
                        report.checkpointProblem =
                            Self.checkpointProblem(meta, records: tail.last, lastHash: tail.hash)?.message
                    }
                }
                return report
            }
        }
    }

    /// A projections' checkpoint that the log does not reach, or whose hash is not the log's at its seq.
    static func positionProblem(_ checkpoint: Checkpoint, records: UInt64, lastHash: [UInt8]) -> String? {
        if records != checkpoint.seq {
            return "the projections are at seq \(checkpoint.seq) but the log ends at \(records)"
        }
        if lastHash != checkpoint.hash {
            return "the projections' checkpoint hash differs from the log's at seq \(checkpoint.seq)"
        }
        return nil
    }

    /// The audit on two threads, each reading its own transaction on the same snapshot (same txn id): one
    /// walks the log, checking the hash chain and decoding events, while the other applies them; then the
    /// tables are compared, split between the two by size. `nil` (do it on one thread) when the second thread cannot get the same snapshot (a
    /// writer committed in between) or the log has a problem, whose report the one-thread path words.
    private func auditOnTwoCores(
        _ txn: Transaction, _ ptxn: Transaction, checkpoint: Checkpoint, progress: ((Int) -> Void)?
    ) throws -> (AuditReport, [UInt8])? {
        let snapshot = txn.snapshotID
        let projectionSnapshot = ptxn.snapshotID
        // The second thread walks the log (checking the chain) and decodes; this one applies.
        let decoded = ChunkQueue<Event>()
        let config = world.config
        let (replayed, chain) = try inParallel(
            { () -> (world: World, events: Int) in
                var replayer = Replayer(config: config, progress: progress)
                while let chunk = try decoded.pop() {
                    for event in chunk { replayer.apply(event) }
                    decoded.recycle(chunk)  // freed on the decoding thread
                }
                let events = replayer.events
                return (replayer.finish(), events)
            },
            {
                defer { decoded.close() }
                typealias Walk = (records: UInt64, lastHash: [UInt8], problem: ChainProblem?)
                return try self.env.concurrentRead { other -> Walk? in
                    guard other.snapshotID == snapshot else { return nil }
                    var chunk: [Event] = []
                    chunk.reserveCapacity(256)
                    var undecodable = false
                    let walk = try self.walkChain(in: other, upTo: checkpoint.seq) { seq, payload in
                        guard !undecodable, let event = try? EventCodec.decode(seq: seq, payload) else {
                            undecodable = true
                            return
                        }
                        chunk.append(event)
                        if chunk.count == 256 {
                            _ = decoded.push(chunk)
                            chunk.removeAll(keepingCapacity: true)
                        }
                    }
                    if !chunk.isEmpty { _ = decoded.push(chunk) }
                    return undecodable ? nil : walk
                } ?? nil
            })
        guard let chain, chain.problem == nil, UInt64(replayed.events) == chain.records else { return nil }
        var report = AuditReport(
            seq: checkpoint.seq, events: replayed.events, chainProblem: nil,
            checkpointProblem: Self.positionProblem(checkpoint, records: chain.records, lastHash: chain.lastHash),
            tables: [])
        let world = replayed.world
        let expected = ProjectionCodec.recordCounts(world)
        // Two groups of about equal record counts (the cost of a table is about its records).
        var groups: [[ProjectionTable]] = [[], []]
        var load = [0, 0]
        for table in ProjectionTable.allCases.sorted(by: { (expected[$0] ?? 0) > (expected[$1] ?? 0) }) {
            let g = load[0] <= load[1] ? 0 : 1
            groups[g].append(table)
            load[g] += expected[table] ?? 0
        }
        let compare = { (tables: [ProjectionTable], txn: Transaction) throws -> [AuditReport.TableResult] in
            try tables.map { try self.compareTable($0, world: world, expected: expected[$0] ?? 0, in: txn) }
        }
        let (first, second) = try inParallel(
            { try compare(groups[0], ptxn) },
            {
                try self.projectionEnv.concurrentRead { other in
                    other.snapshotID == projectionSnapshot ? try compare(groups[1], other) : nil
                } ?? nil
            })
        let results = first + (try second ?? compare(groups[1], ptxn))
        for table in ProjectionTable.allCases {
            report.tables.append(results.first { $0.table == table.rawValue }!)
        }
        return (report, chain.lastHash)
    }

    /// Compares one table, naming a replayed record missing from the store when the counts differ.
    func compareTable(_ table: ProjectionTable, world: World, expected: Int, in txn: Transaction) throws
        -> AuditReport.TableResult
    {
        var result = try compareStoredRecords(table, world: world, in: txn)
        if result.difference == nil && result.records != expected {
            // Counts differ but every stored record matched: some replayed record is missing from the
            // store. The rare path: materialize this table's replayed records to name it.
            let rebuilt = ProjectionCodec.allRecords(world)[table] ?? []
            result = try compareTable(table, replayed: rebuilt, in: txn)
        }
        return result
    }

    /// Streams one stored table in key order and compares each record with the value the replayed state
    /// gives its key (no replayed record is built for a key the store does not have). Equal counts and no
    /// difference mean equal tables, since keys are unique.
    func compareStoredRecords(_ table: ProjectionTable, world: World, in txn: Transaction) throws
        -> AuditReport.TableResult
    {
        try scanTable(table, in: txn) { key, value in
            let name = Self.keyName(key)
            guard let projectionKey = ProjectionCodec.key(table, key) else {
                return "\(table.rawValue) \(name): not a valid key of this table"
            }
            guard let replayed = ProjectionCodec.record(projectionKey, in: world).2 else {
                return
                    "\(table.rawValue) \(name): stored \(Self.describe(table, Array(key), Array(value))) but absent after replay"
            }
            if value.elementsEqual(replayed) { return nil }
            return
                "\(table.rawValue) \(name): stored \(Self.describe(table, Array(key), Array(value))) vs replayed \(Self.describe(table, Array(key), replayed))"
        }
    }

    /// Compares one stored table with the replayed records sorted by key (the path that can also name a
    /// record missing from the store).
    func compareTable(_ table: ProjectionTable, replayed: [([UInt8], [UInt8])], in txn: Transaction) throws
        -> AuditReport.TableResult
    {
        var j = 0
        var result = try scanTable(table, in: txn) { key, value in
            guard j < replayed.count else {
                return "\(table.rawValue) \(Self.keyName(key)): stored but absent after replay"
            }
            let (rk, rv) = replayed[j]
            if key.elementsEqual(rk) {
                j += 1
                if value.elementsEqual(rv) { return nil }
                return
                    "\(table.rawValue) \(Self.keyName(rk)): stored \(Self.describe(table, rk, Array(value))) vs replayed \(Self.describe(table, rk, rv))"
            }
            if key.lexicographicallyPrecedes(rk) {
                return
                    "\(table.rawValue) \(Self.keyName(key)): stored \(Self.describe(table, Array(key), Array(value))) but absent after replay"
            }
            return
                "\(table.rawValue) \(Self.keyName(rk)): missing from the store; replay has \(Self.describe(table, rk, rv))"
        }
        if result.difference == nil && j < replayed.count {
            let (rk, rv) = replayed[j]
            result.difference =
                "\(table.rawValue) \(Self.keyName(rk)): missing from the store; replay has \(Self.describe(table, rk, rv))"
        }
        return result
    }

    /// Walks a stored table once: counts its records, digests them (SHA-256 over length-prefixed keys and
    /// values) and keeps the first difference `check` reports, without copying the table.
    private func scanTable(
        _ table: ProjectionTable, in txn: Transaction,
        _ check: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> String?
    ) throws -> AuditReport.TableResult {
        var hasher = SHA256()
        var count = 0
        var difference: String?
        try txn.forEach(pdbs.table(table)) { key, value in
            count += 1
            var lengths = (UInt32(key.count), UInt32(value.count))
            withUnsafeBytes(of: &lengths) { hasher.update(bufferPointer: $0) }
            hasher.update(bufferPointer: key)
            hasher.update(bufferPointer: value)
            if difference == nil { difference = check(key, value) }
            return true
        }
        let digest =
            count == 0 ? String(repeating: "0", count: 16) : String(HashChain.hex(Array(hasher.finalize())).prefix(16))
        return AuditReport.TableResult(table: table.rawValue, records: count, digest: digest, difference: difference)
    }

    /// A key as text, its 0x00 separators shown as `/`.
    static func keyName(_ key: some Sequence<UInt8>) -> String {
        String(decoding: key.map { $0 == 0 ? UInt8(ascii: "/") : $0 }, as: UTF8.self)
    }

    /// A record's value in readable form (decoded when possible).
    static func describe(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) -> String {
        var w = World()
        let described: String? = try? key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                if table == .members {
                    // Needs its team to restore; decode the member alone.
                    let user = Id(String(decoding: key.split(separator: 0, maxSplits: 1).last ?? [], as: UTF8.self))
                    let m = try ProjectionCodec.decodeMember(user: user, v)
                    return
                        "{role \(m.role.rawValue), notify \(m.notify.rawValue), mutedUntil \(m.mutedUntil.map(String.init) ?? "none"), joinSeq \(m.joinSeq), slot \(m.slot)}"
                }
                if table == .teams {
                    try ProjectionCodec.restore(table, key: k, value: v, into: &w)
                    let t = w.teams.values.first!
                    return "{name \(t.name), owner \(t.owner), muted \(t.muted), dismissed \(t.dismissed)}"
                }
                return nil
            }
        }
        return described ?? HashChain.hex(value)
    }
}
