import LMDB
import TeamLog
@testable import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `audit` compares every stored projection with the replay and names the first difference: a changed
/// value, a record missing from the store and a record the replay does not have.
@Suite struct AuditTests {
    /// A store with teams, messages and a channel, closed so the test can edit it through the wrapper.
    static func makeStore() throws -> StoreHarness {
        let h = try StoreHarness()
        try h.feed(TeamWorkloadProbe.lines(count: 400, seed: 5))
        try h.feed([
            op("team.create", "own", ["team": "AUD", "members": ["a", "b"]]),
            op(
                "message.send", "a",
                [
                    "to": ["type": "team", "id": "AUD"] as KeyValuePairs<String, Any>, "messageId": "am1",
                    "content": ["type": "text"] as KeyValuePairs<String, Any>,
                ]),
            op(
                "message.send", "a",
                [
                    "to": ["type": "team", "id": "AUD"] as KeyValuePairs<String, Any>, "messageId": "am2",
                    "content": ["type": "text"] as KeyValuePairs<String, Any>, "directedUserIds": ["b"],
                ]),
        ])
        h.store.close()
        return h
    }

    /// Edits one projection table of the closed store directly (handles are opened before the write
    /// transaction: opening one is itself a write, and LMDB's writer lock does not nest).
    func edit(_ h: StoreHarness, _ table: String, _ body: (WriteTransaction, DatabaseHandle) throws -> Void) throws {
        let env = try Environment(path: h.path + "/proj")  // the projections environment
        let db = try env.openHandle(table, create: false)
        try env.write { txn in try body(txn, db) }
    }

    func audit(_ h: StoreHarness) throws -> AuditReport {
        var options = Store.Options()
        options.readOnly = true
        return try Store(path: h.path, options: options, loadState: false).audit()
    }

    @Test func cleanStoreAuditsOKWithStableDigests() throws {
        let h = try Self.makeStore()
        let first = try audit(h)
        #expect(first.ok)
        #expect(try audit(h).tables.map(\.digest) == first.tables.map(\.digest))
    }

    @Test func changedValueIsNamed() throws {
        let h = try Self.makeStore()
        try edit(h, "p.members") { txn, db in
            let key = ProjectionCodec.pairKey("AUD", "b")
            var value = try #require(try txn.get(db, key: key))
            value[2] ^= 1  // the notify state byte
            try txn.put(db, key: key, value: value)
        }
        let report = try audit(h)
        #expect(!report.ok)
        let difference = try #require(report.tables.first { $0.table == "members" }?.difference)
        #expect(difference.contains("AUD/b") && difference.contains("vs replayed"), "\(difference)")
    }

    /// A team record changed in a byte the readable form did not show (it printed four of its fields):
    /// both sides read the same and the difference was invisible. Every field is shown now, and when the
    /// two still read the same, their bytes too.
    @Test func aDifferenceThatReadsTheSameShowsItsBytes() throws {
        let h = try Self.makeStore()
        var before: [UInt8] = []
        try edit(h, "p.teams") { txn, db in
            let key = Array("AUD".utf8)
            var value = try #require(try txn.get(db, key: key))
            before = value
            value[value.count - 1] ^= 1  // the member count, the record's last field
            try txn.put(db, key: key, value: value)
        }
        let difference = try #require(try audit(h).tables.first { $0.table == "teams" }?.difference)
        #expect(difference.contains("which read the same: bytes stored"), "\(difference)")
        #expect(difference.contains(HashChain.hex(before)), "the replayed bytes are the original: \(difference)")
        #expect(difference.contains("avatar") && difference.contains("createdTs"), "every field: \(difference)")
    }

    @Test func recordMissingFromTheStoreIsNamed() throws {
        let h = try Self.makeStore()
        try edit(h, "p.messages") { txn, db in
            try txn.delete(db, key: Array("am1".utf8))
        }
        let report = try audit(h)
        let difference = try #require(report.tables.first { $0.table == "messages" }?.difference)
        #expect(difference.contains("am1") && difference.contains("missing from the store"), "\(difference)")
    }

    @Test func recordTheReplayDoesNotHaveIsNamed() throws {
        let h = try Self.makeStore()
        try edit(h, "p.teams") { txn, db in
            let value = try #require(try txn.get(db, key: Array("AUD".utf8)))
            try txn.put(db, key: Array("GHOST".utf8), value: value)
        }
        let report = try audit(h)
        let difference = try #require(report.tables.first { $0.table == "teams" }?.difference)
        #expect(difference.contains("GHOST") && difference.contains("absent after replay"), "\(difference)")
    }

