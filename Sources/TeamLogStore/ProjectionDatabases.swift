import LMDB
import TeamLog

/// The named databases of a store's projection environment (`<store>/proj/`).
///
/// - `meta`: `format` and `checkpoint` (the seq, time and chained hash of the log position the tables
///   are at)
/// - `p.<table>`: the projections, one record per `ProjectionKey`
///
/// A cache of the log: written at checkpoints by its own writer (so a checkpoint never holds up a log
/// commit), rebuilt from the log when missing, behind, or made by another format.
struct ProjectionDatabases {
    let meta: Database<UTF8String, RawBytes>
    /// Each table's handle, at its `ProjectionTable.rank`.
    private let handles: [DatabaseHandle]

    /// The layout of the projection records this build writes. A projection environment of another
    /// format is rebuilt from the log at open (it is a cache of it), so this moves independently of the
    /// log's `Databases.format`: 3 had receipt tallies without their read count; 4 stores it, so a tally
    /// loaded on its own knows the next receipt's ordinal; 5 keeps a dismissed team's member records and
    /// views as they were at the dismissal (4 ended every membership: O(members) records per dismissal).
    static let format: UInt64 = 5

    /// The subdirectory of the store that holds this environment.
    static let directory = "proj"

    /// Opens the databases, or (`create`) lays out a fresh environment in one write transaction: every
    /// table, the format and a checkpoint at seq 0.
    init(env: Environment, create: Bool) throws {
        if create {
            try env.write { txn in
                let meta = Database<UTF8String, RawBytes>(try txn.openHandle("meta"))
                for table in ProjectionTable.allCases { _ = try txn.openHandle("p.\(table.rawValue)") }
                try txn.put(meta, "format", BigEndianUInt64.encoded(Self.format))
                try txn.put(
                    meta, "checkpoint", Databases.encodePosition(seq: 0, ts: 0, hash: HashChain.genesis))
            }
        }
        do {
            let meta: Database<UTF8String, RawBytes> = try env.open("meta", create: false)
            self.meta = meta
            let stored = try env.read { txn in try txn.get(meta, "format") }
            let version = stored.flatMap { bytes in bytes.withUnsafeBytes { try? BigEndianUInt64.decode($0) } }
            guard version == Self.format else {
                throw StoreError(
                    code: .incompatibleFormat,
                    message: "the projections in \(env.path) have format \(version.map(String.init) ?? "none"); "
                        + "this build writes \(Self.format). They are a cache of the log: a writer rebuilds them "
                        + "at open (e.g. `teamlog ingest --store STORE /dev/null`)", path: env.path)
            }
            handles = try ProjectionTable.allCases.map { table in
                try env.openHandle("p.\(table.rawValue)", create: false)
            }
        } catch let error as LMDBError where error.code == .notFound {
            throw StoreError(
                code: .notAStore, message: "\(env.path) holds no teamlog projections", cause: error, path: env.path)
        }
    }

    func table(_ table: ProjectionTable) -> DatabaseHandle { handles[table.rank] }

    /// The log position the stored tables are at.
    func readCheckpoint(_ txn: Transaction) throws -> Checkpoint {
        guard let bytes = try txn.get(meta, "checkpoint") else {
            throw StoreError(code: .corrupted, message: "the projections have no checkpoint")
        }
        let (seq, ts, hash) = try Databases.decodePosition(bytes, what: "checkpoint")
        return Checkpoint(seq: seq, ts: ts, hash: hash)
    }

    func writeCheckpoint(_ txn: WriteTransaction, _ c: Checkpoint) throws {
        try txn.put(meta, "checkpoint", Databases.encodePosition(seq: c.seq, ts: c.ts, hash: c.hash))
    }

    /// The tables that stay resident whatever the working set's budget: presence, signaling channels and
    /// offline queues (they grow with users and calls, never with messages).
    static let alwaysResident: [ProjectionTable] = [.presence, .channels, .offline]

    /// Loads the always-resident tables into `world` (what opening a store loads).
    func loadAlwaysResident(_ txn: Transaction, into world: inout World) throws {
        for table in Self.alwaysResident {
            try txn.forEach(self.table(table)) { key, value in
                try ProjectionCodec.restore(table, key: key, value: value, into: &world)
                return true
            }
        }
    }

    /// Loads every stored projection record into `world`, teams first (members need their team).
    func loadProjections(_ txn: Transaction, into world: inout World) throws {
        for table in ProjectionTable.allCases {
            try txn.forEach(self.table(table)) { key, value in
                try ProjectionCodec.restore(table, key: key, value: value, into: &world)
                return true
            }
        }
    }
}

/// The log position a projection environment is at: every event through `seq` is applied, none after.
public struct Checkpoint: Sendable, Equatable {
    /// The last applied seq (0: none).
    public var seq: UInt64
    /// Its event time.
    public var ts: Int64
    /// Its chained hash (the genesis hash at seq 0), which the log must agree with.
    public var hash: [UInt8]
}
