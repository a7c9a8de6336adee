import ArgumentParser
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `teamlog` command: parsing and printing only; the work is in `TeamLogStore` and `TeamLog`.
@main
struct Teamlog: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "teamlog",
        abstract: "An event-sourced processor for group chat: team ops and messages in, a replayable LMDB log out.",
        subcommands: [
            Ingest.self, Team.self, Unread.self, Receipts.self, Message.self, Channel.self, Log.self, Records.self,
            Audit.self,
            Repair.self, Info.self, Status.self, Backup.self, Compact.self, Demo.self, Serve.self, Route.self, MergeLogs.self,
            DebugHoldReader.self,
        ]
    )

    /// ArgumentParser's own `main`, but an error or the end of a run that races a signal's cleanup waits
    /// for the signal to end the process (`Interrupts.waitIfStopping`).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            Interrupts.waitIfStopping()
            exit(withError: error)
        }
        Interrupts.waitIfStopping()
    }
}

/// `--nice N` of the commands that run beside a live writer as background work (`audit`, `backup`; and `compact`,
/// beside queries), as the
/// writer's own checkpoints do: they get a core only when the writer's threads leave one.
struct BackgroundPriority: ParsableArguments {
    @Option(
        help: "Scheduling priority (nice, 0-19; 0 keeps the caller's): runs beside a live writer as background work.")
    var nice: Int32 = 10

    func validate() throws {
        guard (0...19).contains(nice) else { throw ValidationError("--nice must be from 0 to 19") }
    }

    /// Lowers this thread's priority, which the threads it starts inherit: call before starting any.
    func lowerThisThread() {
        if nice > 0 { lowerThisThreadsPriority(to: min(nice, 19)) }
    }
}

/// `--cache-mb MB` of the commands that replay the log into a scratch store (`audit`, `repair`): the
/// replay's working-set budget, the default replay's when not given.
struct ReplayBudget: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The replay's working-set budget in MiB (default \(Store.defaultReplayCacheBytes >> 20)): a larger one evicts and reloads less, for a faster replay in more memory (README, `teamlog audit`).",
            valueName: "MB"))
    var cacheMb: Int?

    func validate() throws {
        if let cacheMb, cacheMb < 1 || cacheMb > 1 << 20 {
            throw ValidationError("--cache-mb must be from 1 to \(1 << 20) (MiB)")
        }
    }

    /// The budget in bytes, `nil` for the default.
    var bytes: Int? { cacheMb.map { $0 << 20 } }

    /// What a replay's working set did, as `audit` and `repair` print it.
    static func line(_ r: WorkingSetStats) -> String {
        "replay: \(r.evictions) units evicted (\(r.sweeps) wholesale), \(r.lookups) looked up again, "
            + "\(r.loads) found (a budget of \(r.budgetBytes >> 20) MiB)"
    }
}

/// `--store PATH`, shared by every command.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "Store directory (default: $TEAMLOG_STORE or ./teamlog-store).")
    var store: String?

    var path: String { store ?? environment("TEAMLOG_STORE") ?? "./teamlog-store" }

    /// `TEAMLOG_READ_AHEAD` is read by every store this process opens (`Store.Options.readAhead`): a value
    /// other than its three is refused here rather than taken as `auto`.
    func validate() throws {
        if let value = environment("TEAMLOG_READ_AHEAD"), ReadAhead(rawValue: value) == nil {
            throw ValidationError("TEAMLOG_READ_AHEAD must be auto, on or off (it is \"\(value)\")")
        }
    }
}

/// `--store`, `--json` and `--at SEQ`, shared by the query commands.
struct QueryOptions: ParsableArguments {
    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print the SPEC §5 JSON shape.")
    var json = false

    @Option(help: "Answer as of this seq (from a replay of the log up to it into a temporary store).")
    var at: UInt64?

    @Option(
        help: ArgumentHelp(
            "With --at: a copy of this store (`teamlog backup`) at or before that seq, or a directory of copies (the newest such is taken), to start the replay from: only the log after its checkpoint is replayed.",
            valueName: "DIR"))
    var base: String?

