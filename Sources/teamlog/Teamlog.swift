import ArgumentParser

/// The `teamlog` command: parsing and printing only; the work is in `TeamLogStore` and `TeamLog`.
@main
struct Teamlog: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "teamlog",
        abstract: "An event-sourced processor for group chat: team ops and messages in, a replayable LMDB log out.",
        subcommands: [Ingest.self, Team.self, Unread.self, Receipts.self, Message.self, Channel.self, Log.self, Audit.self, Repair.self, Demo.self, DebugHoldReader.self]
    )
}

/// `--store PATH`, shared by every command.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "Store directory (default: $TEAMLOG_STORE or ./teamlog-store).")
    var store: String?

    var path: String { store ?? environment("TEAMLOG_STORE") ?? "./teamlog-store" }
}
