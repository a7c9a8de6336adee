import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

/// Builders of message op lines (SPEC §1.2) shared by the message suites of this target.
enum Msg {
    static func conv(_ type: String, _ id: String) -> JSONValue {
        .object([("type", .string(type)), ("id", .string(id))])
    }
    static func team(_ id: String = "t1") -> JSONValue { conv("team", id) }
    static func p2p(_ peer: String) -> JSONValue { conv("p2p", peer) }
    static func content(_ type: String = "text", _ text: String = "hi") -> JSONValue {
        .object([("type", .string(type)), ("text", .string(text))])
    }

    /// A `message.send` line with a text content unless `fields` gives one.
    static func send(_ actor: String, _ id: String, to: JSONValue = team(), _ fields: KeyValuePairs<String, Any> = [:])
        -> String
    {
        var pairs: [(String, JSONValue)] = [
            ("op", .string("message.send")), ("actor", .string(actor)), ("to", to), ("messageId", .string(id)),
        ]
        let extra = fields.map { ($0.key, jsonValue($0.value)) }
        if !extra.contains(where: { $0.0 == "content" }) { pairs.append(("content", content())) }
        return JSONValue.object(pairs + extra).jsonString
    }

    static func read(_ actor: String, to: JSONValue = team(), upTo: Int? = nil) -> String {
        if let upTo { return op("message.read", actor, ["to": to, "upTo": upTo]) }
        return op("message.read", actor, ["to": to])
    }

    static func receipt(_ actor: String, _ ids: [String], to: JSONValue = team()) -> String {
        op("message.receipt", actor, ["to": to, "messageIds": ids])
    }
}

