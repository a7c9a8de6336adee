import LMDB
import TeamLog
import TeamLogWorkload
import TestSupport
import Testing

@testable import TeamLogStore

/// Issue 11 §6: an audit's replay keeps a bounded working set — a wholesale eviction when over budget,
/// and each message dropped once a committed checkpoint holds it, unless a receipt may still name it or a
/// modify changed it since. A history many times a tiny replay's limits must audit clean through both,
/// with modifies landing on messages in every state (resident and clean, resident and changed since the
/// checkpoint that holds them, evicted).
@Suite struct ReplayEvictionTests {
    /// The mixed workload with a `message.modify` by its sender of a message sent 50–600 lines before,
    /// every 20 lines.
    static func linesWithModifies(count: Int, seed: UInt64) -> [String] {
        var out: [String] = []
        var sends: [(line: Int, actor: String, id: String)] = []
        var rng = SplitMix64(seed: seed)
        for line in WorkingSetTests.mixedLines(count: count, seed: seed) {
            out.append(line)
            if let value = try? JSONParser.parse(Array(line.utf8)), value["op"]?.stringValue == "message.send",
                let actor = value["actor"]?.stringValue, let id = value["messageId"]?.stringValue
            {
                sends.append((out.count, actor, id))
            }
            guard out.count % 20 == 0 else { continue }
            let back = Int.random(in: 50...600, using: &rng)
            guard let target = sends.last(where: { $0.line <= out.count - back }) else { continue }
            out.append(
                op(
                    "message.modify", target.actor,
                    ["messageId": target.id, "content": JSONValue.object([("type", .string("text"))])]))
        }
        return out
    }

    @Test func aHistoryManyTimesTheReplaysLimitsAuditsClean() throws {
        let lines = Self.linesWithModifies(count: 4_000, seed: 11)
        let h = try StoreHarness(batchSize: 64)
        let records = try h.feed(lines)
        let modified = records.filter {
            $0["kind"]?.stringValue == "event" && $0["op"]?.stringValue == "message.modify"
        }.count
        #expect(modified > 80, "modifies must be accepted for the test to mean anything: \(modified)")

        // Checkpoints every 150 events (looked at every 50), a budget the state never reaches: only the messages go, early.
        let early = try h.store.audit(limits: ReplayLimits(checkpointOps: 150, budgetBytes: 1 << 30, batchSize: 50))
        #expect(early.ok, "\(early.tables.compactMap(\.difference)) \(early.chainProblem.map { "\($0)" } ?? "")")
        #expect(early.replay.sweeps == 0, "\(early.replay)")
        #expect(early.replay.evictions > 1_000, "messages are dropped once checkpointed: \(early.replay)")
        // How many modifies find their message dropped depends on the checkpointer's pace (a message goes
        // when the checkpoint after the one holding it starts): a floor any early eviction passes.
        #expect(early.replay.lookups > 5, "modifies of dropped messages look them up: \(early.replay)")

        // And a budget of 48 KiB: wholesale evictions of everything but the teams, again and again.
        let tight = try h.store.audit(limits: ReplayLimits(checkpointOps: 150, budgetBytes: 48 << 10, batchSize: 50))
        #expect(tight.ok, "\(tight.tables.compactMap(\.difference))")
        #expect(tight.replay.sweeps > 5, "\(tight.replay)")
        #expect(tight.replay.loads > 100, "\(tight.replay)")

        // The defaults keep all of this history: nothing is evicted.
        let roomy = try h.store.audit()
        #expect(roomy.ok && roomy.replay.evictions == 0, "\(roomy.replay)")
        #expect(early.tables.map(\.digest) == roomy.tables.map(\.digest))
    }

    /// A scratch checkpoint written in transactions of a few puts each (`ReplayLimits.checkpointPuts`, which
    /// bounds the dirty pages LMDB keeps) holds the same records as one written in one transaction: the
    /// audit is clean, and its tables' digests are the one-transaction replay's, with wholesale evictions
    /// reloading what the split transactions wrote.
    @Test func aScratchCheckpointSplitIntoTransactionsHoldsEveryRecord() throws {
        let lines = Self.linesWithModifies(count: 800, seed: 12)
        let h = try StoreHarness(batchSize: 64)
        _ = try h.feed(lines)
        func audit(puts: Int?) throws -> AuditReport {
            try h.store.audit(
                limits: ReplayLimits(checkpointOps: 150, budgetBytes: 48 << 10, batchSize: 50, checkpointPuts: puts))
        }
        let whole = try audit(puts: nil)
        #expect(whole.ok, "\(whole.tables.compactMap(\.difference))")
        for puts in [3, 40] {
            let split = try audit(puts: puts)
            #expect(split.ok, "\(puts) puts: \(split.tables.compactMap(\.difference))")
            #expect(split.tables.map(\.digest) == whole.tables.map(\.digest), "\(puts) puts")
            #expect(split.replay.sweeps > 2 && split.replay.loads > 20, "\(puts) puts: \(split.replay)")
        }
    }

    /// A walk of the whole log — `teamlog log`'s export, a `--verify-chain` check — drops the log pages it
    /// has read every `releaseInterval` seqs (128 in debug builds), so the log's mapping does not end holding
    /// the whole log (`teamlog log` of a 5M-event store peaked at 778 MB before, 47 MB after).
    @Test func aWalkOfTheWholeLogKeepsFewOfItsPagesResident() throws {
        let directory = TemporaryDirectory("walk-release")
        let path = directory.child("store")
        let writer = try Store(path: path)
        let device = String(repeating: "d", count: 100)  // ids are at most 128 bytes
        for i in 1...20_000 {
            let line = #"{"op":"client.login","actor":"u\#(i % 500)","device":"\#(device)\#(i)","ts":\#(1000 + i)}"#
            guard case .success(let op) = OpParser.parse(line: line) else { continue }
            _ = try writer.submit(op, now: 1_000)
            if i % 2_000 == 0 { try writer.commit() }
        }
        writer.close()
        let logKB = Store.fileSize(path + "/data.mdb") / 1024
        try #require(logKB > 3_000, "a log of some MB: \(logKB) kB")

        let reader = try Store(path: path, options: BackupTests.readOnly, loadState: false)
        defer { reader.close() }
        /// The resident kB of the reader's log map, found through its first record (one page more).
        func residentLogKB() throws -> Int {
            try reader.env.read { txn in
                try BigEndianUInt64.encoded(1).withUnsafeBytes { key in
                    try txn.withValue(reader.dbs.log.handle, key: key) { value in
                        residentKB(ofMappingHolding: try #require(value?.baseAddress)) ?? -1
                    }
                }
            }
        }
        var exported = 0
        let problem = try reader.exportLog(write: { exported += $0.count })
        #expect(problem == nil && exported > 0)
        let afterExport = try residentLogKB()
        #expect(afterExport >= 0 && afterExport < logKB / 8, "after the export: \(afterExport) of \(logKB) kB resident")
        #expect(try reader.verifyChain() == nil)
        let afterVerify = try residentLogKB()
        #expect(afterVerify >= 0 && afterVerify < logKB / 8, "after the chain check: \(afterVerify) of \(logKB) kB resident")
    }
}
