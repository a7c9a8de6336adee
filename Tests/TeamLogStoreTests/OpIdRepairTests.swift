import LMDB
import TeamLog
@testable import TeamLogStore
import TestSupport
import Testing

/// `repair` mends the opId index from the log (`Store.mendOpIdIndex`): each damage `audit` names
/// (`OpIdAuditTests`) is undone, the audit is clean afterwards, and a re-sent op is answered as the log
/// says — a duplicate with its seq, or decided anew when the log never accepted it. Rejections, which only
/// the index knows, are kept.
@Suite struct OpIdRepairTests {
    let audits = OpIdAuditTests()

    /// Repairs the closed store in this process.
    func repair(_ h: StoreHarness) throws -> Store.RepairReport {
        var options = Store.Options()
        options.verifyChainAtOpen = false
        let store = try Store(path: h.path, options: options, loadState: false)
        defer { store.close() }
        return try store.repair()
    }

    /// The index's entries, decoded (`nil`: one that does not decode).
    func entries(_ h: StoreHarness) throws -> [String: OpIdOutcome?] {
        let env = try Environment(path: h.path)
        let db = try env.openHandle("opIds", create: false)
        var out: [String: OpIdOutcome?] = [:]
        try env.read { txn in
            try txn.forEach(db) { key, value in
                out[String(decoding: key, as: UTF8.self)] = try? OpIdOutcomeCodec.decode(value)
                return true
            }
        }
        return out
    }

    /// What `makeStore`'s index holds when sound: the three accepted ops at their seqs and the rejection.
    func expectSound(_ h: StoreHarness, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let index = try entries(h)
        #expect(index.count == 4, "\(index)", sourceLocation: sourceLocation)
        #expect(index["c1"] == .accepted(seq: 1), sourceLocation: sourceLocation)
        #expect(index["u1"] == .accepted(seq: 2), sourceLocation: sourceLocation)
        #expect(index["l1"] == .accepted(seq: 3), sourceLocation: sourceLocation)
        if case .rejected(let r)?? = index["r1"] {
            #expect(r.code == .notMember, sourceLocation: sourceLocation)
        } else {
            Issue.record("r1's rejection is kept: \(String(describing: index["r1"]))", sourceLocation: sourceLocation)
        }
        #expect(try audits.audit(h).ok, sourceLocation: sourceLocation)
    }

    /// Re-sends `line` to the repaired store and returns its records.
    func resend(_ h: StoreHarness, _ line: String) throws -> [JSONValue] {
        try h.reopen()
        defer { h.store.close() }
        return try h.feed(line)
    }

    @Test func aSoundIndexIsLeftAsItIs() throws {
        let h = try OpIdAuditTests.makeStore()
        let report = try repair(h)
        #expect(report.opIds == OpIdIndexMend(entries: 4))
        #expect(!report.opIds.changed)
        try expectSound(h)
    }

    @Test func aMissingEntryIsAddedAndTheResentOpIsADuplicateAgain() throws {
        let h = try OpIdAuditTests.makeStore()
        try audits.editIndex(h) { txn, db in try txn.delete(db, key: Array("u1".utf8)) }
        #expect(!(try audits.audit(h).ok))
        var expected = OpIdIndexMend(entries: 4)
        expected.added = 1
        #expect(try repair(h).opIds == expected)
        try expectSound(h)
        let again = try resend(
            h, op("team.update", "own", ["opId": "u1", "team": "T", "fields": ["name": "Ops"] as KeyValuePairs<String, Any>]))
        #expect(Self.answer(again) == "duplicate 2", "\(again)")
    }

    @Test func entriesAtAnotherSeqAsARejectionOrUndecodableAreCorrected() throws {
        let h = try OpIdAuditTests.makeStore()
        try audits.editIndex(h) { txn, db in
            try txn.put(db, key: Array("l1".utf8), value: OpIdAuditTests.seq(2))  // l1's event is seq 3
            try txn.put(db, key: Array("u1".utf8), value: OpIdAuditTests.seq(3))  // a later seq
            let rejected = try #require(try txn.get(db, key: Array("r1".utf8)))
            try txn.put(db, key: Array("c1".utf8), value: rejected)
        }
        var expected = OpIdIndexMend(entries: 4)
        expected.corrected = 3
        #expect(try repair(h).opIds == expected)
        try expectSound(h)
        try audits.editIndex(h) { txn, db in try txn.put(db, key: Array("c1".utf8), value: [1, 2, 3]) }
        expected.corrected = 1
        #expect(try repair(h).opIds == expected)
        try expectSound(h)
    }

    /// Accepted entries no event backs would answer a new op `duplicate` and drop it: removed, and the op
    /// is decided when it comes.
    @Test func entriesNoEventBacksAreRemovedAndTheirOpsAreDecided() throws {
        let h = try OpIdAuditTests.makeStore()
        try audits.editIndex(h) { txn, db in
            try txn.put(db, key: Array("ghost".utf8), value: OpIdAuditTests.seq(4))  // seq 4 carried no opId
            try txn.put(db, key: Array("other".utf8), value: OpIdAuditTests.seq(2))  // seq 2 carried u1
            try txn.put(db, key: Array("late".utf8), value: OpIdAuditTests.seq(99))  // past the head
            try txn.put(db, key: Array("zero".utf8), value: OpIdAuditTests.seq(0))
            try txn.put(db, key: Array("junk".utf8), value: [0xFF, 0x41])  // no code a rejection has
        }
        let report = try repair(h)
        var expected = OpIdIndexMend(entries: 4)
        expected.removed = 5
        #expect(report.opIds == expected)
        try expectSound(h)
        let ghost = try resend(h, op("team.update", "own", ["opId": "ghost", "team": "T", "fields": ["intro": "x"] as KeyValuePairs<String, Any>]))
        #expect(Self.answer(ghost) == "event 5", "\(ghost)")
    }

