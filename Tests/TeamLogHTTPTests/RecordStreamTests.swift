@testable import TeamLog
@testable import TeamLogHTTP
import TeamLogRuntime
import TeamLogWorkload
import TestSupport
import Testing

/// The records of responses that belong to the stream (every record with a seq, but `duplicate`).
func streamable(_ replies: [Reply]) -> [String] {
    replies.flatMap { reply in
        reply.body.split(separator: "\n").map(String.init).filter { line in
            let record = (try? JSONParser.parse(line)) ?? .null
            return record["kind"] != .string("rejected") && record["kind"] != .string("duplicate")
        }
    }
}

@Suite(.serialized) struct RecordStreamTests {
    @Test func aStreamResumedAfterADisconnectLosesAndRepeatsNothing() async throws {
        let server = try await LiveServer()
        var replies: [Reply] = []
        replies.append(try await send("POST", server.base + "/v1/ops", body: body(exampleLines)))
        // A subscriber from seq 1 leaves after 5 events.
        let first = try await readEvents(server.base + "/v1/records?from=1") { $0.count >= 5 }
        #expect(first.status == 200)
        #expect(first.events.count == 5)
        #expect(first.events.map(\.id) == [1, 2, 3, 4, 5])
        // More ops while it is away; a live subscriber (from the next seq) sees them as they commit.
        let head = try await send("GET", server.base + "/v1/status").json["headSeq"]?.intValue ?? 0
        async let live = readEvents(server.base + "/v1/records?from=\(head + 1)") { events in
            events.contains { $0.id == UInt64(head) + 3 }
        }
        try await Task.sleep(for: .milliseconds(100))
        for i in 0..<3 {
            replies.append(
                try await send(
                    "POST", server.base + "/v1/ops",
                    body: op(
                        "team.update", "alice",
                        ["team": "ops", "fields": ["intro": "v\(i)"] as KeyValuePairs<String, Any>])))
        }
        let liveEvents = try await live.events
        #expect(liveEvents.map(\.id) == [UInt64(head) + 1, UInt64(head) + 2, UInt64(head) + 3])
        // Resume after the last event seen: the rest, no record lost or repeated.
        let total = UInt64(head) + 3
        let resumed = try await readEvents(server.base + "/v1/records", headers: [("Last-Event-ID", "5")]) { events in
            events.last?.id == total
        }
        let seen = first.events + resumed.events
        #expect(seen.compactMap(\.id) == Array(1...total))
        #expect(seen.flatMap(\.data) == streamable(replies))
        // `from` works the same as Last-Event-ID + 1.
        let from = try await readEvents(server.base + "/v1/records?from=6") { $0.last?.id == total }
        #expect(from.events == resumed.events)
        // An EventSource opened with `?from=1` reconnects to that URL with `Last-Event-ID`: the header wins,
        // so it goes on after the last event seen instead of starting over.
        let reconnected = try await readEvents(
            server.base + "/v1/records?from=1", headers: [("Last-Event-ID", "5")]
        ) { $0.last?.id == total }
        #expect(reconnected.events == resumed.events)
        try await server.stop()
    }

    @Test func aSeqOlderThanTheWindowIsGoneWithTheOldestKeptWithoutCatchUp() async throws {
        var options = WriterService.Options()
        options.store.noSync = true
        options.streamWindow = 4
        var configuration = ServerConfiguration()
        configuration.streamCatchUp = false
        let server = try await LiveServer(configuration: configuration, options: options)
        let reply = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        let head = reply.lines.compactMap { $0["seq"]?.intValue }.max() ?? 0
        let gone = try await send("GET", server.base + "/v1/records?from=1")
        #expect(gone.status == 410)
        #expect(gone.json["error"]?["code"] == .string("gone"))
        #expect(gone.json["error"]?["oldestSeq"] == .int(head - 3))
        let kept = try await readEvents(server.base + "/v1/records?from=\(head - 3)") { $0.last?.id == UInt64(head) }
        #expect(kept.events.compactMap(\.id) == (UInt64(head - 3)...UInt64(head)).map { $0 })
        #expect(try await send("GET", server.base + "/v1/records?from=zero").status == 400)
        try await server.stop()
    }

