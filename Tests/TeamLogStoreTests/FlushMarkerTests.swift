import LMDB
import TeamLog
import TeamLogRuntime
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// A checkpoint commits without sync and flushes its pages after, range by range (so the log's group
/// commits on the same device never wait behind a whole checkpoint); `proj/flushed` records the last
/// projection transaction known to be on disk. After a reboot, a newer transaction may be torn (its meta
/// on disk, some of its pages not): a writer rolls it back to the checkpoint before it and replays the
/// log after that one; a reader refuses it until then. Without a reboot (a killed process) nothing is
/// rolled back: the page cache held every page.
@Suite struct FlushMarkerTests {
    static let lines = TeamWorkloadProbe.lines(count: 600, seed: 23)

    /// A store with durable commits (the harness's are not), fed `lines` in two commits with a checkpoint
    /// after each, and closed: its projection environment's last two transactions are those checkpoints.
    static func twoCheckpoints(_ path: String) throws {
        let store = try Store(path: path)
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in lines.enumerated() {
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
            if n + 1 == lines.count / 2 {
                try processor.commit()
                try store.checkpointNow()
            }
        }
        try processor.commit()
        store.close()
    }

    static func projections(_ path: String) -> String { path + "/" + ProjectionDatabases.directory }

    /// The newest meta's main root set to a page past the file: what a power loss that kept the meta and
    /// lost the pages it names looks like to the open-time check (`DataFileHeader`).
    static func tearNewestMeta(_ path: String) throws {
        let data = projections(path) + "/data.mdb"
        var bytes = try HostileInputTests.readBytes(data)
        let offset = StoreFileTests.currentMetaOffset(bytes) + 128
        withUnsafeBytes(of: (UInt64(1) << 40).littleEndian) { bytes.replaceSubrange(offset..<offset + 8, with: $0) }
        try CrashSafetyTests.writeFile(data, bytes)
    }

    @Test func everyCheckpointRecordsItsTransactionAsFlushed() throws {
        let directory = TemporaryDirectory("flushed")
        let path = directory.child("store")
        let store = try Store(path: path)
        defer { store.close() }
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        var recorded: [UInt64] = []
        for part in [Self.lines[..<200], Self.lines[200..<400]] {
            for (n, line) in part.enumerated() { try processor.process(.text(number: n + 1, bytes: Array(line.utf8))) }
            try processor.commit()
            try store.checkpointNow()
            let marker = try #require(FlushMarker.read(directory: Self.projections(path)))
            #expect(marker.txnid == UInt64(store.projectionEnv.lastTransactionID))
            #expect(marker.bootID == FlushMarker(txnid: 0).bootID)
            recorded.append(marker.txnid)
        }
        #expect(recorded[1] > recorded[0])
        #expect(try !FlushMarker.newestMayBeTorn(directory: Self.projections(path)))
    }

    @Test func aTornLastCheckpointAfterARebootIsRolledBackAndTheLogReplayed() throws {
        let directory = TemporaryDirectory("torn")
        let path = directory.child("store")
        try Self.twoCheckpoints(path)
        let clean = directory.child("clean")
        try Self.twoCheckpoints(clean)
        let cleanReport = try Store(path: clean).audit()
        try #require(cleanReport.ok)

        // Before the last checkpoint's flush was recorded, the machine lost power: the marker names the
        // checkpoint before it, in another boot, and the last one's meta names pages that never arrived.
        let (t0, t1) = try #require(try DataFileHeader.metaTransactionIDs(directory: Self.projections(path)))
        let newest = max(t0, t1)
        try FlushMarker(txnid: newest - 1, bootID: Array("00000000-0000-0000-0000-000000000000".utf8))
            .write(directory: Self.projections(path))
        try Self.tearNewestMeta(path)
        #expect(try FlushMarker.newestMayBeTorn(directory: Self.projections(path)))

        var readOnly = Store.Options()
        readOnly.readOnly = true
        let refusal = #expect(throws: StoreError.self) { try Store(path: path, options: readOnly) }
        #expect(refusal?.message.contains("not known to be on disk") == true, "\(String(describing: refusal))")

        let store = try Store(path: path)
        defer { store.close() }
        let head = try store.head().seq
        #expect(store.replayedAtOpen > 0 && store.replayedAtOpen < Int(head), "the first checkpoint, then the log")
        let report = try store.audit()
        #expect(report.ok, "\(report)")
        #expect(report.tables.map(\.digest) == cleanReport.tables.map(\.digest))
        #expect(try !FlushMarker.newestMayBeTorn(directory: Self.projections(path)))
    }

