import NATS
import NATSServer
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// JetStream against a real single `nats-server` with file storage: streams, de-duplication, pull
/// consumers with acks and redelivery, asynchronous publishing, stored-message reads.
@Suite  // no skip when nats-server is missing: tools/ensure-deps.sh installs it, and a missing server must fail
struct JetStreamTests {
    let directory = TemporaryDirectory("nats-js")
    let server: NATSServerProcess
    let connection: NATSConnection
    let js: JetStream

    init() throws {
        server = try NATSServerProcess.start(jetStream: true, storeDir: directory.child("store"))
        connection = try NATSConnection(.init(servers: [server.url]))
        js = try connection.jetStream(timeoutMs: 5_000)
    }

    @Test func ensureStreamIsIdempotentAndDeleteRemovesIt() throws {
        var config = JetStream.StreamConfig(name: "EVENTS", subjects: ["events.>"])
        config.duplicateWindowSeconds = 60
        #expect(try js.ensureStream(config))
        #expect(try !js.ensureStream(config))
        #expect(try js.streamLastSequence("EVENTS") == 0)
        #expect(try js.streamState("EVENTS")?.messages == 0)
        #expect(try js.streamState("MISSING") == nil)
        let missing = #expect(throws: NATSError.self) { try js.streamLastSequence("MISSING") }
        #expect(missing?.code == .notFound)
        try js.deleteStream("EVENTS")
        #expect(try js.streamState("EVENTS") == nil)
        let again = #expect(throws: NATSError.self) { try js.deleteStream("EVENTS") }
        #expect(again?.code == .notFound || again?.jetStreamCode == 10059)
    }

    @Test func publishWithTheSameMsgIdTwiceIsStoredOnce() throws {
        try js.ensureStream(.init(name: "DEDUP", subjects: ["dedup.>"]))
        let first = try js.publish("dedup.a", Array("x".utf8), msgId: "op-1")
        #expect(first == JetStream.PubAck(stream: "DEDUP", sequence: 1, duplicate: false))
        let second = try js.publish("dedup.a", Array("x".utf8), msgId: "op-1")
        #expect(second.duplicate)
        #expect(second.sequence == 1)
        #expect(try js.streamLastSequence("DEDUP") == 1)
        let third = try js.publish("dedup.a", Array("y".utf8), msgId: "op-2", headers: [("Kind", "test")])
        #expect(third == JetStream.PubAck(stream: "DEDUP", sequence: 2, duplicate: false))
        #expect(try js.streamState("DEDUP")?.messages == 2)

        // A subject no stream stores: no responders, an error rather than a hang.
        let error = #expect(throws: NATSError.self) { try js.publish("nostream.a", [1], timeoutMs: 1_000) }
        #expect(error?.code == .noResponders || error?.code == .timeout)
    }

    @Test func storedMessagesReadBackBySequence() throws {
        try js.ensureStream(.init(name: "STORED", subjects: ["stored.>"]))
        _ = try js.publish("stored.one", Array("first".utf8), headers: [("Op", "1")])
        _ = try js.publish("stored.two", Array("second".utf8))
        let message = try #require(try js.message(stream: "STORED", sequence: 1))
        #expect(message.subject == "stored.one")
        #expect(message.data == Array("first".utf8))
        #expect(message.header("Op") == "1")
        #expect(message.streamSequence == 1)
        #expect(try js.message(stream: "STORED", sequence: 2)?.data == Array("second".utf8))
        #expect(try js.message(stream: "STORED", sequence: 3) == nil)
    }

