import TeamLog
import TestSupport
import Testing

/// Builders of message op lines (SPEC §1.2) shared by the message suites of this target.
enum Msg {
    static func conv(_ type: String, _ id: String) -> JSONValue {
        .object([("type", .string(type)), ("id", .string(id))])
    }
    static func team(_ id: String = "t1") -> JSONValue { conv("team", id) }
    static func superTeam(_ id: String) -> JSONValue { conv("superTeam", id) }
    static func p2p(_ peer: String) -> JSONValue { conv("p2p", peer) }
    static func content(_ type: String, _ text: String = "hi") -> JSONValue {
        .object([("type", .string(type)), ("text", .string(text))])
    }

    /// A `message.send` line with a text content unless `fields` gives one (`JSONValue.null` omits it).
    static func send(_ actor: String, _ id: String, to: JSONValue = team(), _ fields: KeyValuePairs<String, Any> = [:])
        -> String
    {
        var pairs: [(String, JSONValue)] = [
            ("op", .string("message.send")), ("actor", .string(actor)), ("to", to), ("messageId", .string(id)),
        ]
        let extra = fields.map { ($0.key, jsonValue($0.value)) }
        if !extra.contains(where: { $0.0 == "content" }) { pairs.append(("content", content("text"))) }
        pairs += extra.filter { $0.1 != .null }
        return JSONValue.object(pairs).jsonString
    }

    static func read(_ actor: String, to: JSONValue = team(), upTo: Int? = nil) -> String {
        if let upTo { return op("message.read", actor, ["to": to, "upTo": upTo]) }
        return op("message.read", actor, ["to": to])
    }

    static func receipt(_ actor: String, _ ids: [String], to: JSONValue = team()) -> String {
        op("message.receipt", actor, ["to": to, "messageIds": ids])
    }

    static func modify(_ actor: String, _ id: String, _ content: JSONValue = content("text", "edited")) -> String {
        op("message.modify", actor, ["messageId": id, "content": content])
    }

    static func login(_ user: String, _ device: String = "d1") -> String {
        op("client.login", user, ["device": device])
    }
    static func logout(_ user: String, _ device: String = "d1") -> String {
        op("client.logout", user, ["device": device])
    }
    static func notify(_ user: String, _ state: String, team: String = "t1") -> String {
        op("member.setNotify", user, ["team": team, "state": state])
    }
}

/// Everything `apply` can change, for "a rejected op changes nothing".
struct WorldSnapshot: Equatable {
    let teams: [Id: TeamState]
    let convs: [ConvKey: ConvState]
    let userConvs: ShardedDictionary<Id, UserConvs>
    let messages: ShardedDictionary<Id, StoredMessage>
    let receipts: ShardedDictionary<Id, ReceiptState>
    let presence: [Id: Presence]
    let lastSeq: UInt64
    let lastTs: Int64

    init(_ w: World) {
        teams = w.teams
        convs = w.convs
        userConvs = w.userConvs
        messages = w.messages
        receipts = w.receipts
        presence = w.presence
        lastSeq = w.lastSeq
        lastTs = w.lastTs
    }
}

/// One table per message op of SPEC §1.2 (send, read, receipt, modify): accepted and rejected cases with the
/// exact code; a rejected op leaves every projection as it was.
@Suite struct MessageRuleTests {
    static let withSuperTeam =
        baseTeam + [op("team.create", "own", ["team": "s1", "kind": "superTeam", "members": ["a"]])]
    static let dismissed = baseTeam + [op("team.dismiss", "own", ["team": "t1"])]
    static let mutedForever = baseTeam + [op("team.muteMember", "own", ["team": "t1", "target": "a", "muted": true])]
    /// `a` muted until 5 000 (the machine's clock is 1 000).
    static let mutedUntil =
        baseTeam + [op("team.muteMember", "mgr", ["team": "t1", "target": "a", "muted": true, "until": 5_000])]
    static let unmuted = mutedForever + [op("team.muteMember", "own", ["team": "t1", "target": "a", "muted": false])]
    static let teamMuted = baseTeam + [op("team.muteAll", "mgr", ["team": "t1", "muted": true])]
    static let createdMuted = [op("team.create", "own", ["team": "t1", "members": ["a"], "muted": true])]
    static let teamAndMemberMuted =
        teamMuted + [op("team.muteMember", "own", ["team": "t1", "target": "mgr", "muted": true])]
    static let left = baseTeam + [op("team.leave", "b", ["team": "t1"])]
    static let sent = baseTeam + [Msg.send("a", "m1")]

