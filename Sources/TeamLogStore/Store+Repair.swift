import LMDB
import TeamLog

/// Guarding and repairing the chain: a writer verifies the whole hash chain when it opens and refuses to
/// append onto a broken one; `repair` cuts the log at the first bad record and rebuilds every projection
/// from what remains.
extension Store {
    /// Verifies seq continuity and every chained hash of the committed log (hashes only: no decoding),
    /// and that the checkpoint names the last record. `nil` when sound.
    public func verifyChain() throws -> ChainProblem? {
        try env.read { txn in try chainProblem(in: txn) }
    }

    /// The chain's first problem, or a checkpoint that does not match the log, in a snapshot.
    func chainProblem(in txn: Transaction) throws -> ChainProblem? {
        let meta = try dbs.readMeta(txn)
        let walk = try walkChain(in: txn) { _, _ in }
        return walk.problem ?? Self.checkpointProblem(meta, records: walk.records, lastHash: walk.lastHash)
    }

    /// A checkpoint that does not name the end of a sound log: wrong seq or wrong hash.
    static func checkpointProblem(_ meta: Meta, records: UInt64, lastHash: [UInt8]) -> ChainProblem? {
        if records != meta.lastSeq {
            return ChainProblem(
                seq: min(records + 1, meta.lastSeq + 1),
                message: "checkpoint says seq \(meta.lastSeq) but the log ends at \(records)")
        }
        if lastHash != meta.lastHash {
            return ChainProblem(seq: meta.lastSeq, message: "checkpoint hash differs from the log's last hash")
        }
        return nil
    }

    /// What `repair` did.
    public struct RepairReport: Sendable {
        /// The chain problem found, if any.
        public var problem: ChainProblem?
        /// Log records removed (the first bad one and everything after it).
        public var removedEvents: Int
        /// Events kept.
        public var keptEvents: Int
        /// Projection records rewritten.
        public var projectionRecords: Int
    }

    /// Cuts the log before its first bad record (if any) and drops the opIds of the removed events, in one
    /// transaction of the log; then rebuilds every projection table and their checkpoint from the
    /// remaining log, in one transaction of the projections.
    /// Ops after the cut are lost from the store: feed them again (their opIds are free again).
    /// `progress` is the replay's (every 65,536 events).
    public func repair(progress: ((Int) -> Void)? = nil) throws -> RepairReport {
        let replay = try self.replay(progress: progress)
        let keep = UInt64(replay.events)
        let rebuilt = ProjectionCodec.allRecords(replay.world)
        var removed = 0
        var count = 0
        try env.write { txn in
            var doomed: [[UInt8]] = []
            try txn.forEach(dbs.log.handle, from: BigEndianUInt64.encoded(keep + 1)) { key, _ in
                doomed.append(Array(key))
                return true
            }
            // Records out of order or with a bad key sort anywhere: drop every key that is not 1...keep.
            try txn.forEach(dbs.log.handle) { key, _ in
                if key.count != 8 || ((try? BigEndianUInt64.decode(key)) ?? 0) > keep
                    || ((try? BigEndianUInt64.decode(key)) ?? 0) == 0
                {
                    if !doomed.contains(where: { $0.elementsEqual(key) }) { doomed.append(Array(key)) }
                }
                return true
            }
            for key in doomed { try txn.delete(dbs.log.handle, key: key) }
            removed = doomed.count
            var staleOpIds: [[UInt8]] = []
            try txn.forEach(dbs.opIds.handle) { key, value in
                if case .accepted(let seq)? = try? OpIdOutcomeCodec.decode(value), seq > keep {
                    staleOpIds.append(Array(key))
                }
                return true
            }
            for key in staleOpIds { try txn.delete(dbs.opIds.handle, key: key) }
            try dbs.writeHead(
                txn, Meta(lastSeq: keep, lastTs: replay.world.lastTs, lastHash: replay.lastHash, config: nil))
        }
        // Then the projections, at the cut (a crash in between leaves them ahead of the log, which an
        // open refuses and a second repair mends).
        finishCheckpoint()
        let position = Checkpoint(seq: keep, ts: replay.world.lastTs, hash: replay.lastHash)
        try projectionEnv.write { txn in
            for table in ProjectionTable.allCases {
                let db = pdbs.table(table)
                try txn.clear(db)
                for (key, value) in rebuilt[table] ?? [] {
                    try txn.put(db, key: key, value: value)
                    count += 1
                }
            }
            try pdbs.writeCheckpoint(txn, position)
        }
        checkpoint = position
        return RepairReport(
            problem: replay.problem, removedEvents: removed, keptEvents: Int(keep), projectionRecords: count)
    }
}
