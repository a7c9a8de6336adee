import LMDB
import TestSupport
import Testing

/// Puts, gets, deletes, put flags, cursors and codecs against a real environment in a temporary directory.
@Suite struct TransactionTests {
    let directory = TemporaryDirectory("lmdb-txn")
    let env: Environment

    init() throws {
        var options = Environment.Options()
        options.noSync = true
        env = try Environment(path: directory.child("env"), options: options)
    }

    @Test func rawPutGetDelete() throws {
        let db = try env.openHandle("raw")
        try env.write { txn in
            try txn.put(db, key: [1, 2, 3], value: [9, 8, 7])
            try txn.put(db, key: [4], value: [])
        }
        try env.read { txn throws in
            #expect(try txn.get(db, key: [1, 2, 3]) == [9, 8, 7])
            #expect(try txn.get(db, key: [4]) == [])
            #expect(try txn.get(db, key: [1, 2]) == nil)
            #expect(try txn.stat(db).entries == 2)
        }
        let removed = try env.write { txn in
            (try txn.delete(db, key: [1, 2, 3]), try txn.delete(db, key: [1, 2, 3]))
        }
        #expect(removed == (true, false))
        #expect(try env.read { try $0.get(db, key: [1, 2, 3]) } == nil)
    }

    /// Puts and deletes through one cursor, in key order and out of it, over a database large enough to
    /// span many pages: the result equals a dictionary doing the same.
    @Test func cursorPutsAndDeletesMatchAModel() throws {
        let db = try env.openHandle("cursor")
        var model: [[UInt8]: [UInt8]] = [:]
        func key(_ n: Int) -> [UInt8] { Array("key-\(n * 7919 % 20_000)".utf8) }
        for round in 0..<3 {
            // Round 0 puts in key order; later rounds mix puts, overwrites and deletes of present and absent keys.
            var batch: [([UInt8], [UInt8]?)] = (0..<6_000).map { n in
                let k = key(n + round * 3_000)
                let deleting = round > 0 && n % 3 == round  // keys of the last round: some present, some not
                return (k, deleting ? nil : Array("v\(round)-\(n)".utf8))
            }
            if round == 0 { batch.sort { $0.0.lexicographicallyPrecedes($1.0) } }
            var deletedPresent = 0
            var deletes = 0
            try env.write { txn in
                try txn.withCursor(db) { cursor in
                    for (k, v) in batch {
                        try k.withUnsafeBytes { kb in
                            if let v {
                                try v.withUnsafeBytes { vb in try cursor.put(key: kb, value: vb) }
                            } else {
                                deletes += 1
                                if try cursor.delete(key: kb) { deletedPresent += 1 }
                            }
                        }
                    }
                }
            }
            var expectedPresent = 0
            for (k, v) in batch {
                if let v {
                    model[k] = v
                } else if model.removeValue(forKey: k) != nil {
                    expectedPresent += 1
                }
            }
            #expect(deletedPresent == expectedPresent)
            #expect(round == 0 || (deletes > 0 && deletedPresent > 0 && deletedPresent < deletes))
            var stored: [[UInt8]: [UInt8]] = [:]
            try env.read { txn in
                try txn.forEach(db) { k, v in
                    stored[Array(k)] = Array(v)
                    return true
                }
            }
            #expect(stored == model)
        }
    }

    @Test func overwriteReplacesTheValue() throws {
        let db = try env.open("names", as: Database<UTF8String, UTF8String>.self)
        try env.write { txn in try txn.put(db, "k", "first") }
        try env.write { txn in try txn.put(db, "k", "second") }
        #expect(try env.read { try $0.get(db, "k") } == "second")
    }

