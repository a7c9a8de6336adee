import TeamLogStore
import TeamLogThreads
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The timed waits stream mode polls with, and the resident-memory figure the writer's page releases
/// go by.
@Suite struct TimedWaitTests {
    @Test func aTimedWaitReturnsAtItsConditionOrItsTime() {
        let monitor = Monitor()
        var flag = false
        let started = MonotonicClock.milliseconds()
        let timedOut = monitor.locked { monitor.wait(until: { flag }, timeoutMs: 30) }
        #expect(!timedOut)
        #expect(MonotonicClock.milliseconds() - started >= 30)
        monitor.locked { flag = true }
        let before = MonotonicClock.milliseconds()
        #expect(monitor.locked { monitor.wait(until: { flag }, timeoutMs: 10_000) })
        #expect(MonotonicClock.milliseconds() - before < 1_000)
    }

    @Test func aTimedPopGivesAChunkATimeoutOrTheEnd() throws {
        let queue = ChunkQueue<Int>()
        let started = MonotonicClock.milliseconds()
        guard case .timeout = try queue.pop(timeoutMs: 20) else {
            Issue.record("an empty queue gave something")
            return
        }
        #expect(MonotonicClock.milliseconds() - started >= 20)
        // A chunk pushed from another thread while the consumer waits wakes it before its time.
        let producer = try #require(
            startThread {
                usleep(20_000)
                _ = queue.push([1, 2, 3])
            })
        let waited = MonotonicClock.milliseconds()
        guard case .chunk(let chunk) = try queue.pop(timeoutMs: 10_000) else {
            Issue.record("no chunk")
            return
        }
        #expect(chunk == [1, 2, 3])
        #expect(MonotonicClock.milliseconds() - waited < 5_000)
        producer.join()
        queue.close()
        guard case .end = try queue.pop(timeoutMs: 10_000) else {
            Issue.record("a closed, empty queue did not end")
            return
        }
    }

    @Test func statmsThirdFieldIsTheFileBackedPages() throws {
        let line = Array("61234 20480 7321 2300 0 15000 0\n".utf8)
        #expect(line.withUnsafeBytes { ResidentMemory.sharedPages($0) } == 7321)
        #expect(Array("1 2".utf8).withUnsafeBytes { ResidentMemory.sharedPages($0) } == nil)
        #expect(Array("1 2 x 4".utf8).withUnsafeBytes { ResidentMemory.sharedPages($0) } == nil)
        #if os(Linux)
            // This test's own program text is file-backed and resident.
            let bytes = try #require(ResidentMemory.fileBackedBytes())
            #expect(bytes > 1 << 20)
        #endif
    }

    /// A call to `BlockingPool` behind 40 blocked ones runs while they still block: on Linux, Dispatch's
    /// global queue (what `teamlog serve` used) runs about one thread per core and adds one per second
    /// while they block, so the same call waited ~38 s there (over this test's 30 s).
    @Test func aBlockingPoolCallDoesNotWaitBehindBlockedOnes() async throws {
        let pool = BlockingPool(name: "test-pool", maxThreads: 64)
        let gate = Gate()
        for _ in 0..<40 { pool.submit { gate.pass() } }
        #expect(gate.waitForArrivals(40, timeoutMs: 30_000), "all 40 blocked at once")
        let probe = Gate()
        pool.submit { probe.pass() }
        #expect(probe.waitForArrivals(1, timeoutMs: 30_000), "the call behind them ran while they blocked")
        #expect(pool.counts.peak == 41 && pool.counts.busy == 41 && pool.counts.queued == 0)
        probe.open()
        gate.open()
        // And the async form returns the result and rethrows.
        #expect(try await pool.run { 6 * 7 } == 42)
        struct Failed: Error {}
        await #expect(throws: Failed.self) { try await pool.run { throw Failed() } }
    }

    /// At `maxThreads` a call waits for a free thread; a thread idle for `idleSeconds` ends.
    @Test func aBlockingPoolIsBoundedAndShrinks() throws {
        let pool = BlockingPool(name: "test-pool", maxThreads: 2, idleSeconds: 0.05)
        let gate = Gate()
        pool.submit { gate.pass() }
        pool.submit { gate.pass() }
        #expect(gate.waitForArrivals(2, timeoutMs: 30_000))
        let third = Gate(open: true)
        pool.submit { third.pass() }
        usleep(200_000)
        #expect(third.arrived == 0, "no third thread")
        #expect(pool.counts == .init(threads: 2, busy: 2, queued: 1, peak: 2))
        gate.open()
        #expect(third.waitForArrivals(1, timeoutMs: 30_000), "it ran once a thread was free")
        #expect(pool.counts.peak == 2)
        let deadline = MonotonicClock.milliseconds() + 30_000
        while pool.counts.threads > 0 && MonotonicClock.milliseconds() < deadline { usleep(10_000) }
        #expect(pool.counts.threads == 0, "idle threads ended")
        // A call after they ended starts a thread again.
        let again = Gate(open: true)
        pool.submit { again.pass() }
        #expect(again.waitForArrivals(1, timeoutMs: 30_000))
    }
}
