import Crypto
import LMDB
public import TeamLog
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `teamlog audit`: verify the hash chain, replay the log into a scratch store and compare its projections
/// with the stored ones, table by table. It reads one snapshot of the projections and then one of the log
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
    /// The log's events the audit reached (verified from seq 1; replayed from seq 1, or after `baseSeq`).
    public var events: Int
    /// With `audit(base:)`: the base's checkpoint seq, which the replay started from.
    public var baseSeq: UInt64?
    /// Events replayed: `events`, less the base's.
    public var replayedEvents: Int { events - Int(baseSeq ?? 0) }
    /// What the replay's working set did (evictions, lookups of evicted units).
    public var replay = WorkingSetStats()
    /// With `audit(base:keepingVerifiedCopyIn:)`, a clean audit: the verified copy its replay left — or why
    /// it could not be kept (`verifiedCopyProblem`: a full disk, say; the audit's verdict stands).
    public var verifiedCopy: String?
    public var verifiedCopyProblem: String?
    /// The hash chain's first problem, if any.
    public var chainProblem: Store.ChainProblem?
    /// A checkpoint that disagrees with the log.
    public var checkpointProblem: String?
    /// A settings record that cannot be trusted (its checksum does not match): the settings decided every
    /// op, and no hash chain covers them.
    public var settingsProblem: String?
    public var tables: [TableResult]
    /// The opId index against the log (`OpIdIndexCheck`): what re-sent ops are answered from.
    public var opIds = OpIdIndexReport()

    /// False when a chain broken before the checkpoint stopped the replay there: the stored projections (at
    /// the checkpoint) against a replay that ended early differ in every table, which says nothing more.
    public var comparedTables: Bool { chainProblem.map { $0.seq > seq } ?? true }

    /// True when the chain, the checkpoint, the settings, the opId index and every table are sound.
    public var ok: Bool {
        chainProblem == nil && checkpointProblem == nil && settingsProblem == nil && opIds.difference == nil
            && tables.allSatisfy { $0.difference == nil }
    }
}

extension Store {
    /// Audits the committed store: the whole hash chain to the head, and the stored projections against a
    /// replay of the log through their checkpoint into a scratch store (no fsync, in `$TMPDIR`, removed
    /// afterwards), compared table by table as two key-ordered cursor streams. Memory holds the replay's
    /// working state only, nothing that grows with the history.
    public func audit(progress: ((Int) -> Void)? = nil) throws -> AuditReport {
        try audit(progress: progress, limits: ReplayLimits())
    }

    /// Audits from `base`'s projections instead of from nothing: the hash chain is still checked from
    /// seq 1 to the head, but only the events after the base's checkpoint are replayed, onto a copy of the
    /// base's projections, before the comparison — minutes instead of hours for a long history. What it
    /// proves: this store's projections equal `base`'s advanced by this log's events after the base's
    /// checkpoint, and the base was made from this log (the base's checkpoint hash is this log's at that
    /// seq). It vouches for the whole history only as far as `base` does: use a copy (`teamlog backup`)
    /// that a full `audit` found clean, and roll forward (back up again, audit the new copy from the old).
    ///
    /// Throws when `base` cannot serve: other settings, projections ahead of this store's, or a checkpoint
    /// hash that is not this log's at its seq (a copy of another store — or this log was changed at or
    /// before that seq, which a full `audit` names).
    public func audit(base: Store, progress: ((Int) -> Void)? = nil) throws -> AuditReport {
        try audit(progress: progress, limits: ReplayLimits(), base: base)
    }

    /// Audits as `audit(progress:)` — or from `base` as `audit(base:progress:)` when given — and, given a
    /// `directory` and a clean audit, keeps its replayed projections there as a verified copy at the
    /// checkpoint audited (`keepVerifiedCopy`; `AuditReport.verifiedCopy`): the base of the next audit
    /// (`newestCopy(at:atOrBefore:excluding:verifiedOnly:)`), which then replays only the log after it.
    ///
    /// `cacheBytes`: the replay's working-set budget (`ReplayLimits.defaultBudgetBytes` when `nil`, as
    /// `teamlog audit --cache-mb` sets it). A larger one evicts and reloads less: more memory, a faster
    /// audit (docs/store-design.md, "Audit and repair memory").
    public func audit(
        base: Store?, keepingVerifiedCopyIn directory: String?, cacheBytes: Int? = nil,
        progress: ((Int) -> Void)? = nil
    ) throws -> AuditReport {
        if let directory { try Self.refuseInside(directory, of: env.path, "verified copies' directory") }
        return try audit(progress: progress, limits: ReplayLimits(cacheBytes: cacheBytes), base: base, keep: directory)
    }

