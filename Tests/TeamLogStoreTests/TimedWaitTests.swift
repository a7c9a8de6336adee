import TeamLogStore
import TeamLogThreads
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
}
