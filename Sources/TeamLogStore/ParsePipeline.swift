public import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One input line, read and parsed.
public struct ParsedLine: Sendable {
    public var number: Int
    /// `nil` for a blank line (skipped, not counted).
    public var result: Result<Op, Rejection>?
    /// The line's opId when it could be read (for rejection records).
    public var opId: String?

    /// Reads and parses one line (the work the pipeline moves off the writer's thread).
    public static func parse(_ line: LineReader.Line) -> ParsedLine {
        switch line {
        case .tooLong(let number, let length):
            return ParsedLine(
                number: number,
                result: .failure(
                    Rejection(.lineTooLong, "line is \(length) bytes, over the \(OpParser.maxLineBytes)-byte limit")),
                opId: nil)
        case .text(let number, let bytes):
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
                return ParsedLine(number: number, result: nil, opId: nil)
            }
            let (result, opId) = bytes.withUnsafeBytes { OpParser.parseLine($0) }
            return ParsedLine(number: number, result: result, opId: opId)
        }
    }
}

/// Batch mode on two cores: a thread reads and parses lines into chunks while the caller's thread
/// decides and applies them in input order (and the store's committer thread writes full batches).
/// Parsing needs no state, so it overlaps freely; order and determinism are unchanged because chunks
/// are consumed in the order they were read.
final class ParsePipeline: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var chunks: [[ParsedLine]] = []
    /// Chunks the consumer is done with, freed here: a `team.create` of a supergroup holds thousands of
    /// strings, and freeing them on the writer's thread was an eighth of its work.
    private var spent: [[ParsedLine]] = []
    private var finished = false
    private var failure: (any Error)?
    private var stopped = false
    private var reader: LineReader
    private let chunkSize: Int
    private let depth: Int
    private var thread = pthread_t()

    init(reader: LineReader, chunkSize: Int = 512, depth: Int = 16) {
        self.reader = reader
        self.chunkSize = chunkSize
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

    /// Starts the reading thread.
    func start() {
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(
            &thread, nil,
            { raw in
                let pipeline = Unmanaged<ParsePipeline>.fromOpaque(raw!).takeRetainedValue()
                pipeline.produce()
                return nil
            }, box)
    }

    private func produce() {
        var chunk: [ParsedLine] = []
        chunk.reserveCapacity(chunkSize)
        do {
            while let line = try reader.next() {
                chunk.append(ParsedLine.parse(line))
                if chunk.count == chunkSize {
                    guard push(chunk) else { return }
                    chunk.removeAll(keepingCapacity: true)
                }
            }
            if !chunk.isEmpty { _ = push(chunk) }
        } catch {
            pthread_mutex_lock(mutex)
            failure = error
            pthread_mutex_unlock(mutex)
        }
        pthread_mutex_lock(mutex)
        finished = true
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
    }

    /// Queues a chunk, waiting while the queue is full; false when the consumer stopped.
    private func push(_ chunk: [ParsedLine]) -> Bool {
        var garbage: [[ParsedLine]] = []
        defer { garbage.removeAll() }  // after unlocking
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while chunks.count >= depth && !stopped { pthread_cond_wait(cond, mutex) }
        swap(&garbage, &spent)
        if stopped { return false }
        chunks.append(chunk)
        pthread_cond_broadcast(cond)
        return true
    }

    /// Hands back a consumed chunk to be freed on the reading thread.
    func recycle(_ chunk: [ParsedLine]) {
        pthread_mutex_lock(mutex)
        spent.append(chunk)
        pthread_mutex_unlock(mutex)
    }

    /// The next chunk in input order, or `nil` at the end; rethrows a read error.
    func next() throws -> [ParsedLine]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while chunks.isEmpty && !finished { pthread_cond_wait(cond, mutex) }
        if !chunks.isEmpty {
            let chunk = chunks.removeFirst()
            pthread_cond_broadcast(cond)
            return chunk
        }
        if let failure { throw failure }
        return nil
    }

    /// Stops the producer (after a failure of the consumer) and waits for it.
    func finish() {
        pthread_mutex_lock(mutex)
        stopped = true
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
        pthread_join(thread, nil)
    }
}