    /// The unread indexes are audited entry by entry against the replay's: a changed ordinal, an entry
    /// missing from the store and one the replay does not have (a seq it never indexed).
    @Test(arguments: ["p.counted", "p.own", "p.directed"])
    func indexEntriesAreAudited(_ table: String) throws {
        let prefix = ConvKey(team: "AUD", kind: .team).bytes + [0]
        for damage in ["ordinal", "missing", "extra"] {
            let h = try Self.makeStore()
            try edit(h, table) { txn, db in
                var entry: ([UInt8], [UInt8])?
                try txn.forEach(db, from: prefix) { key, value in
                    if key.starts(with: prefix) { entry = (Array(key), Array(value)) }
                    return key.starts(with: prefix)
                }
                let (key, value) = try #require(entry, "\(table): no entry of AUD")
                switch damage {
                case "ordinal": try txn.put(db, key: key, value: [value[0], value[1] + 1])
                case "missing": try txn.delete(db, key: key)
                default: try txn.put(db, key: key.dropLast(8) + BigEndianUInt64.encoded(1_000_000), value: value)
                }
            }
            let report = try audit(h)
            let name = String(table.dropFirst(2))
            let difference = try #require(report.tables.first { $0.table == name }?.difference, "\(table) \(damage)")
            let expected = [
                "ordinal": "vs replayed", "missing": "missing from the store", "extra": "absent after replay",
            ]
            #expect(difference.contains("AUD") && difference.contains(expected[damage]!), "\(difference)")
            #expect(report.tables.filter { $0.difference != nil }.count == 1, "\(table) \(damage): only that table")
            // Readable on a terminal: the key's seq as a number, no control bytes (a seq's 0x0A was one).
            #expect(!difference.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(difference)")
            if damage == "extra" { #expect(difference.contains("/seq 1000000:"), "\(difference)") }
        }
    }

    /// The comparison is a merge of two key-ordered streams (the stored table and the replay's): each kind
    /// of difference is found at the first key, in the middle and at the last key of the table — where one
    /// stream runs out before the other — and is reported with its key and both values; the stored table
    /// is still counted and digested to its end after the difference.
    @Test(arguments: ["changed", "missing", "extra"])
    func differencesAreFoundAnywhereInTheMergedStreams(_ damage: String) throws {
        for position in ["first", "middle", "last"] {
            let h = try Self.makeStore()
            let clean = try audit(h).tables.first { $0.table == "messages" }!
            var stored: [([UInt8], [UInt8])] = []
            try edit(h, "p.messages") { txn, db in
                try txn.forEach(db) { key, value in
                    stored.append((Array(key), Array(value)))
                    return true
                }
                #expect(stored.count == clean.records && stored.count > 3)
                let index = ["first": 0, "middle": stored.count / 2, "last": stored.count - 1][position]!
                let (key, value) = stored[index]
                switch damage {
                case "changed": try txn.put(db, key: key, value: value + [0x7F])
                case "missing": try txn.delete(db, key: key)
                default:
                    // A key just before the first, between two, or after the last.
                    let extra = position == "first" ? [UInt8(0x01)] : position == "middle" ? key + [0x00] : key + [0xFF]
                    try txn.put(db, key: extra, value: value)
                }
            }
            let index = ["first": 0, "middle": stored.count / 2, "last": stored.count - 1][position]!
            let (key, value) = stored[index]
            let report = try audit(h)
            let context = "\(damage) at the \(position) key"
            #expect(!report.ok, "\(context)")
            #expect(report.tables.filter { $0.difference != nil }.map(\.table) == ["messages"], "\(context)")
            let table = try #require(report.tables.first { $0.table == "messages" })
            let difference = try #require(table.difference, "\(context)")
            let name = Store.keyName(.messages, key)
            switch damage {
            case "changed":
                #expect(
                    difference == "messages \(name): stored \(HashChain.hex(value + [0x7F])) vs replayed \(HashChain.hex(value))",
                    "\(context): \(difference)")
                #expect(table.records == stored.count && table.digest != clean.digest, "\(context)")
            case "missing":
                #expect(
                    difference == "messages \(name): missing from the store; replay has \(HashChain.hex(value))",
                    "\(context): \(difference)")
                #expect(table.records == stored.count - 1, "\(context)")
            default:
                let extra = position == "first" ? [UInt8(0x01)] : position == "middle" ? key + [0x00] : key + [0xFF]
                let extraName = Store.keyName(.messages, extra)
                if position == "first" { #expect(extraName == "\\x01", "a control byte is escaped") }
                #expect(
                    difference == "messages \(extraName): stored \(HashChain.hex(value)) but absent after replay",
                    "\(context): \(difference)")
                #expect(table.records == stored.count + 1, "\(context)")
            }
        }
    }

    /// Audit, repair and `--at` leave nothing behind: their scratch store's directory under `$TMPDIR` is
    /// removed, whether the store audits clean or not.
    @Test func scratchStoresAreRemoved() throws {
        let h = try Self.makeStore()
        let tmp = TemporaryDirectory("audit-tmpdir")
        func run(_ args: [String]) throws -> ChildProcess.Status {
            try ChildProcess.run(
                TestSupport.teamlogExecutable, args + ["--store", h.path], environment: ["TMPDIR": tmp.path],
                timeout: 60
            ).status
        }
        #expect(try run(["audit"]) == .exited(0))
        #expect(try run(["unread", "b", "--at", "5"]) == .exited(0))
        try edit(h, "p.messages") { txn, db in try txn.delete(db, key: Array("am1".utf8)) }
        #expect(try run(["audit"]) == .exited(1))
        #expect(try run(["repair"]) == .exited(0))
        #expect(try run(["audit"]) == .exited(0), "repair rebuilt the deleted record")
        var left: [String] = []
        if let dir = opendir(tmp.path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
                }
                if name != "." && name != ".." { left.append(name) }
            }
            closedir(dir)
        }
        #expect(left.isEmpty, "left in TMPDIR: \(left)")
    }
}
