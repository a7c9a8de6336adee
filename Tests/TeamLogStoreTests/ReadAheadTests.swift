import LMDB
import TeamLog
import TeamLogRuntime
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// The maps' read-ahead (`ReadAhead`, `Environment.readAhead`): `auto` turns it off while the store's files
/// are larger than the memory left for their pages and on again when they fit, checked at every checkpoint;
/// `on` and `off` hold whatever the memory; the memory limit is the smallest of the machine's and its
/// memory cgroups' along their paths; a replay's scratch store counts the replayed store's files with its
/// own. Read on the maps themselves (smaps `VmFlags: rr` is `MADV_RANDOM`).
@Suite struct ReadAheadTests {
    /// A store in `directory` fed `count` workload lines and checkpointed.
    static func fed(_ store: Store, count: Int, seed: UInt64) throws {
        let processor = Processor(store: store, clock: { 1_000_000 }) { _ in }
        for (n, line) in TeamWorkloadProbe.lines(count: count, seed: seed).enumerated() {
            try processor.process(.text(number: n + 1, bytes: Array(line.utf8)))
        }
        try processor.commit()
        try store.checkpointNow()
    }

    /// A new store at `path` with read-ahead `policy`, checkpointing every `every` ops (and when asked).
    static func store(_ path: String, _ policy: ReadAhead, every: Int = 1_000_000, memoryLimit: Int? = nil) throws
        -> Store
    {
        var options = Store.Options.checkpointing(every: every)
        options.readAhead = policy
        options.memoryLimit = memoryLimit
        return try Store(path: path, options: options)
    }

