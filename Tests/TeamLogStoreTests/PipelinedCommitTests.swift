import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Batch mode writes each full batch on the committer thread while the next one is applied: the output,
/// the store and the opId answers must be exactly those of committing in place.
@Suite struct PipelinedCommitTests {
    /// Runs `lines` through the batch processor (the CLI's `ingest` path) into a new store.
    func ingest(_ lines: [String], batchSize: Int, in dir: TemporaryDirectory, name: String) throws -> (
        output: [UInt8], summary: Processor.Summary, audit: AuditReport
    ) {
        var options = Store.Options()
        options.noSync = true
        options.mapSize = 1 << 22  // small: the map grows while batches are in flight
        let store = try Store(path: dir.child(name), options: options)
        var processorOptions = Processor.Options()
        processorOptions.batchSize = batchSize
        var output: [UInt8] = []
        let processor = Processor(store: store, options: processorOptions, clock: { 5 }) { output += $0 }
        let file = dir.child(name + ".jsonl")
        let text = lines.joined(separator: "\n") + "\n"
        let f = fopen(file, "w")!
        _ = Array(text.utf8).withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
        let fd = open(file, O_RDONLY)
        defer { close(fd) }
        var reader = LineReader(fd: fd)
        try processor.run(&reader)
        return (output, processor.summary, try store.audit())
    }

    func workload(_ count: Int, seed: UInt64) -> [String] {
        var options = MixedWorkload.Options()
        options.seed = seed
        options.users = 400
        options.teams = 12
        options.maxTeam = 60
        var w = MixedWorkload(options: options)
        var lines = (0..<count).map { _ in w.next() }
        // Re-sent lines: duplicates whose first copy may still be in flight when they arrive.
        for i in stride(from: 10, to: count, by: 97) { lines.insert(lines[i - 3], at: i) }
        return lines
    }

    @Test(arguments: [1, 7, 64])
    func smallBatchesEqualOneBatch(batchSize: Int) throws {
        let dir = TemporaryDirectory()
        let lines = workload(1_500, seed: UInt64(batchSize))
        let piped = try ingest(lines, batchSize: batchSize, in: dir, name: "piped")
        let whole = try ingest(lines, batchSize: 1_000_000, in: dir, name: "whole")
        #expect(piped.summary.commits > 10)
        #expect(whole.summary.commits == 1)
        #expect(piped.summary.duplicates > 0)
        var expected = whole.summary
        expected.commits = piped.summary.commits
        #expect(piped.summary == expected)
        #expect(piped.output == whole.output)
        #expect(piped.audit.ok && whole.audit.ok)
        #expect(piped.audit.tables.map(\.digest) == whole.audit.tables.map(\.digest))
    }

    @Test func opIdsOfABatchInFlightAreDuplicates() throws {
        let dir = TemporaryDirectory()
        var options = Store.Options()
        options.noSync = true
        let store = try Store(path: dir.child("s"), options: options)
        let create = try OpParser.parse(
            line: op("team.create", "own", ["team": "t1", "name": "T", "members": ["a"], "opId": "k1", "ts": 1])
        ).get()
        let bad = try OpParser.parse(line: op("team.leave", "own", ["team": "t1", "opId": "k2"])).get()
        guard case .accepted(let event, _) = try store.submit(create, now: 0) else {
            Issue.record("not accepted")
            return
        }
        guard case .rejected = try store.submit(bad, now: 0) else {
            Issue.record("not rejected")
            return
        }
        try store.beginCommit()
        #expect(store.pendingCount == 0)
        // Before the batch is known durable: answered from the batch in flight.
        guard case .duplicate(let seq) = try store.submit(create, now: 0) else {
            Issue.record("not a duplicate while in flight")
            return
        }
        #expect(seq == event.seq)
        guard case .rejectedBefore(let rejection) = try store.submit(bad, now: 0) else {
            Issue.record("rejection not remembered while in flight")
            return
        }
        #expect(rejection.code == .ownerCannotLeave)
        try store.finishCommit()
        #expect(!store.isCommitting)
        #expect(store.committedSeq == event.seq)
        // After: answered from the store.
        guard case .duplicate = try store.submit(create, now: 0) else {
            Issue.record("not a duplicate after commit")
            return
        }
        #expect(store.pendingCount == 0)
    }

    @Test func closeWaitsForTheBatchInFlight() throws {
        let dir = TemporaryDirectory()
        var options = Store.Options()
        options.noSync = true
        var store = try Store(path: dir.child("s"), options: options)
        for line in workload(400, seed: 9) {
            if case .success(let op) = OpParser.parse(line: line) { _ = try store.submit(op, now: 0) }
        }
        let last = store.world.lastSeq
        #expect(last > 0)
        try store.beginCommit()
        store.close()
        store = try Store(path: dir.child("s"), options: options)
        #expect(store.committedSeq == last)
        #expect(try store.audit().ok)
    }
}
