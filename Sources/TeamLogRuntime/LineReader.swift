import TeamLogThreads
import TeamLogStore
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads newline-terminated lines from a file descriptor without ever holding much more than the line
/// limit: a longer line is read to its end and reported by its length only.
///
/// One state machine serves batch and stream mode. In follow mode on a regular file the end of the file
/// is not the end of the input (it waits for the file to grow, like `tail -f`), and a line is never
/// reported before its newline arrives — an over-long one included.
public struct LineReader {
    /// One input line.
    public enum Line {
        /// The line's bytes, without the newline (and without a trailing `\r`).
        case text(number: Int, bytes: [UInt8])
        /// A line over the limit, with its length in bytes.
        case tooLong(number: Int, length: Int)
    }

    /// The outcome of waiting for a line.
    public enum Read {
        case line(Line)
        /// Nothing arrived before the timeout.
        case timeout
        /// End of input (never in follow mode on a regular file).
        case end
    }

    private let fd: Int32
    private let limit: Int
    private let follow: Bool
    private let isRegularFile: Bool
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    /// Bytes of the current line (from `start`) already known to hold no newline.
    private var scanned = 0
    /// Bytes of an over-long current line already dropped.
    private var skipped = 0
    /// Whether the last byte dropped was a CR (which a newline right after makes a line end, not content).
    private var skippedCR = false
    private var eof = false
    /// Bytes read from the descriptor so far.
    private var bytesRead = 0
    /// Number of the last line returned (1-based).
    public private(set) var lineNumber = 0

    /// Input bytes consumed so far, counted from where reading began: through the last line returned
    /// (and the dropped head of an over-long line being skipped). For progress; costs nothing per line.
    public var bytesConsumed: Int { bytesRead - (end - start) }

    /// A followed file that changed under the reader: truncated (`logrotate`'s `copytruncate`), or its
    /// path now naming another file (renamed or removed away: rotated). Thrown at the end of what was
    /// read, so every line before it has been handed out.
    public struct InputChanged: Error, CustomStringConvertible {
        public var description: String
    }

    /// The followed file's path (`follow` on a regular file), looked at while waiting for it to grow.
    private let path: String?
    /// When the path was last compared with the file being read (monotonic ms).
    private var pathCheckedMs: Int64 = 0

    /// Reads from `fd`; lines longer than `limit` bytes are reported as `tooLong`.
    /// `linesBefore`: the lines of the input before where `fd` is read from (a resumed ingest), so line
    /// numbers go on from there. `path`: the file `fd` reads, when following it — a truncation or a
    /// replacement of it then ends the input with `InputChanged` instead of going unnoticed.
    public init(
        fd: Int32, limit: Int = 1 << 20, chunk: Int = 1 << 16, follow: Bool = false, linesBefore: Int = 0,
        path: String? = nil
    ) {
        self.fd = fd
        self.path = path
        self.lineNumber = linesBefore
        self.limit = limit
        self.follow = follow
        var st = stat()
        isRegularFile = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
        buffer = [UInt8](repeating: 0, count: max(chunk, 4096))
    }

    /// The next line, waiting for input as long as it takes; `nil` at the end of input.
    public mutating func next() throws -> Line? {
        while true {
            switch try next(timeoutMs: nil) {
            case .line(let line): return line
            case .end: return nil
            case .timeout: continue
            }
        }
    }

    /// The next line, waiting at most `timeoutMs` for more input (`nil`: no limit).
    public mutating func next(timeoutMs: Int?) throws -> Read {
        let started = MonotonicClock.milliseconds()
        while true {
            if let line = takeLine() { return .line(line) }
            if eof {
                guard start < end || skipped > 0 else { return .end }
                return .line(finishLine(at: end, consumed: end))  // a last line without a newline
            }
            let remaining = timeoutMs.map { max(0, $0 - Int(MonotonicClock.milliseconds() - started)) }
            if !isRegularFile {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let n = poll(&p, 1, Int32(clamping: remaining ?? -1))
                if n == 0 { return .timeout }
                if n < 0 { return .timeout }  // EINTR: let the caller look for a stop request
            }
            let got = try fill()
            if got == 0 && !eof {
                // Follow mode at the end of a regular file: wait for it to grow.
                if remaining == 0 { return .timeout }
                usleep(UInt32(min(2, remaining ?? 2)) * 1000)
            } else if got < 0 {
                return .timeout  // EINTR
            }
        }
    }

