import ArgumentParser
import TeamLog
import TeamLogStore

/// `--max-team-members`, `--max-super-team-members`, `--members-sync-ms`: the settings a new store is
/// created with (SPEC §1.1, §1.3: "configurable"). An existing store keeps its own and refuses others.
struct SettingsOptions: ParsableArguments {
    @Option(help: "New store: most members of a team (default 2000).")
    var maxTeamMembers: Int?

    @Option(help: "New store: most members of a superTeam (default 200000).")
    var maxSuperTeamMembers: Int?

    @Option(help: "New store: members sync timeout in ms (default 120000).")
    var membersSyncMs: Int64?

    var request: ConfigRequest {
        ConfigRequest(
            teamMaxMembers: maxTeamMembers, superTeamMaxMembers: maxSuperTeamMembers,
            membersSyncTimeoutMs: membersSyncMs)
    }
}

/// How a writer (`ingest`, `serve`) runs its store: waiting for another writer, the checkpoint interval and
/// the working set's budget.
struct WriterOptions: ParsableArguments {
    @Flag(help: "Wait for another writer of the store to finish instead of failing.")
    var wait = false

    @Option(help: "Write the projections' checkpoint after this many ops (the log is durable at every commit).")
    var checkpointOps: Int = Store.Options().checkpointOps

    @Option(help: "Write the projections' checkpoint at the first commit this many ms after the last one.")
    var checkpointMs: Int = Store.Options().checkpointMs

    @Option(
        help:
            "The working set's budget in MiB: projections beyond it are evicted (clean ones, after each checkpoint) and loaded again when needed."
    )
    var cacheMb: Int = Store.defaultCacheBytes >> 20

    func validate() throws {
        guard checkpointOps > 0, checkpointMs >= 0 else {
            throw ValidationError("--checkpoint-ops must be positive and --checkpoint-ms not negative")
        }
        // 0 is no budget at all (every unit evicted at each checkpoint): a mistake more likely than a wish.
        guard cacheMb >= 1 else { throw ValidationError("--cache-mb must be at least 1 (MiB)") }
    }

    /// Checks the values and sets them on `options`, with the `recover` progress line of a writer's open.
    func apply(to options: inout Store.Options) throws {
        try validate()
        options.waitForWriter = wait
        options.checkpointOps = checkpointOps
        options.checkpointMs = checkpointMs
        options.cacheBytes = cacheMb << 20
        options.openReplayProgress = RecoveryProgress().update
    }
}

/// The progress line of an open that replays the log after the projections' checkpoint (after a crash),
/// labelled `recover`: drawn from the store's first call, erased at its last.
final class RecoveryProgress: @unchecked Sendable {
    // Called on the opening thread only (`Store.init`), before the command's own work starts.
    private var progress: Progress?

    func update(_ replayed: Int, _ total: Int) {
        if progress == nil { progress = Progress("recover", total: total, unit: .count("events")) }
        progress?.update(replayed)
        if replayed >= total {
            progress?.finish(at: replayed)
            progress = nil
        }
    }
}

/// `teamlog info`: the store's settings and where its log stands.
struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the store's settings (member limits, members sync timeout), format and last seq.")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let store = try openForQuery(storeOptions.path)
        let checkpoint = try store.head()
        let config = store.world.config
        // The settings shown would be the defaults: say the record cannot be trusted instead.
        if let damage = store.settingsDamage {
            throw CLIError("the settings record of store \(storeOptions.path) is damaged (it \(damage)): restore the store from a copy")
        }
        let header = store.env.header
        if json {
            let view = JSONValue.object([
                ("store", .string(storeOptions.path)), ("format", .int(Int64(Store.format))),
                ("seq", .int(Int64(checkpoint.seq))), ("ts", .int(checkpoint.ts)),
                ("maxTeamMembers", .int(Int64(config.teamMaxMembers))),
                ("maxSuperTeamMembers", .int(Int64(config.superTeamMaxMembers))),
                ("membersSyncMs", .int(config.membersSyncTimeoutMs)),
                ("dataFileBytes", .int(Int64(header?.fileSize ?? 0))),
            ])
            try printOut(view.jsonString)
            return
        }
        try printOut(
            """
            store                  \(storeOptions.path) (format \(Store.format))
            log                    seq \(checkpoint.seq), last event time \(checkpoint.ts)
            max team members       \(config.teamMaxMembers)
            max superTeam members  \(config.superTeamMaxMembers)
            members sync timeout   \(config.membersSyncTimeoutMs) ms
            data file              \(header.map { "\($0.fileSize) bytes, LMDB page size \($0.pageSize)" } ?? "-")
            """)
    }
}
