import LMDB
import TeamLog
import TeamLogRuntime
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// `audit(base:)` / `teamlog audit --base DIR`: the chain checked from seq 1, but only the log after a
/// copy's checkpoint replayed, onto the copy's projections. It agrees with a full audit on a sound store
/// (table for table), finds a projection changed after the copy, carries the copy's own damage into its
/// verdict (it vouches only as far as its base), refuses a base of another log or one ahead of the store,
/// and still finds a log record changed before the copy's seq.
@Suite struct BaseAuditTests {
    static let lines = TeamWorkloadProbe.lines(count: 1_500, seed: 53)

    /// A store fed `lines` with a backup taken after the first `split` (checkpointed first unless
    /// `lagging`, so the copy's projections reach its head): (store path, copy path).
    static func storeWithCopy(_ directory: TemporaryDirectory, split: Int = 800, lagging: Bool = false) throws
        -> (String, String)
    {
        let path = try storeWithCopies(directory, at: [split], checkpointFirst: { _ in !lagging }) { _ in
            directory.child("copy")
        }
        return (path, directory.child("copy"))
    }

    /// A store fed `lines` with a backup taken after the first `n` lines for each `n` of `splits`, into
    /// `copyPath(n)`, checkpointed first when `checkpointFirst(n)`; the store's path. `checkpointOps`: the
    /// store's own interval.
    static func storeWithCopies(
        _ directory: TemporaryDirectory, at splits: [Int], checkpointOps: Int = 300,
        checkpointFirst: (Int) -> Bool = { _ in true }, copyPath: (Int) -> String
    ) throws -> String {
        let path = directory.child("store")
        let store = try Store(path: path, options: .checkpointing(every: checkpointOps))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in lines.enumerated() {
            if splits.contains(n) {
                try processor.commit()
                if checkpointFirst(n) { try store.checkpointNow() }
                _ = try store.backup(to: copyPath(n))
            }
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
        }
        try processor.commit()
        try store.checkpointNow()
        store.close()
        return path
    }

    /// A store of another log (another workload's 900 lines) in `directory`; its path.
    static func storeOfAnotherLog(_ directory: TemporaryDirectory) throws -> String {
        let path = directory.child("store")
        let store = try Store(path: path, options: .checkpointing(every: 300))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in TeamWorkloadProbe.lines(count: 900, seed: 59).enumerated() {
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
        }
        try processor.commit()
        try store.checkpointNow()
        store.close()
        return path
    }

    /// `storeWithCopy`'s store and copy opened as readers, with the copy's checkpoint seq.
    static func readersOfStoreWithCopy(_ directory: TemporaryDirectory) throws -> (Store, Store, UInt64) {
        let (path, copyPath) = try storeWithCopy(directory)
        let store = try reader(path)
        let base = try reader(copyPath)
        return (store, base, try base.storedCheckpointSeq())
    }

    static func reader(_ path: String) throws -> Store { try Store.reader(at: path) }

    /// `audit(base:)` of the store at `path` from the copy at `copyPath`, both opened as readers.
    static func auditFromCopy(_ path: String, _ copyPath: String) throws -> AuditReport {
        let store = try reader(path)
        defer { store.close() }
        let base = try reader(copyPath)
        defer { base.close() }
        return try store.audit(base: base)
    }

    /// Edits one projection table of a closed store directly.
    static func editProjections(_ path: String, _ table: String, _ body: (WriteTransaction, DatabaseHandle) throws -> Void)
        throws
    {
        let env = try Environment(path: path + "/proj")
        let db = try env.openHandle(table, create: false)
        try env.write { txn in try body(txn, db) }
    }

    /// The first record of a projection table of a closed store.
    static func firstRecord(_ path: String, _ table: String) throws -> (key: [UInt8], value: [UInt8])? {
        let env = try Environment(path: path + "/proj")
        let db = try env.openHandle(table, create: false)
        return try env.read { txn in
            var first: ([UInt8], [UInt8])?
            try txn.forEach(db) { key, value in
                first = (Array(key), Array(value))
                return false
            }
            return first
        }
    }

    @Test func anAuditFromACopyReplaysOnlyTheTailAndAgreesWithAFullAudit() throws {
        let directory = TemporaryDirectory("base-audit")
        let (store, base, baseSeq) = try Self.readersOfStoreWithCopy(directory)
        defer {
            store.close()
            base.close()
        }
        try #require(baseSeq > 0)

        let full = try store.audit()
        try #require(full.ok, "\(full)")
        // A small budget and interval: the replay evicts and loads units back — from the copy's records too.
        var limits = ReplayLimits()
        limits.checkpointOps = 100
        limits.budgetBytes = 32 << 10
        limits.batchSize = 64
        let report = try store.audit(limits: limits, base: base)
        #expect(report.ok, "\(report)")
        #expect(report.baseSeq == baseSeq)
        #expect(report.events == full.events && report.replayedEvents == full.events - Int(baseSeq))
        #expect(report.tables.map(\.digest) == full.tables.map(\.digest), "the same tables as the full audit's")
        #expect(report.replay.loads > 0, "units the tail needed were loaded from the copy's projections")
        // The default limits, as the CLI runs it.
        #expect(try store.audit(base: base).tables.map(\.digest) == full.tables.map(\.digest))
    }