    /// A record line with its `event` record's `line` made 0, as records re-derived from the log have it.
    static func lineZero(_ data: String) -> String {
        guard data.hasPrefix(#"{"kind":"event","line":"#), let comma = data.firstIndex(of: ",") else { return data }
        let rest = data[data.index(after: comma)...]
        guard let next = rest.firstIndex(of: ",") else { return data }
        return #"{"kind":"event","line":0"# + data[next...]
    }

    /// From a seq the window no longer holds, the stream catches up from the log: the records re-derived
    /// (the `event` records' `line` 0), then the live window, each event once, no gap — and more ops
    /// committed meanwhile follow live.
    @Test func aSeqOlderThanTheWindowIsCaughtUpFromTheLog() async throws {
        var options = WriterService.Options()
        options.store.noSync = true
        options.streamWindow = 4
        let server = try await LiveServer(options: options)
        var replies: [Reply] = []
        replies.append(try await send("POST", server.base + "/v1/ops", body: body(exampleLines)))
        var workload = MixedWorkload(options: .init(seed: 3, users: 60, teams: 5, maxTeam: 40))
        for _ in 0..<4 {
            replies.append(
                try await send("POST", server.base + "/v1/ops", body: body((0..<60).map { _ in workload.next() })))
        }
        let head = UInt64(try await send("GET", server.base + "/v1/status").json["headSeq"]?.intValue ?? 0)
        #expect(head > 200)
        let before = streamable(replies).map(Self.lineZero)
        #expect(before.contains { $0.hasPrefix(#"{"kind":"delivery""#) })
        async let caughtUp = readEvents(server.base + "/v1/records?from=1") { $0.last?.id == head + 3 }
        // Ops committed while it catches up (or after): live, with their request's lines.
        var after: [Reply] = []
        for i in 0..<3 {
            after.append(
                try await send(
                    "POST", server.base + "/v1/ops",
                    body: op(
                        "team.update", "alice",
                        ["team": "ops", "fields": ["intro": "w\(i)"] as KeyValuePairs<String, Any>])))
        }
        let events = try await caughtUp.events
        #expect(events.compactMap(\.id) == Array(1...head + 3), "each event once, in order")
        let data = events.flatMap(\.data)
        #expect(data.count == before.count + streamable(after).count)
        #expect(Array(data.prefix(before.count)).map(Self.lineZero) == before)
        #expect(data.prefix(before.count).allSatisfy { Self.lineZero($0) == $0 }, "re-derived: line 0")
        let live = streamable(after)
        let tail = Array(data.suffix(live.count))
        // The three later ops are streamed either re-derived (if the catch-up reached them) or live.
        #expect(tail.map(Self.lineZero) == live.map(Self.lineZero))
        // From a seq in the middle, the same records from there.
        let middle = try await readEvents(server.base + "/v1/records?from=100") { $0.last?.id == head + 3 }
        func normalized(_ list: [SSEEvent]) -> [SSEEvent] {
            list.map { SSEEvent(id: $0.id, name: $0.name, data: $0.data.map(Self.lineZero)) }
        }
        #expect(middle.events.first?.id == 100)
        #expect(normalized(middle.events) == normalized(events.filter { ($0.id ?? 0) >= 100 }))
        try await server.stop()
    }

    /// A catch-up takes a replay slot: with none free (the one slot held here, as a running replay holds
    /// it) it is 503 `replayBusy` with Retry-After. (With `--at-replays 0` there is no catch-up at all: 410,
    /// `ServeTests.atReplaysBoundTheReplaysRunningAtOnce`.)
    @Test func aCatchUpWithoutAReplaySlotIsBusy() async throws {
        var options = WriterService.Options()
        options.store.noSync = true
        options.streamWindow = 4
        let server = try await LiveServer(options: options)
        _ = try await send("POST", server.base + "/v1/ops", body: body(exampleLines))
        #expect(server.server.atReplays.take(), "the one slot is free")
        let busy = try await send("GET", server.base + "/v1/records?from=1")
        #expect(busy.status == 503)
        #expect(busy.json["error"]?["code"] == .string("replayBusy"))
        #expect(busy.header("Retry-After") == "5")
        server.server.atReplays.give()
        try await server.stop()
    }

    static func event(_ seq: UInt64) -> Record { .event(line: 1, seq: seq, ts: 1000, op: "message.send") }

    @Test func theWindowKeepsTheLastSeqsAndWakesWaiters() async throws {
        let window = RecordWindow(capacity: 3, nextSeq: 10)
        #expect(window.read(from: 10) == .nothingYet)
        #expect(window.read(from: 9) == .gone(oldest: 10))
        async let woken: Void = window.wait(for: 10)
        window.publish((10...14).map { RecordWindow.Entry(seq: $0, records: [Self.event($0)]) })
        await woken
        #expect(window.oldestSeq == 12)
        #expect(window.read(from: 11) == .gone(oldest: 12))
        #expect(
            window.read(from: 13, limit: 5)
                == .entries([13, 14].map { RecordWindow.Entry(seq: $0, records: [Self.event($0)]) }))
        window.close()
        #expect(window.read(from: 15) == .closed)
        await window.wait(for: 100)  // returns at once once closed
    }

