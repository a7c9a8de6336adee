#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// teamlog's few threads (the parser, the committer, the audit's second core) share these pieces:
// starting a thread, a lock with a condition, and a bounded queue of chunks. The store and the runtime
// both use them, so they live below both (as NIOConcurrencyHelpers does below NIOCore and NIOPosix).

/// A started thread, to be joined once.
public struct JoinableThread: @unchecked Sendable {
    let handle: pthread_t

    /// Waits for the thread to end.
    public func join() { pthread_join(handle, nil) }
}

/// Starts a thread running `body`; `nil` when the system gives none. `name` (at most 15 bytes on Linux)
/// is what `top -H`, `perf` and debuggers show for it.
public func startThread(name: String? = nil, _ body: @escaping () -> Void) -> JoinableThread? {
    final class Box: @unchecked Sendable {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(
        Box {
            if let name { nameThisThread(name) }
            body()
        })
    let rc = pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
    if rc != 0 {
        box.release()
        return nil
    }
    return JoinableThread(handle: thread)
}

/// Lowers the calling thread's scheduling priority to `nice` (Linux: the thread's own nice value; 19 is
/// the lowest). For background work that must not take a core from latency-bound threads while it has
/// waited long enough, yet gets an idle core whenever there is one.
public func lowerThisThreadsPriority(to nice: Int32) {
    #if os(Linux)
        // gettid() and SYS_gettid are not imported (they need _GNU_SOURCE); /proc/thread-self names the
        // thread as PID/task/TID.
        var buffer = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
        guard n > 0 else { return }
        let link = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let tid = link.split(separator: "/").last.flatMap({ id_t($0) }) else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, nice)
    #endif
}

/// Names the calling thread (truncated to the 15 bytes Linux keeps).
public func nameThisThread(_ name: String) {
    #if os(Linux)
        // pthread_setname_np is not imported (it needs _GNU_SOURCE); the kernel's file for it is.
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    #endif
}

/// Runs `second` on a new thread and `first` on this one, and returns both results when both are done
/// (rethrowing the first error met). For splitting read-only work over the machine's two cores; the
/// closures must not share mutable state.
public func inParallel<A, B>(_ first: () throws -> A, _ second: @escaping () throws -> B) throws -> (A, B) {
    let outcome = ThreadResult<B>()
    let thread = startThread { outcome.result = Result { try second() } }
    if thread == nil { outcome.result = Result { try second() } }  // no thread to be had: run it here
    let a = Result { try first() }
    thread?.join()
    return (try a.get(), try outcome.result!.get())
}

/// What `inParallel`'s second thread returned (read after joining it).
private final class ThreadResult<B>: @unchecked Sendable {
    var result: Result<B, any Error>?
}

/// A mutex with one condition variable.
public final class Monitor: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        mutex.initialize(to: pthread_mutex_t())
        cond.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        #if canImport(Glibc)
            // Timed waits measure on the monotonic clock (`wait(until:timeoutMs:)`), not wall time.
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
            pthread_cond_init(cond, &attributes)
            pthread_condattr_destroy(&attributes)
        #else
            pthread_cond_init(cond, nil)
        #endif
    }

    deinit {
        pthread_mutex_destroy(mutex)
        pthread_cond_destroy(cond)
        mutex.deallocate()
        cond.deallocate()
    }

    /// Runs `body` holding the lock.
    public func locked<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Inside `locked`: waits until `ready` holds, releasing the lock while waiting.
    public func wait(until ready: () -> Bool) {
        while !ready() { pthread_cond_wait(cond, mutex) }
    }

    /// Inside `locked`: waits until `ready` holds or `timeoutMs` milliseconds have passed, releasing the
    /// lock while waiting; whether `ready` holds.
    public func wait(until ready: () -> Bool, timeoutMs: Int) -> Bool {
        if ready() { return true }
        let deadline = MonotonicClock.nanoseconds() + Int64(max(0, timeoutMs)) * 1_000_000
        while !ready() {
            let left = deadline - MonotonicClock.nanoseconds()
            if left <= 0 { return false }
            #if canImport(Glibc)
                var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
                _ = pthread_cond_timedwait(cond, mutex, &ts)
            #else
                var ts = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
                _ = pthread_cond_timedwait_relative_np(cond, mutex, &ts)
            #endif
        }
        return true
    }

    /// Inside `locked`: runs `body` with the lock released, and takes it again.
    public func unlockedDuring(_ body: () -> Void) {
        pthread_mutex_unlock(mutex)
        defer { pthread_mutex_lock(mutex) }
        body()
    }

    /// Inside `locked`: wakes one waiter (for a condition one waiter can take, as one queued call).
    public func signal() { pthread_cond_signal(cond) }

    /// Inside `locked`: wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(cond) }
}

/// A bounded first-in first-out queue of chunks from one producing thread to one consuming thread.
/// Either side may close it: the producer at its end (with its failure, if any), the consumer to stop
/// the producer. The consumer can hand chunks back to be freed on the producer's thread (freeing
/// thousands of strings was a real share of the consumer's work).
public final class ChunkQueue<T>: @unchecked Sendable {
    private let monitor = Monitor()
    private var chunks: [[T]] = []
    private var spent: [[T]] = []
    private var closed = false
    private var failure: (any Error)?
    private let depth: Int

    public init(depth: Int = 16) {
        self.depth = depth
    }

    /// Adds a chunk, waiting while the queue is full; false when the queue was closed (the consumer
    /// stopped). Frees the chunks handed back so far.
    public func push(_ chunk: [T]) -> Bool {
        var garbage: [[T]] = []
        defer { garbage.removeAll() }  // outside the lock
        return monitor.locked {
            monitor.wait { chunks.count < depth || closed }
            swap(&garbage, &spent)
            guard !closed else { return false }
            chunks.append(chunk)
            monitor.broadcast()
            return true
        }
    }

    /// No more chunks will come (`failure`: why the producer stopped early), or the consumer stops.
    public func close(failure: (any Error)? = nil) {
        monitor.locked {
            closed = true
            self.failure = self.failure ?? failure
            monitor.broadcast()
        }
    }

    /// The next chunk, or `nil` once the queue is closed and empty; rethrows the producer's failure.
    public func pop() throws -> [T]? {
        try monitor.locked {
            monitor.wait { !chunks.isEmpty || closed }
            return try takeFirst()
        }
    }

    /// Inside the lock, once a chunk is there or the queue is closed: the first chunk (waking a producer
    /// waiting for room), or `nil` at the end — rethrowing the producer's failure.
    private func takeFirst() throws -> [T]? {
        if chunks.isEmpty {
            if let failure { throw failure }
            return nil
        }
        monitor.broadcast()
        return chunks.removeFirst()
    }

    /// What `pop(timeoutMs:)` found.
    public enum Popped {
        case chunk([T])
        /// Nothing came within the time.
        case timeout
        /// The queue is closed and empty.
        case end
    }

    /// The next chunk, waiting at most `timeoutMs`; rethrows the producer's failure at the end.
    public func pop(timeoutMs: Int) throws -> Popped {
        try monitor.locked {
            guard monitor.wait(until: { !chunks.isEmpty || closed }, timeoutMs: timeoutMs) else { return .timeout }
            return try takeFirst().map { .chunk($0) } ?? .end
        }
    }

    /// Hands back a consumed chunk to be freed on the producer's thread.
    public func recycle(_ chunk: [T]) {
        monitor.locked { spent.append(chunk) }
    }
}
