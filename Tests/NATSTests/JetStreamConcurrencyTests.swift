import Dispatch
import NATS
import NATSServer
import TestSupport
import Testing

/// The pattern of a partition worker on one connection, pushed to libnats' limits: one thread publishes
/// asynchronously far past `maxPendingAsync` (every publish stalls inside libnats until acks make room) and
/// takes back stale pending publishes with short `waitForPublishes` timeouts, while another thread fetches
/// from a pull consumer and acks, and a third answers requests. Built with `--sanitize=address`, a
/// use-after-free or double free of a `natsMsg` on any of these paths aborts the test process.
@Suite
struct JetStreamConcurrencyTests {
    let directory = TemporaryDirectory("nats-js-stress")
    let server: NATSServerProcess

    init() throws {
        server = try NATSServerProcess.start(jetStream: true, storeDir: directory.child("store"))
    }

    /// libnats 3.4's `natsSubscription_Fetch` first takes the deliveries already queued on the subscription
    /// (left over from an earlier fetch that timed out), then asks the server for `batch - taken` more and
    /// waits until it holds exactly that many. With more than half a batch left over it never does: every
    /// later delivery is written past the end of its `batch`-sized array (the heap corruption of loaded
    /// 3-partition runs; under AddressSanitizer, reading `Count` > `batch` entries). Fetches with timeouts
    /// short enough to leave deliveries behind, then larger ones: none may return more than its batch.
    @Test func fetchNeverReturnsMoreThanItsBatchAfterTimedOutFetches() throws {
        let connection = try NATSConnection(.init(servers: [server.url]))
        let js = try connection.jetStream(timeoutMs: 5_000, maxPendingAsync: 100_000)
        try js.ensureStream(.init(name: "LEFT", subjects: ["left.>"]))
        let total = 30_000
        let payload = [UInt8](repeating: 0x63, count: 300)
        for i in 0..<total { try js.publishAsync("left.x", payload, msgId: "left-\(i)") }
        try js.waitForPublishes(timeoutMs: 30_000)
        let sub = try js.pullSubscribe(
            stream: "LEFT", subject: "left.x", durable: "left", ackWaitMs: 120_000, maxAckPending: 100_000)
        var seen = Set<UInt64>()
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ n: Int) -> Int {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((random >> 33) % UInt64(n))
        }
        var oversized: [String] = []
        let deadline = now() + 90
        while seen.count < total && now() < deadline {
            // Fetches that often give up almost at once leave deliveries arriving after they returned; the
            // next one starts with those queued, then asks for the rest of its batch.
            let batch = 2 + next(200)
            let timeoutMs = [1, 1, 1, 2, 5, 20][next(6)]
            let messages = try sub.fetch(batch: batch, timeoutMs: timeoutMs)
            if messages.count > batch { oversized.append("fetch(batch: \(batch)) returned \(messages.count)") }
            for message in messages {
                if let s = message.streamSequence { seen.insert(s) }
                try sub.ack(message)
            }
        }
        #expect(oversized.isEmpty, "\(oversized.prefix(5))")
        #expect(seen.count == total)
    }

    @Test func stalledAsyncPublishesWhileFetchingAckingAndAnswering() throws {
        let connection = try NATSConnection(.init(servers: [server.url]))
        // A tiny pending limit: nearly every publish waits inside libnats for acks (its stall path).
        let js = try connection.jetStream(timeoutMs: 5_000, maxPendingAsync: 16)
        try js.ensureStream(.init(name: "IN", subjects: ["in.>"]))
        try js.ensureStream(.init(name: "OUT", subjects: ["out.>"]))
        let inputs = 4_000
        let feeder = try connection.jetStream(timeoutMs: 5_000, maxPendingAsync: 100_000)
        for i in 0..<inputs { try feeder.publishAsync("in.x", Array("input \(i)".utf8), msgId: "in-\(i)") }
        try feeder.waitForPublishes(timeoutMs: 30_000)
        let responder = try connection.subscribe("q.status") { message in
            try? connection.respond(to: message, Array("ok \(message.data.count)".utf8))
        }
        defer { responder.cancel() }

        let group = DispatchGroup()
        let results = Results()
        // Fetch and ack on the same connection, as `PartitionWorker.fetchLoop` and its publisher do.
        group.enter()
        DispatchQueue.global().async {
            defer { group.leave() }
            do {
                let sub = try js.pullSubscribe(stream: "IN", subject: "in.x", durable: "stress", ackWaitMs: 60_000)
                var seen = Set<UInt64>()
                let deadline = now() + 120
                while seen.count < inputs && now() < deadline {
                    for message in try sub.fetch(batch: 128, timeoutMs: 50) {
                        if let s = message.streamSequence { seen.insert(s) }
                        try sub.ack(message)
                    }
                }
                results.set(fetched: seen.count)
            } catch {
                results.fail("fetch: \(error)")
            }
        }
        // Queries arriving meanwhile (the status polls of a benchmark).
        group.enter()
        DispatchQueue.global().async {
            defer { group.leave() }
            for i in 0..<300 {
                _ = try? connection.request("q.status", Array("\(i)".utf8), timeoutMs: 2_000)
            }
        }
        // Publish in one big run (no window), with some waits that time out and take the pending back.
        let records = 20_000
        let payload = [UInt8](repeating: 0x62, count: 200)
        for i in 0..<records {
            try js.publishAsync("out.\(i % 7)", payload, msgId: "out-\(i)")
            if i % 2_500 == 2_499 { try? js.waitForPublishes(timeoutMs: 1) }
        }
        // Whatever was taken back is published again under the same ids; the stream de-duplicates.
        var attempt = 0
        while true {
            do {
                try js.waitForPublishes(timeoutMs: 10_000)
                if try js.streamState("OUT")?.messages == UInt64(records) { break }
            } catch {}
            attempt += 1
            if attempt > 5 { break }
            for i in 0..<records { try js.publishAsync("out.\(i % 7)", payload, msgId: "out-\(i)") }
        }
        group.wait()
        #expect(results.failure == nil)
        #expect(results.fetched == inputs)
        #expect(try js.streamState("OUT")?.messages == UInt64(records))
    }
}

/// What the helper threads report.
private final class Results: @unchecked Sendable {
    private let lock = DispatchQueue(label: "results")
    private var _fetched = 0
    private var _failure: String?

    var fetched: Int { lock.sync { _fetched } }
    var failure: String? { lock.sync { _failure } }
    func set(fetched: Int) { lock.sync { _fetched = fetched } }
    func fail(_ text: String) { lock.sync { _failure = text } }
}
