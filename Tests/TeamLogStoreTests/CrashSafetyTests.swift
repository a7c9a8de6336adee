import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `teamlog ingest` killed with SIGKILL mid-run: the store reopens sound, holds everything it printed,
/// and re-ingesting the whole file ends exactly where a clean run does; ingesting twice changes nothing.
///
/// The ingests run as child processes of the built `teamlog`, so a kill is a real crash (no deinit, no
/// final commit). Workloads are small enough for debug builds (about 7k ops/s).
@Suite struct CrashSafetyTests {
    static let lineCount = 15_000
    static let seed: UInt64 = 20_260_101

    /// One stored projection record.
    struct Row: Equatable, Sendable, CustomStringConvertible {
        var key: [UInt8]
        var value: [UInt8]
        var description: String { "\(String(decoding: key, as: UTF8.self)) (\(value.count) bytes)" }
    }

    typealias Tables = [ProjectionTable: [Row]]

    /// The workload and what a clean, uninterrupted ingest of it (store A) ends with.
    struct Reference: Sendable {
        /// The workload file's bytes.
        var workload: [UInt8]
        /// The `opId` of each line (index = line - 1), `nil` for lines without one.
        var lineOpIds: [String?]
        /// The `opId` of each event of A, in seq order.
        var logOpIds: [String?]
        /// A's checkpoint seq.
        var seq: UInt64
        /// A's stored projection tables.
        var tables: Tables
        /// The projections A's state encodes to (`ProjectionCodec.allRecords`).
        var records: Tables
        /// A's audit verdict.
        var audit: String
        var auditOK: Bool
    }

    /// Built once, on first use, and shared by the parallel test cases (only plain values escape).
    static let reference: Result<Reference, any Error> = Result { try makeReference() }