    @Test func aProjectionChangedAfterTheCopyIsFound() throws {
        let directory = TemporaryDirectory("base-audit-changed")
        let (path, copyPath) = try Self.storeWithCopy(directory)
        let (key, _) = try #require(try Self.firstRecord(path, "p.messages"))
        try Self.editProjections(path, "p.messages") { txn, db in try txn.delete(db, key: key) }
        let report = try Self.auditFromCopy(path, copyPath)
        #expect(!report.ok)
        let difference = try #require(report.tables.first { $0.table == "messages" }?.difference)
        #expect(difference.contains("missing from the store"), "\(difference)")
    }

    @Test func aDamagedCopyCarriesItsDamageIntoTheVerdict() throws {
        let directory = TemporaryDirectory("base-audit-damaged-copy")
        let (path, copyPath) = try Self.storeWithCopy(directory)
        // A team record of the copy changed: the store's own is sound, so the two differ after the replay
        // unless the tail rewrote that very record. The audit vouches only as far as its base.
        let (key, value) = try #require(try Self.firstRecord(copyPath, "p.teams"))
        try Self.editProjections(copyPath, "p.teams") { txn, db in try txn.put(db, key: key + Array("-x".utf8), value: value) }
        let report = try Self.auditFromCopy(path, copyPath)
        #expect(!report.ok)
        let difference = try #require(report.tables.first { $0.table == "teams" }?.difference)
        #expect(difference.contains("missing from the store"), "\(difference)")
    }

    @Test func aBaseOfAnotherLogOrAheadOfTheStoreIsRefused() throws {
        let directory = TemporaryDirectory("base-audit-refused")
        let (path, copyPath) = try Self.storeWithCopy(directory)
        let other = TemporaryDirectory("base-audit-other")
        let store = try Self.reader(path)
        defer { store.close() }
        let foreign = try Self.reader(try Self.storeOfAnotherLog(other))
        defer { foreign.close() }
        #expect {
            try store.audit(base: foreign)
        } throws: { error in
            "\(error)".contains("not a copy of this store")
        }
        // The copy is older than the store: the store cannot be the copy's base.
        let copy = try Self.reader(copyPath)
        defer { copy.close() }
        #expect {
            try copy.audit(base: store)
        } throws: { error in
            "\(error)".contains("past this store's")
        }
    }

    @Test func aLogRecordChangedBeforeTheCopysSeqIsStillFound() throws {
        let directory = TemporaryDirectory("base-audit-log")
        let (path, copyPath) = try Self.storeWithCopy(directory)
        try TamperTests.breakRecord(path, seq: 5)
        let report = try Self.auditFromCopy(path, copyPath)
        #expect(!report.ok)
        #expect(report.chainProblem?.seq == 5, "\(report)")
    }

    @Test func theCLIAuditsFromACopy() throws {
        let directory = TemporaryDirectory("base-audit-cli")
        let (path, copyPath) = try Self.storeWithCopy(directory, lagging: true)
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", path, "--base", copyPath],
            stderr: directory.child("audit.err"), timeout: 120)
        #expect(run.status == .exited(0), "\(readTextFile(directory.child("audit.err")))")
        #expect(run.lines.contains { $0.hasPrefix("base: \(copyPath) at checkpoint seq ") }, "\(run.lines)")
        #expect(run.lines.last == "audit OK")

        // A base that is no store is named as the base, with what to give instead.
        let missing = directory.child("no-such-copy")
        let refused = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", path, "--base", missing],
            stderr: directory.child("refused.err"), timeout: 60)
        #expect(refused.status == .exited(1))
        let message = readTextFile(directory.child("refused.err"))
        #expect(message.contains("the base \(missing) is not a teamlog store"), "\(message)")
        #expect(message.contains("teamlog backup --to DIR") && !message.contains("ingest"), "\(message)")

        // The store itself is no copy of it (and is not opened twice).
        let itself = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", path, "--base", directory.path + "/./store"],
            stderr: directory.child("itself.err"), timeout: 60)
        #expect(itself.status == .exited(1))
        #expect(readTextFile(directory.child("itself.err")).contains("is the store itself"))
    }
}

extension Store {
    /// The seq the stored projections are at (their checkpoint).
    func storedCheckpointSeq() throws -> UInt64 { try readStoredProjections { _, seq in seq } }
}
