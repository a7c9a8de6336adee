import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads
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
    func ingest(
        _ lines: [String], batchSize: Int, maxBatchRecordBytes: Int = 64 << 20, in dir: TemporaryDirectory, name: String
    ) throws -> (
        output: [UInt8], summary: Processor.Summary, audit: AuditReport
    ) {
        var options = Store.Options()
        options.noSync = true
        options.mapSize = 1 << 22  // small: the map grows while batches are in flight
        let store = try Store(path: dir.child(name), options: options)
        var processorOptions = Processor.Options()
        processorOptions.batchSize = batchSize
        processorOptions.maxBatchRecordBytes = maxBatchRecordBytes
        var output: [UInt8] = []
        let processor = Processor(store: store, options: processorOptions, clock: { 5 }) { output += $0 }
        let file = dir.child(name + ".jsonl")
        let text = lines.joined(separator: "\n") + "\n"
        let f = fopen(file, "w")!
        _ = Array(text.utf8).withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        var reader = LineReader(fd: fd)
        try processor.run(&reader)
        return (output, processor.summary, try store.audit())
    }

    func workload(_ count: Int, seed: UInt64) -> [String] {
        var w = MixedWorkload(options: .init(seed: seed, users: 400, teams: 12, maxTeam: 60))
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

    /// A batch also ends once its records reach `maxBatchRecordBytes` (they wait in memory until it is
    /// durable; a large team's are megabytes): more commits, the same output and store.
    @Test func aBatchEndsAtItsRecordBytes() throws {
        let dir = TemporaryDirectory()
        let lines = workload(1_500, seed: 99)
        let bounded = try ingest(lines, batchSize: 1_000_000, maxBatchRecordBytes: 4_096, in: dir, name: "bounded")
        let whole = try ingest(lines, batchSize: 1_000_000, in: dir, name: "whole")
        #expect(whole.summary.commits == 1)
        #expect(bounded.summary.commits > whole.output.count / 4_096 / 2, "\(bounded.summary.commits)")
        var expected = whole.summary
        expected.commits = bounded.summary.commits
        #expect(bounded.summary == expected)
        #expect(bounded.output == whole.output)
        #expect(bounded.audit.ok && bounded.audit.tables.map(\.digest) == whole.audit.tables.map(\.digest))
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

    /// Stream mode (`follow`) over a pipe that stays open: each batch's records are printed once it is
    /// durable (every event printed is at or below the committed seq when the sink sees it), without
    /// waiting for the input to end or for more lines; and the whole run prints and stores exactly what
    /// one batch of the same lines does.
    @Test func streamModePrintsEachDurableBatchWhileTheFeedStaysOpen() throws {
        let dir = TemporaryDirectory()
        let lines = workload(600, seed: 3)
        let whole = try ingest(lines, batchSize: 1_000_000, in: dir, name: "whole")

        var options = Store.Options()
        options.noSync = true
        let store = try Store(path: dir.child("follow"), options: options)
        var processorOptions = Processor.Options()
        processorOptions.batchSize = 50
        let sunk = SinkLog()
        let processor = Processor(store: store, options: processorOptions, clock: { 5 }) { bytes in
            sunk.append(bytes, committedSeq: store.committedSeq)
        }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let writeEnd = fds[1]
        let follower = try #require(
            startThread {
                try? processor.follow(LineReader(fd: fds[0], follow: true), flushMs: 1) { false }
            })
        func send(_ part: ArraySlice<String>) {
            let bytes = Array((part.joined(separator: "\n") + "\n").utf8)
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(writeEnd, raw.baseAddress! + offset, raw.count - offset)
                    guard n > 0 else { return }
                    offset += n
                }
            }
        }
        // In three parts, each answered in full before the next is sent and while the pipe stays open.
        var sent = 0
        for end in [7, 300, lines.count] {
            send(lines[sent..<end])
            sent = end
            let answered = sunk.waitForLines(end, timeoutSeconds: 30)
            #expect(answered, "records of the first \(end) lines did not come while the feed was open")
        }
        close(writeEnd)
        follower.join()
        close(fds[0])
        #expect(sunk.bytes == whole.output)
        #expect(sunk.printedBeforeDurable == 0)
        #expect(processor.summary.commits > 2)
        #expect(try store.audit().tables.map(\.digest) == whole.audit.tables.map(\.digest))
    }
}

/// What a processor's sink received, and whether each event it printed was durable by then.
private final class SinkLog: @unchecked Sendable {
    private let monitor = Monitor()
    private var _bytes: [UInt8] = []
    private var _lastLine: UInt64 = 0
    private var _early = 0

    func append(_ bytes: [UInt8], committedSeq: UInt64) {
        monitor.locked {
            _bytes += bytes
            for line in bytes.split(separator: 0x0A) {
                // Records of ops carry their input line; deliveries and notices that follow do not.
                if let number = Self.number(after: "\"line\":", in: line) { _lastLine = max(_lastLine, number) }
                if let seq = Self.number(after: "\"seq\":", in: line), seq > committedSeq { _early += 1 }
            }
            monitor.broadcast()
        }
    }

    var bytes: [UInt8] { monitor.locked { _bytes } }
    var printedBeforeDurable: Int { monitor.locked { _early } }

    /// Waits until the record of input line `n` came, or the time is up.
    func waitForLines(_ n: Int, timeoutSeconds: Int) -> Bool {
        monitor.locked { monitor.wait(until: { _lastLine >= UInt64(n) }, timeoutMs: timeoutSeconds * 1000) }
    }

    static func number(after key: String, in line: ArraySlice<UInt8>) -> UInt64? {
        let k = Array(key.utf8)
        guard let start = line.indices.first(where: { line[$0...].starts(with: k) }) else { return nil }
        var value: UInt64 = 0
        var i = start + k.count
        while i < line.endIndex, line[i] >= 0x30, line[i] <= 0x39 {
            value = value * 10 + UInt64(line[i] - 0x30)
            i += 1
        }
        return value
    }
}
