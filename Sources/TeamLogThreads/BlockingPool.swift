#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Threads for work that blocks (an LMDB read, a scratch replay, a wait on a `ChunkQueue`), started as
/// calls need them: a call runs at once on an idle thread or a new one while fewer than `maxThreads`
/// run, and waits its turn only beyond that. A thread idle for `idleSeconds` ends.
///
/// Not Dispatch's global queue: on Linux it runs about as many threads as there are cores and adds one
/// more about every second while they block, so a call queued behind blocked ones waits a second per
/// blocked call ahead of it (measured on a 2-core host: 0.9 s behind 2, 5.9 s behind 8, 13.9 s behind 16).
/// So a server's status read queued there behind two `?at=` replays would wait about a second, and
/// longer behind exports waiting for their next chunk.
public final class BlockingPool: @unchecked Sendable {
    private let monitor = Monitor()
    private var queue: [() -> Void] = []
    /// The first call in `queue` not yet taken (the array is compacted when it drains).
    private var head = 0
    private var threads = 0
    private var idle = 0
    private var peak = 0
    private let name: String
    /// The most threads that run at once.
    public let maxThreads: Int
    private let idleMs: Int

    public init(name: String, maxThreads: Int, idleSeconds: Double = 30) {
        precondition(maxThreads > 0, "a pool needs a thread")
        self.name = name
        self.maxThreads = maxThreads
        idleMs = max(1, Int(idleSeconds * 1_000))
    }

    /// Runs `work` on a thread of the pool: at once while fewer than `maxThreads` are busy, else when one
    /// is free. When the system gives no thread and the pool has none, `work` runs on the calling thread.
    public func submit(_ work: @escaping () -> Void) {
        let start: Bool = monitor.locked {
            queue.append(work)
            monitor.signal()  // one idle thread for one call: not every idle thread woken to find it taken
            // Every queued call needs a waiting thread of its own, or a new one.
            guard queue.count - head > idle, threads < maxThreads else { return false }
            threads += 1
            peak = max(peak, threads)
            return true
        }
        guard start else { return }
        if startThread(name: name, { [self] in serve() }) != nil { return }
        // No thread: undo the count, and run the call here if no thread of the pool will.
        let orphaned: (() -> Void)? = monitor.locked {
            threads -= 1
            guard threads == 0, head < queue.count else { return nil }
            return take()
        }
        orphaned?()
    }

    /// Runs `body` on a thread of the pool and returns its result to the awaiting task (whose thread is
    /// one of Swift concurrency's few, and is not blocked meanwhile).
    public func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            submit { continuation.resume(with: Result { try body() }) }
        }
    }

    /// What the pool holds now (for metrics and tests).
    public struct Counts: Sendable, Equatable {
        /// Threads alive: busy or idle.
        public var threads: Int
        /// Threads running a call.
        public var busy: Int
        /// Calls waiting for a thread (only at `maxThreads`, or while a new thread starts).
        public var queued: Int
        /// The most threads alive at once so far.
        public var peak: Int

        public init(threads: Int, busy: Int, queued: Int, peak: Int) {
            (self.threads, self.busy, self.queued, self.peak) = (threads, busy, queued, peak)
        }
    }

    public var counts: Counts {
        monitor.locked {
            Counts(threads: threads, busy: threads - idle, queued: queue.count - head, peak: peak)
        }
    }

    private func serve() {
        monitor.locked {
            while true {
                if head < queue.count {
                    let work = take()
                    monitor.unlockedDuring(work)
                    continue
                }
                idle += 1
                let woken = monitor.wait(until: { head < queue.count }, timeoutMs: idleMs)
                idle -= 1
                if !woken {
                    threads -= 1
                    return
                }
            }
        }
    }

    /// Inside the lock: the first queued call, taken.
    private func take() -> () -> Void {
        let work = queue[head]
        queue[head] = {}  // the call's captures are released when it has run, not when the queue drains
        head += 1
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.count <= 64)
            head = 0
        } else if head >= 64 && head * 2 >= queue.count {
            queue.removeFirst(head)  // a queue that never drains does not grow with the calls it served
            head = 0
        }
        return work
    }
}
