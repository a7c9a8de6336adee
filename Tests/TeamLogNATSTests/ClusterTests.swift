import NATS
import NATSServer
import TeamLog
import TeamLogNATS
import TeamLogRuntime
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 13's bars against real `nats-server` processes and real `teamlog serve --nats` partitions.
///
/// Every scenario ends with the same three checks:
/// - **answers**: for every team, user, message and channel of the workload, the partitions (merged by
///   `ClusterQueries`) answer what one store that ingested the workload directly answers, seqs aside;
/// - **records, exactly once**: what each partition published on `TEAMLOG_OUT`, in order, is exactly
///   what a fresh store produces from that partition's inputs — none missing, none twice — and every
///   message id is `<p>:<input seq>:<n>`;
/// - **audit**: after a SIGTERM (exit 0) every partition's store audits clean.
@Suite(.serialized, .enabled(if: TestSupport.teamlogIsBuilt))
struct ClusterTests {
    static let workloadSize = 1_500

    /// Runs the three checks.
    func verify(_ harness: ClusterHarness, _ lines: [String], _ connection: NATSConnection) throws {
        try harness.waitUntilCaughtUp(connection)
        let queries = try ClusterQueries(connection: connection, partitions: harness.partitions)
        let cluster = try ClusterHarness.answers(lines) { kind, id in try queries.answer(kind, id) }
        let single = try harness.singleStoreAnswers(lines)
        #expect(cluster.count == single.count)
        let differing = single.keys.sorted().filter { cluster[$0] != single[$0] }
        #expect(differing.isEmpty, "\(differing.count) differ; first: \(differing.first.map { "\($0)\n cluster \(cluster[$0] ?? "-")\n single  \(single[$0] ?? "-")" } ?? "")")

        let expected = try harness.expectedRecords(connection)
        let published = try harness.publishedRecords(connection)
        for p in 0..<harness.partitions {
            let got = published[p].map(\.json)
            let firstDifference = Array(zip(got, expected[p])).firstIndex { $0 != $1 } ?? min(got.count, expected[p].count)
            #expect(
                got == expected[p],
                "partition \(p): \(got.count) records published, \(expected[p].count) expected; first difference at \(firstDifference): \(firstDifference < got.count ? got[firstDifference] : "-") vs \(firstDifference < expected[p].count ? expected[p][firstDifference] : "-")")
            let ids = published[p].map(\.id)
            #expect(Set(ids).count == ids.count, "partition \(p) published an id twice")
            #expect(ids.allSatisfy { $0.hasPrefix("\(p):") && $0.split(separator: ":").count == 3 })
        }

        for status in try harness.stopAll() { #expect(status == .exited(0)) }
        for p in 0..<harness.partitions {
            let audit = try ChildProcess(TestSupport.teamlogExecutable, ["audit", "--store", harness.storePath(p)])
            _ = try audit.readToEnd(timeout: 60)
            #expect(audit.wait() == .exited(0), "partition \(p)'s audit")
        }
    }