    /// A cut frees the cut events' opIds (counted apart from damage), and their ops are decided again.
    @Test func aCutFreesTheCutEventsOpIds() throws {
        let h = try OpIdAuditTests.makeStore()
        try TamperTests.breakRecord(h.path, seq: 3)  // l1's event: seqs 3 and 4 are cut
        try audits.editIndex(h) { txn, db in try txn.delete(db, key: Array("u1".utf8)) }
        let report = try repair(h)
        #expect(report.removedEvents == 2 && report.keptEvents == 2)
        var expected = OpIdIndexMend(entries: 3)
        expected.added = 1
        expected.freedByCut = 1
        #expect(report.opIds == expected)
        let index = try entries(h)
        #expect(index["l1"] == nil && index["u1"] == .accepted(seq: 2) && index.count == 3, "\(index)")
        #expect(try audits.audit(h).ok)
        let l1 = try resend(h, op("team.leave", "a", ["opId": "l1", "team": "T"]))
        #expect(Self.answer(l1) == "event 3", "\(l1)")
    }

    /// Two events carrying one opId (no writer makes such a log; the test re-chains one): the first keeps
    /// the entry, whichever the index named, and the repeat is counted.
    @Test func theFirstOfTwoEventsCarryingAnOpIdKeepsIt() throws {
        let h = try OpIdAuditTests.makeStore()
        try Self.rewriteEvent(h.path, seq: 4) { $0.op.opId = "u1" }  // seq 2 carries u1 too
        try audits.editIndex(h) { txn, db in try txn.put(db, key: Array("u1".utf8), value: OpIdAuditTests.seq(4)) }
        let report = try repair(h)
        var expected = OpIdIndexMend(entries: 4)
        expected.corrected = 1
        expected.repeated = 1
        #expect(report.opIds == expected)
        #expect(try entries(h)["u1"] == .accepted(seq: 2))
        let difference = try #require(try audits.audit(h).opIds.difference)
        #expect(difference.contains("opId u1 of event seq 4: the index says seq 2"), "\(difference)")
        // Mended twice, the same: nothing more to do.
        expected.corrected = 0
        #expect(try repair(h).opIds == expected)
    }

    /// The command says what it mended, and the audit after it is clean.
    @Test func theCommandSaysWhatItMended() throws {
        let h = try OpIdAuditTests.makeStore()
        let exe = TestSupport.teamlogExecutable
        let clean = try ChildProcess.run(exe, ["repair", "--store", h.path], timeout: 120)
        #expect(clean.status == .exited(0))
        #expect(clean.lines.contains("opIds: OK: 4 entries agree with the log"), "\(clean.lines)")
        try audits.editIndex(h) { txn, db in
            try txn.delete(db, key: Array("c1".utf8))
            try txn.put(db, key: Array("ghost".utf8), value: OpIdAuditTests.seq(4))
        }
        let mended = try ChildProcess.run(exe, ["repair", "--store", h.path], timeout: 120)
        #expect(mended.status == .exited(0))
        #expect(
            mended.lines.contains("opIds: MENDED from the log: 1 added, 0 corrected, 1 removed (4 entries now)"),
            "\(mended.lines)")
        let audit = try ChildProcess.run(exe, ["audit", "--store", h.path], timeout: 120)
        #expect(audit.status == .exited(0) && audit.lines.last == "audit OK", "\(audit.lines)")
    }

    // MARK: Helpers

    /// The kind and seq (`"event 5"`) of the record answering a line: its `event` or `duplicate`.
    static func answer(_ records: [JSONValue]) -> String? {
        for r in records {
            guard let kind = r["kind"]?.stringValue, kind == "event" || kind == "duplicate" else { continue }
            return "\(kind) \(r["seq"]?.intValue ?? -1)"
        }
        return nil
    }

    /// Rewrites the event at `seq` of a closed store's log and re-chains every record from it, and the
    /// head: a log whose chain is sound but which no writer made.
    static func rewriteEvent(_ path: String, seq: UInt64, _ change: (inout Event) -> Void) throws {
        let env = try Environment(path: path)
        let dbs = try Databases(env: env)
        try env.write { txn in
            var meta = try dbs.readMeta(txn)
            var hash = HashChain.genesis
            var s: UInt64 = 1
            while let value = try txn.get(dbs.log.handle, key: BigEndianUInt64.encoded(s)) {
                var payload = value.withUnsafeBytes { Array(LogRecord($0)!.payload) }
                if s == seq {
                    var event = try EventCodec.decode(seq: s, payload)
                    change(&event)
                    payload = EventCodec.encode(event)
                }
                hash = payload.withUnsafeBytes { HashChain.next(previous: hash, seq: s, payload: $0) }
                if s >= seq { try txn.put(dbs.log.handle, key: BigEndianUInt64.encoded(s), value: payload + hash) }
                s += 1
            }
            meta.lastHash = hash
            try dbs.writeHead(txn, meta)
        }
    }
}
