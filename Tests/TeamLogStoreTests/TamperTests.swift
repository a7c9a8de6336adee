import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A log changed behind the store's back — one byte flipped in `data.mdb`, a record deleted, two records
/// swapped — is caught by the hash chain: `audit` (API and CLI) names the first bad seq, a writer refuses to
/// append, `teamlog repair` cuts the log there, and feeding the input again ends exactly where the untouched
/// store was.
@Suite struct TamperTests {
    static let seed: UInt64 = 20_260_404
    static let marker = "TAMPER-7"

    /// A store built from a workload with one team named `marker` in the middle, and what it held.
    struct Built {
        let directory = TemporaryDirectory("tamper")
        var storePath: String { directory.child("store") }
        var inputPath: String { directory.child("ops.jsonl") }
        var markerSeq: UInt64 = 0
        var lastSeq: UInt64 = 0
        var logOpIds: [String?] = []
        var tables: CrashSafetyTests.Tables = [:]
    }

    static func build() throws -> Built {
        var built = Built()
        var lines = TeamWorkloadProbe.lines(count: 600, seed: seed)
        lines.insert(
            #"{"op":"team.create","actor":"u1","team":"tamper7","name":"\#(marker)","ts":1767225600000,"opId":"tamper-7"}"#,
            at: 300)
        try CrashSafetyTests.writeFile(built.inputPath, Array(lines.joined(separator: "\n").utf8) + [0x0A])
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", built.inputPath, "--store", built.storePath, "--emit", "none"],
            stderr: built.directory.child("build.err"), timeout: 120)
        guard run.status == .exited(0) else {
            throw ChildProcessError(
                "building the store: \(run.status): \(CrashSafetyTests.readText(built.directory.child("build.err")))")
        }
        let store = try Store(path: built.storePath)
        defer { store.close() }
        guard let seq = try store.seqOf(opId: "tamper-7") else { throw StoreError("the marker op was not accepted") }
        built.markerSeq = seq
        built.lastSeq = try store.head().seq
        built.logOpIds = try CrashSafetyTests.opIds(of: store)
        built.tables = try CrashSafetyTests.storedTables(store)
        return built
    }

    // MARK: (a) A flipped byte in data.mdb

    @Test func flippedByteInALogRecordIsNamedRefusedAndRepaired() throws {
        let built = try Self.build()
        let k = built.markerSeq
        #expect(k > 1 && k < built.lastSeq, "the marker sits inside the log")

        // The record's stored value (event + chained hash) is unique in the file but for stale copies of its page
        // (LMDB copies pages on write; the older meta page may still reach them): flip the marker's first byte in
        // every copy, so whichever the reader follows is changed.
        let value = try Self.withLog(built.storePath) { env, log in
            try env.read { txn in try txn.get(log, key: BigEndianUInt64.encoded(k)) }
        }
        let record = try #require(value)
        let data = built.storePath + "/data.mdb"
        var bytes = try HostileInputTests.readBytes(data)
        let copies = Self.occurrences(of: record, in: bytes)
        let markerOffset = try #require(
            Self.occurrences(of: Array(Self.marker.utf8), in: record).first,
            "the event payload holds the team name")
        #expect(!copies.isEmpty, "the log record's bytes are found in data.mdb")
        for copy in copies { bytes[copy + markerOffset] ^= 0x20 }  // "TAMPER-7" → "tAMPER-7"
        try Self.overwrite(data, with: bytes, at: copies.map { $0 + markerOffset })

        // The API names seq k.
        do {
            let store = try Store(path: built.storePath, options: Self.verifying)
            defer { store.close() }
            #expect(store.refusal?.code == .brokenChain, "\(String(describing: store.refusal))")
            #expect(store.refusal?.path == built.storePath)
            #expect(try store.verifyChain()?.seq == k)
            let audit = try store.audit()
            #expect(!audit.ok)
            #expect(audit.chainProblem?.seq == k, "\(audit)")
            #expect(audit.chainProblem?.message.contains("hash mismatch") == true)
        }
        try Self.expectCLIAudit(built, names: k, "hash mismatch")
        try Self.expectPlainOpenAccepts(built)
        try Self.expectIngestRefused(built)
        // The saved records are the ops from k on, the first with its flipped byte; mended, they restore the store.
        let tampered = "t" + Self.marker.dropFirst()  // "tAMPER-7"
        let flipped = { (lines: [String]) in [lines[0].replacing(Self.marker, with: tampered)] + lines.dropFirst() }
        try Self.expectRepairAndRefeed(built, cutAt: k, cut: flipped) { cut in
            [cut[0].replacing(tampered, with: Self.marker)] + cut.dropFirst()
        }
    }

    // MARK: (b) A deleted record

    @Test func deletedLogRecordIsNamedAsMissing() throws {
        let built = try Self.build()
        let k = built.lastSeq / 2
        try Self.withLog(built.storePath) { env, log in
            let removed = try env.write { txn in try txn.delete(log, key: BigEndianUInt64.encoded(k)) }
            #expect(removed)
        }
        do {
            let store = try Store(path: built.storePath, options: Self.verifying)
            defer { store.close() }
            let audit = try store.audit()
            #expect(audit.chainProblem?.seq == k, "\(audit)")
            #expect(audit.chainProblem?.message.contains("record missing") == true, "\(audit)")
            #expect(try store.verifyChain()?.seq == k)
            #expect(store.refusal?.code == .brokenChain, "\(String(describing: store.refusal))")
        }
        try Self.expectCLIAudit(built, names: k, "record missing")
        try Self.expectIngestRefused(built)
        try Self.expectRepairAndRefeed(built, cutAt: k) { Array($0.dropFirst()) }  // all after the missing one
    }

    // MARK: (c) Two records swapped

    @Test func swappedLogRecordsAreNamedAtTheFirst() throws {
        let built = try Self.build()
        let k = built.lastSeq / 3
        try Self.withLog(built.storePath) { env, log in
            try env.write { txn in
                let a = try #require(try txn.get(log, key: BigEndianUInt64.encoded(k)))
                let b = try #require(try txn.get(log, key: BigEndianUInt64.encoded(k + 1)))
                #expect(a != b)
                try txn.put(log, key: BigEndianUInt64.encoded(k), value: b)
                try txn.put(log, key: BigEndianUInt64.encoded(k + 1), value: a)
            }
        }
        do {
            let store = try Store(path: built.storePath, options: Self.verifying)
            defer { store.close() }
            let audit = try store.audit()
            #expect(audit.chainProblem?.seq == k, "\(audit)")
            #expect(try store.verifyChain()?.seq == k)
        }
        try Self.expectCLIAudit(built, names: k, "hash mismatch")
        try Self.expectPlainOpenAccepts(built)
        try Self.expectIngestRefused(built)
        try Self.expectRepairAndRefeed(built, cutAt: k) { [$0[1], $0[0]] + $0.dropFirst(2) }  // in key order
    }

    // MARK: Shared checks

    /// `teamlog audit` exits 1 and prints the broken seq.
    static func expectCLIAudit(
        _ built: Built, names seq: UInt64, _ words: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let audit = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", built.storePath], timeout: 60)
        #expect(audit.status == .exited(1), sourceLocation: sourceLocation)
        let broken = audit.lines.first { $0.hasPrefix("chain: BROKEN at seq \(seq):") }
        #expect(broken?.contains(words) == true, "\(audit.lines)", sourceLocation: sourceLocation)
        #expect(audit.lines.last == "audit FAILED", sourceLocation: sourceLocation)
        // The break is before the checkpoint here: the tables are not compared with a replay that stopped
        // at it (every one "differed", which said nothing).
        #expect(audit.lines.contains { $0.hasPrefix("tables: not compared") }, "\(audit.lines)", sourceLocation: sourceLocation)
        #expect(!audit.lines.contains { $0.contains("DIFFERS") }, "\(audit.lines)", sourceLocation: sourceLocation)
    }

    /// A writer refuses to append onto the broken chain: exit 2, and the store is left as it was.
    /// Opening for writing with the whole chain verified (`ingest --verify-chain`). A plain open checks
    /// only the log after the projections' checkpoint (O(1) in the log's length); `audit` checks it all.
    static var verifying: Store.Options {
        var options = Store.Options()
        options.verifyChainAtOpen = true
        return options
    }

    /// A plain open does not walk the checkpointed log: a damage there is for `audit` to find.
    static func expectPlainOpenAccepts(_ built: Built, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let store = try Store(path: built.storePath)
        defer { store.close() }
        #expect(store.refusal == nil, sourceLocation: sourceLocation)
        #expect(store.replayedAtOpen == 0, "the build's last checkpoint is at the head", sourceLocation: sourceLocation)
    }

    static func expectIngestRefused(_ built: Built, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let file = built.directory.child("more.jsonl")
        try CrashSafetyTests.writeFile(
            file,
            Array(#"{"op":"team.create","actor":"u2","team":"more","ts":1767325600000,"opId":"more-1"}"#.utf8) + [0x0A])
        let err = built.directory.child("refused.err")
        let ingest = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", built.storePath, "--verify-chain"],
            stderr: err, timeout: 60)
        #expect(ingest.status == .exited(2), sourceLocation: sourceLocation)
        #expect(
            CrashSafetyTests.readText(err).contains("refusing to append"), "\(CrashSafetyTests.readText(err))",
            sourceLocation: sourceLocation)
        #expect(ingest.lines.isEmpty, sourceLocation: sourceLocation)
        var options = Store.Options()
        options.readOnly = true
        let store = try Store(path: built.storePath, options: options, loadState: false)
        #expect(try store.head().seq == built.lastSeq, "nothing was appended", sourceLocation: sourceLocation)
    }

    /// `teamlog repair` cuts the log before `seq`; audit is OK, a writer works again, and feeding the whole
    /// input again restores exactly the untouched store — or, with `refeedCut`, feeding the records the
    /// repair saved (mended by `refeedCut`) does. The saved records are the untouched store's ops from `seq`
    /// on (`teamlog log --from seq`) as `cut` makes them from those (the tampering shows in them).
    static func expectRepairAndRefeed(
        _ built: Built, cutAt seq: UInt64, cut: ([String]) -> [String], refeedCut: (([String]) -> [String])? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let repair = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["repair", "--store", built.storePath], timeout: 60)
        #expect(repair.status == .exited(0), sourceLocation: sourceLocation)
        let saved = try #require(
            repair.lines.first { $0.hasPrefix("saved the ") }, "\(repair.lines)", sourceLocation: sourceLocation)
        let cutPath = try #require(
            saved.split(separator: " ").first { $0.hasPrefix(built.storePath + "/cut-") }.map { String($0.dropLast()) },
            sourceLocation: sourceLocation)
        let cutLines = CrashSafetyTests.readText(cutPath).split(separator: "\n").map(String.init)
        let status = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["status", "--store", built.storePath, "--json"], timeout: 60)
        let statusView = try JSONParser.parse(Array((status.lines.first ?? "").utf8))
        let setAside = statusView["setAside"]
        // The input position the ingest recorded named lines whose events were cut: no longer known, so
        // `ingest --resume` cannot skip them.
        #expect(statusView["input"] == .null, "repair forgets the cut input position", sourceLocation: sourceLocation)
        #expect(
            setAside == .array([.object([("path", .string(cutPath)), ("kind", .string("cutRecords"))])]),
            "status names the saved records", sourceLocation: sourceLocation)
        #expect(
            repair.lines.first?.hasPrefix("chain broken at seq \(seq):") == true, "\(repair.lines)",
            sourceLocation: sourceLocation)
        #expect(
            repair.lines.contains { $0.hasPrefix("kept \(seq - 1) events;") }, "\(repair.lines)",
            sourceLocation: sourceLocation)

        let audit = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["audit", "--store", built.storePath], timeout: 60)
        #expect(audit.status == .exited(0), "\(audit.lines)", sourceLocation: sourceLocation)
        #expect(audit.lines.contains("chain: OK") && audit.lines.last == "audit OK", sourceLocation: sourceLocation)

        let err = built.directory.child("refeed.err")
        var input = built.inputPath
        if let refeedCut {
            input = built.directory.child("mended-cut.jsonl")
            try CrashSafetyTests.writeFile(input, Array(refeedCut(cutLines).joined(separator: "\n").utf8) + [0x0A])
        }
        let refeed = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", built.storePath, "--emit", "events"],
            stderr: err, timeout: 120)
        #expect(refeed.status == .exited(0), "\(CrashSafetyTests.readText(err))", sourceLocation: sourceLocation)
        let firstNew = refeed.lines.compactMap { try? JSONParser.parse($0) }
            .first { $0["kind"]?.stringValue == "event" }?["seq"]?.intValue
        #expect(firstNew == Int64(seq), "the log continues at the cut", sourceLocation: sourceLocation)

        let export = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["log", "--store", built.storePath, "--from", String(seq)], timeout: 60)
        #expect(export.status == .exited(0), sourceLocation: sourceLocation)
        #expect(cutLines == cut(export.lines), "the records repair saved", sourceLocation: sourceLocation)

        let store = try Store(path: built.storePath)
        defer { store.close() }
        #expect(try store.audit().ok, sourceLocation: sourceLocation)
        #expect(try store.head().seq == built.lastSeq, sourceLocation: sourceLocation)
        #expect(try CrashSafetyTests.opIds(of: store) == built.logOpIds, sourceLocation: sourceLocation)
        let tables = try CrashSafetyTests.storedTables(store)
        for table in ProjectionTable.allCases {
            #expect(
                tables[table] == built.tables[table], "\(table.rawValue) after repair and re-feed",
                sourceLocation: sourceLocation)
        }
    }

    /// An export from `from` checks the chain over what it exports, from the hash stored with the record
    /// before it (not from seq 1: its cost is the range's, not the log's): a break inside the range stops it
    /// and is named; one before it is `audit`'s to find; a `from` past the end exports nothing.
    @Test func anExportChecksTheChainOverItsRange() throws {
        let h = try OpIdAuditTests.makeStore()  // 4 events
        try Self.breakRecord(h.path, seq: 2)  // payload flipped, its stored hash kept
        var options = Store.Options()
        options.readOnly = true
        let store = try Store(path: h.path, options: options, loadState: false)
        defer { store.close() }
        func export(from: UInt64) throws -> (seqs: [UInt64], problem: Store.ChainProblem?) {
            var seqs: [UInt64] = []
            var problem: Store.ChainProblem?
            try store.forEachEvent(from: from, { seqs.append($0.seq) }, problem: { problem = $0 })
            return (seqs, problem)
        }
        let whole = try export(from: 1)
        #expect(whole.seqs == [1] && whole.problem?.seq == 2, "\(whole)")
        let inside = try export(from: 2)
        #expect(inside.seqs.isEmpty && inside.problem?.seq == 2, "\(inside)")
        let after = try export(from: 3)
        #expect(after.seqs == [3, 4] && after.problem == nil, "\(after)")
        let past = try export(from: 9)
        #expect(past.seqs.isEmpty && past.problem == nil)
        let next = try export(from: 5)  // one past the head: an incremental export that finds nothing
        #expect(next.seqs.isEmpty && next.problem == nil)
        #expect(try !store.audit().ok, "the whole chain is audit's")
    }

    // MARK: Helpers

    /// Opens the store's LMDB environment directly (no `Store` may have it open in this process) and its log.
    static func withLog<R>(_ path: String, _ body: (Environment, DatabaseHandle) throws -> R) throws -> R {
        let env = try Environment(path: path)
        return try body(env, try env.openHandle("log", create: false))
    }

    /// Flips a byte of log record `seq`'s event in place, its chained hash kept (the record's last 32
    /// bytes): the chain breaks there.
    static func breakRecord(_ path: String, seq: UInt64) throws {
        try withLog(path) { env, log in
            try env.write { txn in
                let key = BigEndianUInt64.encoded(seq)
                var value = try #require(try txn.get(log, key: key))
                value[0] ^= 0x01
                try txn.put(log, key: key, value: value)
            }
        }
    }

    /// Start offsets of every occurrence of `needle` in `haystack`.
    static func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> [Int] {
        guard !needle.isEmpty, haystack.count >= needle.count else { return [] }
        var found: [Int] = []
        let first = needle[0]
        var i = 0
        while i <= haystack.count - needle.count {
            if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { found.append(i) }
            i += 1
        }
        return found
    }

    /// Writes `bytes[offset]` back to the file at each offset.
    static func overwrite(_ path: String, with bytes: [UInt8], at offsets: [Int]) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        for offset in offsets {
            var byte = bytes[offset]
            guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else {
                throw StoreError("cannot write \(path): \(String(cString: strerror(errno)))")
            }
        }
        fsync(fd)
    }

    /// A page of zeros in the log — a common real-world failure — makes LMDB fail an assertion and abort the
    /// process (it checks pages by assertion, not by error). Before it aborts, teamlog says which file is
    /// damaged and what can be done (it printed only LMDB's "Assertion 'IS_LEAF(mp)' failed"). (`log` hands
    /// its lines on every 64 KiB, so little of what it read before the page is lost with the process.)
    @Test func aZeroedLogPageIsNamedBeforeLMDBStopsTheProcess() throws {
        let built = try Self.build()
        var st = stat()
        #expect(stat(built.storePath + "/data.mdb", &st) == 0)
        let pages = Int(st.st_size) / 4_096
        var found = false
        for page in stride(from: pages / 2, to: pages, by: 1) where !found {
            let copy = built.directory.child("zeroed-\(page)")
            #expect(try ChildProcess.run("/bin/cp", ["-r", built.storePath, copy], timeout: 30).status == .exited(0))
            let fd = open(copy + "/data.mdb", O_WRONLY | O_CLOEXEC)
            let zeros = [UInt8](repeating: 0, count: 4_096)
            #expect(pwrite(fd, zeros, zeros.count, off_t(page * 4_096)) == zeros.count)
            close(fd)
            let err = built.directory.child("zeroed-\(page).err")
            let run = try ChildProcess.run(TestSupport.teamlogExecutable, ["log", "--store", copy], stderr: err, timeout: 60)
            guard case .signaled = run.status else { continue }  // not a page the export reads
            found = true
            let said = readTextFile(err)
            #expect(said.contains("teamlog: LMDB found a damaged page in \(copy)/data.mdb"), "\(said)")
            #expect(said.contains("restore the store from a copy"), "\(said)")
        }
        #expect(found, "no page of the log's second half stopped the export")
    }
}
