import AsyncHTTPClient
import LMDB
import TeamLog
import TeamLogHTTP
import TeamLogRuntime
import TeamLogStore
import TestSupport
import Testing

/// One client's requests: its own team, messages to it and to a team every client shares (so decisions
/// depend on the interleaving), a read, a malformed line, a re-sent opId.
func clientRequests(_ c: Int, requests: Int) -> [[String]] {
    let owner = "owner\(c)"
    let team = "t\(c)"
    var ts = Int64(1_000_000 + c * 100)
    func stamp(_ line: String) -> String {
        ts += 1
        return withTimes([line], from: ts)[0]
    }
    var out: [[String]] = [
        [
            stamp(
                op(
                    "team.create", owner,
                    ["team": team, "name": "T\(c)", "members": ["a\(c)", "b\(c)"], "opId": "\(c)-create"])),
            stamp(op("team.invite", "boss", ["team": "shared", "targets": [owner], "opId": "\(c)-join"])),
        ]
    ]
    for r in 1..<requests {
        var lines = [
            stamp(
                #"{"op":"message.send","actor":"\#(owner)","to":{"type":"team","id":"\#(team)"},"messageId":"m\#(c)-\#(r)","content":{"type":"text","text":"r\#(r)"},"needReceipt":true,"opId":"\#(c)-m\#(r)"}"#
            ),
            stamp(
                #"{"op":"message.send","actor":"\#(owner)","to":{"type":"team","id":"shared"},"messageId":"s\#(c)-\#(r)","content":{"type":"text","text":"hi"}}"#
            ),
            stamp(#"{"op":"message.read","actor":"a\#(c)","to":{"type":"team","id":"\#(team)"},"upTo":1000000}"#),
            stamp(
                #"{"op":"message.receipt","actor":"b\#(c)","to":{"type":"team","id":"\#(team)"},"messageIds":["m\#(c)-\#(r)"]}"#
            ),
        ]
        if r == 1 { lines.append("{broken") }
        if r == 2 {
            lines.append(stamp(op("team.create", owner, ["team": team, "name": "again", "opId": "\(c)-create"])))
        }
        out.append(lines)
    }
    return out
}

@Suite(.serialized) struct ConcurrencyTests {
    @Test func concurrentClientsGetTheirOwnRecordsAndTheStoreEqualsASequentialRun() async throws {
        let clients = 100
        let requests = 4
        let server = try await LiveServer()
        let setupLine = op("team.create", "boss", ["team": "shared", "name": "S", "ts": 1])
        let setup = try await send("POST", server.base + "/v1/ops", body: setupLine)
        #expect(setup.status == 200)
        // Each client posts its requests one after another; the clients run at once. Two minutes per
        // request: a loaded CI machine.
        let replies: [(Int, [(lines: [String], reply: Reply)])] = try await withWideClient { client in
            try await withThrowingTaskGroup(of: (Int, [(lines: [String], reply: Reply)]).self) { group in
                for c in 0..<clients {
                    group.addTask {
                        var out: [(lines: [String], reply: Reply)] = []
                        for lines in clientRequests(c, requests: requests) {
                            let reply = try await send(
                                "POST", server.base + "/v1/ops", body: body(lines), timeout: 120, client: client)
                            out.append((lines, reply))
                        }
                        return (c, out)
                    }
                }
                var all: [(Int, [(lines: [String], reply: Reply)])] = []
                for try await result in group { all.append(result) }
                return all
            }
        }

        // Every response holds exactly its own records: one per line (event, rejected or duplicate) with
        // its line number and opId, and the outputs of its own events only.
        var accepted: [(seq: Int64, line: String)] = [(1, setupLine)]
        for (_, exchanges) in replies {
            for (lines, reply) in exchanges {
                #expect(reply.status == 200)
                let records = reply.lines
                let perLine = records.filter {
                    ["event", "rejected", "duplicate"].contains($0["kind"]?.stringValue ?? "")
                }
                #expect(perLine.map { $0["line"]?.intValue ?? 0 } == Array(1...Int64(lines.count)))
                var ownSeqs = Set<Int64>()
                for record in perLine {
                    let number = Int(record["line"]?.intValue ?? 0)
                    let sent = (try? JSONParser.parse(lines[number - 1])) ?? .null
                    if record["kind"] == .string("event") {
                        #expect(record["op"] == sent["op"])
                        let seq = record["seq"]?.intValue ?? 0
                        ownSeqs.insert(seq)
                        accepted.append((seq, lines[number - 1]))
                    } else if sent != .null {
                        #expect(record["opId"] == (sent["opId"] ?? .null))
                    }
                }
                for record in records
                where !["event", "rejected", "duplicate"].contains(record["kind"]?.stringValue ?? "") {
                    #expect(ownSeqs.contains(record["seq"]?.intValue ?? -1), "\(record.jsonString)")
                }
            }
        }
        // The second team.create with the same opId is always a duplicate; the malformed line a rejection.
        let duplicates = replies.flatMap { $0.1 }.flatMap { $0.reply.lines }.filter {
            $0["kind"] == .string("duplicate")
        }
        #expect(duplicates.count == clients)
        try await server.stop()

        // The same accepted ops, one after another in commit order, into a new store through the CLI's path.
        accepted.sort { $0.seq < $1.seq }
        #expect(accepted.map(\.seq) == Array(1...Int64(accepted.count)))
        let sequential = try StoreHarness()
        let records = try sequential.feed(accepted.map(\.line))
        #expect(records.filter { $0["kind"] == .string("event") }.count == accepted.count)
        try sequential.store.checkpointNow()

        var readOnly = Store.Options()
        readOnly.readOnly = true
        let served = try Store(path: server.path, options: readOnly, loadState: false)
        var servedLog: [UInt8] = []
        var sequentialLog: [UInt8] = []
        _ = try served.exportLog { servedLog += $0 }
        _ = try sequential.store.exportLog { sequentialLog += $0 }
        #expect(servedLog == sequentialLog)
        let servedTables = try served.readStoredProjections { txn, _ in try served.storedProjections(in: txn) }
        let sequentialTables = try sequential.store.readStoredProjections { txn, _ in
            try sequential.store.storedProjections(in: txn)
        }
        #expect(servedTables.count == sequentialTables.count)
        for (table, rows) in sequentialTables {
            let other = servedTables[table] ?? []
            #expect(other.count == rows.count, "\(table)")
            let same = other.elementsEqual(rows) { (a: ([UInt8], [UInt8]), b: ([UInt8], [UInt8])) -> Bool in
                a.0 == b.0 && a.1 == b.1
            }
            #expect(same, "\(table)")
        }
        #expect(try served.audit().ok)
    }
}
