import AsyncHTTPClient
import Hummingbird
import LMDB
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads
import TestSupport
import Testing

@testable import TeamLogHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The example workload with an explicit, increasing `ts` on every line (so a second run gives the same
/// records and state whatever the wall clock says).
func withTimes(_ lines: [String], from start: Int64 = 1_000) -> [String] {
    lines.enumerated().map { i, line in
        guard case .object(var pairs)? = try? JSONParser.parse(line) else { return line }
        pairs.removeAll { $0.0 == "ts" }
        pairs.append(("ts", .int(start + Int64(i))))
        return JSONValue.object(pairs).jsonString
    }
}

let exampleLines: [String] = withTimes(
    [
        op("team.create", "alice", ["team": "ops", "name": "Ops", "members": ["bob", "carol", "dave"]]),
        op("team.addManagers", "alice", ["team": "ops", "targets": ["bob"]]),
        op("member.setNotify", "carol", ["team": "ops", "state": "none"]),
        op("member.setNotify", "dave", ["team": "ops", "state": "managerOnly"]),
        #"{"op":"message.send","actor":"carol","to":{"type":"team","id":"ops"},"messageId":"m1","content":{"type":"text","text":"hi"},"needReceipt":true}"#,
        #"{"op":"message.send","actor":"bob","to":{"type":"team","id":"ops"},"messageId":"m2","content":{"type":"text","text":"hey"},"mentions":["dave"]}"#,
        #"{"op":"message.read","actor":"dave","to":{"type":"team","id":"ops"},"upTo":6}"#,
        #"{"op":"message.receipt","actor":"bob","to":{"type":"team","id":"ops"},"messageIds":["m1"]}"#,
        op("client.login", "bob", ["device": "phone"]),
        op("channel.create", "bob", ["channel": "call1", "kind": "audio"]),
        op("channel.join", "bob", ["channel": "call1", "device": "phone"]),
        op("channel.invite", "bob", ["channel": "call1", "target": "carol", "requestId": "r1", "offline": true]),
    ])

/// The same lines through the CLI's path (a `Processor` over a store of its own): the records `ingest`
/// prints, and the store to compare queries with.
func cliRun(_ lines: [String]) throws -> (records: String, harness: StoreHarness) {
    let h = try StoreHarness()
    let records = try h.feed(lines)
    return (records.map { $0.jsonString + "\n" }.joined(), h)
}

@Suite(.serialized) struct ServeTests {
    @Test func opsAnswerTheCLIRecordsAndQueriesTheCLIShapes() async throws {
        let server = try await LiveServer()
        let (expected, cli) = try cliRun(exampleLines)
        let reply = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        #expect(reply.status == 200)
        #expect(reply.header("content-type") == "application/x-ndjson")
        #expect(reply.body == expected)

        let queries: [(String, JSONValue?)] = [
            ("/v1/teams/ops", try cli.store.teamView("ops")),
            ("/v1/users/dave/unread", try cli.store.unreadView("dave")),
            ("/v1/messages/m1/receipts", try cli.store.receiptsView("m1")),
            ("/v1/messages/m2", try cli.store.messageView("m2")),
            ("/v1/channels/call1", try cli.store.channelView("call1")),
        ]
        for (path, view) in queries {
            let answer = try await send("GET", server.base + path)
            #expect(answer.status == 200, "\(path)")
            #expect(answer.header("content-type") == "application/json")
            #expect(answer.json == view, "\(path)")
        }
        let missing: [(String, String)] = [
            ("/v1/teams/nope", "noSuchTeam"), ("/v1/messages/nope", "noSuchMessage"),
            ("/v1/messages/m2/receipts", "noSuchMessage"), ("/v1/channels/nope", "noSuchChannel"),
        ]
        for (path, code) in missing {
            let answer = try await send("GET", server.base + path)
            #expect(answer.status == 404, "\(path)")
            #expect(answer.json["error"]?["code"] == .string(code), "\(path)")
        }
        // emit=events prints only the event-level records; emit=none nothing; the store is the same.
        let events = try await send(
            "POST", server.base + "/v1/ops?emit=events",
            body: op("team.create", "erin", ["team": "t2", "name": "T2", "ts": 5_000]))
        #expect(events.lines.map { $0["kind"] } == [.string("event")])
        let none = try await send(
            "POST", server.base + "/v1/ops?emit=none", body: op("team.create", "erin", ["team": "t3", "name": "T3"]))
        #expect(none.status == 200 && none.body.isEmpty)
        #expect(try await send("GET", server.base + "/v1/teams/t3").status == 200)
        #expect(try await send("POST", server.base + "/v1/ops?emit=some", body: "{}").status == 400)

        let status = try await send("GET", server.base + "/v1/status")
        #expect(status.json["headSeq"] == .int(Int64(exampleLines.count + 2)))
        #expect(status.json["writerPid"] == .int(Int64(getpid())))
        #expect(status.json["readAhead"] == .bool(true), "the writer's own: a small store with room")
        let log = try await send("GET", server.base + "/v1/log?team=ops")
        let exported = try cli.store.exportLog(team: "ops") { _ in
        } write: { _ in
        }
        #expect(exported == nil)
        var cliLog: [UInt8] = []
        _ = try cli.store.exportLog(team: "ops", write: { cliLog += $0 })
        #expect(log.body == String(decoding: cliLog, as: UTF8.self))
        let range = try await send("GET", server.base + "/v1/log?from=2&to=3")
        #expect(range.lines.count == 2)
        // An empty range is the client's error; a `from` past the head is an export with nothing new.
        let backwards = try await send("GET", server.base + "/v1/log?from=3&to=2")
        #expect(backwards.status == 400 && backwards.json["error"]?["code"] == .string("badRequest"), "\(backwards.body)")
        let past = try await send("GET", server.base + "/v1/log?from=1000")
        #expect(past.status == 200 && past.body.isEmpty, "\(past.body)")
        try await server.stop()
    }

    /// What each `?emit=` answers is the CLI's records filtered as `ingest --emit` filters them, for a body
    /// with every kind of line — accepted ops with tips and deliveries, a malformed line, a rejected op, an
    /// opId sent again (`duplicate`), a rejected opId sent again — and the same when the body is over the
    /// batch size (committed in several transactions before it is answered). The writer collects these as
    /// values through `Processor.observer`; a record missing, extra or out of order fails here.
    @Test(arguments: [10_000, 4]) func everyEmitAnswersTheCLIRecords(batchSize: Int) async throws {
        let send1 =
            #"{"op":"message.send","actor":"bob","ts":9000,"opId":"x1","to":{"type":"team","id":"ops"},"messageId":"mx1","content":{"type":"text","text":"hi"}}"#
        let kick = #"{"op":"team.kick","actor":"carol","ts":9001,"opId":"x2","team":"ops","targets":["dave"]}"#
        let lines = exampleLines + [send1, "{not json", kick, send1, kick]
        let (cliText, _) = try cliRun(lines)
        let cli = cliText.split(separator: "\n").map(String.init)
        func kind(_ line: String) -> String? { try? JSONParser.parse(line)["kind"]?.stringValue }
        #expect(Set(cli.compactMap(kind)).isSuperset(of: ["event", "tip", "delivery", "rejected", "duplicate"]))
        for emit in ["all", "events", "none"] {
            var options = WriterService.Options()
            options.store.noSync = true
            options.batchSize = batchSize
            let server = try await LiveServer(options: options)
            let reply = try await send("POST", server.base + "/v1/ops?emit=\(emit)", body: body(lines))
            #expect(reply.status == 200)
            let expected: [String] =
                switch emit {
                case "all": cli
                case "events": cli.filter { ["event", "rejected", "duplicate"].contains(kind($0)) }
                default: []
                }
            #expect(reply.body.split(separator: "\n").map(String.init) == expected, "emit=\(emit)")
            try await server.stop()
        }
    }

    @Test func aQueryAfterAResponseSeesItsWrites() async throws {
        let server = try await LiveServer()
        _ = try await send("POST", server.base + "/v1/ops", body: op("team.create", "o", ["team": "rw", "name": "RW"]))
        for i in 0..<25 {
            let user = "u\(i)"
            let reply = try await send(
                "POST", server.base + "/v1/ops", body: op("team.invite", "o", ["team": "rw", "targets": [user]]))
            #expect(reply.lines.first?["kind"] == .string("event"))
            let team = try await send("GET", server.base + "/v1/teams/rw")
            #expect(team.json["memberCount"] == .int(Int64(i + 2)), "after inviting \(user)")
            let unread = try await send("GET", server.base + "/v1/users/\(user)/unread")
            #expect(unread.status == 200)
        }
        try await server.stop()
    }

    @Test func atSeqAnswersAsOfThatSeq() async throws {
        let server = try await LiveServer()
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        let (_, cli) = try cliRun(Array(exampleLines.prefix(1)))
        let first = try await send("GET", server.base + "/v1/teams/ops?at=1")
        #expect(first.status == 200)
        #expect(first.json == (try cli.store.teamView("ops")))
        #expect(first.json["members"]?.arrayValue?.count == 4)
        let now = try await send("GET", server.base + "/v1/teams/ops")
        #expect(now.json != first.json)
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=999").status == 400)
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=x").status == 400)
        #expect(try await send("GET", server.base + "/v1/messages/m1?at=4").status == 404)
        #expect(try await send("GET", server.base + "/v1/messages/m1?at=5").status == 200)
        try await server.stop()
    }

    /// A server whose clients go quiet still checkpoints (`WriterService` waits for submissions no longer
    /// than until the checkpoint is due): what other processes read (`teamlog team`, `status`) reaches the
    /// last op within `checkpointMs` of quiet, with no further write to start it at a commit.
    @Test func anIdleServerCheckpointsItsLastOps() async throws {
        var options = WriterService.Options()
        options.store.noSync = true
        options.store.checkpointMs = 300
        let server = try await LiveServer(options: options)
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        let head = try #require(try await send("GET", server.base + "/v1/status").json["headSeq"]?.intValue)
        #expect(head > 0)
        let deadline = ContinuousClock.now + .seconds(20)
        while try await send("GET", server.base + "/v1/status").json["checkpointSeq"]?.intValue != head {
            try #require(ContinuousClock.now < deadline, "the idle writer checkpoints seq \(head) within 20 s")
            try await Task.sleep(for: .milliseconds(20))
        }
        let team = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["team", "ops", "--store", server.path, "--json"],
            stderr: server.directory.child("team.err"), timeout: 60)
        #expect(team.status == .exited(0), "another process reads the checkpointed team")
        try await server.stop()
    }

    /// `serve --at-base DIR`: `?at=SEQ` starts from the copy when its checkpoint is at or before SEQ (a
    /// record taken out of the copy shows in the answer), from seq 1 when the copy is past SEQ, and a copy
    /// that is gone is a 500 `atBase`.
    @Test func atSeqStartsFromTheAtBaseCopy() async throws {
        let directory = TemporaryDirectory("teamlog-http-at-base")
        let copy = directory.child("copy")
        var config = ServerConfiguration()
        config.atBase = copy
        var options = WriterService.Options()
        options.store.noSync = true
        options.store.checkpointMs = 10
        options.streamWindow = 1  // a record stream from an earlier seq catches up from the log
        let server = try await LiveServer(configuration: config, options: options, directory: directory)
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        // A checkpoint starts at a commit once `checkpointMs` have passed: seq 13's, then nothing lags.
        try await Task.sleep(for: .milliseconds(20))
        _ = try await send(
            "POST", server.base + "/v1/ops", body: op("client.login", "zed", ["device": "d", "ts": 1_500]))
        let deadline = ContinuousClock.now + .seconds(20)
        while try await send("GET", server.base + "/v1/status").json["checkpointSeq"]?.intValue != 13 {
            try #require(ContinuousClock.now < deadline, "the writer checkpoints seq 13 within 20 s")
            try await Task.sleep(for: .milliseconds(10))
        }
        // A copy of the live store (`teamlog backup` beside the writer), checkpointed at seq 13.
        let backup = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["backup", "--store", server.path, "--to", copy],
            stderr: directory.child("backup.err"), timeout: 60)
        #expect(backup.status == .exited(0), "\(readTextFile(directory.child("backup.err")))")
        // Team `ops` taken out of the copy's projections: an answer from the copy lacks it.
        do {
            let env = try Environment(path: copy + "/proj")
            let teams = try env.openHandle("p.teams", create: false)
            #expect(try env.write { txn in try txn.delete(teams, key: Array("ops".utf8)) })
        }
        let more = [op("team.create", "erin", ["team": "dev", "name": "Dev", "members": ["frank"], "ts": 2_000])]
        _ = try await send("POST", server.base + "/v1/ops", body: body(more))

        #expect(try await send("GET", server.base + "/v1/teams/ops").status == 200)
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=14").status == 404, "from the copy")
        #expect(try await send("GET", server.base + "/v1/teams/dev?at=14").status == 200, "the tail replayed on it")
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=13").status == 404, "at the copy's own seq")
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=12").status == 200, "the copy is past 12")
        // A record stream from before the window catches up from the copy too: seq 14's records (team `dev`).
        // One more event: the window (one event) holds seq 15 only.
        _ = try await send(
            "POST", server.base + "/v1/ops",
            body: op("team.update", "erin", ["team": "dev", "fields": ["intro": "x"] as KeyValuePairs<String, Any>, "ts": 2_100]))
        let caughtUp = try await readEvents(server.base + "/v1/records?from=14") { $0.last?.id == 15 }
        #expect(caughtUp.events.map(\.id) == [14, 15])
        #expect(caughtUp.events.last?.data.first?.contains(#""seq":15,"ts":2100,"op":"team.update"}"#) == true)
        #expect(caughtUp.events.first?.data.first == #"{"kind":"event","line":0,"seq":14,"ts":2000,"op":"team.create"}"#)
        // A copy that is gone: the server says so rather than answering from seq 1.
        #expect(rename(copy, copy + ".gone") == 0)
        let gone = try await send("GET", server.base + "/v1/teams/ops?at=14")
        #expect(gone.status == 500)
        #expect(gone.json["error"]?["code"] == .string("atBase"), "\(gone.body)")
        let streamGone = try await readEvents(server.base + "/v1/records?from=14") { $0.last?.name != nil || $0.last?.id == 15 }
        #expect(streamGone.status == 200)
        #expect(streamGone.events.map(\.name) == ["error"], "\(streamGone.events)")
        #expect(streamGone.events.first?.data.first?.contains(#""code":"atBase""#) == true)
        try await server.stop()
    }

    /// `--at-replays N`: at most N `?at=` replays at once, one more answered 503 `atBusy` with
    /// `Retry-After` (a slot held here as a running replay holds it); slots come back after every replay,
    /// a refused one included; 0 serves none.
    @Test func atReplaysBoundTheReplaysRunningAtOnce() async throws {
        let server = try await LiveServer()
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        for _ in 0..<3 { #expect(try await send("GET", server.base + "/v1/teams/ops?at=1").status == 200) }
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=999").status == 400)
        #expect(try await send("GET", server.base + "/v1/users/dave/unread?at=7").status == 200, "a slot after a 400")
        #expect(server.server.atReplays.take(), "the one slot is free")
        let busy = try await send("GET", server.base + "/v1/teams/ops?at=1")
        #expect(busy.status == 503 && busy.header("Retry-After") == "5")
        #expect(busy.json["error"]?["code"] == .string("atBusy"), "\(busy.body)")
        #expect(
            try await send("GET", server.base + "/v1/teams/ops").status == 200, "queries of the head are not limited")
        let metrics = try await send("GET", server.base + "/metrics")
        #expect(metrics.body.contains("teamlog_at_replays_running 1"), "\(metrics.body)")
        server.server.atReplays.give()
        #expect(try await send("GET", server.base + "/v1/teams/ops?at=1").status == 200)
        try await server.stop()

        var none = ServerConfiguration()
        none.atReplays = 0
        var small = WriterService.Options()
        small.store.noSync = true
        small.streamWindow = 4
        let closed = try await LiveServer(configuration: none, options: small)
        _ = try await send("POST", closed.base + "/v1/ops", body: body(exampleLines))
        // Off for good: 403 `atDisabled`, not a 503 whose `Retry-After` a client would follow forever.
        let off = try await send("GET", closed.base + "/v1/teams/ops?at=1")
        #expect(off.status == 403 && off.header("Retry-After") == nil)
        #expect(off.json["error"]?["code"] == .string("atDisabled"), "\(off.body)")
        #expect(try await send("GET", closed.base + "/v1/teams/ops").status == 200)
        // No slots, no catch-up: a record stream from before the window is 410, as with --no-stream-catch-up.
        let gone = try await send("GET", closed.base + "/v1/records?from=1")
        #expect(gone.status == 410 && gone.json["error"]?["code"] == .string("gone"), "\(gone.body)")
        try await closed.stop()
    }

    @Test func writesNeedTheTokenAndReadsToWithProtectReads() async throws {
        var config = ServerConfiguration()
        config.token = "s3cret-token"
        let server = try await LiveServer(configuration: config)
        let line = op("team.create", "a", ["team": "auth", "name": "A"])
        let none = try await send("POST", server.base + "/v1/ops", body: line)
        #expect(none.status == 401)
        #expect(none.json["error"]?["code"] == .string("unauthorized"))
        #expect(!none.body.contains("s3cret"))
        let wrong = try await send(
            "POST", server.base + "/v1/ops", body: line, headers: [("Authorization", "Bearer s3cret-tokeN")])
        #expect(wrong.status == 401)
        let short = try await send(
            "POST", server.base + "/v1/ops", body: line, headers: [("Authorization", "Bearer s3cret")])
        #expect(short.status == 401)
        let right = try await send(
            "POST", server.base + "/v1/ops", body: line, headers: [("Authorization", "Bearer s3cret-token")])
        #expect(right.status == 200)
        #expect(try await send("GET", server.base + "/v1/teams/auth").status == 200)  // reads open
        let metrics = try await send("GET", server.base + "/metrics")
        #expect(!metrics.body.contains("s3cret"))
        try await server.stop()

        config.protectReads = true
        let protected = try await LiveServer(configuration: config)
        #expect(try await send("GET", protected.base + "/v1/teams/auth").status == 401)
        #expect(try await send("GET", protected.base + "/v1/status").status == 401)
        #expect(
            try await send("GET", protected.base + "/v1/status", headers: [("Authorization", "Bearer s3cret-token")])
                .status == 200)
        #expect(try await send("GET", protected.base + "/healthz").status == 200)
        try await protected.stop()
    }

    /// `Expect: 100-continue` (curl sends it before any body over 1 MiB, then waits a second for the answer)
    /// gets `100 Continue` at once; a Content-Length over `--body-limit` gets 413 before the body is sent,
    /// with no `100`; a form upload or a compressed body is 415 with nothing decided.
    @Test func expectContinueAndBodiesTheLineParserCannotRead() async throws {
        var config = ServerConfiguration()
        config.bodyLimit = 4096
        let server = try await LiveServer(configuration: config)
        // Blocking reads on a thread of the server's pool (`onThread`), not on one of Swift concurrency's few threads,
        // which the in-process server's handlers need (a loaded run waited out the 30 s timeout).
        let port = server.port
        func exchange(_ head: String, body: String = "") async throws -> String {
            try await onThread { try Self.exchangeBlocking(port, head, body) }
        }
        let line = op("team.create", "a", ["team": "ec", "name": "EC"]) + "\n"
        let continued = try await exchange(
            "POST /v1/ops HTTP/1.1\r\nHost: x\r\nContent-Length: \(line.utf8.count)\r\nExpect: 100-continue\r\n"
                + "Connection: close\r\n\r\n",
            body: line)
        #expect(continued.hasPrefix("HTTP/1.1 100 Continue\r\n\r\n"), "\(continued)")
        #expect(continued.contains(#""kind":"event""#), "the op, sent after the 100, is decided: \(continued)")
        let early = try await exchange(
            "POST /v1/ops HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\nExpect: 100-continue\r\n\r\n")
        #expect(early.hasPrefix("HTTP/1.1 413"), "\(early)")
        #expect(early.contains("payloadTooLarge"))
        let form = try await send(
            "POST", server.base + "/v1/ops",
            body: "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + op("team.create", "a", ["team": "f", "name": "F"])
                + "\r\n--b--\r\n",
            headers: [("Content-Type", "multipart/form-data; boundary=b")])
        #expect(form.status == 415 && form.json["error"]?["code"] == .string("unsupportedMediaType"), "\(form.body)")
        let gzip = try await send(
            "POST", server.base + "/v1/ops", body: line, headers: [("Content-Encoding", "gzip")])
        #expect(gzip.status == 415, "\(gzip.body)")
        // A transfer coding but chunked: 501, nothing decided (the still-gzipped chunk was parsed as lines).
        let chunk = op("team.create", "a", ["team": "te", "name": "T"]) + "\n"
        let coded = try await exchange(
            "POST /v1/ops HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
            body: String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n0\r\n\r\n")
        #expect(coded.contains("HTTP/1.1 501") && coded.contains("notImplemented"), "\(coded)")
        #expect(try await send("GET", server.base + "/v1/teams/te").status == 404)
        #expect(try await send("GET", server.base + "/v1/teams/f").status == 404, "nothing of the form was decided")
        try await server.stop()
    }

    /// A body of more lines than `--max-lines` is 413 `tooManyLines` with nothing decided: what a request
    /// holds grows with its lines (a trial's 16 MB of one-byte lines held 2.68 GB), which the byte limit
    /// alone did not bound. At the limit — a last line without its newline counted — it is decided.
    @Test func aBodyOfMoreLinesThanTheLimitIsRefusedWhole() async throws {
        var config = ServerConfiguration()
        config.maxLines = 3
        let server = try await LiveServer(configuration: config)
        let lines = (1...4).map { op("team.create", "a", ["team": "ml\($0)", "name": "M"]) }
        let over = try await send("POST", server.base + "/v1/ops", body: lines.joined(separator: "\n"))
        #expect(over.status == 413 && over.json["error"]?["code"] == .string("tooManyLines"), "\(over.body)")
        #expect(over.body.contains("holds 4 lines, over the 3-line limit"))
        for i in 1...4 { #expect(try await send("GET", server.base + "/v1/teams/ml\(i)").status == 404) }
        let at = try await send("POST", server.base + "/v1/ops", body: lines.prefix(3).joined(separator: "\n"))
        #expect(at.status == 200 && at.body.split(separator: "\n").filter { $0.contains(#""kind":"event""#) }.count == 3)
        try await server.stop()
    }

    /// An `application/json` body that is one object over several lines (pretty-printed) is one op; JSON
    /// Lines sent as `application/json` are still lines. Before, each line of the object was `badJSON`.
    @Test func aPrettyPrintedJSONBodyIsOneOp() async throws {
        let server = try await LiveServer()
        let json = [("Content-Type", "application/json")]
        let pretty = try await send(
            "POST", server.base + "/v1/ops", body: "{\n  \"op\": \"team.create\",\r\n  \"actor\": \"a\",\n  \"team\": \"pp\",\n  \"name\": \"P\"\n}\n",
            headers: json)
        let records = pretty.body.split(separator: "\n")
        #expect(pretty.status == 200 && records.count >= 1 && records[0].contains(#""kind":"event""#), "\(pretty.body)")
        #expect(!pretty.body.contains("rejected"))
        let twoLines = [op("team.create", "a", ["team": "pq", "name": "Q"]), op("team.create", "a", ["team": "pr", "name": "R"])]
        let lines = try await send("POST", server.base + "/v1/ops", body: twoLines.joined(separator: "\n"), headers: json)
        #expect(lines.body.split(separator: "\n").filter { $0.contains(#""kind":"event""#) }.count == 2, "\(lines.body)")
        try await server.stop()
    }

    /// Writes `head`, reads what comes before any body, then writes `body` and reads the answer to it.
    static func exchangeBlocking(_ port: Int, _ head: String, _ body: String) throws -> String {
        let fd = try connectLoopback(port)
        defer { close(fd) }
        let bytes = Array(head.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }  // before any body
        if n > 0 { answer += buffer[0..<n] }
        if !body.isEmpty {
            let rest = Array(body.utf8)
            _ = rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            while true {  // to the end: the request says `Connection: close`
                let m = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if m <= 0 { break }
                answer += buffer[0..<m]
            }
        }
        return String(decoding: answer, as: UTF8.self)
    }

    @Test func badRequestsGetTheirStatusAndNeverWedgeTheServer() async throws {
        var config = ServerConfiguration()
        config.bodyLimit = 4096
        let server = try await LiveServer(configuration: config)
        let big = String(repeating: op("team.create", "a", ["team": "big", "name": "B"]) + "\n", count: 200)
        let tooLarge = try await send("POST", server.base + "/v1/ops", body: big)
        #expect(tooLarge.status == 413)
        #expect(tooLarge.json["error"]?["code"] == .string("payloadTooLarge"))
        let wrongMethod = try await send("PUT", server.base + "/v1/ops", body: "{}")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.header("allow") == "POST")
        #expect(try await send("POST", server.base + "/v1/teams/x").status == 405)
        let unknown = try await send("GET", server.base + "/v2/nothing")
        #expect(unknown.status == 404)
        #expect(unknown.json["error"]?["code"] == .string("notFound"))
        // Malformed lines are records, not HTTP errors; the numbering is the body's.
        let mixed = try await send(
            "POST", server.base + "/v1/ops",
            body: "not json\n\n" + op("team.create", "a", ["team": "ok", "name": "OK"])
                + "\r\n{\"op\":\"nope\",\"actor\":\"a\"}")
        #expect(mixed.status == 200)
        let kinds = mixed.lines.map { ($0["kind"]?.stringValue ?? "", $0["line"]) }
        #expect(kinds.count >= 3)
        #expect(kinds[0].0 == "rejected" && kinds[0].1 == .int(1))
        #expect(mixed.lines[0]["code"] == .string("badJSON"))
        #expect(kinds.contains { $0.0 == "event" && $0.1 == .int(3) })
        #expect(mixed.lines.last?["code"] == .string("unknownOp") && mixed.lines.last?["line"] == .int(4))
        #expect(try await send("GET", server.base + "/healthz").status == 200)
        #expect(try await send("GET", server.base + "/readyz").json["ready"] == .bool(true))
        try await server.stop()
    }

    /// A connection that sends nothing for `idleTimeoutSeconds` — a body that stops arriving, or no request
    /// at all — is closed, and nothing of the unfinished request is decided (an integrator's trial saw a
    /// stalled upload held open with no end); a record stream, a response being sent, stays open past it.
    @Test func aConnectionThatSendsNothingIsClosedButAStreamIsNot() async throws {
        var configuration = ServerConfiguration()
        configuration.idleTimeoutSeconds = 0.5
        let server = try await LiveServer(configuration: configuration)
        let started = MonotonicClock.seconds()
        let stalled = try await sendRawUntilClosed(
            Array("POST /v1/ops HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"op\"".utf8), port: server.port,
            receiveTimeoutSeconds: 60)
        let stalledFor = MonotonicClock.seconds() - started
        #expect(stalled.answer.isEmpty, "\(stalled.answer)")
        // Closed by the server (an end of file or a reset, not the client's read timing out), and not before the idle
        // timeout. No tight bound on time: in the full suite, this test's task waits for one of Swift
        // concurrency's threads, which the synchronous tests hold, and the exchange itself ran on Dispatch's
        // global queue before `BlockingPool` (on Linux, about a second per blocked call ahead). In the
        // thirty-ninth session, three full runs had the connection still open at a 10 s client timeout;
        // what held it is not known.
        #expect(
            stalled.closedByServer && stalledFor >= 0.4,
            "closed by the server: \(stalled.closedByServer), after \(stalledFor) s")
        let quiet = try await sendRawUntilClosed([], port: server.port, receiveTimeoutSeconds: 60)
        #expect(quiet.answer.isEmpty && quiet.closedByServer)
        #expect(try await send("GET", server.base + "/v1/status").json["headSeq"] == .int(0), "nothing was decided")
        // A stream subscribed now outlives three timeouts and still delivers.
        let stream = Task { try await readEvents(server.base + "/v1/records?from=1") { $0.contains { $0.id == 1 } } }
        try await Task.sleep(for: .milliseconds(1_500))
        _ = try await send("POST", server.base + "/v1/ops", body: op("client.login", "zed", ["device": "d"]))
        let (status, events) = try await stream.value
        #expect(status == 200 && events.contains { $0.id == 1 })
        try await server.stop()
    }

    /// What a fuzzer sent (schemathesis and hand-made requests, twenty-eighth session): broken framing of a
    /// body is the client's error (400, not 500 `internal`), an id no op could name is 400 `badId` (not
    /// decoded lossily: `%FF` named the team "\u{FFFD}"), every seq parameter is 1…2^63−1, and methods the
    /// router does not know on a known path are 405 with `Allow`.
    @Test func hostileRequestsAreTheClientsErrors() async throws {
        let server = try await LiveServer()
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        let chunked = try await sendRaw(
            Array("POST /v1/ops HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZZ\r\n".utf8),
            port: server.port)
        #expect(chunked.hasPrefix("HTTP/1.1 400"), "\(chunked)")
        #expect(chunked.contains(#""code":"badRequest""#), "\(chunked)")
        let short = try await sendRaw(
            Array("POST /v1/ops HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"op\"".utf8), port: server.port,
            halfClose: true)
        #expect(short.isEmpty || short.hasPrefix("HTTP/1.1 400"), "\(short)")
        // Sent as raw bytes: an HTTP client may normalize a path's escapes before sending it.
        func get(_ target: String) async throws -> (status: Int, json: JSONValue) {
            let answer = try await sendRaw(Array("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), port: server.port)
            let status = Int(answer.split(separator: " ").dropFirst().first ?? "") ?? 0
            let body = answer.range(of: "\r\n\r\n").map { String(answer[$0.upperBound...]) } ?? ""
            return (status, (try? JSONParser.parse(body)) ?? .null)
        }
        for path in [
            "/v1/teams/%FF", "/v1/users/%00/unread", "/v1/users/" + String(repeating: "u", count: 129) + "/unread",
            "/v1/messages/%C0%80", "/v1/channels/%7F", "/v1/log?team=%FF", "/v1/log?team=",
        ] {
            let reply = try await get(path)
            #expect(reply.status == 400, "\(path)")
            #expect(reply.json["error"]?["code"] == .string("badId"), "\(path): \(reply.json)")
        }
        // A valid id, percent-encoded, is still that id.
        let encoded = try await get("/v1/teams/%6Fps")
        #expect(encoded.status == 200)
        #expect(encoded.json == (try await send("GET", server.base + "/v1/teams/ops").json))
        for path in [
            "/v1/log?from=0", "/v1/log?to=0", "/v1/log?from=9223372036854775808", "/v1/teams/ops?at=0",
            "/v1/teams/ops?at=99999999999999999999", "/v1/records?from=9223372036854775808",
        ] {
            let reply = try await send("GET", server.base + path)
            #expect(reply.status == 400, "\(path)")
            #expect(reply.json["error"]?["code"] == .string("badRequest"), "\(path): \(reply.body)")
        }
        for method in ["OPTIONS", "TRACE", "QUERY"] {
            let reply = try await send(method, server.base + "/v1/status")
            #expect(reply.status == 405, "\(method)")
            #expect(reply.header("allow") == "GET, HEAD", "\(method)")
            #expect(reply.json["error"]?["code"] == .string("methodNotAllowed"), "\(method)")
        }
        // HEAD (load-balancer probes): the GET's status and headers, no body — a missing id's 404 too; and
        // the connection goes on with the next request (no stray body bytes in it). Not on the streams.
        let heads = try await sendRaw(
            Array(
                ("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nHEAD /v1/teams/nope HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").utf8), port: server.port)
        let statuses = heads.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
        #expect(statuses.map { String($0.prefix(12)) } == ["HTTP/1.1 200", "HTTP/1.1 404", "HTTP/1.1 200"], "\(heads)")
        #expect(heads.components(separatedBy: #""ready":true"#).count == 2, "only the GET has a body: \(heads)")
        #expect(!heads.contains(#""code":"notFound""#) && !heads.contains("noSuchTeam"), "\(heads)")
        #expect(try await send("HEAD", server.base + "/v1/log").status == 405)
        // Its Content-Length is the GET's (RFC 9110 §8.6), not 0 (a trial).
        for path in ["/healthz", "/v1/teams/nope", "/openapi.yaml"] {
            let get = try await send("GET", server.base + path)
            let head = try await send("HEAD", server.base + path)
            #expect(head.header("content-length") == String(get.body.utf8.count), "\(path): \(head.headers)")
        }
        let metrics = try await send("GET", server.base + "/metrics").body
        #expect(!metrics.contains(#"status="500""#), "\(metrics)")
        #expect(try await send("GET", server.base + "/readyz").json["ready"] == .bool(true))
        try await server.stop()
    }

    /// A POST's output records grow with its teams' sizes, not its body's (one send to a 200,000-member
    /// team is an 8 MB delivery; 1,000 sends to a 20,000-member team answered 360 MB, held until sent).
    /// Past `maxResponseBytes` the answer keeps every event record, leaves the other outputs out and says
    /// how many and from which seq; the record stream has them. The same POST to an uncapped server
    /// answers kept + omitted outputs.
    @Test func anAnswerPastItsOutputCapSaysWhatItLeftOut() async throws {
        let members = (0..<40).map { "\"u\($0)\"" }.joined(separator: ",")
        let lines =
            [#"{"op":"team.create","actor":"owner","ts":1,"team":"t","members":["# + members + #"]}"#]
            + (0..<20).map {
                #"{"op":"message.send","actor":"owner","ts":\#(2 + $0),"to":{"type":"team","id":"t"},"messageId":"m\#($0)","content":{"type":"text","text":"hi"}}"#
            }
        func outputs(_ text: String) -> [String] {
            text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix(#"{"kind":"event""#) }
        }
        var capped = ServerConfiguration()
        capped.maxResponseBytes = 4_096
        let server = try await LiveServer(configuration: capped)
        let reply = try await send("POST", server.base + "/v1/ops", body: body(lines))
        #expect(reply.status == 200)
        let events = reply.body.split(separator: "\n").filter { $0.hasPrefix(#"{"kind":"event""#) }
        #expect(events.count == 21, "every event record is answered")
        let kept = outputs(reply.body)
        let omitted = try #require(reply.header("Teamlog-Outputs-Omitted").flatMap { Int($0) })
        let from = try #require(reply.header("Teamlog-Outputs-Omitted-From-Seq").flatMap { UInt64($0) })
        #expect(omitted > 0 && !kept.isEmpty && kept.joined().utf8.count < 4_096 * 2)
        let uncapped = try await LiveServer()
        let full = try await send("POST", uncapped.base + "/v1/ops", body: body(lines))
        #expect(full.header("Teamlog-Outputs-Omitted") == nil)
        let all = outputs(full.body)
        #expect(kept.count + omitted == all.count)
        #expect(Array(all.prefix(kept.count)) == kept, "the first outputs are kept, in order")
        // What was left out, from the record stream at that seq.
        let stream = try await readEvents(server.base + "/v1/records?from=\(from)") { $0.last?.id == 21 }
        let streamed = stream.events.flatMap(\.data).filter { !$0.hasPrefix(#"{"kind":"event""#) }
        #expect(Array(all.suffix(omitted)) == Array(streamed.suffix(omitted)))
        try await server.stop()
        try await uncapped.stop()
    }

    /// `/metrics` shows the pool for blocking work: three calls held blocked there are three busy threads at
    /// least (the pool is the process's, so other tests' calls may add to them), and the calls waiting for a
    /// thread are shown (none here but another test's call in the moment before its new thread takes it).
    @Test func metricsShowTheBlockingPool() async throws {
        let server = try await LiveServer()
        let hold = Gate()
        for _ in 0..<3 { blockingWork.submit { hold.pass() } }
        defer { hold.open() }
        #expect(hold.waitForArrivals(3, timeoutMs: 30_000))
        let body = try await send("GET", server.base + "/metrics").body
        func gauge(_ name: String) -> Double? {
            let line = body.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            return line.flatMap { Double($0.split(separator: " ")[1]) }
        }
        let threads = gauge("teamlog_blocking_threads")
        let busy = gauge("teamlog_blocking_busy_threads")
        let queued = gauge("teamlog_blocking_queued_calls")
        #expect((busy ?? 0) >= 3 && (threads ?? 0) >= (busy ?? .infinity), "\(body)")
        #expect(queued != nil && body.contains("# HELP teamlog_blocking_queued_calls "), "\(body)")
        try await server.stop()
    }

    @Test func metricsCountOpsCommitsAndRequests() async throws {
        let server = try await LiveServer()
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines + ["nope", exampleLines[0]]))
        _ = try await send("GET", server.base + "/v1/teams/ops")
        _ = try await send("GET", server.base + "/v1/teams/none")
        let text = try await send("GET", server.base + "/metrics")
        #expect(text.status == 200)
        #expect(text.header("content-type")?.hasPrefix("text/plain") == true)
        let body = text.body
        #expect(body.contains("teamlog_ops_accepted_total \(exampleLines.count)"))
        #expect(body.contains("teamlog_ops_rejected_total{code=\"badJSON\"} 1"))
        #expect(body.contains("teamlog_ops_duplicates_total 0") || body.contains("teamlog_ops_duplicates_total"))
        #expect(body.contains("teamlog_commit_duration_seconds_count 1"))
        #expect(body.contains("teamlog_commit_batch_ops_sum \(exampleLines.count + 2)"))
        #expect(body.contains("teamlog_checkpoint_lag_events"))
        #expect(body.contains("teamlog_store_bytes{env=\"log\"}"))
        #expect(body.contains("teamlog_store_free_bytes{env=\"log\"}"))
        #expect(body.contains("teamlog_store_free_bytes{env=\"proj\"}"))
        #expect(body.contains("teamlog_store_read_ahead 1"))  // a small store on a machine with room
        #expect(body.contains("teamlog_working_set_hit_ratio "))
        // Cumulative counts are counters (`rate()` needs the type); a new store loads nothing from LMDB.
        #expect(body.contains("# TYPE teamlog_working_set_loads_total counter"), "\(body)")
        #expect(body.contains("# TYPE teamlog_working_set_evictions_total counter"))
        #expect(body.contains("teamlog_working_set_loads_total 0"), "\(body)")
        // Every committed event is retained (far under both limits): as many as the head seq.
        let head = try await send("GET", server.base + "/v1/status").json["headSeq"]?.intValue ?? -1
        #expect(body.contains("teamlog_record_window_events \(Double(head))"), "head \(head)")
        #expect(body.contains("teamlog_record_window_bytes "))
        #expect(body.contains("teamlog_working_set_budget_bytes \(Double(Store.defaultCacheBytes))"))
        #expect(
            body.contains(
                "teamlog_http_request_duration_seconds_count{route=\"/v1/teams/{team}\",method=\"GET\",status=\"404\"} 1"
            ))
        #expect(
            body.contains(
                "teamlog_http_request_duration_seconds_count{route=\"/v1/ops\",method=\"POST\",status=\"200\"} 1"))
        // Every teamlog metric says what it is: a `# HELP` line right before its `# TYPE` line.
        let lines = body.split(separator: "\n").map(String.init)
        let typed = lines.indices.filter { lines[$0].hasPrefix("# TYPE teamlog_") }
        #expect(typed.count >= 15)
        for i in typed {
            let name = lines[i].split(separator: " ")[2]
            #expect(i > 0 && lines[i - 1].hasPrefix("# HELP \(name) ") && lines[i - 1].count > "# HELP \(name) ".count + 10, "\(name)")
        }
        #expect(body.contains("# HELP teamlog_ops_accepted_total Ops accepted and committed to the log.\n# TYPE teamlog_ops_accepted_total counter"))
        // A standalone server exports no partition metrics.
        #expect(!body.contains("teamlog_nats_"))
        try await server.stop()
    }

    /// A subscriber of an idle store learns at once that it is connected: the response head and a comment
    /// come before any event (they waited for the first event or the 15 s heartbeat); and a path no route
    /// matches is counted under `route="unmatched"` (it was Hummingbird's "NotFound").
    @Test func anIdleStreamOpensAtOnceAndUnmatchedPathsAreLabelled() async throws {
        let server = try await LiveServer()
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: server.base + "/v1/records"), timeout: .seconds(5))
        #expect(response.status.code == 200)
        var first = ""
        for try await buffer in response.body {
            first = String(buffer: buffer)
            break
        }
        #expect(first.hasPrefix(": connected"), "\(first)")
        #expect(try await send("GET", server.base + "/nope").status == 404)
        let metrics = try await send("GET", server.base + "/metrics").body
        #expect(
            metrics.contains("teamlog_http_request_duration_seconds_count{route=\"unmatched\",method=\"GET\",status=\"404\"} 1"),
            "\(metrics.split(separator: "\n").filter { $0.contains("404") })")
        server.writer.window?.close()
        try await server.stop()
    }

    /// The store's directory removed under a running server: the next write is not acknowledged (500
    /// `storeFailed`) and `/readyz` says so — LMDB went on committing into the unlinked file, and the server
    /// answered 200 and stayed ready for ops that were gone with the process.
    @Test func aStoreRemovedUnderTheServerFailsItsNextWrite() async throws {
        let server = try await LiveServer()
        #expect(try await send("POST", server.base + "/v1/ops", body: body(exampleLines)).status == 200)
        removeDirectoryTree(server.path)
        let after = try await send("POST", server.base + "/v1/ops", body: op("client.login", "zed", ["device": "d"]))
        #expect(after.status == 500 && after.json["error"]?["code"] == .string("storeFailed"), "\(after.body)")
        let ready = try await send("GET", server.base + "/readyz")
        #expect(ready.status == 503 && ready.body.contains("was removed while this writer ran"), "\(ready.body)")
        // Only a restart resumes a failed store: liveness says so (it answered 200 "ok" for good).
        let health = try await send("GET", server.base + "/healthz")
        #expect(health.status == 503 && health.json["status"] == .string("failed"), "\(health.body)")
        #expect(after.body.contains("until it is restarted"), "\(after.body)")
        try? await server.stop()
    }

    /// Checkpoints that fail (the projections' file system full) while the log goes on: the server stays
    /// ready, but says so at once — `/readyz`'s `checkpointProblem`, `teamlog_checkpoint_failing` 1 — where it
    /// said nothing and showed a stale lag; with room again the next checkpoint catches up and both clear.
    @Test(.enabled(if: canMountTmpfs, "mounting a tmpfs is not allowed here (needs root)"))
    func failingCheckpointsAreSaidAndClearWhenOneSucceeds() async throws {
        let directory = TemporaryDirectory("teamlog-http-checkpoint")
        let fs = try #require(Tmpfs(size: "1m"))
        mkdir(directory.child("store"), 0o755)
        #expect(symlink(fs.path, directory.child("store") + "/proj") == 0)
        var options = WriterService.Options()
        options.store.noSync = true
        options.store.checkpointOps = 200
        let server = try await LiveServer(options: options, directory: directory)
        let create = #"{"op":"team.create","actor":"a","ts":1000,"team":"t","members":["b","c"]}"#
        #expect(try await send("POST", server.base + "/v1/ops", body: body([create])).status == 200)
        let padding = String(repeating: "x", count: 1_500)
        var batch = 0
        func post() async throws {
            let lines = (0..<100).map { i in
                #"{"op":"message.send","actor":"a","ts":2000,"opId":"o\#(batch)-\#(i)","to":{"type":"team","id":"t"},"messageId":"m\#(batch)-\#(i)","content":{"type":"text","text":"\#(padding)"}}"#
            }
            batch += 1
            #expect(try await send("POST", server.base + "/v1/ops", body: body(lines)).status == 200, "the log goes on")
        }
        var ready = try await send("GET", server.base + "/readyz")
        while batch < 60 && ready.json["checkpointProblem"] == nil {
            try await post()
            try await Task.sleep(for: .milliseconds(20))
            ready = try await send("GET", server.base + "/readyz")
        }
        #expect(ready.status == 200 && ready.json["ready"] == .bool(true), "\(ready.body)")
        #expect(ready.json["checkpointProblem"]?.stringValue?.contains("no space left on device") == true, "\(ready.body)")
        #expect(try await send("GET", server.base + "/metrics").body.contains("teamlog_checkpoint_failing 1"))

        try fs.resize("64m")
        try await post()
        for _ in 0..<200 where ready.json["checkpointProblem"] != nil {
            try await Task.sleep(for: .milliseconds(50))
            ready = try await send("GET", server.base + "/readyz")
        }
        #expect(ready.json["checkpointProblem"] == nil, "\(ready.body)")
        let metrics = try await send("GET", server.base + "/metrics").body
        #expect(metrics.contains("teamlog_checkpoint_failing 0") && metrics.contains("teamlog_checkpoint_lag_events 0"))
        try await server.stop()
        let store = try Store.reader(at: server.path)
        defer { store.close() }
        #expect(try store.audit().ok)
    }

    /// A streamed body is timed to its end, not to its head: a record stream held open for 400 ms is
    /// recorded (once the client has gone) with at least that duration.
    @Test func aStreamedResponseIsTimedToItsEnd() async throws {
        let server = try await LiveServer()
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        let head = try await send("GET", server.base + "/v1/status").json["headSeq"]?.intValue ?? 0
        async let stream = readEvents(server.base + "/v1/records?from=\(head + 1)") { !$0.isEmpty }
        try await Task.sleep(for: .milliseconds(400))
        let update = op(
            "team.update", "alice", ["team": "ops", "fields": ["intro": "a"] as KeyValuePairs<String, Any>])
        _ = try await send("POST", server.base + "/v1/ops", body: update)
        #expect(try await stream.events.count == 1)
        let series = "teamlog_http_request_duration_seconds_sum{route=\"/v1/records\",method=\"GET\",status=\"200\"} "
        // The stream's body ends when the window closes (as at a stop), whether or not the server has seen
        // the client go yet; only then is its duration recorded.
        server.writer.window?.close()
        var seconds: Double?
        for _ in 0..<400 where seconds == nil {
            let text = try await send("GET", server.base + "/metrics").body
            seconds = text.split(separator: "\n").first { $0.hasPrefix(series) }.flatMap {
                Double($0.dropFirst(series.count))
            }
            if seconds == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        // Held open 400 ms by the client, but its request reaches the server some ms after that wait began
        // (0.383 s was recorded in a loaded fresh-clone CI run); timed to the head alone it would be ~1 ms.
        #expect((seconds ?? 0) >= 0.25, "the record stream's duration: \(seconds.map { "\($0) s" } ?? "not recorded")")
        try await server.stop()
    }

    @Test func readinessAndAStoreThatCannotOpen() async throws {
        // Another writer holds the store: the server answers, but is not ready, and says why.
        let dir = TemporaryDirectory("teamlog-http")
        var options = Store.Options()
        options.noSync = true
        let holder = try Store(path: dir.child("store"), options: options)
        defer { holder.close() }
        let server = try await LiveServer(directory: dir)
        let ready = try await send("GET", server.base + "/readyz")
        #expect(ready.status == 503)
        #expect(ready.json["state"] == .string("failed"))
        // A failed store is resumed by a restart only (here, once the other writer lets go): not alive.
        #expect(try await send("GET", server.base + "/healthz").status == 503)
        let post = try await send("POST", server.base + "/v1/ops", body: exampleLines[0])
        #expect(post.status == 503)
        try await server.stop()
    }
}

@Suite(.serialized) struct SlowClientTests {
    /// A client that sends half a body and stalls holds no one up: the writer only ever sees whole bodies,
    /// so other clients' requests commit and are answered meanwhile.
    @Test func aStalledUploadDoesNotStallOtherClientsCommits() async throws {
        let server = try await LiveServer()
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
        continuation.yield(ByteBuffer(string: op("team.create", "slow", ["team": "slow", "name": "S"]) + "\n"))
        let stalled = Task {
            var request = HTTPClientRequest(url: server.base + "/v1/ops")
            request.method = .POST
            request.body = .stream(stream, length: .unknown)
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
            return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 20)))
        }
        try await Task.sleep(for: .milliseconds(200))
        // While the upload stalls, other clients' ops commit and are answered (a writer that waited for the
        // stalled body would answer none of them: each request would time out).
        for i in 0..<5 {
            let reply = try await send(
                "POST", server.base + "/v1/ops", body: op("team.create", "fast", ["team": "fast\(i)", "name": "F"]),
                timeout: 60)
            #expect(reply.lines.first?["kind"] == .string("event"))
        }
        #expect(try await send("GET", server.base + "/v1/teams/fast4").status == 200)
        #expect(try await send("GET", server.base + "/v1/teams/slow").status == 404)  // not sent whole yet
        // The upload ends: its ops are decided then, after the others.
        continuation.yield(ByteBuffer(string: op("team.invite", "slow", ["team": "slow", "targets": ["x"]]) + "\n"))
        continuation.finish()
        let (status, records) = try await stalled.value
        #expect(status == 200)
        #expect(records.contains("\"seq\":6,"))
        #expect(try await send("GET", server.base + "/v1/teams/slow").status == 200)
        try await server.stop()
    }
}

