import LMDB
import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Verified copies (`teamlog audit --verified DIR`): the projections a clean audit replayed, kept in a
/// directory as the base of the next audit, so that a daily audit replays only the day's events and still
/// vouches for the whole history.
///
/// A full audit replays the log from seq 1 into a scratch store and finds its tables equal to the stored
/// ones. The scratch store then *is* a copy of the store's projections at their checkpoint — made by the
/// replay, not copied from the store — and `audit(base:)` from it proves the next checkpoint's tables equal
/// it advanced by the log's events since. Each copy in the chain was made by a replay from the one before
/// (or from seq 1), each audit checks the hash chain from seq 1, so the newest copy vouches for the whole
/// history as a full audit does; an operator's backups (`--base`) vouch for it only as far as the
/// operator audited them.
///
/// A verified copy is a directory `verified-<checkpoint seq, 20 digits>` holding the replay's projection
/// environment (compacted and synced, its checkpoint carrying the audited log's seq, time and hash), a log
/// environment that holds no events (the settings only), and a `VERIFIED` file describing the audit that
/// made it (JSON). It is written under a temporary name and renamed into place when whole. Readers open it
/// like a backup — as the base of `audit`, `--at SEQ --base`, `serve --at-base` — but a writer refuses it:
/// it has no log to append to.
extension Store {
    /// The file that marks a directory as a verified copy.
    public static let verifiedMarker = "VERIFIED"

    /// The name of the verified copy at checkpoint `seq`: sorts by seq.
    static func verifiedCopyName(_ seq: UInt64) -> String {
        let digits = String(seq)
        return "verified-" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    /// Whether the directory `path` is a verified copy (holds the marker).
    public static func isVerifiedCopy(_ path: String) -> Bool {
        access(path + "/" + verifiedMarker, F_OK) == 0
    }

    /// Why this store's projections cannot be queried, if they are past its log's head (and it is no
    /// verified copy, whose log is empty by design): they hold events the log does not — a log cut under
    /// them, or files of two stores mixed — and answers from them would name events no log has.
    public func projectionsPastLog() throws -> StoreError? {
        guard !Self.isVerifiedCopy(env.path) else { return nil }
        let head = try head().seq
        guard checkpoint.seq > head else { return nil }
        return StoreError(
            code: .brokenChain,
            message: "the projections of \(env.path) are at seq \(checkpoint.seq) but its log ends at \(head): "
                + "they hold events the log does not; run `teamlog repair` to rebuild them from the log",
            path: env.path)
    }

    /// Refuses `what` (a backup, a compaction) of the verified copy at `path`: their copies leave the
    /// `VERIFIED` file behind and would be a store whose projections are ahead of its empty log.
    static func refuseVerifiedCopy(_ path: String, _ what: String) throws {
        guard isVerifiedCopy(path) else { return }
        throw StoreError(
            code: .other,
            message: "\(path) is a verified copy (`teamlog audit --verified`), compacted already: \(what) would "
                + "lose its VERIFIED file; copy the directory as it is (cp -a) instead", path: path)
    }

    /// Keeps the scratch store of a clean audit as the verified copy at `report.seq` in `directory`
    /// (created when missing), unless one is there already. Returns its path.
    /// `base`: the copy the audit started from, recorded in the `VERIFIED` file (a backup given as `--base`
    /// is no verified copy: the new copy vouches for the history only as far as that backup does).
    func keepVerifiedCopy(_ scratch: ScratchStore, report: AuditReport, base: Store?, in directory: String) throws
        -> String
    {
        precondition(report.ok, "only a clean audit's replay is kept")
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw StoreError.system("cannot create \(directory)", call: "mkdir", path: directory)
        }
        let final = directory + "/" + Self.verifiedCopyName(report.seq)
        if Self.isVerifiedCopy(final) { return final }
        // Its checkpoint carries the audited log's hash, which `checkBaseHash` asks of a base.
        try scratch.checkpointAtSource()
        // Named with this process's id: two audits keeping the same seq at once write apart.
        let partial = directory + "/.partial-" + Self.verifiedCopyName(report.seq) + "-\(getpid())"
        removeDirectoryTree(partial)  // what a killed audit of this pid left
        // Removed by a signal that stops the process while the copy is written (before the rename).
        let leftover = Leftovers.register(partial)
        defer { Leftovers.unregister(leftover) }
        do {
            // Both environments, compacted and synced, as a backup of the scratch store (which removes
            // what it wrote when it fails).
            _ = try scratch.store.backup(to: partial)
            let marker = try DurableFile(creating: partial + "/" + Self.verifiedMarker)
            try marker.write(Array((verifiedDescription(report, hash: scratch.lastHash, base: base) + "\n").utf8))
            try marker.finish()  // and `partial`'s entries
            guard rename(partial, final) == 0 else {
                // Another audit kept the same seq meanwhile: its copy serves.
                if (errno == ENOTEMPTY || errno == EEXIST) && Self.isVerifiedCopy(final) {
                    removeDirectoryTree(partial)
                    return final
                }
                throw StoreError.system("cannot rename \(partial) to \(final)", call: "rename", path: final)
            }
            try Environment.syncDirectory(directory)
        } catch {
            removeDirectoryTree(partial)
            throw error
        }
        return final
    }

