#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads newline-terminated lines from a file descriptor without ever holding more than the line limit:
/// a longer line is read to its end and reported by its length only.
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
    /// Keep reading a regular file past its end as it grows (`tail -f`).
    private let follow: Bool
    private let isRegularFile: Bool
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var eof = false
    /// Number of the last line returned (1-based).
    public private(set) var lineNumber = 0

    /// Reads from `fd`; lines longer than `limit` bytes are reported as `tooLong`.
    public init(fd: Int32, limit: Int = 1 << 20, chunk: Int = 1 << 16, follow: Bool = false) {
        self.fd = fd
        self.limit = limit
        self.follow = follow
        var st = stat()
        isRegularFile = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
        buffer = [UInt8](repeating: 0, count: max(chunk, 4096))
    }

    /// Whether a line is complete in the buffer already.
    private var hasBufferedLine: Bool { buffer[start..<end].contains(0x0A) }

    /// Waits at most `timeoutMs` for input to read (`nil`: wait as long as it takes). Returns false on timeout.
    private func wait(timeoutMs: Int?) -> Bool {
        if isRegularFile { return true }  // regular files are always readable; EOF is handled by the caller
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let n = poll(&p, 1, Int32(clamping: timeoutMs ?? -1))
        return n != 0  // errors and EINTR return to the caller, which checks for a stop request
    }

    /// The next line, waiting at most `timeoutMs` for more input (`nil`: no limit).
    ///
    /// With `follow` on a regular file, the end of the file is not the end of the input: it waits for the
    /// file to grow. Input without a final newline is held back until its newline arrives (or the end).
    public mutating func next(timeoutMs: Int?) throws -> Read {
        guard !hasBufferedLine else { return try next().map(Read.line) ?? .end }
        let started = Self.milliseconds()
        while true {
            let remaining = timeoutMs.map { max(0, $0 - Int(Self.milliseconds() - started)) }
            if eof && follow && isRegularFile { eof = false }
            if eof { return try next().map(Read.line) ?? .end }
            guard wait(timeoutMs: remaining) else { return .timeout }
            let before = end
            if try !fill() {
                if follow && isRegularFile {
                    if remaining == 0 { return .timeout }
                    usleep(UInt32(min(2, remaining ?? 2)) * 1000)
                    continue
                }
                return try next().map(Read.line) ?? .end
            }
            if buffer[before..<end].contains(0x0A) || end - start > limit { return try next().map(Read.line) ?? .end }
            if remaining == 0 { return .timeout }
        }
    }

    static func milliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Refills the buffer; returns false at end of input. Retries on EINTR.
    private mutating func fill() throws -> Bool {
        if eof { return false }
        if start > 0 {
            buffer.withUnsafeMutableBytes { b in
                _ = memmove(b.baseAddress!, b.baseAddress! + start, end - start)
            }
            end -= start
            start = 0
        }
        if end == buffer.count { buffer.append(contentsOf: repeatElement(0, count: buffer.count)) }
        while true {
            let n = buffer.withUnsafeMutableBytes { b in read(fd, b.baseAddress! + end, b.count - end) }
            if n > 0 {
                end += n
                return true
            }
            if n == 0 {
                eof = true
                return false
            }
            if errno == EINTR { return true }  // let the caller look for a stop request
            throw StoreError("read failed: \(String(cString: strerror(errno)))")
        }
    }

    /// The next line, or `nil` at end of input. A last line without a newline still counts.
    public mutating func next() throws -> Line? {
        var scanned = 0  // bytes of the current line already known to hold no newline
        var skipped = 0  // bytes of an over-long line already dropped
        while true {
            if let nl = buffer[(start + scanned)..<end].firstIndex(of: 0x0A) {
                lineNumber += 1
                let length = skipped + nl - start
                defer { start = nl + 1 }
                if skipped > 0 || length > limit { return .tooLong(number: lineNumber, length: length) }
                return .text(number: lineNumber, bytes: trimmed(start, nl))
            }
            scanned = end - start
            if scanned > limit {
                // Drop what we have of an over-long line; keep reading until its newline.
                skipped += scanned
                start = end
                scanned = 0
            }
            if try !fill() {
                if start == end && skipped == 0 { return nil }
                lineNumber += 1
                let length = skipped + end - start
                defer { start = end }
                if skipped > 0 || length > limit { return .tooLong(number: lineNumber, length: length) }
                return .text(number: lineNumber, bytes: trimmed(start, end))
            }
        }
    }

    private func trimmed(_ from: Int, _ to: Int) -> [UInt8] {
        var to = to
        if to > from && buffer[to - 1] == 0x0D { to -= 1 }
        return Array(buffer[from..<to])
    }
}
