import LMDB
import TeamLog
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// `--at SEQ --base DIR` (`Store.replayed(at:base:)`): the store as of a seq, replayed from a copy's
/// checkpoint instead of from seq 1. Its tables and answers equal a replay from seq 1 at every seq from
/// the copy's checkpoint to the head; it walks only the log after the copy; and it refuses a copy past
/// the seq asked, a copy of another log, and a log broken after the copy.
@Suite struct BaseAtTests {
    /// Every table of two scratch stores compared (record for record, with the audit's comparison).
    static func differences(_ a: ScratchStore, _ b: ScratchStore) throws -> [String] {
        try a.store.projectionEnv.read { ptxn in
            try a.store.compareTables(ptxn, with: b.store).compactMap { t in t.difference.map { "\(t.table): \($0)" } }
        }
    }

    /// The query answers a test compares: every user's unread and every team's view.
    static func answers(_ store: Store) throws -> [String] {
        try (0..<300).map { try store.unreadView(Id("u\($0)")).jsonString }
            + (0..<30).map { try store.teamView(Id("t\($0)"))?.jsonString ?? "-" }
    }

    @Test func asOfEverySeqFromTheCopyOnTheAnswersEqualAReplayFromSeqOne() throws {
        let directory = TemporaryDirectory("base-at")
        let (store, base, baseSeq) = try BaseAuditTests.readersOfStoreWithCopy(directory)
        defer {
            store.close()
            base.close()
        }
        let head = try store.head().seq
        try #require(baseSeq > 0 && head > baseSeq + 100)

        for seq in [baseSeq, baseSeq + 1, (baseSeq + head) / 2, head] {
            let full = try store.replayed(at: seq)
            defer { full.remove() }
            let fromCopy = try store.replayed(at: seq, base: base)
            defer { fromCopy.remove() }
            #expect(fromCopy.events == Int(seq) && fromCopy.problem == nil)
            #expect(try Self.differences(full, fromCopy) == [], "at \(seq)")
            #expect(try Self.answers(fromCopy.store) == (try Self.answers(full.store)), "at \(seq)")
            #expect(try fromCopy.store.storedCheckpointSeq() == seq)
        }
        // Something moved between the copy and the head, or the comparison above proves little.
        let atCopy = try store.replayed(at: baseSeq)
        defer { atCopy.remove() }
        let atHead = try store.replayed(at: head, base: base)
        defer { atHead.remove() }
        #expect(try Self.differences(atCopy, atHead) != [])
    }

    /// A copy taken beside a writer whose checkpoint lags its log (as `teamlog backup` of a live store
    /// does): its projections, at their checkpoint, are what the replay starts from — not its log's head.
    @Test func aCopyWhoseLogRunsPastItsCheckpointServesFromTheCheckpoint() throws {
        let directory = TemporaryDirectory("base-at-lagging")
        // Checkpointed at line 400 and not again before the copy at line 1,000 (no interval reached).
        let copyPath = directory.child("copy")
        let path = try BaseAuditTests.storeWithCopies(
            directory, at: [400, 1_000], checkpointOps: 1_000_000, checkpointFirst: { $0 == 400 }
        ) { $0 == 400 ? directory.child("first") : copyPath }
        let store = try BaseAuditTests.reader(path)
        let base = try BaseAuditTests.reader(copyPath)
        defer {
            store.close()
            base.close()
        }
        let (baseSeq, copyHead) = (try base.storedCheckpointSeq(), try base.head().seq)
        try #require(baseSeq > 0 && copyHead > baseSeq, "the copy's log runs past its checkpoint (\(baseSeq))")
        for seq in [baseSeq + 1, copyHead, try store.head().seq] {
            let full = try store.replayed(at: seq)
            defer { full.remove() }
            let fromCopy = try store.replayed(at: seq, base: base)
            defer { fromCopy.remove() }
            #expect(try Self.differences(full, fromCopy) == [], "at \(seq)")
        }
    }

