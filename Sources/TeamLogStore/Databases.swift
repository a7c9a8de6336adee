import Crypto
import LMDB
import TeamLog

/// The named databases of a store's log environment (the store directory itself).
///
/// - `log`: big-endian seq → encoded event + chained hash (appended with `MDB_APPEND`)
/// - `opIds`: opId → the first outcome: accepted seq, or the rejection (idempotent ingestion)
/// - `meta`: `format`, `config` and `head` (the last committed seq, its time and chained hash), and
///   `source` (the position in an external input stream, such as a JetStream stream sequence, that the
///   committed log has consumed through; written in the same transaction as the events it produced)
/// - `outbox`: big-endian source position → the records that input produced, waiting to be published
///   downstream (a transactional outbox: written with the events, deleted once the publish is confirmed)
///
/// The projections live in a second environment, `proj/` (`ProjectionDatabases`), written at checkpoints.
struct Databases {
    let log: Database<BigEndianUInt64, RawBytes>
    let opIds: Database<IdCodec, OpIdOutcomeCodec>
    let meta: Database<UTF8String, RawBytes>
    /// Absent in a store opened read-only that never had a source (stores made before it existed).
    private(set) var outbox: Database<BigEndianUInt64, RawBytes>?

    /// The layout of the databases and records this build reads and writes. 2: receipt tallies keep a
    /// receiver count (and only a directed message's receivers), receipts are `p.receiptReads` entries,
    /// ended memberships are `p.pastMembers` records. 3: the log and the projections in two environments
    /// (before, both in one).
    static let format: UInt64 = 3

    /// Opens the databases of an existing store, or (`creating` a config) lays out a new one — every
    /// database, the format marker and the settings — in **one** write transaction, so a store is either
    /// absent or complete, whenever the process dies.
    init(env: Environment, creating config: Config? = nil) throws {
        if let config {
            try env.write { txn in
                let meta = Database<UTF8String, RawBytes>(try txn.openHandle("meta"))
                for name in ["log", "opIds", "outbox"] {
                    _ = try txn.openHandle(name)
                }
                try txn.put(meta, "format", BigEndianUInt64.encoded(Self.format))
                try txn.put(meta, "config", Self.encode(config))
            }
        }
        // The format first, so an incompatible store is named as such rather than failing on a missing table.
        let meta: Database<UTF8String, RawBytes>
        do {
            meta = try env.open("meta", create: false)
        } catch let error as LMDBError where error.code == .notFound {
            throw Self.notAStore(env, "no meta database", cause: error)
        }
        let stored = try env.read { txn in try txn.get(meta, "format") }
        guard let stored else { throw Self.notAStore(env, "no format marker", cause: nil) }
        let version = stored.withUnsafeBytes { raw in (try? BigEndianUInt64.decode(raw)) ?? 0 }
        guard version == Self.format else {
            throw StoreError(
                code: .incompatibleFormat,
                message: "store \(env.path) has format \(version); this build reads format \(Self.format). Export it "
                    + "with the teamlog that wrote it (`teamlog log`) and ingest that into a new store", path: env.path)
        }
        self.meta = meta
        do {
            log = try env.open("log", create: false)
            opIds = try env.open("opIds", create: false)
        } catch let error as LMDBError where error.code == .notFound {
            throw Self.notAStore(env, "a database is missing", cause: error)
        }
        outbox = try? env.open("outbox", create: false)
        if outbox == nil && !env.options.readOnly { outbox = try env.open("outbox", create: true) }
    }

    /// The committed source position (0: none).
    func readSource(_ txn: Transaction) throws -> UInt64 {
        guard let bytes = try txn.get(meta, "source") else { return 0 }
        return try bytes.withUnsafeBytes { try BigEndianUInt64.decode($0) }
    }

    /// A directory whose LMDB file lacks teamlog's layout: never written, or not (or no longer) a store.
    private static func notAStore(_ env: Environment, _ what: String, cause: (any Error)?) -> StoreError {
        let message =
            env.lastTransactionID == 0
            ? "\(env.path) holds no teamlog store: its LMDB file was created but nothing was ever committed (an "
                + "interrupted creation); a writer (`teamlog ingest`) creates the store there"
            : "\(env.path) is not a teamlog store, or its LMDB header is damaged: its LMDB file (data.mdb) has "
                + "\(what). Nothing was written to it"
        return StoreError(code: .notAStore, message: message, cause: cause, path: env.path)
    }