/// The message queries of SPEC §5 answered from LMDB (`unread`, `receipts`, `message`), the `delivery`
/// record of §4, and the unread/last-message rules they show: p2p sides, leaving, rejoining, reading.
@Suite struct MessageQueryTests {
    /// The unread view counted the slow way: every stored index entry read and counted when its seq is in
    /// (max(read, join), leave] of the user's conversation (read positions, joins and last messages from
    /// the writer's state). The query must get the same from its seeks on the entries' ordinals.
    static func scannedUnread(_ h: StoreHarness, _ user: Id) throws -> JSONValue {
        let stored = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }
        var entries: [(table: ProjectionTable, conv: ConvKey, user: Id?, seq: UInt64)] = []
        for table in [ProjectionTable.counted, .own, .directed] {
            for (key, _) in stored[table] ?? [] {
                switch key.withUnsafeBytes({ ProjectionCodec.key(table, $0) }) {
                case .counted(let conv, let seq, _)?: entries.append((table, conv, nil, seq))
                case .own(let conv, let u, let seq, _)?, .directed(let conv, let u, let seq, _)?:
                    entries.append((table, conv, u, seq))
                default: Issue.record("\(table): unreadable key \(key)")
                }
            }
        }
        let world = try h.store.loadAllProjections()
        let rows = (world.userConvs[user] ?? [:]).map { key, uc in
            let base = max(uc.readSeq, uc.joinSeq)
            let end = uc.leaveSeq ?? UInt64.max
            func count(_ table: ProjectionTable, _ who: Id?) -> Int {
                entries.filter { e in
                    e.table == table && e.conv == key && e.user == who && e.seq > base && e.seq <= end
                }.count
            }
            let unread = count(.counted, nil) - count(.own, user) + count(.directed, user)
            return (key: key, unread: unread, readSeq: uc.readSeq, last: world.lastMessage(user, key))
        }
        return World.unreadJSON(user: user, rows: rows)
    }

    /// `unreadView` must equal the count by a full scan of the indexes, and the same query on a scratch
    /// store replayed up to the same seq (what `--at` answers from), before and after a reopen.
    static func checkUnread(_ h: StoreHarness, _ users: [Id]) throws {
        let scratch = try h.store.replayIntoScratch()
        defer { scratch.remove() }
        #expect(scratch.problem == nil && UInt64(scratch.events) == h.store.world.lastSeq)
        for user in users {
            let view = try h.store.unreadView(user)
            #expect(view == (try scannedUnread(h, user)), "\(user): \(view.jsonString)")
            #expect(view == (try scratch.store.unreadView(user)), "\(user): live vs replayed")
        }
    }

    static func unread(_ h: StoreHarness, _ user: Id) throws -> String { try h.store.unreadView(user).jsonString }

    // MARK: Shapes

    @Test func unreadReceiptsAndMessageShapes() throws {
        let h = try StoreHarness()
        h.now = 0  // ops without ts take the last event's time
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b"], "ts": 100]),  // 1
            Msg.send("a", "m1", ["needReceipt": true, "ts": 200]),  // 2
            Msg.send("a", "m2", ["ts": 300, "metadata": ["k": "v"] as KeyValuePairs<String, Any>]),  // 3
            Msg.read("b", upTo: 2),  // 4
            Msg.receipt("b", ["m1"]),  // 5
        ])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":1,"conversations":[{"to":{"type":"team","id":"t1"},"unread":1,"lastReadSeq":2,"lastMessage":{"seq":3,"messageId":"m2"}}]}"#
        )
        #expect(
            try Self.unread(h, "own")
                == #"{"user":"own","total":2,"conversations":[{"to":{"type":"team","id":"t1"},"unread":2,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"m2"}}]}"#
        )
        #expect(
            try Self.unread(h, "a")
                == #"{"user":"a","total":0,"conversations":[{"to":{"type":"team","id":"t1"},"unread":0,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"m2"}}]}"#
        )
        #expect(try Self.unread(h, "nobody") == #"{"user":"nobody","total":0,"conversations":[]}"#)

        #expect(
            try h.store.receiptsView("m1")?.jsonString
                == #"{"messageId":"m1","read":1,"unread":1,"readUsers":["b"],"unreadUsers":["own"]}"#)
        #expect(try h.store.receiptsView("m2") == nil, "no needReceipt, no tally")
        #expect(try h.store.receiptsView("nope") == nil)
        #expect(try h.store.receiptsView("tip-1") == nil)

        #expect(
            try h.store.messageView("m1")?.jsonString
                == #"{"messageId":"m1","seq":2,"ts":200,"to":{"type":"team","id":"t1"},"sender":"a","kind":"message","stored":true,"content":{"type":"text","text":"hi"},"needReceipt":true,"directedUserIds":null,"hasChanged":false,"modifyInfo":null}"#
        )
        #expect(
            try h.store.messageView("tip-1")?.jsonString
                == #"{"messageId":"tip-1","seq":1,"ts":100,"to":{"type":"team","id":"t1"},"sender":"own","kind":"tip","stored":true,"content":{"type":"tip","text":"own created t1"},"needReceipt":false,"directedUserIds":null,"hasChanged":false,"modifyInfo":null}"#
        )
        #expect(try h.store.messageView("nope") == nil)

        try h.feed([
            op("message.modify", "a", ["messageId": "m2", "content": Msg.content("text", "fixed"), "ts": 900]),  // 6
            Msg.send("a", "u1", ["isPersisted": false, "ts": 950]),  // 7
            Msg.send("a", "d1", ["directedUserIds": ["b"], "ts": 960]),  // 8
        ])
        #expect(
            try h.store.messageView("m2")?.jsonString
                == #"{"messageId":"m2","seq":3,"ts":300,"to":{"type":"team","id":"t1"},"sender":"a","kind":"message","stored":true,"content":{"type":"text","text":"fixed"},"needReceipt":false,"directedUserIds":null,"hasChanged":true,"modifyInfo":{"by":"a","ts":900}}"#
        )
        #expect(
            try h.store.messageView("u1")?.jsonString
                == #"{"messageId":"u1","seq":7,"ts":950,"to":{"type":"team","id":"t1"},"sender":"a","kind":"message","stored":false}"#
        )
        #expect(try h.store.messageView("d1")?["directedUserIds"] == .array([.string("b")]))
        try h.reopen()
        #expect(
            try h.store.receiptsView("m1")?.jsonString
                == #"{"messageId":"m1","read":1,"unread":1,"readUsers":["b"],"unreadUsers":["own"]}"#)
        #expect(try h.store.messageView("m2")?["hasChanged"] == .bool(true))
        try Self.checkUnread(h, ["own", "a", "b"])
    }

    @Test func deliveryRecordShape() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["mgr", "a", "b"]]),
            op("team.addManagers", "own", ["team": "t1", "targets": ["mgr"]]),
            op("member.setNotify", "b", ["team": "t1", "state": "none"]),
            op("member.setNotify", "mgr", ["team": "t1", "state": "managerOnly"]),
        ])
        let records = try h.feed(Msg.send("a", "m1"))
        #expect(
            records.map { $0.jsonString } == [
                #"{"kind":"event","line":5,"seq":5,"ts":1000000,"op":"message.send"}"#,
                #"{"kind":"delivery","seq":5,"to":{"type":"team","id":"t1"},"messageId":"m1","receivers":["own","mgr","b"],"alerted":["own"],"silenced":{"mgr":"managerOnly","b":"notifyNone"}}"#,
            ])
        let plain = try h.feed(Msg.send("own", "m2"))
        #expect(
            plain.last?.jsonString
                == #"{"kind":"delivery","seq":6,"to":{"type":"team","id":"t1"},"messageId":"m2","receivers":["mgr","a","b"],"alerted":["mgr","a"],"silenced":{"b":"notifyNone"}}"#
        )
        let p2p = try h.feed(Msg.send("a", "p1", to: Msg.p2p("b")))
        #expect(
            p2p.last?.jsonString
                == #"{"kind":"delivery","seq":7,"to":{"type":"p2p","id":"b"},"messageId":"p1","receivers":["b"],"alerted":["b"],"silenced":{}}"#
        )
        let tip = try h.feed(op("team.kick", "own", ["team": "t1", "targets": ["b"]]))
        #expect(
            tip.last?.jsonString
                == #"{"kind":"delivery","seq":8,"to":{"type":"team","id":"t1"},"messageId":"tip-8","receivers":["own","mgr","a","b"],"alerted":[],"silenced":{"own":"tip","mgr":"tip","a":"tip","b":"tip"}}"#
        )
        let status = try h.feed(Msg.send("a", "s1", ["isStatusMessage": true]))
        #expect(
            status.last?.jsonString
                == #"{"kind":"delivery","seq":9,"to":{"type":"team","id":"t1"},"messageId":"s1","receivers":[],"alerted":[],"silenced":{}}"#
        )
    }

    // MARK: Unread and last message

    @Test func p2pBothSidesShareOneConversation() throws {
        let h = try StoreHarness()
        try h.feed([
            Msg.send("a", "p1", to: Msg.p2p("b")),  // 1
            Msg.send("a", "p2", to: Msg.p2p("b")),  // 2
            Msg.send("b", "p3", to: Msg.p2p("a")),  // 3
        ])
        #expect(
            try Self.unread(h, "a")
                == #"{"user":"a","total":1,"conversations":[{"to":{"type":"p2p","id":"b"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"p3"}}]}"#
        )
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":2,"conversations":[{"to":{"type":"p2p","id":"a"},"unread":2,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"p3"}}]}"#
        )
        try h.feed([Msg.read("b", to: Msg.p2p("a"), upTo: 1)])  // 4
        #expect(try h.store.unreadView("b")["conversations"]?.arrayValue?.first?["unread"] == .int(1))
        try h.feed([Msg.send("a", "p4", to: Msg.p2p("b"), ["disableUpdateLastMessage": true, "isCounted": false])])  // 5
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":1,"conversations":[{"to":{"type":"p2p","id":"a"},"unread":1,"lastReadSeq":1,"lastMessage":{"seq":3,"messageId":"p3"}}]}"#
        )
        try h.feed([Msg.read("a", to: Msg.p2p("b"))])  // 6
        #expect(
            try Self.unread(h, "a")
                == #"{"user":"a","total":0,"conversations":[{"to":{"type":"p2p","id":"b"},"unread":0,"lastReadSeq":5,"lastMessage":{"seq":3,"messageId":"p3"}}]}"#
        )
        try Self.checkUnread(h, ["a", "b"])
        try h.reopen()
        try Self.checkUnread(h, ["a", "b"])
    }

    @Test func leaverKeepsFrozenUnreadAndRejoinStartsAfresh() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b"]]),  // 1
            Msg.send("a", "m1"),  // 2
            Msg.send("a", "m2"),  // 3
            op("team.kick", "own", ["team": "t1", "targets": ["b"]]),  // 4
            Msg.send("a", "m3"),  // 5
        ])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":2,"conversations":[{"to":{"type":"team","id":"t1"},"unread":2,"lastReadSeq":0,"lastMessage":{"seq":4,"messageId":"tip-4"}}]}"#
        )
        #expect(
            try Self.unread(h, "own")
                == #"{"user":"own","total":3,"conversations":[{"to":{"type":"team","id":"t1"},"unread":3,"lastReadSeq":0,"lastMessage":{"seq":5,"messageId":"m3"}}]}"#
        )
        try h.reopen()
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":2,"conversations":[{"to":{"type":"team","id":"t1"},"unread":2,"lastReadSeq":0,"lastMessage":{"seq":4,"messageId":"tip-4"}}]}"#
        )
        try h.feed([
            op("team.invite", "own", ["team": "t1", "targets": ["b"]]),  // 6: b rejoins
            Msg.send("a", "m4"),  // 7
        ])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":1,"conversations":[{"to":{"type":"team","id":"t1"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":7,"messageId":"m4"}}]}"#
        )
        try h.feed([op("team.leave", "b", ["team": "t1"])])  // 8
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":1,"conversations":[{"to":{"type":"team","id":"t1"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":8,"messageId":"tip-8"}}]}"#
        )
        // A former member may still clear the frozen count.
        try h.feed([Msg.read("b")])  // 9
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":0,"conversations":[{"to":{"type":"team","id":"t1"},"unread":0,"lastReadSeq":8,"lastMessage":{"seq":8,"messageId":"tip-8"}}]}"#
        )
        try Self.checkUnread(h, ["own", "a", "b"])
    }

    @Test func dismissFreezesEveryMemberAtTheDismissTip() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b"]]),  // 1
            Msg.send("a", "m1"),  // 2
            op("team.dismiss", "own", ["team": "t1"]),  // 3
        ])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":1,"conversations":[{"to":{"type":"team","id":"t1"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"tip-3"}}]}"#
        )
        #expect(
            try Self.unread(h, "own")
                == #"{"user":"own","total":1,"conversations":[{"to":{"type":"team","id":"t1"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"tip-3"}}]}"#
        )
        try Self.checkUnread(h, ["own", "a", "b"])
    }

    @Test func transferAndLeaveEndsAtTheLeaveTip() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b"]]),  // 1
            Msg.send("a", "m1"),  // 2
            op("team.transferOwner", "own", ["team": "t1", "target": "a", "leave": true]),  // 3: tip-3, tip-3.1
            Msg.send("a", "m2"),  // 4
        ])
        #expect(
            try Self.unread(h, "own")
                == #"{"user":"own","total":1,"conversations":[{"to":{"type":"team","id":"t1"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":3,"messageId":"tip-3.1"}}]}"#
        )
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":2,"conversations":[{"to":{"type":"team","id":"t1"},"unread":2,"lastReadSeq":0,"lastMessage":{"seq":4,"messageId":"m2"}}]}"#
        )
        try Self.checkUnread(h, ["own", "a", "b"])
    }

    @Test func disableUpdateLastMessageKeepsThePreviousLast() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b"]]),  // 1
            Msg.send("a", "m1"),  // 2
            Msg.send("a", "m2", ["disableUpdateLastMessage": true]),  // 3
            Msg.send("a", "m3", ["directedUserIds": ["b"], "disableUpdateLastMessage": true]),  // 4
        ])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":3,"conversations":[{"to":{"type":"team","id":"t1"},"unread":3,"lastReadSeq":0,"lastMessage":{"seq":2,"messageId":"m1"}}]}"#
        )
        #expect(
            try Self.unread(h, "a")
                == #"{"user":"a","total":0,"conversations":[{"to":{"type":"team","id":"t1"},"unread":0,"lastReadSeq":0,"lastMessage":{"seq":2,"messageId":"m1"}}]}"#
        )
        try h.feed(op("team.update", "own", ["team": "t1", "fields": ["intro": "x"] as KeyValuePairs<String, Any>]))  // 5
        #expect(
            try h.store.unreadView("b")["conversations"]?.arrayValue?.first?["lastMessage"]?["messageId"]
                == .string("tip-5"))
        try Self.checkUnread(h, ["own", "a", "b"])
    }

    /// A p2p message directed to its sender alone reaches nobody: the peer got a conversation with no
    /// message in it (`"lastMessage":null`, outside SPEC §5's shape). It gets one with the first message it
    /// receives.
    @Test func aP2PMessageTheSenderAloneGetsGivesThePeerNoConversation() throws {
        let h = try StoreHarness()
        try h.feed([
            Msg.send("x", "p1", to: Msg.p2p("y"), ["directedUserIds": ["x"]]),  // 1
        ])
        #expect(try Self.unread(h, "y") == #"{"user":"y","total":0,"conversations":[]}"#)
        #expect(
            try Self.unread(h, "x")
                == #"{"user":"x","total":0,"conversations":[{"to":{"type":"p2p","id":"y"},"unread":0,"lastReadSeq":0,"lastMessage":{"seq":1,"messageId":"p1"}}]}"#
        )
        try h.feed(Msg.send("x", "p2", to: Msg.p2p("y")))  // 2
        #expect(
            try Self.unread(h, "y")
                == #"{"user":"y","total":1,"conversations":[{"to":{"type":"p2p","id":"x"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":2,"messageId":"p2"}}]}"#
        )
        try Self.checkUnread(h, ["x", "y"])
        #expect(try h.store.audit().ok)
    }

    @Test func directedLastMessageOnlyForReceiversAndSender() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b", "c"]]),  // 1
            Msg.send("a", "m1"),  // 2
            Msg.send("a", "d1", ["directedUserIds": ["b"]]),  // 3
        ])
        func last(_ user: Id) throws -> String? {
            try h.store.unreadView(user)["conversations"]?.arrayValue?.first?["lastMessage"]?["messageId"]?.stringValue
        }
        func count(_ user: Id) throws -> Int64? { try h.store.unreadView(user)["total"]?.intValue }
        #expect(try last("b") == "d1")
        #expect(try last("a") == "d1", "the sender sees their directed message")
        #expect(try last("own") == "m1")
        #expect(try last("c") == "m1")
        #expect(try count("b") == 2)
        #expect(try count("c") == 1)
        #expect(try count("own") == 1)
        try h.feed(Msg.send("c", "m2"))  // 4
        for u: Id in ["own", "a", "b", "c"] { #expect(try last(u) == "m2", "\(u)") }
        try h.feed(Msg.send("own", "d2", ["directedUserIds": ["own", "c"]]))  // 5: to the sender and c
        #expect(try last("c") == "d2")
        #expect(try last("own") == "d2")
        #expect(try last("a") == "m2")
        #expect(try count("c") == 2, "c: m1 and d2")
        try Self.checkUnread(h, ["own", "a", "b", "c"])
        try h.reopen()
        try Self.checkUnread(h, ["own", "a", "b", "c"])
    }

    /// A p2p message directed to its sender alone is not seen by the peer: it must not become the peer's
    /// last message (brief: "directed ones only for receivers and the sender").
    @Test func p2pMessageDirectedToTheSenderIsNotThePeersLast() throws {
        let h = try StoreHarness()
        try h.feed([
            Msg.send("a", "p1", to: Msg.p2p("b")),  // 1
            Msg.send("a", "p2", to: Msg.p2p("b"), ["directedUserIds": ["a"]]),  // 2
        ])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":1,"conversations":[{"to":{"type":"p2p","id":"a"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":1,"messageId":"p1"}}]}"#
        )
        #expect(
            try h.store.unreadView("a")["conversations"]?.arrayValue?.first?["lastMessage"]?["messageId"]
                == .string("p2"))
    }

    @Test func readUpToTheMiddleAndDefaultNewest() throws {
        let h = try StoreHarness()
        try h.feed([op("team.create", "own", ["team": "t1", "kind": "superTeam", "members": ["a", "b"]])])  // 1
        try h.feed((2...6).map { Msg.send("a", "m\($0)", to: Msg.conv("superTeam", "t1")) })  // 2–6
        let to = Msg.conv("superTeam", "t1")
        try h.feed(Msg.read("b", to: to, upTo: 4))  // 7
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":2,"conversations":[{"to":{"type":"superTeam","id":"t1"},"unread":2,"lastReadSeq":4,"lastMessage":{"seq":6,"messageId":"m6"}}]}"#
        )
        try h.feed(Msg.read("b", to: to, upTo: 2))  // 8: never backwards
        #expect(try h.store.unreadView("b")["conversations"]?.arrayValue?.first?["lastReadSeq"] == .int(4))
        try h.feed(Msg.read("own", to: to, upTo: 500))  // 9: clamped to the newest
        #expect(
            try Self.unread(h, "own")
                == #"{"user":"own","total":0,"conversations":[{"to":{"type":"superTeam","id":"t1"},"unread":0,"lastReadSeq":8,"lastMessage":{"seq":6,"messageId":"m6"}}]}"#
        )
        try h.feed(Msg.read("b", to: to))  // 10: default = newest = 9
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":0,"conversations":[{"to":{"type":"superTeam","id":"t1"},"unread":0,"lastReadSeq":9,"lastMessage":{"seq":6,"messageId":"m6"}}]}"#
        )
        try h.feed(Msg.send("a", "m11", to: to))  // 11
        #expect(try h.store.unreadView("b")["total"] == .int(1))
        try Self.checkUnread(h, ["own", "a", "b"])
    }

    @Test func conversationsMostRecentFirst() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["b"]]),  // 1
            op("team.create", "own", ["team": "t2", "members": ["b"]]),  // 2
            Msg.send("own", "x1"),  // 3
            Msg.send("c", "p1", to: Msg.p2p("b")),  // 4
            Msg.send("own", "x2", to: Msg.team("t2")),  // 5
            Msg.read("b", to: Msg.p2p("z")),  // 6: a p2p conversation with no stored message: none is made
        ])
        let rows = try #require(try h.store.unreadView("b")["conversations"]?.arrayValue)
        #expect(
            rows.map { $0["to"]?.jsonString ?? "" } == [
                #"{"type":"team","id":"t2"}"#, #"{"type":"p2p","id":"c"}"#, #"{"type":"team","id":"t1"}"#,
            ])
        #expect(rows.allSatisfy { $0["lastMessage"] != .null })
        #expect(try h.store.unreadView("b")["total"] == .int(3))
        try Self.checkUnread(h, ["own", "b", "c", "z"])
    }

    /// SPEC §1.1: reading is the reader's own position, not an op on the team, so a member of a dismissed
    /// team can still clear the unread frozen at the dismissal (issue 10 §6).
    @Test func aDismissedTeamsUnreadCanBeCleared() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["b"]]),  // 1
            Msg.send("own", "m1"),  // 2
            op("team.dismiss", "own", ["team": "t1"]),  // 3
        ])
        #expect(try h.store.unreadView("b")["total"] == .int(1))
        let read = try h.feed(Msg.read("b"))  // 4
        #expect(read.map { $0["kind"]?.stringValue } == ["event"])
        #expect(
            try Self.unread(h, "b")
                == #"{"user":"b","total":0,"conversations":[{"to":{"type":"team","id":"t1"},"unread":0,"lastReadSeq":3,"lastMessage":{"seq":3,"messageId":"tip-3"}}]}"#
        )
        #expect(try h.feed(Msg.read("zz")).first?["code"]?.stringValue == "notMember", "never a member")
        #expect(try h.feed(Msg.send("b", "m2")).first?["code"]?.stringValue == "dismissed", "other ops still are")
        try h.reopen()
        try Self.checkUnread(h, ["own", "b"])
        #expect(try h.store.audit().ok)
    }

    /// SPEC §2: a message that is not stored (status, `isPersisted: false`) creates no conversation and
    /// changes no last message; neither does reading a p2p conversation with no stored message (issue 10 §6).
    @Test func unstoredMessagesAndEmptyReadsMakeNoConversation() throws {
        let h = try StoreHarness()
        try h.feed([
            op("client.login", "b", ["device": "bd"]),
            Msg.send("a", "s1", to: Msg.p2p("b"), ["isStatusMessage": true]),  // reaches b (online), not stored
            Msg.send("a", "u1", to: Msg.p2p("c"), ["isPersisted": false]),
            Msg.read("d", to: Msg.p2p("e")),
            Msg.read("d", to: Msg.p2p("e"), upTo: 3),
        ])
        for user: Id in ["a", "b", "c", "d", "e"] {
            #expect(
                try Self.unread(h, user) == #"{"user":"\#(user)","total":0,"conversations":[]}"#, "\(user)")
        }
        #expect(h.store.world.convs.isEmpty && h.store.world.userConvs.isEmpty)
        // The first stored message makes the conversation, for both sides, with its last message.
        try h.feed(Msg.send("a", "p1", to: Msg.p2p("c")))  // 6
        #expect(
            try Self.unread(h, "c")
                == #"{"user":"c","total":1,"conversations":[{"to":{"type":"p2p","id":"a"},"unread":1,"lastReadSeq":0,"lastMessage":{"seq":6,"messageId":"p1"}}]}"#
        )
        #expect(try h.store.unreadView("a")["conversations"]?.arrayValue?.count == 1)
        try Self.checkUnread(h, ["a", "b", "c", "d", "e"])
        try h.reopen()
        try Self.checkUnread(h, ["a", "b", "c", "d", "e"])
        #expect(try h.store.audit().ok)
    }

    @Test func receiptsTallyAcrossReceiptsAndLeaves() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b", "c"]]),  // 1
            Msg.send("a", "r1", ["needReceipt": true]),  // 2
            Msg.send("a", "r2", ["needReceipt": true, "directedUserIds": ["c", "b"]]),  // 3
            op("team.invite", "own", ["team": "t1", "targets": ["late"]]),  // 4
            Msg.receipt("c", ["r1", "r2"]),  // 5
            op("team.leave", "b", ["team": "t1"]),  // 6
            Msg.receipt("b", ["r1"]),  // 7: a receiver who left may still confirm
        ])
        let rejected = try h.feed([Msg.receipt("late", ["r1"]), Msg.receipt("a", ["r1"]), Msg.receipt("own", ["r2"])])
        #expect(rejected.map { $0["code"]?.stringValue } == ["notPermitted", "notPermitted", "notPermitted"])
        try h.feed(Msg.receipt("c", ["r1"]))  // 8: repeated, counts once
        #expect(
            try h.store.receiptsView("r1")?.jsonString
                == #"{"messageId":"r1","read":2,"unread":1,"readUsers":["c","b"],"unreadUsers":["own"]}"#)
        #expect(
            try h.store.receiptsView("r2")?.jsonString
                == #"{"messageId":"r2","read":1,"unread":1,"readUsers":["c"],"unreadUsers":["b"]}"#)
        try h.reopen()
        #expect(
            try h.store.receiptsView("r1")?.jsonString
                == #"{"messageId":"r1","read":2,"unread":1,"readUsers":["c","b"],"unreadUsers":["own"]}"#)
        #expect(try h.store.audit().ok)
    }
}

