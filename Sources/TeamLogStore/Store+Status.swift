import LMDB
public import TeamLog

/// `teamlog status`: where the log and the projections stand, and what the store holds.
public struct StoreStatus: Sendable {
    /// One named database and its size.
    public struct Table: Sendable {
        /// `log/<name>` or `proj/<name>`.
        public var name: String
        public var entries: Int
        /// Pages in use × page size.
        public var bytes: Int
    }

    /// The log's last committed seq and its event time.
    public var headSeq: UInt64
    public var headTs: Int64
    /// The projections' checkpoint: queries from other processes answer as of this seq.
    public var checkpointSeq: UInt64
    public var checkpointTs: Int64
    /// Committed ops not yet in the projections (`headSeq - checkpointSeq`; 0 for a verified copy, whose
    /// log holds no events).
    public var lag: UInt64 { headSeq > checkpointSeq ? headSeq - checkpointSeq : 0 }
    public var tables: [Table]
    /// Each environment's map size and bytes in use.
    public var logMapSize: Int
    public var logUsedBytes: Int
    public var projectionMapSize: Int
    public var projectionUsedBytes: Int
    /// Of the used bytes, pages on each environment's free list: reused by later writes before the file
    /// grows (a backup, compacted, leaves them out).
    public var logFreeBytes: Int
    public var projectionFreeBytes: Int
    /// The live bytes of both data files, about what a compacted copy (`backup`, `compact`) holds: used
    /// less free.
    public var liveBytes: Int { logUsedBytes - logFreeBytes + projectionUsedBytes - projectionFreeBytes }
    /// The pid of the process writing the store, if one is.
    public var writerPid: Int32?
    /// Whether the maps of the process that made this status read ahead on a page fault (`ReadAhead`), and
    /// the memory limit it judged that by (`Store.memoryLimit`). From `serve`'s `/v1/status`: the writer's
    /// own; from `teamlog status`: what a process opening the store here decides (the same rule).
    public var readAhead: Bool
    public var memoryLimitBytes: Int?
    /// Whether this is a verified copy (`teamlog audit --verified`): projections only, no log to append to.
    public var verifiedCopy = false
    /// Whether the projections are past the log's head in a store (not a verified copy): they hold events
    /// the log does not — a log cut under them (a `repair` during a copy), or files of two stores mixed.
    /// Queries refuse such a store (`Store.projectionsPastLog`); `teamlog repair` rebuilds them.
    public var projectionsPastLog: Bool { !verifiedCopy && checkpointSeq > headSeq }
    /// What maintenance left in the store's directory for a person to deal with (`StoreStatus.SetAside`).
    public var setAside: [SetAside] = []
    /// Where the last file `ingest` stands in its input, as its last commit recorded (`ingest --resume`
    /// goes on after it); `nil` when no file ingest recorded one.
    public var input: InputPosition?

    /// A file or directory maintenance left beside the store's data: the records a `repair` cut
    /// (`cut-*.jsonl`: feed them again with `teamlog ingest FILE`, or remove the file) or projections it set
    /// aside because they could not be opened (`proj.damaged-*`: for inspection; `compact` drops them).
    public struct SetAside: Sendable, Equatable {
        public var path: String
        /// `cutRecords` or `damagedProjections`.
        public var kind: String
    }

