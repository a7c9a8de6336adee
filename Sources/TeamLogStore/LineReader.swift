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

    private let fd: Int32
    private let limit: Int
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var eof = false
    /// Number of the last line returned (1-based).
    public private(set) var lineNumber = 0

    /// Reads from `fd`; lines longer than `limit` bytes are reported as `tooLong`.
    public init(fd: Int32, limit: Int = 1 << 20, chunk: Int = 1 << 16) {
        self.fd = fd
        self.limit = limit
        buffer = [UInt8](repeating: 0, count: max(chunk, 4096))
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
            if errno == EINTR { continue }
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