/// The audit of SPEC §5 must pass on any log the processor wrote itself: every projection record a
/// message changes is written with it.
@Suite struct MessageAuditTests {
    static let team = op("team.create", "own", ["team": "t1", "members": ["a", "b"]])

    @Test(arguments: [
        // A first p2p message that neither counts nor updates the last message still creates the pair's
        // conversation state.
        [Msg.send("a", "p1", to: Msg.p2p("b"), ["isPersisted": false])],
        [Msg.send("a", "p1", to: Msg.p2p("b"), ["isStatusMessage": true])],
        [Msg.send("a", "p1", to: Msg.p2p("b"), ["disableUpdateLastMessage": true, "isCounted": false])],
        // A counted broadcast that keeps the previous last message still changes the conversation's count.
        [team, Msg.send("a", "m1", ["disableUpdateLastMessage": true])],
        [team, Msg.send("a", "m1"), Msg.send("b", "m2", ["disableUpdateLastMessage": true])],
    ])
    func auditPassesAfterQuietMessages(_ lines: [String]) throws {
        let h = try StoreHarness()
        var events = 0
        for line in lines {  // one commit each: the records a message touches must not ride on an earlier batch's
            events += try h.feed(line).filter { $0["kind"]?.stringValue == "event" }.count
        }
        #expect(events == lines.count)
        let report = try h.store.audit()
        #expect(report.ok, "\(lines.last!): \(report.tables.compactMap(\.difference))")
        try h.reopen()
        #expect(try h.store.loadAllProjections().convs == (try h.store.replay()).world.convs)
    }
}
