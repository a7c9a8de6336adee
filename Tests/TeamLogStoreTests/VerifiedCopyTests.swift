import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogThreads
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// Verified copies (`audit(base:keepingVerifiedCopyIn:)`, `teamlog audit --verified DIR`): a clean audit
/// keeps its replayed projections as a copy at the audited checkpoint, which the next audit starts from
/// and replaces; a failed audit keeps nothing; a copy is a base for readers and refused by writers.
@Suite struct VerifiedCopyTests {
    static let lines = BaseAuditTests.lines

    /// Feeds `lines[range]` to the store at `path` (created when missing) and checkpoints it.
    static func feed(_ path: String, _ range: Range<Int>) throws {
        let store = try Store(path: path, options: .checkpointing(every: 300))
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for n in range { try processor.process(.text(number: n + 1, bytes: Array(lines[n].utf8))) }
        try processor.commit()
        try store.checkpointNow()
        store.close()
    }

    /// Every stored projection record of the store or copy at `path`.
    static func tables(_ path: String) throws -> [ProjectionTable: [([UInt8], [UInt8])]] {
        let store = try Store.reader(at: path)
        defer { store.close() }
        return try store.readStoredProjections { txn, _ in try store.storedProjections(in: txn) }
    }

    static func same(_ a: [ProjectionTable: [([UInt8], [UInt8])]], _ b: [ProjectionTable: [([UInt8], [UInt8])]])
        -> Bool
    {
        ProjectionTable.allCases.allSatisfy { table in
            let (x, y) = (a[table] ?? [], b[table] ?? [])
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        }
    }

    /// The verified copy to start an audit of the store at `path` from, opened (`nil`: none).
    static func newestVerified(_ directory: String, for path: String) throws -> Store.Copy? {
        let store = try Store.reader(at: path)
        let seq = try store.storedCheckpointSeq()
        store.close()
        return try Store.newestCopy(at: directory, atOrBefore: seq, excluding: path, verifiedOnly: true).copy
    }

    @Test func aCleanAuditKeepsItsReplayAndTheNextAuditStartsFromIt() throws {
        let directory = TemporaryDirectory("verified")
        let path = directory.child("store")
        let verified = directory.child("verified")
        try Self.feed(path, 0..<800)

        // No copy yet: a full audit, whose replay is kept.
        #expect(try Self.newestVerified(verified, for: path) == nil)
        let first = try BaseAuditTests.reader(path)
        let full = try first.audit(base: nil, keepingVerifiedCopyIn: verified)
        first.close()
        #expect(full.ok && full.baseSeq == nil, "\(full)")
        let firstCopy = try #require(full.verifiedCopy)
        #expect(Store.isVerifiedCopy(firstCopy))
        #expect(
            firstCopy.hasSuffix(
                "/verified-" + String(repeating: "0", count: 20 - String(full.seq).count) + "\(full.seq)"))
        #expect(Self.same(try Self.tables(firstCopy), try Self.tables(path)), "the replay's tables are the store's")
        let marker = readTextFile(firstCopy + "/" + Store.verifiedMarker)
        #expect(marker.contains("\"checkpointSeq\":\(full.seq)") && marker.contains("\"baseSeq\":null"), "\(marker)")
        #expect(marker.contains("\"baseVerified\":null"), "\(marker)")