    @Test func aKilledWriterWithoutARebootKeepsItsLastCheckpoint() throws {
        let directory = TemporaryDirectory("killed")
        let path = directory.child("store")
        try Self.twoCheckpoints(path)
        // Killed after the last checkpoint's commit, before its flush was recorded: same boot, so the page
        // cache had every page; nothing is rolled back.
        let (t0, t1) = try #require(try DataFileHeader.metaTransactionIDs(directory: Self.projections(path)))
        let newest = max(t0, t1)
        try FlushMarker(txnid: newest - 1).write(directory: Self.projections(path))
        #expect(try !FlushMarker.newestMayBeTorn(directory: Self.projections(path)))
        let store = try Store(path: path)
        defer { store.close() }
        #expect(store.replayedAtOpen == 0)
        #expect(FlushMarker.read(directory: Self.projections(path))?.txnid == newest, "synced and recorded at open")
        #expect(try store.audit().ok)
    }

    /// Only the transaction right after the recorded one can be unflushed: commits after it were synced
    /// (a rebuild, a repair), and a checkpoint flushes and records what is before it first; a marker at
    /// the newest, or one of this boot, leaves nothing to roll back.
    @Test func onlyTheTransactionAfterTheRecordedOneCountsAsUnflushed() throws {
        let directory = TemporaryDirectory("after")
        let path = directory.child("store")
        try Self.twoCheckpoints(path)
        let proj = Self.projections(path)
        let (t0, t1) = try #require(try DataFileHeader.metaTransactionIDs(directory: proj))
        let newest = max(t0, t1)
        let otherBoot = Array("11111111-1111-1111-1111-111111111111".utf8)
        try FlushMarker(txnid: newest - 2, bootID: otherBoot).write(directory: proj)
        #expect(try !FlushMarker.newestMayBeTorn(directory: proj))
        try FlushMarker(txnid: newest - 1, bootID: otherBoot).write(directory: proj)
        #expect(try FlushMarker.newestMayBeTorn(directory: proj))
        try FlushMarker(txnid: newest, bootID: otherBoot).write(directory: proj)
        #expect(try !FlushMarker.newestMayBeTorn(directory: proj))
        try FlushMarker(txnid: newest - 1).write(directory: proj)
        #expect(try !FlushMarker.newestMayBeTorn(directory: proj), "this boot: the page cache has it")
    }

    /// A marker behind the environment (a failed flush, a synced commit of another path) is caught up
    /// before a checkpoint commits without sync; a `noSync` environment never gets one.
    @Test func aLaggingMarkerIsCaughtUpAndANoSyncEnvironmentHasNone() throws {
        let directory = TemporaryDirectory("catchup")
        let path = directory.child("env")
        let env = try Environment(path: path)
        let db = try env.open("things", as: Database<UTF8String, UTF8String>.self)
        try FlushMarker.flush(env)
        try env.write { txn in try txn.put(db, "a", "b") }
        #expect(FlushMarker.read(directory: path)?.txnid == UInt64(env.lastTransactionID - 1))
        try FlushMarker.catchUp(env)
        #expect(FlushMarker.read(directory: path)?.txnid == UInt64(env.lastTransactionID))

        var options = Environment.Options()
        options.noSync = true
        let unsynced = directory.child("nosync")
        let other = try Environment(path: unsynced, options: options)
        _ = try other.open("things", as: Database<UTF8String, UTF8String>.self)
        try FlushMarker.flush(other)
        try FlushMarker.catchUp(other)
        #expect(FlushMarker.read(directory: unsynced) == nil)
    }

    @Test func aRolledBackEnvironmentOpensAtTheTransactionBefore() throws {
        let directory = TemporaryDirectory("rollback")
        let path = directory.child("env")
        let env = try Environment(path: path)
        let db = try env.open("things", as: Database<UTF8String, UTF8String>.self)
        try env.write { txn in try txn.put(db, "a", "first") }
        try env.withUnsyncedCommit { try env.write { txn in try txn.put(db, "a", "second") } }
        try env.flushDataFile(rangeBytes: 4096)
        let last = env.lastTransactionID
        #expect(try env.read { txn in try txn.get(db, "a") } == "second")
        _ = consume env
        #expect(try DataFileHeader.rollBackUnflushedMeta(directory: path) == UInt64(last - 1))
        let header = try #require(try DataFileHeader.read(directory: path))
        #expect(header.current.txnid == UInt64(last - 1))
        let reopened = try Environment(path: path)
        let again = try reopened.open("things", create: false, as: Database<UTF8String, UTF8String>.self)
        #expect(reopened.lastTransactionID == last - 1)
        #expect(try reopened.read { txn in try txn.get(again, "a") } == "first")
        try reopened.write { txn in try txn.put(again, "a", "third") }
        #expect(reopened.lastTransactionID == last)
        #expect(try reopened.read { txn in try txn.get(again, "a") } == "third")
    }
}
