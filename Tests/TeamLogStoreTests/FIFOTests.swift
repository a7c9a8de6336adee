@testable import TeamLogStore
import TeamLog
import TeamLogWorkload
import TestSupport
import Testing

/// The working set's queue (`FIFO`): appends, pops and compaction passes in steps, interleaved at random,
/// against an array doing the same; the order of what stays is kept.
@Suite struct FIFOTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func itQueuesAsAnArrayDoes(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var fifo = FIFO<Int>()
        var model: [Int] = []
        var next = 0
        // What the pass under way drops: entries queued before it started that `keep` rejects.
        var keep: (Int) -> Bool = { _ in true }
        var passEnd = 0  // the next value when the pass started: the pass filters only smaller ones
        var wasCompacting = false
        for _ in 0..<30_000 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<55:
                for _ in 0..<Int.random(in: 1...40, using: &rng) {
                    fifo.append(next)
                    model.append(next)
                    next += 1
                }
            case 55..<90:
                for _ in 0..<Int.random(in: 1...60, using: &rng) {
                    let popped = fifo.popFirst()
                    // A pass under way may have dropped entries ahead of it: only ones it filters.
                    while let front = model.first, front != popped {
                        #expect(fifo.isCompacting && front < passEnd && !keep(front), "lost \(front)")
                        model.removeFirst()
                    }
                    if popped != nil { model.removeFirst() }
                }
            case 90..<93 where !fifo.isCompacting:
                let modulus = Int.random(in: 2...5, using: &rng)
                keep = { $0 % modulus != 0 }
                passEnd = next
                fifo.startCompaction()
            default:
                guard fifo.isCompacting else { continue }
                fifo.compact(chunks: Int.random(in: 1...3, using: &rng), keep: keep)
            }
            if wasCompacting && !fifo.isCompacting {
                // The model has no chunks: it drops what the pass filtered once the pass is done (by its
                // last step, or by pops that took its last chunk).
                let cut = passEnd
                let k = keep
                model = model.filter { $0 >= cut || k($0) }
            }
            wasCompacting = fifo.isCompacting
            if !fifo.isCompacting {
                #expect(fifo.count == model.count)
                #expect(fifo.first == model.first)
            }
        }
        while fifo.isCompacting { fifo.compact(chunks: 1, keep: keep) }
        let cut = passEnd
        let k = keep
        model = model.filter { $0 >= cut || k($0) }
        #expect(fifo.elements == model)
        #expect(fifo.count == model.count)
    }

    /// No chunk grows past its size: appending 100,000 entries never copies more than one chunk at once.
    @Test func chunksStayBounded() {
        var fifo = FIFO<Int>()
        for n in 0..<100_000 { fifo.append(n) }
        #expect(fifo.count == 100_000)
        #expect(fifo.chunkCounts.allSatisfy { $0 <= FIFO<Int>.chunkSize })
        #expect(fifo.chunkCounts.count == (100_000 + FIFO<Int>.chunkSize - 1) / FIFO<Int>.chunkSize)
    }
}

/// The working set's queue drops its stale entries in steps: a store whose few units are named again in
/// every epoch (a checkpoint every op) queues an entry per naming; past twice the resident units (plus a
/// slack, 64 in debug builds) a compaction pass starts and runs a chunk per commit, and the queue shrinks
/// back to about the resident units — with every answer and stored byte as a replay's.
@Suite struct WorkingSetQueueTests {
    @Test func staleEntriesAreDroppedInStepsAndNothingChanges() throws {
        let directory = TemporaryDirectory("queue-compaction")
        let options = Store.Options.checkpointing(every: 1)
        let store = try Store(path: directory.child("store"), options: options)
        defer { store.close() }
        var lines = [op("team.create", "o", ["team": "t1", "name": "T", "members": ["a", "b", "c"], "ts": 1_000])]
        for n in 0..<600 {
            let actor = ["a", "b", "c"][n % 3]
            let state = ["all", "none", "managerOnly"][n % 3]
            lines.append(op("member.setNotify", actor, ["team": "t1", "state": state, "ts": 2_000 + n]))
        }
        var largest = 0
        for line in lines {
            guard case .success(let parsed) = OpParser.parse(line: line) else { continue }
            guard case .accepted = try store.submit(parsed, now: 1_000) else {
                Issue.record("rejected: \(line)")
                continue
            }
            try store.commit()
            largest = max(largest, store.workingSet.clock.count)
        }
        let resident = store.world.teams.count + store.world.convs.count + store.world.userConvCount
        #expect(largest > 2 * resident + Store.staleSlack, "the queue grew past the slack: a pass started")
        #expect(store.workingSet.clock.count <= 2 * resident + Store.staleSlack + 2 * FIFO<Int>.chunkSize)
        #expect(store.workingSet.clock.count < largest, "the passes dropped stale entries")
        store.finishCheckpoint()
        #expect(try store.audit().ok)
    }
}
