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

    /// The pid of the process holding the lock of the store in `directory`, if one is running (read from
    /// the lock file, which a holder writes its pid into and empties on release; a pid left by a killed
    /// holder is reported only while a process with that pid lives).
    static func holder(directory: String) -> Int32? {
        let fd = open(directory + "/writer.lock", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let text = readHolder(fd), let pid = Int32(text), pid > 0 else { return nil }
        return kill(pid, 0) == 0 || errno == EPERM ? pid : nil
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
    var trimmingWhitespace: String {
        String(self.drop { $0 == " " || $0 == "\n" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
    }
}
