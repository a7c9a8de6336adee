import NATS
import NATSServer
import TeamLogThreads
import TestSupport
import Testing

@testable import TeamLogNATS

#if canImport(Glibc)
    import Glibc
#endif

/// The partition lease (`PartitionLease`) against a real `nats-server`: several "processes" in one test
/// process, each a lease with its own holder record (a host of its own, so none is taken for this
/// machine's process).
@Suite struct PartitionLeaseTests {
    let directory = TemporaryDirectory("teamlog-lease")
    let server: NATSServerProcess
    let connection: NATSConnection
    let js: JetStream

    init() throws {
        server = try NATSServerProcess.start(storeDir: directory.child("nats"))
        connection = try NATSConnection(.init(servers: [server.url]))
        js = try connection.jetStream(timeoutMs: 5_000)
    }

    func holder(_ host: String, ttlMs: Int, pid: Int32 = 4_242) -> PartitionLease.Holder {
        PartitionLease.Holder(
            pid: pid, host: host, bootId: "boot-\(host)", pidNamespace: "ns", processStart: 1, ttlMs: ttlMs, sinceMs: 0)
    }

    func lease(_ host: String, ttlMs: Int = 1_000) throws -> PartitionLease {
        try PartitionLease(js: js, partition: 0, ttlMs: ttlMs, replicas: 1, holder: holder(host, ttlMs: ttlMs))
    }

    func bucket() throws -> KeyValue { try js.keyValue(KeyValue.Config(bucket: PartitionLease.bucket)) }

