import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

/// Queries of a writer that serves readers (`Store.serveReaders`) read the stored checkpoint with the
/// records committed after it layered on top (`CommittedRecords`): after every commit they must answer
/// exactly as a store whose projections were checkpointed at that commit, however many commits the
/// layers hold, whether checkpoints drop layers meanwhile, and whether the working set evicts.
@Suite struct CommittedRecordsTests {
    /// Every query answer for the ids `lines` name: teams, unread per actor, receipts and messages,
    /// channels.
    static func answers(_ store: Store, _ lines: [String]) throws -> [String: String] {
        var out = try WorkingSetTests.answers(store, lines)
        var channels: Set<String> = []
        for line in lines {
            guard let value = try? JSONParser.parse(Array(line.utf8)) else { continue }
            if let c = value["channel"]?.stringValue { channels.insert(c) }
        }
        for c in channels { out["channel \(c)"] = try store.channelView(Id(c))?.jsonString ?? "none" }
        return out
    }

    /// Feeds `lines` in chunks to a served store and to a reference store checkpointed before each
    /// query, comparing every answer after every chunk. Returns how many comparisons found the served
    /// store's stored projections (without the layers) behind, i.e. answered from the layers.
    static func compare(
        lines: [String], chunk: Int, served: StoreHarness, reference: StoreHarness
    ) throws -> Int {
        served.store.serveReaders()
        var fed: [String] = []
        var fromLayers = 0
        var start = 0
        while start < lines.count {
            let part = Array(lines[start..<min(lines.count, start + chunk)])
            start += part.count
            fed += part
            #expect(try served.feed(part) == reference.feed(part))
            let got = try answers(served.store, fed)
            let want = try answers(reference.store, fed)
            for (key, value) in want where got[key] != value {
                Issue.record("after \(fed.count) lines, \(key): served \(got[key] ?? "nil"), checkpointed \(value)")
                return fromLayers
            }
            if served.store.checkpoint.seq < served.store.committedSeq { fromLayers += 1 }
        }
        return fromLayers
    }

    @Test func answersEqualACheckpointedStoreWithoutCheckpoints() throws {
        let lines = WorkingSetTests.mixedLines(count: 1_500, seed: 11)
        let served = try StoreHarness(batchSize: 50, checkpointOps: 1 << 30, checkpointMs: 1 << 30)
        let reference = try StoreHarness(batchSize: 50)
        let fromLayers = try Self.compare(lines: lines, chunk: 150, served: served, reference: reference)
        // No checkpoint was written after the one at open: every comparison read the layers alone.
        #expect(served.store.checkpoint.seq == 0)
        #expect(fromLayers == 10)
        // And the layers matter: the stored projections alone answer differently (they are empty).
        let stored = try served.store.projectionEnv.read { txn in
            try served.store.teamView("t0", in: served.store.storedSnapshot(txn))
        }
        #expect(stored == nil)
        #expect(try served.store.teamView("t0") != nil)
    }

    @Test func answersEqualWhileCheckpointsDropLayersAndUnitsAreEvicted() throws {
        let lines = WorkingSetTests.mixedLines(count: 1_500, seed: 12)
        // Checkpoints every 37 ops (so at most commits, and layers merge and go at many points) and a
        // 16 KiB working set (units evicted and reloaded).
        let served = try StoreHarness(batchSize: 20, cacheBytes: 16 << 10, checkpointOps: 37, checkpointMs: 1 << 30)
        let reference = try StoreHarness(batchSize: 20)
        let fromLayers = try Self.compare(lines: lines, chunk: 60, served: served, reference: reference)
        #expect(served.store.checkpoint.seq > 0)
        #expect(fromLayers > 0, "some answers must have come from layers over a checkpoint")
        #expect(served.store.workingSetStats.evictions > 0)
    }

    /// A store left without its last checkpoint (dropped, not closed: as after a crash once its commits
    /// were durable) opens by replaying its log tail; serving readers then, the tail's records are layered
    /// over the old checkpoint at once.
    @Test func answersIncludeTheTailReplayedAtOpen() throws {
        let lines = WorkingSetTests.mixedLines(count: 2_000, seed: 13)
        let directory = TemporaryDirectory("committed-tail")
        var options = Store.Options()
        options.noSync = true
        options.checkpointOps = 1 << 30
        options.checkpointMs = 1 << 30
        let reference = try StoreHarness(batchSize: 50)
        try reference.feed(Array(lines[..<1_500]))
        do {
            let store = try Store(path: directory.child("store"), options: options)
            var processorOptions = Processor.Options()
            processorOptions.batchSize = 50
            let processor = Processor(store: store, options: processorOptions, clock: { 1_000_000 }) { _ in }
            for (index, line) in lines[..<1_500].enumerated() {
                try processor.process(.text(number: index + 1, bytes: Array(line.utf8)))
            }
            try processor.commit()
            #expect(store.checkpoint.seq == 0)
        }
        let store = try Store(path: directory.child("store"), options: options)
        #expect(store.replayedAtOpen > 1_000)
        store.serveReaders()
        let fed = Array(lines[..<1_500])
        #expect(try Self.answers(store, fed) == Self.answers(reference.store, fed))
        #expect(store.checkpoint.seq == 0, "answered from the layers, not from a checkpoint")
    }
}
