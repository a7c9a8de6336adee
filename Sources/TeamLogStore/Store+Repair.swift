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
    /// remaining log, in one transaction of the projections. The rebuild replays the log into a scratch
    /// store (no fsync, in `$TMPDIR`, removed afterwards) and copies its tables in key order, so memory
    /// holds the replay's working state only, never the history.
    /// Ops after the cut are lost from the store: feed them again (their opIds are free again).
    /// `progress` is the replay's (every 65,536 events).
    public func repair(progress: ((Int) -> Void)? = nil) throws -> RepairReport {
        let scratch = try makeScratch(projectionsOnly: true)
        defer { scratch.remove() }
        try env.read { txn in try replay(into: scratch, in: txn, upTo: nil, progress: progress) }
        let keep = UInt64(scratch.events)
        let lastTs = scratch.store.checkpoint.ts
        let removed = try env.write { txn in
            // Every key that is not a seq of 1...keep: those after the cut, in chunks of bounded size, then
            // any that is not an 8-byte seq or is seq 0 (records out of order or with a bad key sort anywhere).
            var removed = try Self.deleteKeys(in: txn, dbs.log.handle, from: BigEndianUInt64.encoded(keep + 1)) {
                _, _ in true
            }
            removed += try Self.deleteKeys(in: txn, dbs.log.handle) { key, _ in
                key.count != 8 || ((try? BigEndianUInt64.decode(key)) ?? 0) == 0
            }
            _ = try Self.deleteKeys(in: txn, dbs.opIds.handle) { _, value in
                if case .accepted(let seq)? = try? OpIdOutcomeCodec.decode(value) { return seq > keep }
                return false
            }
            try dbs.writeHead(txn, Meta(lastSeq: keep, lastTs: lastTs, lastHash: scratch.lastHash, config: nil))
            return removed
        }
        // Then the projections, at the cut (a crash in between leaves them ahead of the log, which an
        // open refuses and a second repair mends): the scratch store's tables copied in key order.
        finishCheckpoint()
        let position = Checkpoint(seq: keep, ts: lastTs, hash: scratch.lastHash)
        let replayed = scratch.store
        // Its checkpoint holds everything now; what the replay left resident (a working set of hundreds of
        // MB) is read no more: freed before the copy, which reads the scratch store's tables only.
        replayed.world = World(config: replayed.world.config)
        Allocator.releaseFreedPages()
        let count = try projectionEnv.write { txn in
            try replayed.projectionEnv.read { rtxn in
                var count = 0
                for table in ProjectionTable.allCases {
                    let db = pdbs.table(table)
                    try txn.clear(db)
                    try rtxn.forEach(replayed.pdbs.table(table)) { key, value in
                        try txn.put(db, key: key, value: value, flags: .append)
                        count += 1
                        if UInt64(count) % Store.releaseInterval == 0 {
                            replayed.projectionEnv.releaseResidentPages()
                            // And the pages of this store's file the transaction read (the old tables'
                            // pages as it freed them, its spilled pages): the whole file by the end else.
                            projectionEnv.releaseResidentPages()
                        }
                        return true
                    }
                }
                try pdbs.writeCheckpoint(txn, position)
                return count
            }
        }
        checkpoint = position
        return RepairReport(
            problem: scratch.problem, removedEvents: removed, keptEvents: Int(keep), projectionRecords: count)
    }

    /// Deletes the keys of `db` from `from` (or the first) on for which `doomed` holds, collecting at most
    /// 65,536 at a time, so memory stays bounded however many go. Returns how many were deleted.
    static func deleteKeys(
        in txn: WriteTransaction, _ db: DatabaseHandle, from: [UInt8]? = nil,
        _ doomed: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool
    ) throws -> Int {
        let chunk = 65_536
        var deleted = 0
        var resume = from
        while true {
            var keys: [[UInt8]] = []
            var next: [UInt8]?
            try txn.forEach(db, from: resume) { key, value in
                if doomed(key, value) { keys.append(Array(key)) }
                if keys.count == chunk {
                    next = Array(key)
                    return false
                }
                return true
            }
            for key in keys { try txn.delete(db, key: key) }
            deleted += keys.count
            // Seeking the last deleted key lands on the first key after it.
            guard let next else { return deleted }
            resume = next
        }
    }
}
