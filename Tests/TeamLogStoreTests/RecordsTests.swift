import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `Store.rederiveRecords` / `teamlog records`: the SPEC §4 records of past events, re-derived from the
/// log, are the ones the writer made when it accepted them — every `event` record (with `line` 0) and
/// every output, in log order — for any range, from a copy or from seq 1, with a working set smaller than
/// the history.
@Suite struct RecordsTests {
    static let lines = WorkingSetTests.mixedLines(count: 3_000, seed: 77)

    /// The records the writer made, by seq: `rejected` and `duplicate` left out (they are the request's),
    /// `event` records with `line` 0.
    static func written(into store: Store, _ lines: ArraySlice<String>, firstLine: Int = 1) throws -> [Record] {
        var records: [Record] = []
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        processor.observer = { record, _ in
            switch record {
            case .rejected, .duplicate: break
            case .event(_, let seq, let ts, let op): records.append(.event(line: 0, seq: seq, ts: ts, op: op))
            case .output: records.append(record)
            }
        }
        for (n, line) in lines.enumerated() {
            try processor.process(.text(number: firstLine + n, bytes: Array(line.utf8)))
            if (n + 1) % 100 == 0 { try processor.commit() }
        }
        try processor.commit()
        return records
    }

    static func rederived(_ store: Store, from: UInt64, to: UInt64? = nil, base: Store? = nil) throws -> [Record] {
        var records: [Record] = []
        var seqs: [UInt64] = []
        let result = try store.rederiveRecords(from: from, to: to, base: base) { seq, batch in
            seqs.append(seq)
            records += batch
            return true
        }
        #expect(result.problem == nil)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "one call per event, in log order")
        if let last = seqs.last { #expect(result.last == last) }
        return records
    }

    static func seq(_ record: Record) -> UInt64 {
        switch record {
        case .event(_, let seq, _, _): seq
        case .output(.tip(let tip)): tip.seq
        case .output(.notice(let notice)): notice.seq
        case .output(.delivery(let delivery)): delivery.seq
        case .output(.signal(let signal)): signal.seq
        case .output(.login(let login)): login.seq
        default: 0
        }
    }

    @Test func theRecordsOfAnyRangeAreTheOnesTheWriterMade() throws {
        let dir = TemporaryDirectory("records")
        // A small checkpoint interval: the writer's working set is evicted and loaded back many times.
        let store = try Store(path: dir.child("store"), options: .checkpointing(every: 200))
        defer { store.close() }
        let written = try Self.written(into: store, Self.lines[...])
        let head = try store.head().seq
        #expect(head > 2_500)
        #expect(Set(written.map(\.kind)).isSuperset(of: ["event", "delivery", "tip", "signal", "login", "notice"]))

        #expect(try Self.rederived(store, from: 1) == written, "the whole log")
        var rng = SplitMix64(seed: 5)
        for _ in 0..<4 {
            let a = 1 + rng.next() % head
            let b = a + rng.next() % (head - a + 1)
            let expected = written.filter { (a...b).contains(Self.seq($0)) }
            #expect(try Self.rederived(store, from: a, to: b) == expected, "\(a)...\(b)")
        }
        // Past the head: nothing, and no replay to get there.
        #expect(try Self.rederived(store, from: head + 1).isEmpty)
        #expect(try Self.rederived(store, from: head + 1_000).isEmpty)

        // The consumer stops: no further event is handed over.
        var calls = 0
        let stopped = try store.rederiveRecords(from: 10) { _, _ in
            calls += 1
            return calls < 3
        }
        #expect(calls == 3 && stopped.last == 12)
    }

    @Test func fromACopyTheSameRecords() throws {
        let dir = TemporaryDirectory("records-base")
        let store = try Store(path: dir.child("store"), options: .checkpointing(every: 300))
        defer { store.close() }
        var written = try Self.written(into: store, Self.lines[..<1_500])
        try store.checkpointNow()
        let copy = try store.backup(to: dir.child("copy"))
        written += try Self.written(into: store, Self.lines[1_500...], firstLine: 1_501)
        let base = try Store.reader(at: copy.path)
        defer { base.close() }
        let from = copy.checkpointSeq + 1
        let expected = written.filter { Self.seq($0) >= from }
        #expect(!expected.isEmpty)
        #expect(try Self.rederived(store, from: from, base: base) == expected)
        #expect(try Self.rederived(store, from: from) == expected, "and from seq 1")
    }

    /// A reader keeps its place: advanced to the head, then again after the writer went on, it hands over
    /// each event once, the records the writer made.
    @Test func aReaderGoesOnFromWhereItStopped() throws {
        let dir = TemporaryDirectory("records-reader")
        let store = try Store(path: dir.child("store"), options: .checkpointing(every: 250))
        defer { store.close() }
        var written = try Self.written(into: store, Self.lines[..<1_200])
        let reader = try store.recordReader(from: 400)
        defer { reader.close() }
        var read: [Record] = []
        var seqs: [UInt64] = []
        func collect(_ seq: UInt64, _ records: [Record]) -> Bool {
            seqs.append(seq)
            read += records
            return true
        }
        #expect(try reader.advance(collect))
        let firstHead = try store.head().seq
        #expect(reader.position == firstHead)
        #expect(try reader.advance(collect), "nothing new: nothing handed over")
        #expect(seqs.count == Int(firstHead) - 399)
        written += try Self.written(into: store, Self.lines[1_200...], firstLine: 1_201)
        #expect(try reader.advance(through: firstHead + 100, collect))
        #expect(reader.position == firstHead + 100)
        #expect(try reader.advance(collect))
        #expect(reader.position == (try store.head().seq))
        #expect(seqs == Array(400...reader.position))
        #expect(read == written.filter { Self.seq($0) >= 400 })
    }

    @Test func theCommandPrintsWhatIngestPrinted() throws {
        let dir = TemporaryDirectory("records-cli")
        let input = dir.child("ops.jsonl")
        try CrashSafetyTests.writeFile(input, Array((Self.lines[..<800].joined(separator: "\n") + "\n").utf8))
        let store = dir.child("store")
        let ingest = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", input, "--store", store, "--emit", "all"], timeout: 120)
        #expect(ingest.status == .exited(0))
        // What ingest printed, without its rejections, `line` 0 in its event records.
        let expected = try ingest.lines.compactMap { line -> String? in
            let value = try JSONParser.parse(Array(line.utf8))
            switch value["kind"]?.stringValue {
            case "rejected", "duplicate": return nil
            case "event":
                return line.replacingFirst(#""line":\#(value["line"]!.intValue!),"#, with: #""line":0,"#)
            default: return line
            }
        }
        let all = try ChildProcess.run(TestSupport.teamlogExecutable, ["records", "--store", store], timeout: 120)
        #expect(all.status == .exited(0))
        #expect(all.lines == expected)
        let some = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["records", "--store", store, "--from", "300", "--to", "400"], timeout: 120)
        #expect(some.status == .exited(0))
        #expect(
            some.lines
                == expected.filter { line in
                    let seq = (try? JSONParser.parse(Array(line.utf8)))?["seq"]?.intValue ?? 0
                    return (300...400).contains(seq)
                })
        let past = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["records", "--store", store, "--from", "100000"], timeout: 60)
        #expect(past.status == .exited(0) && past.lines.isEmpty)
        let backwards = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["records", "--store", store, "--from", "5", "--to", "4"], timeout: 60)
        #expect(backwards.status == .exited(64))
    }
}

extension String {
    fileprivate func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}