    /// A holder that renews keeps it: another taker watches, sees the renewal and is refused — within
    /// about one renewal interval, long before the TTL.
    @Test func aRenewingHolderKeepsTheLease() throws {
        let a = try lease("host-a", ttlMs: 3_000)
        try a.acquire()
        #expect(a.isValid)
        let renewing = Renewer(a)
        defer { renewing.stop() }
        let b = try lease("host-b", ttlMs: 3_000)
        let start = monotonicSeconds()
        var waited = false
        let refusal = #expect(throws: PartitionLease.Refusal.self) {
            try b.acquire(waiting: { holder, _ in waited = holder?.host == "host-a" })
        }
        guard case .held(let by)? = refusal else {
            Issue.record("not refused as held: \(String(describing: refusal))")
            return
        }
        #expect(by?.host == "host-a")
        #expect(waited)
        #expect(monotonicSeconds() - start < 2.5, "refused at the first renewal, not after the TTL")
        #expect(!b.isValid)
        #expect(try PartitionLease.holder(in: bucket(), partition: 0)?.host == "host-a")
    }

    /// Two takers at once on an empty key: the server's compare-and-set lets exactly one have it, and the
    /// other is refused once the winner renews. (Asking the status subject, the check before the lease,
    /// lets both through.)
    @Test func twoTakersAtOnceOneWins() throws {
        for round in 0..<5 {
            let leases = try ["host-a\(round)", "host-b\(round)"].map { try lease($0, ttlMs: 2_000) }
            let outcomes = Outcomes()
            let threads = leases.enumerated().map { i, lease in
                startThread {
                    do {
                        try lease.acquire()
                        outcomes.set(i, "took")
                        // The winner renews, as its worker would.
                        let renewing = Renewer(lease)
                        sleepMs(2_000)
                        renewing.stop()
                    } catch { outcomes.set(i, "\(error)") }
                }!
            }
            for thread in threads { thread.join() }
            let results = outcomes.all
            #expect(results.filter { $0 == "took" }.count == 1, "round \(round): \(results)")
            #expect(results.filter { $0.hasPrefix("held") }.count == 1, "round \(round): \(results)")
            for lease in leases { lease.release() }
            try bucket().delete(PartitionLease.key(0))
        }
    }

    /// A holder that stopped renewing (a machine gone) is taken over once its own TTL and a fifth passed
    /// with no renewal — not before — and the taker says it waits.
    @Test func aHolderThatStoppedRenewingIsTakenAfterItsTTL() throws {
        let a = try lease("host-a", ttlMs: 1_500)
        try a.acquire()
        let b = try lease("host-b", ttlMs: 1_500)
        let start = monotonicSeconds()
        var said: (String?, Int)?
        try b.acquire(waiting: { holder, ms in said = (holder?.host, ms) })
        let waited = monotonicSeconds() - start
        #expect(waited >= 1.5 && waited < 5, "\(waited)")
        #expect(said?.0 == "host-a" && said?.1 == 1_800)
        #expect(b.isValid)
        // The old holder finds it lost at its next renewal, and may not fetch any more.
        #expect(a.renew() == .lost(to: holder("host-b", ttlMs: 1_500)))
        #expect(!a.isValid)
    }

    /// Released by a clean stop, or held by a process of this machine that is gone (kill -9, then a
    /// restart): taken at once, however long the TTL. A live process of this machine: refused at once.
    @Test func releasedOrDeadOnThisMachineIsTakenAtOnce() throws {
        let a = try lease("host-a", ttlMs: 30_000)
        try a.acquire()
        a.release()
        let b = try lease("host-b", ttlMs: 30_000)
        var start = monotonicSeconds()
        try b.acquire()
        #expect(monotonicSeconds() - start < 1)

        // A record of a process of this machine that has exited.
        let child = try ChildProcess("/bin/true", [])
        #expect(child.wait() == .exited(0))
        var dead = PartitionLease.Holder.thisProcess(ttlMs: 30_000)
        dead.pid = child.pid
        _ = try bucket().put(PartitionLease.key(0), dead.json)
        start = monotonicSeconds()
        let restarted = try PartitionLease(js: js, partition: 0, ttlMs: 30_000, replicas: 1)
        try restarted.acquire()
        #expect(monotonicSeconds() - start < 1)
        #expect(restarted.isValid)

        // A record of a live process of this machine (another server's, say): refused at once.
        let sleeper = try ChildProcess("/bin/sleep", ["30"])
        defer {
            sleeper.kill(SIGKILL)
            _ = sleeper.wait()
        }
        var live = PartitionLease.Holder.thisProcess(ttlMs: 30_000)
        live.pid = sleeper.pid
        live.processStart = try #require(PartitionLease.Holder.startTime(sleeper.pid))
        _ = try bucket().put(PartitionLease.key(0), live.json)
        let again = try PartitionLease(js: js, partition: 0, ttlMs: 30_000, replicas: 1)
        start = monotonicSeconds()
        let refusal = #expect(throws: PartitionLease.Refusal.self) { try again.acquire() }
        guard case .held(let by)? = refusal else {
            Issue.record("not refused: \(String(describing: refusal))")
            return
        }
        #expect(by?.pid == sleeper.pid)
        #expect(monotonicSeconds() - start < 1)
        // The same record once that process is killed — still a zombie, not reaped by its parent (this
        // test process): taken at once (it was refused until reaped).
        Glibc.kill(sleeper.pid, SIGKILL)
        sleepMs(200)
        #expect(PartitionLease.Holder.startTime(sleeper.pid) == nil, "a zombie counts as gone")
        start = monotonicSeconds()
        try again.acquire()
        #expect(monotonicSeconds() - start < 1)
        _ = sleeper.wait()
    }

    /// Renewal: keeps it valid; lost to a record written by someone else; taken again (a new epoch, so
    /// the worker seeks again) when the key was deleted by hand; not valid once a TTL passes unrenewed.
    @Test func renewalKeepsLosesOrRetakes() throws {
        let a = try lease("host-a", ttlMs: 900)
        try a.acquire()
        #expect(a.epoch == 1)
        for _ in 0..<3 {
            sleepMs(300)
            #expect(a.renew() == .renewed)
            #expect(a.isValid)
        }
        sleepMs(900)
        #expect(!a.isValid, "no renewal for a whole TTL: not valid")
        #expect(a.renew() == .renewed)
        #expect(a.isValid)
        try bucket().delete(PartitionLease.key(0))
        #expect(a.renew() == .retaken)
        #expect(a.epoch == 2)
        let intruder = holder("host-z", ttlMs: 900)
        _ = try bucket().put(PartitionLease.key(0), intruder.json)
        #expect(a.renew() == .lost(to: intruder))
        #expect(!a.isValid)
        a.release()  // not its own any more: left as it is
        #expect(try PartitionLease.holder(in: bucket(), partition: 0) == intruder)
    }
}

/// Renews a lease every third of its TTL on a thread until stopped.
final class Renewer: @unchecked Sendable {
    private let monitor = Monitor()
    private var stopping = false
    private var thread: JoinableThread?

    init(_ lease: PartitionLease) {
        thread = startThread { [self] in
            while true {
                let stop = monitor.locked {
                    monitor.wait(until: { stopping }, timeoutMs: lease.ttlMs / 3)
                }
                if stop { return }
                _ = lease.renew()
            }
        }
    }

    func stop() {
        monitor.locked {
            stopping = true
            monitor.broadcast()
        }
        thread?.join()
        thread = nil
    }
}

final class Outcomes: @unchecked Sendable {
    private let monitor = Monitor()
    private var values = ["", ""]
    func set(_ i: Int, _ text: String) { monitor.locked { values[i] = text } }
    var all: [String] { monitor.locked { values } }
}
