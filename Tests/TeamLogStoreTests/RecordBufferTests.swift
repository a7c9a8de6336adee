@testable import TeamLogStore
import TeamLog
import TeamLogWorkload
import TestSupport
import Testing

/// The checkpoint's record buffer (`RecordBuffer`) and the order a checkpoint writes it in
/// (`CheckpointJob.writeOrder`): random records against a model holding tuples.
@Suite struct RecordBufferTests {
    typealias Record = (table: ProjectionTable, key: [UInt8], value: [UInt8]?)

    static func randomRecord(_ rng: inout SplitMix64) -> Record {
        let tables = ProjectionTable.allCases
        let table = tables[Int(rng.next() % UInt64(tables.count))]
        // Short keys from a small alphabet (many repeats, shared 8-byte prefixes, prefixes of each other).
        let key = (0..<Int(rng.next() % 24)).map { _ in UInt8(rng.next() % 3) }
        let value: [UInt8]? =
            rng.next() % 5 == 0 ? nil : (0..<Int(rng.next() % 6)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        return (table, key, value)
    }

    static func append(_ record: Record, to buffer: inout RecordBuffer) {
        buffer.append(record.table, key: { $0.raw(record.key) }) { w in
            guard let value = record.value else { return false }
            w.raw(value)
            return true
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func itHoldsWhatWasAppendedAndWritesEachKeyOnceInOrder(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var model: [Record] = []
        var first = RecordBuffer()
        var second = RecordBuffer(records: 8, bytes: 64)
        for n in 0..<3_000 {
            let record = Self.randomRecord(&rng)
            model.append(record)
            if n < 1_800 { Self.append(record, to: &first) } else { Self.append(record, to: &second) }
        }
        var buffer = first
        buffer.append(contentsOf: second)  // a failed checkpoint's records, then the next ones
        #expect(buffer.count == model.count)
        for (index, expected) in model.enumerated() {
            let got = buffer.record(index)
            #expect(got.0 == expected.table && got.1 == expected.key && got.2 == expected.value)
        }
        // The write order: the last change of each (table, key), tables in `allCases` order, keys in
        // LMDB's order (bytes unsigned, a prefix first).
        var last: [String: Int] = [:]
        for (index, record) in model.enumerated() { last["\(record.table)/\(record.key)"] = index }
        let rank = Dictionary(uniqueKeysWithValues: ProjectionTable.allCases.enumerated().map { ($1, $0) })
        let expected = last.values.sorted { a, b in
            let x = model[a], y = model[b]
            if x.table != y.table { return rank[x.table]! < rank[y.table]! }
            return x.key.lexicographicallyPrecedes(y.key)
        }
        #expect(CheckpointJob.writeOrder(buffer) == expected)
    }

    @Test func aTablesRankIsItsPlaceInAllCases() {
        #expect(ProjectionTable.allCases.map(\.rank) == Array(ProjectionTable.allCases.indices))
    }

    @Test func aDeletionHoldsNoValueBytes() {
        var buffer = RecordBuffer()
        Self.append((.teams, [1, 2], nil), to: &buffer)
        buffer.append(.teams, key: { $0.raw([3]) }) { w in
            w.raw([9, 9, 9])  // written, then the record turns out to be gone: the bytes are dropped
            return false
        }
        Self.append((.members, [4], [5, 6]), to: &buffer)
        #expect(buffer.byteCount == 2 + 1 + 1 + 2)
        #expect(buffer.record(0).2 == nil && buffer.record(1).2 == nil && buffer.record(2).2 == [5, 6])
        #expect(buffer.record(1).1 == [3])
    }
}

/// A checkpoint paces its puts (`Store.Options.checkpointDuty`): it pauses between slices of work unless
/// hurried, and writes every record either way.
@Suite struct CheckpointPacingTests {
    static func job(_ store: Store, records: Int, duty: Int?) -> CheckpointJob {
        var buffer = RecordBuffer()
        for n in 0..<records {
            buffer.append(.presence, key: { $0.raw(Array("user-\(n)".utf8)) }) { w in
                w.u8(1)
                w.strings([Id("device-\(n)")])
                w.bool(false)
                return true
            }
        }
        return CheckpointJob(
            env: store.projectionEnv, dbs: store.pdbs, changes: buffer,
            checkpoint: Checkpoint(seq: 0, ts: 0, hash: store.checkpoint.hash), after: nil,
            mappedBytesBudget: 1 << 40, duty: duty, waitForLog: { _ in })
    }

    static func storedPresence(_ store: Store) throws -> Int {
        try store.projectionEnv.read { txn in try txn.stat(store.pdbs.table(.presence)).entries }
    }

    @Test func aPacedCheckpointPausesAndAHurriedOneDoesNot() throws {
        let directory = TemporaryDirectory("checkpoint-pacing")
        let store = try Store(path: directory.child("store"))
        // Enough puts to run past several 2 ms slices even on a fast machine.
        let paced = Self.job(store, records: 200_000, duty: 25)
        paced.runInPlace()
        #expect(paced.error == nil)
        #expect(paced.pausedNanoseconds > 0)
        #expect(try Self.storedPresence(store) == 200_000)

        let hurried = Self.job(store, records: 200_000, duty: 25)
        hurried.hurry()
        hurried.runInPlace()
        #expect(hurried.error == nil)
        #expect(hurried.pausedNanoseconds == 0)

        let unpaced = Self.job(store, records: 50_000, duty: nil)
        unpaced.runInPlace()
        #expect(unpaced.pausedNanoseconds == 0)
        #expect(try Self.storedPresence(store) == 200_000)
    }
}
