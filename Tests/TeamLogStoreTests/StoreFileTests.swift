import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a store directory may hold and what each command does with it: a store is created whole or not at
/// all; a data file that is not a complete teamlog store — a foreign LMDB file, a flipped bit in LMDB's
/// header, a truncated file — is refused with its own code and left untouched, and no command dies by a
/// signal on it.
@Suite struct StoreFileTests {
    static let exe = TestSupport.teamlogExecutable
    static let oneOp = Array(#"{"op":"team.create","actor":"zed","team":"z","opId":"z-1"}"#.utf8) + [0x0A]

    /// A store built from the messages example, its data file's bytes, and a one-op input.
    struct Built {
        let directory = TemporaryDirectory("storefile")
        var store: String { directory.child("store") }
        var data: String { store + "/data.mdb" }
        var input: String { directory.child("one.jsonl") }
        var bytes: [UInt8] = []
    }

    static func build() throws -> Built {
        var built = Built()
        let run = try ChildProcess.run(
            exe, ["ingest", CLITests.examples + "/messages.jsonl", "--store", built.store, "--emit", "none"],
            timeout: 60)
        #expect(run.status == .exited(0))
        try CrashSafetyTests.writeFile(built.input, oneOp)
        built.bytes = try HostileInputTests.readBytes(built.data)
        return built
    }

    /// The commands a user runs on a store, as child processes: how each ended and what it said.
    static func everyCommand(_ built: Built, quick: Bool = false) throws
        -> [(command: String, status: ChildProcess.Status, err: String)]
    {
        let commands: [[String]] =
            quick
            ? [["audit"], ["team", "ops", "--json"], ["ingest", built.input]]
            : [
                ["audit"], ["team", "ops", "--json"], ["unread", "dave", "--json"], ["ingest", built.input], ["repair"],
                ["compact"],
            ]
        return try commands.map { args in
            let err = built.directory.child("cmd.err")
            let run = try ChildProcess.run(exe, args + ["--store", built.store], stderr: err, timeout: 60)
            return (args[0], run.status, CrashSafetyTests.readText(err))
        }
    }

    /// The offset of the current (higher txnid) meta page.
    static func currentMetaOffset(_ bytes: [UInt8]) -> Int {
        func u64(_ at: Int) -> UInt64 { bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt64.self) } }
        let pageSize = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 40, as: UInt32.self) })
        return u64(pageSize + 144) > u64(144) ? pageSize : 0
    }

    // MARK: Issue 10.3: a flipped bit in LMDB's header

    @Test func flippedBitInLMDBHeaderIsRefusedAndLeftUntouched() throws {
        let built = try Self.build()
        // Bit 0 of the main database's root page number (`mm_dbs[1].md_root`) in the current meta.
        var bytes = built.bytes
        bytes[Self.currentMetaOffset(bytes) + 128] ^= 1
        try CrashSafetyTests.writeFile(built.data, bytes)

        let error = #expect(throws: StoreError.self) { try Store(path: built.store) }
        #expect(error?.code == .notAStore || error?.code == .corrupted, "\(String(describing: error))")
        for (command, status, err) in try Self.everyCommand(built) {
            #expect(status != .exited(0), "\(command) on a damaged header: \(err)")
            #expect(err.contains("not a teamlog store") || err.contains("damaged"), "\(command): \(err)")
        }
        #expect(try HostileInputTests.readBytes(built.data) == bytes, "nothing was written to the file")
    }

    @Test func foreignLMDBFileIsNotTurnedIntoAStore() throws {
        let directory = TemporaryDirectory("foreign")
        let path = directory.child("other")
        do {
            let env = try Environment(path: path)
            let db = try env.open("things", as: Database<UTF8String, UTF8String>.self)
            try env.write { txn in try txn.put(db, "a", "b") }
        }
        let before = try HostileInputTests.readBytes(path + "/data.mdb")
        let error = #expect(throws: StoreError.self) { try Store(path: path) }
        #expect(error?.code == .notAStore, "\(String(describing: error))")
        #expect(error?.path == path)
        #expect(try HostileInputTests.readBytes(path + "/data.mdb") == before)
    }

    /// A store of an older layout (format 1: receipt tallies with receiver lists) is refused with the
    /// export-and-re-ingest instruction, not misread.
    @Test func aStoreOfAnotherFormatIsRefused() throws {
        let directory = TemporaryDirectory("format")
        let path = directory.child("store")
        try Store(path: path).close()
        do {
            let env = try Environment(path: path)
            let meta = try env.open("meta", create: false, as: Database<UTF8String, RawBytes>.self)
            try env.write { txn in try txn.put(meta, "format", BigEndianUInt64.encoded(1)) }
        }
        let error = #expect(throws: StoreError.self) { try Store(path: path) }
        #expect(error?.code == .incompatibleFormat, "\(String(describing: error))")
        #expect(error?.message.contains("has format 1; this build reads format \(Store.format)") == true)
        #expect(error?.message.contains("`teamlog log`") == true)
    }

    /// Projections of another format (an older build's: format 4 ended every membership at a dismissal)
    /// are a cache of the log: a reader refuses them and says how to rebuild, a writer rebuilds them at
    /// open, and the rebuilt store answers as before.
    @Test func projectionsOfAnotherFormatAreRebuiltByAWriter() throws {
        let directory = TemporaryDirectory("proj-format")
        let path = directory.child("store")
        let lines = [
            op("team.create", "own", ["team": "t1", "members": ["a", "b"]]),
            op("team.create", "own", ["team": "t2", "members": ["a"]]),
            op("team.dismiss", "own", ["team": "t1"]),
        ]
        var before: [JSONValue?] = []
        do {
            let store = try Store(path: path)
            let processor = Processor(store: store) { _ in }
            for (n, line) in lines.enumerated() { try processor.process(.text(number: n + 1, bytes: Array(line.utf8))) }
            try processor.commit()
            before = [try store.teamView("t1"), try store.teamView("t2")]
            store.close()
        }
        do {
            let env = try Environment(path: path + "/proj")
            let meta = try env.open("meta", create: false, as: Database<UTF8String, RawBytes>.self)
            try env.write { txn in try txn.put(meta, "format", BigEndianUInt64.encoded(4)) }
        }
        var readOnly = Store.Options()
        readOnly.readOnly = true
        let error = #expect(throws: StoreError.self) { try Store(path: path, options: readOnly) }
        #expect(error?.code == .incompatibleFormat, "\(String(describing: error))")
        #expect(error?.message.contains("have format 4") == true && error?.message.contains("a writer rebuilds") == true)
        let store = try Store(path: path)
        defer { store.close() }
        #expect([try store.teamView("t1"), try store.teamView("t2")] == before)
        #expect(before[0]?["memberCount"] == .int(0) && before[1]?["memberCount"] == .int(2))
        #expect(try store.audit().ok)
    }

    // MARK: Issue 10.6: creation is one transaction

    @Test func aNewStoreIsCreatedInOneTransaction() throws {
        let directory = TemporaryDirectory("create")
        let path = directory.child("store")
        do {
            let store = try Store(path: path)
            #expect(store.env.lastTransactionID == 1, "format, settings and every database in one commit")
            store.close()
        }
        // A data file LMDB initialized but never committed to (a creation killed before its one commit) is no
        // store to a reader, and a writer creates the store there.
        let empty = directory.child("empty")
        _ = try Environment(path: empty)
        var readOnly = Store.Options()
        readOnly.readOnly = true
        let error = #expect(throws: StoreError.self) { try Store(path: empty, options: readOnly, loadState: false) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains("nothing was ever committed") == true, "\(String(describing: error))")
        let store = try Store(path: empty)
        defer { store.close() }
        #expect(try store.head().seq == 0)
        #expect(try store.audit().ok)
    }

    @Test func killedDuringCreationLeavesNoStoreOrAWholeOne() throws {
        let directory = TemporaryDirectory("create-kill")
        let input = directory.child("one.jsonl")
        try CrashSafetyTests.writeFile(input, Self.oneOp)
        var outcomes: [String: Int] = [:]
        for i in 0..<24 {
            let path = directory.child("s\(i)")
            let child = try ChildProcess(Self.exe, ["ingest", input, "--store", path])
            usleep(UInt32(i) * 5_000)  // a debug build's ingest of one op takes ~100 ms
            child.kill(SIGKILL)
            child.wait()
            var readOnly = Store.Options()
            readOnly.readOnly = true
            do {
                let store = try Store(path: path, options: readOnly, loadState: false)
                #expect(try store.audit().ok, "run \(i)")
                outcomes["complete", default: 0] += 1
            } catch let error as StoreError {
                // Absent: no data file, or one LMDB initialized and nothing committed.
                let header = try DataFileHeader.read(directory: path)
                #expect(header == nil || header?.neverCommitted == true, "run \(i): \(error)")
                outcomes["absent", default: 0] += 1
            }
            // Either way a writer resumes there.
            let resumed = try ChildProcess.run(Self.exe, ["ingest", input, "--store", path], timeout: 60)
            #expect(resumed.status == .exited(0), "run \(i)")
        }
        print("creation killed at 0…115 ms: \(outcomes)")
    }

    // MARK: Issue 10.4: damaged files never kill a command

    @Test(arguments: [1, 2, 8])
    func truncatedFileIsRefusedByEveryCommand(pages: Int) throws {
        let built = try Self.build()
        let pageSize = Int(built.bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 40, as: UInt32.self) })
        let cut = Array(built.bytes[..<max(1000, built.bytes.count - pages * pageSize)])
        try CrashSafetyTests.writeFile(built.data, cut)
        let error = #expect(throws: StoreError.self) { try Store(path: built.store) }
        #expect(error?.code == .truncated, "\(String(describing: error))")
        for (command, status, err) in try Self.everyCommand(built) {
            #expect(status == .exited(1), "\(command) on a file cut by \(pages) pages: \(status): \(err)")
            #expect(err.contains("is truncated"), "\(command): \(err)")
        }
        #expect(try HostileInputTests.readBytes(built.data) == cut, "nothing was written to the file")
    }

    /// Every field of both meta pages, flipped one at a time: LMDB trusts them, so they are checked before
    /// the file is mapped. No command may die by a signal (the rest of the file: see README, Durability).
    @Test func flippedBytesInTheMetaPagesNeverKillACommand() throws {
        let built = try Self.build()
        let pageSize = Int(built.bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 40, as: UInt32.self) })
        var flips: [(offset: Int, mask: UInt8)] = []
        for page in 0..<2 {
            for field in stride(from: 0, to: 152, by: 8) {  // each 8-byte field: a low bit, or a high one
                flips.append(field % 16 == 0 ? (page * pageSize + field, 0x01) : (page * pageSize + field + 4, 0x80))
            }
        }
        var signaled: [String] = []
        for (offset, mask) in flips {
            var bytes = built.bytes
            bytes[offset] ^= mask
            try CrashSafetyTests.writeFile(built.data, bytes)
            for (command, status, err) in try Self.everyCommand(built, quick: true) {
                if case .signaled = status { signaled.append("byte \(offset) ^ \(mask): \(command) \(status) \(err)") }
            }
        }
        #expect(signaled.isEmpty, "\(signaled)")
    }
}