    /// `audit` with the replay's checkpoint interval and budget given (tests make them small).
    func audit(progress: ((Int) -> Void)? = nil, limits: ReplayLimits, base: Store? = nil, keep: String? = nil)
        throws -> AuditReport
    {
        // The writer's own store audits its committed state; and no checkpoint of this process may grow
        // the projections' map while they are read.
        if writerLock != nil && refusal == nil { try checkpointNow() }
        finishCheckpoint()
        let baseCheckpoint = try base.map { base in try base.projectionEnv.read { try base.pdbs.readCheckpoint($0) } }
        if let base, base.world.config != world.config { throw Self.baseSettingsMismatch }
        // A clean audit's scratch store, kept (`keep`) once the snapshots below are closed: a live writer's
        // checkpoints reuse no page freed while one is open, and the copy takes seconds.
        var verified: ScratchStore?
        defer { verified?.remove() }
        var report = try projectionEnv.read { ptxn in
            let checkpoint = try pdbs.readCheckpoint(ptxn)
            return try env.read { txn in
                let meta = try dbs.readMeta(txn)
                if let baseCheckpoint { try Self.checkBase(baseCheckpoint, against: checkpoint, log: self, txn) }
                let scratch = try makeScratch(projectionsOnly: true, limits: limits, base: base)
                defer { if verified !== scratch { scratch.remove() } }
                let opIds = OpIdIndexCheck(index: dbs.opIds.handle, log: dbs.log.handle)
                let after = baseCheckpoint?.seq ?? 0
                // From a base, the opIds of the events in its history (which the replay only hashes) are
                // looked up beside the replay, on a thread of their own: while the chain walk hashes them
                // the applying thread has nothing to do, so the lookups would otherwise add their time.
                let snapshot = txn.snapshotID
                let (_, early) = try inParallel(
                    {
                        try replay(
                            into: scratch, in: txn, upTo: checkpoint.seq, after: after,
                            batchSize: limits.batchSize, checking: opIds, progress: progress)
                    },
                    { () throws -> OpIdIndexCheck? in
                        guard after > 0 else { return nil }
                        return try self.env.concurrentRead { other -> OpIdIndexCheck? in
                            guard other.snapshotID == snapshot else { return nil }
                            return try self.checkOpIds(through: after, in: other)
                        } ?? nil
                    })
                if after > 0 { opIds.follow(try early ?? checkOpIds(through: after, in: txn)) }
                var report = AuditReport(
                    seq: checkpoint.seq, events: scratch.events, baseSeq: baseCheckpoint?.seq,
                    chainProblem: scratch.problem, checkpointProblem: nil, tables: [])
                report.replay = scratch.store.workingSetStats
                report.settingsProblem = settingsDamage
                if scratch.problem == nil {
                    report.checkpointProblem = Self.positionProblem(
                        checkpoint, records: UInt64(scratch.events), lastHash: scratch.lastHash)
                }
                // The opId index is read beside the first group of tables, on this thread (its snapshot).
                let indexEntries = Int(try txn.stat(dbs.opIds.handle).entries)
                report.tables = try compareTables(
                    ptxn, with: scratch.store,
                    alongside: (
                        indexEntries,
                        { [env] in
                            try opIds.scan(txn, headSeq: meta.lastSeq) { env.releaseResidentPages() }
                        }
                    ))
                report.headSeq = meta.lastSeq
                // The log after the checkpoint: its chain, and the head naming its end.
                var wholeLog = false
                if report.chainProblem == nil && report.checkpointProblem == nil {
                    let tail = try walkChain(in: txn, after: checkpoint.seq, hash: scratch.lastHash) { seq, payload in
                        try opIds.record(seq: seq, payload: payload, in: txn)
                        return nil
                    }
                    report.chainProblem = tail.problem
                    if tail.problem == nil {
                        report.checkpointProblem =
                            Self.checkpointProblem(meta, records: tail.last, lastHash: tail.hash)?.message
                        wholeLog = tail.last == meta.lastSeq
                    }
                }
                report.opIds = try opIds.report(txn, wholeLog: wholeLog)
                if report.ok && keep != nil { verified = scratch }
                return report
            }
        }
        if let keep, let verified {
            do { report.verifiedCopy = try keepVerifiedCopy(verified, report: report, base: base, in: keep) } catch {
                report.verifiedCopyProblem = "\(error)"
            }
        }
        return report
    }

    /// A base store made with other settings than this one (`audit(base:)`, `replayIntoScratch(base:)`).
    static var baseSettingsMismatch: StoreError {
        StoreError(
            code: .configMismatch,
            message: "the base store was created with other settings than this one: it cannot be its copy")
    }

