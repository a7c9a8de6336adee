import LMDB
import TeamLog

/// The named databases of a store.
///
/// - `log`: big-endian seq → encoded event + chained hash (appended with `MDB_APPEND`)
/// - `opIds`: opId → the first outcome: accepted seq, or the rejection (idempotent ingestion)
/// - `meta`: `checkpoint` (last seq, time, hash) and `config`
/// - `p.<table>`: the projections, one record per `ProjectionKey`
struct Databases {
    let log: Database<BigEndianUInt64, RawBytes>
    let opIds: Database<IdCodec, OpIdOutcomeCodec>
    let meta: Database<UTF8String, RawBytes>
    let projections: [ProjectionTable: DatabaseHandle]

    /// The layout of the databases and records this build reads and writes.
    static let format: UInt64 = 1

    init(env: Environment, create: Bool) throws {
        // The format first, so an incompatible store is named as such rather than failing on a missing table.
        let meta: Database<UTF8String, RawBytes>
        do {
            meta = try env.open("meta", create: create)
        } catch let error as LMDBError where error.code == .notFound {
            throw StoreError("\(env.path) is not a teamlog store (no meta database)")
        }
        let stored = try env.read { txn in try txn.get(meta, "format") }
        if let stored {
            let version = stored.withUnsafeBytes { raw in (try? BigEndianUInt64.decode(raw)) ?? 0 }
            guard version == Self.format else {
                throw StoreError(
                    "store \(env.path) has format \(version); this build reads format \(Self.format). Export it with "
                        + "the teamlog that wrote it (`teamlog log`) and ingest that into a new store")
            }
        } else if create {
            try env.write { txn in try txn.put(meta, "format", BigEndianUInt64.encoded(Self.format)) }
        } else {
            throw StoreError("store \(env.path) has no format marker: not a teamlog store, or one never written")
        }
        self.meta = meta
        log = try env.open("log", create: create)
        opIds = try env.open("opIds", create: create)
        var p: [ProjectionTable: DatabaseHandle] = [:]
        for table in ProjectionTable.allCases {
            p[table] = try env.openHandle("p.\(table.rawValue)", create: create)
        }
        projections = p
    }

    func projection(_ table: ProjectionTable) -> DatabaseHandle { projections[table]! }

    func readMeta(_ env: Environment) throws -> Meta {
        try env.read { txn in try readMeta(txn) }
    }

    func readMeta(_ txn: Transaction) throws -> Meta {
        do {
            var meta = Meta(lastSeq: 0, lastTs: 0, lastHash: HashChain.genesis, config: nil)
            if let bytes = try txn.get(self.meta, "checkpoint") {
                try bytes.withUnsafeBytes { raw in
                    var r = ByteReader(raw)
                    guard try r.u8() == 1 else { throw StoreError("unknown checkpoint version") }
                    meta.lastSeq = try r.varint()
                    meta.lastTs = try r.zigzag()
                    meta.lastHash = Array(try r.raw(HashChain.size))
                }
            }
            if let bytes = try txn.get(self.meta, "config") {
                try bytes.withUnsafeBytes { raw in
                    var r = ByteReader(raw)
                    guard try r.u8() == 1 else { throw StoreError("unknown config version") }
                    var c = Config()
                    c.teamMaxMembers = Int(try r.varint())
                    c.superTeamMaxMembers = Int(try r.varint())
                    c.membersSyncTimeoutMs = try r.zigzag()
                    meta.config = c
                }
            }
            return meta
        }
    }

    func writeConfig(_ env: Environment, _ c: Config) throws {
        var w = ByteWriter()
        w.u8(1)
        w.varint(UInt64(c.teamMaxMembers))
        w.varint(UInt64(c.superTeamMaxMembers))
        w.zigzag(c.membersSyncTimeoutMs)
        try env.write { txn in try txn.put(meta, "config", w.bytes) }
    }

    func writeCheckpoint(_ txn: WriteTransaction, _ m: Meta) throws {
        var w = ByteWriter()
        w.u8(1)
        w.varint(m.lastSeq)
        w.zigzag(m.lastTs)
        w.raw(m.lastHash)
        try txn.put(meta, "checkpoint", w.bytes)
    }

    /// Loads every stored projection record into `world`, teams first (members need their team).
    func loadProjections(_ env: Environment, into world: inout World) throws {
        try env.read { txn in
            for table in ProjectionTable.allCases {
                try txn.forEach(projection(table)) { key, value in
                    try ProjectionCodec.restore(table, key: key, value: value, into: &world)
                    return true
                }
            }
        }
    }
}

/// The checkpoint and settings kept in `meta`.
struct Meta {
    var lastSeq: UInt64
    var lastTs: Int64
    var lastHash: [UInt8]
    var config: Config?
}