    @Test func pullConsumerFetchAckAndRedeliveryAfterResubscribe() throws {
        try js.ensureStream(.init(name: "WORK", subjects: ["work.>"]))
        for i in 1...6 { _ = try js.publish("work.items", Array("item \(i)".utf8), headers: [("N", "\(i)")]) }
        _ = try js.publish("work.other", Array("filtered out".utf8))

        do {
            let sub = try js.pullSubscribe(stream: "WORK", subject: "work.items", durable: "worker", ackWaitMs: 1_000)
            var got: [NATSMessage] = []
            let deadline = now() + 5
            while got.count < 6 && now() < deadline { got += try sub.fetch(batch: 6 - got.count, timeoutMs: 1_000) }
            #expect(got.map(\.streamSequence) == [1, 2, 3, 4, 5, 6])
            #expect(got.map(\.consumerSequence) == [1, 2, 3, 4, 5, 6])
            #expect(got.allSatisfy { $0.deliveredCount == 1 && $0.stream == "WORK" })
            #expect(got.first?.header("N") == "1")
            #expect(got.first?.data == Array("item 1".utf8))
            // Ack the first four only (the last one synchronously: the server confirmed every ack before).
            for message in got.prefix(3) { try sub.ack(message) }
            try sub.ackSync(got[3])
        }
        // The first subscription is gone; the durable consumer is not. After the ack wait the unacked two
        // come back (delivered a second time), the acked four never do.
        let again = try js.pullSubscribe(stream: "WORK", subject: "work.items", durable: "worker", ackWaitMs: 1_000)
        var redelivered: [NATSMessage] = []
        let deadline = now() + 6
        while redelivered.count < 2 && now() < deadline {
            redelivered += try again.fetch(batch: 10, timeoutMs: 1_000)
        }
        #expect(redelivered.map(\.streamSequence) == [5, 6])
        #expect(redelivered.allSatisfy { $0.deliveredCount == 2 })
        for message in redelivered { try again.ack(message) }
        try connection.flush(timeoutMs: 2_000)
        #expect(try again.fetch(batch: 10, timeoutMs: 1_500).isEmpty)

        // startSequence applies to a new durable.
        let late = try js.pullSubscribe(stream: "WORK", subject: "work.items", durable: "late", startSequence: 5)
        let fromFive = try late.fetch(batch: 10, timeoutMs: 2_000)
        #expect(fromFive.first?.streamSequence == 5)
        #expect(throws: NATSError.self) { try again.ack(NATSMessage(subject: "plain", data: [])) }
    }

    @Test func fetchTimesOutQuicklyWithAnEmptyBatch() throws {
        try js.ensureStream(.init(name: "QUIET", subjects: ["quiet.>"]))
        let sub = try js.pullSubscribe(stream: "QUIET", subject: "quiet.>", durable: "idle")
        let started = now()
        let batch = try sub.fetch(batch: 10, timeoutMs: 300)
        let elapsed = now() - started
        #expect(batch.isEmpty)
        #expect(elapsed >= 0.25)
        #expect(elapsed < 2)
    }

    @Test func tenThousandAsyncPublishesThenWait() throws {
        try js.ensureStream(.init(name: "BULK", subjects: ["bulk.>"]))
        let payload = [UInt8](repeating: 0x61, count: 64)
        for i in 0..<10_000 { try js.publishAsync("bulk.\(i % 8)", payload, msgId: "bulk-\(i)") }
        try js.waitForPublishes(timeoutMs: 30_000)
        #expect(try js.streamLastSequence("BULK") == 10_000)
        // Re-sending some ids inside the duplicate window stores nothing new.
        for i in 0..<100 { try js.publishAsync("bulk.0", payload, msgId: "bulk-\(i)") }
        try js.waitForPublishes(timeoutMs: 10_000)
        #expect(try js.streamState("BULK")?.messages == 10_000)
    }

    @Test func asyncPublishFailuresSurfaceInWaitForPublishes() throws {
        try js.ensureStream(.init(name: "GUARD", subjects: ["guard.>"]))
        // No stream stores "unrouted.x": the server answers with "no responders" for each.
        for _ in 0..<3 { try js.publishAsync("unrouted.x", [1]) }
        let error = #expect(throws: NATSError.self) { try js.waitForPublishes(timeoutMs: 5_000) }
        #expect(error?.code == .publishFailed)
        #expect(error?.message.contains("3 asynchronous") == true)
        // The failures were reported once; the context keeps working.
        try js.publishAsync("guard.ok", [1])
        try js.waitForPublishes(timeoutMs: 5_000)
        #expect(try js.streamLastSequence("GUARD") == 1)
    }

    /// Asynchronous publishes the stream acknowledged as duplicates are counted (and the count taken).
    @Test func duplicateAcksAreCounted() throws {
        try js.ensureStream(.init(name: "ACKS", subjects: ["acks.>"]))
        try js.publishAsync("acks.a", [1], msgId: "one")
        try js.publishAsync("acks.a", [2], msgId: "two")
        try js.publishAsync("acks.a", [3])
        try js.waitForPublishes(timeoutMs: 5_000)
        #expect(js.takeDuplicates() == 0)
        try js.publishAsync("acks.a", [1], msgId: "one")
        try js.publishAsync("acks.a", [2], msgId: "two")
        try js.publishAsync("acks.a", [3])
        try js.waitForPublishes(timeoutMs: 5_000)
        #expect(js.takeDuplicates() == 2)
        #expect(js.takeDuplicates() == 0)
        #expect(try js.streamState("ACKS")?.messages == 4)
    }

