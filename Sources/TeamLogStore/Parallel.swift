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
