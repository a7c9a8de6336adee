public import LMDB
public import TeamLog

/// `teamlog audit`: verify the hash chain, replay the log into fresh projections and compare them with
/// the stored ones, table by table, in one read snapshot (so it runs beside a live writer).
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

    /// Seq of the snapshot audited.
    public var seq: UInt64
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
    /// Audits the committed store.
    public func audit(progress: ((Int) -> Void)? = nil) throws -> AuditReport {
        try env.read { txn in
            let meta = try dbs.readMeta(txn)
            let replay = try replay(in: txn, progress: progress)
            var report = AuditReport(seq: meta.lastSeq, events: replay.events, chainProblem: replay.problem,
                                     checkpointProblem: nil, tables: [])
            if replay.problem == nil {
                if UInt64(replay.events) != meta.lastSeq {
                    report.checkpointProblem = "checkpoint says seq \(meta.lastSeq) but the log ends at \(replay.events)"
                } else if replay.lastHash != meta.lastHash {
                    report.checkpointProblem = "checkpoint hash differs from the log's last hash"
                }
            }
            let stored = try storedProjections(in: txn)
            let rebuilt = ProjectionCodec.allRecords(replay.world)
            for table in ProjectionTable.allCases {
                let s = stored[table] ?? []
                let r = rebuilt[table] ?? []
                report.tables.append(AuditReport.TableResult(
                    table: table.rawValue, records: s.count, digest: Self.digest(s),
                    difference: Self.firstDifference(table, stored: s, replayed: r)))
            }
            return report
        }
    }

    static func digest(_ rows: [([UInt8], [UInt8])]) -> String {
        var chain = HashChain.genesis
        for (i, (k, v)) in rows.enumerated() {
            chain = (k + [0xFF] + v).withUnsafeBytes { HashChain.next(previous: chain, seq: UInt64(i), payload: $0) }
        }
        return String(HashChain.hex(chain).prefix(16))
    }

    /// The first key where stored and replayed records differ, in words.
    static func firstDifference(_ table: ProjectionTable, stored: [([UInt8], [UInt8])],
                                replayed: [([UInt8], [UInt8])]) -> String? {
        var i = 0
        var j = 0
        func name(_ key: [UInt8]) -> String {
            String(decoding: key.map { $0 == 0 ? UInt8(ascii: "/") : $0 }, as: UTF8.self)
        }
        while i < stored.count || j < replayed.count {
            if i < stored.count && j < replayed.count {
                let (sk, sv) = stored[i]
                let (rk, rv) = replayed[j]
                if sk == rk {
                    if sv != rv {
                        return "\(table.rawValue) \(name(sk)): stored \(describe(table, sk, sv)) vs replayed \(describe(table, rk, rv))"
                    }
                    i += 1
                    j += 1
                    continue
                }
                if sk.lexicographicallyPrecedes(rk) {
                    return "\(table.rawValue) \(name(sk)): stored \(describe(table, sk, sv)) but absent after replay"
                }
                return "\(table.rawValue) \(name(rk)): missing from the store; replay has \(describe(table, rk, rv))"
            }
            if i < stored.count {
                return "\(table.rawValue) \(name(stored[i].0)): stored but absent after replay"
            }
            return "\(table.rawValue) \(name(replayed[j].0)): missing from the store; replay has \(describe(table, replayed[j].0, replayed[j].1))"
        }
        return nil
    }

    /// A record's value in readable form (decoded when possible).
    static func describe(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) -> String {
        var w = World()
        let described: String? = try? key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                if table == .members {
                    // Needs its team to restore; decode the member alone.
                    let user = String(decoding: key.split(separator: 0, maxSplits: 1).last ?? [], as: UTF8.self)
                    let m = try ProjectionCodec.decodeMember(user: user, v)
                    return "{role \(m.role.rawValue), notify \(m.notify.rawValue), mutedUntil \(m.mutedUntil.map(String.init) ?? "none"), joinSeq \(m.joinSeq), slot \(m.slot)}"
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