    /// The window is bounded by bytes as well as by seqs: the oldest entries go until the records fit,
    /// except the newest, kept whatever its size.
    @Test func theWindowKeepsOnlyTheRecordsThatFitItsBytes() {
        let window = RecordWindow(capacity: 100, maxBytes: 30, nextSeq: 1)
        func entry(_ seq: UInt64, _ size: Int) -> RecordWindow.Entry {
            RecordWindow.Entry(seq: seq, records: [], size: size)
        }
        window.publish([entry(1, 10), entry(2, 10), entry(3, 10)])
        #expect(window.oldestSeq == 1 && window.retained == (3, 30))
        window.publish([entry(4, 5)])
        #expect(window.oldestSeq == 2 && window.retained == (3, 25))
        #expect(window.read(from: 1) == .gone(oldest: 2))
        window.publish([entry(5, 100)])  // larger than the whole window: alone
        #expect(window.oldestSeq == 5 && window.retained == (1, 100))
        window.publish((6...40).map { entry($0, 1) })
        #expect(window.oldestSeq == 11 && window.retained == (30, 30))
        #expect(window.read(from: 11, limit: 2) == .entries([entry(11, 1), entry(12, 1)]))
        // Past the seq capacity too, wrapping the ring: still the newest that fit.
        window.publish((41...300).map { entry($0, 1) })
        #expect(window.oldestSeq == 271 && window.retained == (30, 30))
        #expect(window.read(from: 300) == .entries([entry(300, 1)]))
    }