    /// A key-value bucket: created once, values with revisions, and the two compare-and-set writes that a
    /// lease is built on — `create` only on an empty key, `update` only at the expected revision — answer
    /// nil (not an error) when they lose.
    @Test func keyValueCompareAndSet() throws {
        var config = KeyValue.Config(bucket: "LEASES")
        config.description = "test"
        let kv = try js.keyValue(config)
        #expect(try js.streamState("KV_LEASES") != nil)
        #expect(try kv.get("a") == nil)
        let first = try #require(try kv.create("a", Array("one".utf8)))
        let entry = try #require(try kv.get("a"))
        #expect(entry.value == Array("one".utf8) && entry.revision == first)
        #expect(entry.createdNs > 1_700_000_000_000_000_000)  // the server's write time
        #expect(try kv.create("a", Array("two".utf8)) == nil)  // taken
        let second = try #require(try kv.update("a", Array("two".utf8), last: first))
        #expect(second > first)
        #expect(try kv.update("a", Array("three".utf8), last: first) == nil)  // stale revision
        #expect(try kv.get("a")?.value == Array("two".utf8))
        #expect(try kv.update("b", Array("x".utf8), last: 7) == nil)  // no such key
        try kv.delete("a")
        #expect(try kv.get("a") == nil)
        let again = try #require(try kv.create("a", Array("four".utf8)))  // over the delete marker
        #expect(try kv.get("a")?.revision == again)
        // The bucket opened again (another process) sees the same values.
        let other = try js.keyValue(KeyValue.Config(bucket: "LEASES"))
        #expect(try other.get("a")?.value == Array("four".utf8))
        #expect(try other.put("a", []) > again)
        #expect(try kv.get("a")?.value == [])
    }

    @Test func restartOnTheSameStoreKeepsTheStream() throws {
        try js.ensureStream(.init(name: "DURABLE", subjects: ["durable.>"]))
        _ = try js.publish("durable.a", Array("kept".utf8))
        connection.close()
        server.kill()
        try server.restart()
        let reconnected = try NATSConnection(.init(servers: [server.url]))
        let js2 = try reconnected.jetStream()
        var last: UInt64?
        let deadline = now() + 10  // JetStream recovers the store after the port opens
        while last == nil && now() < deadline {
            last = try? js2.streamLastSequence("DURABLE")
            if last == nil { usleep(100_000) }
        }
        #expect(last == 1)
        #expect(try js2.message(stream: "DURABLE", sequence: 1)?.data == Array("kept".utf8))
    }
}

/// A 3-node JetStream cluster: a replicas-3 stream keeps accepting publishes after one node is killed.
@Suite  // no skip when nats-server is missing: tools/ensure-deps.sh installs it, and a missing server must fail
struct JetStreamClusterTests {
    @Test func replicatedStreamSurvivesTheLossOfOneNode() throws {
        let directory = TemporaryDirectory("nats-cluster")
        let cluster = try NATSCluster.start(nodes: 3, baseDir: directory.path)
        var options = NATSConnection.Options(servers: cluster.urls)
        options.reconnectWaitMs = 100
        let connection = try NATSConnection(options)
        let js = try connection.jetStream(timeoutMs: 5_000)
        var config = JetStream.StreamConfig(name: "REPL", subjects: ["repl.>"])
        config.replicas = 3
        // Placing an R3 stream needs every peer known to the meta leader: retry briefly.
        var created = false
        let deadline = now() + 15
        while !created {
            do {
                try js.ensureStream(config)
                created = true
            } catch {
                if now() > deadline { throw error }
                usleep(200_000)
            }
        }
        for i in 1...20 { _ = try js.publish("repl.a", Array("before \(i)".utf8), msgId: "b-\(i)") }
        #expect(try js.streamLastSequence("REPL") == 20)

        // SIGKILL the stream's leader: the two others must elect a new one (and when the client was connected
        // to the victim, the client must also fail over to another URL).
        let connected = connection.connectedURL ?? ""
        let leaderName = try #require(try js.streamState("REPL")?.leader)
        let victim = try #require(cluster.node(named: leaderName))
        victim.kill()

        // Publishes may fail while the client reconnects and the stream elects a leader; with the same
        // msgId a retried publish is stored once.
        let retryDeadline = now() + 20
        var sequences: [UInt64] = []
        for i in 1...20 {
            while true {
                do {
                    let ack = try js.publish("repl.a", Array("after \(i)".utf8), msgId: "a-\(i)", timeoutMs: 2_000)
                    sequences.append(ack.sequence)
                    break
                } catch {
                    if now() > retryDeadline { throw error }
                    usleep(100_000)
                }
            }
        }
        #expect(sequences == Array(21...40))
        #expect(try js.streamLastSequence("REPL") == 40)
        #expect(connection.connectedURL != nil)
        #expect(connection.connectedURL != victim.url)
        if connected == victim.url { #expect(connection.connectedURL != connected) }
        let newLeader = try js.streamState("REPL")?.leader
        #expect(newLeader != nil && newLeader != leaderName)
        #expect(try js.message(stream: "REPL", sequence: 40)?.data == Array("after 20".utf8))
    }
}