    func validate() throws {
        if base != nil && at == nil { throw ValidationError("--base is for --at SEQ: give the seq to answer as of") }
        if let at { try validateSeq(at, "--at") }
    }

    @OptionGroup(title: "NATS deployment (docs/nats.md)") var cluster: ClusterOptions

    /// `kind` for `id`: with `--nats` from the partitions (`ClusterQueries`), else `answer(query:missing:)`.
    func answer(_ kind: QueryKind, _ id: String, local query: (Store) throws -> JSONValue?) throws -> JSONValue {
        guard cluster.nats != nil else { return try answer(query, missing: kind.missingMessage(id)) }
        guard at == nil else { throw ValidationError("--at is not available with --nats") }
        let view: JSONValue?
        do { view = try cluster.queries().answer(kind, Id(id)) } catch {
            printErr("teamlog: \(error)")
            throw ExitCode(3)
        }
        guard let view else {
            printErr("teamlog: \(kind.missingMessage(id))")
            throw ExitCode(1)
        }
        return view
    }

    /// The answer from the stored projections, or with `--at` from a scratch store replayed up to that
    /// seq (the same query, the same index seeks); `missing` is printed (exit 1) when there is none.
    func answer(_ query: (Store) throws -> JSONValue?, missing: String) throws -> JSONValue {
        let store = try openForQuery(storeOptions.path)
        // From the projections, answers would name events the log does not hold (a replay `--at` reads
        // the log alone, and stops at its end).
        if at == nil, let problem = try store.projectionsPastLog() { throw CLIError(problem.message) }
        let baseCopy = try at.flatMap { seq in try base.map { try chooseBase($0, for: seq, of: storeOptions.path) } }
        defer { baseCopy?.store.close() }
        let scratch = try at.map { try replayed(store, $0, base: baseCopy) }
        defer { scratch?.remove() }
        guard let view = try query(scratch?.store ?? store) else {
            printErr("teamlog: \(missing)")
            throw ExitCode(1)
        }
        return view
    }
}

/// An id on the command line, checked as a line naming it would be (SPEC: non-empty UTF-8 of at most 128
/// bytes, no control characters; `serve` answers 400 `badId`): a usage error, exit 64. Before, an
/// argument that is not UTF-8 was answered as another id (Swift repairs such bytes to U+FFFD: `team $'\xff'`
/// printed team "\u{FFFD}"), an empty one as an LMDB error, a control byte printed raw in "no team …".
func validateIdArgument(_ value: String, _ what: String) throws {
    guard argumentIsValidUTF8(value) else {
        throw ValidationError("\(what) is not valid UTF-8 (badId): an id is its UTF-8 bytes")
    }
    if let problem = Ids.problem(value) { throw ValidationError("\(what) \(problem) (badId)") }
}

/// Whether the command-line argument Swift decoded to `value` was valid UTF-8 — Swift decodes `argv`
/// repairing invalid bytes to U+FFFD, so only an argument holding U+FFFD is looked up in the raw `argv`
/// (whole, or after the `=` of `--option=value`).
func argumentIsValidUTF8(_ value: String) -> Bool {
    guard value.unicodeScalars.contains("\u{FFFD}") else { return true }
    for i in 0..<Int(CommandLine.argc) {
        guard let raw = CommandLine.unsafeArgv[i] else { continue }
        let bytes = Array(UnsafeRawBufferPointer(start: raw, count: strlen(raw)))
        var candidates = [bytes[...]]
        if let equals = bytes.firstIndex(of: 0x3D) { candidates.append(bytes[(equals + 1)...]) }
        for candidate in candidates
        where String(validating: candidate, as: UTF8.self) == nil && String(decoding: candidate, as: UTF8.self) == value {
            return false
        }
    }
    return true
}

/// A seq on the command line is one a log can hold and `serve` takes: 1 … 2^63 - 1 (larger ones trapped
/// converting to `Int`; 0 answered as an empty store, which no seq names).
func validateSeq(_ seq: UInt64, _ option: String) throws {
    guard seq >= 1 && seq <= UInt64(Int64.max) else {
        throw ValidationError("\(option) must be a seq (an integer from 1 to 2^63 - 1), not \(seq)")
    }
}