    /// The window keeps records as values and its byte bound counts what they hold or encode to: a delivery
    /// weighs 24 bytes per listed id, counted from its list lengths (a team delivery's are bitsets until
    /// read), so a window of a few large deliveries keeps only as many as fit.
    @Test func aRecordWeighsTheIdsItHolds() throws {
        func delivery(_ seq: UInt64, _ n: Int, pad: Int) -> Record {
            let ids = (0..<n).map { Id("u\($0)" + String(repeating: "x", count: pad)) }
            return .output(
                .delivery(
                    Delivery(
                        seq: seq, to: Conversation(.team, "t"), messageId: "m\(seq)", receivers: ids, alerted: ids,
                        silenced: [])))
        }
        let small = delivery(1, 20, pad: 0).estimatedSize
        let short = delivery(1, 2_000, pad: 0).estimatedSize
        #expect(short >= 2 * 2_000 * MemoryLayout<Id>.stride)
        #expect(short > 50 * small)
        // A team's delivery weighs what its listed copy does.
        var world = World()
        var outputs: [Output] = []
        let members = (0..<300).map { "u\($0)" }
        for line in [
            op("team.create", "own", ["team": "t", "name": "T", "members": members]),
            op("member.setNotify", "u7", ["team": "t", "state": "none"]),
            JSONValue.object([
                ("op", .string("message.send")), ("actor", .string("u1")), ("messageId", .string("m")),
                ("to", .object([("type", .string("team")), ("id", .string("t"))])),
                ("content", .object([("type", .string("text")), ("text", .string("hi"))])),
            ]).jsonString,
        ] {
            guard case .success(let parsed) = OpParser.parse(line: line),
                case .success(let event) = world.decide(parsed, now: 1)
            else {
                Issue.record("rejected: \(line)")
                return
            }
            outputs.removeAll()
            world.apply(event, into: &outputs)
        }
        let team = try #require(outputs.compactMap { if case .delivery(let d) = $0 { d } else { nil } }.first)
        let listed = Delivery(
            seq: team.seq, to: team.to, messageId: team.messageId, receivers: team.receivers, alerted: team.alerted,
            silenced: team.silenced)
        #expect(team.receivers.count == 300 && team.silenced.count == 1)
        #expect(Record.output(.delivery(team)).estimatedSize == Record.output(.delivery(listed)).estimatedSize)
        let entry = RecordWindow.Entry(seq: 1, records: [Self.event(1), delivery(1, 2_000, pad: 0)])
        #expect(entry.size == Self.event(1).estimatedSize + short)
        let window = RecordWindow(capacity: 100, maxBytes: entry.size * 5 / 2, nextSeq: 1)
        window.publish((1...4).map { RecordWindow.Entry(seq: $0, records: [Self.event($0), delivery($0, 2_000, pad: 0)]) })
        #expect(window.oldestSeq == 3 && window.retained.events == 2)
    }

    /// Random batches, sizes and bounds against a model (every entry published; the window is the longest
    /// suffix within both bounds, the newest always kept): every read answers as the model says. Found a
    /// window whose byte bound dropped entries while it was still growing and then read an empty slot.
    @Test(arguments: 0..<40) func theWindowMatchesAModelUnderRandomBatches(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let capacity = Int(rng.next() % 20) + 1
        let maxBytes = Int(rng.next() % 60)
        let window = RecordWindow(capacity: capacity, maxBytes: maxBytes, nextSeq: 7)
        var all: [RecordWindow.Entry] = []
        for _ in 0..<60 {
            let batch = (0..<Int(rng.next() % 6)).map { i in
                RecordWindow.Entry(
                    seq: 7 + UInt64(all.count + i), records: [], size: Int(rng.next() % 12))
            }
            window.publish(batch)
            all += batch
            var kept = 0
            var bytes = 0
            while kept < all.count && kept < capacity {
                let size = all[all.count - 1 - kept].size
                if kept > 0 && bytes + size > maxBytes { break }
                kept += 1
                bytes += size
            }
            let oldest = 7 + UInt64(all.count - kept)
            #expect(window.oldestSeq == oldest)
            #expect(window.retained == (kept, bytes))
            if oldest > 7 { #expect(window.read(from: oldest - 1) == .gone(oldest: oldest)) }
            for from in oldest..<(7 + UInt64(all.count)) {
                let limit = Int(rng.next() % 8) + 1
                let expected = Array(all[Int(from - 7)...].prefix(limit))
                #expect(window.read(from: from, limit: limit) == .entries(expected))
            }
            #expect(window.read(from: 7 + UInt64(all.count)) == .nothingYet)
        }
    }
}