    @Test(arguments: [1, 3])
    func partitionsAnswerLikeOneStore(partitions: Int) throws {
        let harness = try ClusterHarness(partitions: partitions)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: Self.workloadSize, seed: 7)
        try harness.startAll()
        try harness.route(lines, connection: connection)
        if partitions > 1 {
            // A tip's id is its partition's `tip-<seq>`: one that several partitions have is an error naming
            // them, not whichever partition answered first; one that only one has is answered.
            try harness.waitUntilCaughtUp(connection)
            var holders: [String: [Int]] = [:]
            for (p, records) in try harness.publishedRecords(connection).enumerated() {
                for record in records where record.json.hasPrefix(#"{"kind":"tip""#) {
                    if let id = try JSONParser.parse(record.json)["messageId"]?.stringValue { holders[id, default: []].append(p) }
                }
            }
            let queries = try ClusterQueries(connection: connection, partitions: partitions)
            let shared = try #require(holders.first { $0.value.count > 1 }, "some tip id is in two partitions")
            #expect {
                _ = try queries.answer(.message, Id(shared.key))
            } throws: { error in
                "\(error)".contains("names a tip of \(shared.value.count) partitions")
            }
            let own = try #require(holders.first { $0.value.count == 1 })
            #expect(try queries.answer(.message, Id(own.key))?["messageId"]?.stringValue == own.key)
        }
        try verify(harness, lines, connection)
    }

    /// A partition rebuilt onto a new store (its store lost, the input stream intact) replays its inputs
    /// and produces every record again; once the output stream's de-duplication window has passed (ten
    /// minutes in a deployment: one second here) nothing but the worker's own check keeps them from being
    /// published twice — an operator's trial saw all 62,961 of a partition's records again. It finds the
    /// last of its records on the output stream at start and publishes only what comes after.
    @Test func aPartitionRebuiltOnANewStorePublishesNothingTwice() throws {
        let harness = try ClusterHarness(partitions: 2)
        let connection = try harness.connect()
        defer { connection.close() }
        _ = try TeamLogSubjects.ensureStreams(try connection.jetStream(), partitions: 2, outDuplicateWindowSeconds: 1)
        let lines = ClusterHarness.workload(count: Self.workloadSize, seed: 21)
        try harness.startAll()
        try harness.route(lines, connection: connection)
        try harness.waitUntilCaughtUp(connection)
        let before = try harness.publishedRecords(connection)
        for status in try harness.stopAll() { #expect(status == .exited(0)) }
        #expect(Set(before.flatMap { $0.map { String($0.json.split(separator: "\"")[3]) } }).isSubset(of: Record.kinds))
        sleepMs(1_500)  // past the output stream's window
        #expect(rename(harness.storePath(1), harness.storePath(1) + ".lost") == 0)
        try harness.startAll()
        try harness.waitUntilCaughtUp(connection)
        let queries = try ClusterQueries(connection: connection, partitions: 2)
        let rebuilt = try queries.statuses()[1]
        #expect(rebuilt["alreadyDownstream"]?.intValue == Int64(before[1].count), "\(rebuilt)")
        #expect(try queries.statuses()[0]["alreadyDownstream"]?.intValue == 0)
        try verify(harness, lines, connection)  // each record on the output stream once
    }

    /// Changing the partition count (docs/nats.md, *Changing the partition count*): each partition's log
    /// exported (`teamlog log`), merged (`teamlog merge-logs`) and routed to a new deployment of 3 partitions
    /// on another NATS server — every op accepted again, and every answer that of one store that ingested
    /// the original input.
    @Test func aDeploymentMovedToAnotherPartitionCountAnswersLikeOneStore() throws {
        let old = try ClusterHarness(partitions: 2)
        let oldConnection = try old.connect()
        defer { oldConnection.close() }
        let lines = ClusterHarness.workload(count: Self.workloadSize, seed: 29)
        try old.startAll()
        try old.route(lines, connection: oldConnection)
        try old.waitUntilCaughtUp(oldConnection)
        for status in try old.stopAll() { #expect(status == .exited(0)) }
        var exports: [String] = []
        var events = 0
        for p in 0..<2 {
            let log = try ChildProcess(TestSupport.teamlogExecutable, ["log", "--store", old.storePath(p)])
            let exported = try log.readToEnd(timeout: 60)
            #expect(log.wait() == .exited(0))
            events += exported.count
            exports.append(old.directory.child("log\(p).jsonl"))
            try writeBytes(exports[p], Array(exported.map { $0 + "\n" }.joined().utf8))
        }
        let summary = old.directory.child("merge.err")
        let merge = try ChildProcess(TestSupport.teamlogExecutable, ["merge-logs"] + exports, stderr: summary)
        let merged = try merge.readToEnd(timeout: 60)
        #expect(merge.wait() == .exited(0))
        // Each op every partition got is in both logs (a tick without an opId is a partition's own members
        // sync: in one log only, merged as a keyed op).
        let log0 = String(decoding: try readBytes(exports[0]), as: UTF8.self).split(separator: "\n")
        let broadcasts = log0.filter {
            $0.contains(#""op":"client.log"#) || ($0.contains(#""op":"clock.tick""#) && $0.contains(#""opId""#))
        }.count
        #expect(broadcasts > 0, "the workload has ops every partition gets")
        #expect(merged.count == events - broadcasts, "each broadcast op once")
        let said = String(decoding: try readBytes(summary), as: UTF8.self)
        #expect(said.contains("into \(merged.count): \(broadcasts) ops every partition had"), "\(said)")

        let new = try ClusterHarness(partitions: 3)
        let connection = try new.connect()
        defer { connection.close() }
        try new.startAll()
        try new.route(merged, connection: connection)
        try new.waitUntilCaughtUp(connection)
        let records = try new.publishedRecords(connection).flatMap { $0 }
        let refused = records.filter { $0.json.hasPrefix(#"{"kind":"rejected""#) || $0.json.hasPrefix(#"{"kind":"duplicate""#) }
        #expect(refused.isEmpty, "every op accepted again: \(refused.prefix(3).map(\.json))")
        try verify(new, lines, connection)
    }

    /// A second process for a partition that one already serves (another store, the same `--partition`)
    /// refuses to start before touching the durable consumer; the first goes on undisturbed. Before, the two
    /// took turns answering queries and the second stalled while its status said caught up.
    @Test func aSecondInstanceOfAPartitionIsRefused() throws {
        let harness = try ClusterHarness(partitions: 1)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: 300, seed: 23)
        try harness.startAll()
        try harness.route(Array(lines[..<150]), connection: connection)
        try harness.waitUntilCaughtUp(connection)
        let second = try ChildProcess.run(
            TestSupport.teamlogExecutable,
            [
                "serve", "--store", harness.directory.child("second"), "--listen", "127.0.0.1:0", "--nats",
                harness.urls.joined(separator: ","), "--partition", "0", "--partitions", "1",
            ], stderr: harness.directory.child("second.err"), timeout: 60)
        #expect(second.status == .exited(3))
        let stderr = (try? String(decoding: readBytes(harness.directory.child("second.err")), as: UTF8.self)) ?? ""
        #expect(stderr.contains("partition 0 of 1 is already served by another process"), "\(stderr)")
        // The store directory it created for nothing is gone again.
        #expect(access(harness.directory.child("second"), F_OK) != 0, "\(stderr)")
        #expect(stderr.contains("removed \(harness.directory.child("second")), the store this start created"))
        try harness.route(Array(lines[150...]), connection: connection)
        try verify(harness, lines, connection)  // the first answers everything, its records once
    }

    /// Two processes for one partition started at the same moment (on two stores): asking the status
    /// subject lets both through, the lease lets one — the other exits 3 before touching the consumer, and
    /// the one that serves answers everything.
    @Test func twoInstancesStartedTogetherOneServes() throws {
        let harness = try ClusterHarness(partitions: 1)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: 300, seed: 29)
        try harness.route(Array(lines[..<100]), connection: connection)
        let children = try (0..<2).map { i in
            try ChildProcess(
                TestSupport.teamlogExecutable,
                [
                    "serve", "--store", harness.directory.child("twin\(i)"), "--listen", "127.0.0.1:0", "--nats",
                    harness.urls.joined(separator: ","), "--partition", "0", "--partitions", "1",
                ], stderr: harness.directory.child("twin\(i).err"))
        }
        defer { for child in children { child.kill(SIGKILL) } }
        let deadline = monotonicSeconds() + 30
        var exited: [Int: ChildProcess.Status] = [:]
        while exited.isEmpty && monotonicSeconds() < deadline {
            for (i, child) in children.enumerated() { if let status = child.poll() { exited[i] = status } }
            sleepMs(50)
        }
        sleepMs(1_000)
        for (i, child) in children.enumerated() where exited[i] == nil { if let status = child.poll() { exited[i] = status } }
        #expect(exited.count == 1, "\(exited)")
        guard let (loser, status) = exited.first else { return }
        #expect(status == .exited(3))
        let stderr = (try? String(decoding: readBytes(harness.directory.child("twin\(loser).err")), as: UTF8.self)) ?? ""
        #expect(stderr.contains("partition 0 of 1 is already served by another process"), "\(stderr)")
        try harness.route(Array(lines[100...]), connection: connection)
        try harness.waitUntilCaughtUp(connection)
        let queries = try ClusterQueries(connection: connection, partitions: 1)
        #expect(try queries.statuses()[0]["consumed"]?.intValue == 300)
        let winner = children[1 - loser]
        winner.kill(SIGTERM)
        #expect(winner.wait() == .exited(0))
    }

    /// A partition killed with SIGKILL leaves its lease behind; restarted on the same machine it takes it
    /// at once (its holder is a process that is gone), without waiting out the lease's TTL.
    @Test func aRestartAfterKillNineTakesTheLeaseAtOnce() throws {
        let harness = try ClusterHarness(partitions: 1)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: 200, seed: 31)
        try harness.startAll()
        try harness.route(Array(lines[..<100]), connection: connection)
        try harness.waitUntilCaughtUp(connection)
        let js = try connection.jetStream()
        let before = try #require(try PartitionLease.holder(in: js.keyValue(.init(bucket: PartitionLease.bucket)), partition: 0))
        harness.kill(0)
        let start = monotonicSeconds()
        try harness.startPartition(0)
        try harness.route(Array(lines[100...]), connection: connection)
        try harness.waitUntilCaughtUp(connection)
        #expect(monotonicSeconds() - start < 8, "a lease of 10 s was waited out")
        let after = try #require(try PartitionLease.holder(in: js.keyValue(.init(bucket: PartitionLease.bucket)), partition: 0))
        #expect(after.pid != before.pid)
        for status in try harness.stopAll() { #expect(status == .exited(0)) }
        // Stopped cleanly: released.
        #expect(try PartitionLease.holder(in: js.keyValue(.init(bucket: PartitionLease.bucket)), partition: 0) == nil)
    }

    /// kill -9 of a partition process at 10 random points while the workload flows, each restarted at
    /// once on its store: nothing lost, nothing applied or published twice.
    @Test func killNineAtRandomPoints() throws {
        let harness = try ClusterHarness(partitions: 3)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: 3_000, seed: 11)
        try harness.startAll()
        var rng = SystemRandomNumberGenerator()
        let chunks = 10
        let size = lines.count / chunks
        let router = RouterBox(harness: harness, connection: connection)
        for k in 0..<chunks {
            try router.route(Array(lines[(k * size)..<min(lines.count, (k + 1) * size)]), startingAt: k * size)
            sleepMs(Int.random(in: 0...300, using: &rng))
            let victim = Int.random(in: 0..<harness.partitions, using: &rng)
            harness.kill(victim)
            try harness.startPartition(victim)
        }
        try verify(harness, lines, connection)
    }

    /// One of three NATS servers killed mid-run (streams with 3 replicas): routing and processing go on,
    /// the same checks hold.
    @Test func killOneOfThreeNATSServers() throws {
        let harness = try ClusterHarness(partitions: 3, clusterNodes: 3)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: Self.workloadSize, seed: 13)
        // The router makes the streams (3 replicas); the partitions are not told: their lease bucket gets
        // the op stream's replicas — it had 1 (`serve`'s default), and losing its node stopped every
        // partition's renewals and so their consumption (an operator's trial).
        let router = RouterBox(harness: harness, connection: connection)
        harness.passesReplicas = false
        try harness.startAll()
        let js = try connection.jetStream()
        let deadline = monotonicSeconds() + 30
        while (try? js.streamState("KV_" + PartitionLease.bucket)) == nil && monotonicSeconds() < deadline { sleepMs(50) }
        #expect(try js.streamState("KV_" + PartitionLease.bucket)?.replicas == 3)
        let half = lines.count / 2
        try router.route(Array(lines[..<half]), startingAt: 0)
        harness.cluster!.nodes[1].kill()
        try router.route(Array(lines[half...]), startingAt: half)
        try verify(harness, lines, connection)
    }

    /// NATS away longer than a client's reconnect budget (60 attempts 250 ms apart: 15 s): the partition
    /// server reconnects for as long as it takes and goes on where its consumer was — it stalled for good,
    /// alive and consuming nothing, before. The same checks hold over the ops routed before and after.
    @Test func aPartitionOutlastsALongNATSOutage() throws {
        let harness = try ClusterHarness(partitions: 1)
        let lines = ClusterHarness.workload(count: 400, seed: 17)
        try harness.startAll()
        do {
            let before = try harness.connect()
            defer { before.close() }
            try harness.route(Array(lines[..<200]), connection: before)
            try harness.waitUntilCaughtUp(before)
        }
        harness.server!.stop()
        sleepMs(30_000)  // past the 60 attempts of a client that gives up (250 ms apart, with jitter: ~20 s)
        try harness.server!.restart()
        let connection = try harness.connect()
        defer { connection.close() }
        try harness.route(Array(lines[..<200]), connection: connection)  // again: duplicates, not new events
        try harness.route(Array(lines[200...]), connection: connection)
        try verify(harness, lines, connection)
        // The partition said when NATS went and when it was back (before, its log held nothing of it); its
        // own stop, a close, is not reported as a lost connection.
        let log = (try? String(decoding: readBytes(harness.directory.child("start-1.err")), as: UTF8.self)) ?? ""
        #expect(log.components(separatedBy: "lost: consuming and publishing wait").count == 2, "\(log)")
        #expect(log.contains("NATS connection back (nats://127.0.0.1:"), "\(log)")
    }

    /// A `message.modify` of a message a new router does not remember, while the partition holding it is
    /// down: the router cannot tell where it goes and fails (it was sent to the fallback partition and
    /// rejected `noSuchMessage` for good); with the partition back, the same line is routed to it.
    @Test func aModifyIsNotMisroutedWhileItsPartitionIsDown() throws {
        let harness = try ClusterHarness(partitions: 2)
        let connection = try harness.connect()
        defer { connection.close() }
        try harness.startAll()
        // Messages with different keys until one lands on partition 1 (the fallback of none of them matters).
        var send: (line: String, id: String)?
        for i in 0..<64 {
            let line = #"{"op":"message.send","actor":"a","ts":1,"to":{"type":"p2p","id":"peer\#(i)"},"messageId":"mm\#(i)","content":{"type":"text","text":"x"},"opId":"s\#(i)"}"#
            if case .success(let op) = OpParser.parse(line: line), case .key(let key) = PartitionKey.of(op),
                PartitionKey.partition(of: key, count: 2, scheme: .current) == 1
            {
                send = (line, "mm\(i)")
                break
            }
        }
        let (sendLine, id) = try #require(send)
        try harness.route([sendLine], connection: connection)
        try harness.waitUntilCaughtUp(connection)
        harness.kill(1)
        let modify = #"{"op":"message.modify","actor":"x","ts":2,"messageId":"\#(id)","content":{"type":"text","text":"y"},"opId":"e1"}"#
        var options = OpRouter.Options()
        options.partitions = 2
        options.retries = 2
        let router = try OpRouter(connection: connection, options: options)  // a new router: remembers nothing
        #expect(throws: ClusterError.self) {
            try router.route(.text(number: 1, bytes: Array(modify.utf8)), now: 3)
        }
        #expect(router.summary.messages == 0 && !router.hasPending, "nothing was published")
        // `teamlog status` meanwhile: the partition that answers is reported, the other named; exit 3 (it
        // printed nothing at all).
        let status = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["status", "--nats", harness.urls.joined(separator: ","), "--partitions", "2"],
            stderr: harness.directory.child("status.err"), timeout: 60)
        #expect(status.status == .exited(3))
        #expect(status.lines.count == 3 && status.lines[1].hasPrefix("partition 0: head seq"), "\(status.lines)")
        #expect(status.lines[0] == "deployment: 2 partitions, partitioning 2 (FNV-1a + fmix64)", "\(status.lines)")
        #expect(status.lines.last?.hasPrefix("partition 1: NO ANSWER") == true, "\(status.lines)")
        // Killed, it still holds its lease (it lapses); the live one says its backlog.
        #expect(status.lines.last?.contains("its lease is held by pid ") == true, "\(status.lines)")
        #expect(status.lines[1].contains(", backlog 0, in flight 0, lease valid, caught up yes"), "\(status.lines)")
        #expect(status.lines.last?.contains(" ago (another process takes it over 12 s after the last renewal)") == true)
        try harness.startPartition(1)
        try harness.waitUntilCaughtUp(connection)
        let again = try OpRouter(connection: connection, options: options)
        try again.route(.text(number: 1, bytes: Array(modify.utf8)), now: 3)
        try again.flush()
        #expect(again.summary.perPartition == [0, 1], "routed to the message's partition")
        _ = try harness.stopAll()
    }

    /// A record over the NATS server's max_payload (a large team's delivery) can never be published as
    /// one message. The partition stops with the reason (exit 3) instead of retrying its batch forever —
    /// which re-sent the records before it every ten minutes, past the stream's de-duplication window (an
    /// operator's trial). With max_payload raised, the next start publishes the outbox: every record once.
    @Test func aRecordOverMaxPayloadStopsThePartitionWithTheReason() throws {
        let scratch = TemporaryDirectory("teamlog-maxpayload")
        let config = scratch.child("nats.conf")
        try writeBytes(config, Array("max_payload: 32768\n".utf8))
        let harness = try ClusterHarness(partitions: 1, serverArguments: ["-c", config])
        let connection = try harness.connect()
        defer { connection.close() }
        #expect(connection.maxPayload == 32_768)
        func members(_ n: Int) -> String { (0..<n).map { "\"member-\($0)\"" }.joined(separator: ",") }
        let lines = [
            #"{"op":"team.create","actor":"a","ts":1,"team":"small","members":["b","c"],"opId":"o1"}"#,
            #"{"op":"message.send","actor":"a","ts":2,"to":{"type":"team","id":"small"},"messageId":"m1","content":{"type":"text","text":"x"},"opId":"o2"}"#,
            // Its records fit (a 30 KB delivery); its roster as a `team` answer (33 KB) does not.
            #"{"op":"team.create","actor":"a","ts":3,"team":"mid","type":"superTeam","members":["# + members(820) + #"],"opId":"o3"}"#,
            #"{"op":"team.create","actor":"a","ts":4,"team":"big","type":"superTeam","members":["# + members(1_500) + #"],"opId":"o4"}"#,
            #"{"op":"message.send","actor":"b","ts":5,"to":{"type":"team","id":"small"},"messageId":"m2","content":{"type":"text","text":"y"},"opId":"o5"}"#,
        ]
        try harness.startAll()
        try harness.route(Array(lines[..<3]), connection: connection)
        try harness.waitUntilCaughtUp(connection)
        // An answer over max_payload is an error saying so (it was "no answer … is partition 0 running?").
        let queries = try ClusterQueries(connection: connection, partitions: 1)
        let tooLarge = #expect(throws: ClusterError.self) { try queries.answer(.team, Id("mid")) }
        #expect(tooLarge?.description.contains("tooLarge: the answer is ") == true, "\(String(describing: tooLarge))")
        #expect(tooLarge?.description.contains("over the NATS server's max_payload (32768)") == true)
        #expect(try queries.answer(.team, Id("small"))?["memberCount"]?.intValue == 3)
        try harness.route(Array(lines[3...]), connection: connection)
        let deadline = monotonicSeconds() + 60
        while harness.processes[0]?.poll() == nil && monotonicSeconds() < deadline { sleepMs(100) }
        #expect(harness.processes[0]?.poll() == .exited(3))
        let stderr = (try? String(decoding: readBytes(harness.directory.child("start-1.err")), as: UTF8.self)) ?? ""
        #expect(stderr.contains("a delivery record of "), "\(stderr)")
        #expect(stderr.contains("is over the NATS server's max_payload (32768 bytes): raise max_payload"), "\(stderr)")
        let before = try harness.publishedRecords(connection)[0]
        #expect(Set(before.map(\.id)).count == before.count)
        #expect(before.contains { $0.json.contains(#""messageId":"m1""#) })
        #expect(!before.contains { $0.json.contains(#""messageId":"m2""#) })

        try writeBytes(config, Array("max_payload: 1MB\n".utf8))
        harness.server!.stop()
        try harness.server!.restart()
        let again = try harness.connect()
        defer { again.close() }
        try harness.startPartition(0)
        try verify(harness, lines, again)  // every record once, as a single store has them
        _ = try harness.stopAll()
    }

    /// Routing the same input twice (a run repeated after a failure): the second run's messages are all
    /// in the stream already under their ids, and its summary says how many — none of them new.
    @Test func aRepeatedRouteCountsWhatTheStreamAlreadyHad() throws {
        let harness = try ClusterHarness(partitions: 2)
        let connection = try harness.connect()
        defer { connection.close() }
        let lines = ClusterHarness.workload(count: 500, seed: 37).enumerated().map { i, line in
            // Every second line without its opId: no message id, so never a duplicate.
            i % 2 == 0 ? line : line.replacingOccurrences(of: #","opId":"[^"]*""#, with: "", options: .regularExpression)
        }
        func route() throws -> OpRouter.Summary {
            var options = OpRouter.Options()
            options.partitions = 2
            options.window = 64
            let router = try OpRouter(connection: connection, options: options)
            for (i, line) in lines.enumerated() {
                try router.route(.text(number: i + 1, bytes: Array(line.utf8)), now: 5_000_000_000_000)
            }
            try router.flush()
            return router.summary
        }
        let first = try route()
        #expect(first.duplicates == 0)
        let second = try route()
        #expect(second.messages == first.messages)
        let withIds = lines.filter { $0.contains(#""opId":"#) }.count
        #expect(withIds > 100 && withIds < lines.count)
        // Broadcast ops (login, logout, tick) go to both partitions, one id each.
        let broadcast = lines.filter {
            $0.contains(#""opId":"#) && ($0.contains("client.log") || $0.contains("clock.tick"))
        }.count
        #expect(second.duplicates == withIds + broadcast, "\(second)")
        let js = try connection.jetStream()
        #expect(try js.streamState(TeamLogSubjects.opsStream)?.messages == UInt64(first.messages + second.messages - second.duplicates))
    }

    /// A partition's store takes only its own stream's ops: `ingest` into it is refused, and so is serving
    /// it as another partition (which consumed that partition's ops on top of its own log), or serving as a
    /// partition a store whose events came from no stream — each with the reason, nothing written. Its
    /// reads and `audit` are any store's.
    @Test func aPartitionsStoreTakesOnlyItsStreamsOps() throws {
        let harness = try ClusterHarness(partitions: 1)
        let connection = try harness.connect()
        defer { connection.close() }
        try harness.startAll()
        try harness.route(ClusterHarness.workload(count: 100, seed: 5), connection: connection)
        try harness.waitUntilCaughtUp(connection)
        for status in try harness.stopAll() { #expect(status == .exited(0)) }
        let store = harness.storePath(0)
        let head = try Store.reader(at: store).head().seq
        let exe = TestSupport.teamlogExecutable
        let url = harness.urls.joined(separator: ",")
        func run(_ arguments: [String], _ name: String) throws -> (ChildProcess.Status, String) {
            let run = try ChildProcess.run(exe, arguments, stderr: harness.directory.child(name), timeout: 60)
            return (run.status, try readFile(harness.directory.child(name)))
        }
        let input = harness.directory.child("one.jsonl")
        let fd = open(input, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        _ = #"{"op":"clock.tick","actor":"a"}"#.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        let (ingested, ingestErr) = try run(["ingest", input, "--store", store], "ingest.err")
        #expect(ingested == .exited(1) && ingestErr.contains("is partition 0/1 of a NATS deployment"), "\(ingestErr)")
        let other = ["--nats", url, "--partition", "1", "--partitions", "2", "--listen", "127.0.0.1:0"]
        let (served, serveErr) = try run(["serve", "--store", store] + other, "serve.err")
        #expect(served == .exited(2) && serveErr.contains("is partition 0/1, not 1/2"), "\(serveErr)")
        #expect(try Store.reader(at: store).head().seq == head, "nothing was written")
        let plain = harness.directory.child("plain")
        #expect(try run(["ingest", input, "--store", plain], "plain.err").0 == .exited(0))
        let (mixed, mixedErr) = try run(
            ["serve", "--store", plain, "--nats", url, "--partition", "0", "--partitions", "1", "--listen", "127.0.0.1:0"],
            "mixed.err")
        #expect(mixed == .exited(2) && mixedErr.contains("came from no stream"), "\(mixedErr)")
        #expect(try run(["audit", "--store", store], "audit.err").0 == .exited(0))
    }

    /// The op stream records its deployment's partitioning (the scheme, 2, and the count) when it is
    /// made. A router, a partition or a query client with another count is refused at once — it would
    /// send keys where no partition reads them, or consume a subject no router feeds —, a stream made
    /// before the record routes by scheme 1 as it always did, and a configuration NATS refuses (replicas
    /// on a single server) fails at once instead of being retried for 17 s.
    @Test func theDeploymentKeepsThePartitioningItWasMadeWith() throws {
        let harness = try ClusterHarness(partitions: 2)
        let connection = try harness.connect()
        defer { connection.close() }
        let js = try connection.jetStream()
        try harness.route([#"{"op":"clock.tick","actor":"a","ts":1}"#], connection: connection)
        #expect(try TeamLogSubjects.partitioning(js) == Partitioning(scheme: .current, partitions: 2))
        var options = OpRouter.Options()
        options.partitions = 3
        #expect { _ = try OpRouter(connection: connection, options: options) } throws: { error in
            guard let error = error as? ClusterError else { return false }
            return error.permanent && error.description.contains("has 2 partitions, not 3")
        }
        #expect(throws: ClusterError.self) { _ = try ClusterQueries(connection: connection, partitions: 3) }
        #expect(try ClusterQueries(connection: connection, partitions: 2).scheme == .current)
        // A partition started with another count: exit 3 with the reason, and no "serving" line first.
        let serve = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "serve", "--store", harness.directory.child("odd"), "--listen", "127.0.0.1:0", "--nats",
                harness.urls.joined(separator: ","), "--partition", "0", "--partitions", "3",
            ], stderr: harness.directory.child("odd.err"))
        let printed = try serve.readToEnd(timeout: 60)
        #expect(serve.wait() == .exited(3))
        #expect(!printed.contains { $0.contains("serving") }, "\(printed)")
        let said = try readFile(harness.directory.child("odd.err"))
        #expect(said.contains("has 2 partitions, not 3") && !said.contains("times"), "\(said)")

        // A stream made before the record: scheme 1 and any count, as before.
        try js.deleteStream(TeamLogSubjects.opsStream)
        try js.ensureStream(JetStream.StreamConfig(name: TeamLogSubjects.opsStream, subjects: ["teamlog.ops.*"]))
        options.partitions = 2
        let router = try OpRouter(connection: connection, options: options)
        #expect(router.partitioning == Partitioning(scheme: .fnv1a, partitions: nil))
        #expect(try ClusterQueries(connection: connection, partitions: 2).scheme == .fnv1a)
        let team = try #require(
            (0..<64).map { Id("team\($0)") }.first { id in
                PartitionKey.partition(of: PartitionKey.teamKey(id), count: 2, scheme: .fnv1a)
                    != PartitionKey.partition(of: PartitionKey.teamKey(id), count: 2, scheme: .current)
            })
        let line = #"{"op":"team.create","actor":"a","ts":1,"team":"\#(team.string)"}"#
        try router.route(.text(number: 1, bytes: Array(line.utf8)), now: 0)
        try router.flush()
        let stored = try #require(try ClusterHarness.messages(js, TeamLogSubjects.opsStream).last)
        #expect(stored.subject == TeamLogSubjects.ops(PartitionKey.partition(of: PartitionKey.teamKey(team), count: 2, scheme: .fnv1a)))

        // Replicas a single server cannot have: refused at once, not retried.
        try js.deleteStream(TeamLogSubjects.opsStream)
        options.replicas = 3
        #expect { _ = try OpRouter(connection: connection, options: options) } throws: { error in
            guard let error = error as? ClusterError else { return false }
            return error.permanent && !error.description.contains("times")
        }
    }

    /// A line the router cannot parse reaches partition 0 and is answered `rejected` there, with the
    /// router's line number.
    @Test func unparseableLineIsRejectedByPartitionZero() throws {
        let harness = try ClusterHarness(partitions: 2)
        let connection = try harness.connect()
        defer { connection.close() }
        try harness.startAll()
        try harness.route(
            [#"{"op":"team.create","actor":"a","ts":1,"team":"t"}"#, "{not json", #"{"op":"team.fly","actor":"a"}"#],
            connection: connection)
        try harness.waitUntilCaughtUp(connection)
        let zero = try harness.publishedRecords(connection)[0].map(\.json)
        #expect(zero.contains { $0.contains(#""kind":"rejected","line":2"#) && $0.contains(#""code":"badJSON""#) })
        #expect(zero.contains { $0.contains(#""kind":"rejected","line":3"#) && $0.contains(#""code":"unknownOp""#) })
        _ = try harness.stopAll()
    }
}

extension ClusterTests {
    /// A partition's HTTP API stays up: queries answer from its store; posts are refused (409
    /// `partitioned`), since its log must be its stream's order.
    @Test func partitionServesHTTPQueriesAndRefusesPosts() throws {
        let harness = try ClusterHarness(partitions: 1)
        let connection = try harness.connect()
        defer { connection.close() }
        try harness.startAll()
        try harness.route([#"{"op":"team.create","actor":"a","ts":1,"team":"t","members":["b"]}"#], connection: connection)
        try harness.waitUntilCaughtUp(connection)
        let banner = try harness.processes[0]!.readLine(timeout: 10) ?? ""
        guard let at = banner.range(of: "http://") else {
            Issue.record("no URL in \(banner)")
            return
        }
        let base = String(banner[at.lowerBound...])
        let get = try ChildProcess("/usr/bin/curl", ["-s", "\(base)/v1/teams/t"])
        let team = try JSONParser.parse(Array((try get.readToEnd(timeout: 10)).joined().utf8))
        #expect(team["owner"]?.stringValue == "a")
        #expect(team["memberCount"]?.intValue == 2)
        let post = try ChildProcess(
            "/usr/bin/curl", ["-s", "-w", "\n%{http_code}\n", "-X", "POST", "--data-binary", #"{"op":"clock.tick","actor":"a"}"#, "\(base)/v1/ops"])
        let lines = try post.readToEnd(timeout: 10)
        #expect(lines.last(where: { !$0.isEmpty }) == "409", "\(lines)")
        #expect(lines.first?.contains(#""code":"partitioned""#) == true)
        // Its consumption is in /metrics: the backlog (none: caught up), the lease, the counters.
        let metrics = try ChildProcess("/usr/bin/curl", ["-s", "\(base)/metrics"])
        let exposition = try metrics.readToEnd(timeout: 10)
        #expect(exposition.contains("teamlog_nats_pending_messages 0.0"), "\(exposition)")
        #expect(exposition.contains("teamlog_nats_lease_valid 1.0"))
        #expect(exposition.contains("teamlog_nats_consumed_total 1"))
        #expect(exposition.contains("# HELP teamlog_nats_pending_messages Messages of this partition's subject in the op stream not yet fetched, at its last fetch: its backlog."))
        _ = try harness.stopAll()
    }
}

/// Routes chunks of one workload with one router (line numbers continue across chunks).
final class RouterBox {
    let router: OpRouter
    init(harness: ClusterHarness, connection: NATSConnection) {
        var options = OpRouter.Options()
        options.partitions = harness.partitions
        options.replicas = harness.replicas
        options.window = 256
        router = try! OpRouter(connection: connection, options: options)
    }
    func route(_ lines: [String], startingAt offset: Int) throws {
        for (i, line) in lines.enumerated() {
            try router.route(.text(number: offset + i + 1, bytes: Array(line.utf8)), now: 5_000_000_000_000)
        }
        try router.flush()
    }
}

/// NATS unavailable at start: `route` and `serve --nats` fail with a clear error and a non-zero exit
/// within their bounded retries, instead of hanging.
@Suite(.enabled(if: TestSupport.teamlogIsBuilt))
struct OutageTests {
    @Test func routeAndServeFailClearlyWithoutNATS() throws {
        let dir = TemporaryDirectory()
        let input = dir.child("in.jsonl")
        let fd = open(input, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        _ = #"{"op":"clock.tick","actor":"a"}"#.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        let url = "nats://127.0.0.1:1"  // nothing listens on port 1
        let started = monotonicSeconds()
        let route = try ChildProcess(
            TestSupport.teamlogExecutable, ["route", input, "--nats", url, "--partitions", "2"],
            stderr: dir.child("route.err"))
        _ = try route.readToEnd(timeout: 30)
        #expect(route.wait() == .exited(3))
        // Three attempts wait 0.5 s and then 1 s between them (the second wait was an invalid `timespec`,
        // no wait at all: ten attempts took 0.53 s).
        #expect(monotonicSeconds() - started >= 1.5, "the connect attempts wait between them")
        let serve = try ChildProcess(
            TestSupport.teamlogExecutable,
            [
                "serve", "--store", dir.child("s"), "--listen", "127.0.0.1:0", "--nats", url, "--partition", "0",
                "--partitions", "2",
            ], stderr: dir.child("serve.err"))
        _ = try serve.readToEnd(timeout: 30)
        #expect(serve.wait() == .exited(3))
        #expect(monotonicSeconds() - started < 25, "bounded retries")
        for name in ["route.err", "serve.err"] {
            let text = try readFile(dir.child(name))
            #expect(text.contains("cannot connect to NATS at \(url)"), "\(name): \(text)")
        }
    }

    /// `status --nats` on a JetStream server where no deployment was ever made says so, instead of
    /// echoing `--partitions` as if the deployment existed.
    @Test func statusOfANATSServerWithNoDeploymentSaysSo() throws {
        let dir = TemporaryDirectory()
        mkdir(dir.child("js"), 0o755)
        let server = try NATSServerProcess.start(storeDir: dir.child("js"))
        defer { server.stop() }
        let status = try ChildProcess(
            TestSupport.teamlogExecutable, ["status", "--nats", server.url, "--partitions", "1"],
            stderr: dir.child("status.err"))
        let lines = try status.readToEnd(timeout: 60)
        #expect(status.wait() == .exited(3), "the partition does not answer")
        #expect(
            lines.first?.hasPrefix("deployment: none on this NATS server (no TEAMLOG_OPS stream yet)") == true, "\(lines)")
    }

    /// A NATS server without JetStream: `route` says so in words (libnats only said "No responders
    /// available for request (JetStream error 10076)").
    @Test func aServerWithoutJetStreamIsNamedAsSuch() throws {
        let server = try NATSServerProcess.start(jetStream: false, storeDir: nil)
        defer { server.stop() }
        let dir = TemporaryDirectory()
        let input = dir.child("in.jsonl")
        let fd = open(input, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        _ = #"{"op":"clock.tick","actor":"a"}"#.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        let route = try ChildProcess(
            TestSupport.teamlogExecutable, ["route", input, "--nats", server.url, "--partitions", "2"],
            stderr: dir.child("route.err"))
        _ = try route.readToEnd(timeout: 60)
        #expect(route.wait() == .exited(3))
        let text = try readFile(dir.child("route.err"))
        #expect(text.contains("no JetStream on this NATS server") && text.contains("-js"), "\(text)")
    }
}

func readFile(_ path: String) throws -> String {
    String(decoding: try readBytes(path), as: UTF8.self)
}
