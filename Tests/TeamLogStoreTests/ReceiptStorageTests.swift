import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

/// Receipts at any team size (issue 11 §9): a `needReceipt` message stores its receiver count, not its
/// receivers, and a receipt adds one index entry, so both cost the same records and bytes in a
/// 20,000-member supergroup as in a 20-member one; the `receipts` query lists unread users from the
/// roster as of the message's seq.
@Suite struct ReceiptStorageTests {
    /// Records and key + value bytes over every projection table, and the receipt tables' records.
    struct Footprint: Equatable {
        var records = 0
        var bytes = 0
        var receipts = 0
        var receiptReads = 0
    }

    static func footprint(_ h: StoreHarness) throws -> Footprint {
        let tables = try h.store.readProjections { txn in try h.store.storedProjections(in: txn) }
        var f = Footprint()
        for (table, rows) in tables {
            f.records += rows.count
            f.bytes += rows.reduce(0) { $0 + $1.0.count + $1.1.count }
            if table == .receipts { f.receipts = rows.count }
            if table == .receiptReads { f.receiptReads = rows.count }
        }
        return f
    }

    /// What one `needReceipt` message and then one receipt added to the store of a supergroup of `size`.
    static func costs(size: Int) throws -> (message: Footprint, receipt: Footprint, h: StoreHarness) {
        let h = try StoreHarness(mapSize: 64 << 20)
        let members = (1..<size).map { "u\($0)" }
        try h.feed(op("team.create", "own", ["team": "big", "kind": "superTeam", "members": members]))
        let to = Msg.conv("superTeam", "big")
        try h.feed(Msg.send("own", "m0", to: to, ["needReceipt": true]))  // conversation records exist now
        let start = try footprint(h)
        try h.feed(Msg.send("own", "m1", to: to, ["needReceipt": true]))
        let sent = try footprint(h)
        try h.feed(Msg.receipt("u5", ["m1"], to: to))
        let read = try footprint(h)
        func delta(_ a: Footprint, _ b: Footprint) -> Footprint {
            Footprint(
                records: b.records - a.records, bytes: b.bytes - a.bytes, receipts: b.receipts - a.receipts,
                receiptReads: b.receiptReads - a.receiptReads)
        }
        return (delta(start, sent), delta(sent, read), h)
    }

    @Test func aMessageAndAReceiptCostTheSameAtAnyTeamSize() throws {
        let small = try Self.costs(size: 20)
        let big = try Self.costs(size: 20_000)
        // The message: its record, its tally and its unread index entries; no receiver list.
        #expect(big.message.receipts == 1 && big.message.receiptReads == 0)
        #expect(big.message.records == small.message.records, "records per message: \(big.message) vs \(small.message)")
        // The receiver count's varint is 1 byte for 19 receivers, 3 for 19,999: nothing else may grow.
        #expect(
            big.message.bytes - small.message.bytes <= 2,
            "bytes per message: \(big.message.bytes) with 20,000 members, \(small.message.bytes) with 20")
        #expect(big.message.bytes < 200)
        // The receipt: one index entry, nothing rewritten.
        #expect(big.receipt == Footprint(records: 1, bytes: big.receipt.bytes, receipts: 0, receiptReads: 1))
        #expect(big.receipt == small.receipt)

        let view = try #require(try big.h.store.receiptsView("m1"))
        #expect(view["read"]?.intValue == 1 && view["unread"]?.intValue == 19_998)
        #expect(view["readUsers"] == .array([.string("u5")]))
        let expected = (1..<20_000).filter { $0 != 5 }.map { JSONValue.string("u\($0)") }
        #expect(view["unreadUsers"] == .array(expected), "unread users in slot order")
        #expect(try big.h.store.audit().ok)
    }

    /// The roster as of a message's seq: members who left since are still listed (in their old slot),
    /// members who joined since are not, a member who left and rejoined is listed once, by the slot held
    /// when the message was sent; after a reopen the same.
    @Test func unreadUsersAreTheRosterAtTheMessagesSeqInSlotOrder() throws {
        let h = try StoreHarness()
        try h.feed([
            op("team.create", "own", ["team": "t1", "members": ["a", "b", "c", "d"]]),  // slots own 0, a 1 … d 4
            Msg.send("own", "m1", ["needReceipt": true]),
            op("team.leave", "a", ["team": "t1"]),  // slot 1 free
            op("team.leave", "c", ["team": "t1"]),  // slot 3 free
            op("team.invite", "own", ["team": "t1", "targets": ["c"]]),  // c rejoins in slot 1
            op("team.invite", "own", ["team": "t1", "targets": ["late"]]),  // slot 3, after m1
            Msg.send("own", "m2", ["needReceipt": true]),
        ])
        #expect(h.store.world.teams["t1"]?.member("c")?.slot == 1)
        let records = try h.feed([Msg.receipt("c", ["m1", "m2"]), Msg.receipt("a", ["m1"])])
        #expect(!records.contains { $0["kind"]?.stringValue == "rejected" }, "\(records)")
        #expect(try h.feed(Msg.receipt("late", ["m1"])).first?["code"]?.stringValue == "notPermitted")
        let m1 = #"{"messageId":"m1","read":2,"unread":2,"readUsers":["c","a"],"unreadUsers":["b","d"]}"#
        let m2 = #"{"messageId":"m2","read":1,"unread":3,"readUsers":["c"],"unreadUsers":["b","late","d"]}"#
        #expect(try h.store.receiptsView("m1")?.jsonString == m1)
        #expect(try h.store.receiptsView("m2")?.jsonString == m2)
        try h.feed(op("team.leave", "b", ["team": "t1"]))
        try h.reopen()
        #expect(try h.store.receiptsView("m1")?.jsonString == m1)
        #expect(try h.store.receiptsView("m2")?.jsonString == m2)
        #expect(try h.store.audit().ok)
        let scratch = try h.store.replayIntoScratch(upTo: 7)  // m2 is seq 7, the receipts come after
        defer { scratch.remove() }
        #expect(
            try scratch.store.receiptsView("m1")?.jsonString
                == #"{"messageId":"m1","read":0,"unread":4,"readUsers":[],"unreadUsers":["a","b","c","d"]}"#)
    }
}
