import LMDB
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Opening, growing, reopening, and cleaning up after dead readers, on real environments.
@Suite struct EnvironmentTests {
    let directory = TemporaryDirectory("lmdb-env")

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    @Test func openCreatesTheDirectoryAndItsFiles() throws {
        let path = directory.child("fresh")
        #expect(!Self.exists(path))
        let env = try Environment(path: path)
        #expect(Self.isDirectory(path))
        #expect(Self.exists(path + "/data.mdb"))
        #expect(Self.exists(path + "/lock.mdb"))
        #expect(env.path == path)
        #expect(env.staleReadersCleared == 0)
        #expect(env.mapGrowths == 0)
        #expect(env.mapSize == 1 << 20)
        // Opening an existing directory again is fine.
        _ = try Environment(path: directory.path)
    }

    @Test func readOnlyOpenOfAMissingStoreThrowsInsteadOfCrashing() throws {
        var options = Environment.Options()
        options.readOnly = true
        let path = directory.child("missing")
        let error = #expect(throws: LMDBError.self) { try Environment(path: path, options: options) }
        #expect(error?.code == .system(ENOENT))
        #expect(!Self.exists(path), "a read-only open creates nothing")
    }

    @Test func writtenDataSurvivesReopen() throws {
        let path = directory.child("reopen")
        do {
            let env = try Environment(path: path)
            let db = try env.open("kv", as: Database<UTF8String, UTF8String>.self)
            try env.write { txn in try txn.put(db, "answer", "42") }
        }
        var options = Environment.Options()
        options.readOnly = true
        let env = try Environment(path: path, options: options)
        let db = try env.open("kv", create: false, as: Database<UTF8String, UTF8String>.self)
        #expect(try env.read { try $0.get(db, "answer") } == "42")
        #expect(throws: LMDBError.self, "a missing database is not created read-only") {
            try env.openHandle("absent", create: false)
        }
    }

    // MARK: Map growth

    static let valueSize = 4096
    static let valueCount = 20_000
    static let batch = 1_000

    /// A value that names its key at both ends around a key-dependent fill, so a misplaced or torn value
    /// cannot pass (built with memset: element-wise code is slow in debug builds).
    static func value(_ n: UInt64) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: valueSize) { buffer, count in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            memset(raw.baseAddress!, Int32(n % 251), valueSize)
            raw.storeBytes(of: n.bigEndian, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: n.bigEndian, toByteOffset: valueSize - 8, as: UInt64.self)
            count = valueSize
        }
    }

    /// How many values read back, in key order from 0, equal to what was written.
    static func readsEverything(_ env: Environment, _ db: Database<BigEndianUInt64, RawBytes>) throws -> Int {
        try env.read { txn in
            var good = 0
            var expected: UInt64 = 0
            try txn.forEach(db.handle) { key, value in
                let n = try BigEndianUInt64.decode(key)
                let same = Self.value(n).withUnsafeBytes { want in
                    value.count == want.count && memcmp(value.baseAddress!, want.baseAddress!, want.count) == 0
                }
                if n == expected && same { good += 1 }
                expected = n + 1
                return true
            }
            return good
        }
    }

    @Test func theMapGrowsFromOneMebibyteAndReopensSmall() throws {
        let path = directory.child("growth")
        var options = Environment.Options()
        options.mapSize = 1 << 20
        options.noSync = true
        do {
            let env = try Environment(path: path, options: options)
            let db = try env.open("big", as: Database<BigEndianUInt64, RawBytes>.self)
            for start in stride(from: 0, to: Self.valueCount, by: Self.batch) {
                let values = (start..<(start + Self.batch)).map { UInt64($0) }.map { ($0, Self.value($0)) }
                try env.write { txn in
                    for (key, value) in values { try txn.put(db, key, value, flags: .append) }
                }
            }
            try env.sync()
            #expect(env.mapGrowths > 0)
            #expect(env.mapSize > 64 << 20)
            #expect(env.usedBytes > Self.valueCount * Self.valueSize)
            #expect(env.usedBytes <= env.mapSize)
            #expect(try env.stat(db.handle).entries == Self.valueCount)
            #expect(try Self.readsEverything(env, db) == Self.valueCount)
        }
        // Reopened with the small size, LMDB keeps at least what the file uses.
        let env = try Environment(path: path, options: options)
        #expect(env.mapSize > 64 << 20)
        #expect(env.mapSize >= env.usedBytes)
        let db = try env.open("big", create: false, as: Database<BigEndianUInt64, RawBytes>.self)
        #expect(try Self.readsEverything(env, db) == Self.valueCount)
        // And it still grows when written to.
        let before = env.mapSize
        for start in stride(from: Self.valueCount, to: Self.valueCount + 5 * Self.batch, by: Self.batch) {
            try env.write { txn in
                for n in UInt64(start)..<UInt64(start + Self.batch) {
                    try txn.put(db, n, Self.value(n), flags: .append)
                }
            }
        }
        #expect(env.mapSize >= before)
        #expect(try Self.readsEverything(env, db) == Self.valueCount + 5 * Self.batch)
    }

    /// Read-ahead off is `MADV_RANDOM` on the map (smaps `VmFlags: rr`); the advice outlives the remaps of a
    /// growing map (a new mapping starts with the kernel's default), and on again it is gone.
    @Test func readAheadOffHoldsThroughTheMapsGrowth() throws {
        let path = directory.child("readahead")
        var options = Environment.Options()
        options.noSync = true
        let env = try Environment(path: path, options: options)
        // An empty environment's map cannot be found (through a key of the main database): not advised,
        // and not recorded as advised, so the next call tries again.
        env.setReadAhead(false)
        #expect(env.readAhead)
        let db = try env.open("big", as: Database<BigEndianUInt64, RawBytes>.self)
        // Now the main database names `big`: a key to find the map by.
        try env.write { txn in try txn.put(db, 0, Self.value(0)) }
        let data = path + "/data.mdb"
        #expect(env.readAhead)
        #expect(try #require(vmFlags(ofMappingOf: data)).contains("rr") == false)
        env.setReadAhead(false)
        #expect(!env.readAhead)
        #expect(try #require(vmFlags(ofMappingOf: data)).contains("rr"))
        let growths = env.mapGrowths
        for start in stride(from: 1, to: Self.valueCount, by: Self.batch) {
            try env.write { txn in
                for n in UInt64(start)..<UInt64(min(start + Self.batch, Self.valueCount)) {
                    try txn.put(db, n, Self.value(n), flags: .append)
                }
            }
        }
        #expect(env.mapGrowths > growths)
        #expect(try #require(vmFlags(ofMappingOf: data)).contains("rr"), "the grown map is advised again")
        env.setReadAhead(true)
        #expect(env.readAhead)
        #expect(try #require(vmFlags(ofMappingOf: data)).contains("rr") == false)
        #expect(try Self.readsEverything(env, db) == Self.valueCount)
    }

    // MARK: Stale readers

    /// A store the CLI can open read-only: an ingest of nothing creates every named database.
    static func makeEmptyStore(_ path: String, in directory: TemporaryDirectory) throws {
        let result = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", "/dev/null", "--store", path, "--emit", "none"],
            stderr: directory.child("create.err"), timeout: 60)
        #expect(result.status == .exited(0))
    }

    /// Starts `teamlog debug-hold-reader` and waits until its read transaction is open.
    static func holdReader(_ path: String) throws -> ChildProcess {
        let child = try ChildProcess(TestSupport.teamlogExecutable, ["debug-hold-reader", "--store", path])
        let ready = try child.waitForOutput(containing: "ready", timeout: 30)
        try #require(ready, "debug-hold-reader did not report ready; output: \(child.lines)")
        return child
    }

    @Test func aKilledReadersSlotIsClearedAtOpen() throws {
        let path = directory.child("readers")
        try Self.makeEmptyStore(path, in: directory)
        // LMDB resets the whole reader table when an open finds no other process using the environment,
        // so a live process must keep it open for the dead reader's slot to still be there.
        let keeper = try Self.holdReader(path)
        let victim = try Self.holdReader(path)
        victim.kill(SIGKILL)
        #expect(victim.wait() == .signaled(SIGKILL))

        do {
            let env = try Environment(path: path)
            #expect(env.staleReadersCleared >= 1)
            let db = try env.open("meta", create: false, as: Database<UTF8String, RawBytes>.self)
            try env.write { txn in try txn.put(db, "probe", [1]) }
            #expect(try env.read { try $0.get(db, "probe") } == [1])
        }
        keeper.kill(SIGKILL)
        #expect(keeper.wait() == .signaled(SIGKILL))
        // Alone again, the next open resets the table, so the keeper's slot is not even counted.
        #expect(try Environment(path: path).staleReadersCleared == 0)
    }

    @Test func aLiveReaderIsNotCleared() throws {
        let path = directory.child("live")
        try Self.makeEmptyStore(path, in: directory)
        let reader = try Self.holdReader(path)
        let env = try Environment(path: path)
        #expect(env.staleReadersCleared == 0)
        // Its snapshot does not block writers.
        let db = try env.open("meta", create: false, as: Database<UTF8String, RawBytes>.self)
        try env.write { txn in try txn.put(db, "probe", [2]) }
        reader.kill(SIGTERM)
        #expect(reader.wait() == .signaled(SIGTERM))
    }

    /// `releaseResidentPages` drops the map's pages from this process's resident set (a scan of the whole
    /// file makes them resident) and every value reads back unchanged afterwards, inside a transaction that
    /// was open across the release too.
    /// Values of the release tests: 200 bytes each, differing by key and by `round`.
    static func releaseValue(_ i: Int, _ round: Int = 0) -> [UInt8] {
        (0..<200).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0 &+ round) }
    }

    /// A store in a 64 MiB map holding `count` values (`releaseValue(i)`) under big-endian keys 0 ..< count.
    func filledForRelease(_ name: String, count: Int) throws -> (Environment, DatabaseHandle) {
        var options = Environment.Options()
        options.mapSize = 64 << 20
        let env = try Environment(path: directory.child(name), options: options)
        let db = try env.openHandle("t")
        try env.write { txn in
            for i in 0..<count {
                try txn.put(db, key: BigEndianUInt64.encoded(UInt64(i)), value: Self.releaseValue(i), flags: .append)
            }
        }
        return (env, db)
    }

    @Test func releasingResidentPagesKeepsEveryValue() throws {
        let count = 20_000
        let (env, db) = try filledForRelease("release", count: count)
        func value(_ i: Int) -> [UInt8] { Self.releaseValue(i) }
        func readAll(_ txn: Transaction) throws -> Int {
            var i = 0
            var mismatches = 0
            try txn.forEach(db) { key, bytes in
                if !key.elementsEqual(BigEndianUInt64.encoded(UInt64(i))) || !bytes.elementsEqual(value(i)) {
                    mismatches += 1
                }
                i += 1
                return true
            }
            return i == count ? mismatches : mismatches + 1
        }
        try env.read { txn in
            let first = try readAll(txn)
            #expect(first == 0)
            let pointer = try BigEndianUInt64.encoded(UInt64(count / 2)).withUnsafeBytes { key in
                try txn.withValue(db, key: key) { UnsafeRawPointer($0!.baseAddress!) }
            }
            let before = try #require(residentKB(ofMappingHolding: pointer))
            #expect(before > 4_000, "the scan made the file's pages resident: \(before) kB")
            env.releaseResidentPages()
            let after = try #require(residentKB(ofMappingHolding: pointer))
            #expect(after < before / 4, "released: \(before) kB → \(after) kB")
            let again = try readAll(txn)
            #expect(again == 0, "the open transaction reads the same values")
        }
        let afterwards = try env.read { txn in try readAll(txn) }
        #expect(afterwards == 0, "a new transaction reads the same values")
    }

    /// A write transaction's `residentPageReleaser` drops the pages it read through the map while it goes
    /// on (a checkpoint reads leaf pages all over the file): the mapping's resident size falls, and the
    /// transaction's own writes and every old value read back unchanged, before and after its commit.
    @Test func aWriteTransactionReleasesThePagesItRead() throws {
        let count = 20_000
        let (env, db) = try filledForRelease("release-write", count: count)
        func value(_ i: Int, _ round: Int) -> [UInt8] { Self.releaseValue(i, round) }
        /// Values that differ from round `round(i)`'s, plus keys missing.
        func mismatches(_ txn: Transaction, round: (Int) -> Int) throws -> Int {
            var wrong = 0
            var i = 0
            try txn.forEach(db) { _, bytes in
                if !bytes.elementsEqual(value(i, round(i))) { wrong += 1 }
                i += 1
                return true
            }
            return wrong + (count - i)
        }
        env.releaseResidentPages()
        let rewritten = { (i: Int) in i % 10 == 0 ? 1 : 0 }
        try env.write { txn in
            let release = try #require(txn.residentPageReleaser())
            #expect(try mismatches(txn, round: { _ in 0 }) == 0)  // every page read, through the map
            // An address in the map (its page is still clean here), to find the mapping by.
            let pointer = try BigEndianUInt64.encoded(UInt64(count / 2)).withUnsafeBytes { key in
                try txn.withValue(db, key: key) { UnsafeRawPointer($0!.baseAddress!) }
            }
            for i in stride(from: 0, to: count, by: 10) {
                try txn.put(db, key: BigEndianUInt64.encoded(UInt64(i)), value: value(i, 1))
            }
            let before = try #require(residentKB(ofMappingHolding: pointer))
            #expect(before > 2_000, "the scan made the file's pages resident: \(before) kB")
            release()
            let after = try #require(residentKB(ofMappingHolding: pointer))
            #expect(after < before / 4, "released: \(before) kB → \(after) kB")
            #expect(try mismatches(txn, round: rewritten) == 0, "the transaction reads its writes and the old values")
        }
        #expect(try env.read { try mismatches($0, round: rewritten) } == 0, "committed as written")
    }

    /// The releaser finds the map through the main database's first key; once the transaction has written
    /// that page (here: by creating a database) the key is in the transaction's own heap copy, and the
    /// releaser refuses rather than drop a range of other memory.
    @Test func aReleaserIsRefusedOnceTheMainDatabaseIsWritten() throws {
        let env = try Environment(path: directory.child("release-dirty"))
        _ = try env.openHandle("t")
        try env.write { txn in
            #expect(txn.residentPageReleaser() != nil, "a clean page: the map is found")
            _ = try txn.openHandle("u", create: true)
            #expect(txn.residentPageReleaser() == nil, "the first key's page is the transaction's copy now")
        }
    }
}
