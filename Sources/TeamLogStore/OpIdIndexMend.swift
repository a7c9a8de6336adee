import LMDB
import TeamLog

/// What `repair` did to the opId index (`Store.mendOpIdIndex`): the accepted entries made to say what the
/// log says. A rejection is the index's alone (the log keeps no rejected op) and is kept as it is, unless
/// an event carries its opId.
public struct OpIdIndexMend: Sendable, Equatable {
    /// Entries in the index afterwards.
    public var entries = 0
    /// Events whose opId the index lacked: indexed as accepted at their seq.
    public var added = 0
    /// Events whose opId's entry named another seq, a rejection, or did not decode: set to their seq.
    public var corrected = 0
    /// Entries no kept event backs: accepted at a seq the log does not hold or whose event carries another
    /// opId (or none), and entries that do not decode.
    public var removed = 0
    /// Accepted entries of the events a repair cut from the log (their opIds are free again): not damage.
    public var freedByCut = 0
    /// Events carrying an opId an earlier event carried (a log no writer makes: each opId is accepted
    /// once): the first event keeps the entry, and `audit` names the later one.
    public var repeated = 0

    public init(
        entries: Int = 0, added: Int = 0, corrected: Int = 0, removed: Int = 0, freedByCut: Int = 0, repeated: Int = 0
    ) {
        (self.entries, self.added, self.corrected, self.removed) = (entries, added, corrected, removed)
        (self.freedByCut, self.repeated) = (freedByCut, repeated)
    }

    /// Whether the index differed from the log (the cut's own entries aside).
    public var changed: Bool { added + corrected + removed > 0 }
}

extension Store {
    /// Makes the opId index agree with the log through `keep` (its last record, after any cut), in
    /// `txn`, the log environment's write transaction — the check `audit` makes (`OpIdIndexCheck`), acted
    /// on:
    /// 1. every event whose op carried an opId finds it accepted at its own seq (the first such event,
    ///    should two carry one): entries absent, at another seq, rejected or undecodable are set;
    /// 2. no other accepted entry remains: those at a seq past `keep` (`freedByCut` when `cut` is
    ///    true: the records a repair removed), at seq 0, or whose event carries another opId, and entries
    ///    that do not decode, are removed. Rejections stay.
    ///
    /// Memory is bounded: the walk's fixes are applied in chunks, and the index scan is `deleteKeys`'s.
    /// `release` is called as the scans go (the maps' pages read so far).
    static func mendOpIdIndex(
        in txn: WriteTransaction, _ dbs: Databases, through keep: UInt64, cut: Bool, release: () -> Void
    ) throws -> OpIdIndexMend {
        let index = dbs.opIds.handle
        let log = dbs.log.handle
        var mend = OpIdIndexMend()
        // 1. The log's events, in chunks of fixes applied between two walks (the walk's cursor reads the
        // log; the fixes write the index once it is closed).
        let chunk = 65_536
        var distinct = 0  // opIds the kept events carry, each counted once
        var resume: UInt64 = 1
        var visited: UInt64 = 0
        while resume <= keep {
            var fixes: [[UInt8]: UInt64] = [:]  // this chunk's, by opId: a repeat within it finds the first
            var next: UInt64?
            try txn.forEach(log, from: BigEndianUInt64.encoded(resume)) { key, value in
                guard key.count == 8, let seq = try? BigEndianUInt64.decode(key), seq <= keep else { return false }
                visited += 1
                if visited % Store.releaseInterval == 0 { release() }
                guard let payload = LogRecord(value)?.payload, case let carried? = try? EventCodec.opIdBytes(payload)
                else { return true }
                let opId = Array(carried)
                if fixes[opId] != nil {
                    mend.repeated += 1
                    return true
                }
                let found: OpIdOutcome?? = try txn.withValue(index, key: carried) { value in
                    value.map { try? OpIdOutcomeCodec.decode($0) }
                }
                switch found {
                case .accepted(let indexed)?? where indexed == seq:
                    distinct += 1
                    return true
                case .accepted(let indexed)?? where indexed < seq:
                    // An earlier event carrying the same opId keeps it.
                    if try OpIdIndexCheck.opId(carriedAt: indexed, in: txn, log: log) == opId {
                        mend.repeated += 1
                        return true
                    }
                    mend.corrected += 1
                case nil:
                    mend.added += 1
                default:
                    mend.corrected += 1
                }
                distinct += 1
                fixes[opId] = seq
                if fixes.count == chunk {
                    next = seq + 1
                    return false
                }
                return true
            }
            for (opId, seq) in fixes {
                try txn.put(index, key: opId, value: OpIdOutcomeCodec.encoded(.accepted(seq: seq)))
            }
            guard let next else { break }
            resume = next
        }

        // 2. The index: what no kept event backs. An accepted entry at a seq the log holds is checked
        // against its event only when the counts say one is left over (a lookup of the log per entry).
        var accepted = 0
        let dropped = try deleteKeys(in: txn, index, release: release) { _, value in
            switch try? OpIdOutcomeCodec.decode(value) {
            case nil: return true
            case .rejected?: return false
            case .accepted(let seq)?:
                if seq == 0 { return true }
                if seq > keep {
                    if cut { mend.freedByCut += 1 }
                    return true
                }
                accepted += 1
                return false
            }
        }
        mend.removed = dropped - mend.freedByCut
        if accepted != distinct {
            // Every accepted entry left is at a seq of 1...keep (the scan above removed the rest).
            mend.removed += try deleteKeys(in: txn, index, release: release) { key, value in
                guard case .accepted(let seq)? = try? OpIdOutcomeCodec.decode(value) else { return false }
                guard case let carried?? = try? OpIdIndexCheck.opId(carriedAt: seq, in: txn, log: log) else { return true }
                return !carried.elementsEqual(key)
            }
        }
        mend.entries = Int(try txn.stat(index).entries)
        return mend
    }
}
