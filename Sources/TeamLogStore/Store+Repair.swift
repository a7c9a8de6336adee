import LMDB
import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
        /// The file the removed records were saved to first (`saveCutRecords`), when any were removed.
        public var cutFile: String?
        /// What the opId index needed to agree with the kept log (`mendOpIdIndex`).
        public var opIds: OpIdIndexMend
        /// What the rebuild's working set did within its budget (`repair(cacheBytes:)`).
        public var replay = WorkingSetStats()
    }

    /// Cuts the log before its first bad record (if any) and makes the opId index agree with what is kept
    /// — the removed events' opIds dropped, any entry the log contradicts mended (`mendOpIdIndex`) — in
    /// one transaction of the log; then rebuilds every projection table and their checkpoint from the
    /// remaining log. The rebuild replays the log into a scratch store (no fsync, in `$TMPDIR`, removed
    /// afterwards), checkpoints it at the cut and swaps a compacted copy of its environment in for
    /// `proj/` (`swapProjections`), so memory holds the replay's working state only, never the history.
    /// Ops after the cut are lost from the store — but not from the disk: the records removed are first
    /// saved beside the log (`saveCutRecords`), as op lines `teamlog ingest` takes again (their opIds are
    /// free again). The store refuses further use afterwards (its projections' files were replaced): open
    /// it again.
    /// `progress` is the replay's (every 65,536 events); `cacheBytes` its working-set budget (the default
    /// replay's when `nil`, as `audit(base:keepingVerifiedCopyIn:cacheBytes:progress:)` takes it).
    public func repair(cacheBytes: Int? = nil, progress: ((Int) -> Void)? = nil) throws -> RepairReport {
        let scratch = try makeScratch(projectionsOnly: true, limits: ReplayLimits(cacheBytes: cacheBytes))
        defer { scratch.remove() }
        try env.read { txn in try replay(into: scratch, in: txn, upTo: nil, progress: progress) }
        let replayStats = scratch.store.workingSetStats
        let keep = UInt64(scratch.events)
        let lastTs = scratch.store.checkpoint.ts
        let replayed = scratch.store
        // Its checkpoint holds everything now; what the replay left resident (a working set of hundreds of
        // MB) is read no more: freed before the log is scanned and the projections copied.
        finishCheckpoint()
        replayed.world = World(config: replayed.world.config)
        Allocator.releaseFreedPages()
        let release = { [env] in env.releaseResidentPages() }
        // Saved, and synced, before anything is removed: a repair that cannot save them removes nothing.
        let cutFile = try env.read { txn in try saveCutRecords(after: keep, in: txn) }
        let (removed, opIds) = try env.write { txn in
            // Every key that is not a seq of 1...keep: those after the cut, in chunks of bounded size, then
            // any that is not an 8-byte seq or is seq 0 (records out of order or with a bad key sort anywhere).
            // The scans read the whole log and opId index through the map: its pages are dropped as they go
            // (872 MB of them stayed resident at 5M events).
            var removed = try Self.deleteKeys(
                in: txn, dbs.log.handle, from: BigEndianUInt64.encoded(keep + 1), release: release
            ) { _, _ in true }
            removed += try Self.deleteKeys(in: txn, dbs.log.handle, release: release) { key, _ in
                key.count != 8 || ((try? BigEndianUInt64.decode(key)) ?? 0) == 0
            }
            // The opId index made to say what the kept log says: the cut events' opIds freed, and any
            // damage `audit` would name mended (`mendOpIdIndex`).
            let mend = try Self.mendOpIdIndex(in: txn, dbs, through: keep, cut: removed > 0, release: release)
            try dbs.writeHead(txn, Meta(lastSeq: keep, lastTs: lastTs, lastHash: scratch.lastHash, config: nil))
            // A file ingest's recorded place in its input named lines whose events may be cut: no longer
            // known (`ingest --resume` then says so; the cut records are saved to feed again).
            if removed > 0 { _ = try txn.delete(dbs.meta, "input") }
            return (removed, mend)
        }
        // Then the projections, at the cut (a crash in between leaves them ahead of the log, which an
        // open refuses and a second repair mends): the scratch store's environment, checkpointed at the
        // cut, copied beside `proj/` (compacted and synced, as a backup is) and swapped in whole. Before,
        // its tables were copied into `proj/` in one write transaction, whose dirty pages LMDB holds (to
        // 512 MiB) besides the pages it maps: 1.66 GB of peak RSS at 5M events.
        let position = try scratch.checkpointAtSource()
        let count = try replayed.projectionEnv.read { txn in
            try ProjectionTable.allCases.reduce(0) { $0 + Int(try txn.stat(replayed.pdbs.table($1)).entries) }
        }
        try swapProjections(from: replayed.projectionEnv)
        checkpoint = position
        refuse(
            StoreError(
                code: .closed, message: "store \(env.path) was repaired: its projections were replaced; open it again",
                path: env.path))
        return RepairReport(
            problem: scratch.problem, removedEvents: removed, keptEvents: Int(keep), projectionRecords: count,
            cutFile: cutFile, opIds: opIds, replay: replayStats)
    }

    /// Writes the log records `repair` is about to remove (seqs after `keep`, then keys that are no seq), in key order, to a new file in the
    /// store's directory, `cut-<first seq>-<unix ms>.jsonl`, and syncs it; `nil` (no file) when there are
    /// none. Each decodable record is its op as `teamlog log` prints it (time and opId kept: `teamlog
    /// ingest FILE` takes the file again, its opIds free once the cut is made); a record that does not
    /// decode is a `{"cut":…}` line with its seq (or key) and bytes, which ingest rejects and goes on. The
    /// first line is the first record after those kept — the one the chain broke at, unless it broke at a
    /// missing record: check it before feeding it again. Memory holds 64 KiB of lines at a time; a store
    /// owned by another user than root, repaired by root, gets the file as its owner's (`adopt`).
    func saveCutRecords(after keep: UInt64, in txn: Transaction) throws -> String? {
        var file: DurableFile?
        var out: [UInt8] = []
        var visited: UInt64 = 0
        func save(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
            visited += 1
            if visited % Store.releaseInterval == 0 { env.releaseResidentPages() }
            let seq = key.count == 8 ? try? BigEndianUInt64.decode(key) : nil
            if file == nil {
                var now = timespec()
                clock_gettime(CLOCK_REALTIME, &now)  // names the file only
                let ms = Int64(now.tv_sec) * 1_000 + Int64(now.tv_nsec) / 1_000_000
                file = try DurableFile(
                    creating: env.path + "/cut-\(seq.map(String.init) ?? "key")-\(ms).jsonl", exclusive: true)
            }
            let event = seq.flatMap { seq in LogRecord(value).flatMap { try? EventCodec.decode(seq: seq, $0.payload) } }
            if let event {
                out.append(contentsOf: event.op.jsonLine.utf8)
            } else {
                let place: (String, JSONValue) =
                    seq.map { ("seq", .int(Int64(bitPattern: $0))) } ?? ("key", .string(HashChain.hex(Array(key))))
                out.append(
                    contentsOf: JSONValue.object([
                        ("cut", .string("undecodable log record")), place, ("bytes", .string(HashChain.hex(Array(value)))),
                    ]).jsonString.utf8)
            }
            out.append(0x0A)
            if out.count >= 64 << 10 {
                try file!.write(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        do {
            try txn.forEach(dbs.log.handle, from: BigEndianUInt64.encoded(keep + 1)) { key, value in
                if key.count == 8 { try save(key, value) }  // others are saved below, with the rest of their kind
                return true
            }
            try txn.forEach(dbs.log.handle) { key, value in
                if key.count != 8 || ((try? BigEndianUInt64.decode(key)) ?? 0) == 0 { try save(key, value) }
                return true
            }
            guard let file else { return nil }
            try file.write(out)
            try file.finish()
            if let owner = Self.ownerToAdopt(env.path) { Self.adopt(file.path, owner: owner) }
            return file.path
        } catch {
            file?.discard()
            let saving = error as? StoreError
            throw StoreError(
                code: saving?.code ?? .lmdb,
                message: "repair removed nothing: it could not save the log records it would remove (\(saving?.message ?? "\(error)"))",
                cause: saving?.cause ?? error, path: saving?.path ?? env.path)
        }
    }

    /// Replaces `proj/` by a compacted, synced copy of `source` (a scratch store's projections): written to
    /// `proj.repaired` (whatever a killed repair left there removed first), then the two directories
    /// exchanged in one step and the old one removed. Killed at any point, `proj/` is one whole
    /// environment, the old or the new. This store's own projection environment still maps the old files:
    /// the caller refuses further use of it. The new environment carries no flush marker: nothing in it was
    /// committed without sync (`FlushMarker`), and the next writer's open records it.
    private func swapProjections(from source: Environment) throws {
        let projPath = env.path + "/" + ProjectionDatabases.directory
        let next = projPath + ".repaired"
        removeDirectoryTree(next)
        // Whenever a signal stops the process, `next` holds garbage: the copy before the exchange (one
        // step), the old projections after it.
        let registered = Leftovers.register(next)
        defer { Leftovers.unregister(registered) }
        guard mkdir(next, 0o755) == 0 else {
            throw StoreError.system("cannot create \(next)", call: "mkdir", path: next)
        }
        do { try source.copy(to: next, durable: true) } catch {
            removeDirectoryTree(next)
            throw StoreError(
                code: .lmdb, message: "cannot copy the rebuilt projections to \(next): \(error)", cause: error)
        }
        if let owner = Self.ownerToAdopt(env.path) { Self.adopt(next, owner: owner) }
        do { try Environment.exchangeDirectories(next, projPath, parent: env.path) } catch {
            removeDirectoryTree(next)
            throw StoreError(code: .lmdb, message: "cannot swap in the rebuilt projections: \(error)", cause: error)
        }
        removeDirectoryTree(next)  // the old projections, gently (`removeFileGently`)
    }

    /// Deletes the keys of `db` from `from` (or the first) on for which `doomed` holds, collecting at most
    /// 65,536 at a time, so memory stays bounded however many go; `release` is called every
    /// `releaseInterval` keys visited. Returns how many were deleted.
    static func deleteKeys(
        in txn: WriteTransaction, _ db: DatabaseHandle, from: [UInt8]? = nil, release: () -> Void = {},
        _ doomed: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool
    ) throws -> Int {
        let chunk = 65_536
        var deleted = 0
        var resume = from
        var visited: UInt64 = 0
        while true {
            var keys: [[UInt8]] = []
            var next: [UInt8]?
            try txn.forEach(db, from: resume) { key, value in
                visited += 1
                if visited % Store.releaseInterval == 0 { release() }  // the map's pages read so far
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
