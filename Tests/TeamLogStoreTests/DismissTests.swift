import Testing
import TeamLog
import TeamLogStore
import TestSupport

/// `team.dismiss` (SPEC §1.1) ends every membership by marking the team, not by a leave per member: the
/// member records and views stay as they were at the dismissal and are read as ended there. What SPEC
/// shows is unchanged — no members, the dismiss tip to every one of them, unread frozen at the tip,
/// receipts of earlier messages against the roster of their time — and the op writes O(1) records.
@Suite struct DismissTests {
    /// A team of `size` members (`u0`… plus the owner) with a read, a needReceipt message and an online
    /// member.
    static func setup(_ h: StoreHarness, size: Int) throws {
        let members = (0..<size).map { "u\($0)" }
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": members]),  // 1
            op("client.login", "u1", ["device": "d1"]),  // 2
            Msg.send("u0", "m1", ["needReceipt": true]),  // 3
            Msg.read("u2"),  // 4
            op("message.receipt", "u2", ["to": Msg.team(), "messageIds": ["m1"]]),  // 5
            Msg.send("u1", "m2"),  // 6
        ])
    }

    static func tables(_ h: StoreHarness) throws -> [String: String] {
        let report = try h.store.audit()
        #expect(report.ok)
        return Dictionary(uniqueKeysWithValues: report.tables.map { ($0.table, "\($0.records) \($0.digest)") })
    }

    /// The SPEC views of a dismissed team, live, after a reopen and after a replay with a tiny working set.
    @Test func aDismissedTeamShowsNoMembersAndItsPastStaysAnswerable() throws {
        for cacheBytes in [Store.defaultCacheBytes, 1] {
            let h = try StoreHarness(cacheBytes: cacheBytes, checkpointOps: 3)
            try Self.setup(h, size: 4)
            let records = try h.feed(op("team.dismiss", "own", ["team": "t1"]))  // 7
            let delivery = try #require(records.first { $0["kind"]?.stringValue == "delivery" })
            #expect(
                delivery["receivers"] == .array(["own", "u0", "u1", "u2", "u3"].map { .string($0) })
                    && delivery["alerted"] == .array([]),
                "the tip reaches every member, in roster order: \(delivery.jsonString)")
            guard case .object(let silenced)? = delivery["silenced"] else { throw StoreError("no silenced") }
            #expect(silenced.map(\.0) == ["own", "u0", "u1", "u2", "u3"])
            #expect(silenced.allSatisfy { $0.1 == .string("tip") })
            for pass in 0..<2 {
                let team = try #require(try h.team("t1"))
                #expect(team["dismissed"] == .bool(true) && team["memberCount"] == .int(0))
                #expect(team["members"] == .array([]))
                #expect(team["owner"]?.stringValue == "own")
                let receipts = try #require(try h.store.receiptsView("m1"))
                #expect(
                    receipts.jsonString
                        == #"{"messageId":"m1","read":1,"unread":3,"readUsers":["u2"],"unreadUsers":["own","u1","u3"]}"#)
                #expect(
                    try MessageQueryTests.unread(h, "u3")
                        == #"{"user":"u3","total":2,"conversations":[{"to":{"type":"team","id":"t1"},"unread":2,"lastReadSeq":0,"lastMessage":{"seq":7,"messageId":"tip-7"}}]}"#
                )
                try MessageQueryTests.checkUnread(h, ["own", "u0", "u1", "u2", "u3"])
                if pass == 0 { try h.reopen() }
            }
            // Later: presence changes, a read clears, every other op is `dismissed`.
            try h.feed([op("client.logout", "u1", ["device": "d1"]), op("client.login", "u3", ["device": "d9"])])
            #expect(try h.feed(Msg.read("u3")).first?["kind"]?.stringValue == "event")
            #expect(try h.store.unreadView("u3")["total"] == .int(0))
            #expect(try h.feed(Msg.send("u0", "m3")).first?["code"]?.stringValue == "dismissed")
            #expect(try h.feed(op("team.leave", "u0", ["team": "t1"])).first?["code"]?.stringValue == "dismissed")
            #expect(
                try h.feed(op("team.create", "own", ["team": "t1"])).first?["code"]?.stringValue == "teamExists")
            #expect(h.store.world.invariantViolations().isEmpty && h.store.world.derivedIndexViolations().isEmpty)
            try h.reopen()
            #expect(try h.store.audit().ok)
        }
    }

    /// The records a dismissal writes do not depend on the team's size: no member record, ended membership
    /// or member's view changes (a leave of each member changed three records per member).
    @Test func aDismissalWritesNoRecordPerMember() throws {
        var changed: [Int: [String]] = [:]
        for size in [3, 300] {
            let h = try StoreHarness()
            try Self.setup(h, size: size)
            let before = try Self.tables(h)
            try h.feed(op("team.dismiss", "own", ["team": "t1"]))
            let after = try Self.tables(h)
            #expect(after.keys.sorted() == before.keys.sorted())
            changed[size] = after.keys.filter { after[$0] != before[$0] }.sorted()
            for table in ["members", "pastMembers", "userConvs"] {
                #expect(before[table] != nil && after[table] == before[table], "\(size) members: \(table)")
            }
        }
        #expect(changed[3] == changed[300], "the same tables change whatever the size: \(changed)")
    }
}