    /// The `VERIFIED` file's JSON: what was audited and how.
    private func verifiedDescription(_ report: AuditReport, hash: [UInt8], base: Store?) -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)  // when the copy was made: not part of any projection
        return JSONValue.object([
            ("checkpointSeq", .int(Int64(report.seq))),
            ("checkpointHash", .string(HashChain.hex(hash))),
            ("events", .int(Int64(report.events))),
            ("baseSeq", report.baseSeq.map { .int(Int64($0)) } ?? .null),
            ("basePath", base.map { .string($0.env.path) } ?? .null),
            ("baseVerified", base.map { .bool(Self.isVerifiedCopy($0.env.path)) } ?? .null),
            ("replayedEvents", .int(Int64(report.replayedEvents))),
            ("auditedStore", .string(env.path)),
            ("madeAtMs", .int(Int64(now.tv_sec) * 1_000 + Int64(now.tv_nsec) / 1_000_000)),
            (
                "tables",
                .array(
                    report.tables.map {
                        .object([
                            ("table", .string($0.table)), ("records", .int(Int64($0.records))),
                            ("digest", .string($0.digest)),
                        ])
                    })
            ),
        ]).jsonString
    }

    /// For a verified copy opened as a reader: the tables whose records no longer give the digest its
    /// `VERIFIED` file recorded when it was kept (damage to the copy since), in words; empty when every
    /// table matches; `nil` when this is no verified copy or its file cannot be read. Reads every table.
    /// What tells, when an audit from the copy finds a difference, whether the copy or the store changed.
    public func verifiedCopyDamage() throws -> [String]? {
        guard let text = ResidentMemory.smallFile(env.path + "/" + Self.verifiedMarker),
            let marker = try? JSONParser.parse(text), let recorded = marker["tables"]?.arrayValue
        else { return nil }
        return try projectionEnv.read { txn in
            try ProjectionTable.allCases.compactMap { table -> String? in
                let entry = recorded.first { $0["table"]?.stringValue == table.rawValue }
                let (records, digest) = try tableDigest(table, txn)
                let (wantRecords, wantDigest) = (entry?["records"]?.intValue, entry?["digest"]?.stringValue)
                if wantRecords == Int64(records) && wantDigest == digest { return nil }
                return "\(table.rawValue): \(records) records, digest \(digest); the VERIFIED file says "
                    + "\(wantRecords.map(String.init) ?? "none"), \(wantDigest ?? "none")"
            }
        }
    }

    /// Removes the verified copies in `directory` but the `keep` newest (by checkpoint seq, at least one)
    /// and `sparing` (the copy just kept, which an audit of an older store — a restored backup — makes
    /// older than the others), and what killed audits left half-written (a process that no longer runs);
    /// returns the paths removed. Other entries are left alone.
    @discardableResult
    public static func pruneVerifiedCopies(in directory: String, keep: Int, sparing: String? = nil) -> [String] {
        let names = (directoryEntries(directory) ?? []).sorted()
        var removed: [String] = []
        for name in names where name.hasPrefix(".partial-verified-") {
            let pid = name.split(separator: "-").last.flatMap { Int32($0) }
            if let pid, pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH { continue }  // being written
            removeDirectoryTree(directory + "/" + name)
            removed.append(directory + "/" + name)
        }
        let copies = names.filter { $0.hasPrefix("verified-") && isVerifiedCopy(directory + "/" + $0) }
        for name in copies.dropLast(max(1, keep)) where directory + "/" + name != sparing {
            removeDirectoryTree(directory + "/" + name)
            removed.append(directory + "/" + name)
        }
        return removed
    }
}