        // More of the log; the next audit starts from the copy and replays only what came after it.
        try Self.feed(path, 800..<Self.lines.count)
        let copy = try #require(try Self.newestVerified(verified, for: path))
        #expect(copy.path == firstCopy && copy.checkpointSeq == full.seq)
        let store = try BaseAuditTests.reader(path)
        let next = try store.audit(base: copy.store, keepingVerifiedCopyIn: verified)
        copy.store.close()
        let whole = try store.audit()
        store.close()
        #expect(next.ok, "\(next)")
        #expect(next.baseSeq == full.seq && next.replayedEvents == next.events - Int(full.seq))
        #expect(next.replayedEvents > 0)
        #expect(next.tables.map(\.digest) == whole.tables.map(\.digest), "the same tables as a full audit's")
        let secondCopy = try #require(next.verifiedCopy)
        #expect(secondCopy != firstCopy)
        #expect(Self.same(try Self.tables(secondCopy), try Self.tables(path)))
        let secondMarker = readTextFile(secondCopy + "/" + Store.verifiedMarker)
        #expect(secondMarker.contains("\"baseSeq\":\(full.seq)") && secondMarker.contains("\"baseVerified\":true"))

        // An audit at the same checkpoint keeps the copy there; pruning keeps the newest.
        let again = try BaseAuditTests.reader(path)
        #expect(try again.audit(base: nil, keepingVerifiedCopyIn: verified).verifiedCopy == secondCopy)
        again.close()
        // A killed audit's leftover (its pid runs no more) goes; a running audit's (this process's) stays.
        let dead = verified + "/.partial-verified-00000000000000000007-\(try Self.pidOfAnEndedProcess())"
        let running = verified + "/.partial-verified-00000000000000000008-\(getpid())"
        #expect(mkdir(dead, 0o755) == 0 && mkdir(running, 0o755) == 0)
        #expect(
            Store.pruneVerifiedCopies(in: verified, keep: 1, sparing: firstCopy) == [dead],
            "an older copy just kept stays")
        let removed = Store.pruneVerifiedCopies(in: verified, keep: 1)
        #expect(removed == [firstCopy], "\(removed)")
        #expect(access(running, F_OK) == 0)
        #expect(Store.isVerifiedCopy(secondCopy) && !Store.isVerifiedCopy(firstCopy))
    }

    /// The pid of a child process that has exited and been reaped.
    static func pidOfAnEndedProcess() throws -> Int32 {
        let run = try ChildProcess.run("/bin/sh", ["-c", "echo $$"], stderr: "/dev/null", timeout: 30)
        return try #require(run.lines.first.flatMap { Int32($0) })
    }

    @Test func aFailedAuditKeepsNothing() throws {
        let directory = TemporaryDirectory("verified-failed")
        let path = directory.child("store")
        let verified = directory.child("verified")
        try Self.feed(path, 0..<600)
        let (key, _) = try #require(try BaseAuditTests.firstRecord(path, "p.messages"))
        try BaseAuditTests.editProjections(path, "p.messages") { txn, db in try txn.delete(db, key: key) }
        let store = try BaseAuditTests.reader(path)
        defer { store.close() }
        let report = try store.audit(base: nil, keepingVerifiedCopyIn: verified)
        #expect(!report.ok && report.verifiedCopy == nil)
        #expect((directoryEntries(verified) ?? []).filter { $0.hasPrefix("verified-") }.isEmpty)
    }

    @Test func aVerifiedCopyIsABaseForReadersAndRefusedByWriters() throws {
        let directory = TemporaryDirectory("verified-base")
        let path = directory.child("store")
        let verified = directory.child("verified")
        try Self.feed(path, 0..<700)
        let store = try BaseAuditTests.reader(path)
        let copyPath = try #require(try store.audit(base: nil, keepingVerifiedCopyIn: verified).verifiedCopy)
        let copySeq = try store.storedCheckpointSeq()
        store.close()

        #expect {
            try Store(path: copyPath)
        } throws: { error in
            "\(error)".contains("is a verified copy") && "\(error)".contains("not a store to write")
        }
        let reader = try Store.reader(at: copyPath)
        let status = try reader.status()
        // A backup or a compaction would leave the VERIFIED file behind: refused, the copy untouched.
        #expect {
            try reader.backup(to: directory.child("backup-of-copy"))
        } throws: { error in
            "\(error)".contains("is a verified copy") && "\(error)".contains("cp -a")
        }
        reader.close()
        #expect {
            try Store.compact(path: copyPath)
        } throws: { error in
            "\(error)".contains("is a verified copy")
        }
        #expect(Store.isVerifiedCopy(copyPath) && access(directory.child("backup-of-copy"), F_OK) != 0)
        #expect(status.checkpointSeq == copySeq && status.headSeq == 0 && status.lag == 0 && status.verifiedCopy)
        #expect(status.json.jsonString.contains("\"verifiedCopy\":true"))

        // A backup beside it, newer: a `--verified` audit passes it over, a `--base DIR` replay takes it.
        try Self.feed(path, 700..<900)
        let writer = try Store(path: path)
        _ = try writer.backup(to: verified + "/backup")
        writer.close()
        #expect(try Self.newestVerified(verified, for: path)?.path == copyPath)
        let any = try #require(try Store.newestCopy(at: verified, atOrBefore: .max, excluding: path).copy)
        #expect(any.path == verified + "/backup")
        any.store.close()

        // `--at SEQ` from the verified copy answers as a replay from seq 1 does.
        let at = copySeq + 50
        let source = try BaseAuditTests.reader(path)
        defer { source.close() }
        let base = try Store.reader(at: copyPath)
        defer { base.close() }
        let fromCopy = try source.replayIntoScratch(upTo: at, base: base)
        defer { fromCopy.remove() }
        let fromStart = try source.replayIntoScratch(upTo: at)
        defer { fromStart.remove() }
        let tables = { (s: Store) in try s.readStoredProjections { txn, _ in try s.storedProjections(in: txn) } }
        #expect(Self.same(try tables(fromCopy.store), try tables(fromStart.store)))
    }

    /// `teamlog audit --verified` killed at points of its run — in the replay, the copy, the marker, the
    /// rename — leaves DIR holding only whole copies (each the base of a clean audit) and leftovers that
    /// the next run removes; that run keeps the copy as if nothing had happened.
    @Test func anAuditKilledWhileKeepingItsCopyLeavesOnlyWholeCopies() throws {
        let directory = TemporaryDirectory("verified-kill")
        let path = directory.child("store")
        let verified = directory.child("verified")
        try Self.feed(path, 0..<700)
        let arguments = ["audit", "--store", path, "--verified", verified]
        #expect(try ChildProcess.run(TestSupport.teamlogExecutable, arguments, timeout: 120).status == .exited(0))
        try Self.feed(path, 700..<Self.lines.count)
        let store = try BaseAuditTests.reader(path)
        let seq = try store.storedCheckpointSeq()
        let whole = try store.audit().tables.map(\.digest)
        store.close()

        var random = SeededRandom(71)
        let final = verified + "/" + Store.verifiedCopyName(seq)
        for point in 0..<8 {
            removeDirectoryTree(final)  // each run has its copy to write
            let child = try ChildProcess(TestSupport.teamlogExecutable, arguments)
            if point % 2 == 0 {
                usleep(UInt32(random.below(400_000)))
            } else {
                // Into the copy: once its partial directory appears (or the copy is whole already).
                let partial = verified + "/.partial-" + Store.verifiedCopyName(seq) + "-\(child.pid)"
                let deadline = MonotonicClock.seconds() + 30
                while access(partial, F_OK) != 0 && access(final, F_OK) != 0 && MonotonicClock.seconds() < deadline {
                    usleep(50)
                }
                usleep(UInt32(random.below(5_000)))
            }
            child.kill(SIGKILL)
            _ = child.wait()
            for name in directoryEntries(verified) ?? [] where name.hasPrefix("verified-") {
                let copy = verified + "/" + name
                #expect(Store.isVerifiedCopy(copy), "\(name) after kill \(point)")
                let reader = try BaseAuditTests.reader(path)
                let base = try Store.reader(at: copy)
                let report = try reader.audit(base: base)
                base.close()
                reader.close()
                #expect(report.ok && report.tables.map(\.digest) == whole, "\(name) after kill \(point): \(report)")
            }
        }
        let run = try ChildProcess.run(TestSupport.teamlogExecutable, arguments, timeout: 120)
        #expect(run.status == .exited(0))
        #expect(run.lines.last == "audit OK")
        let names = Set(directoryEntries(verified) ?? [])
        #expect(names.contains(Store.verifiedCopyName(seq)), "\(names)")
        #expect(!names.contains { $0.hasPrefix(".partial-") }, "the killed audits' leftovers are gone: \(names)")
    }

    /// An audit from a verified copy that finds a difference says whose it is: the copy's tables checked
    /// against the digests its `VERIFIED` file recorded — a damaged store leaves them matching, a damaged
    /// copy does not (named with its table). Of a backup given as `--base` it says a full audit tells.
    @Test func aFailedAuditFromAVerifiedCopySaysWhoseTheDifferenceIs() throws {
        func setUp(_ name: String) throws -> (TemporaryDirectory, String, String, String) {
            let directory = TemporaryDirectory(name)
            let path = directory.child("store")
            let verified = directory.child("verified")
            try Self.feed(path, 0..<700)
            let store = try BaseAuditTests.reader(path)
            let copy = try #require(try store.audit(base: nil, keepingVerifiedCopyIn: verified).verifiedCopy)
            store.close()
            try Self.feed(path, 700..<1_000)
            return (directory, path, verified, copy)
        }
        func audit(_ directory: TemporaryDirectory, _ arguments: [String]) throws -> [String] {
            let run = try ChildProcess.run(
                TestSupport.teamlogExecutable, ["audit"] + arguments, stderr: directory.child("audit.err"),
                timeout: 120)
            #expect(run.status == .exited(1), "\(readTextFile(directory.child("audit.err")))")
            #expect(run.lines.last == "audit FAILED")
            return run.lines
        }

        // The store damaged: the copy still matches what was recorded.
        let (first, path, verified, copy) = try setUp("verified-whose-store")
        let intact = try Store.reader(at: copy)
        #expect(try intact.verifiedCopyDamage() == [])
        intact.close()
        let (key, _) = try #require(try BaseAuditTests.firstRecord(path, "p.messages"))
        try BaseAuditTests.editProjections(path, "p.messages") { txn, db in try txn.delete(db, key: key) }
        let storeDamaged = try audit(first, ["--store", path, "--verified", verified])
        #expect(
            storeDamaged.contains(
                "base: \(copy) still matches its VERIFIED file: the difference is the store's (or its log's)"),
            "\(storeDamaged)")
        #expect((directoryEntries(verified) ?? []).filter { $0.hasPrefix("verified-") }.count == 1, "nothing kept")

        // The copy damaged since it was kept: named, with its table.
        let (second, path2, verified2, copy2) = try setUp("verified-whose-copy")
        let (teamKey, teamValue) = try #require(try BaseAuditTests.firstRecord(copy2, "p.teams"))
        try BaseAuditTests.editProjections(copy2, "p.teams") { txn, db in
            try txn.put(db, key: teamKey + Array("-x".utf8), value: teamValue)
        }
        let damaged = try Store.reader(at: copy2)
        let found = try #require(try damaged.verifiedCopyDamage())
        damaged.close()
        #expect(found.count == 1 && found[0].hasPrefix("teams: "), "\(found)")
        let copyDamaged = try audit(second, ["--store", path2, "--verified", verified2])
        #expect(
            copyDamaged.contains { $0.hasPrefix("base: \(copy2) was DAMAGED since it was kept (teams: ") },
            "\(copyDamaged)")

        // A backup as --base: only a full audit tells.
        let backup = second.child("backup")
        let writer = try Store(path: path2)
        _ = try writer.backup(to: backup)
        writer.close()
        try BaseAuditTests.editProjections(path2, "p.teams") { txn, db in
            try txn.put(db, key: teamKey + Array("-y".utf8), value: teamValue)
        }
        let backupReader = try Store.reader(at: backup)
        #expect(try backupReader.verifiedCopyDamage() == nil, "a backup has no VERIFIED file")
        backupReader.close()
        let fromBackup = try audit(second, ["--store", path2, "--base", backup])
        #expect(
            fromBackup.contains(
                "base: the difference may be the copy's as well as the store's: a full `teamlog audit` (no --base) tells"
            ), "\(fromBackup)")
    }

    @Test func theCLIRollsTheVerifiedCopiesForward() throws {
        let directory = TemporaryDirectory("verified-cli")
        let path = directory.child("store")
        let verified = directory.child("verified")
        try Self.feed(path, 0..<700)
        func audit(_ extra: [String] = []) throws -> [String] {
            let run = try ChildProcess.run(
                TestSupport.teamlogExecutable, ["audit", "--store", path, "--verified", verified] + extra,
                stderr: directory.child("audit.err"), timeout: 120)
            #expect(run.status == .exited(0), "\(readTextFile(directory.child("audit.err")))")
            return run.lines
        }
        let first = try audit()
        #expect(!first.contains { $0.hasPrefix("base: ") }, "a full audit: \(first)")
        let firstCopy = try #require(first.first { $0.hasPrefix("verified: ") }?.split(separator: " ")[1])
        #expect(first.last == "audit OK")

        try Self.feed(path, 700..<1_000)
        // A copy that cannot be kept (a file where it goes): the audit's verdict stands, the exit is 2.
        let reader = try BaseAuditTests.reader(path)
        let seq = try reader.storedCheckpointSeq()
        reader.close()
        let blocked = verified + "/" + Store.verifiedCopyName(seq)
        #expect(FileManagerless.write(blocked, "not a copy"))
        let notKept = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", path, "--verified", verified],
            stderr: directory.child("not-kept.err"), timeout: 120)
        #expect(notKept.status == .exited(2))
        #expect(notKept.lines.last == "audit OK")
        #expect(readTextFile(directory.child("not-kept.err")).contains("its verified copy was not kept"))
        #expect(unlink(blocked) == 0)

        let second = try audit(["--keep-verified", "1"])
        #expect(second.contains { $0.hasPrefix("base: \(firstCopy) at checkpoint seq ") }, "\(second)")
        #expect(second.contains { $0.hasPrefix("verified: ") && $0.hasSuffix("; removed \(firstCopy)") }, "\(second)")
        #expect(second.last == "audit OK")
        #expect((directoryEntries(verified) ?? []).filter { $0.hasPrefix("verified-") }.count == 1)

        let refused = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", path, "--verified", verified, "--keep-verified", "0"],
            stderr: directory.child("refused.err"), timeout: 60)
        #expect(refused.status != .exited(0))
        #expect(readTextFile(directory.child("refused.err")).contains("--keep-verified must be at least 1"))

        // A verified copy given as the store: audit said every table DIFFERS (a replay of its empty log),
        // and log printed nothing with exit 0; both say what it is now.
        let kept = try #require(second.first { $0.hasPrefix("verified: ") }?.split(separator: " ")[1]).description
        let asStore = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", kept], stderr: directory.child("as-store.err"), timeout: 60)
        #expect(asStore.status == .exited(2) && !asStore.lines.contains("audit FAILED"))
        #expect(readTextFile(directory.child("as-store.err")).contains("is a verified copy"))
        let export = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["log", "--store", kept], stderr: directory.child("log.err"), timeout: 60)
        #expect(export.status == .exited(1) && readTextFile(directory.child("log.err")).contains("holds no log"))
    }
}

/// Writing a small file without Foundation.
enum FileManagerless {
    static func write(_ path: String, _ text: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return Array(text.utf8).withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) } == text.utf8.count
    }
}
