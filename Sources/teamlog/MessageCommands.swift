import ArgumentParser
import TeamLog
import TeamLogRuntime
import TeamLogStore

/// `teamlog unread USER [--json]`.
struct Unread: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A user's unread counts per conversation, and the total.")

    @OptionGroup var query: QueryOptions

    @Argument(help: "The user id.")
    var user: String

    func validate() throws { try validateIdArgument(user, "the user id") }

    func run() throws {
        let view = try query.answer(.unread, user) { try $0.unreadView(Id(user)) }
        if query.json { return try printOut(view.jsonString) }
        var lines = ["\(user): \(TeamTable.text(view["total"])) unread"]
        for c in view["conversations"]?.arrayValue ?? [] {
            let to = "\(TeamTable.text(c["to"]?["type"])):\(TeamTable.text(c["to"]?["id"]))"
            let last =
                c["lastMessage"].flatMap {
                    $0 == .null ? nil : "\(TeamTable.text($0["messageId"])) @\(TeamTable.text($0["seq"]))"
                } ?? "-"
            lines.append(
                "  \(to.padding(28))\(TeamTable.text(c["unread"]).padding(8))read to \(TeamTable.text(c["lastReadSeq"]).padding(10))last \(last)"
            )
        }
        try printOut(lines.joined(separator: "\n"))
    }
}

/// `teamlog receipts MESSAGE_ID [--json]`.
struct Receipts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read and unread receivers of a needReceipt team message.")

    @OptionGroup var query: QueryOptions

    @Argument(help: "The message id.")
    var messageId: String

    func validate() throws { try validateIdArgument(messageId, "the message id") }

    func run() throws {
        let view = try query.answer(.receipts, messageId) { try $0.receiptsView(Id(messageId)) }
        if query.json { return try printOut(view.jsonString) }
        let names = { (key: String) in (view[key]?.arrayValue ?? []).map { TeamTable.text($0) }.joined(separator: ", ")
        }
        try printOut(
            """
            \(messageId): \(TeamTable.text(view["read"])) read, \(TeamTable.text(view["unread"])) unread
              read:   \(names("readUsers"))
              unread: \(names("unreadUsers"))
            """)
    }
}

/// `teamlog message MESSAGE_ID`: a stored message as JSON.
struct Message: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A stored message or tip, by id (JSON).")

    /// `--json` is accepted like every other query's (the output is JSON either way), so scripts can
    /// always pass it; `--at SEQ [--base DIR]` as for the others (`/v1/messages/ID?at=SEQ` too).
    @OptionGroup var query: QueryOptions

    @Argument(help: "The message id.")
    var messageId: String

    func validate() throws { try validateIdArgument(messageId, "the message id") }

    func run() throws {
        try printOut(try query.answer(.message, messageId) { try $0.messageView(Id(messageId)) }.jsonString)
    }
}

/// `teamlog channel CHANNEL [--json]`.
struct Channel: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A signaling channel: members and pending invitations.")

    @OptionGroup var query: QueryOptions

    @Argument(help: "The channel id.")
    var channel: String

    func validate() throws { try validateIdArgument(channel, "the channel id") }

    func run() throws {
        let view = try query.answer(.channel, channel) { try $0.channelView(Id(channel)) }
        if query.json { return try printOut(view.jsonString) }
        let members = (view["members"]?.arrayValue ?? []).map { TeamTable.text($0) }.joined(separator: ", ")
        var lines = [
            "channel \(channel) (\(TeamTable.text(view["kind"])))\(view["closed"]?.boolValue == true ? " closed" : "")",
            "  members: \(members.isEmpty ? "-" : members)",
        ]
        for i in view["pendingInvites"]?.arrayValue ?? [] {
            lines.append(
                "  invited: \(TeamTable.text(i["target"])) by \(TeamTable.text(i["inviter"])) (\(TeamTable.text(i["requestId"])))"
            )
        }
        try printOut(lines.joined(separator: "\n"))
    }
}
