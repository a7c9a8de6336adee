#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one-writer rule across processes: an exclusive `flock` on `writer.lock` in the store directory,
/// held for as long as a writable `Store` is open.
///
/// LMDB serializes write transactions itself, but a second writer would decide ops against the state it
/// loaded at open, which the first writer keeps changing; so a second writer waits for the lock or fails
/// with a message naming the holder.
final class WriterLock {
    private var fd: Int32

    /// `giveUp`, when given, is looked at every 50 ms while waiting (a blocking `flock` otherwise); when it
    /// turns true the wait ends with `writerBusy`.
    init(directory: String, wait: Bool, giveUp: (() -> Bool)? = nil) throws {
        // The descriptor becomes `fd` only once the lock is held: a throwing initializer of a class whose
        // properties are all set runs `deinit`, which would close the descriptor a second time — by then
        // perhaps another file's or socket's (a server's listening socket died of EBADF that way).
        let path = directory + "/writer.lock"
        var descriptor: Int32 = -1
        while true {
            descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw StoreError.system("cannot open \(path)", call: "open", path: path) }
            if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                let refusal = errno  // before `readHolder`'s own calls can change it
                let holder = Self.readHolder(descriptor)
                guard wait, refusal == EWOULDBLOCK || refusal == EAGAIN else {
                    close(descriptor)
                    throw StoreError(
                        code: .writerBusy,
                        message:
                            "store \(directory) is being written by another process\(holder.map { " (pid \($0))" } ?? ""); "
                            + "one writer per store: wait for it to finish (`ingest` and `serve` take --wait to wait "
                            + "for it)", path: directory)
                }
                while flock(descriptor, giveUp == nil ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
                    if let giveUp, errno == EWOULDBLOCK || errno == EAGAIN {
                        if giveUp() {
                            close(descriptor)
                            throw StoreError(
                                code: .writerBusy,
                                message: "stopped waiting for store \(directory)'s writer lock, which another process "
                                    + "holds\(holder.map { " (pid \($0))" } ?? ""); nothing was opened", path: directory)
                        }
                        usleep(50_000)
                    } else if errno != EINTR {
                        close(descriptor)
                        throw StoreError.system("cannot lock \(path)", call: "flock", path: path)
                    }
                }
            }
            // The lock counts only if its file is still the one at `path`: `teamlog compact` replaces the
            // store's directory (and so this file) while holding the old one's lock, which a writer that
            // waited on it then gets on a file of the replaced store. It tries again on the new file.
            if Self.isCurrent(descriptor, path: path) { break }
            close(descriptor)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        fd = descriptor
    }

    /// Whether `fd` is the file now at `path` (not removed or replaced since it was opened).
    private static func isCurrent(_ fd: Int32, path: String) -> Bool {
        var held = stat()
        var named = stat()
        guard fstat(fd, &held) == 0, stat(path, &named) == 0 else { return false }
        return held.st_nlink > 0 && held.st_ino == named.st_ino && held.st_dev == named.st_dev
    }

    private static func readHolder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[..<n], as: UTF8.self).trimmingWhitespace
        return text.isEmpty ? nil : text
    }

    /// The pid of the process holding the lock of the store in `directory`, if one is running. Where the
    /// kernel lists its locks (`/proc/locks`, Linux) the answer is the holder of the `flock` on the file, seen
    /// without touching it; elsewhere the pid a holder writes into the file (and empties on release), when a
    /// process with that pid lives — which a killed holder's pid, reused by another process, also passes
    /// (a trial saw `status` name an unrelated process as the writer).
    static func holder(directory: String) -> Int32? {
        let fd = open(directory + "/writer.lock", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let written = readHolder(fd).flatMap { Int32($0) }.flatMap { $0 > 0 ? $0 : nil }
        var st = stat()
        if fstat(fd, &st) == 0, let locks = readWholeFile("/proc/locks") {
            return flockHolder(of: st, written: written, in: locks)
        }
        guard let pid = written else { return nil }
        return kill(pid, 0) == 0 || errno == EPERM ? pid : nil
    }

    /// The pid holding an exclusive `flock` on the file `st` describes, from `/proc/locks` lines such as
    /// `1: FLOCK  ADVISORY  WRITE 5490 fe:00:16269514 0 EOF` (device major:minor in hex, inode in decimal).
    /// A lock on the same inode number whose device does not read as the file's (a file system whose
    /// `stat` and lock table name devices differently) counts when its pid is the one the holder wrote.
    static func flockHolder(of st: stat, written: Int32?, in locks: String) -> Int32? {
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff))
        let minor = (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff))
        for line in locks.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            // "N:" "FLOCK" "ADVISORY" "WRITE" pid "maj:min:inode" start end; a waiter's line has "->" after "N:".
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE", let pid = Int32(fields[4]) else {
                continue
            }
            let place = fields[5].split(separator: ":")
            guard place.count == 3, let inode = UInt64(place[2]), inode == UInt64(st.st_ino) else { continue }
            let sameDevice = UInt64(place[0], radix: 16) == major && UInt64(place[1], radix: 16) == minor
            if sameDevice || pid == written { return pid }
        }
        return nil
    }

    /// A small file's bytes as text (for `/proc` files, whose size `stat` reports as 0).
    private static func readWholeFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Releases the lock (idempotent).
    func release() {
        guard fd >= 0 else { return }
        _ = ftruncate(fd, 0)  // no pid: nobody writes now
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}

extension String {
    /// The text without whitespace (spaces, tabs, newlines) at either end: a line read from a file.
    public var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
