import TeamLog
import TestSupport
import Testing

/// SPEC §1 and §4: every malformed line gets its exact code.
@Suite struct OpParserTests {
    struct BadLine: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        let code: RejectionCode
        init(_ name: String, _ text: String, _ code: RejectionCode) {
            self.name = name
            bytes = Array(text.utf8)
            self.code = code
        }
        init(_ name: String, bytes: [UInt8], _ code: RejectionCode) {
            self.name = name
            self.bytes = bytes
            self.code = code
        }
        var testDescription: String { name }
    }

    static let id128 = String(repeating: "a", count: 128)
    static let id129 = String(repeating: "a", count: 129)

    static let bad: [BadLine] = [
        BadLine("truncated JSON", #"{"op":"team.leave","actor":"a""#, .badJSON),
        BadLine("not an object", #"["team.leave"]"#, .badJSON),
        BadLine(
            "NaN", #"{"op":"team.muteMember","actor":"a","team":"t","target":"b","muted":true,"until":NaN}"#, .badJSON),
        BadLine("trailing garbage", #"{"op":"team.leave","actor":"a","team":"t"} x"#, .badJSON),
        BadLine("duplicate key", #"{"op":"team.leave","actor":"a","actor":"b","team":"t"}"#, .badJSON),
        BadLine(
            "deep nesting",
            "{\"op\":\"team.leave\",\"x\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
                + "}", .badJSON),
        BadLine(
            "raw control char in a string", "{\"op\":\"team.leave\",\"actor\":\"a\u{01}\",\"team\":\"t\"}", .badJSON),
        BadLine("unknown op", #"{"op":"team.fly","actor":"a"}"#, .unknownOp),
        BadLine("op not a string", #"{"op":7,"actor":"a"}"#, .badField),
        BadLine("missing op", #"{"actor":"a"}"#, .missingField),
        BadLine("missing actor", #"{"op":"team.leave","team":"t"}"#, .missingField),
        BadLine("missing team", #"{"op":"team.leave","actor":"a"}"#, .missingField),
        BadLine("null counts as missing", #"{"op":"team.leave","actor":"a","team":null}"#, .missingField),
        BadLine("team not a string", #"{"op":"team.leave","actor":"a","team":5}"#, .badField),
        BadLine("bool as string", #"{"op":"team.muteAll","actor":"a","team":"t","muted":"yes"}"#, .badField),
        BadLine("ts negative", #"{"op":"team.leave","actor":"a","team":"t","ts":-1}"#, .badField),
        BadLine("ts fraction", #"{"op":"team.leave","actor":"a","team":"t","ts":1.5}"#, .badField),
        BadLine("ts huge", #"{"op":"team.leave","actor":"a","team":"t","ts":1e400}"#, .badField),
        BadLine("ts past Int64", #"{"op":"team.leave","actor":"a","team":"t","ts":99999999999999999999}"#, .badField),
        BadLine("ts at Int64.max", #"{"op":"clock.tick","actor":"a","ts":9223372036854775807}"#, .badField),
        BadLine("ts past the year 9999", #"{"op":"clock.tick","actor":"a","ts":253402300800000}"#, .badField),
        BadLine("ts past the year 9999 as a double", #"{"op":"clock.tick","actor":"a","ts":3e14}"#, .badField),
        BadLine("targets not a list", #"{"op":"team.kick","actor":"a","team":"t","targets":"b"}"#, .badField),
        BadLine("targets with a number", #"{"op":"team.kick","actor":"a","team":"t","targets":["b",3]}"#, .badField),
        BadLine("empty actor", #"{"op":"team.leave","actor":"","team":"t"}"#, .badId),
        BadLine("id of 129 bytes", "{\"op\":\"team.leave\",\"actor\":\"\(id129)\",\"team\":\"t\"}", .badId),
        BadLine("escaped control char in an id", #"{"op":"team.leave","actor":"a\u0007","team":"t"}"#, .badId),
        BadLine("escaped newline in an id", #"{"op":"team.leave","actor":"a\nb","team":"t"}"#, .badId),
        BadLine(
            "invalid UTF-8 in an id",
            bytes: Array(#"{"op":"team.leave","actor":""#.utf8) + [0xC3, 0x28] + Array(#"","team":"t"}"#.utf8), .badId),
        BadLine("lone surrogate in an id", #"{"op":"team.leave","actor":"\ud800","team":"t"}"#, .badId),
        BadLine(
            "bad id in targets",
            "{\"op\":\"team.kick\",\"actor\":\"a\",\"team\":\"t\",\"targets\":[\"b\",\"\(id129)\"]}", .badId),
        BadLine("bad opId", #"{"op":"team.leave","actor":"a","team":"t","opId":""}"#, .badId),
        BadLine("bad kind", #"{"op":"team.create","actor":"a","team":"t","kind":"mega"}"#, .badField),
        BadLine(
            "line over 1 MiB",
            "{\"op\":\"team.leave\",\"actor\":\"a\",\"team\":\"t\",\"pad\":\"" + String(repeating: "x", count: 1 << 20)
                + "\"}", .lineTooLong),
    ]

    @Test(arguments: bad)
    func rejected(_ c: BadLine) {
        let result = OpParser.parse(line: c.bytes)
        guard case .failure(let rejection) = result else {
            Issue.record("\(c.name) was accepted")
            return
        }
        #expect(rejection.code == c.code, "\(c.name): \(rejection)")
        #expect(!rejection.reason.isEmpty)
    }

    /// SPEC: `ts` is an event time from 0 to the last ms of year 9999, both accepted.
    @Test(arguments: [0, 253_402_300_799_999] as [Int64])
    func tsAtTheEndsOfItsRangeIsAccepted(_ ts: Int64) throws {
        let parsed = try OpParser.parse(line: #"{"op":"clock.tick","actor":"a","ts":\#(ts)}"#).get()
        #expect(parsed.ts == ts)
    }

    /// Shapes only: which content types a client may send and the `isCounted` combinations are `decide`'s
    /// (after a reused message id), so these lines parse.
    @Test(arguments: [
        #"{"op":"message.send","actor":"a","to":{"type":"team","id":"t"},"messageId":"m","content":{"type":"tip"}}"#,
        #"{"op":"message.send","actor":"a","to":{"type":"team","id":"t"},"messageId":"m","content":{"type":"notification"}}"#,
        #"{"op":"message.send","actor":"a","to":{"type":"team","id":"t"},"messageId":"m","content":{"type":"sticker"}}"#,
        #"{"op":"message.send","actor":"a","to":{"type":"team","id":"t"},"messageId":"m","content":{"type":"text"},"isCounted":true,"isPersisted":false}"#,
        #"{"op":"message.send","actor":"a","to":{"type":"team","id":"t"},"messageId":"m","content":{"type":"text"},"isCounted":true,"isStatusMessage":true}"#,
        #"{"op":"message.modify","actor":"a","messageId":"m","content":{"type":"tip"}}"#,
    ])
    func valueRulesAreLeftToDecide(_ line: String) throws {
        #expect(throws: Never.self) { try OpParser.parse(line: line).get() }
    }

    @Test func idAt128BytesIsAccepted() throws {
        let result = OpParser.parse(line: "{\"op\":\"team.leave\",\"actor\":\"\(Self.id128)\",\"team\":\"t\"}")
        let op = try result.get()
        #expect(op.actor.utf8.count == 128)
    }

    @Test func multibyteIdCountsBytes() throws {
        // 43 × "é" (2 bytes) = 86 bytes: fine; 65 × = 130 bytes: too long.
        #expect(throws: Never.self) {
            try OpParser.parse(line: op("team.leave", String(repeating: "é", count: 43), ["team": "t"])).get()
        }
        #expect(
            OpParser.parse(line: op("team.leave", String(repeating: "é", count: 65), ["team": "t"])).failureCode
                == .badId)
    }

    @Test func rejectionKeepsTheOpId() {
        let (result, opId) = Array(#"{"op":"team.leave","actor":"a","opId":"k1"}"#.utf8).withUnsafeBytes {
            OpParser.parseLine($0)
        }
        #expect(result.failureCode == .missingField)
        #expect(opId == "k1")
    }

    @Test func defaultsOfTeamCreate() throws {
        let op = try OpParser.parse(line: op("team.create", "a", ["team": "t"])).get()
        guard case .teamCreate(let c) = op.body else { Issue.record("not a create"); return }
        #expect(c.kind == .team)
        #expect(c.joinMode == .apply)
        #expect(c.inviteMode == .manager)
        #expect(c.beInviteMode == .noConsent)
        #expect(c.updateInfoMode == .manager)
        #expect(c.muted == false)
    }

    @Test func duplicateTargetsAreMergedInOrder() throws {
        let op = try OpParser.parse(line: op("team.kick", "a", ["team": "t", "targets": ["b", "c", "b"]])).get()
        #expect(op.body == .teamKick(team: "t", targets: ["b", "c"]))
    }

    @Test func unknownFieldsAreIgnored() throws {
        let op = try OpParser.parse(line: #"{"op":"team.leave","actor":"a","team":"t","trace":"x-1"}"#).get()
        #expect(op.body == .teamLeave(team: "t"))
    }

    /// Every op written back to JSON parses to the same op (what `teamlog log` relies on).
    @Test func opJSONRoundTrips() throws {
        var workload = TeamWorkloadProbe.lines(count: 2_000, seed: 7)
        workload.removeAll { !$0.hasPrefix("{\"op\"") }
        for text in workload {
            guard case .success(let op) = OpParser.parse(line: text) else { continue }
            let again = try OpParser.parse(line: op.jsonLine).get()
            #expect(again == op, "\(text)")
        }
    }

    /// Content with invalid UTF-8, an unpaired surrogate escape or a number beyond a `Double` is accepted and
    /// kept as every output shows it (U+FFFD, `null`), so its export parses to the same op and the log's
    /// codec keeps it (found by `tools/fuzz.sh line`: the raw bytes and the infinity came back changed).
    @Test func contentIsKeptAsItIsShown() throws {
        var line = Array(#"{"op":"message.send","actor":"a","to":{"type":"team","id":"t"},"messageId":"m","#.utf8)
        line += Array(#""content":{"type":"text","text":"a"#.utf8) + [0xFF, 0xC0, 0x80] + Array("b\\ud800\"".utf8)
        line += Array(#","n":[1e400,-1e400,2.5],"o":{"k":"\ude00"}}}"#.utf8)
        let op = try OpParser.parse(line: line).get()
        guard case .messageSend(let m) = op.body else { Issue.record("not a send: \(op)"); return }
        let expected: JSONValue = .object([
            ("type", .string("text")), ("text", .string("a\u{FFFD}\u{FFFD}\u{FFFD}b\u{FFFD}")),
            ("n", .array([.null, .null, .double(2.5)])), ("o", .object([("k", .string("\u{FFFD}"))])),
        ])
        #expect(m.content == expected)
        #expect(!m.content.needsRepair)
        #expect(try OpParser.parse(line: op.jsonLine).get() == op)
        var accepted = op
        accepted.ts = 5
        let event = Event(seq: 1, ts: 5, op: accepted)
        #expect(try EventCodec.decode(seq: 1, EventCodec.encode(event)) == event)
        // A modify's content too.
        let modify = try OpParser.parse(line: Array(#"{"op":"message.modify","actor":"a","messageId":"m","content":{"type":"text","x":1e999,"t":"\udfff"}}"#.utf8)).get()
        #expect(modify.body == .messageModify(messageId: "m", content: .object([("type", .string("text")), ("x", .null), ("t", .string("\u{FFFD}"))])))
    }
}

extension Result where Failure == Rejection {
    var failureCode: RejectionCode? {
        if case .failure(let r) = self { return r.code }
        return nil
    }
}