    /// The status as JSON.
    public var json: JSONValue {
        .object([
            ("headSeq", .int(Int64(headSeq))), ("headTs", .int(headTs)),
            ("checkpointSeq", .int(Int64(checkpointSeq))), ("checkpointTs", .int(checkpointTs)),
            ("lag", .int(Int64(lag))),
            (
                "tables",
                .array(
                    tables.map {
                        .object([
                            ("name", .string($0.name)), ("entries", .int(Int64($0.entries))),
                            ("bytes", .int(Int64($0.bytes))),
                        ])
                    })
            ),
            ("logMapSize", .int(Int64(logMapSize))), ("logUsedBytes", .int(Int64(logUsedBytes))),
            ("projectionMapSize", .int(Int64(projectionMapSize))),
            ("projectionUsedBytes", .int(Int64(projectionUsedBytes))),
            ("logFreeBytes", .int(Int64(logFreeBytes))), ("projectionFreeBytes", .int(Int64(projectionFreeBytes))),
            ("writerPid", writerPid.map { .int(Int64($0)) } ?? .null),
            ("readAhead", .bool(readAhead)), ("memoryLimitBytes", memoryLimitBytes.map { .int(Int64($0)) } ?? .null),
            ("verifiedCopy", .bool(verifiedCopy)),
            ("projectionsPastLog", .bool(projectionsPastLog)),
            ("setAside", .array(setAside.map { .object([("path", .string($0.path)), ("kind", .string($0.kind))]) })),
            (
                "input",
                input.map {
                    .object([
                        ("path", .string($0.path)), ("line", .int(Int64($0.line))), ("offset", .int(Int64($0.offset))),
                    ])
                } ?? .null
            ),
        ])
    }
}

extension Store {
    /// The bytes of each environment's used pages that are on its free list (reused by later writes before
    /// the file grows; a compaction gives them back), each read in a snapshot of its own.
    public func freeBytes() throws -> (log: Int, projections: Int) {
        (try env.read { try $0.freeBytes() }, try projectionEnv.read { try $0.freeBytes() })
    }

    /// The store's status from the committed state on disk (a live writer's checkpoint may be behind its
    /// head by up to its checkpoint interval).
    public func status() throws -> StoreStatus {
        let (head, logTables, logFree, input) = try env.read { txn in
            let head = try dbs.readMeta(txn)
            let input = try dbs.readInput(txn)
            let tables = try [("log", dbs.log.handle), ("opIds", dbs.opIds.handle), ("meta", dbs.meta.handle)].map {
                name, db in
                let stat = try txn.stat(db)
                return StoreStatus.Table(name: "log/\(name)", entries: stat.entries, bytes: stat.pages * stat.pageSize)
            }
            return (head, tables, try txn.freeBytes(), input)
        }
        let (checkpoint, projectionTables, projectionFree) = try projectionEnv.read { txn in
            let checkpoint = try pdbs.readCheckpoint(txn)
            let tables = try ProjectionTable.allCases.map { table in
                let stat = try txn.stat(pdbs.table(table))
                return StoreStatus.Table(
                    name: "proj/\(table.rawValue)", entries: stat.entries, bytes: stat.pages * stat.pageSize)
            }
            return (checkpoint, tables, try txn.freeBytes())
        }
        var status = StoreStatus(
            headSeq: head.lastSeq, headTs: head.lastTs, checkpointSeq: checkpoint.seq, checkpointTs: checkpoint.ts,
            tables: logTables + projectionTables, logMapSize: env.mapSize, logUsedBytes: env.usedBytes,
            projectionMapSize: projectionEnv.mapSize, projectionUsedBytes: projectionEnv.usedBytes,
            logFreeBytes: logFree, projectionFreeBytes: projectionFree,
            writerPid: WriterLock.holder(directory: env.path), readAhead: readAheadIsOn, memoryLimitBytes: memoryLimit,
            verifiedCopy: Self.isVerifiedCopy(env.path))
        status.setAside = Self.setAside(in: env.path)
        status.input = input
        return status
    }

    /// What maintenance left in the store's directory (`StoreStatus.SetAside`), sorted by name.
    static func setAside(in path: String) -> [StoreStatus.SetAside] {
        (directoryEntries(path) ?? []).sorted().compactMap { name in
            if name.hasPrefix("cut-") && name.hasSuffix(".jsonl") {
                return StoreStatus.SetAside(path: path + "/" + name, kind: "cutRecords")
            }
            if name.hasPrefix(ProjectionDatabases.directory + ".damaged-") {
                return StoreStatus.SetAside(path: path + "/" + name, kind: "damagedProjections")
            }
            return nil
        }
    }
}