    static let send: [RuleCase] = [
        RuleCase("member sends text", baseTeam, Msg.send("a", "m1"), nil),
        RuleCase("owner sends", baseTeam, Msg.send("own", "m1"), nil),
        RuleCase(
            "superTeam member sends to the superTeam", withSuperTeam, Msg.send("a", "m1", to: Msg.superTeam("s1")), nil),
        RuleCase("non-member sends", baseTeam, Msg.send("zz", "m1"), .notMember),
        RuleCase("former member sends", left, Msg.send("b", "m1"), .notMember),
        RuleCase("send to an unknown team", baseTeam, Msg.send("a", "m1", to: Msg.team("nope")), .noSuchTeam),
        RuleCase(
            "superTeam conversation naming a team", baseTeam, Msg.send("a", "m1", to: Msg.superTeam("t1")), .noSuchTeam),
        RuleCase(
            "team conversation naming a superTeam", withSuperTeam, Msg.send("a", "m1", to: Msg.team("s1")), .noSuchTeam),
        RuleCase("send to a dismissed team", dismissed, Msg.send("a", "m1"), .dismissed),
        RuleCase("muted member with no end", mutedForever, Msg.send("a", "m1"), .muted),
        RuleCase("muted member before until", mutedUntil, Msg.send("a", "m1", ["ts": 4_999]), .muted),
        RuleCase("muted member at until", mutedUntil, Msg.send("a", "m1", ["ts": 5_000]), nil),
        RuleCase("muted member after until", mutedUntil, Msg.send("a", "m1", ["ts": 9_000]), nil),
        RuleCase("unmuted member", unmuted, Msg.send("a", "m1"), nil),
        RuleCase("another member of a team with a muted member", mutedForever, Msg.send("b", "m1"), nil),
        RuleCase("normal member of a muted team", teamMuted, Msg.send("a", "m1"), .teamMuted),
        RuleCase("owner of a muted team", teamMuted, Msg.send("own", "m1"), nil),
        RuleCase("manager of a muted team", teamMuted, Msg.send("mgr", "m1"), nil),
        RuleCase("team created muted", createdMuted, Msg.send("a", "m1"), .teamMuted),
        RuleCase("muted manager of a muted team: member mute first", teamAndMemberMuted, Msg.send("mgr", "m1"), .muted),
        RuleCase(
            "muted normal of a muted team: member mute first",
            teamMuted + [op("team.muteMember", "own", ["team": "t1", "target": "a", "muted": true])],
            Msg.send("a", "m1"), .muted),
        RuleCase(
            "unmuted team", teamMuted + [op("team.muteAll", "own", ["team": "t1", "muted": false])],
            Msg.send("a", "m1"), nil),
        RuleCase(
            "notification content", baseTeam, Msg.send("a", "m1", ["content": Msg.content("notification")]),
            .notPermitted),
        RuleCase("tip content", baseTeam, Msg.send("a", "m1", ["content": Msg.content("tip")]), .notPermitted),
        RuleCase("unknown content type", baseTeam, Msg.send("a", "m1", ["content": Msg.content("sticker")]), .badField),
        RuleCase(
            "content without a type", baseTeam,
            Msg.send("a", "m1", ["content": JSONValue.object([("text", .string("x"))])]), .missingField),
        RuleCase("content not an object", baseTeam, Msg.send("a", "m1", ["content": "hi"]), .badField),
        RuleCase("missing content", baseTeam, Msg.send("a", "m1", ["content": JSONValue.null]), .missingField),
        RuleCase(
            "missing messageId", baseTeam, op("message.send", "a", ["to": Msg.team(), "content": Msg.content("text")]),
            .missingField),
        RuleCase("empty messageId", baseTeam, Msg.send("a", ""), .badId),
        RuleCase(
            "missing to", baseTeam, op("message.send", "a", ["messageId": "m1", "content": Msg.content("text")]),
            .missingField),
        RuleCase("unknown conversation type", baseTeam, Msg.send("a", "m1", to: Msg.conv("group", "t1")), .badField),
        RuleCase("directed to members", baseTeam, Msg.send("a", "m1", ["directedUserIds": ["b", "own"]]), nil),
        RuleCase("directed to the sender alone", baseTeam, Msg.send("a", "m1", ["directedUserIds": ["a"]]), nil),
        RuleCase(
            "directed to a non-member", baseTeam, Msg.send("a", "m1", ["directedUserIds": ["b", "zz"]]), .notMember),
        RuleCase("directed to a former member", left, Msg.send("a", "m1", ["directedUserIds": ["b"]]), .notMember),
        RuleCase("directed to nobody", baseTeam, Msg.send("a", "m1", ["directedUserIds": [String]()]), .badField),
        RuleCase(
            "isCounted without isPersisted", baseTeam, Msg.send("a", "m1", ["isCounted": true, "isPersisted": false]),
            .badField),
        RuleCase("isCounted omitted, isPersisted false", baseTeam, Msg.send("a", "m1", ["isPersisted": false]), nil),
        RuleCase(
            "isCounted false, isPersisted false", baseTeam,
            Msg.send("a", "m1", ["isCounted": false, "isPersisted": false]), nil),
        RuleCase("isCounted false", baseTeam, Msg.send("a", "m1", ["isCounted": false]), nil),
        RuleCase("status message", baseTeam, Msg.send("a", "m1", ["isStatusMessage": true]), nil),
        RuleCase(
            "status message marked counted", baseTeam,
            Msg.send("a", "m1", ["isStatusMessage": true, "isCounted": true]), .badField),
        RuleCase(
            "status message marked not counted", baseTeam,
            Msg.send("a", "m1", ["isStatusMessage": true, "isCounted": false]), nil),
        RuleCase(
            "every flag at once", baseTeam,
            Msg.send(
                "a", "m1",
                [
                    "needReceipt": true, "disableNotification": true, "disableUpdateLastMessage": true,
                    "mentions": ["b"], "metadata": ["k": "v"] as KeyValuePairs<String, Any>,
                ]), nil),
        RuleCase("mentions of a non-member are ignored", baseTeam, Msg.send("a", "m1", ["mentions": ["zz"]]), nil),
        RuleCase(
            "metadata with a non-string value", baseTeam,
            Msg.send("a", "m1", ["metadata": ["k": 1] as KeyValuePairs<String, Any>]), .badField),
        RuleCase("flag that is not a bool", baseTeam, Msg.send("a", "m1", ["needReceipt": "yes"]), .badField),
        RuleCase("reused messageId", sent, Msg.send("b", "m1"), .duplicateMessageId),
        RuleCase(
            "reused messageId is checked first", sent, Msg.send("zz", "m1", to: Msg.team("nope")), .duplicateMessageId),
        RuleCase(
            "reused messageId with tip content", sent, Msg.send("a", "m1", ["content": Msg.content("tip")]),
            .duplicateMessageId),
        RuleCase(
            "reused messageId with notification content", sent,
            Msg.send("a", "m1", ["content": Msg.content("notification")]), .duplicateMessageId),
        RuleCase(
            "reused messageId with an unknown content type", sent,
            Msg.send("a", "m1", ["content": Msg.content("sticker")]), .duplicateMessageId),
        RuleCase(
            "reused messageId counted but not persisted", sent,
            Msg.send("a", "m1", ["isCounted": true, "isPersisted": false]), .duplicateMessageId),
        RuleCase(
            "reused messageId of a counted status message", sent,
            Msg.send("a", "m1", ["isCounted": true, "isStatusMessage": true]), .duplicateMessageId),
        RuleCase(
            "reused id of an unstored message", baseTeam + [Msg.send("a", "u1", ["isPersisted": false])],
            Msg.send("a", "u1"), .duplicateMessageId),
        RuleCase(
            "reused id of a status message", baseTeam + [Msg.send("a", "s1", ["isStatusMessage": true])],
            Msg.send("a", "s1"), .duplicateMessageId),
        RuleCase(
            "reused id of a p2p message", baseTeam + [Msg.send("a", "p1", to: Msg.p2p("b"))], Msg.send("a", "p1"),
            .duplicateMessageId),
        RuleCase("tip id", baseTeam, Msg.send("a", "tip-1"), .badId),
        RuleCase("second tip id", baseTeam, Msg.send("a", "tip-12.1"), .badId),
        RuleCase("unused tip id", baseTeam, Msg.send("a", "tip-999"), .badId),
        RuleCase("tip- prefix alone", baseTeam, Msg.send("a", "tip-"), nil),
        RuleCase("tip- with letters", baseTeam, Msg.send("a", "tip-5x"), nil),
        RuleCase("Tip- in another case", baseTeam, Msg.send("a", "Tip-5"), nil),
    ]

