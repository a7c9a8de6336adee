#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `second` on a new thread and `first` on this one, and returns both results when both are done
/// (rethrowing the first error met). For splitting read-only work over the machine's two cores; the
/// closures must not share mutable state.
func inParallel<A, B>(_ first: () throws -> A, _ second: @escaping () throws -> B) throws -> (A, B) {
    let box = ParallelWork(second)
    var thread = pthread_t()
    let started = pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<ParallelRunner>.fromOpaque(raw!).takeUnretainedValue().run()
            return nil
        }, Unmanaged.passUnretained(box as ParallelRunner).toOpaque())
    if started != 0 {  // no thread to be had: run it here
        box.result = Result { try second() }
    }
    let a = Result { try first() }
    if started == 0 { pthread_join(thread, nil) }
    return (try a.get(), try box.result!.get())
}

/// The work of `inParallel`'s second thread (a class: the thread gets a pointer to it).
private class ParallelRunner: @unchecked Sendable {
    func run() {}
}

private final class ParallelWork<B>: ParallelRunner, @unchecked Sendable {
    let work: () throws -> B
    var result: Result<B, any Error>?
    init(_ work: @escaping () throws -> B) { self.work = work }
    override func run() { result = Result { try work() } }
}

/// A bounded first-in first-out queue of chunks between one producing and one consuming thread.
final class ChunkQueue<T>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var chunks: [[T]] = []
    private var closed = false
    private let depth: Int

    init(depth: Int = 16) {
        self.depth = depth
        mutex.initialize(to: pthread_mutex_t())
        cond.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        pthread_cond_destroy(cond)
        mutex.deallocate()
        cond.deallocate()
    }

    /// Adds a chunk, waiting while the queue is full.
    func push(_ chunk: [T]) {
        pthread_mutex_lock(mutex)
        while chunks.count >= depth && !closed { pthread_cond_wait(cond, mutex) }
        if !closed { chunks.append(chunk) }
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
    }

    /// No more chunks will come.
    func close() {
        pthread_mutex_lock(mutex)
        closed = true
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
    }

    /// The next chunk, or `nil` once the queue is closed and empty.
    func pop() -> [T]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while chunks.isEmpty && !closed { pthread_cond_wait(cond, mutex) }
        if chunks.isEmpty { return nil }
        let chunk = chunks.removeFirst()
        pthread_cond_broadcast(cond)
        return chunk
    }
}