    func readMeta(_ env: Environment) throws -> Meta {
        try env.read { txn in try readMeta(txn) }
    }

    func readMeta(_ txn: Transaction) throws -> Meta {
        do {
            var meta = Meta(lastSeq: 0, lastTs: 0, lastHash: HashChain.genesis, config: nil)
            if let bytes = try txn.get(self.meta, "head") {
                (meta.lastSeq, meta.lastTs, meta.lastHash) = try Self.decodePosition(bytes, what: "head")
            }
            if let bytes = try txn.get(self.meta, "config") {
                (meta.config, meta.configDamage) = Self.decodeConfig(bytes)
                meta.configUnchecked = bytes.first == 1
            }
            return meta
        }
    }

    func writeConfig(_ env: Environment, _ c: Config) throws {
        try env.write { txn in try txn.put(meta, "config", Self.encode(c)) }
    }

    /// The stored form of the settings: version 2, the three values, then the first 8 bytes of the SHA-256
    /// of what precedes them. The settings decide every later op (a team's member limit) and no hash chain
    /// covers them: a damaged byte would change decisions without a word, where the checksum refuses it.
    static func encode(_ c: Config) -> [UInt8] {
        var w = ByteWriter()
        w.u8(2)
        w.varint(UInt64(c.teamMaxMembers))
        w.varint(UInt64(c.superTeamMaxMembers))
        w.zigzag(c.membersSyncTimeoutMs)
        return w.bytes + Array(SHA256.hash(data: w.bytes).prefix(8))
    }

    /// The settings a stored record holds, or why it cannot be trusted. Version 1 (before the checksum)
    /// is read as it is; a writer rewrites it as version 2 (`Store.init`).
    static func decodeConfig(_ bytes: [UInt8]) -> (config: Config?, damage: String?) {
        guard let version = bytes.first, version == 1 || version == 2 else {
            return (nil, "has an unknown version (\(bytes.first.map(String.init) ?? "empty"))")
        }
        var body = bytes[...]
        if version == 2 {
            guard bytes.count > 9 else { return (nil, "is too short for its checksum") }
            body = bytes.dropLast(8)
            guard Array(SHA256.hash(data: Array(body)).prefix(8)) == Array(bytes.suffix(8)) else {
                return (nil, "does not match its checksum")
            }
        }
        do {
            return try Array(body).withUnsafeBytes { raw -> (config: Config?, damage: String?) in
                var r = ByteReader(raw)
                _ = try r.u8()
                var c = Config()
                c.teamMaxMembers = Int(try r.varint())
                c.superTeamMaxMembers = Int(try r.varint())
                c.membersSyncTimeoutMs = try r.zigzag()
                guard r.atEnd else { return (nil, "has bytes after its values") }
                return (c, nil)
            }
        } catch {
            return (nil, "has values that do not decode (\(error))")
        }
    }

    /// Writes the head: the last committed seq, its time and chained hash (in the batch's transaction).
    func writeHead(_ txn: WriteTransaction, _ m: Meta) throws {
        try txn.put(meta, "head", Self.encodePosition(seq: m.lastSeq, ts: m.lastTs, hash: m.lastHash))
    }

    /// A log position (seq, event time, chained hash) as stored, version byte first.
    static func encodePosition(seq: UInt64, ts: Int64, hash: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.u8(1)
        w.varint(seq)
        w.zigzag(ts)
        w.raw(hash)
        return w.bytes
    }

    static func decodePosition(_ bytes: [UInt8], what: String) throws -> (UInt64, Int64, [UInt8]) {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            guard try r.u8() == 1 else { throw StoreError(code: .corrupted, message: "unknown \(what) version") }
            return (try r.varint(), try r.zigzag(), Array(try r.raw(HashChain.size)))
        }
    }
}

/// The checkpoint and settings kept in `meta`.
struct Meta {
    var lastSeq: UInt64
    var lastTs: Int64
    var lastHash: [UInt8]
    var config: Config?
    /// Why the stored settings record cannot be trusted (`config` is then nil), if it cannot.
    var configDamage: String? = nil
    /// Whether the settings record is version 1, from before its checksum (a writer rewrites it).
    var configUnchecked = false
}