    static let p2p: [RuleCase] = [
        RuleCase("p2p message", [], Msg.send("a", "m1", to: Msg.p2p("b")), nil),
        RuleCase("p2p to oneself", [], Msg.send("a", "m1", to: Msg.p2p("a")), .badField),
        RuleCase(
            "p2p directed to the peer", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["directedUserIds": ["b"]]), nil),
        RuleCase(
            "p2p directed to the sender", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["directedUserIds": ["a"]]), nil),
        RuleCase(
            "p2p directed to both", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["directedUserIds": ["a", "b"]]), nil),
        RuleCase(
            "p2p directed to a third user", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["directedUserIds": ["b", "c"]]),
            .notMember),
        RuleCase(
            "p2p with a notification content", [],
            Msg.send("a", "m1", to: Msg.p2p("b"), ["content": Msg.content("notification")]), .notPermitted),
        RuleCase(
            "p2p counted but not persisted", [],
            Msg.send("a", "m1", to: Msg.p2p("b"), ["isCounted": true, "isPersisted": false]), .badField),
        RuleCase(
            "p2p status message marked counted", [],
            Msg.send("a", "m1", to: Msg.p2p("b"), ["isCounted": true, "isStatusMessage": true]), .badField),
        RuleCase("p2p reusing a team message id", sent, Msg.send("a", "m1", to: Msg.p2p("b")), .duplicateMessageId),
        RuleCase("p2p with a tip id", [], Msg.send("a", "tip-3", to: Msg.p2p("b")), .badId),
        RuleCase("p2p status message", [], Msg.send("a", "m1", to: Msg.p2p("b"), ["isStatusMessage": true]), nil),
    ]

    static let read: [RuleCase] = [
        RuleCase("member reads", sent, Msg.read("b"), nil),
        RuleCase("member reads up to a seq", sent, Msg.read("b", upTo: 2), nil),
        RuleCase("read past the newest", sent, Msg.read("b", upTo: 1_000), nil),
        RuleCase("read up to 0", sent, Msg.read("b", upTo: 0), nil),
        RuleCase("sender reads", sent, Msg.read("a"), nil),
        RuleCase("non-member reads", sent, Msg.read("zz"), .notMember),
        RuleCase("former member reads", left + [Msg.send("a", "m1")], Msg.read("b"), nil),
        RuleCase("read an unknown team", sent, Msg.read("b", to: Msg.team("nope")), .noSuchTeam),
        RuleCase("read a team as a superTeam", sent, Msg.read("b", to: Msg.superTeam("t1")), .noSuchTeam),
        RuleCase("read a superTeam", withSuperTeam, Msg.read("a", to: Msg.superTeam("s1")), nil),
        RuleCase("read a dismissed team (its former member)", dismissed, Msg.read("a"), nil),
        RuleCase("read a dismissed team never joined", dismissed, Msg.read("zz"), .notMember),
        RuleCase(
            "read a p2p conversation", [Msg.send("a", "m1", to: Msg.p2p("b"))], Msg.read("b", to: Msg.p2p("a")), nil),
        RuleCase("read an empty p2p conversation", [], Msg.read("b", to: Msg.p2p("a")), nil),
        RuleCase("read a p2p conversation with oneself", [], Msg.read("b", to: Msg.p2p("b")), .badField),
        RuleCase("negative upTo", sent, Msg.read("b", upTo: -1), .badField),
        RuleCase(
            "fractional upTo", sent, op("message.read", "b", ["to": Msg.team(), "upTo": JSONValue.double(1.5)]),
            .badField),
        RuleCase("string upTo", sent, op("message.read", "b", ["to": Msg.team(), "upTo": "3"]), .badField),
        RuleCase("read without to", sent, op("message.read", "b"), .missingField),
    ]

    /// Messages in `t1` from `a`: `m1` needs receipts, `m2` does not, `m3` needs receipts and is directed to `b`;
    /// `p1` a p2p message needing receipts, `np` unpersisted, `sm` a status message, `x2` in team `t2`.
    static let receiptSetup =
        baseTeam + [
            op("team.create", "own", ["team": "t2", "members": ["a", "b"]]),
            Msg.send("a", "m1", ["needReceipt": true]),
            Msg.send("a", "m2"),
            Msg.send("a", "m3", ["needReceipt": true, "directedUserIds": ["b"]]),
            Msg.send("a", "p1", to: Msg.p2p("b"), ["needReceipt": true]),
            Msg.send("a", "np", ["needReceipt": true, "isPersisted": false]),
            Msg.send("a", "sm", ["needReceipt": true, "isStatusMessage": true]),
            Msg.send("a", "x2", to: Msg.team("t2"), ["needReceipt": true]),
            op("team.invite", "own", ["team": "t1", "targets": ["late"]]),
        ]

    static let receipt: [RuleCase] = [
        RuleCase("receiver sends a receipt", receiptSetup, Msg.receipt("b", ["m1"]), nil),
        RuleCase("owner and manager receive too", receiptSetup, Msg.receipt("mgr", ["m1"]), nil),
        RuleCase("directed receiver", receiptSetup, Msg.receipt("b", ["m3", "m1"]), nil),
        RuleCase("repeated receipt", receiptSetup + [Msg.receipt("b", ["m1"])], Msg.receipt("b", ["m1"]), nil),
        RuleCase(
            "receiver who left since", receiptSetup + [op("team.leave", "b", ["team": "t1"])], Msg.receipt("b", ["m1"]),
            nil),
        RuleCase(
            "receiver who left and rejoined since",
            receiptSetup + [
                op("team.leave", "b", ["team": "t1"]), op("team.invite", "own", ["team": "t1", "targets": ["b"]]),
            ], Msg.receipt("b", ["m1"]), nil),
        RuleCase(
            "member who was in before, left, and rejoined after the message",
            baseTeam + [
                op("team.leave", "b", ["team": "t1"]), Msg.send("a", "m9", ["needReceipt": true]),
                op("team.invite", "own", ["team": "t1", "targets": ["b"]]),
            ], Msg.receipt("b", ["m9"]), .notPermitted),
        RuleCase("the sender", receiptSetup, Msg.receipt("a", ["m1"]), .notPermitted),
        RuleCase("message without needReceipt", receiptSetup, Msg.receipt("b", ["m2"]), .notPermitted),
        RuleCase("member outside the directed set", receiptSetup, Msg.receipt("mgr", ["m3"]), .notPermitted),
        RuleCase("member who joined after the message", receiptSetup, Msg.receipt("late", ["m1"]), .notPermitted),
        RuleCase("non-member", receiptSetup, Msg.receipt("zz", ["m1"]), .notPermitted),
        RuleCase("a tip", receiptSetup, Msg.receipt("a", ["tip-1"]), .notPermitted),
        RuleCase("unknown message", receiptSetup, Msg.receipt("b", ["nope"]), .noSuchMessage),
        RuleCase("message of another team", receiptSetup, Msg.receipt("b", ["x2"]), .noSuchMessage),
        RuleCase(
            "the other team's message in its own team", receiptSetup, Msg.receipt("b", ["x2"], to: Msg.team("t2")), nil),
        RuleCase("p2p message named in a team", receiptSetup, Msg.receipt("b", ["p1"]), .noSuchMessage),
        RuleCase("p2p conversation", receiptSetup, Msg.receipt("b", ["p1"], to: Msg.p2p("a")), .badField),
        RuleCase("unpersisted message", receiptSetup, Msg.receipt("b", ["np"]), .noSuchMessage),
        RuleCase("status message", receiptSetup, Msg.receipt("b", ["sm"]), .noSuchMessage),
        RuleCase("one bad id rejects the whole op", receiptSetup, Msg.receipt("b", ["m1", "m2"]), .notPermitted),
        RuleCase(
            "one unknown id rejects the whole op", receiptSetup, Msg.receipt("b", ["m1", "nope"]), .noSuchMessage),
        RuleCase("unknown team", receiptSetup, Msg.receipt("b", ["m1"], to: Msg.team("nope")), .noSuchTeam),
        RuleCase(
            "dismissed team", receiptSetup + [op("team.dismiss", "own", ["team": "t1"])], Msg.receipt("b", ["m1"]),
            .dismissed),
        RuleCase("no message ids", receiptSetup, Msg.receipt("b", []), .badField),
        RuleCase("missing message ids", receiptSetup, op("message.receipt", "b", ["to": Msg.team()]), .missingField),
    ]

    static let modifySetup =
        baseTeam + [
            Msg.send("a", "m1"),
            Msg.send("a", "np", ["isPersisted": false]),
            Msg.send("a", "sm", ["isStatusMessage": true]),
            Msg.send("a", "p1", to: Msg.p2p("b")),
        ]

    static let modify: [RuleCase] = [
        RuleCase("sender modifies", modifySetup, Msg.modify("a", "m1"), nil),
        RuleCase("sender modifies twice", modifySetup + [Msg.modify("a", "m1")], Msg.modify("a", "m1"), nil),
        RuleCase("sender modifies a p2p message", modifySetup, Msg.modify("a", "p1"), nil),
        RuleCase(
            "sender modifies after leaving", modifySetup + [op("team.leave", "a", ["team": "t1"])],
            Msg.modify("a", "m1"), nil),
        // SPEC §1.1: every later op on a dismissed team is `dismissed` but `message.read` (it was accepted).
        RuleCase(
            "the sender modifies after the team was dismissed",
            modifySetup + [op("team.dismiss", "own", ["team": "t1"])], Msg.modify("a", "m1"), .dismissed),
        RuleCase(
            "another modifies after the team was dismissed",
            modifySetup + [op("team.dismiss", "own", ["team": "t1"])], Msg.modify("b", "m1"), .dismissed),
        RuleCase(
            "a p2p message after a team of the sender's was dismissed",
            modifySetup + [op("team.dismiss", "own", ["team": "t1"])], Msg.modify("a", "p1"), nil),
        RuleCase("another member modifies", modifySetup, Msg.modify("b", "m1"), .notPermitted),
        RuleCase("the owner modifies a member's message", modifySetup, Msg.modify("own", "m1"), .notPermitted),
        RuleCase("the p2p peer modifies", modifySetup, Msg.modify("b", "p1"), .notPermitted),
        RuleCase("unknown message", modifySetup, Msg.modify("a", "nope"), .noSuchMessage),
        RuleCase("unpersisted message", modifySetup, Msg.modify("a", "np"), .noSuchMessage),
        RuleCase("status message", modifySetup, Msg.modify("a", "sm"), .noSuchMessage),
        RuleCase("a tip, by its actor", modifySetup, Msg.modify("own", "tip-1"), .notPermitted),
        RuleCase("a tip, by another", modifySetup, Msg.modify("a", "tip-2"), .notPermitted),
        RuleCase("tip content", modifySetup, Msg.modify("a", "m1", Msg.content("tip")), .notPermitted),
        RuleCase("unknown content type", modifySetup, Msg.modify("a", "m1", Msg.content("sticker")), .badField),
        RuleCase("missing content", modifySetup, op("message.modify", "a", ["messageId": "m1"]), .missingField),
    ]

    static let clients: [RuleCase] = [
        RuleCase("login", [], Msg.login("a"), nil),
        RuleCase("login without device", [], op("client.login", "a"), .missingField),
        RuleCase("logout", [Msg.login("a")], Msg.logout("a"), nil),
        RuleCase("logout without device", [Msg.login("a")], op("client.logout", "a"), .missingField),
    ]

    /// Runs a case (`RuleCase.check`).
    func check(_ c: RuleCase) throws { try c.check() }

    @Test(arguments: send) func messageSend(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: p2p) func messageSendP2P(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: read) func messageRead(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: receipt) func messageReceipt(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: modify) func messageModify(_ c: RuleCase) throws { try check(c) }
    @Test(arguments: clients) func clientLoginLogout(_ c: RuleCase) throws { try check(c) }

    /// Ids of the reserved form `tip-<digits>[.<digits>]` are `badId`; anything else is a client's to use.
    @Test(
        arguments: [
            ("tip-1", true), ("tip-0", true), ("tip-12.1", true), ("tip-99999999999999999999", true),
            ("tip-", false), ("tip-a", false), ("tip-1a", false), ("tip1", false), ("xtip-1", false), ("TIP-1", false),
        ] as [(String, Bool)])
    func reservedTipIds(_ id: String, _ reserved: Bool) { checkTipId(id, reserved) }

    /// Dots that do not make `tip-<digits>.<digits>` are not the reserved form either (the brief's
    /// `tip-<digits>[.<digits>]`); `Ids.isReservedTipId` accepts any mix of digits and dots.
    @Test(arguments: ["tip-1.", "tip-.1", "tip-.", "tip-1.2.3", "tip-1..2"])
    func dottedIdsOutsideTheTipFormAreFree(_ id: String) { checkTipId(id, false) }

    func checkTipId(_ id: String, _ reserved: Bool) {
        var m = Machine()
        m.setup(baseTeam)
        let result = m.run(Msg.send("a", id))
        #expect(result?.code == (reserved ? .badId : nil), "\(id): \(result.map { "\($0)" } ?? "accepted")")
    }

    // MARK: Effects of accepted ops

    @Test func modifySetsChangeInfoAndNothingElse() throws {
        var m = Machine()
        m.setup(baseTeam + [Msg.send("a", "m1", ["needReceipt": true]), Msg.send("b", "m2", ["ts": 2_000])])
        let before = WorldSnapshot(m.world)
        let unreadBefore = ["own", "mgr", "a", "b"].map { m.unread($0, ConvKey(team: "t1", kind: .team)) }
        #expect(
            m.run(op("message.modify", "a", ["messageId": "m1", "content": Msg.content("image", "new"), "ts": 7_000]))
                == nil)
        #expect(m.deliveries.isEmpty, "modify produces no delivery")
        #expect(m.outputs.isEmpty, "modify produces no output at all")
        let msg = try #require(m.world.messages["m1"])
        #expect(msg.hasChanged)
        #expect(msg.modifiedBy == "a")
        #expect(msg.modifiedTs == 7_000)
        #expect(msg.content == Msg.content("image", "new"))
        #expect(msg.seq == before.messages["m1"]?.seq)
        #expect(m.world.convs == before.convs, "no last-message or counting change")
        #expect(m.world.userConvs == before.userConvs)
        #expect(m.world.receipts == before.receipts)
        #expect(m.world.messages["m2"] == before.messages["m2"])
        let unreadAfter = ["own", "mgr", "a", "b"].map { m.unread($0, ConvKey(team: "t1", kind: .team)) }
        #expect(unreadAfter == unreadBefore)
    }

    @Test func repeatedReceiptCountsOnce() throws {
        var m = Machine()
        m.setup(Self.receiptSetup)
        #expect(m.run(Msg.receipt("b", ["m1"])) == nil)
        #expect(m.run(Msg.receipt("own", ["m1"])) == nil)
        #expect(m.run(Msg.receipt("b", ["m1"])) == nil)
        let tally = try #require(m.world.receipts["m1"])
        #expect(tally.receiverCount == 3 && tally.directedReceivers == nil, "a broadcast stores its count only")
        #expect(tally.readersInOrder == ["b", "own"] && tally.readCount == 2)
        #expect(tally.unreadCount == 1)
        let sent = try #require(m.world.messages["m1"])
        #expect(
            m.world.teams["t1"]?.members(at: sent.seq).filter { $0 != sent.sender } == ["own", "mgr", "b"],
            "its receivers: the roster at its seq but the sender, in slot order")
        #expect(m.world.receipts["m3"]?.directedReceivers == ["b"])
        #expect(m.world.receipts["m3"]?.receiverCount == 1)
    }

    @Test func readPositionDefaultsToNewestAndNeverMovesBack() {
        var m = Machine()
        m.setup(baseTeam + [Msg.send("a", "m1"), Msg.send("a", "m2"), Msg.send("a", "m3")])
        let key = ConvKey(team: "t1", kind: .team)
        // seqs: 1 create, 2 addManagers, 3–5 the messages.
        #expect(m.unread("b", key) == 3)
        #expect(m.run(Msg.read("b", upTo: 4)) == nil)
        #expect(m.world.userConvs["b"]?[key]?.readSeq == 4)
        #expect(m.unread("b", key) == 1)
        #expect(m.run(Msg.read("b", upTo: 3)) == nil)
        #expect(m.world.userConvs["b"]?[key]?.readSeq == 4, "a read position never moves backwards")
        #expect(m.unread("b", key) == 1)
        #expect(m.run(Msg.read("b")) == nil)  // seq 8: default = newest, the seq before the read
        #expect(m.world.userConvs["b"]?[key]?.readSeq == 7)
        #expect(m.unread("b", key) == 0)
        #expect(m.run(Msg.read("mgr", upTo: 1_000)) == nil)  // seq 9: clamped to 8
        #expect(m.world.userConvs["mgr"]?[key]?.readSeq == 8)
        #expect(m.unread("a", key) == 0, "a sender never counts their own messages")
    }

    @Test func unpersistedAndStatusMessagesNeverCount() throws {
        var m = Machine()
        m.setup(baseTeam + [Msg.login("b")])
        let key = ConvKey(team: "t1", kind: .team)
        #expect(m.run(Msg.send("a", "u1", ["isPersisted": false])) == nil)
        #expect(m.run(Msg.send("a", "u2", ["isPersisted": false, "isCounted": false])) == nil)
        #expect(m.run(Msg.send("a", "s1", ["isStatusMessage": true])) == nil)
        #expect(m.deliveries.first?.receivers == ["b"], "the status message reached the online member")
        #expect(m.run(Msg.send("a", "c0", ["isCounted": false])) == nil)
        #expect(m.unread("b", key) == 0)
        #expect(m.unread("own", key) == 0)
        #expect(m.world.messages["u1"]?.stored == false)
        #expect(m.world.messages["s1"]?.stored == false)
        #expect(m.world.messages["c0"]?.stored == true)
        #expect(m.world.lastMessage("b", key)?.messageId == "c0", "unstored messages never become the last message")
        #expect(m.run(Msg.send("a", "c1")) == nil)
        #expect(m.unread("b", key) == 1)
    }

    @Test func needReceiptStartsWithEveryReceiverUnread() throws {
        var m = Machine()
        m.setup(baseTeam)
        #expect(m.run(Msg.send("mgr", "r1", ["needReceipt": true])) == nil)
        let tally = try #require(m.world.receipts["r1"])
        #expect(tally.receiverCount == m.deliveries.first?.receivers.count)
        #expect(tally.readCount == 0 && tally.readers.isEmpty)
        #expect(tally.unreadCount == 3)
        let roster = m.world.teams["t1"]?.members(at: m.world.lastSeq)
        #expect(roster?.filter { $0 != "mgr" } == m.deliveries.first?.receivers)
        #expect(m.run(Msg.send("mgr", "r2", to: Msg.p2p("a"), ["needReceipt": true])) == nil)
        #expect(m.world.receipts["r2"] == nil, "receipts are for team messages")
        #expect(m.run(Msg.send("mgr", "r3", ["needReceipt": true, "isPersisted": false])) == nil)
        #expect(m.world.receipts["r3"] == nil, "an unstored message has no tally")
    }
}
