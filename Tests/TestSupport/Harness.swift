public import TeamLog
public import TeamLogRuntime
public import TeamLogStore
import TeamLogWorkload

/// A store in a temporary directory with a processor that collects output records, for tests.
public final class StoreHarness {
    public let directory: TemporaryDirectory
    public private(set) var store: Store
    public private(set) var processor: Processor
    /// Output bytes handed to the sink (committed records only).
    public private(set) var output: [UInt8] = []
    /// The fixed clock for ops without `ts`.
    public var now: Int64 = 1_000_000
    private var lineNumber = 0
    private let options: Store.Options
    private let processorOptions: Processor.Options

    /// `cacheBytes` and `checkpointOps` set the working set's budget and the checkpoint interval (a tiny
    /// budget with frequent checkpoints evicts nearly everything after every checkpoint).
    public init(
        config: Config = Config(), mapSize: Int = 1 << 20, batchSize: Int = 10_000,
        cacheBytes: Int = Store.defaultCacheBytes, checkpointOps: Int = Store.Options().checkpointOps,
        checkpointMs: Int = Store.Options().checkpointMs
    ) throws {
        directory = TemporaryDirectory()
        var o = Store.Options()
        o.config = config
        o.mapSize = mapSize
        o.noSync = true
        o.cacheBytes = cacheBytes
        o.checkpointOps = checkpointOps
        o.checkpointMs = checkpointMs
        options = o
        var p = Processor.Options()
        p.batchSize = batchSize
        processorOptions = p
        store = try Store(path: directory.child("store"), options: o)
        processor = Processor(store: store, options: p) { _ in }
        rewire()
    }

    private func rewire() {
        processor = Processor(store: store, options: processorOptions, clock: { [unowned self] in now }) {
            [unowned self] bytes in output += bytes
        }
    }

    /// Path of the store.
    public var path: String { directory.child("store") }

    /// Feeds lines, commits, and returns the records they produced (parsed).
    @discardableResult
    public func feed(_ lines: [String]) throws -> [JSONValue] {
        let before = output.count
        for line in lines {
            lineNumber += 1
            try processor.process(.text(number: lineNumber, bytes: Array(line.utf8)))
        }
        try processor.commit()
        let text = output[before...]
        return try text.split(separator: 0x0A).map { try JSONParser.parse(Array($0)) }
    }

    /// Feeds one line and returns its records.
    @discardableResult
    public func feed(_ line: String) throws -> [JSONValue] { try feed([line]) }

    /// Closes and reopens the store (projections loaded from disk).
    public func reopen() throws {
        store.close()
        store = try Store(path: path, options: options)
        rewire()
    }

    /// The team query's JSON.
    public func team(_ id: Id) throws -> JSONValue? { try store.teamView(id) }
}

/// Shorthand for an op line: `op("team.leave", "a", ["team": "t1"])`.
public func op(_ name: String, _ actor: String, _ fields: KeyValuePairs<String, Any> = [:]) -> String {
    var pairs: [(String, JSONValue)] = [("op", .string(name)), ("actor", .string(actor))]
    pairs += fields.map { ($0.key, jsonValue($0.value)) }
    return JSONValue.object(pairs).jsonString
}

/// `op` with the actor as an `Id`.
public func op(_ name: String, _ actor: Id, _ fields: KeyValuePairs<String, Any> = [:]) -> String {
    op(name, actor.string, fields)
}

/// A test value as JSON.
public func jsonValue(_ v: Any) -> JSONValue {
    switch v {
    case let s as String: return .string(s)
    case let id as Id: return .string(id.string)
    case let a as [Id]: return .array(a.map { .string($0.string) })
    case let b as Bool: return .bool(b)
    case let n as Int: return .int(Int64(n))
    case let n as Int64: return .int(n)
    case let n as UInt64: return .int(Int64(n))
    case let a as [String]: return .array(a.map { .string($0) })
    case let a as [Any]: return .array(a.map(jsonValue))
    case let d as KeyValuePairs<String, Any>: return .object(d.map { ($0.key, jsonValue($0.value)) })
    case let j as JSONValue: return j
    default: fatalError("unsupported test value \(v)")
    }
}

/// Lines of the seeded team workload.
public enum TeamWorkloadProbe {
    public static func lines(
        count: Int, seed: UInt64, users: Int = 300, teams: Int = 30, invalidShare: Double = 0.02,
        config: Config = Config()
    ) -> [String] {
        var o = TeamWorkload.Options()
        o.seed = seed
        o.users = users
        o.teams = teams
        o.maxInitialMembers = 60
        o.invalidShare = invalidShare
        var w = TeamWorkload(options: o, config: config)
        return (0..<count).map { _ in w.next() }
    }
}

extension Store.Options {
    /// No fsync, and a checkpoint every `ops` ops and never by time: for tests that count checkpoints.
    public static func checkpointing(every ops: Int) -> Store.Options {
        var options = Store.Options()
        options.noSync = true
        options.checkpointOps = ops
        options.checkpointMs = 100_000_000
        return options
    }
}