    /// Whether both of the store's maps are advised `MADV_RANDOM` (read-ahead off); fails the test when
    /// the two differ or a map is not found.
    static func randomAdvice(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let log = try #require(vmFlags(ofMappingOf: path + "/data.mdb"), sourceLocation: sourceLocation)
        let proj = try #require(
            vmFlags(ofMappingOf: path + "/" + ProjectionDatabases.directory + "/data.mdb"),
            sourceLocation: sourceLocation)
        #expect(log.contains("rr") == proj.contains("rr"), "log \(log), proj \(proj)", sourceLocation: sourceLocation)
        return proj.contains("rr")
    }

    @Test func autoFollowsTheFilesAgainstTheMemoryAtEveryCheckpoint() throws {
        let directory = TemporaryDirectory("readahead-auto")
        let path = directory.child("store")
        let store = try Self.store(path, .auto)
        defer { store.close() }
        try Self.fed(store, count: 200, seed: 71)
        #expect(store.readAheadIsOn, "a small store fits in this machine's memory")
        #expect(try !Self.randomAdvice(path))

        store.memoryLimit = store.env.usedBytes  // less than the files and this process's heap
        try Self.fed(store, count: 200, seed: 72)  // to the next checkpoint
        #expect(!store.readAheadIsOn)
        #expect(try Self.randomAdvice(path))

        store.memoryLimit = Int.max / 2
        try Self.fed(store, count: 200, seed: 73)
        #expect(store.readAheadIsOn)
        #expect(try !Self.randomAdvice(path))
    }

    @Test func onAndOffHoldWhateverTheMemory() throws {
        let directory = TemporaryDirectory("readahead-fixed")
        for (policy, limit) in [(ReadAhead.off, Int.max / 2), (.on, 1)] {
            let path = directory.child("\(policy)")
            let store = try Self.store(path, policy, memoryLimit: limit)
            defer { store.close() }
            try Self.fed(store, count: 150, seed: 74)
            #expect(store.readAheadIsOn == (policy == .on))
            #expect(try Self.randomAdvice(path) == (policy == .off))
            // A reader of the same files takes its own setting.
            var reading = BackupTests.readOnly
            reading.readAhead = policy
            let reader = try Store(path: path, options: reading, loadState: false)
            #expect(reader.readAheadIsOn == (policy == .on))
            reader.close()
        }
    }

    /// An audit replays with read-ahead off as with it on (advice changes when pages are read, never what),
    /// and its scratch store takes the replayed store's setting and counts that store's files with its own.
    @Test func aReplayWithReadAheadOffAuditsCleanAndCountsTheReplayedFiles() throws {
        let directory = TemporaryDirectory("readahead-audit")
        let path = directory.child("store")
        let store = try Self.store(path, .off, every: 97)
        defer { store.close() }
        try Self.fed(store, count: 600, seed: 75)
        #expect(try store.audit().ok)
        #expect(!store.env.readAhead, "the chain walk's read-ahead is the walk's alone")

        let scratch = try store.makeScratch(projectionsOnly: true)
        defer { scratch.remove() }
        #expect(!scratch.store.readAheadIsOn)
        #expect(scratch.store.memoryLimit == store.memoryLimit)
        #expect(scratch.store.readAheadCompanionBytes() == store.env.usedBytes + store.projectionEnv.usedBytes)
    }

    /// The CLI takes `TEAMLOG_READ_AHEAD` (any command that names a store) and refuses a value it does not know.
    @Test func theCLIRefusesAnUnknownReadAheadSetting() throws {
        let directory = TemporaryDirectory("readahead-cli")
        let store = directory.child("store")
        let err = directory.child("err")
        let (made, _) = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", "/dev/null", "--store", store, "--emit", "none"],
            environment: ["TEAMLOG_READ_AHEAD": "off"], timeout: 60)
        #expect(made == .exited(0))
        let (status, _) = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["status", "--store", store],
            environment: ["TEAMLOG_READ_AHEAD": "sometimes"],
            stderr: err, timeout: 60)
        #expect(status == .exited(64))
        let message = readTextFile(err)
        #expect(message.contains("TEAMLOG_READ_AHEAD must be auto, on or off"), "\(message)")
        // `status` says what a process opening the store decides, and by which limit.
        for (setting, on) in [("on", true), ("off", false)] {
            let (fine, lines) = try ChildProcess.run(
                TestSupport.teamlogExecutable, ["status", "--store", store, "--json"],
                environment: ["TEAMLOG_READ_AHEAD": setting], timeout: 60)
            #expect(fine == .exited(0))
            let view = try JSONParser.parse(try #require(lines.first))
            #expect(view["readAhead"] == .bool(on))
            #expect((view["memoryLimitBytes"]?.intValue ?? 0) > 0)
        }
    }

    /// `ResidentMemory.limitBytes(root:)` over a made-up `/proc` and `/sys/fs/cgroup`: the machine's memory,
    /// a v2 cgroup's `memory.max` along its path (`max` is no limit), a v1 memory cgroup's
    /// `memory.limit_in_bytes` (its "unlimited" is a huge number), whichever is smallest.
    @Test func theMemoryLimitIsTheSmallestOfTheMachineAndItsCgroups() throws {
        let directory = TemporaryDirectory("readahead-limit")
        func put(_ relative: String, _ text: String) throws {
            let file = directory.path + "/" + relative
            var dir = directory.path
            for part in relative.split(separator: "/").dropLast() {
                dir += "/" + part
                try #require(mkdir(dir, 0o755) == 0 || errno == EEXIST)
            }
            let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            try #require(fd >= 0)
            _ = text.utf8CString.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count - 1) }
            close(fd)
        }
        let root = directory.path
        #expect(ResidentMemory.limitBytes(root: root) == nil, "nothing to read")

        try put("proc/meminfo", "MemTotal:        8000000 kB\nMemFree:         7000000 kB\n")
        #expect(ResidentMemory.limitBytes(root: root) == 8_000_000 * 1024, "no cgroup: the machine's")

        // v2: the cgroup's own `max`, its parent's 2 GiB, the root's file absent.
        try put("proc/self/cgroup", "0::/app/writer\n")
        try put("sys/fs/cgroup/app/writer/memory.max", "max\n")
        try put("sys/fs/cgroup/app/memory.max", "2147483648\n")
        #expect(ResidentMemory.limitBytes(root: root) == 2 << 30)
        try put("sys/fs/cgroup/app/writer/memory.max", "1073741824\n")
        #expect(ResidentMemory.limitBytes(root: root) == 1 << 30)

        // v1 beside other controllers: the memory hierarchy's limit, "unlimited" at the root.
        try put("proc/self/cgroup", "5:cpu,cpuacct:/elsewhere\n4:memory:/pod\n")
        try put("sys/fs/cgroup/memory/pod/memory.limit_in_bytes", "1610612736\n")
        try put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
        #expect(ResidentMemory.limitBytes(root: root) == 1_610_612_736)
        try put("sys/fs/cgroup/memory/pod/memory.limit_in_bytes", "9223372036854771712\n")
        #expect(ResidentMemory.limitBytes(root: root) == 8_000_000 * 1024, "no limit set: the machine's")

        // This process: some limit, and a heap.
        #expect((ResidentMemory.limitBytes() ?? 0) > 0)
        #expect((ResidentMemory.anonymousBytes() ?? 0) > 0)
    }
}