    static func makeReference() throws -> Reference {
        let directory = TemporaryDirectory("crash-reference")
        let lines = TeamWorkloadProbe.lines(count: lineCount, seed: seed)
        let workload = Array(lines.joined(separator: "\n").utf8) + [0x0A]
        let file = directory.child("ops.jsonl")
        try writeFile(file, workload)
        let storePath = directory.child("A")
        let clean = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", storePath, "--emit", "none"],
            stderr: directory.child("A.err"), timeout: 300)
        guard clean.status == .exited(0) else {
            throw ChildProcessError("clean ingest \(clean.status): \(readText(directory.child("A.err")))")
        }
        let store = try Store(path: storePath)
        let audit = try store.audit()
        let seq = try store.head().seq
        return Reference(
            workload: workload,
            lineOpIds: lines.map { (try? JSONParser.parse($0))?["opId"]?.stringValue },
            logOpIds: try opIds(of: store), seq: seq, tables: try storedTables(store),
            records: rows(ProjectionCodec.allRecords(try store.loadAllProjections())), audit: "\(audit)", auditOK: audit.ok)
    }

    // MARK: (a) The clean run

    @Test func cleanRunIsSound() throws {
        let reference = try Self.reference.get()
        #expect(reference.auditOK, "\(reference.audit)")
        #expect(reference.seq > UInt64(Self.lineCount / 2), "most workload lines are accepted")
        #expect(reference.logOpIds.count == Int(reference.seq))
        #expect(reference.logOpIds.allSatisfy { $0 != nil }, "every workload op carries an opId")
        #expect(reference.tables == reference.records, "stored projections equal the state's")
    }

    // MARK: (b) Crash, reopen, re-ingest

    /// Seconds to let the child run before the kill: seeded, spread over the run.
    static func delay(_ run: UInt64) -> Double {
        var x = (seed ^ (run &* 0x9E37_79B9_7F4A_7C15)) &+ 0x9E37_79B9_7F4A_7C15
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31
        return 0.1 + Double(x % 1_000) / 1_000 * 1.4
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func killedIngestKeepsWhatItPrintedAndReingestEndsLikeACleanRun(run: UInt64) throws {
        let reference = try Self.reference.get()
        let directory = TemporaryDirectory("crash-\(run)")
        let file = directory.child("ops.jsonl")
        try Self.writeFile(file, reference.workload)
        let storePath = directory.child("B")

        // 1. Ingest with small batches, reading its output all along (a full pipe would stall it), and
        //    kill it once the delay has passed and it has printed at least one event.
        let delay = Self.delay(run)
        let child = try ChildProcess(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", storePath, "--batch-size", "200"],
            stderr: directory.child("crash.err"))
        let deadline = Self.now() + delay
        var printedAnEvent = false
        while !child.reachedEnd {
            let left = deadline - Self.now()
            if left <= 0 && printedAnEvent { break }
            let line = try child.readLine(timeout: left > 0 ? left : 30)
            if let line, Self.isEvent(line) { printedAnEvent = true }
            if line == nil && left <= 0 { break }  // no event within 30 s after the delay
        }
        child.kill(SIGKILL)
        let status = child.wait()
        try child.readToEnd(timeout: 30)  // what it wrote before dying is still in the pipe
        #expect(
            status == .signaled(SIGKILL),
            "ingest ended before the kill (\(delay) s): \(Self.readText(directory.child("crash.err")))")
        #expect(printedAnEvent, "no event printed before the kill")

        let printed = child.lines.compactMap { try? JSONParser.parse($0) }
        #expect(printed.count == child.lines.count, "every complete output line is JSON")
        let printedEvents = printed.filter { $0["kind"]?.stringValue == "event" }
        let printedSeqs = printedEvents.compactMap { $0["seq"]?.intValue }.map { UInt64($0) }
        #expect(printedSeqs.count == printedEvents.count)
        #expect(printedSeqs == (0..<printedSeqs.count).map { UInt64($0) + 1 }, "events are printed in seq order")
        #expect(!printed.contains { $0["kind"]?.stringValue == "duplicate" }, "a fresh store has no duplicates")

        // 2. Reopen: sound, and everything printed is committed, as printed.
        let committed: UInt64
        let committedOpIds: [String?]
        do {
            let store = try Store(path: storePath)
            let audit = try store.audit()
            #expect(audit.ok, "after the crash: \(audit)")
            committed = try store.head().seq
            #expect(UInt64(printedSeqs.count) <= committed, "printed events are only emitted after their commit")
            #expect(printedSeqs.allSatisfy { $0 <= committed })
            #expect(committed <= reference.seq)
            committedOpIds = try Self.opIds(of: store)
            #expect(committedOpIds.count == Int(committed))
            #expect(
                committedOpIds == Array(reference.logOpIds.prefix(Int(committed))),
                "the log is a prefix of the clean run's")
            for event in printedEvents {
                guard let line = event["line"]?.intValue, let seq = event["seq"]?.intValue,
                    let opId = reference.lineOpIds[Int(line) - 1]
                else { continue }
                #expect(try store.seqOf(opId: Id(opId)) == UInt64(seq), "printed line \(line) is stored as seq \(seq)")
            }
        }

        // 3. Re-ingest the whole file: committed ops are duplicates, the rest continues the log.
        let rerun = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", storePath],
            stderr: directory.child("rerun.err"), timeout: 300)
        #expect(rerun.status == .exited(0), "\(Self.readText(directory.child("rerun.err")))")
        let records = rerun.lines.compactMap { try? JSONParser.parse($0) }
        let duplicates = records.filter { $0["kind"]?.stringValue == "duplicate" }
        let withOpIds = committedOpIds.compactMap { $0 }
        #expect(duplicates.count == withOpIds.count)
        #expect(Set(duplicates.compactMap { $0["opId"]?.stringValue }) == Set(withOpIds))
        #expect(duplicates.allSatisfy { ($0["seq"]?.intValue).map { $0 >= 1 && UInt64($0) <= committed } ?? false })
        let newSeqs = records.filter { $0["kind"]?.stringValue == "event" }.compactMap { $0["seq"]?.intValue }
        #expect(newSeqs.first.map { UInt64($0) } == (committed < reference.seq ? committed + 1 : nil))

        // 4. The end state equals the clean run's, byte for byte.
        let store = try Store(path: storePath)
        let audit = try store.audit()
        #expect(audit.ok, "after the re-ingest: \(audit)")
        #expect(try store.head().seq == reference.seq)
        #expect(try Self.opIds(of: store) == reference.logOpIds)
        let tables = try Self.storedTables(store)
        for table in ProjectionTable.allCases {
            #expect(tables[table] == reference.tables[table], "stored \(table.rawValue) differs from the clean run's")
        }
        #expect(Self.rows(ProjectionCodec.allRecords(try store.loadAllProjections())) == reference.records)
    }

    // MARK: (c) Idempotency

    @Test func ingestingTheSameLinesTwiceStoresNothingNew() throws {
        let directory = TemporaryDirectory("crash-twice")
        let lines = TeamWorkloadProbe.lines(count: 4_000, seed: Self.seed + 1).map { Array($0.utf8) }
        var options = Store.Options()
        options.noSync = true
        var processorOptions = Processor.Options()
        processorOptions.batchSize = 500
        processorOptions.emit = .events

        /// One full pass over the lines in a freshly opened store: its records and the checkpoint after.
        func pass() throws -> (records: [JSONValue], seq: UInt64) {
            let store = try Store(path: directory.child("store"), options: options)
            let sink = ByteSink()
            let processor = Processor(store: store, options: processorOptions) { sink.bytes += $0 }
            for (index, line) in lines.enumerated() {
                try processor.process(.text(number: index + 1, bytes: line))
            }
            try processor.commit()
            let records = try sink.bytes.split(separator: 0x0A).map { try JSONParser.parse(Array($0)) }
            return (records, try store.head().seq)
        }

        let first = try pass()
        let accepted = first.records.filter { $0["kind"]?.stringValue == "event" }
        #expect(UInt64(accepted.count) == first.seq)
        #expect(accepted.count > lines.count / 2)

        let second = try pass()
        #expect(second.seq == first.seq, "the second pass stored new events")
        #expect(!second.records.contains { $0["kind"]?.stringValue == "event" })
        let duplicatesByLine = Dictionary(
            second.records.filter { $0["kind"]?.stringValue == "duplicate" }.map { ($0["line"]?.intValue ?? 0, $0) },
            uniquingKeysWith: { a, _ in a })
        #expect(duplicatesByLine.count == accepted.count)
        for event in accepted {
            let line = event["line"]?.intValue ?? 0
            let opId = (try? JSONParser.parse(lines[Int(line) - 1]))?["opId"]
            let duplicate = duplicatesByLine[line]
            #expect(duplicate?["opId"] == opId, "line \(line)")
            #expect(duplicate?["seq"] == event["seq"], "line \(line) answers its original seq")
        }
        // Rejected lines stay rejected with the same code (an opId remembers its rejection; a line without
        // one fails on its shape again), so nothing rejected the first time slips in against the later state.
        let rejectedFirst = first.records.filter { $0["kind"]?.stringValue == "rejected" }
        let rejectedSecond = Dictionary(
            second.records.filter { $0["kind"]?.stringValue == "rejected" }.map { ($0["line"]?.intValue ?? 0, $0) },
            uniquingKeysWith: { a, _ in a })
        #expect(rejectedSecond.count == rejectedFirst.count)
        for rejected in rejectedFirst {
            let line = rejected["line"]?.intValue ?? 0
            #expect(rejectedSecond[line]?["code"] == rejected["code"], "line \(line) is rejected again the same way")
        }
        // Reopened once more, the store is as sound as after the first pass.
        let store = try Store(path: directory.child("store"), options: options)
        #expect(try store.audit().ok)
    }

    // MARK: Helpers

    final class ByteSink {
        var bytes: [UInt8] = []
    }

    static func isEvent(_ line: String) -> Bool { line.hasPrefix("{\"kind\":\"event\"") }

    /// The `opId` of every committed event, in seq order.
    static func opIds(of store: Store) throws -> [String?] {
        let last = try store.head().seq
        guard last > 0 else { return [] }
        return try (1...last).map { seq in
            guard let event = try store.event(at: seq) else { throw StoreError("no event at seq \(seq)") }
            return event.op.opId?.string
        }
    }

    static func rows(_ tables: [ProjectionTable: [([UInt8], [UInt8])]]) -> Tables {
        tables.mapValues { $0.map { Row(key: $0.0, value: $0.1) } }
    }

    static func storedTables(_ store: Store) throws -> Tables {
        rows(try store.readProjections { txn in try store.storedProjections(in: txn) })
    }

    static func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            guard n > 0 else { throw StoreError("cannot write \(path): \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    static func readText(_ path: String) -> String { readTextFile(path) }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
