import Synchronization
import TeamLogStore
import TeamLogThreads
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
    public var opId: Id?
    /// Input bytes consumed through this line (`LineReader.bytesConsumed`), set by the pipeline for progress
    /// and the input position.
    public var endOffset = 0
    /// `InputPosition.checksum` of the line's bytes, set by a pipeline that keeps the input position (0:
    /// not computed, or a line over the limit).
    public var checksum: UInt64 = 0

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

/// Reading and parsing on a second thread (`tl-parse`) while the caller's thread decides and applies the
/// lines in input order (and the store's committer thread writes batches). Parsing needs no state, so it
/// overlaps freely; order and determinism are unchanged because chunks are consumed in the order they
/// were read.
///
/// - `.batch` (a file): full chunks of `chunkSize` lines, each with the input bytes consumed through it
///   (for progress).
/// - `.live` (`--follow`): lines are handed over as soon as the input holds no further complete line (at
///   most `chunkSize` at a time), so no line waits for others to arrive. On `requestStop` the thread hands
///   over the complete lines it has already read (a pipe cannot give them back) and ends.
final class ParsePipeline: @unchecked Sendable {
    enum Mode { case batch, live }

    private let queue: ChunkQueue<ParsedLine>
    private var reader: LineReader
    private let mode: Mode
    private let chunkSize: Int
    private var thread: JoinableThread?
    /// Read before every line (an atomic load, not a lock).
    private let stopping = Atomic<Bool>(false)
    /// Whether the reading thread met the end of the input (not a stop request): every line was read.
    private let ended = Atomic<Bool>(false)
    var reachedEnd: Bool { ended.load(ordering: .acquiring) }

    /// Whether each line's `checksum` is computed (for the input position a file ingest keeps).
    private let checksums: Bool

    init(reader: LineReader, mode: Mode = .batch, checksums: Bool = false) {
        self.reader = reader
        self.mode = mode
        self.checksums = checksums
        chunkSize = mode == .batch ? 512 : 256
        queue = ChunkQueue(depth: mode == .batch ? 16 : 64)
    }

    /// Starts the reading thread.
    func start() throws {
        guard let started = startThread(name: "tl-parse", { self.produce() }) else {
            throw StoreError("cannot start the parsing thread")
        }
        thread = started
    }

    private func produce() {
        var chunk: [ParsedLine] = []
        chunk.reserveCapacity(chunkSize)
        /// False when the consumer closed the queue.
        func handOver() -> Bool {
            defer { chunk.removeAll(keepingCapacity: true) }
            return chunk.isEmpty || queue.push(chunk)
        }
        do {
            while true {
                if stopping.load(ordering: .acquiring) {
                    while let line = reader.bufferedLine() { chunk.append(parse(line)) }
                    _ = handOver()
                    break
                }
                // Batch: wait for input in 200 ms steps (a pipe gone quiet: hand over the lines in hand and
                // look for a stop request). Live and idle: wait a while (then look for a stop); live with
                // lines in hand: only see whether more are there already.
                let timeout = mode == .batch ? 200 : chunk.isEmpty ? 50 : 0
                switch try reader.next(timeoutMs: timeout) {
                case .line(let line):
                    chunk.append(parse(line))
                    if chunk.count == chunkSize { guard handOver() else { return } }
                case .timeout:
                    guard handOver() else { return }
                case .end:
                    ended.store(true, ordering: .releasing)
                    _ = handOver()
                    queue.close()
                    return
                }
            }
            queue.close()
        } catch {
            _ = handOver()
            queue.close(failure: error)
        }
    }

    /// Parses `line`, the reader's last, with its end offset (and checksum).
    private func parse(_ line: LineReader.Line) -> ParsedLine {
        var parsed = ParsedLine.parse(line)
        parsed.endOffset = reader.bytesConsumed
        if checksums, case .text(_, let bytes) = line {
            parsed.checksum = bytes.withUnsafeBytes { InputPosition.checksum($0) }
        }
        return parsed
    }

    /// The next chunk in input order, or `nil` at the end; rethrows a read error.
    func next() throws -> [ParsedLine]? { try queue.pop() }

    /// The next lines in input order, waiting at most `timeoutMs`.
    func next(timeoutMs: Int) throws -> ChunkQueue<ParsedLine>.Popped { try queue.pop(timeoutMs: timeoutMs) }

    /// Hands back a consumed chunk to be freed on the reading thread.
    func recycle(_ chunk: [ParsedLine]) { queue.recycle(chunk) }

    /// Asks the reading thread to hand over the lines it has read and end.
    func requestStop() { stopping.store(true, ordering: .releasing) }

    /// Stops the reading thread (closing the queue: after a failure of the consumer, or at the end) and
    /// waits for it.
    func finish() {
        requestStop()
        queue.close()
        thread?.join()
        thread = nil
    }
}