    /// Refuses a base (`audit(base:)`) whose projections are ahead of this store's, or whose checkpoint
    /// hash is not the one this log's record at that seq carries.
    static func checkBase(_ base: Checkpoint, against stored: Checkpoint, log: Store, _ txn: Transaction) throws {
        if base.seq > stored.seq {
            throw StoreError(
                code: .other,
                message: "the base's projections are at seq \(base.seq), past this store's (\(stored.seq)): "
                    + "audit a newer store from an older copy")
        }
        try checkBaseHash(base, log: log, txn)
    }

    /// Refuses a base (`audit(base:)`, `replayIntoScratch(base:)`) whose checkpoint hash is not the one
    /// this log's record at that seq carries: the base was not made from this log.
    static func checkBaseHash(_ base: Checkpoint, log: Store, _ txn: Transaction) throws {
        guard base.seq > 0 else { return }
        guard let hash = try log.recordHash(base.seq, in: txn), hash == base.hash else {
            throw StoreError(
                code: .other,
                message: "the base's checkpoint hash at seq \(base.seq) is not this log's record there: the base is "
                    + "not a copy of this store, or this log was changed at or before that seq (a full `teamlog audit` names where)"
            )
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

    /// The opId index checked against the events of the log from seq 1 through `seq` (in snapshot `txn`),
    /// read without the hash chain (the replay's walk checks it): the events before an audit's base.
    func checkOpIds(through seq: UInt64, in txn: Transaction) throws -> OpIdIndexCheck {
        let check = OpIdIndexCheck(index: dbs.opIds.handle, log: dbs.log.handle)
        try txn.forEach(dbs.log.handle, from: BigEndianUInt64.encoded(1)) { key, value in
            guard key.count == 8, let at = try? BigEndianUInt64.decode(key), at <= seq else { return false }
            if at % Store.releaseInterval == 0 { env.releaseResidentPages() }
            // A record too short for its hash is the chain walk's to report.
            if let record = LogRecord(value) { try check.record(seq: at, payload: record.payload, in: txn) }
            return true
        }
        return check
    }

    /// Compares every stored table (snapshot `ptxn` of `projectionEnv`) with the replayed store's, on two
    /// threads when the second can read the same snapshot: the tables split in two groups of about equal
    /// record counts (the cost of a table is about its records). Results in `ProjectionTable` order.
    ///
    /// `alongside`: other work of about `records` records' cost, done on this thread before its group (whose
    /// share of the tables is smaller by as much).
    func compareTables(
        _ ptxn: Transaction, with replayed: Store, alongside: (records: Int, work: () throws -> Void)? = nil
    ) throws -> [AuditReport.TableResult] {
        let projectionSnapshot = ptxn.snapshotID
        var sizes: [ProjectionTable: Int] = [:]
        for table in ProjectionTable.allCases { sizes[table] = Int(try ptxn.stat(pdbs.table(table)).entries) }
        var groups: [[ProjectionTable]] = [[], []]
        var load = [alongside?.records ?? 0, 0]
        for table in ProjectionTable.allCases.sorted(by: { sizes[$0]! > sizes[$1]! }) {
            let g = load[0] <= load[1] ? 0 : 1
            groups[g].append(table)
            load[g] += sizes[table]!
        }
        let compare = { (tables: [ProjectionTable], stored: Transaction) throws -> [AuditReport.TableResult] in
            try replayed.projectionEnv.read { rtxn in
                try tables.map { try self.compareTable($0, stored: stored, replayed: rtxn, of: replayed) }
            }
        }
        let (first, second) = try inParallel(
            {
                try alongside?.work()
                return try compare(groups[0], ptxn)
            },
            {
                try self.projectionEnv.concurrentRead { other in
                    other.snapshotID == projectionSnapshot ? try compare(groups[1], other) : nil
                } ?? nil
            })
        let results = first + (try second ?? compare(groups[1], ptxn))
        return ProjectionTable.allCases.map { table in results.first { $0.table == table.rawValue }! }
    }

    /// Merge-walks one stored table and the replayed store's same table in key order: the stored records
    /// are counted and digested (SHA-256 over length-prefixed keys and values), and the first difference is
    /// kept — a key in both with other values, a stored key the replay does not have, or a replayed key
    /// missing from the store — with its key and values. Neither table is copied.
    func compareTable(_ table: ProjectionTable, stored: Transaction, replayed: Transaction, of replayedStore: Store)
        throws -> AuditReport.TableResult
    {
        var digester = TableDigester()
        var difference: String?
        let name = table.rawValue
        try stored.withCursor(pdbs.table(table)) { sc in
            try replayed.withCursor(replayedStore.pdbs.table(table)) { rc in
                var s = try sc.first()
                var r = try rc.first()
                while let (key, value) = s {
                    digester.add(key, value)
                    if difference == nil {
                        let order = r.map { Self.compareKeys(key, $0.0) } ?? -1
                        if order == 0, let (_, rv) = r {
                            if !Self.sameBytes(value, rv) {
                                let k = Array(key)
                                difference =
                                    "\(name) \(Self.keyName(table, k)): \(Self.describeDifference(table, k, stored: Array(value), replayed: Array(rv)))"
                            }
                            r = try rc.next()
                        } else if order < 0 {
                            let k = Array(key)
                            difference =
                                "\(name) \(Self.keyName(table, k)): stored \(Self.describe(table, k, Array(value))) but absent after replay"
                        } else if let (rk, rv) = r {
                            let k = Array(rk)
                            difference =
                                "\(name) \(Self.keyName(table, k)): missing from the store; replay has \(Self.describe(table, k, Array(rv)))"
                        }
                    }
                    if UInt64(digester.records) % Store.releaseInterval == 0 {
                        // Both tables' pages read so far stay resident otherwise: their whole size by the end.
                        projectionEnv.releaseResidentPages()
                        replayedStore.projectionEnv.releaseResidentPages()
                    }
                    s = try sc.next()
                }
                if difference == nil, let (rk, rv) = r {
                    let k = Array(rk)
                    difference =
                        "\(name) \(Self.keyName(table, k)): missing from the store; replay has \(Self.describe(table, k, Array(rv)))"
                }
            }
        }
        return AuditReport.TableResult(
            table: name, records: digester.records, digest: digester.digest, difference: difference)
    }

    /// The records and digest of one stored table (snapshot `txn` of `projectionEnv`), as an audit reports
    /// them; its pages are dropped as they are read.
    func tableDigest(_ table: ProjectionTable, _ txn: Transaction) throws -> (records: Int, digest: String) {
        var digester = TableDigester()
        try txn.forEach(pdbs.table(table)) { key, value in
            digester.add(key, value)
            if UInt64(digester.records) % Store.releaseInterval == 0 { projectionEnv.releaseResidentPages() }
            return true
        }
        return (digester.records, digester.digest)
    }

    /// Whether two byte strings are equal.
    static func sameBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }

    /// LMDB's default key order (bytes compared as unsigned, a prefix first): negative, zero or positive.
    static func compareKeys(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = min(a.count, b.count)
        if common > 0 {
            let order = memcmp(a.baseAddress!, b.baseAddress!, common)
            if order != 0 { return Int(order) }
        }
        return a.count - b.count
    }

    /// A key as text for a terminal: its 0x00 separators shown as `/`, other control bytes as `\xNN`, and
    /// an index table's big-endian seq (its last 8 bytes) as `seq N` — raw, the seq's bytes (a 0x0A among
    /// them) went to the terminal as they were.
    static func keyName(_ table: ProjectionTable, _ key: [UInt8]) -> String {
        var text = key[...]
        var seq: UInt64?
        if [.counted, .own, .directed].contains(table) && key.count >= 9 && key[key.count - 9] == 0 {
            seq = key.suffix(8).reduce(0) { $0 << 8 | UInt64($1) }
            text = key.dropLast(9)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        for byte in text {
            switch byte {
            case 0: bytes.append(UInt8(ascii: "/"))
            case 0x01..<0x20, 0x7F: bytes += Array("\\x".utf8) + Array(HashChain.hex([byte]).utf8)
            default: bytes.append(byte)
            }
        }
        let name = String(decoding: bytes, as: UTF8.self)
        return seq.map { "\(name)/seq \($0)" } ?? name
    }

    /// Two values of a key in readable form; when the decoded forms read the same (a field the form leaves
    /// out, or a byte no field decodes from), the bytes of both too.
    static func describeDifference(_ table: ProjectionTable, _ key: [UInt8], stored: [UInt8], replayed: [UInt8]) -> String {
        let (a, b) = (describe(table, key, stored), describe(table, key, replayed))
        guard a == b else { return "stored \(a) vs replayed \(b)" }
        return "stored \(a) vs replayed \(b), which read the same: bytes stored \(HashChain.hex(stored)) vs replayed "
            + HashChain.hex(replayed)
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
                    // Every field the record holds: a difference in one left out (the avatar, say) showed
                    // two values that read the same.
                    let fields: [(String, Any)] = [
                        ("kind", t.kind), ("name", t.name), ("owner", t.owner), ("intro", t.intro),
                        ("announcement", t.announcement), ("avatar", t.avatar), ("ext", t.ext),
                        ("joinMode", t.joinMode), ("inviteMode", t.inviteMode), ("beInviteMode", t.beInviteMode),
                        ("updateInfoMode", t.updateInfoMode), ("muted", t.muted), ("dismissed", t.dismissed),
                        ("createdSeq", t.createdSeq), ("createdTs", t.createdTs),
                    ]
                    return "{" + fields.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + "}"
                }
                return nil
            }
        }
        return described ?? HashChain.hex(value)
    }
}