    @Test func onlyTheLogAfterTheCopyIsWalked() throws {
        let directory = TemporaryDirectory("base-at-tail")
        let (path, copyPath) = try BaseAuditTests.storeWithCopy(directory)
        let baseSeq: UInt64 = try {
            let base = try BaseAuditTests.reader(copyPath)
            defer { base.close() }
            return try base.storedCheckpointSeq()
        }()
        let head: UInt64 = try {
            let store = try BaseAuditTests.reader(path)
            defer { store.close() }
            return try store.head().seq
        }()
        // Record 5 changed (before the copy's checkpoint) and record baseSeq + 20 (after it).
        for seq: UInt64 in [5, baseSeq + 20] { try TamperTests.breakRecord(path, seq: seq) }
        let store = try BaseAuditTests.reader(path)
        defer { store.close() }
        let base = try BaseAuditTests.reader(copyPath)
        defer { base.close() }
        // From seq 1 the first break stops any answer past it.
        #expect {
            try store.replayed(at: baseSeq + 10)
        } throws: { error in
            "\(error)".contains("cannot replay to seq") && "\(error)".contains("5")
        }
        // From the copy: the log before its checkpoint is its to vouch for (`teamlog audit` checks all).
        let before = try store.replayed(at: baseSeq + 10, base: base)
        before.remove()
        #expect(before.events == Int(baseSeq + 10))
        // A break after the copy is found.
        #expect {
            try store.replayed(at: head, base: base)
        } throws: { error in
            "\(error)".contains("cannot replay to seq \(head)") && "\(error)".contains("\(baseSeq + 20)")
        }
    }

    @Test func aCopyPastTheSeqOrOfAnotherLogIsRefused() throws {
        let directory = TemporaryDirectory("base-at-refused")
        let (path, copyPath) = try BaseAuditTests.storeWithCopy(directory)
        let other = TemporaryDirectory("base-at-other")
        let otherPath = try BaseAuditTests.storeOfAnotherLog(other)
        let store = try BaseAuditTests.reader(path)
        defer { store.close() }
        let base = try BaseAuditTests.reader(copyPath)
        defer { base.close() }
        let baseSeq = try base.storedCheckpointSeq()
        #expect {
            try store.replayed(at: baseSeq - 1, base: base)
        } throws: { error in
            "\(error)".contains("the base's projections are at seq \(baseSeq), past \(baseSeq - 1)")
        }
        let foreign = try BaseAuditTests.reader(otherPath)
        defer { foreign.close() }
        #expect {
            try store.replayed(at: try store.head().seq, base: foreign)
        } throws: { error in
            "\(error)".contains("not a copy of this store")
        }
    }

    /// A directory of backups: each seq is answered from the newest copy at or before it; entries that are
    /// no store are passed over; a seq before every copy has none.
    @Test func aDirectoryOfCopiesGivesTheNewestAtOrBeforeTheSeq() throws {
        let directory = TemporaryDirectory("base-at-directory")
        let backups = directory.child("backups")
        #expect(mkdir(backups, 0o755) == 0)
        let path = try BaseAuditTests.storeWithCopies(directory, at: [400, 1_000]) { "\(backups)/copy-\($0)" }
        #expect(mkdir(backups + "/empty", 0o755) == 0)
        let file = open(backups + "/README", O_CREAT | O_WRONLY, 0o644)  // a file among the copies
        #expect(file >= 0)
        close(file)
        // The store the copies are for is never taken for one (nor opened a second time in a process that
        // has it open: here nothing has yet).
        let (_, beside) = try Store.newestCopy(at: directory.path, atOrBefore: .max)
        #expect(beside.count == 1, "the store itself, found beside the backups' directory")
        #expect(try Store.newestCopy(at: directory.path, atOrBefore: .max, excluding: path).seqs.isEmpty)
        #expect {
            try Store.newestCopy(at: path, atOrBefore: .max, excluding: directory.path + "/./store")
        } throws: { error in
            "\(error)".contains("is the store itself")
        }
        let store = try BaseAuditTests.reader(path)
        defer { store.close() }
        let (none, seqs) = try Store.newestCopy(at: backups, atOrBefore: 1)
        #expect(none == nil)
        let sorted = seqs.sorted()  // in the names' order: copy-1000 before copy-400
        try #require(sorted.count == 2 && sorted[0] < sorted[1] && sorted[0] > 1 && seqs != sorted, "\(seqs)")
        let (early, late) = (sorted[0], sorted[1])
        for (seq, expected) in [
            (early, "copy-400"), (late - 1, "copy-400"), (late, "copy-1000"), (late + 9, "copy-1000"),
        ] {
            let copy = try #require(try Store.newestCopy(at: backups, atOrBefore: seq).copy)
            defer { copy.store.close() }
            #expect(copy.path == "\(backups)/\(expected)" && copy.checkpointSeq <= seq, "at \(seq)")
        }
        // A copy itself, not a directory of them: it, when not past the seq.
        #expect(try Store.newestCopy(at: backups + "/copy-400", atOrBefore: early).copy?.checkpointSeq == early)
        #expect(try Store.newestCopy(at: backups + "/copy-1000", atOrBefore: early).copy == nil)
        #expect(throws: StoreError.self) { try Store.newestCopy(at: directory.child("nothing"), atOrBefore: 1) }
        // The copy chosen for a seq between the two gives the answers a replay from seq 1 does.
        let seq = (early + late) / 2
        let copy = try #require(try Store.newestCopy(at: backups, atOrBefore: seq).copy)
        defer { copy.store.close() }
        let full = try store.replayed(at: seq)
        defer { full.remove() }
        let fromCopy = try store.replayed(at: seq, base: copy.store)
        defer { fromCopy.remove() }
        #expect(try Self.differences(full, fromCopy) == [])

        // The CLI: the same answer, the copy it took said on stderr; none at or before the seq is an error.
        let err = directory.child("cli.err")
        func unread(_ extra: [String]) throws -> (status: ChildProcess.Status, lines: [String]) {
            try ChildProcess.run(
                TestSupport.teamlogExecutable, ["unread", "u1", "--json", "--store", path] + extra, stderr: err,
                timeout: 120)
        }
        let alone = try unread(["--at", "\(seq)"])
        let cli = try unread(["--at", "\(seq)", "--base", backups])
        #expect(cli.status == .exited(0) && cli.lines == alone.lines && !alone.lines.isEmpty)
        #expect(readTextFile(err).contains("from the copy \(backups)/copy-400 at seq \(early)"), "\(readTextFile(err))")
        let before = try unread(["--at", "1", "--base", backups])
        #expect(before.status == .exited(1))
        #expect(readTextFile(err).contains("no copy at \(backups) is at or before seq 1"), "\(readTextFile(err))")

        // A damaged copy among them (truncated) is passed over and named, not fatal to the others (the
        // query failed on it, though it was not the one needed).
        #expect(mkdir(backups + "/copy-zz", 0o755) == 0)
        for name in ["data.mdb", "proj"] {
            #expect(try ChildProcess.run("/bin/cp", ["-r", "\(backups)/copy-1000/\(name)", "\(backups)/copy-zz/\(name)"], timeout: 30).status == .exited(0))
        }
        #expect(truncate(backups + "/copy-zz/data.mdb", 20_000) == 0)
        var passed: [String] = []
        #expect(try Store.newestCopy(at: backups, atOrBefore: seq) { entry, _ in passed.append(entry) }.copy?.path == "\(backups)/copy-400")
        #expect(passed == ["\(backups)/copy-zz"])
        let despite = try unread(["--at", "\(seq)", "--base", backups])
        #expect(despite.status == .exited(0) && despite.lines == alone.lines)
        #expect(readTextFile(err).contains("passed over the copy \(backups)/copy-zz"), "\(readTextFile(err))")
        #expect(throws: StoreError.self, "a damaged copy named itself is an error") {
            try Store.newestCopy(at: backups + "/copy-zz", atOrBefore: .max)
        }
    }

    @Test func theCLIAnswersAsOfASeqFromACopy() throws {
        let directory = TemporaryDirectory("base-at-cli")
        let (path, copyPath) = try BaseAuditTests.storeWithCopy(directory)
        let seq = try {
            let store = try BaseAuditTests.reader(path)
            defer { store.close() }
            return try store.head().seq - 50
        }()
        func unread(_ extra: [String]) throws -> (status: ChildProcess.Status, lines: [String]) {
            try ChildProcess.run(
                TestSupport.teamlogExecutable, ["unread", "u1", "--json", "--store", path] + extra,
                stderr: directory.child("unread.err"), timeout: 120)
        }
        let full = try unread(["--at", "\(seq)"])
        #expect(full.status == .exited(0), "\(readTextFile(directory.child("unread.err")))")
        let fromCopy = try unread(["--at", "\(seq)", "--base", copyPath])
        #expect(fromCopy.status == .exited(0), "\(readTextFile(directory.child("unread.err")))")
        #expect(fromCopy.lines == full.lines && !full.lines.isEmpty)
        #expect(full.lines != (try unread([])).lines, "the answer as of \(seq) is not the head's")

        let alone = try unread(["--base", copyPath])
        #expect(alone.status == .exited(64))
        #expect(readTextFile(directory.child("unread.err")).contains("--base is for --at SEQ"))
    }
}
