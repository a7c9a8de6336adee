import LMDB
import TeamLog
@testable import TeamLogStore
import TestSupport
import Testing

/// `audit` checks the opId index (what a re-sent op is answered from) against the log, both ways: every
/// event's opId is indexed at its seq, and no other accepted entry is there. Each damage below is one an
/// index could suffer; each would make a re-sent op be applied twice, or answered with a wrong seq.
@Suite struct OpIdAuditTests {
    /// A closed store: three accepted ops with opIds (seqs 1–3), one without (seq 4), one rejected op with
    /// an opId.
    static func makeStore() throws -> StoreHarness {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["opId": "c1", "team": "T", "members": ["a", "b"]]),
            op("team.update", "own", ["opId": "u1", "team": "T", "fields": ["name": "Ops"] as KeyValuePairs<String, Any>]),
            op("team.leave", "a", ["opId": "l1", "team": "T"]),
            op("team.update", "own", ["team": "T", "fields": ["intro": "none"] as KeyValuePairs<String, Any>]),
            op("team.leave", "nobody", ["opId": "r1", "team": "T"]),  // notMember: a rejection
        ])
        h.store.close()
        return h
    }

    /// Edits the closed store's opId index.
    func editIndex(_ h: StoreHarness, _ body: (WriteTransaction, DatabaseHandle) throws -> Void) throws {
        let env = try Environment(path: h.path)
        let db = try env.openHandle("opIds", create: false)
        try env.write { txn in try body(txn, db) }
    }

    func audit(_ h: StoreHarness) throws -> AuditReport {
        var options = Store.Options()
        options.readOnly = true
        let store = try Store(path: h.path, options: options, loadState: false)
        defer { store.close() }
        return try store.audit()
    }

    static func seq(_ n: UInt64) -> [UInt8] { BigEndianUInt64.encoded(n) }

    @Test func aCleanIndexIsCountedBothWays() throws {
        let h = try Self.makeStore()
        let report = try audit(h)
        #expect(report.ok)
        #expect(report.opIds == OpIdIndexReport(entries: 4, accepted: 3, eventsWithOpId: 3, difference: nil))
    }

    @Test func anEventWhoseOpIdIsMissingIsNamed() throws {
        let h = try Self.makeStore()
        try editIndex(h) { txn, db in try txn.delete(db, key: Array("u1".utf8)) }
        let report = try audit(h)
        #expect(!report.ok)
        #expect(report.tables.allSatisfy { $0.difference == nil })  // the projections are fine
        let difference = try #require(report.opIds.difference)
        #expect(difference.contains("opId u1 of event seq 2 is absent from the index"), "\(difference)")
    }

    @Test func anEventIndexedAtAnotherSeqIsNamed() throws {
        let h = try Self.makeStore()
        try editIndex(h) { txn, db in try txn.put(db, key: Array("l1".utf8), value: Self.seq(2)) }
        let difference = try #require(try audit(h).opIds.difference)
        #expect(difference.contains("opId l1 of event seq 3: the index says seq 2"), "\(difference)")
    }

    @Test func anEventIndexedAsRejectedIsNamed() throws {
        let h = try Self.makeStore()
        try editIndex(h) { txn, db in
            let rejected = try #require(try txn.get(db, key: Array("r1".utf8)))
            try txn.put(db, key: Array("c1".utf8), value: rejected)
        }
        let difference = try #require(try audit(h).opIds.difference)
        #expect(difference.contains("opId c1 of event seq 1: the index says rejected (notMember)"), "\(difference)")
    }

    /// An accepted entry no event carries: the op it names would be answered `duplicate` and dropped.
    @Test func anAcceptedEntryNoEventCarriesIsNamed() throws {
        let h = try Self.makeStore()
        try editIndex(h) { txn, db in try txn.put(db, key: Array("ghost".utf8), value: Self.seq(4)) }
        let report = try audit(h)
        #expect(report.opIds.accepted == 4 && report.opIds.eventsWithOpId == 3)
        let difference = try #require(report.opIds.difference)
        #expect(
            difference.contains("opId ghost is indexed at seq 4, whose op carried no opId"), "\(difference)")
        // The same entry pointing at an event with another opId names that one.
        try editIndex(h) { txn, db in try txn.put(db, key: Array("ghost".utf8), value: Self.seq(2)) }
        let other = try #require(try audit(h).opIds.difference)
        #expect(other.contains("whose op carried opId u1"), "\(other)")
    }

    @Test func anEntryPastTheHeadOrUndecodableIsNamed() throws {
        let h = try Self.makeStore()
        try editIndex(h) { txn, db in try txn.put(db, key: Array("late".utf8), value: Self.seq(99)) }
        let late = try #require(try audit(h).opIds.difference)
        #expect(late.contains("opId late is indexed at seq 99, which the log (to seq 4) does not hold"), "\(late)")
        try editIndex(h) { txn, db in
            try txn.delete(db, key: Array("late".utf8))
            try txn.put(db, key: Array("r1".utf8), value: [1, 2, 3])
        }
        let garbled = try #require(try audit(h).opIds.difference)
        #expect(garbled.contains("opId r1: its index entry does not decode (bytes 010203)"), "\(garbled)")
    }

    /// The command says it and exits 1; the projections' tables still read OK.
    @Test func theCommandReportsTheIndex() throws {
        let h = try Self.makeStore()
        let exe = TestSupport.teamlogExecutable
        let clean = try ChildProcess.run(exe, ["audit", "--store", h.path], timeout: 120)
        #expect(clean.status == .exited(0))
        #expect(clean.lines.contains { $0.hasPrefix("opIds: OK: 4 entries, 3 accepted") }, "\(clean.lines)")
        try editIndex(h) { txn, db in try txn.delete(db, key: Array("c1".utf8)) }
        let damaged = try ChildProcess.run(exe, ["audit", "--store", h.path], timeout: 120)
        #expect(damaged.status == .exited(1))
        #expect(
            damaged.lines.contains { $0.hasPrefix("opIds: DIFFERS: opId c1 of event seq 1 is absent") },
            "\(damaged.lines)")
        #expect(damaged.lines.last == "audit FAILED")
        // `--json`: one object, the same verdict and exit status.
        let json = try ChildProcess.run(exe, ["audit", "--store", h.path, "--json"], timeout: 120)
        #expect(json.status == .exited(1))
        #expect(json.lines.count == 1)
        let report = try JSONParser.parse(Array((json.lines.first ?? "").utf8))
        #expect(report["ok"] == .bool(false) && report["chain"] == .null && report["comparedTables"] == .bool(true))
        #expect(report["opIds"]?["difference"]?.stringValue?.contains("opId c1 of event seq 1 is absent") == true)
        #expect(report["opIds"]?["eventsWithOpId"]?.intValue == 3 && report["opIds"]?["accepted"]?.intValue == 2)
        let tables = report["tables"]?.arrayValue ?? []
        #expect(tables.count == ProjectionTable.allCases.count && tables.allSatisfy { $0["difference"] == .null })
        #expect(report["headSeq"]?.intValue == 4 && report["events"]?.intValue == 4)
    }

    /// An audit from a base copy replays only the log after it, but checks the whole index: an entry of an
    /// event inside the base's history is found missing too.
    @Test func anAuditFromABaseChecksTheWholeIndex() throws {
        let h = try Self.makeStore()
        let copy = h.directory.child("copy")
        let source = try Store(path: h.path)
        _ = try source.backup(to: copy)
        source.close()
        var options = Store.Options()
        options.readOnly = true
        try editIndex(h) { txn, db in try txn.delete(db, key: Array("c1".utf8)) }
        let store = try Store(path: h.path, options: options, loadState: false)
        defer { store.close() }
        let base = try Store(path: copy, options: options, loadState: false)
        defer { base.close() }
        let report = try store.audit(base: base)
        #expect(report.baseSeq == 4)
        let difference = try #require(report.opIds.difference)
        #expect(difference.contains("opId c1 of event seq 1 is absent"), "\(difference)")
    }
}
