// Cutting one JSON Lines file into consecutive chunk files, for `--scale`.

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a JSON Lines file once, in 1 MiB blocks, and copies the next `n` lines to a new file on each
/// call, so the bench never holds the workload in memory (its own peak RSS is the floor under every
/// child's, see `ChildRun.peakRSSBytes`).
struct ChunkSplitter {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var start = 0
    private var end = 0

    /// Opens `path` for reading.
    init(path: String) throws {
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("cannot open \(path): \(String(cString: strerror(errno)))") }
    }

    /// Copies the next `lines` lines (fewer at the end of the file) to `path`; returns how many it copied.
    mutating func copy(lines: Int, to path: String) throws -> Int {
        let out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard out >= 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(out) }
        var copied = 0
        while copied < lines {
            if start == end {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
                guard n >= 0 else { throw BenchError("read: \(String(cString: strerror(errno)))") }
                if n == 0 { break }
                start = 0
                end = n
            }
            // Up to the chunk's last newline in this block, or the whole block.
            var cut = start
            while cut < end && copied < lines {
                let found = buffer.withUnsafeBytes { bytes -> Int? in
                    let base = bytes.baseAddress! + cut
                    guard let hit = memchr(base, 0x0A, end - cut) else { return nil }
                    return cut + (UnsafeRawPointer(hit) - UnsafeRawPointer(base)) + 1
                }
                guard let next = found else {
                    cut = end
                    break
                }
                cut = next
                copied += 1
            }
            try buffer.withUnsafeBytes { try writeFully(out, $0.baseAddress! + start, cut - start) }
            start = cut
        }
        return copied
    }

    /// Closes the source file.
    func close() {
        Glibc.close(fd)
    }

    private func writeFully(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) throws {
        var offset = 0
        while offset < count {
            let n = write(fd, bytes + offset, count - offset)
            guard n > 0 else { throw BenchError("write: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
}