/// An audit's digest of a table: SHA-256 over its records in key order, each its key's and value's lengths
/// (32-bit) then the key and the value; shown as its first 16 hex digits (zeros for an empty table).
///
/// The records' bytes are gathered in `pending` and hashed `flushBytes` at a time (the same bytes in the
/// same order: the same digest): three `SHA256.update` calls per record, each through swift-crypto's
/// context and BoringSSL's block buffering, were two thirds of the instructions of an audit's comparison
/// (callgrind of a 98,135-event audit: 823M of the comparison's 1,256M).
struct TableDigester {
    private var hasher = SHA256()
    private var pending: [UInt8] = []
    private(set) var records = 0

    /// Bytes gathered before they are hashed.
    private static let flushBytes = 1 << 16

    mutating func add(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        records += 1
        if pending.capacity == 0 { pending.reserveCapacity(Self.flushBytes + 4_096) }
        var lengths = (UInt32(key.count), UInt32(value.count))
        withUnsafeBytes(of: &lengths) { pending.append(contentsOf: $0) }
        pending.append(contentsOf: key)
        pending.append(contentsOf: value)
        if pending.count >= Self.flushBytes { flush() }
    }

    private mutating func flush() {
        pending.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        pending.removeAll(keepingCapacity: true)
    }

    var digest: String {
        guard records > 0 else { return String(repeating: "0", count: 16) }
        var copy = self
        copy.flush()
        return String(HashChain.hex(copy.hasher.finalize().withUnsafeBytes { Array($0) }).prefix(16))
    }
}

