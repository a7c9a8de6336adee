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