    @Test func typedCodecsRoundTrip() throws {
        let bySeq = try env.open("bySeq", as: Database<BigEndianUInt64, RawBytes>.self)
        let byName = try env.open("byName", as: Database<UTF8String, BigEndianUInt64>.self)
        try env.write { txn in
            try txn.put(bySeq, 0, [])
            try txn.put(bySeq, UInt64.max, [0xFF, 0x00, 0x7F])
            try txn.put(byName, "héllo wörld ✓", 42)
            try txn.put(byName, "x", 7)
        }
        try env.read { txn throws in
            #expect(try txn.get(bySeq, 0) == [])
            #expect(try txn.get(bySeq, UInt64.max) == [0xFF, 0x00, 0x7F])
            #expect(try txn.get(bySeq, 1) == nil)
            #expect(try txn.get(byName, "héllo wörld ✓") == 42)
            #expect(try txn.get(byName, "x") == 7)
            #expect(try txn.get(byName, "hello") == nil)
        }
        #expect(try env.write { txn in try txn.delete(byName, "x") })
        #expect(try env.read { try $0.get(byName, "x") } == nil)
        #expect(throws: LMDBError.self, "LMDB keys are 1...511 bytes") {
            try env.write { txn in try txn.put(byName, "", 1) }
        }
    }

    @Test func bigEndianEncodingIsByteOrderedAndStrict() throws {
        #expect(BigEndianUInt64.encoded(0x0102_0304_0506_0708) == [1, 2, 3, 4, 5, 6, 7, 8])
        let decoded = try ([0, 0, 0, 0, 0, 0, 1, 0] as [UInt8]).withUnsafeBytes { try BigEndianUInt64.decode($0) }
        #expect(decoded == 256)
        let error = #expect(throws: LMDBError.self) {
            try ([1, 2, 3] as [UInt8]).withUnsafeBytes { try BigEndianUInt64.decode($0) }
        }
        #expect(error?.code == .decoding)
    }

    @Test func missingKeyIsNilNotAnError() throws {
        let db = try env.open("empty", as: Database<UTF8String, RawBytes>.self)
        try env.read { txn in
            #expect(try txn.get(db, "nothing") == nil)
            #expect(try txn.last(db.handle) == nil)
            var visited = 0
            try txn.forEach(db.handle) { _, _ in
                visited += 1
                return true
            }
            #expect(visited == 0)
        }
        #expect(try env.write { txn in try txn.delete(db, "nothing") } == false)
    }

    struct Boom: Error {}

    @Test func aThrowingWriteAbortsAndStoresNothing() throws {
        let db = try env.open("abort", as: Database<UTF8String, UTF8String>.self)
        try env.write { txn in try txn.put(db, "kept", "yes") }
        #expect(throws: Boom.self) {
            try env.write { txn in
                try txn.put(db, "lost", "no")
                try txn.put(db, "kept", "overwritten")
                #expect(try txn.get(db, "lost") == "no", "a write sees its own puts")
                throw Boom()
            }
        }
        try env.read { txn throws in
            #expect(try txn.get(db, "lost") == nil)
            #expect(try txn.get(db, "kept") == "yes")
        }
        // The environment is usable after the abort.
        try env.write { txn in try txn.put(db, "after", "ok") }
        #expect(try env.read { try $0.get(db, "after") } == "ok")
    }

    @Test func appendWithAnOutOfOrderKeyThrowsKeyExists() throws {
        let log = try env.open("log", as: Database<BigEndianUInt64, UTF8String>.self)
        try env.write { txn in
            for seq: UInt64 in [1, 2, 3, 10] { try txn.put(log, seq, "e\(seq)", flags: .append) }
        }
        for key: UInt64 in [5, 10, 0] {
            let error = #expect(throws: LMDBError.self, "append of \(key) after 10") {
                try env.write { txn in try txn.put(log, key, "late", flags: .append) }
            }
            #expect(error?.code == .keyExists)
        }
        try env.read { txn throws in
            #expect(try txn.stat(log.handle).entries == 4)
            #expect(try txn.get(log, 5) == nil)
            #expect(try txn.get(log, 10) == "e10")
        }
        try env.write { txn in try txn.put(log, 11, "e11", flags: .append) }
        #expect(try env.read { try $0.get(log, 11) } == "e11")
    }

    @Test func noOverwriteOnAnExistingKeyThrowsKeyExists() throws {
        let ids = try env.open("ids", as: Database<UTF8String, BigEndianUInt64>.self)
        try env.write { txn in try txn.put(ids, "op-1", 1, flags: .noOverwrite) }
        let error = #expect(throws: LMDBError.self) {
            try env.write { txn in try txn.put(ids, "op-1", 2, flags: .noOverwrite) }
        }
        #expect(error?.code == .keyExists)
        #expect(error?.context.contains("mdb_put") == true)
        #expect(try env.read { try $0.get(ids, "op-1") } == 1)
        try env.write { txn in try txn.put(ids, "op-2", 2, flags: .noOverwrite) }
        #expect(try env.read { try $0.get(ids, "op-2") } == 2)
    }

    @Test func cursorVisitsInKeyOrderAndSeeks() throws {
        let db = try env.open("ordered", as: Database<UTF8String, UTF8String>.self)
        let keys = ["pear", "apple", "fig", "banana", "cherry", "apricot"]
        try env.write { txn in
            for key in keys { try txn.put(db, key, key.uppercased()) }
        }
        func scan(from: String?, limit: Int = .max) throws -> [String] {
            try env.read { txn in
                var seen: [String] = []
                try txn.forEach(db.handle, from: from.map { UTF8String.encoded($0) }) { key, value in
                    #expect(try UTF8String.decode(value) == (try UTF8String.decode(key)).uppercased())
                    seen.append(try UTF8String.decode(key))
                    return seen.count < limit
                }
                return seen
            }
        }
        #expect(try scan(from: nil) == keys.sorted())
        #expect(try scan(from: "b") == ["banana", "cherry", "fig", "pear"])
        #expect(try scan(from: "cherry") == ["cherry", "fig", "pear"], "seek lands on an equal key")
        #expect(try scan(from: "pearl") == [], "seek past the last key")
        #expect(try scan(from: "apr", limit: 2) == ["apricot", "banana"], "returning false stops")

        let last = try env.read { try $0.last(db.handle) }
        #expect(last.map { String(decoding: $0.key, as: UTF8.self) } == "pear")
        #expect(last.map { String(decoding: $0.value, as: UTF8.self) } == "PEAR")
    }

    @Test func cursorMovesBothWays() throws {
        let db = try env.open("twoWays", as: Database<BigEndianUInt64, RawBytes>.self)
        try env.write { txn in for n: UInt64 in 1...5 { try txn.put(db, n, [UInt8(n)]) } }
        let walk = try env.read { txn in
            try txn.withCursor(db.handle) { cursor -> [UInt64] in
                var out: [UInt64] = []
                var entry = try cursor.last()
                while let (key, _) = entry {
                    out.append(try BigEndianUInt64.decode(key))
                    entry = try cursor.previous()
                }
                return out
            }
        }
        #expect(walk == [5, 4, 3, 2, 1])
    }

    /// `lastAtOrBefore`: the greatest key ≤ the probe, in one seek plus at most one step, counted in the
    /// transaction's `cursorMoves`.
    @Test func lastAtOrBeforeFindsTheFloorInTwoMovesAtMost() throws {
        let db = try env.open("floor", as: Database<BigEndianUInt64, RawBytes>.self)
        let empty = try env.read { txn in
            try txn.withCursor(db.handle) { try $0.lastAtOrBefore(BigEndianUInt64.encoded(7)) == nil }
        }
        #expect(empty)
        try env.write { txn in for n: UInt64 in stride(from: 10, through: 10_000, by: 10) { try txn.put(db, n, []) } }
        // probe → (expected key, moves): exact hit 1; between keys 2 (seek, step back); before the first
        // 2 (seek, no previous); after the last 2 (seek finds nothing, then the last entry).
        let cases: [(UInt64, UInt64?, Int)] = [
            (10, 10, 1), (5_000, 5_000, 1), (5_005, 5_000, 2), (11, 10, 2), (9, nil, 2), (0, nil, 2),
            (10_000, 10_000, 1), (UInt64.max, 10_000, 2),
        ]
        for (probe, expected, moves) in cases {
            let (found, used) = try env.read { txn in
                let before = txn.cursorMoves
                let found = try txn.withCursor(db.handle) { cursor in
                    try cursor.lastAtOrBefore(BigEndianUInt64.encoded(probe)).map { try BigEndianUInt64.decode($0.0) }
                }
                return (found, txn.cursorMoves - before)
            }
            #expect(found == expected, "probe \(probe)")
            #expect(used == moves, "probe \(probe): \(used) moves")
        }
    }

    @Test(
        arguments: [
            [255, 256, 65_536, 1, 0, 4_294_967_296, UInt64.max, 65_535, 257],
            [1_000_000, 999_999, 10, 9, 100, 99],
        ] as [[UInt64]])
    func bigEndianKeysSortNumerically(numbers: [UInt64]) throws {
        let db = try env.open("numbers", as: Database<BigEndianUInt64, RawBytes>.self)
        try env.write { txn in
            for n in numbers { try txn.put(db, n, []) }
        }
        let order = try env.read { txn in
            var out: [UInt64] = []
            try txn.forEach(db.handle) { key, _ in
                out.append(try BigEndianUInt64.decode(key))
                return true
            }
            return out
        }
        #expect(order == numbers.sorted())
        let last = try env.read { try $0.last(db.handle) }
        #expect(try last.map { try $0.key.withUnsafeBytes { try BigEndianUInt64.decode($0) } } == numbers.max())
        // A seek by number lands on the next number, not the next string.
        let seeked = try env.read { txn in
            var first: UInt64?
            try txn.forEach(db.handle, from: BigEndianUInt64.encoded(256)) { key, _ in
                first = try BigEndianUInt64.decode(key)
                return false
            }
            return first
        }
        #expect(seeked == numbers.filter { $0 >= 256 }.min())
    }

    @Test func clearEmptiesTheDatabaseButKeepsItOpen() throws {
        let db = try env.open("clear", as: Database<BigEndianUInt64, RawBytes>.self)
        try env.write { txn in for n: UInt64 in 1...50 { try txn.put(db, n, [1]) } }
        try env.write { txn in try txn.clear(db.handle) }
        #expect(try env.stat(db.handle).entries == 0)
        try env.write { txn in try txn.put(db, 7, [7]) }
        #expect(try env.read { try $0.get(db, 7) } == [7])
    }

    @Test func readSnapshotDoesNotSeeLaterCommits() throws {
        let db = try env.open("snapshot", as: Database<UTF8String, UTF8String>.self)
        try env.write { txn in try txn.put(db, "k", "old") }
        try env.read { snapshot in
            let before = snapshot.id
            // `read` holds the resize lock shared and `write` takes it shared too, so this nests.
            try env.write { txn in
                try txn.put(db, "k", "new")
                try txn.put(db, "added", "yes")
            }
            #expect(try snapshot.get(db, "k") == "old")
            #expect(try snapshot.get(db, "added") == nil)
            #expect(snapshot.id == before)
            // A read begun after the commit sees it, while the old one is still open.
            try env.read { fresh throws in
                #expect(try fresh.get(db, "k") == "new")
                #expect(fresh.id > before)
            }
        }
        #expect(try env.read { try $0.get(db, "added") } == "yes")
    }
}

@Suite struct NestedWriteTests {
    /// A write inside a write on the same thread fails at once instead of deadlocking on LMDB's writer lock.
    @Test func nestedWriteFailsInsteadOfHanging() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.child("env"))
        let db = try env.openHandle("d")
        var inner: (any Error)?
        try env.write { txn in
            try txn.put(db, key: [1], value: [1])
            do { _ = try env.openHandle("other") } catch { inner = error }
        }
        let error = try #require(inner as? LMDBError)
        #expect(error.code == .busy)
        #expect(try env.read { try $0.get(db, key: [1]) } == [1])
    }
}