extension AuditReport {
    /// The report as JSON (`teamlog audit --json`): `ok`, the positions, every finding (`null` when there
    /// is none), `comparedTables` and every table with its records, digest and difference. `seconds`: the audit's wall time, for its `eventsPerSecond` (of the events replayed).
    public func json(seconds: Double? = nil) -> JSONValue {
        let text = { (s: String?) in s.map(JSONValue.string) ?? .null }
        var fields: [(String, JSONValue)] = [
            ("ok", .bool(ok)), ("checkpointSeq", .int(Int64(seq))), ("headSeq", .int(Int64(headSeq))),
            ("events", .int(Int64(events))), ("baseSeq", baseSeq.map { .int(Int64($0)) } ?? .null),
            ("replayedEvents", .int(Int64(replayedEvents))),
        ]
        if let seconds {
            fields.append(("seconds", .double((seconds * 1_000).rounded() / 1_000)))
            fields.append(("eventsPerSecond", .int(Int64(Double(replayedEvents) / max(seconds, 1e-9)))))
        }
        fields += [
            (
                "chain",
                chainProblem.map { .object([("seq", .int(Int64($0.seq))), ("problem", .string($0.message))]) } ?? .null
            ),
            ("checkpointProblem", text(checkpointProblem)), ("settingsProblem", text(settingsProblem)),
            (
                "opIds",
                .object([
                    ("entries", .int(Int64(opIds.entries))), ("accepted", .int(Int64(opIds.accepted))),
                    ("eventsWithOpId", .int(Int64(opIds.eventsWithOpId))), ("difference", text(opIds.difference)),
                ])
            ),
            ("comparedTables", .bool(comparedTables)),
            (
                // What the replay's working set did within its budget (`audit --cache-mb`).
                "replay",
                .object([
                    ("budgetBytes", .int(Int64(replay.budgetBytes))), ("evictions", .int(Int64(replay.evictions))),
                    ("sweeps", .int(Int64(replay.sweeps))), ("lookups", .int(Int64(replay.lookups))),
                    ("loads", .int(Int64(replay.loads))),
                ])
            ),
            (
                "tables",
                .array(
                    tables.map {
                        .object([
                            ("table", .string($0.table)), ("records", .int(Int64($0.records))),
                            ("digest", .string($0.digest)), ("difference", text($0.difference)),
                        ])
                    })
            ),
            ("verifiedCopy", text(verifiedCopy)), ("verifiedCopyProblem", text(verifiedCopyProblem)),
        ]
        return .object(fields)
    }
}