    /// A complete line already read into the buffer, without reading more (to drain on a stop request).
    public mutating func bufferedLine() -> Line? { takeLine() }

    /// A complete line from the buffer, if one is there; drops the head of an over-long line as it goes.
    private mutating func takeLine() -> Line? {
        if let nl = buffer[(start + scanned)..<end].firstIndex(of: 0x0A) {
            return finishLine(at: nl, consumed: nl + 1)
        }
        scanned = end - start
        if scanned > limit + 1 {  // one byte more: a line of exactly `limit` bytes may end in CRLF
            skippedCR = buffer[end - 1] == 0x0D
            skipped += scanned
            start = end
            scanned = 0
        }
        return nil
    }

    private mutating func finishLine(at lineEnd: Int, consumed: Int) -> Line {
        lineNumber += 1
        // The CR of a CRLF line end is not content: neither in the bytes nor in the length checked.
        let cr = lineEnd > start ? buffer[lineEnd - 1] == 0x0D : skipped > 0 && skippedCR
        let length = skipped + lineEnd - start - (cr ? 1 : 0)
        defer {
            start = consumed
            scanned = 0
            skipped = 0
            skippedCR = false
        }
        if length > limit { return .tooLong(number: lineNumber, length: length) }
        return .text(number: lineNumber, bytes: Array(buffer[start..<(lineEnd - (cr ? 1 : 0))]))
    }

    /// Following a regular file at its end: throws `InputChanged` when it is now shorter than what was
    /// read — lines written to it from now on would be read from the old offset, in the middle of other
    /// lines, and those before it never (a trial: `copytruncate` while following lost 985 of 2,000 lines
    /// without a word) — or, looked at every 500 ms, when `path` names another file or none.
    private mutating func checkFollowedFile() throws {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        let offset = Int(lseek(fd, 0, SEEK_CUR))
        if offset > Int(st.st_size) {
            throw InputChanged(
                description: "\(path ?? "the input") was truncated (it holds \(st.st_size) bytes; \(offset) had been read): "
                    + "what is written to it now would be read from the wrong place, so the run stops here — every line "
                    + "read before is answered and committed. Follow the new content with `teamlog ingest \(path ?? "FILE") --follow` "
                    + "(not --resume: it is another input; lines sent again with an opId are answered duplicate), and "
                    + "rotate by renaming rather than by copytruncate")
        }
        guard let path else { return }
        let now = MonotonicClock.milliseconds()
        guard now - pathCheckedMs >= 500 else { return }
        pathCheckedMs = now
        var named = stat()
        let gone = stat(path, &named) != 0
        if gone || named.st_ino != st.st_ino || named.st_dev != st.st_dev {
            throw InputChanged(
                description: "\(path) \(gone ? "was removed" : "now names another file") (rotated): every line of the "
                    + "file being followed was read, answered and committed. Follow the new file with `teamlog ingest "
                    + "\(path) --follow` (not --resume: it is another input)")
        }
    }

    /// Reads more input: the byte count, 0 at the end of input (sets `eof` unless following a regular
    /// file), -1 when interrupted.
    private mutating func fill() throws -> Int {
        if start > 0 {
            let count = end - start
            buffer.withUnsafeMutableBytes { b in _ = memmove(b.baseAddress!, b.baseAddress! + start, count) }
            end = count
            start = 0
        }
        if end == buffer.count { buffer.append(contentsOf: repeatElement(0, count: buffer.count)) }
        let n = buffer.withUnsafeMutableBytes { b in read(fd, b.baseAddress! + end, b.count - end) }
        if n > 0 {
            end += n
            bytesRead += n
            return n
        }
        if n == 0 {
            if !(follow && isRegularFile) { eof = true } else { try checkFollowedFile() }
            return 0
        }
        if errno == EINTR { return -1 }
        throw StoreError(code: .io, message: "read failed: \(String(cString: strerror(errno)))", cause: SystemCallError("read", errno))
    }

}
